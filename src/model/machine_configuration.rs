//! The MachineConfiguration kind (`operator.openshift.io/v1`, `cluster` only) and its node
//! disruption policy types; the rules that read them are in [`crate::disruption`].

use super::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The MachineConfiguration kind (`vendor/github.com/openshift/api/operator/v1/
/// types_machineconfiguration.go`). Fields mco does not act on (managementState, logLevel,
/// managedBootImages, ...) are kept as given in `other`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfiguration {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: MachineConfigurationSpec,
    #[serde(default)]
    pub status: MachineConfigurationStatus,
}

/// `spec` of a MachineConfiguration.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigurationSpec {
    /// The user's node disruption policies (merged over the defaults into the status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_disruption_policy: Option<NodeDisruptionPolicyConfig>,
    /// Every other spec field, as given.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `status` of a MachineConfiguration, written by mco's operator controller.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigurationStatus {
    /// The `metadata.generation` the status was computed from (the daemon waits for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_disruption_policy_status: Option<NodeDisruptionPolicyStatus>,
    /// Conditions and other status fields, as given.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `status.nodeDisruptionPolicyStatus`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeDisruptionPolicyStatus {
    /// Defaults merged with the user's policies (6.2).
    #[serde(default)]
    pub cluster_policies: NodeDisruptionPolicyConfig,
}

/// `spec.nodeDisruptionPolicy` and `status.nodeDisruptionPolicyStatus.clusterPolicies` (one
/// shape; the status may also hold [`ActionType::Special`]).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeDisruptionPolicyConfig {
    /// Per file or directory path (at most 50 in a spec, 100 in the status).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FilePolicy>,
    /// Per unit name (at most 50 in a spec, 100 in the status).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<UnitPolicy>,
    /// For SSH key and password changes.
    #[serde(default, skip_serializing_if = "SshKeyPolicy::is_empty")]
    pub sshkey: SshKeyPolicy,
}

/// Actions for changes to the file at `path` or, for a directory, anything under it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct FilePolicy {
    /// Absolute path of a file, or of a directory whose files it covers.
    pub path: String,
    /// Actions in the order they run.
    #[serde(default)]
    pub actions: Vec<Action>,
}

/// Actions for changes to the systemd unit `name` (its dropins included).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct UnitPolicy {
    /// Unit name with its suffix (`chronyd.service`).
    pub name: String,
    /// Actions in the order they run.
    #[serde(default)]
    pub actions: Vec<Action>,
}

/// Actions for any SSH key (or password hash) change.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct SshKeyPolicy {
    /// Actions in the order they run.
    #[serde(default)]
    pub actions: Vec<Action>,
}

impl SshKeyPolicy {
    fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }
}

/// One action: `{type, reload: {serviceName}, restart: {serviceName}}`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Action {
    /// `type`.
    #[serde(rename = "type")]
    pub kind: ActionType,
    /// The service to reload; required iff `type` is Reload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reload: Option<ServiceRef>,
    /// The service to restart; required iff `type` is Restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<ServiceRef>,
}

/// `{serviceName: crio.service}`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceRef {
    /// `${NAME}${SERVICETYPE}`, at most 255 characters ([`check_service_name`]).
    pub service_name: String,
}

/// The action types (`NodeDisruptionPolicyStatusActionType`); `Special` is status-only.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActionType {
    /// Drain and reboot (the default for any change no policy matches).
    Reboot,
    /// Drain before writing; no reboot.
    Drain,
    /// `systemctl reload <reload.serviceName>`.
    Reload,
    /// `systemctl restart <restart.serviceName>`.
    Restart,
    /// `systemctl daemon-reload`.
    DaemonReload,
    /// Nothing (MCO's `SkipReboot` event).
    None,
    /// MCO-internal, status only: `registries.conf`, drain unless the change is safe, then
    /// reload crio.
    Special,
}

impl ActionType {
    /// The wire name (`Reboot`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ActionType::Reboot => "Reboot",
            ActionType::Drain => "Drain",
            ActionType::Reload => "Reload",
            ActionType::Restart => "Restart",
            ActionType::DaemonReload => "DaemonReload",
            ActionType::None => "None",
            ActionType::Special => "Special",
        }
    }
}

impl Action {
    /// An action without a service (`Reboot`, `Drain`, `DaemonReload`, `None`, `Special`).
    pub fn of(kind: ActionType) -> Action {
        Action {
            kind,
            reload: None,
            restart: None,
        }
    }
    /// `Reload <service>`.
    pub fn reload(service: &str) -> Action {
        Action {
            reload: Some(ServiceRef {
                service_name: service.into(),
            }),
            ..Action::of(ActionType::Reload)
        }
    }
    /// `Restart <service>`.
    pub fn restart(service: &str) -> Action {
        Action {
            restart: Some(ServiceRef {
                service_name: service.into(),
            }),
            ..Action::of(ActionType::Restart)
        }
    }
}

impl std::fmt::Display for Action {
    /// `Reboot`, `Reload crio.service`, `Restart chronyd.service`, ...
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.kind.as_str())?;
        let service = self.reload.as_ref().or(self.restart.as_ref());
        if let Some(s) = service {
            write!(f, " {}", s.service_name)?;
        }
        Ok(())
    }
}
