//! The node-lifecycle controller: node health from node leases, as kube-controller-manager's
//! (`pkg/controller/nodelifecycle/node_lifecycle_controller.go`, `monitorNodeHealth` and
//! `tryUpdateNodeHealth`; README "Node liveness").
//!
//! Owns the judgement "this node stopped posting its status": a node whose Lease
//! `kube-node-lease/<node>` has not been renewed for the grace period
//! ([`super::ControllerConfig::node_monitor_grace_period`], kube's `--node-monitor-grace-period`,
//! 40 s) gets its Ready condition `Unknown`, reason `NodeStatusUnknown`, message `Kubelet
//! stopped posting node status.`; once the lease is renewed again, the condition this controller
//! set goes back to `True` (on Kubernetes the kubelet's next status post does that; mco's daemon
//! posts its status only when it registers). A node that never had a lease (a simulated node,
//! one of an older daemon) is left alone, and a renewal never turns a Ready condition this
//! controller did not set (`False`, say) `True`.
//!
//! What a NotReady node means is MCO's, not this controller's: `CheckNodeReady`
//! (`pkg/controller/node/status.go`, [`crate::model::node_is_ready`]) wants Ready `True`, so
//! `IsUnavailableForUpdate` (`pkg/controller/common/layered_node_state.go`,
//! [`crate::rollout::is_node_unavailable`]) counts the node unavailable: against the pool's
//! `maxUnavailable` when the node controller picks candidates (`getAllCandidateMachines`,
//! `pkg/controller/node/node_controller.go`: it is no candidate and uses up the budget) and in
//! `unavailableMachineCount` (`getUnavailableMachines`, `calculateStatus` in
//! `pkg/controller/node/status.go`; it leaves `readyMachineCount` too). This controller runs
//! before the node controller in each pass, so a node is judged unavailable in the pass that
//! finds its lease stale. Kubernetes also taints such a node `node.kubernetes.io/unreachable`
//! and marks its other conditions Unknown; mco nodes post only Ready and run no pods, so
//! neither is done.
//!
//! Like kube's controller it judges renewals by its own clock, not by the `renewTime` a node
//! wrote: a renewal is the moment this controller first sees a new `renewTime`, so clock skew
//! between a node and the server changes nothing, and a server that starts gives every lease a
//! full grace period. That memory ([`Observations`]) is the only state of the controller; it
//! also says when the next lease expires ([`Observations::next_expiry`]), so the loop wakes
//! then, whether or not anything else changed.

use super::log_batch;
use crate::command::{Actor, Hub, Scope, Update};
use crate::model::{self, Kind, Node, NodeCondition, Time};
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

/// kube's reason of a Ready condition the lifecycle controller set `Unknown`.
pub const NODE_STATUS_UNKNOWN: &str = "NodeStatusUnknown";
/// kube's message of that condition.
pub const NODE_STATUS_UNKNOWN_MESSAGE: &str = "Kubelet stopped posting node status.";
/// The reason and message of the Ready condition the daemon posts (and this controller
/// restores): the kubelet's `KubeletReady`.
pub const KUBELET_READY: &str = "KubeletReady";
/// The daemon's Ready message (`daemon::node_api`).
pub const READY_MESSAGE: &str = "mco daemon is posting ready status";

/// What the controller remembers of each node lease: the `renewTime` it last saw and when it
/// saw it change (kube's `nodeHealthData.probeTimestamp`).
#[derive(Debug, Default)]
pub struct Observations {
    seen: HashMap<String, (Option<String>, Instant)>,
    next_expiry: Option<Instant>,
}

impl Observations {
    /// When the earliest lease of a node that is not yet judged stale expires (the loop wakes
    /// then); `None` when no lease is being watched.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.next_expiry
    }

    /// Whether a lease expired since the last pass planned (the pass must run even over objects
    /// that did not change).
    pub fn due(&self, now: Instant) -> bool {
        self.next_expiry.is_some_and(|t| t <= now)
    }
}

