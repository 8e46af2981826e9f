//! Parsing and validation of one Ignition 3.x config as a MachineConfig carries it.
//!
//! Owns the rules that decide whether a raw `spec.config` is acceptable: the spec version, the
//! Ignition validation rules MCO runs (`ValidateIgnition` in `pkg/controller/common/helpers.go`,
//! vendored `ignition/v2/config/v3_5/types`), MCO's own file-mode rule, the day-2
//! reconcilability rules of `pkg/controller/common/reconcile.go` applied to a single config
//! (a section mco cannot reconcile is refused up front, not at render time), and what a node can
//! never apply (see [`super::names`]). Also owns turning file contents into bytes
//! ([`file_contents`]: the data URL decoder of [`super::dataurl`], then gzip).
//!
//! This file owns the config-level rules ([`validate_config`]: the `ignition` section, units,
//! users) and unit-file parsing; `parse.rs` the spec version and the decode with field paths
//! ([`parse_config`]); `files.rs` the storage entries (files, directories, links, owners, their
//! resources and hashes) and [`file_contents`].
//!
//! Pure: no IO, no clock. It must not merge configs (the render module does) nor fetch anything:
//! mco only understands `data:` URLs.

mod files;
mod parse;

pub use files::{file_contents, file_contents_with, DAEMON_FORCE_FILE};
pub use parse::{parse_config, parse_config_with, ACCEPTED_EXTRA_VERSIONS, SUPPORTED_VERSIONS};

use crate::ignition::names::{check_dropin_name, check_unit_name};
use crate::ignition::types::{Config, Unit, User};
use crate::validation::FieldError;
use files::{has_source, validate_file, Size};
use parse::SemVer;
use serde_json::Value;
use std::collections::HashSet;

/// Runs every validation rule over an already deserialized config and returns all errors, each
/// with a field path under `prefix`. [`parse_config`] calls it; the render controller calls it
/// on a pool's merged config, so that two MachineConfigs that are each valid but clash once
/// merged are refused before anything is written. Every rule therefore lives here, not in
/// [`parse_config`].
///
/// Rules (MCO `ValidateIgnition` + Ignition's `Validate` + `isConfigReconcilable` + what a node
/// can never apply):
/// - files: path rules of [`check_node_path`] (Ignition's `path not specified`, `path not
///   absolute`, `path is not fully simplified`, then `/`, NUL, `PATH_MAX`, `NAME_MAX`); no two
///   files with one path (`duplicate entry defined`); mode 0..=0o7777 (Ignition `illegal file
///   mode`) and at most 0o777 (MCO `invalid mode 01204 for /etc/foo, cannot exceed 0777`);
///   `overwrite: true` needs a source; user/group not both id and name, ids 0..=4294967294,
///   names as shadow-utils creates them; the contents rules of `validate_resource` (below); no
///   `append`; not [`DAEMON_FORCE_FILE`].
/// - paths of different sections: a file whose path is a unit or dropin path with contents
///   (Ignition 3.1+ `path conflicts with systemd unit or dropin`, `config/v3_*/types/config.go`),
///   the path of a masked unit (masking replaces it with a symlink to `/dev/null`), or the
///   `core` user's SSH key file; a file whose path is a parent directory of another path the
///   config writes.
/// - units: names as [`check_unit_name`] (Ignition's suffix list, then systemd's
///   `unit_name_is_valid`), unique; dropins as [`check_dropin_name`], unique within their unit;
///   unit and dropin contents parse as systemd unit files ([`parse_unit_file`]).
/// - passwd.users: only `core`, only `sshAuthorizedKeys` and `passwordHash`, unique.
/// - refused sections (non-empty): passwd.groups, storage.directories/links/disks/raid/
///   filesystems/luks/trees, Ignition `kernelArguments`, and `ignition.config.merge/replace`
///   with a source.
pub fn validate_config(config: &Config, prefix: &str) -> Vec<FieldError> {
    validate_config_with(config, prefix, crate::limits::ContentLimits::default())
}

