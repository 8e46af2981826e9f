//! Image mirror sets and the cluster Image config (mco-facts 8.3) rendered into
//! `/etc/containers/registries.conf` (containers-registries.conf(5), version 2), `policy.json`
//! and `registries.conf.d/01-image-searchRegistries.conf` of `99-<pool>-generated-registries`.
//!
//! MCO `pkg/controller/container-runtime-config/helpers.go` (`registriesConfigIgnition`,
//! `updateRegistriesConfig`, `validateRegistriesConfScopes`, `updatePolicyJSON`) over
//! openshift/runtime-utils `EditRegistriesConfig` ([`edit`]): ImageDigestMirrorSet and ICSP
//! mirrors get `pull-from-mirror = "digest-only"`, ImageTagMirrorSet mirrors `"tag-only"`;
//! `NeverContactSource` blocks the source; one `[[registry]]` per source with the mirrors of
//! every object merged topologically; a mirror set without a real mirror is ignored; the Image
//! config's insecure and blocked scopes mark the entries nested inside them; entries nested
//! under a mirrored source get its mirrors. Owns the admission rules of these kinds too.

use super::field;
use crate::model::{
    Image, ImageContentSourcePolicy, ImageDigestMirrorSet, ImageMirrors, ImageTagMirrorSet, Kind, RegistrySources,
};
use crate::validation::FieldError;
use serde_json::Value;
use std::collections::BTreeMap;

pub mod edit;

use edit::{has_real_mirror, MirrorSet, DIGEST_ONLY, TAG_ONLY};
pub use edit::{Endpoint, RegistriesConf, Registry};

/// The search-registries dropin path.
pub const SEARCH_REGISTRIES: &str = "/etc/containers/registries.conf.d/01-image-searchRegistries.conf";

/// Whether `s` is a valid registry scope: `host[:port][/path]` or `*.domain`, without a tag
/// or digest (containers/image `sysregistriesv2` rules, as `validateRegistriesConfScopes`).
pub fn valid_scope(s: &str) -> bool {
    if s.is_empty() || s.contains("://") || s.contains('@') || s.ends_with('/') || s.contains("//") {
        return false;
    }
    if let Some(rest) = s.strip_prefix("*.") {
        return !rest.is_empty() && !rest.contains('/') && rest.split('.').all(host_label);
    }
    let (host, path) = s.split_once('/').unwrap_or((s, ""));
    let (name, port) = host.split_once(':').unwrap_or((host, ""));
    let port_ok =
        port.is_empty() && !host.ends_with(':') || port.chars().all(|c| c.is_ascii_digit()) && !port.is_empty();
    let path_ok = path.split('/').filter(|p| !path.is_empty() || !p.is_empty()).all(|c| {
        !c.is_empty()
            && !c.contains(':')
            && c.chars()
                .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || "._-".contains(ch))
    });
    !name.is_empty() && name.split('.').all(host_label) && port_ok && path_ok
}

fn host_label(l: &str) -> bool {
    !l.is_empty()
        && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !l.starts_with('-')
        && !l.ends_with('-')
}

