//! Kubernetes-shaped objects mco serves and stores: MachineConfig, MachineConfigPool, Node, the
//! generated-config kinds, MachineConfiguration, the node leases (`lease`, the one
//! namespaced kind) and MachineConfigNode (`machine_config_node`).
//!
//! Owns the serde shapes of the kinds (as `kubectl get -o json` shows them) and the small
//! helpers every layer needs on them (annotation keys, label-selector matching, conditions), and
//! Kubernetes' metadata rules shared by every kind (`names`: object names, labels, annotations,
//! label selectors). It must not validate Ignition (see [`crate::ignition`]) nor know about
//! storage or HTTP.

mod drift_policy;
mod image;
mod kubelet_config;
mod lease;
mod machine_config;
pub mod machine_config_node;
mod machine_configuration;
mod names;
mod node;
mod pool;
mod rollout_policy;
mod selector;

pub use drift_policy::*;
pub use image::*;
pub use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo};
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta, OwnerReference, Time,
};
pub use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
pub use kubelet_config::*;
pub use lease::*;
pub use machine_config::{MachineConfig, MachineConfigSpec};
pub use machine_configuration::{
    Action, ActionType, FilePolicy, MachineConfiguration, MachineConfigurationSpec, MachineConfigurationStatus,
    NodeDisruptionPolicyConfig, NodeDisruptionPolicyStatus, ServiceRef, SshKeyPolicy, UnitPolicy,
};
pub use names::*;
pub use node::{
    node_is_ready, node_status, validation_error, NodeAnnotations, NodeState, CONFIG_DRIFT_DETECTED, DAEMON_WARNINGS,
    ON_DISK_PREFIX, ON_DISK_VALIDATION_FAILED, PREFLIGHT_CHECK_FAILED, RECOVERY_HINT,
};
pub use pool::{
    MachineConfigPool, MachineConfigPoolSpec, MachineConfigPoolStatus, ObjectReference, PoolCondition,
    PoolConfiguration,
};
pub use rollout_policy::*;
pub use selector::{selector_is_empty, selector_matches};

/// One kind's objects by name: a persistent ordered map, so a clone of the whole
/// [`crate::state::State`] is a handful of pointer copies and a reader's snapshot shares every
/// unchanged object with the writer's next state ([`crate::command::Hub::state`]).
pub type Objects<V> = imbl::OrdMap<String, std::sync::Arc<V>>;

/// The API group mco serves by default; `machineconfiguration.alauda.io` (the seeds' port) is the
/// other accepted one. Both are accepted in manifests' `apiVersion`.
pub const DEFAULT_GROUP: &str = "machineconfiguration.openshift.io";
/// The API group of the Alauda port of MCO used in the seeds.
pub const ALAUDA_GROUP: &str = "machineconfiguration.alauda.io";
/// Every API group whose `<group>/v1` apiVersion mco accepts for MachineConfig and MachineConfigPool.
pub const ACCEPTED_GROUPS: [&str; 2] = [DEFAULT_GROUP, ALAUDA_GROUP];

/// The kinds mco stores, with their REST names.
///
/// MachineConfig, MachineConfigPool, Node and MachineConfiguration have typed maps in [`crate::state::State`]; every
/// other kind is stored as its JSON (`State::objects`) and decoded by its module when used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum Kind {
    MachineConfig,
    MachineConfigPool,
    Node,
    KubeletConfig,
    ContainerRuntimeConfig,
    ImageDigestMirrorSet,
    ImageTagMirrorSet,
    ImageContentSourcePolicy,
    /// `config.openshift.io/v1` Image (only `cluster` is read: registry sources).
    Image,
    /// `operator.openshift.io/v1` MachineConfiguration (`cluster` only): the node disruption
    /// policy ([`crate::disruption`]). Typed: kept in `State::machine_configurations`.
    MachineConfiguration,
    /// `coordination.k8s.io/v1` Lease, namespaced: the node leases of node liveness
    /// (`kube-node-lease/<node>`, [`lease`]).
    Lease,
    /// `machineconfiguration.openshift.io/v1` MachineConfigNode: one per node, its update
    /// progress as conditions ([`machine_config_node`]).
    MachineConfigNode,
    /// `policy.mco.dev/v1` RolloutPolicy: mco's own maintenance windows, canary waves and
    /// self-healing for the pools it selects ([`rollout_policy`], [`crate::rollout::policy`]).
    RolloutPolicy,
    /// `policy.mco.dev/v1` DriftPolicy: mco's own response to config drift, per path glob,
    /// for the pools it selects ([`drift_policy`], [`crate::drift`]).
    DriftPolicy,
}

