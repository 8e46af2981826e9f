//! The hand-over between client-side and server-side apply, as kube-apiserver's field manager
//! does it for the `kubectl` field manager (kubectl's default for `apply --server-side`):
//!
//! - the last-applied manager
//!   (`staging/src/k8s.io/apimachinery/pkg/util/managedfields/internal/lastappliedmanager.go`):
//!   a server-side apply by `kubectl` that conflicts only on fields the object's
//!   `kubectl.kubernetes.io/last-applied-configuration` annotation still holds with their live
//!   values (the fields `kubectl apply` set and nobody changed since) is forced: the fields pass
//!   from `kubectl-client-side-apply` to `kubectl` without a conflict;
//! - the last-applied updater (`lastappliedupdater.go`): after a server-side apply by
//!   `kubectl` of an object that carries the annotation, the annotation is the applied
//!   configuration (without the annotation itself, encoded as Go's encoding/json encodes an
//!   unstructured object), so a later client-side `kubectl apply` prunes what the server-side
//!   apply no longer set.
//!
//! Any other field manager opts out, as in Kubernetes.

use super::fields::{self, Conflicts, FieldPath};
use crate::apply::LAST_APPLIED;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// The only field manager whose applies hand over (`manager != "kubectl"` opts out in both
/// Kubernetes files).
const KUBECTL: &str = "kubectl";

/// [`fields::server_side_apply`] with the last-applied manager and updater around it.
pub fn server_side_apply(
    current: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    api_version: &str,
    now: &str,
) -> Result<Value, Conflicts> {
    let mut obj = match fields::server_side_apply(current, applied, manager, force, api_version, now) {
        Err(conflicts) if manager == KUBECTL => {
            let allowed = current.and_then(|c| allowed_conflicts(c, applied, api_version));
            let Some(allowed) = allowed else {
                return Err(conflicts);
            };
            let left: Vec<_> = conflicts
                .0
                .into_iter()
                .filter(|(_, _, path)| !allowed.contains(path))
                .collect();
            if !left.is_empty() {
                return Err(Conflicts(left));
            }
            fields::server_side_apply(current, applied, manager, true, api_version, now)?
        }
        other => other?,
    };
    if manager == KUBECTL && has_last_applied(&obj) {
        obj["metadata"]["annotations"][LAST_APPLIED] = json!(build_last_applied(applied));
    }
    Ok(obj)
}

/// The fields the last-applied annotation of `live` holds with their live values: those a
/// client-side apply set and still owns (`allowedConflictsFromLastApplied`). `None` when there
/// is no annotation, it is not a JSON object, or it names another apiVersion than the request
/// (the alias group's requests carry that group's apiVersion, the stored object the
/// configured one: either is this request's version).
fn allowed_conflicts(live: &Value, applied: &Value, api_version: &str) -> Option<BTreeSet<FieldPath>> {
    let text = live["metadata"]["annotations"][LAST_APPLIED].as_str()?;
    let last: Value = serde_json::from_str(text).ok().filter(Value::is_object)?;
    let version = last["apiVersion"].as_str()?;
    if version != api_version && Some(version) != applied["apiVersion"].as_str() {
        return None;
    }
    // Fields of the last applied configuration that are different, added or missing in the
    // live object are not the client-side applier's any more.
    let mut set = fields::leaf_paths(&last);
    set.retain(|p| fields::value_at(&last, p) == fields::value_at(live, p));
    Some(set)
}

/// Whether `obj` carries a non-empty last-applied annotation (`hasLastApplied`).
fn has_last_applied(obj: &Value) -> bool {
    obj["metadata"]["annotations"][LAST_APPLIED]
        .as_str()
        .is_some_and(|s| !s.is_empty())
}

/// The annotation the updater writes (`buildLastApplied`): the applied configuration without
/// the annotation (an `annotations` map it leaves empty stays, as Go's `SetAnnotations` keeps
/// an empty map), encoded by `runtime.Encode(unstructured.UnstructuredJSONScheme, obj)`: Go's
/// encoding/json with sorted keys and a final newline.
fn build_last_applied(applied: &Value) -> String {
    let mut obj = applied.clone();
    if let Some(a) = obj
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        a.remove(LAST_APPLIED);
    }
    crate::apply::go_json(&obj) + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: &str = "machineconfiguration.openshift.io/v1";

    /// The object `kubectl apply` (client-side) creates: its manifest, the annotation, and
    /// every field owned by `kubectl-client-side-apply` through an Update.
    fn client_side_applied(manifest: &Value) -> Value {
        let mut obj = crate::apply::modified(manifest);
        let paths = fields::leaf_paths(&obj);
        fields::record(&mut obj, "kubectl-client-side-apply", "Update", &paths, V, "t");
        obj
    }

    fn pool(max: u32, paused: Option<bool>) -> Value {
        let mut p = json!({"apiVersion": V, "kind": "MachineConfigPool", "metadata": {"name": "infra"},
            "spec": {"maxUnavailable": max}});
        if let Some(paused) = paused {
            p["spec"]["paused"] = json!(paused);
        }
        p
    }

    #[test]
    fn kubectl_takes_over_what_client_side_apply_still_owns() {
        let live = client_side_applied(&pool(1, Some(true)));
        let obj = server_side_apply(Some(&live), &pool(2, Some(true)), "kubectl", false, V, "t").unwrap();
        assert_eq!(obj["spec"]["maxUnavailable"], 2);
        // The annotation now holds the applied configuration, as Go encodes it.
        assert_eq!(
            obj["metadata"]["annotations"][LAST_APPLIED],
            format!("{}\n", crate::apply::go_json(&pool(2, Some(true))))
        );
        // Another manager gets the conflict, as without the annotation.
        let e = server_side_apply(Some(&live), &pool(2, Some(true)), "other", false, V, "t").unwrap_err();
        assert!(e.message().contains("kubectl-client-side-apply"), "{}", e.message());
    }

    #[test]
    fn a_field_changed_since_the_client_side_apply_still_conflicts() {
        let mut live = client_side_applied(&pool(1, Some(true)));
        // Someone else changed maxUnavailable after the client-side apply: the annotation no
        // longer matches the live value, so the client-side applier does not own it.
        let before = live.clone();
        live["spec"]["maxUnavailable"] = json!(3);
        let changed = fields::changed_paths(&before, &live);
        fields::record(&mut live, "kubectl-edit", "Update", &changed, V, "t");
        let e = server_side_apply(Some(&live), &pool(2, Some(true)), "kubectl", false, V, "t").unwrap_err();
        assert_eq!(e.0.len(), 1, "{}", e.message());
        assert_eq!(e.0[0].2, vec!["spec".to_string(), "maxUnavailable".to_string()]);
    }

    #[test]
    fn the_annotation_is_kept_only_where_it_was() {
        let created = server_side_apply(None, &pool(1, None), "kubectl", false, V, "t").unwrap();
        assert!(created["metadata"].get("annotations").is_none(), "{created}");
        // A manager other than kubectl leaves the annotation as it was.
        let live = client_side_applied(&pool(1, Some(true)));
        let obj = server_side_apply(Some(&live), &pool(1, Some(true)), "helm", false, V, "t").unwrap();
        assert_eq!(
            obj["metadata"]["annotations"][LAST_APPLIED],
            live["metadata"]["annotations"][LAST_APPLIED]
        );
    }
}
