//! On-disk validation: does the node hold what a MachineConfig says?
//!
//! Owns the expected state of every managed path ([`ManagedSet`]) and the checks with MCO's exact
//! messages (`pkg/daemon/on_disk_validation.go`, mco-facts 4.4): files, dropins and unit files by
//! mode and content, masked units by their `/dev/null` link, enablement via `systemctl is-enabled`,
//! plus the `core` user's SSH key file once written (mco extension, DESIGN.md section 5). Reads only, through
//! [`Host`]; it must not write or repair anything. OS image and kernel arguments are not checked
//! (sandbox nodes do not apply them).
//!
//! Mode mismatches are formatted as MCO formats Go's `os.FileMode` with `%v/%d/%#o`, e.g.
//! `mode mismatch for file: "/etc/foo"; expected: -rw-r--r--/420/0644; received: -rw-------/384/0600`.
//! Deliberate differences: setuid/setgid/sticky bits of the config's mode are mapped to Go's
//! mode bits before comparing, so a `04755` file can validate (MCO compares the raw number with
//! Go's mapped bits and can never match it); and enablement is checked for every unit whose
//! enablement the daemon applies (also template instances, aliases and units shipped under
//! `/usr/lib` that systemd resolves on the node), where MCO checks units with contents only.

use super::managed::{
    dropin_path, file_contents, ignition_config, ssh_keys_contents, unit_has_contents, unit_path, CORE_USER,
};
use super::paths::SSH_KEYS_PATH;
use super::phase::Held;
use crate::gofmt::quote;
use crate::host::path_error;
use crate::host::{FileKind, FileMeta, Host};
use crate::model::MachineConfig;
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// Files MCO never validates: they are written by the certificate writer (mco-facts 4.4).
pub const IGNORED_PATHS: [&str; 3] = [
    "/etc/kubernetes/kubelet-ca.crt",
    "/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem",
    "/etc/mco/internal-registry-pull-secret.json",
];

/// The expected state of one managed path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expected {
    /// A regular file with exactly these bytes and permission bits (files, unit files, the SSH
    /// key file).
    File { contents: Vec<u8>, mode: u32 },
    /// A dropin with empty contents: absent is fine, present must be an empty 0644 file.
    EmptyDropin,
    /// A masked unit: a symlink to `/dev/null`.
    Masked,
    /// An invalid entry (undecodable contents, `append`): always fails with this message.
    Invalid(String),
}

/// One unit's expected enablement.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Enablement {
    unit: String,
    enabled: bool,
    /// The unit has contents, so it must exist (`not-found` fails). A unit without contents is
    /// checked only when systemd resolves it, as the write path enables it only then.
    has_contents: bool,
}

/// Every managed path of one config with its expected state, in MCO's check order (files, then
/// per unit its dropins and its unit file, then SSH keys), plus the units whose enablement
/// is checked by [`ManagedSet::validate`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ManagedSet {
    /// Name of the MachineConfig this set was built from.
    pub config: String,
    entries: Vec<(String, Expected)>,
    index: BTreeMap<String, usize>,
    /// Units whose enablement is checked: not masked, with `enabled` set.
    enablement: Vec<Enablement>,
}

