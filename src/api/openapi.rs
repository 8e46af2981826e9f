//! OpenAPI v3 documents describing mco's stored kinds (one document per group-version; the
//! index and the other kinds' documents are [`super::openapi_kinds`]'s), as kubectl needs
//! them: `kubectl apply`/`create` look up each kind's PATCH operation to learn that the server
//! validates fields itself (`fieldValidation`), and `kubectl explain` reads the schemas.
//! Schemas follow MCO's CRDs (`vendor/github.com/openshift/api/machineconfiguration/v1`),
//! abridged to what mco serves.

use crate::model::Kind;
use serde_json::{json, Value};

use super::openapi_meta::META;

pub(super) use super::openapi_meta::r;

pub(super) fn s(type_: &str, description: &str) -> Value {
    json!({"type": type_, "description": description})
}

/// The schemas every document carries: apimachinery's `ObjectMeta` and the types it names
/// ([`super::openapi_meta`]), and `LabelSelector`.
pub(super) fn common_schemas() -> serde_json::Map<String, Value> {
    let mut m = super::openapi_meta::schemas();
    m.insert(
        format!("{META}.LabelSelector"),
        json!({"type": "object", "description": "A label selector. In a MachineConfigPool an empty selector selects nothing.",
            "properties": {
                "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Labels that must all match."},
                "matchExpressions": {"type": "array", "description": "Requirements (In, NotIn, Exists, DoesNotExist) that must all hold.",
                    "items": {"type": "object", "required": ["key", "operator"], "properties": {
                        "key": s("string", "The label key."),
                        "operator": s("string", "In, NotIn, Exists or DoesNotExist."),
                        "values": {"type": "array", "items": {"type": "string"}, "description": "Values for In and NotIn."}}}}
            }, "x-kubernetes-map-type": "atomic"}),
    );
    m
}

fn gvk(group: &str, kind: &str) -> Value {
    gvk_v(group, "v1", kind)
}

fn machine_config(group: &str) -> Value {
    json!({"type": "object", "description": "MachineConfig defines the configuration for a machine: Ignition 3.x files, systemd units and the core user's SSH keys, plus kernel arguments and OS settings.",
        "properties": {
            "apiVersion": s("string", "APIVersion defines the versioned schema of this representation of an object."),
            "kind": s("string", "Kind is a string value representing the REST resource this object represents."),
            "metadata": r(&format!("{META}.ObjectMeta")),
            "spec": {"type": "object", "description": "MachineConfigSpec is the spec for MachineConfig",
                "properties": {
                    "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "Config is an Ignition config (spec 3.0.0 to 3.4.0): storage.files, systemd.units, passwd.users (core only)."},
                    "kernelArguments": {"type": "array", "nullable": true, "items": {"type": "string"}, "x-kubernetes-list-type": "atomic", "description": "KernelArguments contains a list of kernel arguments to be added"},
                    "extensions": {"type": "array", "items": {"type": "string"}, "description": "extensions contains a list of additional features that can be enabled on host"},
                    "fips": s("boolean", "fips controls FIPS mode"),
                    "kernelType": s("string", "kernelType contains which kernel we want to be running like default (traditional), realtime, 64k-pages (aarch64 only)."),
                    "osImageURL": s("string", "OSImageURL specifies the remote location that will be used to fetch the OS."),
                    "baseOSExtensionsContainerImage": s("string", "BaseOSExtensionsContainerImage specifies the remote location that will be used to fetch the extensions container matching a new-format OS image")
                }}
        },
        "x-kubernetes-group-version-kind": gvk(group, "MachineConfig")})
}

fn pool_configuration(desc: &str) -> Value {
    json!({"type": "object", "description": desc, "properties": {
        "name": s("string", "name of the rendered MachineConfig"),
        "source": {"type": "array", "description": "source is the list of MachineConfigs that were used to generate the single MachineConfig object specified in `content`.",
            "items": {"type": "object", "properties": {"apiVersion": s("string", ""), "kind": s("string", ""), "name": s("string", "")}}}}})
}

