//! The fleet index: what the node, drain and pool-status controllers read about every node,
//! parsed once when the node changes and tallied per pool, so that a controller pass costs
//! O(pools) plus what it acts on, not O(nodes) (issue 13, "controllers cost what changed").
//!
//! Owns [`NodeFacts`] (one node's annotations, readiness, primary pool and drain request),
//! [`PoolTally`] (a pool's members counted by the predicates of MCO's node controller and
//! status sync, `pkg/controller/node/status.go`) and [`FleetIndex`] (both, kept by
//! [`crate::state::State::apply`] in the hub's projection). The scan functions of
//! [`crate::rollout`] build the same tally from a node list ([`PoolTally::of`]), so the index
//! and a full scan share one definition of every count; [`FleetIndex::build`] from scratch is
//! what the incremental index must always equal.
//!
//! Pure: no IO. Costs: a node change is O(pools + log nodes); a pool created, deleted or given
//! another nodeSelector re-resolves every node (O(nodes × pools), as MCO re-lists its nodes);
//! any other pool change (status, target, maxUnavailable) touches nothing here, since no
//! tally depends on the pool's target.

use super::{is_degraded_state, primary_pool};
use crate::model::Objects;
use crate::model::{node_is_ready, Keys, MachineConfigPool, Node, NodeAnnotations};
use imbl::{OrdMap, OrdSet};
use std::sync::Arc;

/// One node as the controllers see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeFacts {
    /// The node's primary pool ([`crate::rollout::pools_for_nodes`]); `None` when unmanaged.
    pub pool: Option<String>,
    /// Why the node is in no pool (it matches several custom pools), as MCO logs it.
    pub error: Option<String>,
    /// The six machineconfiguration annotations (absent ones empty).
    pub annotations: NodeAnnotations,
    /// MCO `CheckNodeReady` ([`node_is_ready`]; a cordoned node is not ready).
    pub ready: bool,
}

impl NodeFacts {
    /// Reads `node` once: its annotations under `keys`, readiness and primary pool among `pools`.
    pub fn of(node: &Node, keys: &Keys, pools: &[&MachineConfigPool]) -> NodeFacts {
        let (pool, error) = match primary_pool(pools, node) {
            Ok(p) => (p.map(str::to_string), None),
            Err(e) => (None, Some(e)),
        };
        NodeFacts {
            pool,
            error,
            annotations: NodeAnnotations::read(node, keys),
            ready: node_is_ready(node),
        }
    }

    fn view(&self) -> NodeAnnotations<&str> {
        let a = &self.annotations;
        NodeAnnotations {
            desired_config: &a.desired_config,
            current_config: &a.current_config,
            state: &a.state,
            reason: &a.reason,
            desired_drain: &a.desired_drain,
            last_applied_drain: &a.last_applied_drain,
        }
    }

    /// No config yet (no currentConfig and no desiredConfig): a first boot the node controller
    /// seeds at once.
    pub fn is_fresh(&self) -> bool {
        self.annotations.current_config.is_empty() && self.annotations.desired_config.is_empty()
    }

    /// MCO NodeDone: [`super::is_node_done`].
    pub fn is_done(&self) -> bool {
        super::done(&self.view())
    }

    /// MCO IsNodeMCDFailing: [`super::is_node_mcd_failing`].
    pub fn is_mcd_failing(&self) -> bool {
        super::mcd_failing(&self.view())
    }

    /// MCO IsUnavailableForUpdate: [`super::is_node_unavailable`].
    pub fn is_unavailable(&self) -> bool {
        super::unavailable(&self.view(), self.ready)
    }

    /// State `Degraded` or `Unreconcilable`.
    pub fn is_degraded(&self) -> bool {
        is_degraded_state(&self.annotations.state)
    }