impl ManagedSet {
    /// Builds the set for `mc`. The SSH key file is managed when the config has a `core` user,
    /// the node has one and the file is there: MCO's `validateOnDiskState` never looks at key
    /// files, and a key file that was never written (the `core` user was created after the
    /// config was applied, so the write skipped the keys as MCO's `updateSSHKeys` does) is not
    /// drift; the next update writes it. A key file that exists is checked by content and
    /// mode, and its removal while watched is drift. Errors: the config cannot be parsed.
    pub fn from_config(host: &dyn Host, mc: &MachineConfig) -> Result<ManagedSet, String> {
        let cfg = ignition_config(mc).map_err(|e| format!("failed to parse Ignition for validation: {e}"))?;
        let mut set = ManagedSet {
            config: mc.name().to_string(),
            ..Default::default()
        };
        for f in &cfg.storage.files {
            if IGNORED_PATHS.contains(&f.path.as_str()) {
                continue;
            }
            let expected = if f
                .append
                .as_ref()
                .is_some_and(|a| !a.is_null() && a != &serde_json::json!([]))
            {
                Expected::Invalid("found an append section when checking files. Append is not supported".into())
            } else {
                match file_contents(f) {
                    Ok(contents) => Expected::File {
                        contents,
                        mode: f.mode.map(|m| m as u32).unwrap_or(0o644),
                    },
                    Err(e) => Expected::Invalid(format!("couldn't decode file {}: {e}", quote(&f.path))),
                }
            };
            set.push(f.path.clone(), expected);
        }
        for u in &cfg.systemd.units {
            for d in &u.dropins {
                let expected = match d.contents.as_deref() {
                    None | Some("") => Expected::EmptyDropin,
                    Some(c) => Expected::File {
                        contents: c.as_bytes().to_vec(),
                        mode: 0o644,
                    },
                };
                set.push(dropin_path(&u.name, &d.name), expected);
            }
            if let (Some(enabled), false) = (u.enabled, u.mask == Some(true)) {
                set.enablement.push(Enablement {
                    unit: u.name.clone(),
                    enabled,
                    has_contents: unit_has_contents(u),
                });
            }
            // MCO returns before the mask check when contents are empty: such unit paths are
            // unchecked.
            let Some(contents) = u.contents.as_deref().filter(|c| !c.is_empty()) else {
                continue;
            };
            if u.mask == Some(true) {
                set.push(unit_path(&u.name), Expected::Masked);
                continue;
            }
            set.push(
                unit_path(&u.name),
                Expected::File {
                    contents: contents.as_bytes().to_vec(),
                    mode: 0o644,
                },
            );
        }
        if let Some(contents) = ssh_keys_contents(&cfg) {
            if host.lookup_user(CORE_USER).ok().flatten().is_some() && host.exists(SSH_KEYS_PATH) {
                set.push(SSH_KEYS_PATH.to_string(), Expected::File { contents, mode: 0o600 });
            } else {
                tracing::debug!("no {SSH_KEYS_PATH} on the node: its keys are written at the next update");
            }
        }
        Ok(set)
    }

    fn push(&mut self, path: String, expected: Expected) {
        match self.index.get(&path) {
            Some(&i) => self.entries[i].1 = expected,
            None => {
                self.index.insert(path.clone(), self.entries.len());
                self.entries.push((path, expected));
            }
        }
    }

    /// Managed node paths in check order.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(p, _)| p.as_str())
    }

    /// The expected state of managed path `path` (`None`: not managed).
    pub fn expected(&self, path: &str) -> Option<&Expected> {
        self.index.get(path).map(|&i| &self.entries[i].1)
    }

    /// Whether `path` is managed.
    pub fn contains(&self, path: &str) -> bool {
        self.index.contains_key(path)
    }

    /// Checks one managed path (`Ok` for a path that is not managed): the per-path check the
    /// drift monitor runs for each filesystem event.
    pub fn check_path(&self, host: &dyn Host, path: &str) -> Result<(), String> {
        match self.index.get(path) {
            Some(&i) => check_entry(host, path, &self.entries[i].1),
            None => Ok(()),
        }
    }

    /// Checks every managed path (no `systemctl`), returning the first failure. The drift
    /// monitor's full re-check.
    pub fn check_all(&self, host: &dyn Host) -> Result<(), String> {
        self.entries.iter().try_for_each(|(p, e)| check_entry(host, p, e))
    }

    /// Every path that fails, with its message, in check order.
    pub fn failures(&self, host: &dyn Host) -> Vec<(String, String)> {
        self.entries
            .iter()
            .filter_map(|(p, e)| check_entry(host, p, e).err().map(|m| (p.clone(), m)))
            .collect()
    }

    /// Full on-disk validation (MCO `validateOnDiskState`): every path, then unit enablement
    /// (`enabled: true` fails on disabled/masked/masked-runtime/not-found, `enabled: false` fails
    /// on enabled/enabled-runtime; a unit without contents that systemd cannot resolve is skipped,
    /// as the write path skips it). Returns the first failure's message, in MCO's words
    /// (`checkUnitEnabled`, `pkg/daemon/on_disk_validation.go`), e.g.
    /// `unit "e.service" expected enabled=true, but systemd reports "disabled"`.
    pub fn validate(&self, host: &dyn Host) -> Result<(), String> {
        self.validate_skipping(host, |_| false)
    }

    /// [`Self::validate`] with the paths `skip` accepts left unchecked (their unit enablement
    /// is still checked): the pre-flight of a node whose DriftPolicy Reports those paths.
    pub fn validate_skipping(&self, host: &dyn Host, skip: impl Fn(&str) -> bool) -> Result<(), String> {
        self.entries
            .iter()
            .filter(|(p, _)| !skip(p))
            .try_for_each(|(p, e)| check_entry(host, p, e))?;
        for e in &self.enablement {
            let state = host
                .unit_state(&e.unit)
                .map_err(|err| format!("state validation: {}", err.output()))?;
            if state == "not-found" && !e.has_contents {
                continue;
            }
            let bad = if e.enabled {
                matches!(state.as_str(), "disabled" | "masked" | "masked-runtime" | "not-found")
            } else {
                matches!(state.as_str(), "enabled" | "enabled-runtime")
            };
            if bad {
                return Err(format!(
                    "unit {} expected enabled={}, but systemd reports {}",
                    quote(&e.unit),
                    e.enabled,
                    quote(&state)
                ));
            }
        }
        Ok(())
    }
}

