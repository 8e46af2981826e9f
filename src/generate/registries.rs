//! Image mirror sets and the cluster Image config (mco-facts 8.3) rendered into
//! `/etc/containers/registries.conf` (containers-registries.conf(5), version 2) and
//! `registries.conf.d/01-image-searchRegistries.conf` of `99-<pool>-generated-registries`.
//!
//! MCO `pkg/controller/container-runtime-config/helpers.go` (`updateRegistriesConfig`,
//! `validateRegistriesConfScopes`) over openshift/runtime-utils `EditRegistriesConfig`:
//! ImageDigestMirrorSet mirrors get `pull-from-mirror = "digest-only"`, ImageTagMirrorSet
//! mirrors `"tag-only"`, ImageContentSourcePolicies count as digest mirror sets;
//! `NeverContactSource` blocks the source; one `[[registry]]` per source with the mirrors of
//! every object in name order (duplicates dropped, a mirror equal to its source ignored);
//! blocked scopes nested under a mirrored source get that source's mirrors; the Image config
//! adds `insecure`/`blocked` scopes and search registries. TOML through the `toml` crate.

use super::field;
use crate::model::{
    Image, ImageContentSourcePolicy, ImageDigestMirrorSet, ImageMirrors, ImageTagMirrorSet, Kind, RegistrySources,
};
use crate::validation::FieldError;
use serde_json::Value;
use std::collections::BTreeMap;

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
    /// Whether nothing would be written (MCO then generates no registries config).
    pub fn is_empty(&self) -> bool {
        let sources = self
            .image
            .as_ref()
            .and_then(|i| i.spec.registry_sources.clone())
            .unwrap_or_default();
        self.idms.iter().all(|i| i.spec.image_digest_mirrors.is_empty())
            && self.itms.iter().all(|i| i.spec.image_tag_mirrors.is_empty())
            && self.icsp.iter().all(|i| i.spec.repository_digest_mirrors.is_empty())
            && sources == RegistrySources::default()
    }
}

