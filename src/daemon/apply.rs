//! Applying a MachineConfig to a node: the diff, the post-config action, and the writes.
//!
//! Owns what MCO's `pkg/daemon/update.go` and `pkg/daemon/file_writers.go` do to the filesystem:
//! files (with `.mcdorig`/`.mcdnoorig` backups), systemd units and dropins, the `core` user's SSH
//! keys, stale-data deletion and the on-disk `currentconfig`. The decision functions
//! ([`ConfigDiff::compute`], [`post_config_action`]) are pure; [`write_config`] acts only through
//! [`Host`]. It must not talk to the API server, validate Ignition, or reboot.
//!
//! Error texts are MCO's (`file_writers.go`, `update.go`), with Go's `%q` and `*os.PathError`
//! renderings from [`crate::gofmt`].

use super::managed::managed_paths;
use super::paths::{FORCE_FILE, PENDING_CONFIG_PATH};
use crate::gofmt::quote;
use crate::host::{exit_error, path_error};
use crate::host::{FileKind, Host, HostError, Owner, UnitVerb};
use crate::ignition::{Config, File, NodeUser, Unit};
use crate::model::MachineConfig;
use std::collections::BTreeSet;

pub(crate) use super::managed::file_contents;
pub use super::managed::{dropin_path, ignition_config, ssh_keys_contents, unit_has_contents, unit_path, CORE_USER};
pub use super::paths::{noorig_path, orig_path, CURRENT_CONFIG_PATH, NOORIG_DIR, ORIG_DIR, SSH_KEYS_PATH};

/// Files written by MCO's certificate writer, not from MachineConfigs: skipped when writing.
const SKIPPED_WRITES: [&str; 1] = ["/etc/kubernetes/kubelet-ca.crt"];
/// Files never deleted as stale data (MCO `deleteStaleData`).
const KEPT_STALE: [&str; 3] = [
    "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
    "/etc/kubernetes/kubelet-ca.crt",
    "/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem",
];

/// How much of the new config [`write_config`] writes and what it replaces: MCO's
/// `updateFiles(old, new, addedOrChangedUnits, ..., forceFilePresent)` (`pkg/daemon/update.go`,
/// mco-facts 4.5).
#[derive(Clone, Copy, Debug)]
pub enum WriteMode<'a> {
    /// Nothing of a MachineConfig on the node yet: every file and every unit is written, nothing
    /// is deleted.
    FirstBoot,
    /// Moving from `old` (also `old == new`, a re-apply): every file, but only the units added or
    /// changed since `old` (MCO OCPBUGS-58023), then the files, dropins and units of `old` that
    /// `new` no longer has are deleted.
    Update { old: &'a MachineConfig },
    /// Like [`WriteMode::Update`], but `/run/machine-config-daemon-force` was present: every unit
    /// and dropin is written too, whether it changed or not, so the force file repairs drifted
    /// units as it repairs files (MCO OCPBUGS-74692: "all units should be written when a
    /// forcefile exists").
    Forced { old: &'a MachineConfig },
}

impl<'a> WriteMode<'a> {
    /// The config being replaced (`None` on first boot).
    pub fn old(self) -> Option<&'a MachineConfig> {
        match self {
            WriteMode::FirstBoot => None,
            WriteMode::Update { old } | WriteMode::Forced { old } => Some(old),
        }
    }
}

/// Writes `new` onto the node as `mode` says. In MCO's order (mco-facts 4.5): every file of
/// `new`; then the units to write (all of them on first boot and when forced, else the added or
/// changed ones): dropins, mask links and unit files, after which `systemctl enable` and
/// `systemctl disable` run once each and `systemctl preset` per unit without `enabled`; stale
/// files, dropins and units of the old config; the `core` SSH keys; finally `currentconfig`.
///
/// Enablement is applied to a unit without contents too when systemd can resolve it on the node
/// (a template instance such as `example-echo@alpha.service` whose `example-echo@.service` the
/// config writes, an alias, a unit shipped under `/usr/lib/systemd/system`): the node then ends
/// up as Ignition leaves a new node booted from `/config/<pool>`. Units systemd cannot resolve
/// are skipped with MCO's log line (OCPBUGS-56648).
///
/// Errors: MCO's text for the node's Degraded `reason`, e.g.
/// `failed to retrieve file ownership for file "/etc/x": failed to retrieve UserID for username: alice`,
/// `daemon could not write systemd unit: failed to write systemd unit "a.service": ...`,
/// `error enabling units: <systemctl output>`, `unable to delete /etc/x: ...`. Writing stops
/// at the first error; the caller rolls back by writing the old config over it.
pub fn write_config(host: &dyn Host, mode: WriteMode<'_>, new: &MachineConfig) -> Result<(), String> {
    let new_cfg = ignition_config(new).map_err(|e| format!("parsing new Ignition config failed: {e}"))?;
    let old_cfg = mode
        .old()
        .map(ignition_config)
        .transpose()
        .map_err(|e| format!("parsing old Ignition config failed: {e}"))?;
    let managed_before: BTreeSet<String> = old_cfg.as_ref().map(managed_paths).unwrap_or_default();
    remove_temp_files(host, managed_before.iter().chain(&managed_paths(&new_cfg)));
    if matches!(mode, WriteMode::Forced { .. }) {
        host.ensure_base_os()
            .map_err(|e| format!("failed to restore the node's base filesystem: {e}"))?;
    }

    write_files(host, &new_cfg.storage.files, &managed_before)?;
    let units: Vec<&Unit> = match (mode, &old_cfg) {
        (WriteMode::Update { .. }, Some(old_cfg)) => new_cfg
            .systemd
            .units
            .iter()
            .filter(|u| !old_cfg.systemd.units.contains(u))
            .collect(),
        _ => new_cfg.systemd.units.iter().collect(),
    };
    if matches!(mode, WriteMode::Forced { .. }) {
        tracing::info!("Forcefile exists, writing all units");
    }
    write_units(host, &units, &managed_before)?;
    if let Some(old_cfg) = &old_cfg {
        delete_stale(host, old_cfg, &new_cfg)?;
    }
    write_ssh_keys(host, old_cfg.as_ref(), &new_cfg)?;
    let json = serde_json::to_vec(new).map_err(|e| format!("failed to serialize {}: {e}", new.name()))?;
    fail::fail_point!("daemon::write::before_currentconfig", |_| crate::host::sigkill_self());
    host.write_atomic(CURRENT_CONFIG_PATH, &json, 0o644, Owner::ROOT)
        .map_err(|e| path_error("open", &e))
}