/// The Ready condition a node should have now, when it differs from the one it has: `Unknown`
/// for a stale lease, `True` again for a renewed one whose Ready this controller had set
/// `Unknown`. `wall` is the time written as `lastTransitionTime`.
fn ready_change(node: &Node, stale: bool, wall: &Time) -> Option<NodeCondition> {
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    let ready = conditions.and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    match (ready, stale) {
        (Some(r), true) if r.status != "Unknown" => Some(NodeCondition {
            status: "Unknown".into(),
            reason: Some(NODE_STATUS_UNKNOWN.into()),
            message: Some(NODE_STATUS_UNKNOWN_MESSAGE.into()),
            last_transition_time: Some(wall.clone()),
            ..r.clone()
        }),
        // kube: a node whose kubelet never posted a Ready condition.
        (None, true) => Some(NodeCondition {
            type_: "Ready".into(),
            status: "Unknown".into(),
            reason: Some("NodeStatusNeverUpdated".into()),
            message: Some("Kubelet never posted node status.".into()),
            last_heartbeat_time: node.metadata.creation_timestamp.clone(),
            last_transition_time: Some(wall.clone()),
        }),
        (Some(r), false) if r.status == "Unknown" && r.reason.as_deref() == Some(NODE_STATUS_UNKNOWN) => {
            Some(NodeCondition {
                status: "True".into(),
                reason: Some(KUBELET_READY.into()),
                message: Some(READY_MESSAGE.into()),
                last_heartbeat_time: Some(wall.clone()),
                last_transition_time: Some(wall.clone()),
                ..r.clone()
            })
        }
        _ => None,
    }
}

/// Plans one pass at `now` (monotonic) with grace `grace`: the nodes whose Ready condition
/// changes, with the condition; updates `obs` (renewals seen, forgotten leases, the next
/// expiry). Pure but for `obs`.
pub fn plan(
    nodes: &model::Objects<Node>,
    leases: Option<&model::Objects<Value>>,
    obs: &mut Observations,
    now: Instant,
    grace: Duration,
    wall: &Time,
) -> Vec<(String, NodeCondition)> {
    let mut out = Vec::new();
    let mut next: Option<Instant> = None;
    let mut seen = HashMap::new();
    for (name, node) in nodes {
        let Some(lease) = leases.and_then(|l| l.get(&model::node_lease_key(name))) else {
            continue;
        };
        let renew = lease["spec"]["renewTime"].as_str().map(str::to_string);
        let at = match obs.seen.remove(name) {
            Some((r, at)) if r == renew => at,
            _ => now,
        };
        let expires = at + grace;
        let stale = now >= expires;
        if !stale {
            next = Some(next.map_or(expires, |n| n.min(expires)));
        }
        if let Some(c) = ready_change(node, stale, wall) {
            out.push((name.clone(), c));
        }
        seen.insert(name.clone(), (renew, at));
    }
    obs.seen = seen;
    obs.next_expiry = next;
    out
}

/// Runs the controller once; returns the number of writes. Every node whose Ready condition
/// changes is one update of its status, all of them one decision ([`Hub::update_many`]).
pub async fn reconcile(hub: &Hub, grace: Duration, obs: &mut Observations) -> usize {
    let st = hub.state();
    let wall = model::now();
    let changes = plan(
        &st.nodes,
        st.objects.get(&Kind::Lease),
        obs,
        Instant::now(),
        grace,
        &wall,
    );
    if changes.is_empty() {
        return 0;
    }
    for (name, c) in &changes {
        tracing::info!(node = %name, status = %c.status, reason = c.reason.as_deref().unwrap_or(""), "node Ready condition changed by its lease");
    }
    let updates: Vec<Update> = changes
        .into_iter()
        .map(|(name, condition)| {
            let rv = st.resource_version(Kind::Node, &name);
            Update {
                kind: Kind::Node,
                name,
                scope: Scope::Status,
                precondition: rv,
                f: Box::new(move |cur: &Value| {
                    let mut new = cur.clone();
                    set_condition(&mut new, &condition);
                    Ok(new)
                }),
            }
        })
        .collect();
    let actor = Actor::new("controller:node-lifecycle");
    log_batch("node-lifecycle", &updates, hub.update_many(&updates, &actor).await)
}