/// Per-object admission rules of the mirror-set kinds (the CRDs' patterns and enums).
pub fn admit(kind: Kind, decoded: &Value) -> Vec<FieldError> {
    let (list_key, entries) = match kind {
        Kind::ImageDigestMirrorSet => ("imageDigestMirrors", &decoded["spec"]["imageDigestMirrors"]),
        Kind::ImageTagMirrorSet => ("imageTagMirrors", &decoded["spec"]["imageTagMirrors"]),
        _ => ("repositoryDigestMirrors", &decoded["spec"]["repositoryDigestMirrors"]),
    };
    let mut out = Vec::new();
    for (i, e) in entries.as_array().into_iter().flatten().enumerate() {
        let base = format!("spec.{list_key}[{i}]");
        let source = e["source"].as_str().unwrap_or("");
        if !valid_scope(source) {
            out.push(field(format!("{base}.source"), format!("Invalid value: {source:?}: invalid source: must be a registry scope host[:port][/path] or *.domain, without tag or digest")));
        }
        for (j, m) in e["mirrors"].as_array().into_iter().flatten().enumerate() {
            let m = m.as_str().unwrap_or("");
            if !valid_scope(m) || m.starts_with("*.") {
                out.push(field(
                    format!("{base}.mirrors[{j}]"),
                    format!("Invalid value: {m:?}: invalid mirror: must be host[:port][/path], without tag or digest"),
                ));
            }
        }
        match e["mirrorSourcePolicy"].as_str() {
            None | Some("NeverContactSource") | Some("AllowContactingSource") => {}
            Some(p) => out.push(field(
                format!("{base}.mirrorSourcePolicy"),
                format!(
                    "Unsupported value: {p:?}: supported values: \"NeverContactSource\", \"AllowContactingSource\""
                ),
            )),
        }
        if e["mirrorSourcePolicy"] == "NeverContactSource" && e["mirrors"].as_array().is_none_or(|m| m.is_empty()) {
            out.push(field(
                format!("{base}.mirrors"),
                "Required value: mirrors must be set when mirrorSourcePolicy is NeverContactSource",
            ));
        }
    }
    out
}

/// Admission of the cluster Image config: named `cluster`, valid scopes, allowed and blocked
/// registries not both set.
pub fn admit_image(decoded: &Value) -> Vec<FieldError> {
    let mut out = Vec::new();
    if decoded["metadata"]["name"] != "cluster" {
        out.push(field(
            "metadata.name",
            "Invalid value: only the Image config named \"cluster\" is read",
        ));
    }
    let rs = &decoded["spec"]["registrySources"];
    for key in [
        "insecureRegistries",
        "blockedRegistries",
        "allowedRegistries",
        "containerRuntimeSearchRegistries",
    ] {
        for (i, r) in rs[key].as_array().into_iter().flatten().enumerate() {
            let r = r.as_str().unwrap_or("");
            if !valid_scope(r) {
                out.push(field(
                    format!("spec.registrySources.{key}[{i}]"),
                    format!("Invalid value: {r:?}: invalid registry scope"),
                ));
            }
        }
    }
    let set = |k: &str| rs[k].as_array().is_some_and(|a| !a.is_empty());
    if set("allowedRegistries") && set("blockedRegistries") {
        out.push(field(
            "spec.registrySources",
            "Invalid value: only one of blockedRegistries or allowedRegistries may be set",
        ));
    }
    out
}

/// Every input of the registries configuration.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    pub idms: Vec<ImageDigestMirrorSet>,
    pub itms: Vec<ImageTagMirrorSet>,
    pub icsp: Vec<ImageContentSourcePolicy>,
    pub image: Option<Image>,
}

impl Inputs {
    /// Whether nothing would be written ([`generated_files`] gives no file): no mirror set
    /// with a real mirror (one that is not its own source) and no registry sources in the
    /// Image config. mco then generates no registries config (MCO's controller would write its
    /// template's registries.conf re-encoded: a mirror set without a real mirror changes
    /// nothing in it, `mergedMirrorSets` ignores it).
    pub fn is_empty(&self) -> bool {
        !mirror_sets(self)
            .iter()
            .any(|(_, _, list, _)| list.iter().any(has_real_mirror))
            && self.registry_sources() == RegistrySources::default()
    }

    fn registry_sources(&self) -> RegistrySources {
        self.image
            .as_ref()
            .and_then(|i| i.spec.registry_sources.clone())
            .unwrap_or_default()
    }
}