fn machine_config_pool(group: &str) -> Value {
    json!({"type": "object", "description": "MachineConfigPool describes a pool of MachineConfigs.",
        "properties": {
            "apiVersion": s("string", "APIVersion defines the versioned schema of this representation of an object."),
            "kind": s("string", "Kind is a string value representing the REST resource this object represents."),
            "metadata": r(&format!("{META}.ObjectMeta")),
            "spec": {"type": "object", "description": "MachineConfigPoolSpec is the spec for MachineConfigPool resource.",
                "properties": {
                    "machineConfigSelector": r(&format!("{META}.LabelSelector")),
                    "nodeSelector": r(&format!("{META}.LabelSelector")),
                    "paused": s("boolean", "paused specifies whether or not changes to this machine config pool should be stopped. This includes generating new desiredMachineConfig and update of machines."),
                    "maxUnavailable": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}], "description": "maxUnavailable defines either an integer number or percentage of nodes in the pool that can go Unavailable during an update. Defaults to 1."},
                    "configuration": pool_configuration("The targeted MachineConfig object for the machine config pool.")
                }},
            "status": {"type": "object", "description": "MachineConfigPoolStatus is the status for MachineConfigPool resource.",
                "properties": {
                    "observedGeneration": {"type": "integer", "format": "int64", "description": "observedGeneration represents the generation observed by the controller."},
                    "configuration": pool_configuration("configuration represents the current MachineConfig object for the machine config pool."),
                    "machineCount": {"type": "integer", "format": "int32", "description": "machineCount represents the total number of machines in the machine config pool."},
                    "updatedMachineCount": {"type": "integer", "format": "int32", "description": "updatedMachineCount represents the total number of machines targeted by the pool that have the CurrentMachineConfig as their config."},
                    "readyMachineCount": {"type": "integer", "format": "int32", "description": "readyMachineCount represents the total number of ready machines targeted by the pool."},
                    "unavailableMachineCount": {"type": "integer", "format": "int32", "description": "unavailableMachineCount represents the total number of unavailable (non-ready) machines targeted by the pool."},
                    "degradedMachineCount": {"type": "integer", "format": "int32", "description": "degradedMachineCount represents the total number of machines marked degraded (or unreconcilable)."},
                    "conditions": {"type": "array", "description": "conditions represents the latest available observations of current state.",
                        "items": {"type": "object", "properties": {"type": s("string", ""), "status": s("string", ""), "lastTransitionTime": {"type": "string", "format": "date-time"}, "reason": s("string", ""), "message": s("string", "")}}}
                }}
        },
        "x-kubernetes-group-version-kind": gvk(group, "MachineConfigPool")})
}

pub(super) fn node() -> Value {
    json!({"type": "object", "description": "Node is a worker node managed by mco; its MCO state lives in annotations (<group>/desiredConfig, currentConfig, state, reason).",
        "properties": {
            "apiVersion": s("string", "APIVersion defines the versioned schema of this representation of an object."),
            "kind": s("string", "Kind is a string value representing the REST resource this object represents."),
            "metadata": r(&format!("{META}.ObjectMeta")),
            "spec": {"type": "object", "description": "NodeSpec describes the attributes that a node is created with.", "properties": {
                "unschedulable": s("boolean", "Unschedulable controls node schedulability of new pods (cordon)."),
                "providerID": s("string", "ID of the node assigned by the cloud provider."),
                "podCIDR": s("string", "PodCIDR represents the pod IP range assigned to the node."),
                "taints": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}, "description": "If specified, the node's taints."}}},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "Most recently observed status of the node (conditions, nodeInfo.bootID)."}
        },
        "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "Node"}]})
}

fn param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": "string", "uniqueItems": true}})
}

fn write_params() -> Vec<Value> {
    vec![
        param("dryRun", "Not supported yet by mco."),
        param(
            "fieldManager",
            "fieldManager is a name associated with the actor or entity that is making these changes.",
        ),
        param(
            "fieldValidation",
            "Strict, Warn (default) or Ignore: how to treat fields the schema does not know.",
        ),
    ]
}

