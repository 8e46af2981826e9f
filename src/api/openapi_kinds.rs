//! OpenAPI v3 of every served group-version: the `/openapi/v3` index, the core `v1` document
//! (Nodes from [`super::openapi`], Events and Pods), and the documents of the group-versions
//! whose kinds are not stored objects of [`crate::model::Kind`] (`history.mco.dev/v1` Events,
//! `auth.mco.dev/v1` Tokens, the `authentication.k8s.io/v1` / `authorization.k8s.io/v1`
//! reviews), so `kubectl explain` finds every kind discovery lists.
//! Schemas abridged from `k8s.io/api` (core, authentication, authorization) and from the objects
//! mco answers with ([`crate::history`], [`super::auth`]).

use super::openapi::{common_schemas, document, gvk_v, r, s};
use crate::model::Kind;
use serde_json::{json, Map, Value};

use super::openapi_meta::META;

fn typed(description: &str, group: &str, version: &str, kind: &str, props: Value) -> Value {
    let mut p = json!({
        "apiVersion": s("string", "APIVersion defines the versioned schema of this representation of an object."),
        "kind": s("string", "Kind is a string value representing the REST resource this object represents."),
        "metadata": r(&format!("{META}.ObjectMeta")),
    });
    if let (Some(m), Some(extra)) = (p.as_object_mut(), props.as_object()) {
        m.extend(extra.clone());
    }
    json!({"type": "object", "description": description, "properties": p,
        "x-kubernetes-group-version-kind": gvk_v(group, version, kind)})
}

fn time(description: &str) -> Value {
    json!({"type": "string", "format": "date-time", "description": description})
}

/// `io.k8s.api.core.v1.Event` (mco derives them from its event log).
pub(super) fn core_event() -> Value {
    let reference = json!({"type": "object", "description": "ObjectReference contains enough information to let you inspect or modify the referred object.", "properties": {
        "apiVersion": s("string", "API version of the referent."), "kind": s("string", "Kind of the referent."),
        "name": s("string", "Name of the referent."), "namespace": s("string", "Namespace of the referent."),
        "uid": s("string", "UID of the referent."), "resourceVersion": s("string", "Specific resourceVersion to which this reference is made, if any."),
        "fieldPath": s("string", "A portion of an object.")}});
    typed(
        "Event is a report of an event somewhere in the cluster (in mco: a change the event log recorded).",
        "",
        "v1",
        "Event",
        json!({
        "involvedObject": reference,
        "reason": s("string", "This should be a short, machine understandable string that gives the reason for the transition into the object's current status."),
        "message": s("string", "A human-readable description of the status of this operation."),
        "source": {"type": "object", "description": "The component reporting this event.", "properties": {"component": s("string", "Component from which the event is generated."), "host": s("string", "Node name on which the event is generated.")}},
        "firstTimestamp": time("The time at which the event was first recorded."),
        "lastTimestamp": time("The time at which the most recent occurrence of this event was recorded."),
        "eventTime": {"type": "string", "format": "date-time", "description": "Time when this Event was first observed (MicroTime)."},
        "count": {"type": "integer", "format": "int32", "description": "The number of times this event has occurred."},
        "type": s("string", "Type of this event (Normal, Warning), new types could be added in the future"),
        "action": s("string", "What action was taken/failed regarding to the Regarding object."),
        "reportingComponent": s("string", "Name of the controller that emitted this Event."),
        "reportingInstance": s("string", "ID of the controller instance."),
        "related": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "Optional secondary object for more complex actions."},
        "series": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "Data about the Event series this event represents."}}),
    )
}

/// `io.k8s.api.core.v1.Pod`: served always empty (mco runs no workloads).
pub(super) fn pod() -> Value {
    typed(
        "Pod is a collection of containers that can run on a host. mco runs none: the list is always empty.",
        "",
        "v1",
        "Pod",
        json!({
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "Specification of the desired behavior of the pod."},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "Most recently observed status of the pod."}}),
    )
}

