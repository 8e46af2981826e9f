//! Event classification: the event type and one-line detail an update of each kind is logged
//! with (a desiredConfig set, a node state change, a drain request, a pool status...), which the
//! history, the audit trail and the dashboard's timeline read.

use super::Scope;
use crate::event::EventType;
use crate::model::{Keys, Kind};
use serde::Deserialize;
use serde_json::Value;

pub(super) fn deletion_type(kind: Kind) -> EventType {
    match kind {
        Kind::MachineConfig => EventType::MachineConfigDeleted,
        Kind::MachineConfigPool => EventType::PoolDeleted,
        Kind::Node => EventType::NodeDeleted,
        Kind::MachineConfiguration => EventType::MachineConfigurationDeleted,
        _ => EventType::ObjectDeleted,
    }
}

pub(super) fn update_type(kind: Kind) -> EventType {
    match kind {
        Kind::MachineConfig => EventType::MachineConfigUpdated,
        Kind::MachineConfigPool => EventType::PoolUpdated,
        Kind::Node => EventType::NodeUpdated,
        Kind::MachineConfiguration => EventType::MachineConfigurationUpdated,
        _ => EventType::ObjectUpdated,
    }
}

/// Picks the event type of an update and a one-line summary of what changed.
pub(super) fn classify(kind: Kind, old: &Value, new: &Value, scope: Scope, keys: &Keys) -> (EventType, String) {
    match (kind, scope) {
        (Kind::MachineConfig, _) => (EventType::MachineConfigUpdated, String::new()),
        (Kind::MachineConfiguration, Scope::Main) => (EventType::MachineConfigurationUpdated, String::new()),
        (Kind::MachineConfiguration, Scope::Status) => (
            EventType::MachineConfigurationUpdated,
            format!("status: observedGeneration {}", new["status"]["observedGeneration"]),
        ),
        (Kind::MachineConfigPool, Scope::Status) => (EventType::PoolStatusUpdated, pool_status_detail(new)),
        (Kind::MachineConfigPool, Scope::Main) => {
            if old["spec"]["configuration"] != new["spec"]["configuration"] {
                let name = new["spec"]["configuration"]["name"].as_str().unwrap_or("");
                (
                    EventType::PoolConfigurationSet,
                    format!("spec.configuration.name: {name}"),
                )
            } else {
                (EventType::PoolUpdated, String::new())
            }
        }
        (Kind::Node, Scope::Status) => {
            let boot = |v: &Value| v["status"]["nodeInfo"]["bootID"].as_str().unwrap_or("").to_string();
            let (a, b) = (boot(old), boot(new));
            let ready = |v: &Value| {
                let c = v["status"]["conditions"].as_array()?;
                let r = c.iter().find(|c| c["type"] == "Ready")?;
                r["status"].as_str().map(str::to_string)
            };
            let (ra, rb) = (ready(old).unwrap_or_default(), ready(new).unwrap_or_default());
            let mut parts = Vec::new();
            if a != b {
                parts.push(format!("bootID: {a:?} -> {b:?}"));
            }
            // The node-lifecycle controller's verdict (or a node posting Ready again).
            if ra != rb && !(ra.is_empty() && rb == "True") {
                parts.push(format!("Ready: {ra:?} -> {rb:?}"));
            }
            (EventType::NodeStatusUpdated, parts.join("; "))
        }
        (Kind::Node, Scope::Main) => {
            // Each side's annotations are looked up once and compared as borrowed strings: the
            // node controller classifies one update per node it targets.
            fn annotations(v: &Value) -> Option<&serde_json::Map<String, Value>> {
                v["metadata"]["annotations"].as_object()
            }
            let (old_ann, new_ann) = (annotations(old), annotations(new));
            fn ann<'a>(m: Option<&'a serde_json::Map<String, Value>>, k: &str) -> &'a str {
                m.and_then(|m| m.get(k)).and_then(Value::as_str).unwrap_or("")
            }
            let mut parts = Vec::new();
            let mut changed = |key: &str, short: &str| {
                let (a, b) = (ann(old_ann, key), ann(new_ann, key));
                if a != b {
                    parts.push(format!("{short}: {a:?} -> {b:?}"));
                    true
                } else {
                    false
                }
            };
            let desired = changed(&keys.desired_config(), "desiredConfig");
            let current = changed(&keys.current_config(), "currentConfig");
            let state = changed(&keys.state(), "state");
            let reason = changed(&keys.reason(), "reason");
            let drain_req = changed(&keys.desired_drain(), "desiredDrain");
            let drain_done = changed(&keys.last_applied_drain(), "lastAppliedDrain");
            changed(&keys.post_config_action(), "postConfigAction");
            let actions = changed(crate::disruption::ACTIONS_ANNOTATION, "actions");
            let unsched = |v: &Value| v["spec"]["unschedulable"].as_bool().unwrap_or(false);
            let cordon = unsched(old) != unsched(new);
            if cordon {
                parts.push(format!("unschedulable: {} -> {}", unsched(old), unsched(new)));
            }
            let t = if desired {
                EventType::NodeDesiredConfigSet
            } else if current || state || reason {
                EventType::NodeStateChanged
            } else if drain_req {
                EventType::NodeDrainRequested
            } else if actions {
                EventType::NodeActionsChosen
            } else if drain_done && unsched(new) {
                EventType::NodeDrained
            } else if cordon && unsched(new) {
                EventType::NodeCordoned
            } else if drain_done || cordon {
                EventType::NodeUncordoned
            } else {
                EventType::NodeUpdated
            };
            (t, parts.join("; "))
        }
        (Kind::MachineConfigNode, Scope::Status) => (EventType::ObjectStatusUpdated, mcn_detail(old, new)),
        (Kind::RolloutPolicy, Scope::Status) => (EventType::ObjectStatusUpdated, policy_detail(old, new)),
        (_, Scope::Status) => (EventType::ObjectStatusUpdated, crate::generate::status_detail(new)),
        (_, Scope::Main) => (EventType::ObjectUpdated, String::new()),
    }
}

