//! The MachineConfig kind (`machineconfiguration.openshift.io/v1`).

use super::ObjectMeta;
use serde::{Deserialize, Deserializer, Serialize};

/// A MachineConfig: one piece of a node's OS configuration.
///
/// Shape as in `vendor/github.com/openshift/api/machineconfiguration/v1/types.go`. `spec.config`
/// is kept as raw JSON (a `RawExtension` in MCO): it is parsed and validated by
/// [`crate::ignition`] when the object is accepted, and re-parsed when rendered.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfig {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_default")]
    pub spec: MachineConfigSpec,
}

/// `spec` of a MachineConfig. `null` lists deserialize as empty (real cluster dumps carry
/// `extensions: null`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigSpec {
    /// OS image to run (`osImageURL`); stored and merged, not applied on sandbox nodes.
    #[serde(
        rename = "osImageURL",
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub os_image_url: String,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub base_os_extensions_container_image: String,
    /// Raw Ignition 3.x config, as the user wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<serde_json::Value>,
    #[serde(default, deserialize_with = "null_default")]
    pub kernel_arguments: Vec<String>,
    #[serde(default, deserialize_with = "null_default")]
    pub extensions: Vec<String>,
    #[serde(default, deserialize_with = "null_default")]
    pub fips: bool,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub kernel_type: String,
}

impl MachineConfig {
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }

    /// The declared Ignition version (`spec.config.ignition.version`), as the IGNITIONVERSION
    /// printer column shows it (MCO CRD `additionalPrinterColumns`).
    pub fn ignition_version(&self) -> &str {
        self.spec
            .config
            .as_ref()
            .and_then(|c| c.pointer("/ignition/version"))
            .and_then(|v| v.as_str())
            .unwrap_or("")
    }
}

/// Deserializes `null` as the type's default.
pub(crate) fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}