/// Full on-disk validation of `mc` (see [`ManagedSet::validate`]).
pub fn validate_on_disk(host: &dyn Host, mc: &MachineConfig) -> Result<(), String> {
    validate_on_disk_skipping(host, mc, |_| false)
}

/// [`validate_on_disk`] with the managed paths `skip` accepts left unchecked
/// ([`ManagedSet::validate_skipping`]).
pub fn validate_on_disk_skipping(
    host: &dyn Host,
    mc: &MachineConfig,
    skip: impl Fn(&str) -> bool,
) -> Result<(), String> {
    validate_os(host, mc)?;
    validate_kernel_arguments(host, mc)?;
    ManagedSet::from_config(host, mc)?.validate_skipping(host, skip)
}

/// The booted OS image, kernel type and extension packages against the config
/// ([`crate::host::os::OsState::check_booted`]); skipped when the host cannot tell.
pub fn validate_os(host: &dyn Host, mc: &MachineConfig) -> Result<(), String> {
    match host.booted_os().map_err(|e| e.to_string())? {
        Some(booted) => crate::host::os::OsState::of(&mc.spec).check_booted(&booted),
        None => Ok(()),
    }
}

/// MCO's kernel-argument check (mco-facts 4.4): every argument of `spec.kernelArguments`
/// (split as [`crate::host::kargs::split_kernel_arguments`]) is on the booted command line;
/// extra arguments are fine. Error: `missing expected kernel arguments: [a b]`.
pub fn validate_kernel_arguments(host: &dyn Host, mc: &MachineConfig) -> Result<(), String> {
    if mc.spec.kernel_arguments.is_empty() {
        return Ok(());
    }
    let cmdline = host.kernel_cmdline().map_err(|e| e.to_string())?;
    let missing = crate::host::kargs::missing_kernel_arguments(&mc.spec.kernel_arguments, &cmdline);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(crate::host::kargs::missing_message(&missing))
    }
}

fn check_entry(host: &dyn Host, path: &str, expected: &Expected) -> Result<(), String> {
    match expected {
        Expected::Invalid(msg) => Err(msg.clone()),
        Expected::File { contents, mode } => check_file(host, path, contents, *mode),
        // MCO `checkV3Dropin`: `os.Stat` (following links) first; absent is fine, another
        // stat error is returned as it is.
        Expected::EmptyDropin => match resolve(host, path) {
            Err(e) if e.ends_with(": no such file or directory") => Ok(()),
            Err(e) => Err(e.replacen("lstat ", "stat ", 1)),
            Ok(_) => check_file(host, path, b"", 0o644),
        },
        // MCO: `filepath.EvalSymlinks(path)` must give `/dev/null`.
        Expected::Masked => match resolve(host, path) {
            Ok(link) if link == Path::new("/dev/null") => Ok(()),
            Ok(link) => Err(format!(
                "state validation: invalid unit masked setting. path: {}; expected: /dev/null; received: {}",
                quote(path),
                link.display()
            )),
            Err(e) => Err(format!(
                "state validation: error while evaluation symlink for path {}: {e}",
                quote(path)
            )),
        },
    }
}

