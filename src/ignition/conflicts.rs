//! How the node paths of one config's entries relate: Ignition's file/unit conflict rule and
//! the paths a node can never hold twice (a file that is also a directory, a file replaced by
//! a masked unit's symlink or by the core user's SSH keys). Pure: no IO.

use super::names::{check_dropin_name, check_node_path, check_unit_name, CORE_SSH_KEYS_PATH, SYSTEMD_UNIT_DIR};
use super::types::Config;
use crate::validation::FieldError;
use std::collections::{HashMap, HashSet};

/// What a config puts at a node path, for the conflict checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Writer {
    /// `storage.files[i]`.
    File(usize),
    /// `systemd.units[i]` with contents.
    Unit(usize),
    /// `systemd.units[i]` masked (a symlink to `/dev/null`).
    MaskedUnit(usize),
    /// `systemd.units[i].dropins[j]` with contents.
    Dropin(usize, usize),
    /// The `core` user's SSH keys (`passwd.users[i]`).
    SshKeys(usize),
}

impl Writer {
    fn field(self, prefix: &str) -> String {
        match self {
            Writer::File(i) => format!("{prefix}.storage.files[{i}].path"),
            Writer::Unit(i) | Writer::MaskedUnit(i) => format!("{prefix}.systemd.units[{i}].name"),
            Writer::Dropin(i, j) => format!("{prefix}.systemd.units[{i}].dropins[{j}].name"),
            Writer::SshKeys(i) => format!("{prefix}.passwd.users[{i}].sshAuthorizedKeys"),
        }
    }
}

/// Checks how the node paths of different entries relate (see [`validate_config`]). Only entries
/// whose own path or name is valid take part; their own errors are reported elsewhere.
pub(super) fn validate_path_conflicts(config: &Config, prefix: &str, errors: &mut Vec<FieldError>) {
    let mut others: Vec<(String, Writer)> = Vec::new();
    for (i, unit) in config.systemd.units.iter().enumerate() {
        if check_unit_name(&unit.name).is_err() {
            continue;
        }
        let unit_path = format!("{SYSTEMD_UNIT_DIR}/{}", unit.name);
        if unit.contents.as_deref().is_some_and(|c| !c.is_empty()) {
            others.push((unit_path.clone(), Writer::Unit(i)));
        }
        if unit.mask == Some(true) {
            others.push((unit_path, Writer::MaskedUnit(i)));
        }
        for (j, dropin) in unit.dropins.iter().enumerate() {
            if check_dropin_name(&dropin.name).is_ok() && dropin.contents.as_deref().is_some_and(|c| !c.is_empty()) {
                let path = format!("{SYSTEMD_UNIT_DIR}/{}.d/{}", unit.name, dropin.name);
                others.push((path, Writer::Dropin(i, j)));
            }
        }
    }
    if let Some(i) = config.passwd.users.iter().position(|u| u.name == "core") {
        others.push((CORE_SSH_KEYS_PATH.to_string(), Writer::SshKeys(i)));
    }
    let mut files: HashMap<&str, usize> = HashMap::new();
    for (i, file) in config.storage.files.iter().enumerate() {
        if check_node_path(&file.path).is_ok() {
            files.entry(file.path.as_str()).or_insert(i);
        }
    }
    // Same path.
    for (path, writer) in &others {
        let Some(&i) = files.get(path.as_str()) else { continue };
        let field = Writer::File(i).field(prefix);
        let by = writer.field(prefix);
        let message = match writer {
            Writer::Unit(_) | Writer::Dropin(..) => {
                format!("path conflicts with systemd unit or dropin: {path} is written from {by}")
            }
            Writer::MaskedUnit(_) => format!(
                "path conflicts with systemd unit or dropin: {by} is masked, which replaces {path} with a symlink to /dev/null"
            ),
            Writer::SshKeys(_) => format!(
                "path conflicts with the core user's SSH keys: the daemon writes {by} to {path}"
            ),
            Writer::File(_) => unreachable!("files are not in the list of other writers"),
        };
        errors.push(FieldError::new(field, message));
    }
    // A file that would have to be a directory.
    let all = config
        .storage
        .files
        .iter()
        .enumerate()
        .filter(|(_, f)| check_node_path(&f.path).is_ok())
        .map(|(i, f)| (f.path.as_str(), Writer::File(i)))
        .chain(others.iter().map(|(p, w)| (p.as_str(), *w)));
    let mut reported = HashSet::new();
    for (path, writer) in all {
        let mut parent = path;
        while let Some((dir, _)) = parent.rsplit_once('/') {
            if dir.is_empty() {
                break;
            }
            if let Some(&i) = files.get(dir) {
                if reported.insert(i) {
                    errors.push(FieldError::new(
                        Writer::File(i).field(prefix),
                        format!(
                            "path {dir} is a file here and a directory of {} ({path}): one path cannot be both",
                            writer.field(prefix)
                        ),
                    ));
                }
            }
            parent = dir;
        }
    }
}
