//! Diffs between two rendered configs, every changed item attributed.
//!
//! Owns the comparison of two rendered MachineConfigs item by item (files with their decoded,
//! decompressed contents, mode and owner; units with contents, enabled and mask; dropins; SSH
//! keys and the password hash of `core`; kernel arguments; extensions; kernelType; fips;
//! osImageURL), git-style unified diffs of text contents (the `similar` crate), and the
//! attribution of each side to the MachineConfig that wrote it ([`crate::render::Attribution`])
//! and to the change that made that MachineConfig what it was ([`Provenance`], supplied by the
//! caller from the history). Pure: no store, no clock.

use crate::ignition::{self, Config, File, Unit};
use crate::model::MachineConfig;
use crate::render::Attribution;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Who made a source MachineConfig what it was when a render used it: its last change at or
/// before the render.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    /// The actor of that change (`admin`, `system:node:worker-0`, `controller:template`, ...).
    pub actor: String,
    /// When (RFC 3339).
    pub time: String,
    /// The reason the client gave (may be empty).
    pub reason: String,
    /// The resourceVersion (log seq) of that change.
    pub resource_version: u64,
    /// The event type (`MachineConfigCreated`, `MachineConfigUpdated`).
    pub event: String,
}

/// One side of a changed item.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Side {
    /// The MachineConfig that wrote the item (empty when the rendered config has no
    /// attribution, e.g. rendered before mco recorded it).
    pub source: String,
    /// The change that made `source` what it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_by: Option<Provenance>,
    /// A short rendering of the value (`mode 0644 owner root:root`, `enabled`, `realtime`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
}

/// What kind of item changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Section {
    File,
    Unit,
    Dropin,
    SshKey,
    PasswordHash,
    KernelArgument,
    Extension,
    KernelType,
    Fips,
    OsImageUrl,
}

/// How it changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Change {
    Added,
    Removed,
    Changed,
}

/// One changed item.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Item {
    pub section: Section,
    /// Path, unit name, `<unit>/<dropin>`, key, argument or value.
    pub name: String,
    pub change: Change,
    /// The fields that differ for a changed item (`contents`, `mode`, `owner`, `enabled`,
    /// `mask`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
    /// Unified diff of text contents (`--- a/… +++ b/…`), empty when the contents are equal or
    /// binary (then [`Item::fields`] says `contents` and the hashes differ).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub unified: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Side>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Side>,
}

/// Both rendered configs and their items that differ, in a stable order (files, units,
/// dropins, SSH keys, password, kernel arguments, extensions, kernelType, fips, osImageURL).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RenderDiff {
    pub from: String,
    pub to: String,
    pub items: Vec<Item>,
}

/// One side of a diff: a rendered config and how to find who changed its sources.
pub struct Input<'a> {
    pub config: &'a MachineConfig,
    /// The change that made a source MachineConfig what it was when this render used it.
    pub provenance: &'a dyn Fn(&str) -> Option<Provenance>,
}

fn config_of(mc: &MachineConfig) -> Result<Config, String> {
    match &mc.spec.config {
        None | Some(serde_json::Value::Null) => Ok(Config::default()),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| format!("{}: {e}", mc.name())),
    }
}

fn text(bytes: &[u8]) -> Option<&str> {
    std::str::from_utf8(bytes).ok()
}

/// A git-style unified diff of two texts with the given headers; empty when equal.
pub fn unified(a: &str, b: &str, from_header: &str, to_header: &str) -> String {
    if a == b {
        return String::new();
    }
    similar::TextDiff::from_lines(a, b)
        .unified_diff()
        .context_radius(3)
        .header(from_header, to_header)
        .to_string()
}

fn owner(f: &File) -> String {
    let part = |u: &Option<ignition::NodeUser>| match u {
        Some(ignition::NodeUser { id: Some(id), .. }) => id.to_string(),
        Some(ignition::NodeUser { name: Some(n), .. }) if !n.is_empty() => n.clone(),
        _ => "root".to_string(),
    };
    format!("{}:{}", part(&f.user), part(&f.group))
}

