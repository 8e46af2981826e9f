//! The image-source kinds MCO reads for `/etc/containers/registries.conf`:
//! `config.openshift.io/v1` ImageDigestMirrorSet, ImageTagMirrorSet and Image (`cluster`), and
//! `operator.openshift.io/v1alpha1` ImageContentSourcePolicy.
//!
//! Shapes as in `github.com/openshift/api/config/v1/types_image*.go` and
//! `operator/v1alpha1/types_image_content_source_policy.go`. Owns the serde shapes only:
//! validation and rendering are in [`crate::generate::registries`].

use super::machine_config::null_default;
use super::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An ImageDigestMirrorSet (`spec.imageDigestMirrors`): pulls by digest may come from mirrors.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageDigestMirrorSet {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_default")]
    pub spec: ImageDigestMirrorSetSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageDigestMirrorSetSpec {
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "Vec::is_empty")]
    pub image_digest_mirrors: Vec<ImageMirrors>,
}

/// An ImageTagMirrorSet (`spec.imageTagMirrors`): pulls by tag may come from mirrors.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageTagMirrorSet {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_default")]
    pub spec: ImageTagMirrorSetSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageTagMirrorSetSpec {
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "Vec::is_empty")]
    pub image_tag_mirrors: Vec<ImageMirrors>,
}

/// One `{source, mirrors, mirrorSourcePolicy}` entry of a mirror set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageMirrors {
    #[serde(default)]
    pub source: String,
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<String>,
    /// `NeverContactSource` or `AllowContactingSource` (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror_source_policy: Option<String>,
}

/// An ImageContentSourcePolicy (`spec.repositoryDigestMirrors`), the older form of an IDMS.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageContentSourcePolicy {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_default")]
    pub spec: ImageContentSourcePolicySpec,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageContentSourcePolicySpec {
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "Vec::is_empty")]
    pub repository_digest_mirrors: Vec<RepositoryDigestMirrors>,
}

/// One `{source, mirrors}` entry of an ICSP.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RepositoryDigestMirrors {
    #[serde(default)]
    pub source: String,
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<String>,
}

/// The cluster Image config (`images.config.openshift.io/cluster`); mco reads
/// `spec.registrySources` and keeps the other fields as they were written.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Image {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_default")]
    pub spec: ImageSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_sources: Option<RegistrySources>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_registries_for_import: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_registry_hostnames: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_trusted_ca: Option<Value>,
}

/// `spec.registrySources`: allowed/blocked are mutually exclusive.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RegistrySources {
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "Vec::is_empty")]
    pub insecure_registries: Vec<String>,
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "Vec::is_empty")]
    pub blocked_registries: Vec<String>,
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "Vec::is_empty")]
    pub allowed_registries: Vec<String>,
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "Vec::is_empty")]
    pub container_runtime_search_registries: Vec<String>,
}