/// Removes the temp files a killed daemon left next to the paths it writes (their parent
/// directories and those of their `.mcdorig`/`.mcdnoorig` backups, plus those of
/// `currentconfig`, the pending config, the force file and the SSH keys): the atomic write never leaves a
/// partial file at a managed path, but a kill between creating and renaming the temp file leaves
/// the temp file. Failures are only logged (the write that follows reports them).
fn remove_temp_files<'a>(host: &dyn Host, paths: impl Iterator<Item = &'a String>) {
    let mut written: BTreeSet<String> = BTreeSet::new();
    for p in paths {
        // The backups of each managed path are written atomically too.
        written.extend([orig_path(p), noorig_path(p), p.clone()]);
    }
    written.extend([CURRENT_CONFIG_PATH, SSH_KEYS_PATH, PENDING_CONFIG_PATH, FORCE_FILE].map(String::from));
    let dirs: BTreeSet<&str> = written.iter().filter_map(|p| crate::host::parent_dir(p)).collect();
    for dir in dirs {
        match host.remove_temp_files(dir) {
            Ok(0) => {}
            Ok(n) => tracing::info!(dir, removed = n, "removed temp files left by an interrupted write"),
            Err(e) => tracing::warn!(dir, error = %e, "could not look for leftover temp files"),
        }
    }
}

/// Owner of a file entry: ids as given, names looked up on the host, root by default
/// (MCO `getFileOwnership`, `lookupUID`, `lookupGID`).
fn file_owner(host: &dyn Host, user: Option<&NodeUser>, group: Option<&NodeUser>) -> Result<Owner, String> {
    let id = |v: i64| u32::try_from(v).map_err(|_| format!("invalid owner id {v}"));
    let uid = match user {
        Some(NodeUser { id: Some(v), .. }) => id(*v)?,
        Some(NodeUser { name: Some(n), .. }) if !n.is_empty() => host
            .lookup_user(n)
            .ok()
            .flatten()
            .ok_or_else(|| format!("failed to retrieve UserID for username: {n}"))?,
        _ => 0,
    };
    let gid = match group {
        Some(NodeUser { id: Some(v), .. }) => id(*v)?,
        Some(NodeUser { name: Some(n), .. }) if !n.is_empty() => host
            .lookup_group(n)
            .ok()
            .flatten()
            .ok_or_else(|| format!("failed to retrieve GroupID for group: {n}"))?,
        _ => 0,
    };
    Ok(Owner { uid, gid })
}

/// MCO `createOrigFile`: once per path, back up a pre-existing original to `.mcdorig`, or stamp
/// `.mcdnoorig` when there was none. "Original" = present and not written by mco (a path of the
/// old config); MCO's "owned by an RPM" test is undecidable in a sandbox.
/// Errors: `creating orig file for "<path>": ...` (MCO's text), or the stamp's write error.
fn create_orig(host: &dyn Host, path: &str, managed_before: &BTreeSet<String>) -> Result<(), String> {
    let (orig, noorig) = (orig_path(path), noorig_path(path));
    if host.exists(&orig) || host.exists(&noorig) {
        return Ok(());
    }
    let backup_failed = |e: HostError| format!("creating orig file for {}: {}", quote(path), path_error("open", &e));
    let stamp = || {
        host.write_atomic(&noorig, b"", 0o644, Owner::ROOT)
            .map_err(|e| path_error("open", &e))
    };
    match host.metadata(path) {
        Ok(md) if !managed_before.contains(path) && md.kind == FileKind::File => {
            let bytes = host.read(path).map_err(backup_failed)?;
            host.write_atomic(
                &orig,
                &bytes,
                md.mode,
                Owner {
                    uid: md.uid,
                    gid: md.gid,
                },
            )
            .map_err(backup_failed)
        }
        Ok(md) if !managed_before.contains(path) && md.kind == FileKind::Symlink => {
            let target = md.symlink_target.unwrap_or_default();
            host.symlink(&target.to_string_lossy(), &orig).map_err(backup_failed)
        }
        Ok(_) => stamp(),
        Err(e) if e.is_not_found() => stamp(),
        Err(e) => Err(path_error("stat", &e)),
    }
}

