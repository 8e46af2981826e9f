//! Kubernetes object rules of the write path, on JSON objects: the stored object built from the
//! current one within a [`Scope`] (server-managed metadata kept, `generation` bumped on a spec
//! change), the no-op test, owner references, the resourceVersion stamp and the Conflict text.

use super::{CommandError, Scope};
use crate::admission::{check_shape, decode, normalize_with};
use crate::model::Kind;
use serde_json::{json, Value};

/// Sets `metadata.resourceVersion` to `seq` and puts `metadata`'s keys in the order
/// ObjectMeta serializes its fields (alphabetical), so that the event body is the JSON the
/// stored object serializes to, byte for byte: the live projection keeps the body as the
/// object's JSON ([`crate::state::State::apply`]). The write path adds server-set fields (uid,
/// creationTimestamp, generation, resourceVersion) and removes others after the typed
/// round trip, which moves keys.
pub(super) fn set_resource_version(object: &mut Value, seq: u64) {
    object["metadata"]["resourceVersion"] = Value::String(seq.to_string());
    if let Some(meta) = object["metadata"].as_object_mut() {
        meta.sort_keys();
    }
}

/// Removes every ownerReference with `uid` (and the list when it ends up empty).
pub(super) fn remove_owner_reference(object: &mut Value, uid: &str) {
    let Some(meta) = object["metadata"].as_object_mut() else {
        return;
    };
    if let Some(Value::Array(refs)) = meta.get_mut("ownerReferences") {
        refs.retain(|r| r["uid"].as_str() != Some(uid));
        if refs.is_empty() {
            meta.remove("ownerReferences");
        }
    }
}

pub(super) fn conflict(kind: Kind, name: &str) -> CommandError {
    CommandError::Conflict {
        kind,
        name: name.to_string(),
        message: "the object has been modified; please apply your changes to the latest version and try again".into(),
    }
}

/// Whether two objects are equal but for `metadata.resourceVersion` (compared in place: a
/// batch of 10,000 updates compares 10,000 pairs).
pub(super) fn same_but_rv(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let meta_eq = |x: &Value, y: &Value| match (x.as_object(), y.as_object()) {
        (Some(x), Some(y)) => {
            let rest = |m: &'_ serde_json::Map<String, Value>| m.keys().filter(|k| *k != "resourceVersion").count();
            rest(x) == rest(y)
                && x.iter()
                    .filter(|(k, _)| *k != "resourceVersion")
                    .all(|(k, v)| match y.get(k) {
                        Some(w) if k == "managedFields" => same_managed_fields(v, w),
                        Some(w) => v == w,
                        None => false,
                    })
        }
        _ => x == y,
    };
    a.len() == b.len()
        && a.iter().all(|(k, v)| match b.get(k) {
            Some(w) if k == "metadata" => meta_eq(v, w),
            Some(w) => v == w,
            None => false,
        })
}

/// Whether two `managedFields` lists differ at most in their entries' `time`: a write that
/// only moves a timestamp (the same server-side apply again) is no write, as Kubernetes'
/// `IgnoreManagedFieldsTimestampsTransformer` (`staging/src/k8s.io/apiserver/pkg/endpoints/
/// handlers/fieldmanager`, 1.27+) keeps the old timestamps when nothing else changed.
fn same_managed_fields(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_array(), b.as_array()) else {
        return a == b;
    };
    let untimed = |e: &Value| match e.as_object() {
        Some(m) => m
            .iter()
            .filter(|(k, _)| *k != "time")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        None => serde_json::Map::new(),
    };
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| untimed(x) == untimed(y))
}