/// `history.mco.dev/v1` Event ([`crate::history`]'s `event_object`).
fn history_event() -> Value {
    typed(
        "Event is one entry of mco's event log: a change of an object, who made it and why.",
        crate::history::GROUP,
        "v1",
        "Event",
        json!({
        "seq": {"type": "integer", "format": "int64", "description": "The entry's sequence number in the log (the resourceVersion it produced)."},
        "time": time("When the change was recorded."),
        "type": s("string", "The event type (MachineConfigCreated, NodeStateChanged, ...)."),
        "object": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "The object changed: kind, name, apiVersion, uid, resourceVersion, generation; with includeBody, its body after the change."},
        "actor": s("string", "Who made the change: the authenticated user, or a controller."),
        "reason": s("string", "The reason the client gave (x-mco-reason, mco apply --reason)."),
        "detail": s("string", "What changed, in the event type's terms."),
        "summary": s("string", "A one-line summary of the change.")}),
    )
}

/// `auth.mco.dev/v1` Token (`mco token`).
fn token() -> Value {
    typed(
        "Token is a bearer token mco issued (its secret only in the answer to its creation).",
        crate::auth::GROUP,
        "v1",
        "Token",
        json!({
        "spec": {"type": "object", "properties": {
            "kind": s("string", "admin, reader, node or bootstrap."),
            "identity": s("string", "The user the token authenticates as (system:node:<name> for a node token)."),
            "groups": {"type": "array", "items": {"type": "string"}, "description": "The groups of that user."},
            "node": s("string", "The node of a node token."),
            "labels": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Labels a node token's Node is registered with."}}},
        "status": {"type": "object", "properties": {"token": s("string", "The secret, in the answer to the creation only.")}}}),
    )
}

fn user_info() -> Value {
    json!({"type": "object", "description": "UserInfo holds the information about the user needed to implement the user.Info interface.", "properties": {
        "username": s("string", "The name that uniquely identifies this user among all active users."),
        "uid": s("string", "A unique value that identifies this user across time."),
        "groups": {"type": "array", "items": {"type": "string"}, "description": "The names of groups this user is a part of."},
        "extra": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}, "description": "Any additional information provided by the authenticator."}}})
}

/// `authentication.k8s.io/v1` SelfSubjectReview.
fn self_subject_review() -> Value {
    typed("SelfSubjectReview contains the user information that the kube-apiserver has about the user making this request.", "authentication.k8s.io", "v1", "SelfSubjectReview", json!({
        "status": {"type": "object", "description": "Status is filled in by the server with the user attributes.", "properties": {"userInfo": user_info()}}}))
}

fn review_status() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("evaluationError".into(), s("string", "EvaluationError can appear in combination with Rules. It indicates an error occurred during rule evaluation."));
    m
}

/// `authorization.k8s.io/v1` SelfSubjectAccessReview.
fn self_subject_access_review() -> Value {
    let mut status = review_status();
    status.insert(
        "allowed".into(),
        s(
            "boolean",
            "Allowed is required. True if the action would be allowed, false otherwise.",
        ),
    );
    status.insert(
        "denied".into(),
        s(
            "boolean",
            "Denied is optional. True if the action would be denied, otherwise false.",
        ),
    );
    status.insert(
        "reason".into(),
        s(
            "string",
            "Reason is optional. It indicates why a request was allowed or denied.",
        ),
    );
    typed(
        "SelfSubjectAccessReview checks whether or the current user can perform an action.",
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        json!({
        "spec": {"type": "object", "description": "Spec holds information about the request being evaluated. user and groups must be empty", "properties": {
            "resourceAttributes": {"type": "object", "description": "ResourceAuthorizationAttributes describes information for a resource access request", "properties": {
                "namespace": s("string", ""), "verb": s("string", ""), "group": s("string", ""), "version": s("string", ""),
                "resource": s("string", ""), "subresource": s("string", ""), "name": s("string", "")}},
            "nonResourceAttributes": {"type": "object", "description": "NonResourceAttributes describes information for a non-resource access request", "properties": {
                "path": s("string", ""), "verb": s("string", "")}}}},
        "status": {"type": "object", "description": "Status is filled in by the server and indicates whether the request is allowed or not", "properties": status}}),
    )
}

