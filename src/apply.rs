//! kubectl's client-side apply as a pure function: what `mco apply` sends for a manifest and
//! what the object is afterwards.
//!
//! Owns the last-applied annotation (written byte for byte as `kubectl apply` writes it), the
//! three-way JSON merge patch (k8s.io/kubectl/pkg/cmd/apply, `patcher.patchSimple` with
//! `jsonmergepatch.CreateThreeWayJSONMergePatch` for custom resources), and [`result`], the
//! object the server holds after that patch. The one definition of "the object after apply":
//! `mco apply` sends [`plan`]'s create body or patch, and the server's impact preview (behind
//! `mco apply --dry-run` and `mco apply --wait`) applies [`result`] to its copy of the state, so
//! the preview sees exactly what the apply will write — removals included.

use serde_json::Value;

/// The annotation kubectl keeps the last applied manifest in; mco uses the same one, so that
/// `mco apply` and `kubectl apply` take turns on the same objects.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// What applying a manifest does to the object of its kind and name.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// The object does not exist: create this body (the manifest without status and
    /// server-owned metadata, with the last-applied annotation).
    Create(Value),
    /// The object exists: send this JSON merge patch (`application/merge-patch+json`).
    Patch(Value),
    /// The object already holds everything the manifest says: nothing to send.
    Unchanged,
}

/// The manifest as apply writes it: `status` and the server-owned metadata
/// (`resourceVersion`, `uid`, `creationTimestamp`, `generation`, `managedFields`) dropped, the
/// last-applied annotation set to [`last_applied`] of `manifest`.
pub fn modified(manifest: &Value) -> Value {
    let annotation = last_applied(manifest);
    let mut modified = manifest.clone();
    if let Some(m) = modified.as_object_mut() {
        m.remove("status");
    }
    if let Some(m) = modified.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in [
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "generation",
            "managedFields",
        ] {
            m.remove(k);
        }
        if let Some(a) = m.get_mut("annotations").and_then(Value::as_object_mut) {
            a.remove(LAST_APPLIED);
        }
    }
    // Only into objects: a manifest of another shape (`metadata: []`) is left for admission to
    // refuse, naming the field, rather than indexed into.
    if let Some(m) = modified.as_object_mut() {
        let meta = m.entry("metadata").or_insert_with(|| Value::Object(Default::default()));
        if let Some(meta) = meta.as_object_mut() {
            let annotations = meta
                .entry("annotations")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Some(a) = annotations.as_object_mut() {
                a.insert(LAST_APPLIED.to_string(), Value::String(annotation));
            }
        }
    }
    modified
}

/// What `mco apply` does with `manifest` given the stored object `current` (`None`: absent):
/// kubectl's three-way patch of the last applied manifest (from `current`'s annotation), the
/// new one and `current`. Fields removed from the manifest since the last apply are removed;
/// fields it never mentioned are kept.
pub fn plan(manifest: &Value, current: Option<&Value>) -> Plan {
    let modified = modified(manifest);
    let Some(current) = current else {
        return Plan::Create(modified);
    };
    let original: Option<Value> = current["metadata"]["annotations"][LAST_APPLIED]
        .as_str()
        .and_then(|s| serde_json::from_str(s).ok());
    let patch = three_way_patch(original.as_ref(), &modified, current);
    if patch.as_object().is_none_or(|p| p.is_empty()) {
        Plan::Unchanged
    } else {
        Plan::Patch(patch)
    }
}

/// The object after `mco apply` of `manifest` over `current`: [`plan`]'s create body, or
/// `current` with its patch merged as the server merges a JSON merge patch (RFC 7386).
pub fn result(manifest: &Value, current: Option<&Value>) -> Value {
    match (plan(manifest, current), current) {
        (Plan::Create(body), _) => body,
        (Plan::Patch(patch), Some(current)) => {
            let mut after = current.clone();
            json_patch::merge(&mut after, &patch);
            after
        }
        (_, current) => current.cloned().unwrap_or(Value::Null),
    }
}