/// Path items of one resource: collection, object and (optionally) status.
pub(super) fn paths(
    prefix: &str,
    plural: &str,
    schema: &str,
    group: &str,
    version: &str,
    kind: &str,
    status: bool,
) -> serde_json::Map<String, Value> {
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let body = json!({"content": {"application/json": {"schema": r(schema)}}});
    let ok = json!({"200": {"description": "OK", "content": {"application/json": {"schema": r(schema)}}}});
    let op = |action: &str, extra: Vec<Value>| {
        json!({"operationId": format!("{action}{kind}"), "parameters": extra, "responses": ok,
            "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk})
    };
    let mut patch_params = write_params();
    patch_params.push(param(
        "force",
        "Force is going to \"force\" Apply requests: re-acquire conflicting fields owned by other managers.",
    ));
    let mut patch = op("patch", patch_params);
    patch["requestBody"] = json!({"content": {
        "application/json-patch+json": {"schema": {"type": "object"}},
        "application/merge-patch+json": {"schema": {"type": "object"}},
        "application/apply-patch+yaml": {"schema": {"type": "object"}}}});
    if kind == "Node" {
        patch["requestBody"]["content"]["application/strategic-merge-patch+json"] =
            json!({"schema": {"type": "object"}});
    }
    let mut put = op("put", write_params());
    put["requestBody"] = body.clone();
    let mut post = op("post", write_params());
    post["requestBody"] = body;
    let mut m = serde_json::Map::new();
    m.insert(
        format!("{prefix}/{plural}"),
        json!({"get": op("list", vec![]), "post": post}),
    );
    let named = json!({"get": op("get", vec![]), "put": put, "patch": patch, "delete": op("delete", vec![]),
        "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string", "uniqueItems": true}}]});
    m.insert(format!("{prefix}/{plural}/{{name}}"), named.clone());
    if status {
        let mut st = named;
        st.as_object_mut().expect("object").remove("delete");
        m.insert(format!("{prefix}/{plural}/{{name}}/status"), st);
    }
    m
}

/// Path items of a namespaced resource: the collection and its objects under
/// `namespaces/{namespace}/`, and the list across every namespace.
fn namespaced_paths(prefix: &str, k: Kind, schema: &str, group: &str, version: &str) -> serde_json::Map<String, Value> {
    let ns = json!({"name": "namespace", "in": "path", "required": true, "description": "object name and auth scope, such as for teams and projects",
        "schema": {"type": "string", "uniqueItems": true}});
    let mut m = paths(
        &format!("{prefix}/namespaces/{{namespace}}"),
        k.plural(),
        schema,
        group,
        version,
        k.as_str(),
        k.has_status(),
    );
    for item in m.values_mut() {
        let params = item
            .as_object_mut()
            .expect("a path item is an object")
            .entry("parameters")
            .or_insert_with(|| json!([]));
        if let Some(a) = params.as_array_mut() {
            a.insert(0, ns.clone());
        }
    }
    let gvk = json!({"group": group, "version": version, "kind": k.as_str()});
    let ok = json!({"200": {"description": "OK", "content": {"application/json": {"schema": r(schema)}}}});
    m.insert(
        format!("{prefix}/{}", k.plural()),
        json!({"get": {"operationId": format!("list{}ForAllNamespaces", k.as_str()), "responses": ok,
            "x-kubernetes-action": "list", "x-kubernetes-group-version-kind": gvk}}),
    );
    m
}

/// `spec.nodeDisruptionPolicy` / `clusterPolicies` (mco-facts 6.1).
fn policy_config(status: bool) -> Value {
    let types: &[&str] = if status {
        &[
            "Reboot",
            "Drain",
            "Reload",
            "Restart",
            "DaemonReload",
            "None",
            "Special",
        ]
    } else {
        &["Reboot", "Drain", "Reload", "Restart", "DaemonReload", "None"]
    };
    let service = json!({"type": "object", "required": ["serviceName"], "properties": {"serviceName": {"type": "string", "maxLength": 255}}});
    let actions = json!({"type": "array", "maxItems": 10, "x-kubernetes-list-type": "atomic", "items": {"type": "object", "required": ["type"],
        "properties": {"type": {"type": "string", "enum": types}, "reload": service, "restart": service}}});
    let max = if status { 100 } else { 50 };
    json!({"type": "object", "properties": {
        "files": {"type": "array", "maxItems": max, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["path"],
            "items": {"type": "object", "required": ["path", "actions"], "properties": {"path": s("string", "path is the location of a file being managed through a MachineConfig."), "actions": actions}}},
        "units": {"type": "array", "maxItems": max, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "required": ["name", "actions"], "properties": {"name": s("string", "name represents the service name of a systemd service managed through a MachineConfig"), "actions": actions}}},
        "sshkey": {"type": "object", "properties": {"actions": actions}}}})
}