#[derive(Default)]
struct Entry {
    mirrors: Vec<(String, &'static str)>,
    policy: Option<(String, String)>,
    blocked: bool,
    insecure: bool,
}

/// The files of `99-<pool>-generated-registries`: the base `registries.conf` edited with the
/// inputs, and the search-registries dropin when search registries are set.
///
/// Errors (MCO's controller errors, each naming the object and field): conflicting
/// `mirrorSourcePolicy` for one source across objects; `NeverContactSource` for a source
/// listed as its own mirror.
pub fn generated_files(base: &str, inputs: &Inputs) -> Result<Vec<(String, String)>, String> {
    let mut entries: BTreeMap<String, Entry> = BTreeMap::new();
    // (kind, object name, entries, pull-from-mirror)
    let mut sets: Vec<(&str, String, Vec<ImageMirrors>, &'static str)> = Vec::new();
    let mut digest: Vec<(String, Vec<ImageMirrors>, &str)> = inputs
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
            (
                p.metadata.name.clone().unwrap_or_default(),
                list,
                "ImageContentSourcePolicy",
            )
        })
        .collect();
    digest.extend(inputs.idms.iter().map(|d| {
        (
            d.metadata.name.clone().unwrap_or_default(),
            d.spec.image_digest_mirrors.clone(),
            "ImageDigestMirrorSet",
        )
    }));
    digest.sort_by(|a, b| (a.2, &a.0).cmp(&(b.2, &b.0)));
    for (name, list, kind) in digest {
        sets.push((kind, name, list, "digest-only"));
    }
    let mut tags: Vec<_> = inputs
        .itms
        .iter()
        .map(|t| {
            (
                t.metadata.name.clone().unwrap_or_default(),
                t.spec.image_tag_mirrors.clone(),
            )
        })
        .collect();
    tags.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, list) in tags {
        sets.push(("ImageTagMirrorSet", name, list, "tag-only"));
    }
    for (kind, name, list, pull) in &sets {
        for (i, m) in list.iter().enumerate() {
            let e = entries.entry(m.source.clone()).or_default();
            let policy = m
                .mirror_source_policy
                .clone()
                .unwrap_or_else(|| "AllowContactingSource".into());
            let here = format!("{kind} {name:?} spec.{}[{i}].mirrorSourcePolicy", list_key(kind));
            if m.mirror_source_policy.is_some() {
                match &e.policy {
                    Some((p, at)) if *p != policy => {
                        return Err(format!(
                            "conflicting mirrorSourcePolicy is set for the same source {:?} in imagedigestmirrorsets, imagetagmirrorsets, or imagecontentsourcepolicies ({at}: {p}, {here}: {policy})",
                            m.source
                        ))
                    }
                    _ => e.policy = Some((policy.clone(), here.clone())),
                }
            }
            if policy == "NeverContactSource" {
                if m.mirrors.contains(&m.source) {
                    return Err(format!(
                        "cannot set mirrorSourcePolicy: NeverContactSource if the source {:?} is one of the mirrors ({kind} {name:?} spec.{}[{i}].mirrors)",
                        m.source,
                        list_key(kind)
                    ));
                }
                e.blocked = true;
            }
            for mirror in &m.mirrors {
                if *mirror == m.source {
                    continue; // a mirror equal to its source is ignored
                }
                if !e.mirrors.iter().any(|(l, p)| l == mirror && p == pull) {
                    e.mirrors.push((mirror.clone(), pull));
                }
            }
        }
    }
    let sources = inputs
        .image
        .as_ref()
        .and_then(|i| i.spec.registry_sources.clone())
        .unwrap_or_default();
    for r in &sources.insecure_registries {
        entries.entry(r.clone()).or_default().insecure = true;
    }
    for r in &sources.blocked_registries {
        entries.entry(r.clone()).or_default().blocked = true;
    }
    // Blocked scopes nested under a mirrored source inherit its mirrors (with the sub-path).
    let mirrored: Vec<(String, Vec<(String, &'static str)>)> = entries
        .iter()
        .filter(|(_, e)| !e.mirrors.is_empty())
        .map(|(s, e)| (s.clone(), e.mirrors.clone()))
        .collect();
    for (scope, e) in entries.iter_mut() {
        if !e.blocked || !e.mirrors.is_empty() {
            continue;
        }
        if let Some((src, ms)) = mirrored
            .iter()
            .filter(|(s, _)| scope.starts_with(&format!("{s}/")))
            .max_by_key(|(s, _)| s.len())
        {
            let rest = &scope[src.len()..];
            e.mirrors = ms.iter().map(|(m, p)| (format!("{m}{rest}"), *p)).collect();
        }
    }
    let mut doc: toml::Table = base
        .parse()
        .map_err(|e| format!("base registries.conf does not parse: {e}"))?;
    let mut regs = Vec::new();
    for (source, e) in &entries {
        let mut t = toml::Table::new();
        t.insert("prefix".into(), "".into());
        t.insert("location".into(), source.clone().into());
        if e.blocked {
            t.insert("blocked".into(), true.into());
        }
        if e.insecure {
            t.insert("insecure".into(), true.into());
        }
        if !e.mirrors.is_empty() {
            let ms = e
                .mirrors
                .iter()
                .map(|(l, p)| {
                    let mut m = toml::Table::new();
                    m.insert("location".into(), l.clone().into());
                    if sources
                        .insecure_registries
                        .iter()
                        .any(|i| l == i || l.starts_with(&format!("{i}/")))
                    {
                        m.insert("insecure".into(), true.into());
                    }
                    m.insert("pull-from-mirror".into(), (*p).into());
                    toml::Value::Table(m)
                })
                .collect();
            t.insert("mirror".into(), toml::Value::Array(ms));
        }
        regs.push(toml::Value::Table(t));
    }
    if !regs.is_empty() {
        doc.insert("registry".into(), toml::Value::Array(regs));
    }
    let mut files = vec![(
        super::templates::REGISTRIES_CONF_PATH.to_string(),
        toml::to_string(&doc).expect("TOML renders"),
    )];
    if !sources.container_runtime_search_registries.is_empty() {
        let mut t = toml::Table::new();
        let list = sources
            .container_runtime_search_registries
            .iter()
            .map(|s| toml::Value::from(s.clone()))
            .collect();
        t.insert("unqualified-search-registries".into(), toml::Value::Array(list));
        t.insert("short-name-mode".into(), "permissive".into());
        files.push((
            SEARCH_REGISTRIES.to_string(),
            toml::to_string(&t).expect("TOML renders"),
        ));
    }
    if !sources.allowed_registries.is_empty() {
        files.push((
            super::templates::POLICY_JSON_PATH.to_string(),
            allowed_policy(&sources.allowed_registries),
        ));
    }
    Ok(files)
}

fn list_key(kind: &str) -> &'static str {
    match kind {
        "ImageDigestMirrorSet" => "imageDigestMirrors",
        "ImageTagMirrorSet" => "imageTagMirrors",
        _ => "repositoryDigestMirrors",
    }
}

/// `policy.json` rejecting every image but those from `allowed` (MCO's `updatePolicyJSON`).
fn allowed_policy(allowed: &[String]) -> String {
    let mut docker = serde_json::Map::new();
    for a in allowed {
        docker.insert(a.clone(), serde_json::json!([{"type": "insecureAcceptAnything"}]));
    }
    let v = serde_json::json!({
        "default": [{"type": "reject"}],
        "transports": {"atomic": docker.clone(), "docker": docker, "docker-daemon": {"": [{"type": "insecureAcceptAnything"}]}}
    });
    serde_json::to_string_pretty(&v).expect("JSON renders") + "\n"
}

#[cfg(test)]
mod tests;