/// Every mirror-set object, digest ones (ImageDigestMirrorSets, then
/// ImageContentSourcePolicies, which MCO's `convertICSPToIDMS` appends) before tag ones, each
/// kind in name order.
fn mirror_sets(inputs: &Inputs) -> Vec<MirrorSet> {
    let name = |m: &crate::model::ObjectMeta| m.name.clone().unwrap_or_default();
    let mut idms: Vec<MirrorSet> = inputs
        .idms
        .iter()
        .map(|d| {
            (
                "ImageDigestMirrorSet",
                name(&d.metadata),
                d.spec.image_digest_mirrors.clone(),
                DIGEST_ONLY,
            )
        })
        .collect();
    let mut icsp: Vec<MirrorSet> = inputs
        .icsp
        .iter()
        .map(|p| {
            let list = p
                .spec
                .repository_digest_mirrors
                .iter()
                .map(|r| ImageMirrors {
                    source: r.source.clone(),
                    mirrors: r.mirrors.clone(),
                    mirror_source_policy: None,
                })
                .collect();
            ("ImageContentSourcePolicy", name(&p.metadata), list, DIGEST_ONLY)
        })
        .collect();
    let mut itms: Vec<MirrorSet> = inputs
        .itms
        .iter()
        .map(|t| {
            (
                "ImageTagMirrorSet",
                name(&t.metadata),
                t.spec.image_tag_mirrors.clone(),
                TAG_ONLY,
            )
        })
        .collect();
    for l in [&mut idms, &mut icsp, &mut itms] {
        l.sort_by(|a, b| a.1.cmp(&b.1));
    }
    idms.into_iter().chain(icsp).chain(itms).collect()
}

/// MCO's `validateRegistriesConfScopes` over every mirror set (the per-object patterns are
/// admission rules, [`admit`]): one `mirrorSourcePolicy` per source across all objects (unset
/// counts as `AllowContactingSource`), and no `NeverContactSource` source listed as its own
/// mirror. The error names both objects and fields.
fn validate_mirror_sets(sets: &[MirrorSet]) -> Result<(), String> {
    let mut policies: BTreeMap<&str, (String, String)> = BTreeMap::new();
    for (kind, name, list, _) in sets {
        for (i, m) in list.iter().enumerate() {
            let policy = m
                .mirror_source_policy
                .clone()
                .unwrap_or_else(|| "AllowContactingSource".into());
            let here = format!("{kind} {name:?} spec.{}[{i}].mirrorSourcePolicy", list_key(kind));
            match policies.get(m.source.as_str()) {
                Some((p, at)) if *p != policy => {
                    return Err(format!(
                        "conflicting mirrorSourcePolicy is set for the same source {:?} in imagedigestmirrorsets, imagetagmirrorsets, or imagecontentsourcepolicies ({at}: {p}, {here}: {policy})",
                        m.source
                    ))
                }
                Some(_) => {}
                None => {
                    policies.insert(&m.source, (policy.clone(), here));
                }
            }
            if policy == "NeverContactSource" && m.mirrors.contains(&m.source) {
                return Err(format!(
                    "cannot set mirrorSourcePolicy: NeverContactSource if the source {:?} is one of the mirrors ({kind} {name:?} spec.{}[{i}].mirrors)",
                    m.source,
                    list_key(kind)
                ));
            }
        }
    }
    Ok(())
}

/// The files of `99-<pool>-generated-registries`, MCO's `registriesConfigIgnition` without a
/// ClusterVersion or image policies: `registries.conf` (the base edited by
/// [`edit::edit_registries_conf`]) when a mirror set has a real mirror or the Image config
/// lists insecure or blocked registries; `policy.json` ([`policy_json`]) when it lists
/// blocked or allowed registries; the search-registries dropin when it lists search
/// registries. Empty when none applies ([`Inputs::is_empty`]).
///
/// Errors (MCO's controller errors, each naming the object and field): conflicting
/// `mirrorSourcePolicy` for one source across objects; `NeverContactSource` for a source
/// listed as its own mirror.
pub fn generated_files(base: &str, inputs: &Inputs) -> Result<Vec<(String, String)>, String> {
    let sets = mirror_sets(inputs);
    validate_mirror_sets(&sets)?;
    let sources = inputs.registry_sources();
    let mut files = Vec::new();
    let mirrored = sets.iter().any(|(_, _, list, _)| list.iter().any(has_real_mirror));
    if mirrored || !sources.insecure_registries.is_empty() || !sources.blocked_registries.is_empty() {
        let mut conf = RegistriesConf::parse(base)?;
        edit::edit_registries_conf(
            &mut conf,
            &sources.insecure_registries,
            &sources.blocked_registries,
            &sets,
        )?;
        files.push((super::templates::REGISTRIES_CONF_PATH.to_string(), conf.encode()));
    }
    if !sources.blocked_registries.is_empty() || !sources.allowed_registries.is_empty() {
        let policy = policy_json(
            super::templates::base_policy_json(),
            &sources.blocked_registries,
            &sources.allowed_registries,
        )?;
        files.push((super::templates::POLICY_JSON_PATH.to_string(), policy));
    }
    if !sources.container_runtime_search_registries.is_empty() {
        files.push((
            SEARCH_REGISTRIES.to_string(),
            search_registries_dropin(&sources.container_runtime_search_registries),
        ));
    }
    Ok(files)
}