    /// The node's pending drain request (`desiredDrain` set and not yet `lastAppliedDrain`).
    pub fn drain_request(&self) -> Option<&str> {
        let a = &self.annotations;
        (!a.desired_drain.is_empty() && a.desired_drain != a.last_applied_drain).then_some(a.desired_drain.as_str())
    }
}

/// The nodes of one pool that desire one rendered config.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DesiredTally {
    /// Nodes with this desiredConfig.
    pub nodes: usize,
    /// Of them, done ([`NodeFacts::is_done`]): "updated" when this is the pool's target.
    pub done: usize,
    /// Of them, done and Ready.
    pub done_ready: usize,
    /// Of them, the MCD is failing ([`NodeFacts::is_mcd_failing`]).
    pub failing: usize,
    /// The Ready ones, by name: the node controller's candidates when this is not the target.
    pub ready: OrdSet<String>,
}

/// A pool's nodes, counted. Independent of the pool's target: the counts against a target
/// are read from [`PoolTally::desiring`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolTally {
    /// Every node whose primary pool this is, by name.
    pub members: OrdSet<String>,
    /// Members unavailable for update ([`NodeFacts::is_unavailable`]).
    pub unavailable: usize,
    /// Members without any config yet ([`NodeFacts::is_fresh`]).
    pub fresh: OrdSet<String>,
    /// Members reporting `Degraded` or `Unreconcilable`: name → the reason annotation.
    pub degraded: OrdMap<String, String>,
    /// Members by desiredConfig (`""` for none).
    pub by_desired: OrdMap<String, DesiredTally>,
}

impl PoolTally {
    /// The tally of `nodes` (a pool's members) read with `keys`: what the index keeps, built
    /// by a scan.
    pub fn of(nodes: &[&Node], keys: &Keys) -> PoolTally {
        let mut t = PoolTally::default();
        for n in nodes {
            let name = n.metadata.name.as_deref().unwrap_or("");
            t.add(name, &NodeFacts::of(n, keys, &[]));
        }
        t
    }

    /// Members counted against rendered config `target`.
    pub fn desiring(&self, target: &str) -> DesiredTally {
        self.by_desired.get(target).cloned().unwrap_or_default()
    }

    fn add(&mut self, name: &str, f: &NodeFacts) {
        self.members.insert(name.to_string());
        if f.is_unavailable() {
            self.unavailable += 1;
        }
        if f.is_fresh() {
            self.fresh.insert(name.to_string());
        }
        if f.is_degraded() {
            self.degraded.insert(name.to_string(), f.annotations.reason.clone());
        }
        let d = self.by_desired.entry(f.annotations.desired_config.clone()).or_default();
        d.nodes += 1;
        d.done += usize::from(f.is_done());
        d.done_ready += usize::from(f.is_done() && f.ready);
        d.failing += usize::from(f.is_mcd_failing());
        if f.ready {
            d.ready.insert(name.to_string());
        }
    }

    fn remove(&mut self, name: &str, f: &NodeFacts) {
        self.members.remove(name);
        if f.is_unavailable() {
            self.unavailable -= 1;
        }
        self.fresh.remove(name);
        self.degraded.remove(name);
        let desired = &f.annotations.desired_config;
        let Some(d) = self.by_desired.get_mut(desired) else {
            return;
        };
        d.nodes -= 1;
        d.done -= usize::from(f.is_done());
        d.done_ready -= usize::from(f.is_done() && f.ready);
        d.failing -= usize::from(f.is_mcd_failing());
        d.ready.remove(name);
        if d.nodes == 0 {
            self.by_desired.remove(desired);
        }
    }
}

/// Every node's [`NodeFacts`] and every pool's [`PoolTally`], kept by the projection's folds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetIndex {
    keys: Keys,
    facts: OrdMap<String, Arc<NodeFacts>>,
    /// Every pool, with an empty tally when it has no node.
    pools: OrdMap<String, Arc<PoolTally>>,
    /// Pending drain requests: node → desiredDrain.
    drains: OrdMap<String, String>,
}

