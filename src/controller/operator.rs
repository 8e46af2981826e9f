//! Operator controller for the node disruption policy (MCO `pkg/operator/sync.go`
//! `syncMachineConfiguration` -> `MergeClusterPolicies`): writes each MachineConfiguration's
//! `status.nodeDisruptionPolicyStatus.clusterPolicies` (defaults merged with the spec,
//! [`crate::disruption::merge_cluster_policies`]) and `status.observedGeneration`, only when
//! they differ.

use super::log_batch;
use crate::command::{Actor, Hub, Update};
use crate::disruption::{desired_status, MachineConfiguration};
use crate::model::Kind;

fn plan(hub: &Hub) -> Vec<MachineConfiguration> {
    let st = hub.state();
    st.machine_configurations
        .values()
        .filter_map(|m| {
            let status = desired_status(m);
            (status != m.status).then(|| MachineConfiguration {
                status,
                ..(**m).clone()
            })
        })
        .collect()
}

/// Runs the operator controller once; returns the number of writes (one append and one flush
/// for the whole sweep).
pub async fn reconcile(hub: &Hub) -> usize {
    let actor = Actor::new("controller:operator");
    let updates: Vec<Update> = plan(hub)
        .into_iter()
        .map(|m| {
            let name = m.metadata.name.clone().unwrap_or_default();
            Update::status_of(
                Kind::MachineConfiguration,
                name,
                &m,
                m.metadata.resource_version.as_deref(),
            )
        })
        .collect();
    if updates.is_empty() {
        return 0;
    }
    log_batch("operator", &updates, hub.update_many(&updates, &actor).await)
}
