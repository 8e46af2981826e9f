//! What a config manages on the node: its Ignition section, the paths it writes, its units'
//! contents and the `core` user's SSH keys.
//!
//! Pure accessors shared by the writer ([`super::apply`]) and the validator
//! ([`super::validate`]); [`super::validate::ManagedSet`] and its checks stay in `validate.rs`.
//! A leaf of `daemon/` beside [`super::paths`]: it must not touch the host.

use crate::ignition::{Config, Unit};
use crate::model::MachineConfig;
use serde::Deserialize;
use std::collections::BTreeSet;

pub(crate) use crate::ignition::file_contents;
pub use crate::ignition::{dropin_path, unit_path};

/// The only user whose SSH keys the daemon manages.
pub const CORE_USER: &str = "core";

/// The Ignition config of a MachineConfig (`spec.config`; absent means empty).
/// Errors: serde's message; callers say which config it was (MCO: `parsing new Ignition config
/// failed: ...`, `failed to parse Ignition for validation: ...`).
pub fn ignition_config(mc: &MachineConfig) -> Result<Config, String> {
    match &mc.spec.config {
        None | Some(serde_json::Value::Null) => Ok(Config::default()),
        // Deserialized from the borrowed tree: no copy of a config of thousands of files.
        Some(v) => Config::deserialize(v).map_err(|e| e.to_string()),
    }
}

/// The `core` user's `authorized_keys.d/ignition` contents ([`super::paths::SSH_KEYS_PATH`]) for a config:
/// every key of the `core` entry followed by `"\n"`; `None` when the config has no `core` user
/// (keys then unmanaged).
pub fn ssh_keys_contents(cfg: &Config) -> Option<Vec<u8>> {
    let user = cfg.passwd.users.iter().find(|u| u.name == CORE_USER)?;
    Some(
        user.ssh_authorized_keys
            .iter()
            .flat_map(|k| [k.as_bytes(), b"\n"].concat())
            .collect(),
    )
}

/// Whether a unit entry carries its own unit file (non-empty `contents`, MCO `unitHasContent`).
pub fn unit_has_contents(u: &Unit) -> bool {
    u.contents.as_deref().is_some_and(|c| !c.is_empty())
}

/// Every path a config writes: files, unit files, dropins.
pub(crate) fn managed_paths(cfg: &Config) -> BTreeSet<String> {
    let mut set: BTreeSet<String> = cfg.storage.files.iter().map(|f| f.path.clone()).collect();
    for u in &cfg.systemd.units {
        set.insert(unit_path(&u.name));
        set.extend(u.dropins.iter().map(|d| dropin_path(&u.name, &d.name)));
    }
    set
}
