//! Operator controller for the node disruption policy (MCO `pkg/operator/sync.go`
//! `syncMachineConfiguration` -> `MergeClusterPolicies`): writes each MachineConfiguration's
//! `status.nodeDisruptionPolicyStatus.clusterPolicies` (defaults merged with the spec,
//! [`crate::disruption::merge_cluster_policies`]) and `status.observedGeneration`, only when
//! they differ.

use super::log_failure;
use crate::command::{Actor, Hub, Scope};
use crate::disruption::{desired_status, MachineConfiguration};
use crate::model::Kind;

fn plan(hub: &Hub) -> Vec<MachineConfiguration> {
    let st = hub.state();
    st.machine_configurations
        .values()
        .filter_map(|m| {
            let status = desired_status(m);
            (status != m.status).then(|| MachineConfiguration { status, ..m.clone() })
        })
        .collect()
}

/// Runs the operator controller once; returns the number of writes.
pub async fn reconcile(hub: &Hub) -> usize {
    let actor = Actor::new("controller:operator");
    let mut writes = 0;
    for m in plan(hub) {
        let name = m.metadata.name.clone().unwrap_or_default();
        let obj = serde_json::to_value(&m).expect("serializes");
        let rv = m.metadata.resource_version.as_deref().and_then(|s| s.parse().ok());
        let r = hub
            .update(Kind::MachineConfiguration, &name, Scope::Status, rv, &actor, |_| {
                Ok(obj.clone())
            })
            .await;
        writes += log_failure("operator", &name, r);
    }
    writes
}
