//! On-disk validation: does the node hold what a MachineConfig says?
//!
//! Owns the expected state of every managed path ([`ManagedSet`]) and the checks with MCO's exact
//! messages (`pkg/daemon/on_disk_validation.go`, mco-facts 4.4): files, dropins and unit files by
//! mode and content, masked units by their `/dev/null` link, enablement via `systemctl is-enabled`,
//! plus the `core` user's SSH key file (mco extension, DESIGN.md section 5). Reads only, through
//! [`Host`]; it must not write or repair anything. OS image and kernel arguments are not checked
//! (sandbox nodes do not apply them).
//!
//! Mode mismatches are formatted as MCO formats Go's `os.FileMode` with `%v/%d/%#o`, e.g.
//! `mode mismatch for file: "/etc/foo"; expected: -rw-r--r--/420/0644; received: -rw-------/384/0600`.
//! One deliberate difference: setuid/setgid/sticky bits of the config's mode are mapped to Go's
//! mode bits before comparing, so a `04755` file can validate (MCO compares the raw number with
//! Go's mapped bits and can never match it).

use super::apply::{dropin_path, file_contents, ignition_config, ssh_keys_contents, unit_path, SSH_KEYS_PATH};
use crate::host::{FileKind, FileMeta, Host, HostError};
use crate::model::MachineConfig;
use std::collections::BTreeMap;
use std::path::Path;

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

/// Every managed path of one config with its expected state, in MCO's check order (files, then
/// per unit its dropins and its unit file, then SSH keys), plus the units whose enablement
/// is checked by [`ManagedSet::validate`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ManagedSet {
    /// Name of the MachineConfig this set was built from.
    pub config: String,
    entries: Vec<(String, Expected)>,
    index: BTreeMap<String, usize>,
    /// `(unit, enabled)` for units with contents, not masked, with `enabled` set.
    enablement: Vec<(String, bool)>,
}

impl ManagedSet {
    /// Builds the set for `mc`. The SSH key file is managed when the config has a `core` user
    /// and the node has one. Errors: the config cannot be parsed.
    pub fn from_config(host: &dyn Host, mc: &MachineConfig) -> Result<ManagedSet, String> {
        let cfg = ignition_config(mc)?;
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
                    Err(e) => Expected::Invalid(format!("couldn't decode file {:?}: {e}", f.path)),
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
            // MCO returns before the mask check when contents are empty: such units are unchecked.
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
            if let Some(enabled) = u.enabled {
                set.enablement.push((u.name.clone(), enabled));
            }
        }
        if let Some(contents) = ssh_keys_contents(&cfg) {
            if host.lookup_user(super::apply::CORE_USER).ok().flatten().is_some() {
                set.push(SSH_KEYS_PATH.to_string(), Expected::File { contents, mode: 0o600 });
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
    /// on enabled/enabled-runtime). Returns the first failure's message.
    pub fn validate(&self, host: &dyn Host) -> Result<(), String> {
        self.check_all(host)?;
        for (unit, enabled) in &self.enablement {
            let state = host.unit_state(unit).map_err(|e| format!("state validation: {e}"))?;
            let bad = if *enabled {
                matches!(state.as_str(), "disabled" | "masked" | "masked-runtime" | "not-found")
            } else {
                matches!(state.as_str(), "enabled" | "enabled-runtime")
            };
            if bad {
                let want = if *enabled { "enabled" } else { "disabled" };
                return Err(format!("state validation: unit {unit:?} is {state}, expected {want}"));
            }
        }
        Ok(())
    }
}

/// Full on-disk validation of `mc` (see [`ManagedSet::validate`]).
pub fn validate_on_disk(host: &dyn Host, mc: &MachineConfig) -> Result<(), String> {
    ManagedSet::from_config(host, mc)?.validate(host)
}

/// Go's rendering of an errno (`no such file or directory`) from a host error.
fn go_error(op: &str, path: &str, e: &HostError) -> String {
    match e {
        HostError::Io { err, .. } => {
            let text = match err.raw_os_error() {
                Some(code) => {
                    let desc = nix::errno::Errno::from_raw(code).desc();
                    let mut c = desc.chars();
                    c.next()
                        .map(|f| f.to_lowercase().chain(c).collect())
                        .unwrap_or_default()
                }
                None => err.to_string(),
            };
            format!("{op} {path}: {text}")
        }
        other => other.to_string(),
    }
}

fn check_entry(host: &dyn Host, path: &str, expected: &Expected) -> Result<(), String> {
    match expected {
        Expected::Invalid(msg) => Err(msg.clone()),
        Expected::File { contents, mode } => check_file(host, path, contents, *mode),
        Expected::EmptyDropin => match host.metadata(path) {
            Err(e) if e.is_not_found() => Ok(()),
            _ => check_file(host, path, b"", 0o644),
        },
        Expected::Masked => match host.metadata(path) {
            Ok(FileMeta {
                symlink_target: Some(t),
                ..
            }) if t == Path::new("/dev/null") => Ok(()),
            Ok(FileMeta {
                symlink_target: Some(t),
                ..
            }) => Err(format!(
                "state validation: invalid unit masked setting. path: {path:?}; expected: /dev/null; received: {}",
                t.display()
            )),
            Ok(_) => Err(format!(
                "state validation: invalid unit masked setting. path: {path:?}; expected: /dev/null; received: {path}"
            )),
            Err(e) => Err(format!(
                "state validation: error while evaluation symlink for path {path:?}: {}",
                go_error("lstat", path, &e)
            )),
        },
    }
}

/// MCO `checkFileContentsAndMode`: lstat, exact mode (a symlink fails), exact bytes.
fn check_file(host: &dyn Host, path: &str, expected: &[u8], mode: u32) -> Result<(), String> {
    let md = host
        .metadata(path)
        .map_err(|e| format!("could not stat file {path:?}: {}", go_error("lstat", path, &e)))?;
    let want = GoMode::new(FileKind::File, mode);
    let have = GoMode::new(md.kind, md.mode);
    if want != have {
        return Err(format!(
            "mode mismatch for file: {path:?}; expected: {want}; received: {have}"
        ));
    }
    let bytes = host
        .read(path)
        .map_err(|e| format!("could not read file {path:?}: {}", go_error("open", path, &e)))?;
    if bytes != expected {
        tracing::debug!(
            path,
            expected = expected.len(),
            got = bytes.len(),
            "content mismatch (sizes in bytes)"
        );
        return Err(format!("content mismatch for file {path:?}"));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::apply::write_config;
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
        write_config(&host, None, &config()).unwrap();
        validate_on_disk(&host, &config()).unwrap();
    }

    #[test]
    fn each_mco_message() {
        let (_d, host) = sandbox();
        let cfg = config();
        write_config(&host, None, &cfg).unwrap();
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
        write_config(&host, None, &cfg).unwrap();
        validate_on_disk(&host, &cfg).unwrap();
        host.systemctl(crate::host::UnitVerb::Disable, &["e.service"]).unwrap();
        assert_eq!(
            validate_on_disk(&host, &cfg).unwrap_err(),
            r#"state validation: unit "e.service" is disabled, expected enabled"#
        );
    }
}