/// MCO `deleteStaleData` for one path: a `.mcdnoorig` stamp -> delete stamp and file; a
/// `.mcdorig` backup -> restore it over the path (bytes, mode, owner) and delete the backup;
/// else delete the file. A missing file is only a warning (MCO: "unable to delete ...").
/// Errors (MCO's texts): `deleting noorig file stamp "<stamp>": ...`,
/// `restoring "<path>" from orig file "<orig>": ...`, `deleting orig file "<orig>": ...`,
/// `unable to delete <path>: ...`.
fn remove_or_restore(host: &dyn Host, path: &str) -> Result<(), String> {
    let (orig, noorig) = (orig_path(path), noorig_path(path));
    if host.exists(&noorig) {
        host.remove(&noorig).map_err(|e| {
            format!(
                "deleting noorig file stamp {}: {}",
                quote(&noorig),
                path_error("remove", &e)
            )
        })?;
    } else if let Ok(md) = host.metadata(&orig) {
        let restore_failed = |e: HostError| {
            format!(
                "restoring {} from orig file {}: {}",
                quote(path),
                quote(&orig),
                path_error("open", &e)
            )
        };
        match md.kind {
            FileKind::Symlink => {
                let target = md.symlink_target.unwrap_or_default();
                host.symlink(&target.to_string_lossy(), path).map_err(restore_failed)?;
            }
            _ => {
                let bytes = host.read(&orig).map_err(restore_failed)?;
                host.write_atomic(
                    path,
                    &bytes,
                    md.mode,
                    Owner {
                        uid: md.uid,
                        gid: md.gid,
                    },
                )
                .map_err(restore_failed)?;
            }
        }
        host.remove(&orig)
            .map_err(|e| format!("deleting orig file {}: {}", quote(&orig), path_error("remove", &e)))?;
        tracing::info!(path, "Restored file");
        return Ok(());
    }
    match host.remove(path) {
        Ok(true) => tracing::info!(path, "Removed stale file"),
        Ok(false) => tracing::warn!("unable to delete {path}: remove {path}: no such file or directory"),
        Err(e) => return Err(format!("unable to delete {path}: {}", path_error("remove", &e))),
    }
    Ok(())
}

/// MCO `writeFiles` (`file_writers.go`).
pub(super) fn write_files(host: &dyn Host, files: &[File], managed_before: &BTreeSet<String>) -> Result<(), String> {
    for f in files {
        fail::fail_point!("daemon::write::between_files", |_| crate::host::sigkill_self());
        if SKIPPED_WRITES.contains(&f.path.as_str()) {
            continue;
        }
        if f.append
            .as_ref()
            .is_some_and(|a| !a.is_null() && a != &serde_json::json!([]))
        {
            return Err("found an append section when writing files. Append is not supported".into());
        }
        let contents = file_contents(f).map_err(|e| format!("could not decode file {}: {e}", quote(&f.path)))?;
        let mode = f.mode.map(|m| m as u32).unwrap_or(0o644);
        let owner = file_owner(host, f.user.as_ref(), f.group.as_ref())
            .map_err(|e| format!("failed to retrieve file ownership for file {}: {e}", quote(&f.path)))?;
        create_orig(host, &f.path, managed_before)?;
        host.write_atomic(&f.path, &contents, mode, owner)
            .map_err(|e| path_error("open", &e))?;
    }
    Ok(())
}

/// Whether systemd on the node can resolve a unit file for `name` (its own file in any unit
/// directory, an alias link, or an instance's template), asked through `systemctl is-enabled`.
fn unit_known(host: &dyn Host, name: &str) -> bool {
    host.unit_state(name).is_ok_and(|s| s != "not-found")
}

/// MCO `writeUnits` (`update.go`): each unit written ([`write_unit`]), then enablement.
pub(super) fn write_units(host: &dyn Host, units: &[&Unit], managed_before: &BTreeSet<String>) -> Result<(), String> {
    for u in units {
        write_unit(host, u, managed_before).map_err(|e| format!("daemon could not write systemd unit: {e}"))?;
    }
    set_enablement(host, units)
}

