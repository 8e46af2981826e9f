//! The `meta/v1` schemas of apimachinery that every kind's OpenAPI document refers to:
//! `ObjectMeta` and the types it names (`OwnerReference`, `ManagedFieldsEntry`, `Time`,
//! `FieldsV1`), as kube-apiserver serves them in `/openapi/v3`
//! (`io.k8s.apimachinery.pkg.apis.meta.v1.*`, from `k8s.io/apimachinery/pkg/apis/meta/v1/types.go`
//! through kube-openapi): every field with its type, format and list semantics
//! (`x-kubernetes-list-type`, patch strategy and merge key), a field of another schema as
//! kube-openapi writes it (`allOf` of one `$ref`, so the field keeps its own description), and
//! Kubernetes' descriptions as k8s-openapi (feature `v1_33`) carries them, with a sentence added
//! where mco behaves otherwise. `/openapi/v2` converts them ([`super::openapi_v2`]).

use serde_json::{json, Map, Value};

/// The prefix of apimachinery's `meta/v1` schema names.
pub(super) const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1";

/// A reference to the schema `name` of the same document (`#/components/schemas/<name>`).
pub(super) fn r(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// A field whose schema is `name` (in [`META`]), with its own description: kube-openapi's
/// `{"allOf": [{"$ref": ...}], "description": ...}`.
fn field_of(name: &str, description: &str) -> Value {
    json!({"allOf": [r(&format!("{META}.{name}"))], "description": description})
}

/// The item schema of a list of `name` (in [`META`]) objects, as kube-openapi writes it.
fn item_of(name: &str) -> Value {
    json!({"allOf": [r(&format!("{META}.{name}"))]})
}

/// `ObjectMeta`, `OwnerReference`, `ManagedFieldsEntry`, `Time` and `FieldsV1` by their
/// schema names.
pub(super) fn schemas() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(format!("{META}.ObjectMeta"), object_meta());
    m.insert(format!("{META}.OwnerReference"), owner_reference());
    m.insert(format!("{META}.ManagedFieldsEntry"), managed_fields_entry());
    m.insert(
        format!("{META}.Time"),
        json!({"type": "string", "format": "date-time", "description": "Time is a wrapper around time.Time which supports correct marshaling to YAML and JSON.  Wrappers are provided for many of the factory methods that the time package offers."}),
    );
    m.insert(
        format!("{META}.FieldsV1"),
        json!({"type": "object", "description": "FieldsV1 stores a set of fields in a data structure like a Trie, in JSON format.\n\nEach key is either a '.' representing the field itself, and will always map to an empty set, or a string representing a sub-field or item. The string will follow one of these four formats: 'f:<name>', where <name> is the name of a field in a struct, or key in a map 'v:<value>', where <value> is the exact json formatted value of a list item 'i:<index>', where <index> is position of a item in a list 'k:<keys>', where <keys> is a map of  a list item's key fields to their unique values If a key maps to an empty Fields value, the field that key represents is part of the set.\n\nThe exact format is defined in sigs.k8s.io/structured-merge-diff"}),
    );
    m
}