/// [`validate_config`] with the limit of one file's contents, decoded and decompressed
/// ([`crate::limits::Limits::max_file_bytes`]): a larger file is refused at
/// `<prefix>.storage.files[N].contents.source` with `Too long: may not be more than N bytes
/// ...`, and a gzip bomb is inflated only up to the limit ([`crate::limits::gunzip_capped`]);
/// files whose contents add up past [`crate::limits::ContentLimits::max_total_bytes`] are
/// refused once, at `<prefix>.storage.files`, naming the limit (each file is inflated at most
/// up to what remains of that budget, so the whole config costs at most the budget).
pub fn validate_config_with(config: &Config, prefix: &str, limits: crate::limits::ContentLimits) -> Vec<FieldError> {
    let max_file_bytes = limits.max_file_bytes;
    let mut total: u64 = 0;
    let mut over_total = false;
    let mut errors = Vec::new();
    validate_ignition_section(config, prefix, &mut errors);
    // Spec 3.0.0 knows only sha512 hashes (sha256 came with 3.1.0).
    let sha256_ok = SemVer::parse(&config.ignition.version)
        .and_then(|v| v.accepted_minor())
        .is_none_or(|minor| minor >= 1);
    let mut paths = HashSet::new();
    for (i, file) in config.storage.files.iter().enumerate() {
        let at = format!("{prefix}.storage.files[{i}]");
        let budget = limits.max_total_bytes.saturating_sub(total);
        match validate_file(file, &at, sha256_ok, max_file_bytes, budget, &mut errors) {
            Size::Known(n) => total = total.saturating_add(n),
            Size::Unknown => {}
            Size::OverBudget if !over_total => {
                over_total = true;
                errors.push(FieldError::new(
                    format!("{prefix}.storage.files"),
                    limits.total_refusal(),
                ));
            }
            Size::OverBudget => {}
        }
        if !file.path.is_empty() && !paths.insert(file.path.as_str()) {
            errors.push(FieldError::new(format!("{at}.path"), "duplicate entry defined"));
        }
    }
    let mut units = HashSet::new();
    for (i, unit) in config.systemd.units.iter().enumerate() {
        let at = format!("{prefix}.systemd.units[{i}]");
        validate_unit(unit, &at, &mut errors);
        if !unit.name.is_empty() && !units.insert(unit.name.as_str()) {
            errors.push(FieldError::new(format!("{at}.name"), "duplicate entry defined"));
        }
    }
    let mut users = HashSet::new();
    for (i, user) in config.passwd.users.iter().enumerate() {
        let at = format!("{prefix}.passwd.users[{i}]");
        validate_user(user, &at, &mut errors);
        if !users.insert(user.name.as_str()) {
            errors.push(FieldError::new(format!("{at}.name"), "duplicate entry defined"));
        }
    }
    super::conflicts::validate_path_conflicts(config, prefix, &mut errors);
    let s = &config.storage;
    let refused: [(&str, &Option<Value>); 9] = [
        ("passwd.groups", &config.passwd.groups),
        ("storage.directories", &s.directories),
        ("storage.links", &s.links),
        ("storage.disks", &s.disks),
        ("storage.raid", &s.raid),
        ("storage.filesystems", &s.filesystems),
        ("storage.luks", &s.luks),
        ("storage.trees", &s.trees),
        ("kernelArguments", &config.kernel_arguments),
    ];
    for (section, value) in refused {
        if value.as_ref().is_some_and(is_non_empty) {
            let hint = if section == "kernelArguments" {
                " (use spec.kernelArguments of the MachineConfig instead)"
            } else {
                ""
            };
            errors.push(FieldError::new(
                format!("{prefix}.{section}"),
                format!("mco does not manage {section}: changes to it cannot be reconciled on a running node (MCO refuses them day 2){hint}"),
            ));
        }
    }
    errors
}

/// True when a raw section holds something: `null`, `[]`, `{}` and objects whose values are all
/// empty (`{"shouldExist": []}`) count as empty.
pub(super) fn is_non_empty(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => o.values().any(is_non_empty),
        _ => true,
    }
}