fn machine_configuration() -> Value {
    json!({"type": "object", "description": "MachineConfiguration provides information to configure an operator to manage Machine Configuration (name cluster only); mco reads its node disruption policy.",
        "properties": {
            "apiVersion": s("string", "APIVersion defines the versioned schema of this representation of an object."),
            "kind": s("string", "Kind is a string value representing the REST resource this object represents."),
            "metadata": r(&format!("{META}.ObjectMeta")),
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"nodeDisruptionPolicy": policy_config(false)}},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
                "observedGeneration": {"type": "integer", "format": "int64"},
                "nodeDisruptionPolicyStatus": {"type": "object", "properties": {"clusterPolicies": policy_config(true)}}}}
        },
        "x-kubernetes-group-version-kind": gvk_v(crate::disruption::GROUP, "v1", "MachineConfiguration")})
}

pub(super) fn gvk_v(group: &str, version: &str, kind: &str) -> Value {
    json!([{"group": group, "version": version, "kind": kind}])
}

fn object(description: &str, group: &str, version: &str, kind: &str, spec: Value, status: Option<Value>) -> Value {
    let mut props = json!({
        "apiVersion": s("string", "APIVersion defines the versioned schema of this representation of an object."),
        "kind": s("string", "Kind is a string value representing the REST resource this object represents."),
        "metadata": r(&format!("{META}.ObjectMeta")),
        "spec": spec,
    });
    if let Some(st) = status {
        props["status"] = st;
    }
    json!({"type": "object", "description": description, "properties": props,
        "x-kubernetes-group-version-kind": gvk_v(group, version, kind)})
}

fn controller_status(what: &str) -> Value {
    json!({"type": "object", "description": format!("{what}Status defines the observed state of a {what}"), "properties": {
        "observedGeneration": {"type": "integer", "format": "int64", "description": "observedGeneration represents the generation observed by the controller."},
        "conditions": {"type": "array", "description": "conditions represents the latest available observations of current state (KubeletConfig: Accepted, then the legacy Success or Failure; ContainerRuntimeConfig: Success or Failure; the error names the field).",
            "items": {"type": "object", "properties": {"type": s("string", "Accepted, Success or Failure"), "status": s("string", ""), "lastTransitionTime": {"type": "string", "format": "date-time"}, "reason": s("string", ""), "message": s("string", "")}}}}})
}

fn pool_selector() -> Value {
    let mut sel = r(&format!("{META}.LabelSelector"));
    sel["description"] = json!(
        "machineConfigPoolSelector selects which pools the config shall apply to (matched against the pools' labels)."
    );
    sel
}