/// `io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta`: all fifteen fields.
fn object_meta() -> Value {
    json!({"type": "object", "description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
    "properties": {
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Annotations is an unstructured key value map stored with a resource that may be set by external tools to store and retrieve arbitrary metadata. They are not queryable and should be preserved when modifying objects. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/annotations"},
        "creationTimestamp": field_of("Time", "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"),
        "deletionGracePeriodSeconds": {"type": "integer", "format": "int64", "description": "Number of seconds allowed for this object to gracefully terminate before it will be removed from the system. Only set when deletionTimestamp is also set. May only be shortened. Read-only. mco deletes an object at once and never sets it."},
        "deletionTimestamp": field_of("Time", "DeletionTimestamp is RFC 3339 date and time at which this resource will be deleted. This field is set by the server when a graceful deletion is requested by the user, and is not directly settable by a client. The resource is expected to be deleted (no longer visible from resource lists, and not reachable by name) after the time in this field, once the finalizers list is empty. As long as the finalizers list contains items, deletion is blocked. Once the deletionTimestamp is set, this value may not be unset or be set further into the future, although it may be shortened or the resource may be deleted prior to this time. For example, a user may request that a pod is deleted in 30 seconds. The Kubelet will react by sending a graceful termination signal to the containers in the pod. After that 30 seconds, the Kubelet will send a hard termination signal (SIGKILL) to the container and after cleanup, remove the pod from the API. In the presence of network partitions, this object may still exist after this timestamp, until an administrator or automated process can determine the resource is fully terminated. If not set, graceful deletion of the object has not been requested.\n\nPopulated by the system when a graceful deletion is requested. Read-only. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata mco deletes an object at once and never sets it."),
        "finalizers": {"type": "array", "items": {"type": "string"}, "description": "Must be empty before the object is deleted from the registry. Each entry is an identifier for the responsible component that will remove the entry from the list. If the deletionTimestamp of the object is non-nil, entries in this list can only be removed. Finalizers may be processed and removed in any order.  Order is NOT enforced because it introduces significant risk of stuck finalizers. finalizers is a shared field, any actor with permission can reorder it. If the finalizer list is processed in order, then this can lead to a situation in which the component responsible for the first finalizer in the list is waiting for a signal (field value, external system, or other) produced by a component responsible for a finalizer later in the list, resulting in a deadlock. Without enforced ordering finalizers are free to order amongst themselves and are not vulnerable to ordering changes in the list. mco keeps them (each a qualified name) but deletes an object at once: no finalizer delays a deletion.",
            "x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge"},
        "generateName": {"type": "string", "description": "GenerateName is an optional prefix, used by the server, to generate a unique name ONLY IF the Name field has not been provided. If this field is used, the name returned to the client will be different than the name passed. This value will also be combined with a unique suffix. The provided value has the same validation rules as the Name field, and may be truncated by the length of the suffix required to make the value unique on the server.\n\nIf this field is specified and the generated name exists, the server will return a 409.\n\nApplied only if Name is not specified. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#idempotency"},
        "generation": {"type": "integer", "format": "int64", "description": "A sequence number representing a specific generation of the desired state. Populated by the system. Read-only."},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Map of string keys and values that can be used to organize and categorize (scope and select) objects. May match selectors of replication controllers and services. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels"},
        "managedFields": {"type": "array", "items": item_of("ManagedFieldsEntry"), "description": "ManagedFields maps workflow-id and version to the set of fields that are managed by that workflow. This is mostly for internal housekeeping, and users typically shouldn't need to set or understand this field. A workflow can be the user's name, a controller's name, or the name of a specific apply path like \"ci-cd\". The set of fields is always in the version that the workflow used when modifying the object.",
            "x-kubernetes-list-type": "atomic"},
        "name": {"type": "string", "description": "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"},
        "namespace": {"type": "string", "description": "Namespace defines the space within which each name must be unique. An empty namespace is equivalent to the \"default\" namespace, but \"default\" is the canonical representation. Not all objects are required to be scoped to a namespace - the value of this field for those objects will be empty.\n\nMust be a DNS_LABEL. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces In mco only Leases are namespaced; every other kind is cluster-scoped."},
        "ownerReferences": {"type": "array", "items": item_of("OwnerReference"), "description": "List of objects depended by this object. If ALL objects in the list have been deleted, this object will be garbage collected. If this object is managed by a controller, then an entry in this list will point to this controller, with the controller field set to true. There cannot be more than one managing controller.",
            "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["uid"],
            "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "uid"},
        "resourceVersion": {"type": "string", "description": "An opaque value that represents the internal version of this object that can be used by clients to determine when objects have changed. May be used for optimistic concurrency, change detection, and the watch operation on a resource or set of resources. Clients must treat these values as opaque and passed unmodified back to the server. They may only be valid for a particular resource or set of resources.\n\nPopulated by the system. Read-only. Value must be treated as opaque by clients and . More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#concurrency-control-and-consistency In mco: the sequence number, in the event log, of the object's last change."},
        "selfLink": {"type": "string", "description": "Deprecated: selfLink is a legacy read-only field that is no longer populated by the system."},
        "uid": {"type": "string", "description": "UID is the unique in time and space value for this object. It is typically generated by the server on successful creation of a resource and is not allowed to change on PUT operations.\n\nPopulated by the system. Read-only. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#uids In mco: a UUIDv7."}
    }})
}

/// `io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference` (atomic: replaced whole).
fn owner_reference() -> Value {
    json!({"type": "object", "description": "OwnerReference contains enough information to let you identify an owning object. An owning object must be in the same namespace as the dependent, or be cluster-scoped, so there is no namespace field.",
        "required": ["apiVersion", "kind", "name", "uid"],
        "properties": {
            "apiVersion": {"type": "string", "description": "API version of the referent."},
            "blockOwnerDeletion": {"type": "boolean", "description": "If true, AND if the owner has the \"foregroundDeletion\" finalizer, then the owner cannot be deleted from the key-value store until this reference is removed. See https://kubernetes.io/docs/concepts/architecture/garbage-collection/#foreground-deletion for how the garbage collector interacts with this field and enforces the foreground deletion. Defaults to false. To set this field, a user needs \"delete\" permission of the owner, otherwise 422 (Unprocessable Entity) will be returned."},
            "controller": {"type": "boolean", "description": "If true, this reference points to the managing controller."},
            "kind": {"type": "string", "description": "Kind of the referent. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"},
            "name": {"type": "string", "description": "Name of the referent. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"},
            "uid": {"type": "string", "description": "UID of the referent. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#uids"}
        },
        "x-kubernetes-map-type": "atomic"})
}

/// `io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry`.
fn managed_fields_entry() -> Value {
    json!({"type": "object", "description": "ManagedFieldsEntry is a workflow-id, a FieldSet and the group version of the resource that the fieldset applies to.",
    "properties": {
        "apiVersion": {"type": "string", "description": "APIVersion defines the version of this resource that this field set applies to. The format is \"group/version\" just like the top-level APIVersion field. It is necessary to track the version of a field set because it cannot be automatically converted."},
        "fieldsType": {"type": "string", "description": "FieldsType is the discriminator for the different fields format and version. There is currently only one possible value: \"FieldsV1\""},
        "fieldsV1": field_of("FieldsV1", "FieldsV1 holds the first JSON version format as described in the \"FieldsV1\" type."),
        "manager": {"type": "string", "description": "Manager is an identifier of the workflow managing these fields."},
        "operation": {"type": "string", "description": "Operation is the type of operation which lead to this ManagedFieldsEntry being created. The only valid values for this field are 'Apply' and 'Update'."},
        "subresource": {"type": "string", "description": "Subresource is the name of the subresource used to update that object, or empty string if the object was updated through the main resource. The value of this field is used to distinguish between managers, even if they share the same name. For example, a status update will be distinct from a regular update using the same manager name. Note that the APIVersion field is not related to the Subresource field and it always corresponds to the version of the main resource."},
        "time": field_of("Time", "Time is the timestamp of when the ManagedFields entry was added. The timestamp will also be updated if a field is added, the manager changes any of the owned fields value or removes a field. The timestamp does not update when a field is removed from the entry because another manager took it over.")
    }})
}