/// Builds the stored object from the current one and a proposed one, keeping what `scope`
/// does not own, server-managed metadata, and bumping `generation` when the spec changed.
pub(super) fn merge_scope(
    kind: Kind,
    current: &Value,
    proposed: Value,
    scope: Scope,
    group: &str,
    max_file_bytes: crate::limits::ContentLimits,
) -> Result<Value, CommandError> {
    check_shape(kind, &proposed)?;
    let mut new = match scope {
        Scope::Main => {
            let mut p = proposed;
            if kind.has_status() {
                p["status"] = current.get("status").cloned().unwrap_or(Value::Null);
            }
            p
        }
        Scope::Status => {
            let mut c = current.clone();
            c["status"] = proposed.get("status").cloned().unwrap_or(Value::Null);
            c
        }
    };
    if new["metadata"]["name"] != current["metadata"]["name"] {
        return Err(CommandError::BadRequest(format!(
            "the name of the object ({}) does not match the name on the URL ({})",
            new["metadata"]["name"].as_str().unwrap_or(""),
            current["metadata"]["name"].as_str().unwrap_or("")
        )));
    }
    if kind.is_namespaced() {
        // kube-apiserver's `rest.BeforeUpdate`: the request's namespace when the object names
        // none, and never another one.
        let current_ns = current["metadata"]["namespace"].clone();
        match new["metadata"]["namespace"].as_str() {
            None | Some("") => new["metadata"]["namespace"] = current_ns,
            Some(ns) if Some(ns) == current_ns.as_str() => {}
            Some(_) => {
                return Err(CommandError::BadRequest(
                    "the namespace of the provided object does not match the namespace sent on the request".into(),
                ))
            }
        }
    }
    for k in ["uid", "creationTimestamp", "generation"] {
        new["metadata"][k] = current["metadata"][k].clone();
    }
    // A status write leaves the spec as stored, validated under the rules of its own write:
    // the kinds validated on their JSON (MachineConfiguration and the generated kinds) are not
    // re-validated then, as Kubernetes' status subresource ignores the spec and CRD validation
    // ratchets unchanged values, so that a rule added later cannot make a stored object's
    // controller unable to write its status.
    let ratchet = scope == Scope::Status
        && !matches!(kind, Kind::MachineConfig | Kind::MachineConfigPool | Kind::Node)
        && new.get("spec") == current.get("spec");
    let mut out = if ratchet {
        decode(kind, new, group)?
    } else {
        normalize_with(kind, new, group, max_file_bytes)?
    };
    // The spec compared with its defaults, as stored: a body that leaves a field to its
    // default changes nothing (kube-apiserver compares the decoded, defaulted objects).
    if kind.has_generation() && out.get("spec") != current.get("spec") {
        let g = current["metadata"]["generation"].as_i64().unwrap_or(1);
        out["metadata"]["generation"] = json!(g + 1);
    }
    if !kind.has_generation() || out["metadata"]["generation"].is_null() {
        if let Some(m) = out["metadata"].as_object_mut() {
            if m.get("generation").is_some_and(Value::is_null) {
                m.remove("generation");
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A status write does not re-validate a stored spec of a JSON-validated kind (Kubernetes'
    /// status subresource with validation ratcheting): a KubeletConfig stored when `logLevel:
    /// 11` was still admitted keeps getting its conditions; a spec write is validated.
    #[test]
    fn status_writes_ratchet_the_stored_spec() {
        let current = json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "KubeletConfig",
            "metadata": {"name": "old", "generation": 1}, "spec": {"logLevel": 11}});
        let mut proposed = current.clone();
        proposed["status"] = json!({"observedGeneration": 1, "conditions": [{"type": "Accepted", "status": "False"}]});
        let out = merge_scope(
            Kind::KubeletConfig,
            &current,
            proposed.clone(),
            Scope::Status,
            crate::model::DEFAULT_GROUP,
            crate::limits::ContentLimits::default(),
        )
        .unwrap();
        assert_eq!(out["status"]["conditions"][0]["type"], "Accepted");
        let mut spec_write = proposed;
        spec_write["spec"]["logLevel"] = json!(12);
        assert!(merge_scope(
            Kind::KubeletConfig,
            &current,
            spec_write,
            Scope::Main,
            crate::model::DEFAULT_GROUP,
            crate::limits::ContentLimits::default()
        )
        .is_err());
    }
}