fn mirrors(list: &str, policy: bool) -> Value {
    let mut item = json!({"type": "object", "required": ["source"], "properties": {
        "source": s("string", "source matches the repository that users refer to, e.g. in image pull specifications: host[:port][/namespace...] or *.host."),
        "mirrors": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set", "description": "mirrors is zero or more locations that may also contain the same images, in order of preference."}}});
    if policy {
        item["properties"]["mirrorSourcePolicy"] = json!({"type": "string", "enum": ["NeverContactSource", "AllowContactingSource"],
            "description": "mirrorSourcePolicy defines the fallback policy if fails to pull image from the mirrors."});
    }
    json!({"type": "object", "properties": {list: {"type": "array", "items": item, "x-kubernetes-list-type": "atomic",
        "description": format!("{list} allows images referenced by image digests or tags in pods to be pulled from alternative mirrored repository locations.")}}})
}

/// The schema of one kind (abridged from MCO's and openshift/api's CRDs).
fn schema(kind: Kind, group: &str) -> Value {
    let v = kind.info().version;
    match kind {
        Kind::MachineConfig => machine_config(group),
        Kind::MachineConfigPool => machine_config_pool(group),
        Kind::Node => node(),
        Kind::KubeletConfig => object("KubeletConfig describes a customized Kubelet configuration.", group, v, "KubeletConfig",
            json!({"type": "object", "description": "KubeletConfigSpec defines the desired state of KubeletConfig", "properties": {
                "machineConfigPoolSelector": pool_selector(),
                "kubeletConfig": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "kubeletConfig fields are defined in kubernetes upstream (KubeletConfiguration v1beta1). Please refer to the types defined in the version/commit used by OpenShift of the upstream kubernetes. It's important to note that, since the fields of the kubelet configuration are directly fetched from upstream the validation of those values is handled directly by the kubelet."},
                "logLevel": {"type": "integer", "format": "int32", "description": "logLevel sets the kubelet verbosity (1..10)."},
                "autoSizingReserved": s("boolean", "autoSizingReserved lets the node compute its system-reserved resources."),
                "tlsSecurityProfile": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "tlsSecurityProfile: type Old, Intermediate, Modern or Custom (custom.ciphers, custom.minTLSVersion)."}}}),
            Some(controller_status("KubeletConfig"))),
        Kind::ContainerRuntimeConfig => object("ContainerRuntimeConfig describes a customized Container Runtime configuration.", group, v, "ContainerRuntimeConfig",
            json!({"type": "object", "required": ["containerRuntimeConfig"], "properties": {
                "machineConfigPoolSelector": pool_selector(),
                "containerRuntimeConfig": {"type": "object", "description": "ContainerRuntimeConfiguration defines the tuneables of the container runtime.", "properties": {
                    "pidsLimit": {"type": "integer", "format": "int64", "description": "pidsLimit specifies the maximum number of processes allowed in a container (0 or at least 20)."},
                    "logLevel": s("string", "logLevel specifies the verbosity of the logs: error, fatal, panic, warn, info, debug or trace."),
                    "logSizeMax": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}], "description": "logSizeMax specifies the Maximum size allowed for the container log file (above 8 KiB)."},
                    "overlaySize": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}], "description": "overlaySize specifies the maximum size of a container image."},
                    "defaultRuntime": s("string", "defaultRuntime is the name of the OCI runtime to be used as the default: runc or crun."),
                    "additionalLayerStores": {"type": "array", "items": {"type": "object", "properties": {"path": s("string", "")}}, "description": "Read-only layer stores."},
                    "additionalImageStores": {"type": "array", "items": {"type": "object", "properties": {"path": s("string", "")}}, "description": "Read-only image stores."},
                    "additionalArtifactStores": {"type": "array", "items": {"type": "object", "properties": {"path": s("string", "")}}, "description": "Read-only artifact stores."}}}}}),
            Some(controller_status("ContainerRuntimeConfig"))),
        Kind::ImageDigestMirrorSet => object("ImageDigestMirrorSet holds cluster-wide information about how to handle registry mirror rules on using digest pull specification.", group, v, "ImageDigestMirrorSet",
            mirrors("imageDigestMirrors", true), Some(json!({"type": "object"}))),
        Kind::ImageTagMirrorSet => object("ImageTagMirrorSet holds cluster-wide information about how to handle registry mirror rules on using tag pull specification.", group, v, "ImageTagMirrorSet",
            mirrors("imageTagMirrors", true), Some(json!({"type": "object"}))),
        Kind::ImageContentSourcePolicy => object("ImageContentSourcePolicy holds cluster-wide information about how to handle registry mirror rules (superseded by ImageDigestMirrorSet).", group, v, "ImageContentSourcePolicy",
            mirrors("repositoryDigestMirrors", false), None),
        Kind::Image => object("Image governs policies related to imagestream imports and runtime configuration for external registries. The canonical name is `cluster`.", group, v, "Image",
            json!({"type": "object", "properties": {"registrySources": {"type": "object", "properties": {
                "insecureRegistries": {"type": "array", "items": {"type": "string"}, "description": "Registries which do not have a valid TLS certificate or only support HTTP."},
                "blockedRegistries": {"type": "array", "items": {"type": "string"}, "description": "Registries for which image pull and push actions are denied (exclusive with allowedRegistries)."},
                "allowedRegistries": {"type": "array", "items": {"type": "string"}, "description": "The only registries permitted for image pull and push actions."},
                "containerRuntimeSearchRegistries": {"type": "array", "items": {"type": "string"}, "description": "Registries searched for images without a registry host."}}},
                "allowedRegistriesForImport": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "externalRegistryHostnames": {"type": "array", "items": {"type": "string"}},
                "additionalTrustedCA": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}),
            Some(json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}))),
        Kind::MachineConfiguration => machine_configuration(),
        Kind::Lease => lease(),
        Kind::MachineConfigNode => machine_config_node(group),
        Kind::RolloutPolicy => rollout_policy(),
        Kind::DriftPolicy => drift_policy(),
    }
}