/// MCO's `updatePolicyJSON` over the template's policy.json: allowed registries make the
/// default `reject` and accept each allowed scope; blocked registries keep the default
/// `insecureAcceptAnything` and reject each blocked scope; the scopes go to the `docker`
/// transport and, except those with three or more `/`, to `atomic`. Written as Go's
/// `json.MarshalIndent(policy, "", "  ")` (object keys sorted, no final newline).
///
/// Errors: both lists set ("invalid images config: only one of AllowedRegistries or
/// BlockedRegistries may be specified"; admission refuses it first).
pub fn policy_json(template: &str, blocked: &[String], allowed: &[String]) -> Result<String, String> {
    use serde_json::json;
    if !blocked.is_empty() && !allowed.is_empty() {
        return Err(
            "invalid images config: only one of AllowedRegistries or BlockedRegistries may be specified".into(),
        );
    }
    let policy: Value = serde_json::from_str(template).map_err(|e| format!("error decoding policy json: {e}"))?;
    let mut default = policy["default"].clone();
    let mut transports: BTreeMap<String, BTreeMap<String, Value>> =
        serde_json::from_value(policy["transports"].clone()).unwrap_or_default();
    let mut scopes: BTreeMap<String, Value> = BTreeMap::new();
    if !allowed.is_empty() {
        default = json!([{"type": "reject"}]);
        for r in allowed {
            scopes.insert(r.clone(), json!([{"type": "insecureAcceptAnything"}]));
        }
    }
    if !blocked.is_empty() {
        default = json!([{"type": "insecureAcceptAnything"}]);
        for r in blocked {
            scopes.insert(r.clone(), json!([{"type": "reject"}]));
        }
    }
    if !scopes.is_empty() {
        let atomic = scopes
            .iter()
            .filter(|(k, _)| k.matches('/').count() < 3)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        transports.insert("atomic".into(), atomic);
        transports.insert("docker".into(), scopes);
    }
    Ok(serde_json::to_string_pretty(&json!({"default": default, "transports": transports})).expect("JSON renders"))
}

/// The search-registries dropin exactly as MCO writes it (its e2e test PolarionID:52520):
/// `unqualified-search-registries = ["quay.io"]`, then `short-name-mode = ""` and
/// `additional-layer-store-auth-helper = ""` (the zero fields of containers/image's
/// `V2RegistriesConf` that its TOML encoder writes).
pub fn search_registries_dropin(registries: &[String]) -> String {
    let list = toml::Value::Array(registries.iter().map(|s| toml::Value::from(s.clone())).collect());
    format!(
        "unqualified-search-registries = {list}\nshort-name-mode = \"\"\nadditional-layer-store-auth-helper = \"\"\n"
    )
}

fn list_key(kind: &str) -> &'static str {
    match kind {
        "ImageDigestMirrorSet" => "imageDigestMirrors",
        "ImageTagMirrorSet" => "imageTagMirrors",
        _ => "repositoryDigestMirrors",
    }
}

#[cfg(test)]
mod tests;