impl FleetIndex {
    /// The index of `nodes` in `pools`, built from scratch (O(nodes × pools)).
    pub fn build(keys: &Keys, pools: &Objects<MachineConfigPool>, nodes: &Objects<Node>) -> FleetIndex {
        let mut ix = FleetIndex {
            keys: keys.clone(),
            facts: OrdMap::new(),
            pools: pools.keys().map(|p| (p.clone(), Arc::default())).collect(),
            drains: OrdMap::new(),
        };
        let pools: Vec<&MachineConfigPool> = pools.values().map(|p| &**p).collect();
        for (name, node) in nodes {
            ix.set(name, Some(NodeFacts::of(node, keys, &pools)));
        }
        ix
    }

    /// The annotation keys the facts were read with.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// Node `name` is now `node` (`None`: deleted). O(pools + log nodes).
    pub fn node_changed(&mut self, name: &str, node: Option<&Node>, pools: &Objects<MachineConfigPool>) {
        let facts = node.map(|n| {
            let pools: Vec<&MachineConfigPool> = pools.values().map(|p| &**p).collect();
            NodeFacts::of(n, &self.keys, &pools)
        });
        self.set(name, facts);
    }

    /// A pool went from `before` to `after` (`None`: absent). Only a pool created, deleted or
    /// given another nodeSelector moves nodes; then every node is resolved again.
    pub fn pool_changed(
        &mut self,
        before: Option<&MachineConfigPool>,
        after: Option<&MachineConfigPool>,
        pools: &Objects<MachineConfigPool>,
        nodes: &Objects<Node>,
    ) {
        let same_selector = match (before, after) {
            (Some(b), Some(a)) => b.spec.node_selector == a.spec.node_selector,
            (None, None) => true,
            _ => false,
        };
        if same_selector {
            return;
        }
        *self = FleetIndex::build(&self.keys, pools, nodes);
    }

    /// Node `name`'s facts.
    pub fn facts(&self, name: &str) -> Option<&NodeFacts> {
        self.facts.get(name).map(|f| &**f)
    }

    /// Pool `name`'s tally (`None` for an unknown pool).
    pub fn tally(&self, pool: &str) -> Option<&PoolTally> {
        self.pools.get(pool).map(|t| &**t)
    }

    /// Nodes in no pool because they match several custom pools, with MCO's message.
    pub fn errors(&self) -> impl Iterator<Item = &str> {
        self.facts.values().filter_map(|f| f.error.as_deref())
    }

    /// Pending drain requests (node, desiredDrain), by node name.
    pub fn drain_requests(&self) -> impl Iterator<Item = (&str, &str)> {
        self.drains.iter().map(|(n, r)| (n.as_str(), r.as_str()))
    }

    fn set(&mut self, name: &str, facts: Option<NodeFacts>) {
        if let Some(old) = self.facts.remove(name) {
            if let Some(t) = old.pool.as_ref().and_then(|p| self.pools.get_mut(p)) {
                Arc::make_mut(t).remove(name, &old);
            }
            self.drains.remove(name);
        }
        let Some(f) = facts else {
            return;
        };
        if let Some(t) = f.pool.as_ref().and_then(|p| self.pools.get_mut(p)) {
            Arc::make_mut(t).add(name, &f);
        }
        if let Some(r) = f.drain_request() {
            self.drains.insert(name.to_string(), r.to_string());
        }
        self.facts.insert(name.to_string(), Arc::new(f));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, EventType};
    use crate::rollout::{pool_status, pools_for_nodes, select_candidates, select_from_tally};
    use crate::state::State;
    use proptest::prelude::*;
    use serde_json::json;

    const CONFIGS: [&str; 3] = ["", "rendered-worker-a", "rendered-worker-b"];
    const STATES: [&str; 5] = ["", "Done", "Working", "Degraded", "Unreconcilable"];
    const ROLES: [&str; 4] = ["worker", "master", "infra", "gpu"];

