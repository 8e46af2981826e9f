//! Kubernetes-shaped objects mco serves and stores: MachineConfig, MachineConfigPool and Node.
//!
//! Owns the serde shapes of the three kinds (as `kubectl get -o json` shows them) and the small
//! helpers every layer needs on them (annotation keys, label-selector matching, conditions), and
//! Kubernetes' metadata rules shared by every kind (`names`: object names, labels, annotations,
//! label selectors). It must not validate Ignition (see [`crate::ignition`]) nor know about
//! storage or HTTP.

mod machine_config;
mod names;
mod node;
mod pool;
mod selector;

pub use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo};
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta, OwnerReference, Time,
};
pub use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
pub use machine_config::{MachineConfig, MachineConfigSpec};
pub use names::*;
pub use node::{node_is_ready, NodeAnnotations, NodeState};
pub use pool::{
    MachineConfigPool, MachineConfigPoolSpec, MachineConfigPoolStatus, ObjectReference, PoolCondition,
    PoolConfiguration,
};
pub use selector::{selector_is_empty, selector_matches};

/// The API group mco serves by default; `machineconfiguration.alauda.io` (the seeds' port) is the
/// other accepted one. Both are accepted in manifests' `apiVersion`.
pub const DEFAULT_GROUP: &str = "machineconfiguration.openshift.io";
/// The API group of the Alauda port of MCO used in the seeds.
pub const ALAUDA_GROUP: &str = "machineconfiguration.alauda.io";
/// Every API group whose `<group>/v1` apiVersion mco accepts for MachineConfig and MachineConfigPool.
pub const ACCEPTED_GROUPS: [&str; 2] = [DEFAULT_GROUP, ALAUDA_GROUP];

/// The kinds mco stores, with their REST names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum Kind {
    MachineConfig,
    MachineConfigPool,
    Node,
    /// `operator.openshift.io/v1` MachineConfiguration (`cluster` only): the node disruption
    /// policy ([`crate::disruption`]).
    MachineConfiguration,
}

impl Kind {
    /// All stored kinds, in a fixed order.
    pub const ALL: [Kind; 4] = [
        Kind::MachineConfig,
        Kind::MachineConfigPool,
        Kind::Node,
        Kind::MachineConfiguration,
    ];

    /// The `kind` field value.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::MachineConfig => "MachineConfig",
            Kind::MachineConfigPool => "MachineConfigPool",
            Kind::Node => "Node",
            Kind::MachineConfiguration => "MachineConfiguration",
        }
    }

    /// The lower-case plural used in REST paths (`machineconfigs`).
    pub fn plural(self) -> &'static str {
        match self {
            Kind::MachineConfig => "machineconfigs",
            Kind::MachineConfigPool => "machineconfigpools",
            Kind::Node => "nodes",
            Kind::MachineConfiguration => "machineconfigurations",
        }
    }

    /// Parses a kind as users type it on the command line or in a manifest: kind, singular,
    /// plural or short name (`mc`, `mcp`, `no`), case-insensitive.
    pub fn parse(s: &str) -> Option<Kind> {
        match s.to_ascii_lowercase().as_str() {
            "machineconfig" | "machineconfigs" | "mc" => Some(Kind::MachineConfig),
            "machineconfigpool" | "machineconfigpools" | "mcp" => Some(Kind::MachineConfigPool),
            "node" | "nodes" | "no" => Some(Kind::Node),
            "machineconfiguration" | "machineconfigurations" => Some(Kind::MachineConfiguration),
            _ => None,
        }
    }

    /// `apiVersion` of this kind given the served group (`v1` for Node).
    pub fn api_version(self, group: &str) -> String {
        match self.fixed_group() {
            Some("") => "v1".to_string(),
            Some(g) => format!("{g}/v1"),
            None => format!("{group}/v1"),
        }
    }

    /// The API group of a kind whose group is not the configured one: `""` (core) for Node,
    /// `operator.openshift.io` for MachineConfiguration; `None` for the configured group's kinds.
    pub fn fixed_group(self) -> Option<&'static str> {
        match self {
            Kind::Node => Some(""),
            Kind::MachineConfiguration => Some(crate::disruption::GROUP),
            Kind::MachineConfig | Kind::MachineConfigPool => None,
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Annotation and label keys under the configured API group (`<group>/desiredConfig`, ...).
///
/// MCO: `pkg/daemon/constants/constants.go`. The group is a setting so that the seeds'
/// `machineconfiguration.alauda.io/desiredConfig` columns work unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keys {
    pub group: String,
}

impl Keys {
    pub fn new(group: &str) -> Keys {
        Keys {
            group: group.to_string(),
        }
    }
    fn key(&self, name: &str) -> String {
        format!("{}/{}", self.group, name)
    }
    pub fn desired_config(&self) -> String {
        self.key("desiredConfig")
    }
    pub fn current_config(&self) -> String {
        self.key("currentConfig")
    }
    pub fn state(&self) -> String {
        self.key("state")
    }
    pub fn reason(&self) -> String {
        self.key("reason")
    }
    pub fn desired_drain(&self) -> String {
        self.key("desiredDrain")
    }
    pub fn last_applied_drain(&self) -> String {
        self.key("lastAppliedDrain")
    }
    pub fn post_config_action(&self) -> String {
        self.key("post-config-action")
    }
    /// MachineConfig label naming the role (`worker`, `master`, `infra`, ...).
    pub fn role_label(&self) -> String {
        self.key("role")
    }
    /// Annotation on rendered configs naming the controller version that produced them.
    pub fn generated_by(&self) -> String {
        self.key("generated-by-controller-version")
    }
}

impl Default for Keys {
    fn default() -> Self {
        Keys::new(DEFAULT_GROUP)
    }
}

/// The role label MCO reads on MachineConfigs, always under the openshift group
/// (`machineconfiguration.openshift.io/role`), whichever group is served: real manifests use it.
pub const ROLE_LABEL: &str = "machineconfiguration.openshift.io/role";

/// The controller version string mco stamps on the configs it generates.
pub const CONTROLLER_VERSION: &str = concat!("mco-", env!("CARGO_PKG_VERSION"));

/// Current time as a Kubernetes `Time` (seconds precision on the wire).
pub fn now() -> Time {
    Time(jiff::Timestamp::now())
}

/// Reads an annotation, `""` when absent.
pub fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> &'a str {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
        .unwrap_or("")
}

/// Reads a label, `None` when absent.
pub fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref().and_then(|a| a.get(key)).map(String::as_str)
}

/// Sets (or with `None` removes) an annotation.
pub fn set_annotation(meta: &mut ObjectMeta, key: &str, value: Option<&str>) {
    let map = meta.annotations.get_or_insert_with(Default::default);
    match value {
        Some(v) => {
            map.insert(key.to_string(), v.to_string());
        }
        None => {
            map.remove(key);
        }
    }
}
