//! `policy.mco.dev/v1` RolloutPolicy: mco's own rollout policy for the MachineConfigPools its
//! `spec.poolSelector` matches (maintenance windows, canary waves, self-healing; issue 30).
//!
//! Owns the serde shapes only, cluster-scoped, kept as JSON in the projection like the other
//! generic kinds. MCO's kinds are not changed by it: the policy writes only what a user could
//! (a pool's `spec.paused`, a node's `desiredConfig`) and a pool condition of its own type
//! ([`POLICY_CONDITION`]). The rules (windows, waves, bake times, heal caps) and the admission
//! are in [`crate::rollout::policy`].

use super::machine_config::null_default;
use super::{IntOrString, LabelSelector, ObjectMeta, PoolCondition};
use serde::{Deserialize, Serialize};

/// The API group of mco's own policy kinds, named like mco's other groups (`history.mco.dev`,
/// `auth.mco.dev`, `metrics.mco.dev`): a subdomain of `mco.dev` per surface.
pub const POLICY_GROUP: &str = "policy.mco.dev";

/// The pool condition the policy sets on each pool it governs: `True` while it holds back a
/// node that needs the pool's target (outside a window, canaries updating or baking, a failed
/// canary), `False` otherwise; the message names the window state and the next window's start.
/// Prefixed with the group (a Kubernetes condition type may be `domain/CamelCase`), so it can
/// never be taken for one of MCO's own condition types.
pub const POLICY_CONDITION: &str = "policy.mco.dev/RolloutHeld";

/// A RolloutPolicy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutPolicy {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_default")]
    pub spec: RolloutPolicySpec,
    #[serde(default, deserialize_with = "null_default")]
    pub status: RolloutPolicyStatus,
}

/// `spec` of a RolloutPolicy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutPolicySpec {
    /// The pools governed, matched against the pools' labels (an empty or absent selector
    /// matches nothing, as a pool's nodeSelector in MCO).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_selector: Option<LabelSelector>,
    /// When nodes may be newly targeted; none: at any time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maintenance_windows: Vec<MaintenanceWindow>,
    /// The first wave that proves a change before the rest of the pool takes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<Canary>,
    /// Returning nodes stuck Degraded on an abandoned render to the pool's target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_healing: Option<SelfHealing>,
}

/// A recurring maintenance window: it opens at each time `schedule` names in `timeZone` and
/// stays open for `duration` of elapsed time.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceWindow {
    /// A 5-field cron schedule (minute hour day-of-month month day-of-week), as a CronJob's.
    #[serde(default)]
    pub schedule: String,
    /// How long each window stays open: a Go duration (`4h`, `90m`, `1h30m`).
    #[serde(default)]
    pub duration: String,
    /// An IANA time zone (`Europe/Berlin`); absent: UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
}

/// The canary wave.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Canary {
    /// How many of the nodes to update are canaries: a count or a percentage of the pool's
    /// nodes, rounded up (`10%` of 3 nodes is 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<IntOrString>,
    /// How long every canary must stay Done, Ready and not Degraded before the rest of the
    /// pool is targeted: a Go duration; absent: no wait beyond that.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bake_time: Option<String>,
}

/// Self-healing settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SelfHealing {
    /// Off unless true.
    #[serde(default)]
    pub enabled: bool,
    /// At most this many heals of one node per `period` (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_heals_per_node: Option<i32>,
    /// The period of the cap: a Go duration (default `1h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<String>,
}

/// `status` of a RolloutPolicy: what it decided, so that its decisions stand across passes
/// and restarts (the canaries chosen for a target, when they became healthy, the pause it
/// made, the heals it did).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutPolicyStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// One entry per governed pool, by pool name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<PoolProgress>,
    /// Recent heals, by node (times within the cap's period).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub heals: Vec<NodeHeals>,
    /// `Ready` (the spec is in force) and its message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<PoolCondition>,
}

/// The policy's record of one pool's rollout to one target.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PoolProgress {
    pub pool: String,
    /// The rendered config this record is about (the pool's `spec.configuration.name`).
    #[serde(default)]
    pub target: String,
    /// `Waiting` (outside a window), `Canary`, `Baking`, `Proceeding`, `CanaryFailed`, `Done`.
    #[serde(default)]
    pub phase: String,
    /// The canaries chosen for `target` (empty without a canary wave).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub canaries: Vec<String>,
    /// Since when every canary has been Done, Ready and not Degraded on `target` (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canaries_healthy_since: Option<String>,
    /// The policy paused the pool for `target` (set once: a user who resumes it is not
    /// overruled for the same target).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<String>,
    /// The start of the next maintenance window when outside one (RFC 3339, in its zone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_window: Option<String>,
}

/// The recent heals of one node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeHeals {
    pub node: String,
    /// When each heal was made (RFC 3339 UTC).
    #[serde(default)]
    pub times: Vec<String>,
}

impl RolloutPolicy {
    /// The printer columns after the name (`kubectl get rp`, `mco get rp`): POOLS (each
    /// governed pool with its phase, `worker:Baking`), WINDOWS (how many), CANARY (its size).
    pub fn columns(&self) -> [String; 3] {
        let none = || "<none>".to_string();
        let pools: Vec<String> = self
            .status
            .pools
            .iter()
            .map(|p| format!("{}:{}", p.pool, p.phase))
            .collect();
        let canary = match self.spec.canary.as_ref().map(|c| c.size.clone()) {
            None => none(),
            Some(None) => "1".to_string(),
            Some(Some(IntOrString::Int(i))) => i.to_string(),
            Some(Some(IntOrString::String(s))) => s,
        };
        [
            if pools.is_empty() { none() } else { pools.join(",") },
            self.spec.maintenance_windows.len().to_string(),
            canary,
        ]
    }
}