/// The last-applied annotation exactly as `kubectl apply` writes it, so that `mco apply` and
/// `kubectl apply` of the same file agree byte for byte (and neither sees a change): the
/// manifest without that annotation and with `metadata.annotations` present (`{}` when the
/// manifest has none), encoded as Go's encoding/json encodes an unstructured object — keys
/// sorted, no spaces, `<`, `>`, `&`, U+2028 and U+2029 escaped — plus a newline
/// (kubectl `GetModifiedConfiguration`, k8s.io/kubectl/pkg/util/apply.go).
pub fn last_applied(manifest: &Value) -> String {
    let mut m = manifest.clone();
    if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(a) = annotations.as_object_mut() {
            a.remove(LAST_APPLIED);
        } else {
            *annotations = Value::Object(Default::default());
        }
    }
    go_json(&m) + "\n"
}

/// Go's `encoding/json` text of a value: object keys sorted, HTML-sensitive characters escaped
/// (also the server's last-applied annotation after a server-side apply, `api::last_applied`).
pub fn go_json(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(o) => {
                let mut keys: Vec<&String> = o.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&o[k]))).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(v)
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// kubectl's three-way JSON merge patch: set what `modified` says where `current` differs,
/// delete what `original` (the last applied manifest) had and `modified` no longer has.
pub fn three_way_patch(original: Option<&Value>, modified: &Value, current: &Value) -> Value {
    let mut patch = serde_json::Map::new();
    if let Some(m) = modified.as_object() {
        for (k, mv) in m {
            match (mv, current.get(k)) {
                (Value::Object(_), Some(cv @ Value::Object(_))) => {
                    let sub = three_way_patch(original.and_then(|o| o.get(k)), mv, cv);
                    if sub.as_object().is_some_and(|s| !s.is_empty()) {
                        patch.insert(k.clone(), sub);
                    }
                }
                (_, cv) if cv != Some(mv) => {
                    patch.insert(k.clone(), mv.clone());
                }
                _ => {}
            }
        }
    }
    if let Some(o) = original.and_then(Value::as_object) {
        for k in o.keys() {
            if modified.get(k).is_none() && current.get(k).is_some() {
                patch.insert(k.clone(), Value::Null);
            }
        }
    }
    Value::Object(patch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// kubectl apply's rule (k8s.io/kubectl/pkg/cmd/apply): a field removed from the manifest
    /// since the last apply is removed; a field the manifest never set (a controller's) is kept.
    #[test]
    fn result_removes_what_the_manifest_dropped_and_keeps_what_it_never_set() {
        let v1 = json!({"kind": "MachineConfig", "metadata": {"name": "a"},
            "spec": {"config": {"storage": {"files": [{"path": "/etc/a"}]}}}});
        let created = result(&v1, None);
        assert_eq!(created["metadata"]["annotations"][LAST_APPLIED], last_applied(&v1));
        let mut stored = created.clone();
        stored["metadata"]["resourceVersion"] = json!("7");
        stored["spec"]["fips"] = json!(false);
        let v2 = json!({"kind": "MachineConfig", "metadata": {"name": "a"},
            "spec": {"config": {"systemd": {"units": [{"name": "a.service"}]}}}});
        let after = result(&v2, Some(&stored));
        assert_eq!(after["spec"]["config"].get("storage"), None);
        assert_eq!(after["spec"]["config"]["systemd"]["units"][0]["name"], "a.service");
        assert_eq!(after["spec"]["fips"], false, "never in a manifest: kept");
        assert_eq!(after["metadata"]["resourceVersion"], "7");
        assert_eq!(plan(&v2, Some(&after)), Plan::Unchanged);
    }

    /// A manifest of the wrong shape is passed through for admission to refuse, never indexed
    /// into (a panic would be a 500).
    #[test]
    fn odd_shapes_pass_through() {
        for m in [
            json!({"kind": "MachineConfig", "metadata": []}),
            json!([1]),
            json!({"metadata": {"annotations": "x"}}),
        ] {
            let _ = result(&m, None);
            let _ = result(&m, Some(&json!({"metadata": {"name": "a"}})));
        }
    }
}
