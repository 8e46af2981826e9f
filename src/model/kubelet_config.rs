//! The generated-config kinds of `machineconfiguration.openshift.io/v1`: KubeletConfig and
//! ContainerRuntimeConfig, and the status both share.
//!
//! Shapes as in `vendor/github.com/openshift/api/machineconfiguration/v1/types.go`. Owns the
//! serde shapes only: validation and generation are in [`crate::generate`].

use super::machine_config::null_default;
use super::{LabelSelector, ObjectMeta, Time};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A KubeletConfig: kubelet settings for the pools its `machineConfigPoolSelector` matches
/// (mco-facts 8.1).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct KubeletConfig {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_default")]
    pub spec: KubeletConfigSpec,
    #[serde(default, deserialize_with = "null_default")]
    pub status: ControllerStatus,
}

/// `spec` of a KubeletConfig.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct KubeletConfigSpec {
    /// Matched against pool labels (`pools.operator.machineconfiguration.openshift.io/worker: ""`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_config_pool_selector: Option<LabelSelector>,
    /// A raw `kubelet.config.k8s.io/v1beta1` KubeletConfiguration (fields as the kubelet spells them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_config: Option<Value>,
    /// Kubelet verbosity 0..10 (the CRD bounds it), written as the `20-logging.conf` dropin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<i32>,
    /// Let the node size `systemReserved` itself (`/etc/node-sizing-enabled.env`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_sizing_reserved: Option<bool>,
    /// `config.openshift.io/v1` TLSSecurityProfile (`type`: Old, Intermediate, Modern, Custom).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_security_profile: Option<Value>,
}

/// A ContainerRuntimeConfig: CRI-O and storage settings for the pools its selector matches
/// (mco-facts 8.2).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRuntimeConfig {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_default")]
    pub spec: ContainerRuntimeConfigSpec,
    #[serde(default, deserialize_with = "null_default")]
    pub status: ControllerStatus,
}

/// `spec` of a ContainerRuntimeConfig.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRuntimeConfigSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_config_pool_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_runtime_config: Option<ContainerRuntimeConfiguration>,
}

/// `spec.containerRuntimeConfig`: the CRI-O settings MCO exposes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRuntimeConfiguration {
    /// Maximum processes per container; 0 or >= 20 (-1 and 0: unlimited in CRI-O).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_limit: Option<i64>,
    /// error, fatal, panic, warn, info, debug or trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<String>,
    /// A quantity (`"64Ki"`, `8193`): above 8 KiB when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_size_max: Option<Value>,
    /// A quantity: the overlay driver's per-container size limit (`/etc/containers/storage.conf`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlay_size: Option<Value>,
    /// `""`, `runc` or `crun`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_runtime: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_layer_stores: Option<Vec<StorePath>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_image_stores: Option<Vec<StorePath>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_artifact_stores: Option<Vec<StorePath>>,
}

/// One additional store (`{path: /mnt/layers}`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StorePath {
    #[serde(default)]
    pub path: String,
}

/// `status` of KubeletConfig and ContainerRuntimeConfig (`KubeletConfigStatus`,
/// `ContainerRuntimeConfigStatus`): `observedGeneration` and conditions: `Accepted` then the
/// legacy `Success`/`Failure` for a KubeletConfig, `Success`/`Failure` for a
/// ContainerRuntimeConfig (the controller's `next_conditions` writes them as MCO does).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ControllerStatus {
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "is_zero")]
    pub observed_generation: i64,
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ControllerCondition>,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// A condition of a generated-config kind.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ControllerCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "String::is_empty")]
    pub message: String,
}