fn validate_ignition_section(config: &Config, prefix: &str, errors: &mut Vec<FieldError>) {
    let Some(Value::Object(cfg)) = &config.ignition.config else {
        return;
    };
    let remote = |field: String| {
        FieldError::new(
            field,
            "remote Ignition configs are not supported: mco does not fetch remote content",
        )
    };
    if let Some(replace) = cfg.get("replace") {
        if has_source(replace) {
            errors.push(remote(format!("{prefix}.ignition.config.replace.source")));
        }
    }
    if let Some(Value::Array(merge)) = cfg.get("merge") {
        for (i, m) in merge.iter().enumerate() {
            if has_source(m) {
                errors.push(remote(format!("{prefix}.ignition.config.merge[{i}].source")));
            }
        }
    }
}

fn validate_unit(unit: &Unit, at: &str, errors: &mut Vec<FieldError>) {
    if let Err(msg) = check_unit_name(&unit.name) {
        errors.push(FieldError::new(format!("{at}.name"), msg));
    }
    if let Some(contents) = &unit.contents {
        if let Err(msg) = parse_unit_file(contents) {
            errors.push(FieldError::new(
                format!("{at}.contents"),
                format!("invalid unit content: {msg}"),
            ));
        }
    }
    let mut names = HashSet::new();
    for (j, dropin) in unit.dropins.iter().enumerate() {
        let dat = format!("{at}.dropins[{j}]");
        if let Err(msg) = check_dropin_name(&dropin.name) {
            errors.push(FieldError::new(format!("{dat}.name"), msg));
        }
        if !dropin.name.is_empty() && !names.insert(dropin.name.as_str()) {
            errors.push(FieldError::new(format!("{dat}.name"), "duplicate entry defined"));
        }
        if let Some(contents) = &dropin.contents {
            if let Err(msg) = parse_unit_file(contents) {
                errors.push(FieldError::new(
                    format!("{dat}.contents"),
                    format!("invalid unit content: {msg}"),
                ));
            }
        }
    }
}

fn validate_user(user: &User, at: &str, errors: &mut Vec<FieldError>) {
    if user.name != "core" {
        // MCO `validatePasswdChanges` (pkg/controller/common/reconcile.go).
        errors.push(FieldError::new(
            format!("{at}.name"),
            format!(
                "ignition passwd user section contains unsupported changes: non-core user ({:?}: mco manages only the core user's SSH keys and password hash)",
                user.name
            ),
        ));
    }
    for (key, value) in &user.other {
        if is_non_empty(value) && !matches!(value, Value::Bool(false)) {
            errors.push(FieldError::new(
                format!("{at}.{key}"),
                format!("user field {key} is not supported: mco only manages sshAuthorizedKeys and passwordHash of user core (MCO: SSH keys and password hash are not reconcilable)"),
            ));
        }
    }
}

/// Checks that `text` is a systemd unit file as Ignition reads it (go-systemd
/// `unit.Deserialize`): blank lines, comments (`#`, `;`), section headers `[Name]`, and
/// `Key=value` lines inside a section, with `\` line continuations.
///
/// Returns the sections' names in order. Errors: a key before any section, a line that is
/// neither, an unterminated section header, an empty key.
pub fn parse_unit_file(text: &str) -> Result<Vec<String>, String> {
    let mut sections = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let name = rest
                .strip_suffix(']')
                .ok_or_else(|| format!("line {}: section header not closed with ']'", n + 1))?;
            if name.is_empty() {
                return Err(format!("line {}: empty section name", n + 1));
            }
            sections.push(name.to_string());
            continue;
        }
        let (key, _) = line
            .split_once('=')
            .ok_or_else(|| format!("line {}: expected Key=value, a [Section] or a comment", n + 1))?;
        if key.trim().is_empty() {
            return Err(format!("line {}: empty key", n + 1));
        }
        if sections.is_empty() {
            return Err(format!("line {}: key {} is outside any [Section]", n + 1, key.trim()));
        }
        // Continuation lines belong to this value, whatever they contain.
        let mut current = line;
        while current.ends_with('\\') {
            match lines.next() {
                Some((_, next)) => current = next.trim_end(),
                None => break,
            }
        }
    }
    Ok(sections)
}

#[cfg(test)]
mod tests;