/// MCO `writeUnit` (`file_writers.go`): dropins first (an empty one is removed), then the unit
/// path: a `/dev/null` link when masked; the contents (after `systemctl disable` when the unit is
/// enabled, since its `[Install]` section may change, OCPBUGS-33694); or, for `mask: false`
/// without contents, the removal of a previous mask link.
fn write_unit(host: &dyn Host, u: &Unit, managed_before: &BTreeSet<String>) -> Result<(), String> {
    for d in &u.dropins {
        let path = dropin_path(&u.name, &d.name);
        match d.contents.as_deref() {
            None | Some("") => {
                if host.remove(&path).map_err(|e| path_error("remove", &e))? {
                    tracing::info!("Removing {}, updated file has zero length", quote(&path));
                }
            }
            Some(c) => {
                create_orig(host, &path, managed_before)?;
                host.write_atomic(&path, c.as_bytes(), 0o644, Owner::ROOT)
                    .map_err(|e| {
                        format!(
                            "failed to write systemd unit dropin {}: {}",
                            quote(&d.name),
                            path_error("open", &e)
                        )
                    })?;
            }
        }
    }
    let path = unit_path(&u.name);
    if u.mask == Some(true) {
        create_orig(host, &path, managed_before)?;
        return host.symlink("/dev/null", &path).map_err(|e| {
            format!(
                "failed to symlink unit {} to /dev/null: {}",
                quote(&u.name),
                path_error("symlink", &e)
            )
        });
    }
    if let Some(c) = u.contents.as_deref().filter(|c| !c.is_empty()) {
        if host.unit_state(&u.name).is_ok_and(|s| s == "enabled") {
            tracing::info!("Disabling systemd unit {} before re-writing it", u.name);
            host.systemctl(UnitVerb::Disable, &[&u.name]).map_err(|e| {
                format!(
                    "disabling {} failed: {} (output: {})",
                    u.name,
                    exit_error(&e),
                    e.output()
                )
            })?;
        }
        create_orig(host, &path, managed_before)?;
        host.write_atomic(&path, c.as_bytes(), 0o644, Owner::ROOT)
            .map_err(|e| {
                format!(
                    "failed to write systemd unit {}: {}",
                    quote(&u.name),
                    path_error("open", &e)
                )
            })?;
    } else if u.mask == Some(false) {
        let masked = host
            .metadata(&path)
            .is_ok_and(|md| md.symlink_target.as_deref() == Some(std::path::Path::new("/dev/null")));
        if masked {
            host.remove(&path)
                .map_err(|e| format!("failed to cleanup {path}: {}", path_error("remove", &e)))?;
        }
    }
    Ok(())
}

/// Enablement after every unit of the batch is on disk (so an instance finds a template written
/// later in the list): units with `enabled` are enabled, resp. disabled, with one `systemctl`
/// call each when they have contents or systemd can resolve them, else skipped with MCO's log
/// line; units without `enabled` get `systemctl preset`, whose failure is only logged. Masked
/// units are left alone. Errors: `error enabling units: <output>`, `error disabling unit:
/// <output>` (MCO `enableUnits`, `disableUnits`).
fn set_enablement(host: &dyn Host, units: &[&Unit]) -> Result<(), String> {
    let (mut enable, mut disable) = (Vec::new(), Vec::new());
    for u in units.iter().filter(|u| u.mask != Some(true)) {
        match u.enabled {
            Some(want) if unit_has_contents(u) || unit_known(host, &u.name) => {
                if want {
                    enable.push(u.name.as_str())
                } else {
                    disable.push(u.name.as_str())
                }
            }
            Some(want) => tracing::info!(
                "Could not {} unit {}, because it has no contents, skipping",
                if want { "enable" } else { "disable" },
                quote(&u.name)
            ),
            None => match host.systemctl(UnitVerb::Preset, &[&u.name]) {
                Ok(()) => tracing::info!("Preset systemd unit {}", quote(&u.name)),
                Err(e) => tracing::info!(
                    "Could not reset unit preset for {}, skipping. (Error msg: error running preset on unit: {})",
                    u.name,
                    e.output()
                ),
            },
        }
    }
    if !enable.is_empty() {
        host.systemctl(UnitVerb::Enable, &enable)
            .map_err(|e| format!("error enabling units: {}", e.output()))?;
        tracing::info!("Enabled systemd units: {enable:?}");
        warn_not_enableable(host, &enable);
    }
    if !disable.is_empty() {
        host.systemctl(UnitVerb::Disable, &disable)
            .map_err(|e| format!("error disabling unit: {}", e.output()))?;
        tracing::info!("Disabled systemd units {disable:?}");
    }
    Ok(())
}

/// systemctl's warning for a unit `enable` cannot enable (systemd 252,
/// `src/systemctl/systemctl-enable.c`), which systemctl prints and exits 0 on.
pub const NO_INSTALL_CONFIG: &str = "The unit files have no installation config (WantedBy=, RequiredBy=, Also=, \
Alias= settings in the [Install] section, and DefaultInstance= for template units). This means they are not \
meant to be enabled using systemctl.";

/// Logs a warning for each unit of `enabled` that `systemctl enable` left `static` (no
/// `[Install]` section: nothing wants it, so it does not start at boot by being enabled).
/// MCO runs the same `systemctl enable`, which succeeds and prints [`NO_INSTALL_CONFIG`]; MCO
/// discards the output of a successful command (`enableUnits`, `pkg/daemon/update.go`) and its
/// on-disk check accepts `static` (`checkUnitEnabled`), so the update is not failed here
/// either: the warning names the unit in the daemon's log, where systemctl's own would be.
fn warn_not_enableable(host: &dyn Host, enabled: &[&str]) {
    for unit in enabled {
        if host.unit_state(unit).is_ok_and(|s| s == "static") {
            tracing::warn!(
                unit,
                "unit {} has enabled: true but systemctl reports \"static\": {NO_INSTALL_CONFIG}",
                quote(unit)
            );
        }
    }
}