/// Go's `filepath.EvalSymlinks` inside the node root: follows links (absolute targets are node
/// paths, relative ones are taken from the link's directory) up to 255 hops and returns the node
/// path reached. `/dev/null` ends the walk without being looked up (a sandbox has no `dev`).
/// Errors: Go's text, e.g. `lstat /etc/x: no such file or directory`, `EvalSymlinks: too many
/// links`.
fn resolve(host: &dyn Host, path: &str) -> Result<PathBuf, String> {
    let mut current = PathBuf::from(path);
    for _ in 0..255 {
        if current == Path::new("/dev/null") {
            return Ok(current);
        }
        let node = current.to_string_lossy().into_owned();
        match host.metadata(&node) {
            Ok(FileMeta {
                kind: FileKind::Symlink,
                symlink_target: Some(target),
                ..
            }) => {
                let joined = match current.parent() {
                    Some(dir) if target.is_relative() => dir.join(&target),
                    _ => target,
                };
                current = normalize(&joined);
            }
            Ok(_) => return Ok(current),
            Err(e) => return Err(path_error("lstat", &e)),
        }
    }
    Err("EvalSymlinks: too many links".into())
}

/// `.` and `..` removed lexically from an absolute node path (`..` at `/` stays at `/`).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

/// MCO `checkFileContentsAndMode`: lstat, exact mode (a symlink fails), exact bytes.
fn check_file(host: &dyn Host, path: &str, expected: &[u8], mode: u32) -> Result<(), String> {
    let md = host
        .metadata(path)
        .map_err(|e| format!("could not stat file {}: {}", quote(path), path_error("lstat", &e)))?;
    let want = GoMode::new(FileKind::File, mode);
    let have = GoMode::new(md.kind, md.mode);
    if want != have {
        return Err(format!(
            "mode mismatch for file: {}; expected: {want}; received: {have}",
            quote(path)
        ));
    }
    let bytes = host
        .read(path)
        .map_err(|e| format!("could not read file {}: {}", quote(path), path_error("open", &e)))?;
    if bytes != expected {
        tracing::debug!(
            path,
            expected = expected.len(),
            got = bytes.len(),
            "content mismatch (sizes in bytes)"
        );
        return Err(format!("content mismatch for file {}", quote(path)));
    }
    Ok(())
}

/// A mode as Go's `os.FileMode` holds it (type bits high, permission bits low), displayed as MCO
/// prints it: `%v/%d/%#o`, e.g. `-rw-r--r--/420/0644`, `Lrwxrwxrwx/134218239/01000000777`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct GoMode(u32);

impl GoMode {
    const DIR: u32 = 1 << 31;
    const SYMLINK: u32 = 1 << 27;
    const SETUID: u32 = 1 << 23;
    const SETGID: u32 = 1 << 22;
    const STICKY: u32 = 1 << 20;
    const IRREGULAR: u32 = 1 << 19;

    fn new(kind: FileKind, unix: u32) -> GoMode {
        let mut m = unix & 0o777;
        m |= match kind {
            FileKind::File => 0,
            FileKind::Dir => Self::DIR,
            FileKind::Symlink => Self::SYMLINK,
            FileKind::Other => Self::IRREGULAR,
        };
        for (bit, go) in [(0o4000, Self::SETUID), (0o2000, Self::SETGID), (0o1000, Self::STICKY)] {
            if unix & bit != 0 {
                m |= go;
            }
        }
        GoMode(m)
    }
}

impl std::fmt::Display for GoMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = String::new();
        for (i, c) in "dalTLDpSugct?".chars().enumerate() {
            if self.0 & (1 << (31 - i)) != 0 {
                s.push(c);
            }
        }
        if s.is_empty() {
            s.push('-');
        }
        for (i, c) in "rwxrwxrwx".chars().enumerate() {
            s.push(if self.0 & (1 << (8 - i)) != 0 { c } else { '-' });
        }
        let octal = if self.0 == 0 {
            "0".to_string()
        } else {
            format!("0{:o}", self.0)
        };
        write!(f, "{s}/{}/{octal}", self.0)
    }
}