/// `authorization.k8s.io/v1` SelfSubjectRulesReview.
fn self_subject_rules_review() -> Value {
    let rule = |extra: Value| {
        let mut p = json!({"verbs": {"type": "array", "items": {"type": "string"}}});
        if let (Some(m), Some(e)) = (p.as_object_mut(), extra.as_object()) {
            m.extend(e.clone());
        }
        json!({"type": "array", "items": {"type": "object", "properties": p}})
    };
    let list = || json!({"type": "array", "items": {"type": "string"}});
    let mut status = review_status();
    status.insert(
        "resourceRules".into(),
        rule(json!({"apiGroups": list(), "resources": list(), "resourceNames": list()})),
    );
    status.insert("nonResourceRules".into(), rule(json!({"nonResourceURLs": list()})));
    status.insert(
        "incomplete".into(),
        s(
            "boolean",
            "Incomplete is true when the rules returned by this call are incomplete.",
        ),
    );
    typed(
        "SelfSubjectRulesReview enumerates the set of actions the current user can perform within a namespace.",
        "authorization.k8s.io",
        "v1",
        "SelfSubjectRulesReview",
        json!({
        "spec": {"type": "object", "properties": {"namespace": s("string", "Namespace to evaluate rules for. Required.")}},
        "status": {"type": "object", "description": "Status is filled in by the server and indicates the set of actions a user can perform.", "properties": status}}),
    )
}