/// `policy.mco.dev/v1` DriftPolicy ([`crate::model::DriftPolicy`], rules in [`crate::drift`]).
fn drift_policy() -> Value {
    let mut selector = r(&format!("{META}.LabelSelector"));
    selector["description"] = json!("poolSelector selects the MachineConfigPools the policy governs, by their labels; an empty selector matches none. The rules of every policy selecting a pool count, policies in name order.");
    let actions: Vec<&str> = crate::drift::Action::ALL.iter().map(|a| a.as_str()).collect();
    object("DriftPolicy chooses what a node does when a managed file or unit drifts from its rendered config, per path glob: Degrade (MCO's behaviour, also when no rule matches), Revert (rewrite it from the rendered config) or Report (record it; the node stays Done).",
        crate::model::POLICY_GROUP, "v1", "DriftPolicy",
        json!({"type": "object", "required": ["rules"], "properties": {
            "poolSelector": selector,
            "rules": {"type": "array", "description": "The rules; the first with a glob matching a drifted path decides its action.",
                "items": {"type": "object", "required": ["paths", "action"], "properties": {
                    "paths": {"type": "array", "items": {"type": "string"}, "description": "Absolute node path globs: * and ? within a segment, ** any number of segments, [a-z] and [!a] classes."},
                    "action": {"type": "string", "enum": actions, "description": "Degrade, Revert or Report."}}}}}}),
        None)
}

/// MachineConfigNode: the `openAPIV3Schema` of MCO's CRD (openshift/api release-4.20,
/// `config/crds/machineconfignode.schema.json`; the PinnedImageSet status mco does not serve
/// left out), `metadata` as ObjectMeta so `kubectl explain` follows it.
fn machine_config_node(group: &str) -> Value {
    let mut v: Value = serde_json::from_str(include_str!("../../config/crds/machineconfignode.schema.json"))
        .expect("the vendored CRD schema is JSON");
    v["properties"]["metadata"] = r(&format!("{META}.ObjectMeta"));
    v["x-kubernetes-group-version-kind"] = gvk_v(group, "v1", "MachineConfigNode");
    v
}

/// `policy.mco.dev/v1` RolloutPolicy ([`crate::model::RolloutPolicy`]).
fn rollout_policy() -> Value {
    let duration = |d: &str| s("string", &format!("{d} A Go duration: 90s, 30m, 4h, 1h30m."));
    let int_or_string = |d: &str| json!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}], "description": d});
    let mut selector = r(&format!("{META}.LabelSelector"));
    selector["description"] = json!("poolSelector selects the MachineConfigPools the policy governs, by their labels; an empty selector matches none. A pool several policies select is governed by the first by name.");
    object("RolloutPolicy governs how mco rolls configuration out to the pools it selects: maintenance windows, a canary wave with a bake time, and self-healing of nodes stuck on an abandoned render.",
        crate::model::POLICY_GROUP, "v1", "RolloutPolicy",
        json!({"type": "object", "properties": {
            "poolSelector": selector,
            "maintenanceWindows": {"type": "array", "description": "When nodes may be newly targeted; none: at any time. Outside every window no node is newly targeted, nodes already updating finish.",
                "items": {"type": "object", "required": ["schedule", "duration"], "properties": {
                    "schedule": s("string", "A 5-field cron schedule (minute hour day-of-month month day-of-week), read in timeZone: each time it names, a window opens."),
                    "duration": duration("How long each window stays open (elapsed time)."),
                    "timeZone": s("string", "An IANA time zone name (Europe/Berlin); absent: UTC.")}}},
            "canary": {"type": "object", "description": "The first wave: it updates first; the rest waits until every canary is Done, Ready and not Degraded for bakeTime. A canary that degrades, drifts or goes NotReady pauses the pool.", "properties": {
                "size": int_or_string("A count, or a percentage of the pool's nodes rounded up (10% of 3 nodes is 1); default 1."),
                "bakeTime": duration("How long the canaries must stay healthy.")}},
            "selfHealing": {"type": "object", "description": "Returns a node Degraded on a render that is no longer its pool's target to the pool's target, through the normal rollout.", "properties": {
                "enabled": s("boolean", "Off unless true."),
                "maxHealsPerNode": {"type": "integer", "format": "int32", "description": "At most this many heals of one node per period (default 3)."},
                "period": duration("The cap's period (default 1h).")}}}}),
        Some(json!({"type": "object", "description": "The policy's record of its decisions.", "x-kubernetes-preserve-unknown-fields": true, "properties": {
            "observedGeneration": {"type": "integer", "format": "int64"},
            "pools": {"type": "array", "items": {"type": "object", "properties": {
                "pool": s("string", ""), "target": s("string", "The rendered config the record is about."),
                "phase": s("string", "Canary, Baking, Proceeding, CanaryFailed or Done."),
                "canaries": {"type": "array", "items": {"type": "string"}},
                "canariesHealthySince": {"type": "string", "format": "date-time"},
                "paused": s("string", "The target the policy paused the pool for."),
                "nextWindow": s("string", "The next window's start, when outside one.")}}},
            "heals": {"type": "array", "items": {"type": "object", "properties": {"node": s("string", ""), "times": {"type": "array", "items": {"type": "string", "format": "date-time"}}}}},
            "conditions": {"type": "array", "items": {"type": "object", "properties": {"type": s("string", "Ready"), "status": s("string", ""), "lastTransitionTime": {"type": "string", "format": "date-time"}, "reason": s("string", ""), "message": s("string", "")}}}}})))
}