/// [`validate_on_disk`] against a held config (its MachineConfig loaded first).
pub(super) fn validate_held(host: &dyn Host, held: &Held) -> Result<(), String> {
    validate_on_disk(host, &held.load()?)
}

/// [`validate_held`] with the managed paths `skip` accepts left unchecked.
pub(super) fn validate_held_skipping(host: &dyn Host, held: &Held, skip: impl Fn(&str) -> bool) -> Result<(), String> {
    validate_on_disk_skipping(host, &held.load()?, skip)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::apply::{write_config, WriteMode};
    use crate::daemon::test_support::{mc, sandbox};
    use serde_json::json;

    fn config() -> MachineConfig {
        mc(
            "rendered-worker-1",
            json!({
                "ignition": {"version": "3.4.0"},
                "storage": {"files": [
                    {"path": "/etc/foo.conf", "mode": 420, "contents": {"source": "data:,hello%0A"}}
                ]},
                "systemd": {"units": [
                    {"name": "masked.service", "mask": true, "contents": "[Unit]\n"},
                    {"name": "svc.service", "contents": "[Unit]\nDescription=s\n", "dropins": [
                        {"name": "10-a.conf", "contents": "[Service]\n"},
                        {"name": "20-empty.conf"}
                    ]}
                ]},
                "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA k1"]}]}
            }),
        )
    }

    #[test]
    fn written_config_validates() {
        let (_d, host) = sandbox();
        write_config(&host, WriteMode::FirstBoot, &config()).unwrap();
        validate_on_disk(&host, &config()).unwrap();
    }

    /// A `core` user created after a config with SSH keys was applied (the daemon skipped the
    /// keys then, as MCO does without `core`): the next daemon start's check must not go
    /// Degraded on `could not stat file "/home/core/.ssh/authorized_keys.d/ignition"`. MCO's
    /// `validateOnDiskState` does not look at key files; mco checks a key file it wrote.
    #[test]
    fn a_core_user_created_after_the_keys_were_applied_is_not_drift() {
        let dir = tempfile::tempdir().unwrap();
        let host = crate::host::SandboxHost::new(dir.path());
        host.write_atomic(
            "/etc/passwd",
            b"root:x:0:0:root:/root:/bin/bash\n",
            0o644,
            crate::host::Owner::ROOT,
        )
        .unwrap();
        host.write_atomic("/etc/group", b"root:x:0:\n", 0o644, crate::host::Owner::ROOT)
            .unwrap();
        let cfg = config();
        write_config(&host, WriteMode::FirstBoot, &cfg).unwrap();
        assert!(!host.exists(SSH_KEYS_PATH), "no core user: keys skipped");
        // `useradd -m core` afterwards.
        let passwd = "root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000::/home/core:/bin/bash\n";
        host.write_atomic("/etc/passwd", passwd.as_bytes(), 0o644, crate::host::Owner::ROOT)
            .unwrap();
        host.write_atomic(
            "/etc/group",
            b"root:x:0:\ncore:x:1000:\n",
            0o644,
            crate::host::Owner::ROOT,
        )
        .unwrap();
        host.create_dir_all("/home/core", 0o700, None).unwrap();
        validate_on_disk(&host, &cfg).unwrap();
        let set = ManagedSet::from_config(&host, &cfg).unwrap();
        assert!(!set.contains(SSH_KEYS_PATH), "a key file never written is not watched");
        // The next write puts the keys in place; from then on they are checked.
        write_config(&host, WriteMode::Update { old: &cfg }, &cfg).unwrap();
        assert_eq!(host.read(SSH_KEYS_PATH).unwrap(), b"ssh-ed25519 AAAA k1\n");
        let set = ManagedSet::from_config(&host, &cfg).unwrap();
        std::fs::write(host.resolve(SSH_KEYS_PATH).unwrap(), "ssh-rsa other\n").unwrap();
        assert_eq!(
            set.validate(&host).unwrap_err(),
            format!("content mismatch for file {SSH_KEYS_PATH:?}")
        );
        // A key file deleted while watched is drift.
        std::fs::remove_file(host.resolve(SSH_KEYS_PATH).unwrap()).unwrap();
        assert!(set
            .check_path(&host, SSH_KEYS_PATH)
            .unwrap_err()
            .starts_with("could not stat file"));
    }

    #[test]
    fn each_mco_message() {
        let (_d, host) = sandbox();
        let cfg = config();
        write_config(&host, WriteMode::FirstBoot, &cfg).unwrap();
        let set = ManagedSet::from_config(&host, &cfg).unwrap();
        let real = |p: &str| host.resolve(p).unwrap();

        std::fs::write(real("/etc/foo.conf"), "changed").unwrap();
        assert_eq!(
            set.check_path(&host, "/etc/foo.conf").unwrap_err(),
            r#"content mismatch for file "/etc/foo.conf""#
        );

        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(real("/etc/foo.conf"), std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            validate_on_disk(&host, &cfg).unwrap_err(),
            r#"mode mismatch for file: "/etc/foo.conf"; expected: -rw-r--r--/420/0644; received: -rw-------/384/0600"#
        );

        std::fs::remove_file(real("/etc/foo.conf")).unwrap();
        assert_eq!(
            set.check_path(&host, "/etc/foo.conf").unwrap_err(),
            r#"could not stat file "/etc/foo.conf": lstat /etc/foo.conf: no such file or directory"#
        );

        std::fs::remove_file(real("/etc/systemd/system/masked.service")).unwrap();
        std::fs::write(real("/etc/systemd/system/masked.service"), "x").unwrap();
        assert_eq!(
            set.check_path(&host, "/etc/systemd/system/masked.service").unwrap_err(),
            "state validation: invalid unit masked setting. path: \"/etc/systemd/system/masked.service\"; \
             expected: /dev/null; received: /etc/systemd/system/masked.service"
        );

        std::fs::write(real("/etc/systemd/system/svc.service.d/10-a.conf"), "x").unwrap();
        assert_eq!(
            set.check_path(&host, "/etc/systemd/system/svc.service.d/10-a.conf")
                .unwrap_err(),
            r#"content mismatch for file "/etc/systemd/system/svc.service.d/10-a.conf""#
        );
        set.check_path(&host, "/etc/systemd/system/svc.service.d/20-empty.conf")
            .unwrap();

        std::fs::write(real(SSH_KEYS_PATH), "ssh-rsa other\n").unwrap();
        assert_eq!(
            set.check_path(&host, SSH_KEYS_PATH).unwrap_err(),
            format!("content mismatch for file {SSH_KEYS_PATH:?}")
        );
        assert_eq!(set.failures(&host).len(), 4);
        set.check_path(&host, "/etc/unmanaged").unwrap();
    }

    /// The drift record's kind of mismatch is read from these messages
    /// ([`crate::drift::mismatch`]): a message's wording and its kind change together.
    #[test]
    fn each_message_has_its_mismatch_kind() {
        use crate::drift::mismatch;
        use std::os::unix::fs::PermissionsExt;
        let (_d, host) = sandbox();
        let cfg = config();
        write_config(&host, WriteMode::FirstBoot, &cfg).unwrap();
        let set = ManagedSet::from_config(&host, &cfg).unwrap();
        let real = |p: &str| host.resolve(p).unwrap();
        let kind = |p: &str| mismatch(&set.check_path(&host, p).unwrap_err());
        std::fs::write(real("/etc/foo.conf"), "changed").unwrap();
        assert_eq!(kind("/etc/foo.conf"), "contents");
        std::fs::set_permissions(real("/etc/foo.conf"), std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(mismatch(&validate_on_disk(&host, &cfg).unwrap_err()), "mode");
        std::fs::remove_file(real("/etc/foo.conf")).unwrap();
        assert_eq!(kind("/etc/foo.conf"), "missing");
        std::fs::remove_file(real("/etc/systemd/system/masked.service")).unwrap();
        std::fs::write(real("/etc/systemd/system/masked.service"), "x").unwrap();
        assert_eq!(kind("/etc/systemd/system/masked.service"), "unit");
        std::fs::write(real(SSH_KEYS_PATH), "ssh-rsa other\n").unwrap();
        assert_eq!(kind(SSH_KEYS_PATH), "contents");
    }

    /// MCO resolves a mask with `filepath.EvalSymlinks` and stats an empty dropin with `os.Stat`
    /// (both follow links); paths are quoted with Go's `%q`.
    #[test]
    fn links_are_followed_as_go_does() {
        let (_d, host) = sandbox();
        let cfg = mc(
            "c",
            json!({"ignition": {"version": "3.4.0"},
                   "storage": {"files": [{"path": "/etc/new\nline", "contents": {"source": "data:,x"}}]},
                   "systemd": {"units": [
                {"name": "m.service", "mask": true, "contents": "[Unit]\n"},
                {"name": "d.service", "dropins": [{"name": "20-empty.conf"}]}
            ]}}),
        );
        let set = ManagedSet::from_config(&host, &cfg).unwrap();
        let m = "/etc/systemd/system/m.service";
        host.symlink("../../../dev/null", m).unwrap();
        set.check_path(&host, m).unwrap();
        host.write_atomic(
            "/usr/lib/systemd/system/m.service",
            b"[Unit]\n",
            0o644,
            crate::host::Owner::ROOT,
        )
        .unwrap();
        host.symlink("/usr/lib/systemd/system/m.service", "/etc/systemd/system/m2.service")
            .unwrap();
        host.symlink("m2.service", m).unwrap();
        assert_eq!(
            set.check_path(&host, m).unwrap_err(),
            "state validation: invalid unit masked setting. path: \"/etc/systemd/system/m.service\"; \
             expected: /dev/null; received: /usr/lib/systemd/system/m.service"
        );
        host.remove(m).unwrap();
        assert_eq!(
            set.check_path(&host, m).unwrap_err(),
            "state validation: error while evaluation symlink for path \"/etc/systemd/system/m.service\": \
             lstat /etc/systemd/system/m.service: no such file or directory"
        );

        let empty = "/etc/systemd/system/d.service.d/20-empty.conf";
        host.symlink("/nowhere", empty).unwrap();
        set.check_path(&host, empty).unwrap();
        host.remove(empty).unwrap();
        host.write_atomic(empty, b"x", 0o644, crate::host::Owner::ROOT).unwrap();
        assert_eq!(
            set.check_path(&host, empty).unwrap_err(),
            format!("content mismatch for file \"{empty}\"")
        );

        assert_eq!(
            set.check_path(&host, "/etc/new\nline").unwrap_err(),
            r#"could not stat file "/etc/new\nline": lstat /etc/new
line: no such file or directory"#
        );
    }

    #[test]
    fn go_mode_formatting() {
        assert_eq!(GoMode::new(FileKind::File, 0o644).to_string(), "-rw-r--r--/420/0644");
        assert_eq!(
            GoMode::new(FileKind::Symlink, 0o777).to_string(),
            "Lrwxrwxrwx/134218239/01000000777"
        );
        assert_eq!(
            GoMode::new(FileKind::Dir, 0o755).to_string(),
            "drwxr-xr-x/2147484141/020000000755"
        );
    }

    #[test]
    fn enablement_is_checked() {
        if std::process::Command::new("systemctl")
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!("skipping: systemctl is not installed");
            return;
        }
        let (_d, host) = sandbox();
        let cfg = mc(
            "c",
            json!({"ignition": {"version": "3.4.0"}, "systemd": {"units": [{
                "name": "e.service", "enabled": true,
                "contents": "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
            }]}}),
        );
        write_config(&host, WriteMode::FirstBoot, &cfg).unwrap();
        validate_on_disk(&host, &cfg).unwrap();
        host.systemctl(crate::host::UnitVerb::Disable, &["e.service"]).unwrap();
        assert_eq!(
            validate_on_disk(&host, &cfg).unwrap_err(),
            r#"unit "e.service" expected enabled=true, but systemd reports "disabled""#
        );
        // and the other way round, MCO's other message
        let off = mc(
            "c",
            json!({"ignition": {"version": "3.4.0"}, "systemd": {"units": [{
                "name": "e.service", "enabled": false,
                "contents": "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
            }]}}),
        );
        host.systemctl(crate::host::UnitVerb::Enable, &["e.service"]).unwrap();
        assert_eq!(
            validate_on_disk(&host, &off).unwrap_err(),
            r#"unit "e.service" expected enabled=false, but systemd reports "enabled""#
        );
    }
}
