//! Pool status controller (MCO `pkg/controller/node/status.go`): counts and conditions of every
//! pool from its nodes, written only when they changed.

use super::log_batch;
use crate::command::{Actor, Hub, Update};
use crate::model::{self, Kind, MachineConfigPool, Node};
use crate::rollout::{pool_status, pools_for_nodes};

fn plan(hub: &Hub) -> Vec<(String, MachineConfigPool)> {
    let st = hub.state();
    let pools: Vec<&MachineConfigPool> = st.pools.values().map(|o| &**o).collect();
    let nodes: Vec<&Node> = st.nodes.values().map(|o| &**o).collect();
    let membership = pools_for_nodes(&pools, &nodes);
    let now = model::now();
    pools
        .into_iter()
        .filter_map(|pool| {
            let members: Vec<&Node> = membership
                .nodes_of(pool.name())
                .iter()
                .filter_map(|n| st.nodes.get(n).map(|n| &**n))
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

/// Runs the status controller once; returns the number of writes. The sweep is one decision:
/// every pool whose status changed gets its event in one atomic append and one flush.
pub async fn reconcile(hub: &Hub) -> usize {
    let actor = Actor::new("controller:status");
    let updates: Vec<Update> = plan(hub)
        .into_iter()
        .map(|(name, pool)| {
            Update::status_of(
                Kind::MachineConfigPool,
                name,
                &pool,
                pool.metadata.resource_version.as_deref(),
            )
        })
        .collect();
    if updates.is_empty() {
        return 0;
    }
    log_batch("status", &updates, hub.update_many(&updates, &actor).await)
}