fn file_value(f: &File) -> String {
    format!("mode {:04o} owner {}", f.mode.unwrap_or(0o644), owner(f))
}

fn unit_value(u: &Unit) -> String {
    let mut parts = Vec::new();
    match u.enabled {
        Some(true) => parts.push("enabled"),
        Some(false) => parts.push("disabled"),
        None => {}
    }
    if u.mask == Some(true) {
        parts.push("masked");
    }
    if u.contents.as_deref().is_some_and(|c| !c.is_empty()) {
        parts.push("with contents");
    }
    parts.join(", ")
}

/// Compares two rendered configs.
///
/// Errors: a config whose Ignition does not decode, or a file whose contents do not decode
/// (both would have been refused at admission).
pub fn diff(from: Input<'_>, to: Input<'_>) -> Result<RenderDiff, String> {
    let (ca, cb) = (config_of(from.config)?, config_of(to.config)?);
    let (aa, ab) = (
        Attribution::of(from.config).unwrap_or_default(),
        Attribution::of(to.config).unwrap_or_default(),
    );
    let (na, nb) = (from.config.name(), to.config.name());
    let side = |input: &Input<'_>, source: Option<&String>, value: String| Side {
        source: source.cloned().unwrap_or_default(),
        changed_by: source.and_then(|s| (input.provenance)(s)),
        value,
    };
    let mut items = Vec::new();

    // Files.
    let fa: BTreeMap<&str, &File> = ca.storage.files.iter().map(|f| (f.path.as_str(), f)).collect();
    let fb: BTreeMap<&str, &File> = cb.storage.files.iter().map(|f| (f.path.as_str(), f)).collect();
    for path in fa.keys().chain(fb.keys()).collect::<std::collections::BTreeSet<_>>() {
        let (a, b) = (fa.get(path), fb.get(path));
        let bytes = |f: Option<&&File>| -> Result<Vec<u8>, String> {
            f.map(|f| ignition::file_contents(f).map_err(|e| format!("{path}: {e}")))
                .transpose()
                .map(Option::unwrap_or_default)
        };
        let (ba, bb) = (bytes(a)?, bytes(b)?);
        let mut fields = Vec::new();
        if let (Some(a), Some(b)) = (a, b) {
            if ba != bb {
                fields.push("contents".to_string());
            }
            if a.mode.unwrap_or(0o644) != b.mode.unwrap_or(0o644) {
                fields.push("mode".to_string());
            }
            if owner(a) != owner(b) {
                fields.push("owner".to_string());
            }
            if fields.is_empty() {
                continue;
            }
        }
        let change = match (a, b) {
            (None, Some(_)) => Change::Added,
            (Some(_), None) => Change::Removed,
            _ => Change::Changed,
        };
        let unified = match (text(&ba), text(&bb)) {
            (Some(ta), Some(tb)) => unified(ta, tb, &format!("a{path} ({na})"), &format!("b{path} ({nb})")),
            _ => String::new(),
        };
        items.push(Item {
            section: Section::File,
            name: path.to_string(),
            change,
            fields,
            unified,
            from: a.map(|f| side(&from, aa.files.get(*path), file_value(f))),
            to: b.map(|f| side(&to, ab.files.get(*path), file_value(f))),
        });
    }

    // Units and their dropins.
    let ua: BTreeMap<&str, &Unit> = ca.systemd.units.iter().map(|u| (u.name.as_str(), u)).collect();
    let ub: BTreeMap<&str, &Unit> = cb.systemd.units.iter().map(|u| (u.name.as_str(), u)).collect();
    let names: std::collections::BTreeSet<&str> = ua.keys().chain(ub.keys()).copied().collect();
    let mut dropin_items = Vec::new();
    for name in names {
        let (a, b) = (ua.get(name), ub.get(name));
        let contents = |u: Option<&&Unit>| u.and_then(|u| u.contents.clone()).unwrap_or_default();
        let (ta, tb) = (contents(a), contents(b));
        let unit_part = |u: Option<&&Unit>| u.map(|u| (u.contents.clone(), u.enabled, u.mask));
        let mut fields = Vec::new();
        if ta != tb {
            fields.push("contents".to_string());
        }
        if a.and_then(|u| u.enabled) != b.and_then(|u| u.enabled) {
            fields.push("enabled".to_string());
        }
        if a.and_then(|u| u.mask) != b.and_then(|u| u.mask) {
            fields.push("mask".to_string());
        }
        let unit_changed = unit_part(a) != unit_part(b) && !(a.is_some() && b.is_some() && fields.is_empty());
        if unit_changed {
            let change = match (a, b) {
                (None, Some(_)) => Change::Added,
                (Some(_), None) => Change::Removed,
                _ => Change::Changed,
            };
            let path = ignition::unit_path(name);
            items.push(Item {
                section: Section::Unit,
                name: name.to_string(),
                change,
                fields,
                unified: unified(&ta, &tb, &format!("a{path} ({na})"), &format!("b{path} ({nb})")),
                from: a.map(|u| side(&from, aa.units.get(name), unit_value(u))),
                to: b.map(|u| side(&to, ab.units.get(name), unit_value(u))),
            });
        }
        let da: BTreeMap<&str, &str> = a
            .iter()
            .flat_map(|u| u.dropins.iter())
            .map(|d| (d.name.as_str(), d.contents.as_deref().unwrap_or("")))
            .collect();
        let db: BTreeMap<&str, &str> = b
            .iter()
            .flat_map(|u| u.dropins.iter())
            .map(|d| (d.name.as_str(), d.contents.as_deref().unwrap_or("")))
            .collect();
        for dropin in da.keys().chain(db.keys()).collect::<std::collections::BTreeSet<_>>() {
            let (x, y) = (da.get(dropin), db.get(dropin));
            if x == y {
                continue;
            }
            let key = format!("{name}/{dropin}");
            let path = ignition::dropin_path(name, dropin);
            dropin_items.push(Item {
                section: Section::Dropin,
                name: key.clone(),
                change: match (x, y) {
                    (None, Some(_)) => Change::Added,
                    (Some(_), None) => Change::Removed,
                    _ => Change::Changed,
                },
                fields: if x.is_some() && y.is_some() {
                    vec!["contents".to_string()]
                } else {
                    Vec::new()
                },
                unified: unified(
                    x.copied().unwrap_or(""),
                    y.copied().unwrap_or(""),
                    &format!("a{path} ({na})"),
                    &format!("b{path} ({nb})"),
                ),
                from: x.map(|_| side(&from, aa.dropins.get(&key), String::new())),
                to: y.map(|_| side(&to, ab.dropins.get(&key), String::new())),
            });
        }
    }
    items.extend(dropin_items);

    // SSH keys and the password hash of core.
    let core = |c: &Config| {
        c.passwd
            .users
            .iter()
            .find(|u| u.name == "core")
            .cloned()
            .unwrap_or_default()
    };
    let (core_a, core_b) = (core(&ca), core(&cb));
    for key in &core_a.ssh_authorized_keys {
        if !core_b.ssh_authorized_keys.contains(key) {
            items.push(Item {
                section: Section::SshKey,
                name: key.clone(),
                change: Change::Removed,
                fields: Vec::new(),
                unified: String::new(),
                from: Some(side(&from, aa.ssh_keys.get(key), String::new())),
                to: None,
            });
        }
    }
    for key in &core_b.ssh_authorized_keys {
        if !core_a.ssh_authorized_keys.contains(key) {
            items.push(Item {
                section: Section::SshKey,
                name: key.clone(),
                change: Change::Added,
                fields: Vec::new(),
                unified: String::new(),
                from: None,
                to: Some(side(&to, ab.ssh_keys.get(key), String::new())),
            });
        }
    }
    if core_a.password_hash != core_b.password_hash {
        items.push(Item {
            section: Section::PasswordHash,
            name: "core".into(),
            change: match (&core_a.password_hash, &core_b.password_hash) {
                (None, Some(_)) => Change::Added,
                (Some(_), None) => Change::Removed,
                _ => Change::Changed,
            },
            fields: Vec::new(),
            unified: String::new(),
            from: core_a
                .password_hash
                .as_ref()
                .map(|_| side(&from, aa.password_hash.as_ref(), String::new())),
            to: core_b
                .password_hash
                .as_ref()
                .map(|_| side(&to, ab.password_hash.as_ref(), String::new())),
        });
    }

    // Lists: kernel arguments and extensions, as multisets (order changes are changes too).
    let list_items =
        |section: Section, a: &[String], b: &[String], sa: &[crate::render::Sourced], sb: &[crate::render::Sourced]| {
            let mut out = Vec::new();
            let count = |l: &[String], v: &String| l.iter().filter(|x| *x == v).count();
            let source_of = |l: &[crate::render::Sourced], v: &String| {
                l.iter().rev().find(|s| s.value == *v).map(|s| s.source.clone())
            };
            let mut seen = std::collections::BTreeSet::new();
            for v in a.iter().chain(b) {
                if !seen.insert(v) {
                    continue;
                }
                let (x, y) = (count(a, v), count(b, v));
                if x > y {
                    out.push(Item {
                        section,
                        name: v.clone(),
                        change: Change::Removed,
                        fields: Vec::new(),
                        unified: String::new(),
                        from: Some(side(&from, source_of(sa, v).as_ref(), String::new())),
                        to: None,
                    });
                } else if y > x {
                    out.push(Item {
                        section,
                        name: v.clone(),
                        change: Change::Added,
                        fields: Vec::new(),
                        unified: String::new(),
                        from: None,
                        to: Some(side(&to, source_of(sb, v).as_ref(), String::new())),
                    });
                }
            }
            if out.is_empty() && a != b {
                out.push(Item {
                    section,
                    name: "order".into(),
                    change: Change::Changed,
                    fields: Vec::new(),
                    unified: String::new(),
                    from: Some(side(&from, None, a.join(" "))),
                    to: Some(side(&to, None, b.join(" "))),
                });
            }
            out
        };
    let (sa, sb) = (&from.config.spec, &to.config.spec);
    items.extend(list_items(
        Section::KernelArgument,
        &sa.kernel_arguments,
        &sb.kernel_arguments,
        &aa.kernel_arguments,
        &ab.kernel_arguments,
    ));
    items.extend(list_items(
        Section::Extension,
        &sa.extensions,
        &sb.extensions,
        &aa.extensions,
        &ab.extensions,
    ));

    // Scalars.
    let kernel = |k: &str| {
        if k.is_empty() {
            "default".to_string()
        } else {
            k.to_string()
        }
    };
    let scalars = [
        (
            Section::KernelType,
            kernel(&sa.kernel_type),
            kernel(&sb.kernel_type),
            &aa.kernel_type,
            &ab.kernel_type,
        ),
        (
            Section::Fips,
            sa.fips.to_string(),
            sb.fips.to_string(),
            &aa.fips,
            &ab.fips,
        ),
        (
            Section::OsImageUrl,
            sa.os_image_url.clone(),
            sb.os_image_url.clone(),
            &aa.os_image_url,
            &ab.os_image_url,
        ),
    ];
    for (section, x, y, src_a, src_b) in scalars {
        if x != y {
            items.push(Item {
                section,
                name: String::new(),
                change: Change::Changed,
                fields: Vec::new(),
                unified: String::new(),
                from: Some(side(&from, src_a.as_ref(), x)),
                to: Some(side(&to, src_b.as_ref(), y)),
            });
        }
    }
    Ok(RenderDiff {
        from: na.to_string(),
        to: nb.to_string(),
        items,
    })
}

#[cfg(test)]
mod tests;