/// MCO `deleteStaleData`: files, dropins and units of `old` that `new` no longer has. Removed
/// units get `systemctl preset` before any unit file is removed (MCO presets each removed unit
/// before deleting its file, "so that symlinks are removed first"); all presets run first here, so
/// an instance is preset while the template it is linked through still exists.
fn delete_stale(host: &dyn Host, old: &Config, new: &Config) -> Result<(), String> {
    let new_files: BTreeSet<&str> = new.storage.files.iter().map(|f| f.path.as_str()).collect();
    let new_units: BTreeSet<&str> = new.systemd.units.iter().map(|u| u.name.as_str()).collect();
    let new_dropins: BTreeSet<String> = new
        .systemd
        .units
        .iter()
        .flat_map(|u| u.dropins.iter().map(|d| dropin_path(&u.name, &d.name)))
        .collect();
    for f in &old.storage.files {
        let p = f.path.as_str();
        if new_files.contains(p) || KEPT_STALE.contains(&p) || p.starts_with("/etc/docker/certs.d") {
            continue;
        }
        if new_dropins.contains(p) {
            tracing::info!("Not removing file {}: replaced with systemd dropin", quote(p));
            continue;
        }
        remove_or_restore(host, p)?;
    }
    let removed: Vec<&Unit> = old
        .systemd
        .units
        .iter()
        .filter(|u| !new_units.contains(u.name.as_str()))
        .collect();
    for u in &removed {
        if let Err(e) = host.systemctl(UnitVerb::Preset, &[&u.name]) {
            tracing::info!(
                "Did not restore preset for {} (may not exist): error running preset on unit: {}",
                u.name,
                e.output()
            );
        }
    }
    for u in &old.systemd.units {
        for d in &u.dropins {
            let p = dropin_path(&u.name, &d.name);
            if !new_dropins.contains(&p) {
                remove_or_restore(host, &p)?;
            }
        }
    }
    for u in &removed {
        remove_or_restore(host, &unit_path(&u.name))?;
    }
    Ok(())
}