/// `coordination.k8s.io/v1` Lease (`k8s.io/api/coordination/v1`).
fn lease() -> Value {
    let micro = |d: &str| json!({"type": "string", "format": "date-time", "description": format!("{d} (MicroTime: RFC 3339 with microseconds).")});
    json!({"type": "object", "description": "Lease defines a lease concept.",
        "properties": {
            "apiVersion": s("string", "APIVersion defines the versioned schema of this representation of an object."),
            "kind": s("string", "Kind is a string value representing the REST resource this object represents."),
            "metadata": r(&format!("{META}.ObjectMeta")),
            "spec": {"type": "object", "description": "LeaseSpec is a specification of a Lease.", "properties": {
                "holderIdentity": s("string", "holderIdentity contains the identity of the holder of a current lease (a node lease: the node's name)."),
                "leaseDurationSeconds": {"type": "integer", "format": "int32", "description": "leaseDurationSeconds is a duration that candidates for a lease need to wait to force acquire it. This is measured against the time of last observed renewTime."},
                "acquireTime": micro("acquireTime is a time when the current lease was acquired"),
                "renewTime": micro("renewTime is a time when the current holder of a lease has last updated the lease"),
                "leaseTransitions": {"type": "integer", "format": "int32", "description": "leaseTransitions is the number of transitions of a lease between holders."},
                "strategy": s("string", "Strategy indicates the strategy for picking the leader for coordinated leader election (OldestEmulationVersion)."),
                "preferredHolder": s("string", "PreferredHolder signals to a lease holder that the lease has a more optimal holder and should be given up; only with a strategy.")}}
        },
        "x-kubernetes-group-version-kind": gvk_v(crate::model::COORDINATION_GROUP, "v1", "Lease")})
}

/// The document of `apis/<group>/<version>`, `None` when nothing is served there.
pub fn group_document(group: &str, version: &str, configured: &str) -> Option<Value> {
    let kinds = super::discovery::kinds_of(group, version, configured);
    if kinds.is_empty() {
        return None;
    }
    let mut schemas = common_schemas();
    let prefix = format!("/apis/{group}/{version}");
    let mut p = serde_json::Map::new();
    for k in kinds {
        let name = format!("{}.{version}.{}", reverse(group), k.as_str());
        schemas.insert(name.clone(), schema(k, group));
        if k.is_namespaced() {
            p.extend(namespaced_paths(&prefix, k, &name, group, version));
            continue;
        }
        p.extend(paths(
            &prefix,
            k.plural(),
            &name,
            group,
            version,
            k.as_str(),
            k.has_status(),
        ));
    }
    Some(document(p, schemas))
}

pub(super) fn document(paths: serde_json::Map<String, Value>, schemas: serde_json::Map<String, Value>) -> Value {
    json!({"openapi": "3.0.0", "info": {"title": "mco", "version": env!("CARGO_PKG_VERSION")},
        "paths": paths, "components": {"schemas": schemas}})
}

/// `io.openshift.machineconfiguration` from `machineconfiguration.openshift.io`.
fn reverse(group: &str) -> String {
    group.split('.').rev().collect::<Vec<_>>().join(".")
}
