//! Pool status controller (MCO `pkg/controller/node/status.go`): counts and conditions of every
//! pool from its nodes, written only when they changed.

use super::log_failure;
use crate::command::{Actor, Hub, Scope};
use crate::model::{self, Kind, MachineConfigPool, Node};
use crate::rollout::{pool_status, pools_for_nodes};

fn plan(hub: &Hub) -> Vec<(String, MachineConfigPool)> {
    let st = hub.state();
    let pools: Vec<&MachineConfigPool> = st.pools.values().collect();
    let nodes: Vec<&Node> = st.nodes.values().collect();
    let membership = pools_for_nodes(&pools, &nodes);
    let now = model::now();
    pools
        .into_iter()
        .filter_map(|pool| {
            let members: Vec<&Node> = membership
                .nodes_of(pool.name())
                .iter()
                .filter_map(|n| st.nodes.get(n))
                .collect();
            let status = pool_status(pool, &members, hub.keys(), now.clone());
            (status != pool.status).then(|| {
                let mut p = pool.clone();
                p.status = status;
                (pool.name().to_string(), p)
            })
        })
        .collect()
}

/// Runs the status controller once; returns the number of writes.
pub async fn reconcile(hub: &Hub) -> usize {
    let actor = Actor::new("controller:status");
    let mut writes = 0;
    for (name, pool) in plan(hub) {
        let obj = serde_json::to_value(&pool).expect("serializes");
        let rv = pool.metadata.resource_version.as_deref().and_then(|s| s.parse().ok());
        let r = hub
            .update(Kind::MachineConfigPool, &name, Scope::Status, rv, &actor, |_| {
                Ok(obj.clone())
            })
            .await;
        writes += log_failure("status", &name, r);
    }
    writes
}