/// A RolloutPolicy's status change as the history shows it: each governed pool whose phase
/// changed (`pool worker: Canary -> Baking`), each node healed (`healed worker-0`), else the
/// last condition as for other kinds (the policy's status is written at each change of its
/// record, so the phase is what an operator follows in `kubectl describe rp`).
fn policy_detail(old: &Value, new: &Value) -> String {
    let text = |v: &Value| v.as_str().unwrap_or("").to_string();
    let phase_of = |v: &Value, pool: &Value| {
        v["status"]["pools"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["pool"] == *pool))
            .map(|p| text(&p["phase"]))
    };
    let heals_of = |v: &Value, node: &Value| {
        v["status"]["heals"]
            .as_array()
            .and_then(|hs| hs.iter().find(|h| h["node"] == *node))
            .and_then(|h| h["times"].as_array().map(Vec::len))
            .unwrap_or(0)
    };
    let mut parts = Vec::new();
    for p in new["status"]["pools"].as_array().into_iter().flatten() {
        let now = text(&p["phase"]);
        match phase_of(old, &p["pool"]) {
            Some(was) if was == now => {}
            Some(was) => parts.push(format!("pool {}: {was} -> {now}", text(&p["pool"]))),
            None => parts.push(format!("pool {}: {now}", text(&p["pool"]))),
        }
    }
    for h in new["status"]["heals"].as_array().into_iter().flatten() {
        let times = h["times"].as_array().map_or(0, Vec::len);
        if times > heals_of(old, &h["node"]) {
            parts.push(format!("healed {}", text(&h["node"])));
        }
    }
    if parts.is_empty() {
        return crate::generate::status_detail(new);
    }
    parts.join("; ")
}

