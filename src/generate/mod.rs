//! The generated-config kinds and what they generate (mco-facts 8): KubeletConfig,
//! ContainerRuntimeConfig, the image mirror sets and the cluster Image config, turned into
//! MachineConfigs the render controller merges like any other.
//!
//! Owns, for those kinds: the typed round trip and admission rules run by the hub
//! ([`decode`], [`admit`]), and the pure generation (`kubelet`, `crio`, `registries`): objects
//! and pools in, MachineConfigs and status conditions out. Pure: no IO, no async; the
//! reconciler that writes the results is [`crate::controller`]'s `generated`.

pub mod crio;

pub mod kubelet;
pub mod naming;
pub mod quantity;
pub mod registries;
pub mod templates;

use crate::model::{
    validate_object_meta, ContainerRuntimeConfig, Image, ImageContentSourcePolicy, ImageDigestMirrorSet,
    ImageTagMirrorSet, Kind, KubeletConfig, ObjectMeta,
};
use crate::validation::{FieldError, Invalid};
use serde_json::Value;

/// The typed round trip of a generic kind: type errors name the field (`(path, message)`),
/// unknown fields are dropped (the API compares with the input to report them).
pub fn decode(kind: Kind, object: Value) -> Result<Value, (String, String)> {
    fn rt<T: serde::de::DeserializeOwned + serde::Serialize>(v: Value) -> Result<Value, (String, String)> {
        let t: T = serde_path_to_error::deserialize(v).map_err(|e| {
            let path = e.path().to_string();
            (
                if path == "." { String::new() } else { path },
                e.into_inner().to_string(),
            )
        })?;
        Ok(serde_json::to_value(t).expect("model objects serialize"))
    }
    match kind {
        Kind::KubeletConfig => rt::<KubeletConfig>(object),
        Kind::ContainerRuntimeConfig => rt::<ContainerRuntimeConfig>(object),
        Kind::ImageDigestMirrorSet => rt::<ImageDigestMirrorSet>(object),
        Kind::ImageTagMirrorSet => rt::<ImageTagMirrorSet>(object),
        Kind::ImageContentSourcePolicy => rt::<ImageContentSourcePolicy>(object),
        Kind::Image => rt::<Image>(object),
        Kind::MachineConfig
        | Kind::MachineConfigPool
        | Kind::Node
        | Kind::MachineConfiguration
        | Kind::Lease
        | Kind::MachineConfigNode
        | Kind::RolloutPolicy
        | Kind::DriftPolicy => Ok(object),
    }
}

/// Admission of a decoded object of a generic kind: Kubernetes' metadata rules and the rules
/// MCO's CRDs enforce at the API (OpenAPI patterns, enums). The rules MCO's controllers check
/// (forbidden kubelet fields, CRI-O limits) are not admission: the object is stored and its
/// `Failure` condition names the field ([`kubelet::validate`], [`crio::validate`]).
///
/// Errors: [`Invalid`] with one cause per bad field.
pub fn admit(kind: Kind, decoded: &Value) -> Result<(), Invalid> {
    let meta: ObjectMeta = serde_json::from_value(decoded["metadata"].clone()).unwrap_or_default();
    let mut causes = validate_object_meta(&meta);
    match kind {
        Kind::ImageDigestMirrorSet | Kind::ImageTagMirrorSet | Kind::ImageContentSourcePolicy => {
            causes.extend(registries::admit(kind, decoded));
        }
        Kind::Image => causes.extend(registries::admit_image(decoded)),
        Kind::ContainerRuntimeConfig => causes.extend(crio::admit(decoded)),
        Kind::KubeletConfig => {
            causes.extend(object_schema(&decoded["spec"]["kubeletConfig"], "spec.kubeletConfig"));
            causes.extend(kubelet_config_schema(&decoded["spec"]));
        }
        _ => {}
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(Invalid {
            kind: kind.as_str().to_string(),
            name: meta.name.unwrap_or_default(),
            causes,
        })
    }
}

/// The CRD's `type: object` check of a raw field (KubeletConfig `spec.kubeletConfig`, which the
/// CRD declares `type: object` with `x-kubernetes-preserve-unknown-fields`): anything but an
/// object or null is refused with the API server's wording (`Invalid value: "integer":
/// spec.kubeletConfig in body must be of type object: "integer"`).
fn object_schema(v: &Value, at: &str) -> Option<FieldError> {
    let ty = match v {
        Value::Null | Value::Object(_) => return None,
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
    };
    Some(field(
        at,
        format!("Invalid value: \"{ty}\": {at} in body must be of type object: \"{ty}\""),
    ))
}