/// How one kind is served: REST names, group, version, status subresource.
#[derive(Clone, Copy, Debug)]
pub struct KindInfo {
    pub kind: Kind,
    /// `kind` field value.
    pub name: &'static str,
    /// Lower-case plural of REST paths.
    pub plural: &'static str,
    /// Short names kubectl resolves (`mc`, `kc`, `ctrcfg`, ...).
    pub short: &'static [&'static str],
    /// `None`: the configured MachineConfig group; `Some("")`: the core group.
    pub group: Option<&'static str>,
    pub version: &'static str,
    /// Whether `/status` is served (and `spec` and `status` are written apart).
    pub status: bool,
    /// Whether objects live in a namespace (served under `namespaces/<ns>/`, stored under the
    /// key `<namespace>/<name>`, [`namespaced_key`]); every other kind is cluster-scoped.
    pub namespaced: bool,
}

/// One row per kind (MCO's CRDs in `vendor/github.com/openshift/api`, `oc api-resources`).
const KINDS: [KindInfo; 14] = [
    KindInfo {
        kind: Kind::MachineConfig,
        name: "MachineConfig",
        plural: "machineconfigs",
        short: &["mc"],
        group: None,
        version: "v1",
        status: false,
        namespaced: false,
    },
    KindInfo {
        kind: Kind::MachineConfigPool,
        name: "MachineConfigPool",
        plural: "machineconfigpools",
        short: &["mcp"],
        group: None,
        version: "v1",
        status: true,
        namespaced: false,
    },
    KindInfo {
        kind: Kind::Node,
        name: "Node",
        plural: "nodes",
        short: &["no"],
        group: Some(""),
        version: "v1",
        status: true,
        namespaced: false,
    },
    KindInfo {
        kind: Kind::KubeletConfig,
        name: "KubeletConfig",
        plural: "kubeletconfigs",
        short: &["kc"],
        group: None,
        version: "v1",
        status: true,
        namespaced: false,
    },
    KindInfo {
        kind: Kind::ContainerRuntimeConfig,
        name: "ContainerRuntimeConfig",
        plural: "containerruntimeconfigs",
        short: &["ctrcfg"],
        group: None,
        version: "v1",
        status: true,
        namespaced: false,
    },
    KindInfo {
        kind: Kind::ImageDigestMirrorSet,
        name: "ImageDigestMirrorSet",
        plural: "imagedigestmirrorsets",
        short: &["idms"],
        group: Some(CONFIG_GROUP),
        version: "v1",
        status: true,
        namespaced: false,
    },
    KindInfo {
        kind: Kind::ImageTagMirrorSet,
        name: "ImageTagMirrorSet",
        plural: "imagetagmirrorsets",
        short: &["itms"],
        group: Some(CONFIG_GROUP),
        version: "v1",
        status: true,
        namespaced: false,
    },
    KindInfo {
        kind: Kind::ImageContentSourcePolicy,
        name: "ImageContentSourcePolicy",
        plural: "imagecontentsourcepolicies",
        short: &["icsp"],
        group: Some(OPERATOR_GROUP),
        version: "v1alpha1",
        status: false,
        namespaced: false,
    },
    KindInfo {
        kind: Kind::Image,
        name: "Image",
        plural: "images",
        short: &[],
        group: Some(CONFIG_GROUP),
        version: "v1",
        status: true,
        namespaced: false,
    },
    KindInfo {
        kind: Kind::MachineConfiguration,
        name: "MachineConfiguration",
        plural: "machineconfigurations",
        short: &[],
        group: Some(OPERATOR_GROUP),
        version: "v1",
        status: true,
        namespaced: false,
    },
    KindInfo {
        kind: Kind::Lease,
        name: "Lease",
        plural: "leases",
        short: &[],
        group: Some(COORDINATION_GROUP),
        version: "v1",
        status: false,
        namespaced: true,
    },
    KindInfo {
        kind: Kind::MachineConfigNode,
        name: "MachineConfigNode",
        plural: "machineconfignodes",
        short: &["mcn"],
        group: None,
        version: "v1",
        status: true,
        namespaced: false,
    },
    KindInfo {
        kind: Kind::RolloutPolicy,
        name: "RolloutPolicy",
        plural: "rolloutpolicies",
        short: &["rp"],
        group: Some(POLICY_GROUP),
        version: "v1",
        status: true,
        namespaced: false,
    },
    KindInfo {
        kind: Kind::DriftPolicy,
        name: "DriftPolicy",
        plural: "driftpolicies",
        short: &["dp"],
        group: Some(POLICY_GROUP),
        version: "v1",
        status: false,
        namespaced: false,
    },
];