    /// One change to the fleet, as the log would record it.
    #[derive(Clone, Debug)]
    enum Op {
        /// Node `n` (of 8) written with these roles (bit set over [`ROLES`]), annotations,
        /// readiness, cordon and drain request.
        Node {
            n: u8,
            roles: u8,
            current: usize,
            desired: usize,
            state: usize,
            ready: bool,
            cordoned: bool,
            drain: bool,
        },
        DeleteNode(u8),
        /// Pool of role `r` written selecting that role, or selecting `{}` when `all`.
        Pool {
            r: usize,
            all: bool,
        },
        DeletePool(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u8..8, 0u8..16, 0..3usize, 0..3usize, 0..5usize, any::<bool>(), any::<bool>(), any::<bool>())
                .prop_map(|(n, roles, current, desired, state, ready, cordoned, drain)| Op::Node {
                    n, roles, current, desired, state, ready, cordoned, drain
                }),
            1 => (0u8..8).prop_map(Op::DeleteNode),
            1 => (0..4usize, any::<bool>()).prop_map(|(r, all)| Op::Pool { r, all }),
            1 => (0..4usize).prop_map(Op::DeletePool),
        ]
    }

    fn event(seq: u64, op: &Op, keys: &Keys) -> Event {
        let (t, kind, name, body) = match op {
            Op::Node {
                n,
                roles,
                current,
                desired,
                state,
                ready,
                cordoned,
                drain,
            } => {
                let mut labels = serde_json::Map::new();
                for (i, r) in ROLES.iter().enumerate() {
                    if roles & (1 << i) != 0 {
                        labels.insert(format!("node-role.kubernetes.io/{r}"), json!(""));
                    }
                }
                // Zones and ages that disagree with the name order (a third zone-less).
                if n % 3 != 0 {
                    labels.insert(crate::rollout::ZONE_LABEL.into(), json!(format!("zone-{}", n % 2)));
                }
                let created = format!("2024-01-0{}T00:00:00Z", 9 - (n % 4));
                let name = format!("node-{n}");
                let body = json!({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": labels, "creationTimestamp": created, "annotations": {
                        keys.current_config(): CONFIGS[*current], keys.desired_config(): CONFIGS[*desired],
                        keys.state(): STATES[*state], keys.reason(): format!("reason of {name}"),
                        keys.desired_drain(): if *drain { "drain-x" } else { "" },
                    }},
                    "spec": {"unschedulable": cordoned},
                    "status": {"conditions": [{"type": "Ready", "status": if *ready { "True" } else { "False" }}]}});
                (EventType::NodeUpdated, "Node", name, body)
            }
            Op::DeleteNode(n) => (EventType::NodeDeleted, "Node", format!("node-{n}"), json!({})),
            Op::Pool { r, all } => {
                let selector = if *all {
                    json!({})
                } else {
                    json!({"matchLabels": {format!("node-role.kubernetes.io/{}", ROLES[*r]): ""}})
                };
                let body = json!({"apiVersion": "machineconfiguration.openshift.io/v1",
                    "kind": "MachineConfigPool", "metadata": {"name": ROLES[*r]},
                    "spec": {"nodeSelector": selector, "configuration": {"name": CONFIGS[1 + (seq as usize % 2)]}}});
                (EventType::PoolUpdated, "MachineConfigPool", ROLES[*r].to_string(), body)
            }
            Op::DeletePool(r) => (
                EventType::PoolDeleted,
                "MachineConfigPool",
                ROLES[*r].to_string(),
                json!({}),
            ),
        };
        Event::for_test(seq, t, kind, &name, &body)
    }

    proptest! {
        /// After any sequence of node and pool changes, the index kept by the folds equals the
        /// one built from scratch, and every controller answer read from it equals the answer
        /// of a full scan of the nodes: membership, pool status, candidates, drain requests.
        #[test]
        fn the_kept_index_answers_as_a_full_scan(ops in proptest::collection::vec(op(), 1..40)) {
            let keys = Keys::default();
            let mut st = State::default();
            st.keep_index(&keys);
            for (i, op) in ops.iter().enumerate() {
                st.apply(&event(i as u64 + 1, op, &keys));
                let kept = st.fleet(&keys).into_owned();
                prop_assert_eq!(&kept, &FleetIndex::build(&keys, &st.pools, &st.nodes));

                let pools: Vec<&MachineConfigPool> = st.pools.values().map(|p| &**p).collect();
                let nodes: Vec<&Node> = st.nodes.values().map(|n| &**n).collect();
                let membership = pools_for_nodes(&pools, &nodes);
                let errors: Vec<&str> = kept.errors().collect();
                prop_assert_eq!(errors, membership.errors.iter().map(String::as_str).collect::<Vec<_>>());
                let now = crate::model::now();
                for pool in &pools {
                    let members: Vec<&Node> = membership.nodes_of(pool.name()).iter().map(|n| &*st.nodes[n]).collect();
                    let tally = kept.tally(pool.name()).unwrap();
                    prop_assert_eq!(
                        tally.members.iter().map(String::as_str).collect::<Vec<_>>(),
                        membership.nodes_of(pool.name()).iter().map(String::as_str).collect::<Vec<_>>()
                    );
                    prop_assert_eq!(
                        crate::rollout::pool_status_of(pool, tally, now.clone()),
                        pool_status(pool, &members, &keys, now.clone())
                    );
                    let target = pool.spec.configuration.name.as_str();
                    let running: Vec<&Node> = members
                        .iter()
                        .copied()
                        .filter(|n| !kept.facts(n.metadata.name.as_deref().unwrap()).unwrap().is_fresh())
                        .collect();
                    for max in 1..=4 {
                        prop_assert_eq!(
                            select_from_tally(target, tally, max, |n| st.nodes.get(n).map(|n| &**n)),
                            select_candidates(target, &running, &keys, max),
                            "pool {} max {}", pool.name(), max
                        );
                    }
                }
                let drains: Vec<(String, String)> = nodes
                    .iter()
                    .filter_map(|n| {
                        let a = NodeAnnotations::view(n, &keys);
                        (!a.desired_drain.is_empty() && a.desired_drain != a.last_applied_drain)
                            .then(|| (n.metadata.name.clone().unwrap(), a.desired_drain.to_string()))
                    })
                    .collect();
                let kept_drains: Vec<(String, String)> =
                    kept.drain_requests().map(|(n, r)| (n.to_string(), r.to_string())).collect();
                prop_assert_eq!(kept_drains, drains);
            }
        }
    }

    /// A snapshot taken while the index is kept shares it, and a fold into the live state
    /// leaves the snapshot's index as it was.
    #[test]
    fn folds_leave_a_snapshots_index_alone() {
        let keys = Keys::default();
        let mut st = State::default();
        st.keep_index(&keys);
        let op = |n, desired| Op::Node {
            n,
            roles: 1,
            current: 1,
            desired,
            state: 1,
            ready: true,
            cordoned: false,
            drain: false,
        };
        st.apply(&event(1, &Op::Pool { r: 0, all: false }, &keys));
        st.apply(&event(2, &op(0, 1), &keys));
        let snapshot = st.clone();
        st.apply(&event(3, &op(0, 2), &keys));
        let before = snapshot.fleet(&keys);
        let after = st.fleet(&keys);
        assert_eq!(before.tally("worker").unwrap().desiring("rendered-worker-a").nodes, 1);
        assert_eq!(after.tally("worker").unwrap().desiring("rendered-worker-a").nodes, 0);
        assert_eq!(after.tally("worker").unwrap().desiring("rendered-worker-b").nodes, 1);
    }
}