/// One resource's path items: its collection (`list` and/or `create`) and, when it has
/// named objects, the object (`get`, `delete` if deletable).
fn resource_paths(prefix: &str, plural: &str, schema: &str, verbs: &[&str], gvk: &Value) -> Map<String, Value> {
    let ok = json!({"200": {"description": "OK", "content": {"application/json": {"schema": r(schema)}}}});
    let kind = gvk["kind"].as_str().unwrap_or("");
    let op = |action: &str| json!({"operationId": format!("{action}{kind}"), "responses": ok, "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk});
    let mut collection = Map::new();
    let mut named = Map::new();
    for v in verbs {
        match *v {
            "list" => drop(collection.insert("get".into(), op("list"))),
            "create" => {
                let mut post = op("post");
                post["requestBody"] = json!({"content": {"application/json": {"schema": r(schema)}}});
                collection.insert("post".into(), post);
            }
            "get" => drop(named.insert("get".into(), op("get"))),
            "delete" => drop(named.insert("delete".into(), op("delete"))),
            _ => {}
        }
    }
    let mut m = Map::new();
    m.insert(format!("{prefix}/{plural}"), Value::Object(collection));
    if !named.is_empty() {
        named.insert("parameters".into(), json!([{"name": "name", "in": "path", "required": true, "schema": {"type": "string", "uniqueItems": true}}]));
        m.insert(format!("{prefix}/{plural}/{{name}}"), Value::Object(named));
    }
    m
}

/// The kinds of one of these group-versions: (plural, schema name, schema, verbs).
type Served = Vec<(&'static str, String, Value, &'static [&'static str])>;

/// The core `v1` kinds besides Node: Events (read, from the log) and Pods (always empty).
pub(super) fn core_extra() -> Served {
    vec![
        (
            "events",
            "io.k8s.api.core.v1.Event".into(),
            core_event(),
            &["list", "get"],
        ),
        ("pods", "io.k8s.api.core.v1.Pod".into(), pod(), &["list", "get"]),
    ]
}

fn served(group: &str, version: &str) -> Option<Served> {
    if version != "v1" {
        return None;
    }
    Some(match group {
        crate::history::GROUP => vec![(
            "events",
            "dev.mco.history.v1.Event".into(),
            history_event(),
            &["list", "get"],
        )],
        crate::auth::GROUP => vec![(
            "tokens",
            "dev.mco.auth.v1.Token".into(),
            token(),
            &["list", "create", "get", "delete"],
        )],
        "authentication.k8s.io" => vec![(
            "selfsubjectreviews",
            "io.k8s.api.authentication.v1.SelfSubjectReview".into(),
            self_subject_review(),
            &["create"],
        )],
        "authorization.k8s.io" => vec![
            (
                "selfsubjectaccessreviews",
                "io.k8s.api.authorization.v1.SelfSubjectAccessReview".into(),
                self_subject_access_review(),
                &["create"],
            ),
            (
                "selfsubjectrulesreviews",
                "io.k8s.api.authorization.v1.SelfSubjectRulesReview".into(),
                self_subject_rules_review(),
                &["create"],
            ),
        ],
        _ => return None,
    })
}

/// The groups with a document here.
pub(super) const GROUPS: [&str; 4] = [
    crate::history::GROUP,
    crate::auth::GROUP,
    "authentication.k8s.io",
    "authorization.k8s.io",
];

/// Adds `kinds` under `prefix` to `paths` and `schemas`.
pub(super) fn add(
    prefix: &str,
    group: &str,
    version: &str,
    kinds: Served,
    paths: &mut Map<String, Value>,
    schemas: &mut Map<String, Value>,
) {
    for (plural, name, schema, verbs) in kinds {
        let kind = schema["x-kubernetes-group-version-kind"][0]["kind"].clone();
        let gvk = json!({"group": group, "version": version, "kind": kind});
        paths.extend(resource_paths(prefix, plural, &name, verbs, &gvk));
        schemas.insert(name, schema);
    }
}

/// The document of `apis/<group>/<version>` for these groups, `None` for any other.
pub fn group_document(group: &str, version: &str) -> Option<Value> {
    let kinds = served(group, version)?;
    let (mut paths, mut schemas) = (Map::new(), common_schemas());
    add(
        &format!("/apis/{group}/{version}"),
        group,
        version,
        kinds,
        &mut paths,
        &mut schemas,
    );
    Some(document(paths, schemas))
}

/// The document of `api/v1`: nodes, and the events and pods of [`super::openapi_kinds`].
pub fn core_document() -> Value {
    let mut schemas = common_schemas();
    schemas.insert("io.k8s.api.core.v1.Node".into(), super::openapi::node());
    let mut p = super::openapi::paths("/api/v1", "nodes", "io.k8s.api.core.v1.Node", "", "v1", "Node", true);
    add("/api/v1", "", "v1", core_extra(), &mut p, &mut schemas);
    document(p, schemas)
}

/// The document of `apis/<group>/<version>` for any served group: the stored kinds' groups
/// ([`group_document`]) and the others' ([`group_document`]).
pub fn any_group_document(group: &str, version: &str, configured: &str) -> Option<Value> {
    super::openapi::group_document(group, version, configured).or_else(|| group_document(group, version))
}

/// The `/openapi/v3` index over the core group and every served group-version.
pub fn index(groups: &[String], configured: &str) -> Value {
    let mut paths = serde_json::Map::new();
    paths.insert(
        "api/v1".into(),
        json!({"serverRelativeURL": format!("/openapi/v3/api/v1?hash={}", hash(&core_document()))}),
    );
    let mut all: Vec<String> = groups.to_vec();
    for k in Kind::ALL {
        let g = k.group(configured);
        if !g.is_empty() && !all.contains(&g) {
            all.push(g);
        }
    }
    all.extend(GROUPS.iter().map(|g| g.to_string()));
    for g in &all {
        for v in ["v1", "v1alpha1"] {
            if let Some(doc) = any_group_document(g, v, configured) {
                paths.insert(
                    format!("apis/{g}/{v}"),
                    json!({"serverRelativeURL": format!("/openapi/v3/apis/{g}/{v}?hash={}", hash(&doc))}),
                );
            }
        }
    }
    json!({"paths": paths})
}

/// Whether `group` is one of the groups of [`super::openapi_kinds`] (history, tokens, reviews).
pub fn is_other_group(group: &str) -> bool {
    GROUPS.contains(&group)
}

fn hash(v: &Value) -> String {
    use sha2::Digest;
    hex::encode(&sha2::Sha256::digest(v.to_string().as_bytes())[..16]).to_uppercase()
}