/// `config.openshift.io`: ImageDigestMirrorSet, ImageTagMirrorSet, Image.
pub const CONFIG_GROUP: &str = "config.openshift.io";
/// `operator.openshift.io`: ImageContentSourcePolicy (`v1alpha1`), MachineConfiguration (`v1`).
pub const OPERATOR_GROUP: &str = "operator.openshift.io";

impl Kind {
    /// All stored kinds, in a fixed order.
    pub const ALL: [Kind; 14] = [
        Kind::MachineConfig,
        Kind::MachineConfigPool,
        Kind::Node,
        Kind::KubeletConfig,
        Kind::ContainerRuntimeConfig,
        Kind::ImageDigestMirrorSet,
        Kind::ImageTagMirrorSet,
        Kind::ImageContentSourcePolicy,
        Kind::Image,
        Kind::MachineConfiguration,
        Kind::Lease,
        Kind::MachineConfigNode,
        Kind::RolloutPolicy,
        Kind::DriftPolicy,
    ];

    /// How this kind is served.
    pub fn info(self) -> &'static KindInfo {
        KINDS.iter().find(|i| i.kind == self).expect("every kind has a row")
    }

    /// The `kind` field value.
    pub fn as_str(self) -> &'static str {
        self.info().name
    }

    /// The lower-case plural used in REST paths (`machineconfigs`).
    pub fn plural(self) -> &'static str {
        self.info().plural
    }

    /// Whether the projection keeps this kind as JSON (`State::objects`), not in a typed map.
    pub fn is_generic(self) -> bool {
        !matches!(
            self,
            Kind::MachineConfig | Kind::MachineConfigPool | Kind::Node | Kind::MachineConfiguration
        )
    }

    /// Whether objects of the kind live in a namespace ([`KindInfo::namespaced`]).
    pub fn is_namespaced(self) -> bool {
        self.info().namespaced
    }

    /// Whether the API server keeps `metadata.generation` (bumped on each spec change): every
    /// kind but Node and Lease, whose registry strategies set none.
    pub fn has_generation(self) -> bool {
        !matches!(self, Kind::Node | Kind::Lease)
    }

    /// Whether the kind has a `/status` subresource.
    pub fn has_status(self) -> bool {
        self.info().status
    }

    /// The API group given the configured MachineConfig group (`""` for Node).
    pub fn group(self, configured: &str) -> String {
        self.info().group.unwrap_or(configured).to_string()
    }

    /// Parses a kind as users type it on the command line or in a manifest: kind, singular,
    /// plural or short name (`mc`, `mcp`, `no`, `kc`, `ctrcfg`, `idms`, `itms`, `icsp`),
    /// case-insensitive.
    pub fn parse(s: &str) -> Option<Kind> {
        let s = s.to_ascii_lowercase();
        KINDS
            .iter()
            .find(|i| i.name.to_ascii_lowercase() == s || i.plural == s || i.short.contains(&s.as_str()))
            .map(|i| i.kind)
    }

    /// `apiVersion` of this kind given the served group (`v1` for Node).
    pub fn api_version(self, group: &str) -> String {
        let g = self.group(group);
        if g.is_empty() {
            self.info().version.to_string()
        } else {
            format!("{g}/{}", self.info().version)
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
    /// The six node annotation keys [`NodeAnnotations`] reads, built once: the controllers
    /// read them for every node at every pass.
    node: NodeKeys,
}

/// The node annotation keys under one group.
#[derive(Clone, Debug, PartialEq, Eq)]
struct NodeKeys {
    desired_config: String,
    current_config: String,
    state: String,
    reason: String,
    desired_drain: String,
    last_applied_drain: String,
}

impl Keys {
    pub fn new(group: &str) -> Keys {
        let key = |name: &str| format!("{group}/{name}");
        Keys {
            group: group.to_string(),
            node: NodeKeys {
                desired_config: key("desiredConfig"),
                current_config: key("currentConfig"),
                state: key("state"),
                reason: key("reason"),
                desired_drain: key("desiredDrain"),
                last_applied_drain: key("lastAppliedDrain"),
            },
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