/// A MachineConfigNode's status change as the history shows it: each condition whose status
/// changed, in the object's order, with its new reason (`UpdateExecuted: Unknown -> True
/// (AppliedFilesAndOS); ...`); when only messages changed, the first changed condition's type.
fn mcn_detail(old: &Value, new: &Value) -> String {
    let conds = |v: &Value| v["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let (before, after) = (conds(old), conds(new));
    let find = |t: &Value| before.iter().find(|c| c["type"] == *t);
    let text = |v: &Value| v.as_str().unwrap_or("").to_string();
    let mut parts = Vec::new();
    let mut touched = None;
    for c in &after {
        let prev = find(&c["type"]);
        let was = prev.map(|p| text(&p["status"])).unwrap_or_default();
        if was != text(&c["status"]) {
            parts.push(format!(
                "{}: {} -> {} ({})",
                text(&c["type"]),
                if was.is_empty() { "<none>" } else { &was },
                text(&c["status"]),
                text(&c["reason"])
            ));
        } else if touched.is_none() && prev.map(|p| &p["message"]) != Some(&c["message"]) {
            touched = Some(format!("{}: {}", text(&c["type"]), text(&c["message"])));
        }
    }
    if parts.is_empty() {
        return touched.unwrap_or_default();
    }
    parts.join("; ")
}

fn pool_status_detail(v: &Value) -> String {
    let s = &v["status"];
    let cond = |t: &str| {
        s["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == t))
            .and_then(|c| c["status"].as_str())
            .unwrap_or("")
            .to_string()
    };
    format!(
        "machines {}/{} updated, {} ready, {} unavailable, {} degraded; Updated={} Updating={} Degraded={}",
        s["updatedMachineCount"],
        s["machineCount"],
        s["readyMachineCount"],
        s["unavailableMachineCount"],
        s["degradedMachineCount"],
        cond("Updated"),
        cond("Updating"),
        cond("Degraded")
    )
}

/// Whether a MachineConfig's JSON is a rendered config, by the one rule of
/// [`crate::render::is_rendered_metadata`] (read from its metadata alone).
pub(super) fn is_rendered(v: &Value) -> bool {
    crate::model::ObjectMeta::deserialize(&v["metadata"]).is_ok_and(|m| crate::render::is_rendered_metadata(&m))
}

#[cfg(test)]
mod tests {
    use super::{is_rendered, policy_detail};
    use serde_json::json;

    #[test]
    fn a_policy_status_change_names_the_phases_and_heals() {
        let status = |phase: &str, heals: usize| {
            json!({"status": {"pools": [{"pool": "worker", "phase": phase}],
                "heals": [{"node": "worker-0", "times": vec!["2026-01-01T00:00:00Z"; heals]}],
                "conditions": [{"type": "Ready", "message": "governs pools: worker"}]}})
        };
        assert_eq!(
            policy_detail(&status("Canary", 0), &status("Baking", 0)),
            "pool worker: Canary -> Baking"
        );
        assert_eq!(policy_detail(&json!({}), &status("Waiting", 0)), "pool worker: Waiting");
        assert_eq!(
            policy_detail(&status("Proceeding", 0), &status("Proceeding", 1)),
            "healed worker-0"
        );
        assert_eq!(
            policy_detail(&status("Done", 1), &status("Done", 1)),
            "Ready: governs pools: worker"
        );
    }

    /// The write path and the render controller share one rule: owned by a pool, or named
    /// `rendered-*` with the controller's generated-by annotation (a restored backup).
    #[test]
    fn rendered_configs_are_told_by_the_render_rule() {
        let g = "machineconfiguration.openshift.io/generated-by-controller-version";
        let owner = json!([{"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
            "name": "worker", "uid": "u1", "controller": true}]);
        for (meta, want) in [
            (json!({"name": "rendered-worker-1a", "ownerReferences": owner}), true),
            (json!({"name": "rendered-worker-1a", "annotations": {g: "abc"}}), true),
            (json!({"name": "custom", "ownerReferences": owner}), true),
            (json!({"name": "rendered-worker-1a"}), false),
            (json!({"name": "99-worker-ssh", "annotations": {g: "abc"}}), false),
        ] {
            let mc = json!({"kind": "MachineConfig", "metadata": meta.clone(), "spec": {}});
            assert_eq!(is_rendered(&mc), want, "{meta}");
        }
    }
}
