//! Pool status controller (MCO `pkg/controller/node/status.go`): counts and conditions of every
//! pool from its nodes, and the governing RolloutPolicy's condition, written only when they
//! changed. Reads the pools' tallies in the fleet
//! index ([`crate::rollout::FleetIndex`]): a pass is O(pools + degraded nodes).

use super::log_batch;
use crate::command::{Actor, Hub, Update};
use crate::model::{Kind, MachineConfigPool, Time, POLICY_CONDITION};
use crate::rollout::{pool_status_of, set_condition, ConditionStatus, PoolTally};

fn plan(hub: &Hub, gates: &super::policy::Gates, now: jiff::Timestamp) -> Vec<(String, MachineConfigPool)> {
    let st = hub.state();
    let fleet = st.fleet(hub.keys());
    let empty = PoolTally::default();
    let now = Time(now);
    st.pools
        .values()
        .filter_map(|pool| {
            let tally = fleet.tally(pool.name()).unwrap_or(&empty);
            let mut status = pool_status_of(pool, tally, now.clone());
            // The governing RolloutPolicy's condition, removed when none governs the pool.
            match gates.conditions.get(pool.name()) {
                Some((held, reason, message)) => {
                    let s = if *held {
                        ConditionStatus::True
                    } else {
                        ConditionStatus::False
                    };
                    set_condition(&mut status.conditions, POLICY_CONDITION, s, reason, message, &now);
                }
                None => status.conditions.retain(|c| c.type_ != POLICY_CONDITION),
            }
            (status != pool.status).then(|| {
                let mut p = MachineConfigPool::clone(pool);
                p.status = status;
                (pool.name().to_string(), p)
            })
        })
        .collect()
}

/// Runs the status controller once; returns the number of writes. The sweep is one decision:
/// every pool whose status changed gets its event in one atomic append and one flush.
pub async fn reconcile(hub: &Hub, gates: &super::policy::Gates, now: jiff::Timestamp) -> usize {
    let actor = Actor::new("controller:status");
    let updates: Vec<Update> = plan(hub, gates, now)
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