/// MCO `updateSSHKeys`: only when the node has a `core` user and the old or new config manages
/// its keys; directory `/home/core/.ssh` and `authorized_keys.d` 0700, file 0600, owner core.
pub(super) fn write_ssh_keys(host: &dyn Host, old: Option<&Config>, new: &Config) -> Result<(), String> {
    let contents = match (ssh_keys_contents(new), old.and_then(ssh_keys_contents)) {
        (Some(c), _) => c,
        (None, Some(_)) => Vec::new(),
        (None, None) => return Ok(()),
    };
    let Some(uid) = host.lookup_user(CORE_USER).map_err(|e| e.to_string())? else {
        tracing::info!("no core user on this node, SSH keys not written");
        return Ok(());
    };
    let gid = host
        .lookup_group(CORE_USER)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("failed to retrieve GroupID for group: {CORE_USER}"))?;
    let owner = Owner { uid, gid };
    let fail = |e: HostError| path_error("open", &e);
    host.create_dir_all("/home/core/.ssh", 0o700, Some(owner))
        .map_err(fail)?;
    host.create_dir_all("/home/core/.ssh/authorized_keys.d", 0o700, Some(owner))
        .map_err(fail)?;
    host.write_atomic(SSH_KEYS_PATH, &contents, 0o600, owner).map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::test_support::{mc, sandbox};
    use crate::host::SandboxHost;
    use serde_json::json;

    fn files_config(name: &str, files: serde_json::Value) -> MachineConfig {
        mc(
            name,
            json!({"ignition": {"version": "3.4.0"}, "storage": {"files": files}}),
        )
    }

    fn ssh_config(name: &str, keys: &[&str]) -> MachineConfig {
        mc(
            name,
            json!({"ignition": {"version": "3.4.0"},
                   "storage": {"files": [{"path": "/etc/a", "contents": {"source": "data:,a"}}]},
                   "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": keys}]}}),
        )
    }

    #[test]
    fn writes_bytes_mode_and_owner() {
        let (_d, host) = sandbox();
        // "hello\n" gzip-compressed, base64
        let gz = {
            use std::io::Write;
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(b"hello\n").unwrap();
            e.finish().unwrap()
        };
        let b64 = data_url_b64(&gz);
        let cfg = files_config(
            "c1",
            json!([
                {"path": "/etc/plain", "contents": {"source": "data:,plain%20text"}},
                {"path": "/etc/deep/dir/gz", "mode": 384, "contents": {"source": format!("data:;base64,{b64}"), "compression": "gzip"},
                 "user": {"name": "core"}, "group": {"id": 1000}}
            ]),
        );
        write_config(&host, WriteMode::FirstBoot, &cfg).unwrap();
        assert_eq!(host.read("/etc/plain").unwrap(), b"plain text");
        let md = host.metadata("/etc/plain").unwrap();
        assert_eq!((md.mode, md.uid, md.gid), (0o644, 0, 0));
        assert_eq!(host.read("/etc/deep/dir/gz").unwrap(), b"hello\n");
        let md = host.metadata("/etc/deep/dir/gz").unwrap();
        assert_eq!(md.mode, 0o600);
        if host.applies_ownership() {
            assert_eq!((md.uid, md.gid), (1000, 1000));
        }
        assert_eq!(host.metadata("/etc/deep").unwrap().mode, 0o755);
        let on_disk: MachineConfig = serde_json::from_slice(&host.read(CURRENT_CONFIG_PATH).unwrap()).unwrap();
        assert_eq!(on_disk, cfg);
    }

    fn data_url_b64(bytes: &[u8]) -> String {
        const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
            let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    #[test]
    fn unknown_owner_name_is_an_error() {
        let (_d, host) = sandbox();
        let cfg = files_config(
            "c1",
            json!([{"path": "/etc/x", "contents": {"source": "data:,x"}, "user": {"name": "alice"}}]),
        );
        assert_eq!(
            write_config(&host, WriteMode::FirstBoot, &cfg).unwrap_err(),
            "failed to retrieve file ownership for file \"/etc/x\": failed to retrieve UserID for username: alice"
        );
    }

    #[test]
    fn originals_are_backed_up_once_and_restored_on_removal() {
        let (_d, host) = sandbox();
        host.write_atomic("/etc/os-file", b"from the OS", 0o640, Owner::ROOT)
            .unwrap();
        let v1 = files_config(
            "v1",
            json!([
                {"path": "/etc/os-file", "contents": {"source": "data:,mine"}},
                {"path": "/etc/new-file", "contents": {"source": "data:,new"}}
            ]),
        );
        write_config(&host, WriteMode::FirstBoot, &v1).unwrap();
        assert_eq!(host.read(&orig_path("/etc/os-file")).unwrap(), b"from the OS");
        assert_eq!(host.metadata(&orig_path("/etc/os-file")).unwrap().mode, 0o640);
        assert!(host.exists("/etc/machine-config-daemon/noorig/etc/new-file.mcdnoorig"));
        assert!(!host.exists(&noorig_path("/etc/os-file")));

        // rewriting does not overwrite the backup with mco's own content
        write_config(&host, WriteMode::Update { old: &v1 }, &v1).unwrap();
        assert_eq!(host.read(&orig_path("/etc/os-file")).unwrap(), b"from the OS");

        let v2 = files_config("v2", json!([]));
        write_config(&host, WriteMode::Update { old: &v1 }, &v2).unwrap();
        assert_eq!(host.read("/etc/os-file").unwrap(), b"from the OS");
        assert_eq!(host.metadata("/etc/os-file").unwrap().mode, 0o640);
        assert!(!host.exists(&orig_path("/etc/os-file")));
        assert!(!host.exists("/etc/new-file"));
        assert!(!host.exists(&noorig_path("/etc/new-file")));
    }

    #[test]
    fn temp_files_a_killed_write_left_beside_any_written_path_are_removed() {
        let (d, host) = sandbox();
        let v1 = files_config(
            "v1",
            json!([{"path": "/etc/x/a.conf", "contents": {"source": "data:,a"}}]),
        );
        write_config(&host, WriteMode::FirstBoot, &v1).unwrap();
        // A daemon killed mid-write: beside a managed file, its backup stamp, the current and
        // pending configs, the force file.
        let temps = [
            "etc/x/.a.conf.mco-tmp.99.0",
            "etc/machine-config-daemon/noorig/etc/x/.a.conf.mcdnoorig.mco-tmp.99.1",
            "etc/machine-config-daemon/.currentconfig.mco-tmp.99.2",
            "run/.machine-config-daemon-force.mco-tmp.99.3",
        ];
        for t in temps {
            let p = d.path().join(t);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "par").unwrap();
        }
        write_config(&host, WriteMode::Update { old: &v1 }, &v1).unwrap();
        for t in temps {
            assert!(!d.path().join(t).exists(), "{t} left");
        }
    }

    #[test]
    fn units_dropins_masks_and_stale_units() {
        let (_d, host) = sandbox();
        let have_systemctl = std::process::Command::new("systemctl")
            .arg("--version")
            .output()
            .is_ok();
        if !have_systemctl {
            eprintln!("skipping: systemctl is not installed");
            return;
        }
        let svc = "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n";
        let v1 = mc(
            "v1",
            json!({"ignition": {"version": "3.4.0"}, "systemd": {"units": [
                {"name": "a.service", "enabled": true, "contents": svc,
                 "dropins": [{"name": "10-x.conf", "contents": "[Service]\nNice=5\n"}]},
                {"name": "m.service", "mask": true},
                {"name": "ghost.service", "enabled": true}
            ]}}),
        );
        write_config(&host, WriteMode::FirstBoot, &v1).unwrap();
        assert_eq!(host.read("/etc/systemd/system/a.service").unwrap(), svc.as_bytes());
        assert_eq!(
            host.read("/etc/systemd/system/a.service.d/10-x.conf").unwrap(),
            b"[Service]\nNice=5\n"
        );
        assert_eq!(host.unit_state("a.service").unwrap(), "enabled");
        let m = host.metadata("/etc/systemd/system/m.service").unwrap();
        assert_eq!(m.symlink_target.as_deref(), Some(std::path::Path::new("/dev/null")));
        crate::daemon::validate::validate_on_disk(&host, &v1).unwrap();

        let v2 = mc(
            "v2",
            json!({"ignition": {"version": "3.4.0"}, "systemd": {"units": [
                {"name": "a.service", "enabled": false, "contents": svc, "dropins": [{"name": "10-x.conf"}]}
            ]}}),
        );
        write_config(&host, WriteMode::Update { old: &v1 }, &v2).unwrap();
        assert!(!host.exists("/etc/systemd/system/a.service.d/10-x.conf"));
        assert_eq!(host.unit_state("a.service").unwrap(), "disabled");
        assert!(!host.exists("/etc/systemd/system/m.service"));
        crate::daemon::validate::validate_on_disk(&host, &v2).unwrap();
    }

    #[test]
    fn ssh_keys_written_for_core() {
        let (_d, host) = sandbox();
        let v1 = ssh_config("v1", &["ssh-ed25519 AAAA one", "ssh-rsa BBBB two"]);
        write_config(&host, WriteMode::FirstBoot, &v1).unwrap();
        assert_eq!(
            host.read(SSH_KEYS_PATH).unwrap(),
            b"ssh-ed25519 AAAA one\nssh-rsa BBBB two\n"
        );
        let md = host.metadata(SSH_KEYS_PATH).unwrap();
        assert_eq!(md.mode, 0o600);
        assert_eq!(host.metadata("/home/core/.ssh/authorized_keys.d").unwrap().mode, 0o700);
        if host.applies_ownership() {
            assert_eq!((md.uid, md.gid), (1000, 1000));
        }
        let v2 = mc(
            "v2",
            json!({"ignition": {"version": "3.4.0"}, "storage": {"files": [{"path": "/etc/a", "contents": {"source": "data:,a"}}]}}),
        );
        write_config(&host, WriteMode::Update { old: &v1 }, &v2).unwrap();
        assert_eq!(host.read(SSH_KEYS_PATH).unwrap(), b"");
    }

    #[test]
    fn ssh_keys_skipped_without_core_user() {
        let dir = tempfile::tempdir().unwrap();
        let host = SandboxHost::new(dir.path());
        write_config(&host, WriteMode::FirstBoot, &ssh_config("v1", &["k"])).unwrap();
        assert!(!host.exists(SSH_KEYS_PATH));
    }

    fn have_systemctl() -> bool {
        let ok = std::process::Command::new("systemctl")
            .arg("--version")
            .output()
            .is_ok();
        if !ok {
            eprintln!("skipping: systemctl is not installed");
        }
        ok
    }

    const SVC: &str = "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n";

    fn units_config(name: &str, files: serde_json::Value, units: serde_json::Value) -> MachineConfig {
        mc(
            name,
            json!({"ignition": {"version": "3.4.0"}, "storage": {"files": files}, "systemd": {"units": units}}),
        )
    }

    fn wants(host: &SandboxHost, unit: &str) -> bool {
        host.exists(&format!("/etc/systemd/system/multi-user.target.wants/{unit}"))
    }

    /// MCO OCPBUGS-74692 (mco-facts 4.5): an update writes only changed units, a forced one
    /// writes every unit and dropin, so the force file repairs a drifted dropin, a removed mask,
    /// an edited unit file and a disabled unit, as it repairs files.
    #[test]
    fn a_forced_rewrite_writes_every_unit_and_dropin() {
        if !have_systemctl() {
            return;
        }
        let (_d, host) = sandbox();
        let cfg = units_config(
            "v1",
            json!([{"path": "/etc/a", "contents": {"source": "data:,a"}}]),
            json!([
                {"name": "chronyd.service", "dropins": [{"name": "10-x.conf", "contents": "[Service]\nNice=5\n"}]},
                {"name": "m.service", "mask": true, "contents": SVC},
                {"name": "e.service", "enabled": true, "contents": SVC}
            ]),
        );
        write_config(&host, WriteMode::FirstBoot, &cfg).unwrap();
        crate::daemon::validate::validate_on_disk(&host, &cfg).unwrap();
        let tamper = || {
            let real = |p: &str| host.resolve(p).unwrap();
            let dropin = real("/etc/systemd/system/chronyd.service.d/10-x.conf");
            std::fs::write(&dropin, "[Service]\nNice=5\nNice=19\n").unwrap();
            std::fs::remove_file(real("/etc/systemd/system/m.service")).unwrap();
            std::fs::write(real("/etc/systemd/system/m.service"), SVC).unwrap();
            std::fs::write(
                real("/etc/systemd/system/e.service"),
                "[Service]\nExecStart=/bin/false\n",
            )
            .unwrap();
            std::fs::remove_file(real("/etc/systemd/system/multi-user.target.wants/e.service")).unwrap();
            std::fs::write(real("/etc/a"), "edited").unwrap();
        };
        tamper();

        // A plain re-apply rewrites the file only: the units did not change.
        write_config(&host, WriteMode::Update { old: &cfg }, &cfg).unwrap();
        assert_eq!(host.read("/etc/a").unwrap(), b"a");
        assert_eq!(
            crate::daemon::validate::validate_on_disk(&host, &cfg).unwrap_err(),
            r#"content mismatch for file "/etc/systemd/system/chronyd.service.d/10-x.conf""#
        );

        write_config(&host, WriteMode::Forced { old: &cfg }, &cfg).unwrap();
        crate::daemon::validate::validate_on_disk(&host, &cfg).unwrap();
        assert_eq!(
            host.read("/etc/systemd/system/chronyd.service.d/10-x.conf").unwrap(),
            b"[Service]\nNice=5\n"
        );
        let m = host.metadata("/etc/systemd/system/m.service").unwrap();
        assert_eq!(m.symlink_target.as_deref(), Some(std::path::Path::new("/dev/null")));
        assert_eq!(host.read("/etc/systemd/system/e.service").unwrap(), SVC.as_bytes());
        assert_eq!(host.unit_state("e.service").unwrap(), "enabled");
        assert!(wants(&host, "e.service"));
    }

    /// A removed `enabled: true` unit is preset while its file still exists, and the sandbox's
    /// `disable *` policy makes the preset remove the `multi-user.target.wants` link, as on
    /// Fedora CoreOS and RHCOS (mco-facts 4.5, `deleteStaleData`).
    #[test]
    fn a_removed_enabled_unit_leaves_no_wants_link() {
        if !have_systemctl() {
            return;
        }
        let (_d, host) = sandbox();
        let v1 = units_config(
            "v1",
            json!([]),
            json!([
                {"name": "kept.service", "contents": SVC, "enabled": true},
                {"name": "gone.service", "contents": SVC, "enabled": true}
            ]),
        );
        write_config(&host, WriteMode::FirstBoot, &v1).unwrap();
        assert!(wants(&host, "gone.service") && wants(&host, "kept.service"));
        let v2 = units_config(
            "v2",
            json!([]),
            json!([{"name": "kept.service", "contents": SVC, "enabled": true}]),
        );
        write_config(&host, WriteMode::Update { old: &v1 }, &v2).unwrap();
        assert!(!host.exists("/etc/systemd/system/gone.service"));
        assert!(!wants(&host, "gone.service"), "no dangling wants link");
        assert!(wants(&host, "kept.service"));
        assert_eq!(host.unit_state("gone.service").unwrap(), "not-found");
        crate::daemon::validate::validate_on_disk(&host, &v2).unwrap();
    }

    /// Units without a file of their own: a template instance (listed before its template), an
    /// alias, a unit shipped under /usr/lib. The write path enables each through what systemd
    /// resolves, validation checks what was enabled, and removal leaves no link behind; a unit
    /// systemd cannot resolve is skipped by both (MCO OCPBUGS-56648).
    #[test]
    fn units_without_own_files_are_enabled_validated_and_dropped_consistently() {
        if !have_systemctl() {
            return;
        }
        let (_d, host) = sandbox();
        let echo = "[Service]\nExecStart=/bin/echo %i\n[Install]\nWantedBy=multi-user.target\n";
        let aliased = "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\nAlias=b-alias.service\n";
        // the OS ships chronyd.service
        host.write_atomic(
            "/usr/lib/systemd/system/chronyd.service",
            SVC.as_bytes(),
            0o644,
            Owner::ROOT,
        )
        .unwrap();
        let v1 = units_config(
            "v1",
            json!([]),
            json!([
                {"name": "example-echo@alpha.service", "enabled": true},
                {"name": "example-echo@.service", "contents": echo},
                {"name": "b.service", "enabled": true, "contents": aliased},
                {"name": "chronyd.service", "enabled": true,
                 "dropins": [{"name": "10-x.conf", "contents": "[Service]\nNice=5\n"}]},
                {"name": "ghost.service", "enabled": true},
                {"name": "ghost@x.service", "enabled": true}
            ]),
        );
        write_config(&host, WriteMode::FirstBoot, &v1).unwrap();
        assert_eq!(host.unit_state("example-echo@alpha.service").unwrap(), "enabled");
        assert!(wants(&host, "example-echo@alpha.service"));
        assert_eq!(host.unit_state("b-alias.service").unwrap(), "alias");
        assert_eq!(host.unit_state("chronyd.service").unwrap(), "enabled");
        crate::daemon::validate::validate_on_disk(&host, &v1).unwrap();

        host.systemctl(UnitVerb::Disable, &["example-echo@alpha.service"])
            .unwrap();
        assert_eq!(
            crate::daemon::validate::validate_on_disk(&host, &v1).unwrap_err(),
            r#"unit "example-echo@alpha.service" expected enabled=true, but systemd reports "disabled""#
        );
        write_config(&host, WriteMode::Forced { old: &v1 }, &v1).unwrap();
        crate::daemon::validate::validate_on_disk(&host, &v1).unwrap();

        let v2 = units_config("v2", json!([]), json!([]));
        write_config(&host, WriteMode::Update { old: &v1 }, &v2).unwrap();
        for unit in ["example-echo@alpha.service", "b.service", "chronyd.service"] {
            assert!(!wants(&host, unit), "{unit} still linked");
        }
        assert!(!host.exists("/etc/systemd/system/example-echo@.service"));
        assert!(!host.exists("/etc/systemd/system/b-alias.service"));
        assert!(!host.exists("/etc/systemd/system/chronyd.service.d/10-x.conf"));
        assert_eq!(host.unit_state("chronyd.service").unwrap(), "disabled");
    }

    /// MCO's write-path messages (`file_writers.go`, `update.go`), with Go's `%q`.
    #[test]
    fn write_errors_are_mco_messages() {
        let (_d, host) = sandbox();
        let bad_group = files_config(
            "c",
            json!([{"path": "/etc/tab\there", "contents": {"source": "data:,x"}, "group": {"name": "wheel"}}]),
        );
        assert_eq!(
            write_config(&host, WriteMode::FirstBoot, &bad_group).unwrap_err(),
            r#"failed to retrieve file ownership for file "/etc/tab\there": failed to retrieve GroupID for group: wheel"#
        );
        let append = files_config("c", json!([{"path": "/etc/x", "append": [{"source": "data:,x"}]}]));
        assert_eq!(
            write_config(&host, WriteMode::FirstBoot, &append).unwrap_err(),
            "found an append section when writing files. Append is not supported"
        );
        // a directory where the unit file goes
        std::fs::create_dir_all(host.resolve("/etc/systemd/system/d.service/x").unwrap()).unwrap();
        let unit = units_config("c", json!([]), json!([{"name": "d.service", "contents": SVC}]));
        let err = write_config(&host, WriteMode::FirstBoot, &unit).unwrap_err();
        assert!(
            err.starts_with(r#"daemon could not write systemd unit: failed to write systemd unit "d.service": "#),
            "{err}"
        );
    }
}