/// The KubeletConfig CRD's own rules (`0000_80_machine-config_01_kubeletconfigs-Default.crd.yaml`
/// in openshift/api): `logLevel` `minimum: 0`, `maximum: 10`; the `tlsSecurityProfile` enums
/// (`type`, `custom.minTLSVersion`), with the API server's messages.
fn kubelet_config_schema(spec: &Value) -> Vec<FieldError> {
    let mut out = Vec::new();
    if let Some(l) = spec["logLevel"].as_i64() {
        let at = "spec.logLevel";
        if l < 0 {
            out.push(field(
                at,
                format!("Invalid value: {l}: {at} in body should be greater than or equal to 0"),
            ));
        } else if l > 10 {
            out.push(field(
                at,
                format!("Invalid value: {l}: {at} in body should be less than or equal to 10"),
            ));
        }
    }
    let enums: [(&str, &Value, &[&str]); 2] = [
        (
            "spec.tlsSecurityProfile.type",
            &spec["tlsSecurityProfile"]["type"],
            &["Old", "Intermediate", "Modern", "Custom"],
        ),
        (
            "spec.tlsSecurityProfile.custom.minTLSVersion",
            &spec["tlsSecurityProfile"]["custom"]["minTLSVersion"],
            &["VersionTLS10", "VersionTLS11", "VersionTLS12", "VersionTLS13"],
        ),
    ];
    for (at, v, allowed) in enums {
        if let Some(t) = v.as_str().filter(|t| !allowed.contains(t)) {
            let list: Vec<String> = allowed.iter().map(|a| format!("{a:?}")).collect();
            out.push(field(
                at,
                format!("Unsupported value: {t:?}: supported values: {}", list.join(", ")),
            ));
        }
    }
    out
}

/// The one-line summary of a status write (`Failure: Error: ...`), for the event log.
pub fn status_detail(object: &Value) -> String {
    object["status"]["conditions"]
        .as_array()
        .and_then(|c| c.last())
        .map(|c| {
            let msg = c["message"].as_str().unwrap_or("");
            format!("{}: {}", c["type"].as_str().unwrap_or(""), msg)
        })
        .unwrap_or_default()
}

/// A field error at `path`, for the rules below.
fn field(path: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError::new(path, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The KubeletConfig CRD declares `spec.kubeletConfig` `type: object`: the API server
    /// refuses a scalar or list with 422 before any controller sees it.
    #[test]
    fn kubelet_config_must_be_an_object_at_admission() {
        let obj = |v: Value| json!({"metadata": {"name": "k"}, "spec": {"kubeletConfig": v}});
        let e = admit(Kind::KubeletConfig, &obj(json!(42))).unwrap_err();
        assert_eq!(e.causes[0].field, "spec.kubeletConfig");
        assert_eq!(
            e.causes[0].message,
            "Invalid value: \"integer\": spec.kubeletConfig in body must be of type object: \"integer\""
        );
        assert!(admit(Kind::KubeletConfig, &obj(json!(["a"]))).is_err());
        admit(Kind::KubeletConfig, &obj(json!({"maxPods": "abc"}))).unwrap();
        admit(Kind::KubeletConfig, &json!({"metadata": {"name": "k"}, "spec": {}})).unwrap();
    }

    /// The CRD bounds `logLevel` to 0..10 and enumerates the TLS profile types: the API server
    /// refuses the rest with 422 (`spec.logLevel in body should be less than or equal to 10`).
    #[test]
    fn kubelet_config_crd_bounds_and_enums() {
        let obj = |spec: Value| json!({"metadata": {"name": "k"}, "spec": spec});
        for l in [0, 2, 10] {
            admit(Kind::KubeletConfig, &obj(json!({"logLevel": l}))).unwrap();
        }
        let e = admit(Kind::KubeletConfig, &obj(json!({"logLevel": 11}))).unwrap_err();
        assert_eq!(
            (e.causes[0].field.as_str(), e.causes[0].message.as_str()),
            (
                "spec.logLevel",
                "Invalid value: 11: spec.logLevel in body should be less than or equal to 10"
            )
        );
        let e = admit(Kind::KubeletConfig, &obj(json!({"logLevel": -1}))).unwrap_err();
        assert_eq!(
            e.causes[0].message,
            "Invalid value: -1: spec.logLevel in body should be greater than or equal to 0"
        );
        let e = admit(
            Kind::KubeletConfig,
            &obj(json!({"tlsSecurityProfile": {"type": "Strict"}})),
        )
        .unwrap_err();
        assert_eq!(
            e.causes[0].message,
            "Unsupported value: \"Strict\": supported values: \"Old\", \"Intermediate\", \"Modern\", \"Custom\""
        );
        assert!(admit(
            Kind::KubeletConfig,
            &obj(json!({"tlsSecurityProfile": {"type": "Custom", "custom": {"minTLSVersion": "TLS1.2"}}}))
        )
        .is_err());
    }
}
