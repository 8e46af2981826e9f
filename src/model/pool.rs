//! The MachineConfigPool kind.

use super::machine_config::null_default;
use super::{IntOrString, LabelSelector, ObjectMeta, Time};
use serde::{Deserialize, Serialize};

/// A MachineConfigPool: a set of nodes (nodeSelector) sharing one rendered config built from the
/// MachineConfigs its machineConfigSelector matches.
///
/// Shape as in `vendor/github.com/openshift/api/machineconfiguration/v1/types.go`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigPool {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_default")]
    pub spec: MachineConfigPoolSpec,
    #[serde(default, deserialize_with = "null_default")]
    pub status: MachineConfigPoolStatus,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigPoolSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_config_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<LabelSelector>,
    #[serde(default, deserialize_with = "null_default")]
    pub paused: bool,
    /// Int or percent (`"50%"`); default 1. See [`crate::rollout::max_unavailable`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// The rendered config the pool targets, written by the render controller.
    #[serde(default, deserialize_with = "null_default")]
    pub configuration: PoolConfiguration,
}

/// `spec.configuration` / `status.configuration`: a rendered config name and its sources.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PoolConfiguration {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub name: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub source: Vec<ObjectReference>,
}

/// A reference to a source MachineConfig (`{apiVersion, kind, name}`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub name: String,
}

/// `status` of a pool, computed by the pool-status controller (MCO `pkg/controller/node/status.go`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigPoolStatus {
    #[serde(default, deserialize_with = "null_default")]
    pub observed_generation: i64,
    #[serde(default, deserialize_with = "null_default")]
    pub configuration: PoolConfiguration,
    #[serde(default, deserialize_with = "null_default")]
    pub machine_count: i32,
    #[serde(default, deserialize_with = "null_default")]
    pub updated_machine_count: i32,
    #[serde(default, deserialize_with = "null_default")]
    pub ready_machine_count: i32,
    #[serde(default, deserialize_with = "null_default")]
    pub unavailable_machine_count: i32,
    #[serde(default, deserialize_with = "null_default")]
    pub degraded_machine_count: i32,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<PoolCondition>,
}

/// A pool condition (`Updated`, `Updating`, `Degraded`, `NodeDegraded`, `RenderDegraded`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PoolCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default, deserialize_with = "null_default")]
    pub reason: String,
    #[serde(default, deserialize_with = "null_default")]
    pub message: String,
}

impl MachineConfigPool {
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }

    /// The condition of the given type, if set.
    pub fn condition(&self, type_: &str) -> Option<&PoolCondition> {
        self.status.conditions.iter().find(|c| c.type_ == type_)
    }

    /// `"True"`, `"False"` or `""` for the given condition type (the printer columns).
    pub fn condition_status(&self, type_: &str) -> &str {
        self.condition(type_)
            .map(|c| c.status.as_str())
            .unwrap_or("")
    }
}