/// Replaces (or adds) the condition of `c`'s type in a Node's JSON.
fn set_condition(node: &mut Value, c: &NodeCondition) {
    let c = serde_json::to_value(c).expect("a condition serializes");
    let conditions = &mut node["status"]["conditions"];
    if !conditions.is_array() {
        *conditions = Value::Array(Vec::new());
    }
    let list = conditions.as_array_mut().expect("an array");
    match list.iter_mut().find(|x| x["type"] == c["type"]) {
        Some(x) => *x = c,
        None => list.push(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn node(name: &str, ready: &str, reason: &str) -> (String, Arc<Node>) {
        let n = json!({"metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": ready, "reason": reason}]}});
        (name.to_string(), Arc::new(serde_json::from_value(n).unwrap()))
    }

    fn lease(node: &str, renew: &str) -> (String, Arc<Value>) {
        (
            model::node_lease_key(node),
            Arc::new(json!({"spec": {"renewTime": renew}})),
        )
    }

    /// A lease not renewed for the grace period makes its node's Ready Unknown with kube's
    /// reason and message; a renewal brings it back; a node without a lease, or NotReady for
    /// another reason, is left alone; the next expiry is the earliest fresh lease's.
    #[test]
    fn stale_leases_make_nodes_unknown_and_renewals_ready() {
        let grace = Duration::from_secs(40);
        let wall = model::now();
        let t0 = Instant::now();
        let nodes: model::Objects<Node> = [
            node("a", "True", "KubeletReady"),
            node("b", "True", "KubeletReady"),
            node("sandbox", "True", "KubeletReady"),
            node("down", "False", "KubeletNotReady"),
        ]
        .into_iter()
        .collect();
        let mut leases: model::Objects<Value> = [lease("a", "r1"), lease("b", "r1"), lease("down", "r1")]
            .into_iter()
            .collect();
        let mut obs = Observations::default();
        assert!(plan(&nodes, Some(&leases), &mut obs, t0, grace, &wall).is_empty());
        assert_eq!(obs.next_expiry(), Some(t0 + grace));
        assert!(!obs.due(t0 + grace - Duration::from_secs(1)) && obs.due(t0 + grace));

        // b renews at t0 + 30 s; at t0 + 40 s only a is stale.
        leases.insert(
            model::node_lease_key("b"),
            Arc::new(json!({"spec": {"renewTime": "r2"}})),
        );
        let t30 = t0 + Duration::from_secs(30);
        assert!(plan(&nodes, Some(&leases), &mut obs, t30, grace, &wall).is_empty());
        let changes = plan(&nodes, Some(&leases), &mut obs, t0 + grace, grace, &wall);
        let names: Vec<&str> = changes.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "down"]);
        let (_, c) = &changes[0];
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref(), c.message.as_deref()),
            (
                "Unknown",
                Some("NodeStatusUnknown"),
                Some("Kubelet stopped posting node status.")
            )
        );
        assert_eq!(c.last_transition_time.as_ref(), Some(&wall));
        assert_eq!(
            obs.next_expiry(),
            Some(t30 + grace),
            "b's lease is the one left to watch"
        );

        // a is Unknown now; its lease renewed: Ready again.
        let mut nodes = nodes;
        nodes.insert("a".into(), node("a", "Unknown", NODE_STATUS_UNKNOWN).1);
        leases.insert(
            model::node_lease_key("a"),
            Arc::new(json!({"spec": {"renewTime": "r2"}})),
        );
        let changes = plan(&nodes, Some(&leases), &mut obs, t0 + grace, grace, &wall);
        assert_eq!(changes.len(), 2, "{changes:?}");
        assert_eq!(changes[0].0, "a");
        assert_eq!(
            (changes[0].1.status.as_str(), changes[0].1.reason.as_deref()),
            ("True", Some(KUBELET_READY))
        );
        // "down" is still stale: its Ready False was not ours, but stale leases make it Unknown.
        assert_eq!(
            (changes[1].0.as_str(), changes[1].1.status.as_str()),
            ("down", "Unknown")
        );
    }

    #[test]
    fn set_condition_replaces_by_type() {
        let mut n = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "False"}]}});
        let c = NodeCondition {
            type_: "Ready".into(),
            status: "Unknown".into(),
            ..Default::default()
        };
        set_condition(&mut n, &c);
        assert_eq!(n["status"]["conditions"][0]["status"], "Unknown");
        assert_eq!(n["status"]["conditions"][1]["type"], "DiskPressure");
    }
}
