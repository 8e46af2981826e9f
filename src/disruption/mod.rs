//! Node disruption policy (MCO's NDP, mco-facts section 6): the `operator.openshift.io/v1`
//! MachineConfiguration `cluster` object, its admission rules, the defaults merged into its
//! status, and the pure planning of what a node does after writing an update.
//!
//! Owns: the kind's names ([`API_VERSION`], [`CLUSTER`], [`ACTIONS_ANNOTATION`]); the types
//! [`MachineConfiguration`] and its policies live in `model/machine_configuration.rs` and are
//! re-exported here. `admission.rs`: [`validate_machine_configuration`] (6.1); `policy.rs`:
//! [`default_cluster_policies`] and [`merge_cluster_policies`] (6.2); `plan.rs`:
//! [`calculate_actions`] (6.3) and [`drain_required`] (6.4); `registries.rs`:
//! [`registries_change_is_safe`] (6.4). No IO: the daemon carries the plan out through
//! `host::Host`.

mod admission;
mod plan;
mod policy;
mod registries;

pub use crate::model::{
    Action, ActionType, FilePolicy, MachineConfiguration, MachineConfigurationSpec, MachineConfigurationStatus,
    NodeDisruptionPolicyConfig, NodeDisruptionPolicyStatus, ServiceRef, SshKeyPolicy, UnitPolicy,
};
pub use admission::{check_action_types, check_service_name, validate_machine_configuration, validate_policy_spec};
pub use plan::{calculate_actions, closest_file_policy, drain_required, plan, reboots, Changes, Plan};
pub use policy::{default_cluster_policies, desired_status, merge_cluster_policies, policies_for};
pub use registries::registries_change_is_safe;

/// API group and version of the kind (`operator.openshift.io/v1`).
pub const API_VERSION: &str = "operator.openshift.io/v1";
/// The API group of MachineConfiguration.
pub const GROUP: &str = "operator.openshift.io";
/// The only name a MachineConfiguration may have (MCO's ValidatingAdmissionPolicy
/// `machineconfiguration-guards`).
pub const CLUSTER: &str = "cluster";
/// Node annotation (mco's own) in which the daemon records the actions it chose for the update
/// in progress, e.g. `Restart chronyd.service for rendered-worker-<hash>` (one history event, shown by `mco describe node`).
pub const ACTIONS_ANNOTATION: &str = "mco.dev/post-config-actions";

/// The rendered config an [`ACTIONS_ANNOTATION`] value was chosen for (`<actions> for
/// <config>`); `None` when the value has no such suffix.
pub fn actions_config(value: &str) -> Option<&str> {
    value.rsplit_once(" for ").map(|(_, config)| config)
}
/// The registries file whose default policy is `Special` (6.2, 6.4).
pub const REGISTRIES_CONF: &str = "/etc/containers/registries.conf";

#[cfg(test)]
mod tests;
