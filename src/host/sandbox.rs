//! [`SandboxHost`]: a directory standing in for a node's `/`.

use super::kargs::KargsUpdate;
use super::os::OsState;
use super::{fs, is_enabled, run_command, Host, HostError, Owner, ServiceAction, UnitVerb};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Node path of the journal where a sandbox records what it cannot run (reload, restart,
/// daemon-reload, reboot): one line per action, `<RFC 3339 time> <action>`.
pub const JOURNAL_PATH: &str = "/var/log/mco-host-journal";

/// Node path of a sandbox's booted kernel command line (its `/proc/cmdline`; empty when absent).
pub const CMDLINE_PATH: &str = "/proc/cmdline";

/// Node path where a sandbox stages the next boot's command line (what `rpm-ostree kargs`
/// stages on a real node); moved to [`CMDLINE_PATH`] when a new boot id is made.
pub const PENDING_CMDLINE_PATH: &str = "/var/lib/mco/kernel-cmdline.pending";

/// Node path where a sandbox stages the next boot's OS state (JSON of
/// [`super::os::OsState`]).
pub const PENDING_OS_PATH: &str = "/var/lib/mco/os.pending.json";

/// Node path of a sandbox's booted OS state (image, kernel type, extension packages).
pub const BOOTED_OS_PATH: &str = "/var/lib/mco/os.booted.json";

/// Node path of the sandbox boot id. `<root>/run` is emptied by the supervisor at each simulated
/// reboot, as a real reboot empties its tmpfs, so each boot gets a fresh id.
pub const BOOT_ID_PATH: &str = "/run/mco/boot_id";

/// Node path of the preset file a sandbox root gets, as Fedora CoreOS and RHCOS ship it (from
/// `fedora-release`/`redhat-release`): `disable *`, so units are off unless a preset enables them.
pub const DEFAULT_DISABLE_PRESET: &str = "/usr/lib/systemd/system-preset/99-default-disable.preset";

/// Contents of [`DEFAULT_DISABLE_PRESET`].
const DEFAULT_DISABLE_PRESET_CONTENTS: &str = "disable *\n";

/// A node whose `/` is the directory `root`.
///
/// - every node path is prefixed by `root` ([`Host::resolve`]);
/// - users and groups come from `<root>/etc/passwd` and `<root>/etc/group`;
/// - enable/disable/mask/preset/is-enabled run the real `systemctl --root=<root>` (offline);
/// - reload/restart/daemon-reload and reboot are appended to [`JOURNAL_PATH`];
/// - the boot id lives in [`BOOT_ID_PATH`], created (UUID v7) when absent;
/// - ownership is applied only when the process runs as root (`geteuid() == 0`).
#[derive(Clone, Debug)]
pub struct SandboxHost {
    root: PathBuf,
    chown: bool,
}

impl SandboxHost {
    /// A sandbox over an existing directory `root` (not created nor checked here). A relative
    /// root is made absolute against the current directory, so that the paths inotify reports
    /// for it compare equal to the managed paths.
    pub fn new(root: impl Into<PathBuf>) -> SandboxHost {
        let root: PathBuf = root.into();
        let root = std::path::absolute(&root).unwrap_or(root);
        SandboxHost {
            root,
            chown: nix::unistd::geteuid().is_root(),
        }
    }

    /// Creates a minimal node filesystem under `root` (idempotent; existing files are kept):
    /// `etc/passwd` with `root` (0) and `core` (1000), `etc/group` with the same groups,
    /// `home/core` (0700, owned by core when running as root), `etc/systemd/system`,
    /// `usr/lib/systemd/system`, `run`, and the distribution's preset policy
    /// [`DEFAULT_DISABLE_PRESET`] (`disable *`).
    ///
    /// The preset matters: `systemctl preset` (which MCO runs for units without `enabled` and
    /// for removed units, mco-facts 4.5) *enables* a unit when no preset file exists at all
    /// (`systemd.preset(5)`), so without it a removed `enabled: true` unit would stay linked from
    /// `multi-user.target.wants`. An existing file at that path (the node's own policy) is kept,
    /// and preset files elsewhere (`/etc/systemd/system-preset`) still take precedence, as on a
    /// real node.
    pub fn init(root: impl Into<PathBuf>) -> Result<SandboxHost, HostError> {
        let host = SandboxHost::new(root);
        host.ensure_base_os()?;
        Ok(host)
    }

    /// The minimal node filesystem of [`SandboxHost::init`] (what a sandbox's "operating
    /// system" provides), created where missing.
    fn base_os(&self) -> Result<(), HostError> {
        let host = self;
        host.create_dir_all("/etc/systemd/system", 0o755, None)?;
        host.create_dir_all("/usr/lib/systemd/system", 0o755, None)?;
        if !host.exists(DEFAULT_DISABLE_PRESET) {
            host.write_atomic(
                DEFAULT_DISABLE_PRESET,
                DEFAULT_DISABLE_PRESET_CONTENTS.as_bytes(),
                0o644,
                Owner::ROOT,
            )?;
        }
        host.create_dir_all("/run", 0o755, None)?;
        host.create_dir_all("/var/log", 0o755, None)?;
        if !host.exists("/etc/passwd") {
            let passwd = "root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:CoreOS Admin:/home/core:/bin/bash\n";
            host.write_atomic("/etc/passwd", passwd.as_bytes(), 0o644, Owner::ROOT)?;
        }
        if !host.exists("/etc/group") {
            host.write_atomic("/etc/group", b"root:x:0:\ncore:x:1000:\n", 0o644, Owner::ROOT)?;
        }
        if !host.exists("/home/core") {
            host.create_dir_all("/home/core", 0o700, Some(Owner { uid: 1000, gid: 1000 }))?;
        }
        Ok(())
    }

    /// Appends one line to the journal, fsync-ed.
    fn journal(&self, what: &str) -> Result<(), HostError> {
        let path = self.resolve(JOURNAL_PATH)?;
        let io = |e| HostError::io("append", JOURNAL_PATH, e);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir, 0o755, None).map_err(io)?;
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        writeln!(f, "{} {what}", jiff::Timestamp::now()).map_err(io)?;
        f.sync_all().map_err(io)
    }

    /// The lines recorded in the journal so far (empty when there is none).
    pub fn journal_lines(&self) -> Result<Vec<String>, HostError> {
        match self.read(JOURNAL_PATH) {
            Ok(b) => Ok(String::from_utf8_lossy(&b).lines().map(str::to_string).collect()),
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    fn root_flag(&self) -> String {
        format!("--root={}", self.root.display())
    }

    /// Looks `name` up in a `name:x:id:...` database file (passwd or group), id in column 3.
    fn lookup(&self, db: &str, name: &str) -> Result<Option<u32>, HostError> {
        let text = match self.read(db) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        for line in text.lines() {
            let mut cols = line.split(':');
            if cols.next() != Some(name) {
                continue;
            }
            let id = cols.nth(1).unwrap_or("");
            return id
                .parse()
                .map(Some)
                .map_err(|_| HostError::Invalid(format!("{db}: bad id {id:?} for {name:?}")));
        }
        Ok(None)
    }
}

impl Host for SandboxHost {
    fn root(&self) -> &Path {
        &self.root
    }

    fn ensure_base_os(&self) -> Result<(), HostError> {
        self.base_os()
    }

    fn applies_ownership(&self) -> bool {
        self.chown
    }

    fn lookup_user(&self, name: &str) -> Result<Option<u32>, HostError> {
        self.lookup("/etc/passwd", name)
    }

    fn lookup_group(&self, name: &str) -> Result<Option<u32>, HostError> {
        self.lookup("/etc/group", name)
    }

    fn systemctl(&self, verb: UnitVerb, units: &[&str]) -> Result<(), HostError> {
        let mut args = vec![self.root_flag(), verb.as_str().to_string()];
        args.extend(units.iter().map(|u| u.to_string()));
        run_command("systemctl", &args).map(drop)
    }

    fn unit_state(&self, unit: &str) -> Result<String, HostError> {
        is_enabled(&[self.root_flag()], unit)
    }

    fn service(&self, action: &ServiceAction) -> Result<(), HostError> {
        self.journal(&format!("systemctl {action}"))
    }

    fn reboot(&self, reason: &str) -> Result<(), HostError> {
        self.journal(&format!("reboot {reason}"))
    }

    /// Applies the update to the pending command line (or, without one, the booted one) and
    /// records it in [`PENDING_CMDLINE_PATH`] and the journal; the next boot makes it
    /// [`CMDLINE_PATH`].
    fn update_kernel_arguments(&self, update: &KargsUpdate) -> Result<(), HostError> {
        if update.is_empty() {
            return Ok(());
        }
        let base = match self.read(PENDING_CMDLINE_PATH) {
            Ok(b) => String::from_utf8_lossy(&b).trim().to_string(),
            Err(e) if e.is_not_found() => self.kernel_cmdline()?,
            Err(e) => return Err(e),
        };
        let next = update.apply(&base);
        self.write_atomic(PENDING_CMDLINE_PATH, format!("{next}\n").as_bytes(), 0o644, Owner::ROOT)?;
        self.journal(&format!("rpm-ostree {}", update.rpm_ostree_args().join(" ")))
    }

    /// Records `to` in [`PENDING_OS_PATH`] (JSON) and the rpm-ostree commands a real node would
    /// run in the journal; the next boot makes it [`BOOTED_OS_PATH`].
    fn update_os(&self, from: &OsState, to: &OsState) -> Result<(), HostError> {
        if from == to {
            return Ok(());
        }
        let json = serde_json::to_vec_pretty(to).expect("serializes");
        self.write_atomic(PENDING_OS_PATH, &json, 0o644, Owner::ROOT)?;
        for cmd in from.rpm_ostree_commands(to) {
            self.journal(&format!("rpm-ostree {}", cmd.join(" ")))?;
        }
        Ok(())
    }

    /// [`BOOTED_OS_PATH`]; a sandbox that never staged an OS change runs the default kernel,
    /// no extensions, and the image it was made from (empty URL).
    fn booted_os(&self) -> Result<Option<OsState>, HostError> {
        self.boot_id()?;
        match self.read(BOOTED_OS_PATH) {
            Ok(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| HostError::Invalid(format!("{BOOTED_OS_PATH}: {e}"))),
            Err(e) if e.is_not_found() => Ok(Some(OsState {
                kernel_type: "default".into(),
                ..Default::default()
            })),
            Err(e) => Err(e),
        }
    }

    fn kernel_cmdline(&self) -> Result<String, HostError> {
        self.boot_id()?; // the first read of a boot promotes the staged command line
        match self.read(CMDLINE_PATH) {
            Ok(b) => Ok(String::from_utf8_lossy(&b).trim().to_string()),
            Err(e) if e.is_not_found() => Ok(String::new()),
            Err(e) => Err(e),
        }
    }

    fn boot_id(&self) -> Result<String, HostError> {
        match self.read(BOOT_ID_PATH) {
            Ok(b) => Ok(String::from_utf8_lossy(&b).trim().to_string()),
            Err(e) if e.is_not_found() => {
                // A new boot: the staged command line becomes the booted one.
                for (pending, booted) in [(PENDING_CMDLINE_PATH, CMDLINE_PATH), (PENDING_OS_PATH, BOOTED_OS_PATH)] {
                    if let Ok(b) = self.read(pending) {
                        self.write_atomic(booted, &b, 0o444, Owner::ROOT)?;
                        self.remove(pending)?;
                    }
                }
                let id = uuid::Uuid::now_v7().to_string();
                self.write_atomic(BOOT_ID_PATH, format!("{id}\n").as_bytes(), 0o444, Owner::ROOT)?;
                Ok(id)
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::FileKind;

    fn sandbox() -> (tempfile::TempDir, SandboxHost) {
        let dir = tempfile::tempdir().unwrap();
        let host = SandboxHost::init(dir.path()).unwrap();
        (dir, host)
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn atomic_write_sets_bytes_mode_and_leaves_no_temp_file() {
        let (dir, host) = sandbox();
        host.write_atomic("/etc/foo/bar.conf", b"one", 0o640, Owner::ROOT)
            .unwrap();
        host.write_atomic("/etc/foo/bar.conf", b"two", 0o600, Owner::ROOT)
            .unwrap();
        assert_eq!(host.read("/etc/foo/bar.conf").unwrap(), b"two");
        let md = host.metadata("/etc/foo/bar.conf").unwrap();
        assert_eq!((md.kind, md.mode), (FileKind::File, 0o600));
        assert_eq!(entries(&dir.path().join("etc/foo")), vec!["bar.conf".to_string()]);
    }

    #[test]
    fn atomic_write_creates_parents_0755_and_replaces_symlinks() {
        let (_dir, host) = sandbox();
        host.write_atomic("/etc/a/b/c", b"x", 0o644, Owner::ROOT).unwrap();
        assert_eq!(host.metadata("/etc/a").unwrap().mode, 0o755);
        assert_eq!(host.metadata("/etc/a/b").unwrap().mode, 0o755);
        host.symlink("/dev/null", "/etc/a/b/c").unwrap();
        assert_eq!(
            host.metadata("/etc/a/b/c").unwrap().symlink_target,
            Some(PathBuf::from("/dev/null"))
        );
        host.write_atomic("/etc/a/b/c", b"y", 0o644, Owner::ROOT).unwrap();
        assert_eq!(host.metadata("/etc/a/b/c").unwrap().kind, FileKind::File);
    }

    #[test]
    fn atomic_write_applies_owner_when_root() {
        let (_dir, host) = sandbox();
        host.write_atomic("/home/core/f", b"x", 0o600, Owner { uid: 1000, gid: 1000 })
            .unwrap();
        let md = host.metadata("/home/core/f").unwrap();
        if host.applies_ownership() {
            assert_eq!((md.uid, md.gid), (1000, 1000));
        } else {
            eprintln!("not root: ownership not applied in the sandbox");
        }
    }

    #[test]
    fn init_installs_the_default_disable_preset_once_and_keeps_the_nodes_own() {
        let (dir, host) = sandbox();
        assert_eq!(host.read(DEFAULT_DISABLE_PRESET).unwrap(), b"disable *\n");
        assert_eq!(host.metadata(DEFAULT_DISABLE_PRESET).unwrap().mode, 0o644);
        host.write_atomic(DEFAULT_DISABLE_PRESET, b"enable *\n", 0o644, Owner::ROOT)
            .unwrap();
        host.write_atomic("/etc/passwd", b"root:x:0:0::/root:/bin/sh\n", 0o644, Owner::ROOT)
            .unwrap();
        let again = SandboxHost::init(dir.path()).unwrap();
        assert_eq!(again.read(DEFAULT_DISABLE_PRESET).unwrap(), b"enable *\n");
        assert_eq!(again.read("/etc/passwd").unwrap(), b"root:x:0:0::/root:/bin/sh\n");
    }

    #[test]
    fn paths_cannot_escape_the_root() {
        let (_dir, host) = sandbox();
        assert!(matches!(host.resolve("/etc/../../x"), Err(HostError::BadPath(_))));
        assert!(matches!(host.resolve("etc/x"), Err(HostError::BadPath(_))));
    }

    #[test]
    fn users_and_groups_come_from_the_sandbox_passwd() {
        let (_dir, host) = sandbox();
        assert_eq!(host.lookup_user("core").unwrap(), Some(1000));
        assert_eq!(host.lookup_user("root").unwrap(), Some(0));
        assert_eq!(host.lookup_user("nobody-here").unwrap(), None);
        assert_eq!(host.lookup_group("core").unwrap(), Some(1000));
    }

    #[test]
    fn boot_id_is_stable_until_run_is_emptied() {
        let (dir, host) = sandbox();
        let a = host.boot_id().unwrap();
        assert_eq!(host.boot_id().unwrap(), a);
        std::fs::remove_dir_all(dir.path().join("run")).unwrap();
        assert_ne!(host.boot_id().unwrap(), a);
    }

    #[test]
    fn reboot_and_service_actions_are_journaled() {
        let (_dir, host) = sandbox();
        host.service(&ServiceAction::Reload("crio.service".into())).unwrap();
        host.reboot("config rendered-worker-1").unwrap();
        let lines = host.journal_lines().unwrap();
        assert!(lines[0].ends_with(" systemctl reload crio.service"), "{lines:?}");
        assert!(lines[1].ends_with(" reboot config rendered-worker-1"), "{lines:?}");
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

    #[test]
    fn systemctl_root_enable_creates_the_wants_symlink() {
        if !have_systemctl() {
            return;
        }
        let (dir, host) = sandbox();
        let unit = "[Unit]\nDescription=t\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n";
        host.write_atomic("/etc/systemd/system/t.service", unit.as_bytes(), 0o644, Owner::ROOT)
            .unwrap();
        host.systemctl(UnitVerb::Enable, &["t.service"]).unwrap();
        assert!(dir
            .path()
            .join("etc/systemd/system/multi-user.target.wants/t.service")
            .is_symlink());
        assert_eq!(host.unit_state("t.service").unwrap(), "enabled");
        host.systemctl(UnitVerb::Disable, &["t.service"]).unwrap();
        assert_eq!(host.unit_state("t.service").unwrap(), "disabled");
        assert_eq!(host.unit_state("absent.service").unwrap(), "not-found");
        let err = host.systemctl(UnitVerb::Enable, &["absent.service"]).unwrap_err();
        assert!(err.output().contains("absent.service"), "{err}");
        assert!(matches!(err, HostError::Command { exit: Some(1), .. }), "{err:?}");
    }

    /// `systemctl preset` follows the sandbox's `disable *` policy: an enabled unit loses its
    /// `wants` link (with no preset file at all, systemd would enable it instead).
    #[test]
    fn preset_disables_by_default_as_on_fedora_coreos() {
        if !have_systemctl() {
            return;
        }
        let (dir, host) = sandbox();
        let unit = "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n";
        host.write_atomic("/etc/systemd/system/t.service", unit.as_bytes(), 0o644, Owner::ROOT)
            .unwrap();
        host.systemctl(UnitVerb::Enable, &["t.service"]).unwrap();
        host.systemctl(UnitVerb::Preset, &["t.service"]).unwrap();
        assert_eq!(host.unit_state("t.service").unwrap(), "disabled");
        assert!(!dir
            .path()
            .join("etc/systemd/system/multi-user.target.wants/t.service")
            .exists());
    }
}
