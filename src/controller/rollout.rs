//! Rollout (MCO's node controller, `pkg/controller/node/node_controller.go`): targets nodes at
//! their pool's rendered config within maxUnavailable.
//!
//! For each pool that is not paused and has a target: nodes that never had a config (new nodes,
//! no `currentConfig`) are given the target at once, as MCO's Machine Config Server seeds a new
//! node's first boot; then [`crate::rollout::select_candidates`] picks the Ready nodes to move,
//! and each gets `desiredConfig = target`. A pool whose nodeSelector is `{}` gets MCO's Warning
//! `SelectingAll` (a note in the log) and its nodes are left alone. A pool a RolloutPolicy
//! governs is targeted only among the nodes its gate allows ([`super::policy::Gates`]). Reads the pools' tallies in
//! the fleet index ([`crate::rollout::FleetIndex`]): a pass with nothing to move is O(pools).

use super::{log_batch, log_failure};
use crate::command::{Actor, Hub, Scope, Update};
use crate::event::EventType;
use crate::model::selector_is_empty;
use crate::model::Kind;
use crate::rollout::{max_unavailable, select_allowed, PoolTally};
use std::collections::HashMap;

/// MCO's Warning for a pool whose nodeSelector is `{}` (`pkg/controller/node/node_controller.go`).
pub const SELECTING_ALL_NODES: &str =
    "This machineconfigpool is selecting all nodes. A non-empty selector is required.";

/// The pools whose nodeSelector is exactly `{}` (present, without requirements), with their
/// uid: MCO warns `SelectingAll` and does not update their nodes.
fn selecting_all(hub: &Hub) -> Vec<(String, String)> {
    hub.state()
        .pools
        .values()
        .filter(|p| p.spec.node_selector.is_some() && selector_is_empty(p.spec.node_selector.as_ref()))
        .map(|p| {
            let uid = p.metadata.uid.clone().unwrap_or_default();
            (p.name().to_string(), uid)
        })
        .collect()
}

fn plan(hub: &Hub, gates: &super::policy::Gates) -> Vec<(String, String)> {
    let st = hub.state();
    let fleet = st.fleet(hub.keys());
    for e in fleet.errors() {
        tracing::warn!(error = %e, "node excluded from every pool");
    }
    let empty = PoolTally::default();
    let mut out = Vec::new();
    for pool in st.pools.values() {
        let target = &pool.spec.configuration.name;
        let selects_all = pool.spec.node_selector.is_some() && selector_is_empty(pool.spec.node_selector.as_ref());
        if selects_all || pool.spec.paused || target.is_empty() || !st.machine_configs.contains_key(target) {
            continue;
        }
        let tally = fleet.tally(pool.name()).unwrap_or(&empty);
        for n in &tally.fresh {
            out.push((n.clone(), target.clone()));
        }
        let running = tally.members.len() - tally.fresh.len();
        let max = match max_unavailable(pool.spec.max_unavailable.as_ref(), running) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(pool = pool.name(), error = %e, "invalid maxUnavailable; not rolling out");
                continue;
            }
        };
        let node = |name: &str| st.nodes.get(name).map(|n| &**n);
        let allowed = gates.allowed.get(pool.name());
        for n in select_allowed(target, tally, max, node, allowed) {
            out.push((n, target.clone()));
        }
    }
    out
}

/// Runs the rollout once; returns the number of writes. `warned` remembers the pools (by uid)
/// already warned about `SelectingAll`, so a pool is warned each time it starts selecting all
/// (and once after a restart), not at every pass as MCO's sync does.
pub async fn reconcile(hub: &Hub, warned: &mut HashMap<String, String>, gates: &super::policy::Gates) -> usize {
    let actor = Actor::new("controller:node");
    let key = hub.keys().desired_config();
    let mut writes = 0;
    let selecting = selecting_all(hub);
    warned.retain(|pool, _| selecting.iter().any(|(p, _)| p == pool));
    for (pool, uid) in selecting {
        if warned.get(&pool) == Some(&uid) {
            continue;
        }
        tracing::warn!(pool, "{SELECTING_ALL_NODES}");
        let r = hub
            .note(
                Kind::MachineConfigPool,
                &pool,
                EventType::PoolSelectingAll,
                SELECTING_ALL_NODES,
                &actor,
            )
            .await;
        if r.is_ok() {
            warned.insert(pool.clone(), uid);
        }
        writes += log_failure("node", &pool, r);
    }
    // Targeting is one decision however many nodes it moves (maxUnavailable 100 % moves them
    // all): one event per node, in one atomic append and one flush.
    let targets = plan(hub, gates);
    let updates: Vec<Update> = targets
        .iter()
        .map(|(node, target)| {
            tracing::info!(node, target, "Targeted node to MachineConfig");
            let key = key.clone();
            let target = target.clone();
            Update {
                kind: Kind::Node,
                name: node.clone(),
                scope: Scope::Main,
                precondition: None,
                f: Box::new(move |cur| {
                    // The hub decodes and validates the result as a Node.
                    let mut next = cur.clone();
                    next["metadata"]["annotations"][key.as_str()] = serde_json::json!(target);
                    Ok(next)
                }),
            }
        })
        .collect();
    writes += log_batch("node", &updates, hub.update_many(&updates, &actor).await);
    writes
}
