//! [`SandboxHost`]: a directory standing in for a node's `/`.

use super::fs::Confinement;
use super::kargs::KargsUpdate;
use super::os::OsState;
use super::{is_enabled, run_command, FileKind, FileMeta, Host, HostError, Owner, ServiceAction, UnitVerb};
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

    /// [`SandboxHost::init`] for the daemon: a refusal to create the minimal filesystem (a
    /// planted symlink leading outside the root, a FIFO at `/etc/passwd`) is logged and the
    /// host returned anyway, so the daemon starts, registers and reports the refusal on its
    /// Node as Degraded when it next touches that path, instead of crash-looping unseen.
    /// Errors: any other failure of [`SandboxHost::init`].
    pub fn open(root: impl Into<PathBuf>) -> Result<SandboxHost, HostError> {
        let host = SandboxHost::new(root);
        match host.ensure_base_os() {
            Err(e) if e.is_refused() => {
                tracing::error!(error = %e, "the sandbox root's base filesystem could not be checked");
                Ok(host)
            }
            other => other.map(|()| host),
        }
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
        let io = |e| HostError::io("append", JOURNAL_PATH, e);
        let mut f = self.open_file(JOURNAL_PATH, true)?;
        writeln!(f, "{} {what}", jiff::Timestamp::now()).map_err(io)?;
        f.sync_all().map_err(io)
    }

    /// What `systemctl --root` may write to, checked before it runs: it resolves the unit
    /// directories by joining paths to the root (systemd's `chase()` keeps link *targets* inside
    /// the root, but the directories it creates symlinks in are plain root-prefixed paths), so
    /// `/etc`, `/etc/systemd`, `/etc/systemd/system` and every `*.wants`, `*.requires`,
    /// `*.upholds` directory in it must be real directories reached through no symlink (the unit
    /// files themselves are written by mco through the confined write). Not race-free:
    /// systemctl is another program, resolving by path after this check.
    /// Errors: [`HostError::Refused`] naming the path.
    fn check_unit_dirs(&self) -> Result<(), HostError> {
        let refused = |path: String, reason: String| HostError::Refused {
            op: "run systemctl on",
            path,
            reason,
        };
        let node_fs = self.node_fs();
        for dir in ["/etc", "/etc/systemd", super::super::ignition::SYSTEMD_UNIT_DIR] {
            match self.metadata(dir) {
                Ok(md) if md.kind == FileKind::Dir && node_fs.is_plain_dir(dir) => {}
                Err(e) if e.is_not_found() => return Ok(()),
                Ok(md) => {
                    return Err(refused(
                        dir.to_string(),
                        format!(
                            "{dir} is not a plain directory ({}); systemctl --root would follow it",
                            describe(&md)
                        ),
                    ))
                }
                Err(e) => return Err(e),
            }
        }
        let unit_dir = super::super::ignition::SYSTEMD_UNIT_DIR;
        let mut names: Vec<String> = Vec::new();
        if let Ok(entries) = std::fs::read_dir(self.root.join(unit_dir.trim_start_matches('/'))) {
            names.extend(entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()));
        }
        for name in names {
            let writable = [".wants", ".requires", ".upholds"].iter().any(|s| name.ends_with(s));
            let path = format!("{unit_dir}/{name}");
            if writable && self.metadata(&path).is_ok_and(|md| md.kind != FileKind::Dir) {
                let md = self.metadata(&path)?;
                return Err(refused(
                    path.clone(),
                    format!(
                        "{path} is not a plain directory ({}); systemctl --root would write through it",
                        describe(&md)
                    ),
                ));
            }
        }
        Ok(())
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

    fn confinement(&self) -> Confinement {
        Confinement::Beneath
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
        self.check_unit_dirs()?;
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
                // A new boot. A daemon killed during the previous one may have been writing
                // these files: what a real kernel or rpm-ostree would own is left whole, never
                // as a temp file beside it.
                for dir in [BOOT_ID_PATH, CMDLINE_PATH, BOOTED_OS_PATH]
                    .into_iter()
                    .filter_map(super::parent_dir)
                {
                    self.remove_temp_files(dir)?;
                }
                // The staged command line becomes the booted one.
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

/// `lstat`'s kind of a path, for refusals: `a symlink to X`, `a FIFO or device`, ...
fn describe(md: &FileMeta) -> String {
    match md.kind {
        FileKind::Symlink => format!(
            "a symlink to {}",
            md.symlink_target.as_deref().unwrap_or(Path::new("")).display()
        ),
        FileKind::File => "a regular file".into(),
        FileKind::Dir => "a directory".into(),
        FileKind::Other => "a FIFO, socket or device".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn temp_files_left_by_a_killed_write_are_removed() {
        let (dir, host) = sandbox();
        host.write_atomic("/etc/foo/bar.conf", b"one", 0o644, Owner::ROOT)
            .unwrap();
        std::fs::write(dir.path().join("etc/foo/.bar.conf.mco-tmp.1234.0"), "par").unwrap();
        assert_eq!(host.remove_temp_files("/etc/foo").unwrap(), 1);
        assert_eq!(entries(&dir.path().join("etc/foo")), vec!["bar.conf".to_string()]);
        assert_eq!(host.remove_temp_files("/etc/absent").unwrap(), 0);
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
    fn a_new_boot_removes_the_temp_files_a_killed_boot_left() {
        let (dir, host) = sandbox();
        host.boot_id().unwrap();
        host.update_kernel_arguments(&KargsUpdate::between(&[], &["nosmt".to_string()]))
            .unwrap();
        std::fs::remove_dir_all(dir.path().join("run")).unwrap();
        // Killed while writing the new boot's id and promoting the staged command line.
        for temp in [
            "run/mco/.boot_id.mco-tmp.99.0",
            "proc/.cmdline.mco-tmp.99.1",
            "var/lib/mco/.os.booted.json.mco-tmp.99.2",
        ] {
            let temp = dir.path().join(temp);
            std::fs::create_dir_all(temp.parent().unwrap()).unwrap();
            std::fs::write(temp, "par").unwrap();
        }
        host.boot_id().unwrap();
        for d in ["run/mco", "proc", "var/lib/mco"] {
            let left: Vec<String> = entries(&dir.path().join(d))
                .into_iter()
                .filter(|n| n.contains(".mco-tmp."))
                .collect();
            assert_eq!(left, Vec::<String>::new(), "{d}");
        }
        assert_eq!(host.kernel_cmdline().unwrap(), "nosmt");
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

/// Path confinement (see [`super::fs`]): whatever the root contains, nothing outside it is read,
/// written, created or removed.
#[cfg(test)]
mod confinement {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A sandbox and a sentinel directory outside it holding `secret` (bytes `s3cret`).
    fn setup() -> (tempfile::TempDir, SandboxHost, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let host = SandboxHost::init(&root).unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("secret"), "s3cret").unwrap();
        (dir, host, outside)
    }

    fn assert_untouched(outside: &Path) {
        let names: Vec<String> = std::fs::read_dir(outside)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["secret".to_string()], "outside dir changed");
        assert_eq!(std::fs::read(outside.join("secret")).unwrap(), b"s3cret");
    }

    fn assert_refused(what: &str, r: Result<impl std::fmt::Debug, HostError>, names: &str) {
        match r {
            Err(e @ HostError::Refused { .. }) => assert!(e.to_string().contains(names), "{what}: {e}"),
            other => panic!("{what}: expected a refusal naming {names}, got {other:?}"),
        }
    }

    /// Replaces the directory `<root>/<rel>` by a symlink to `target`.
    fn plant(host: &SandboxHost, rel: &str, target: &Path) {
        let p = host.root().join(rel);
        if p.is_dir() && !p.is_symlink() {
            std::fs::rename(&p, p.with_extension("moved")).unwrap();
        }
        symlink(target, &p).unwrap();
    }

    #[test]
    fn a_symlink_at_etc_leading_outside_is_refused_for_every_operation() {
        let (_d, host, outside) = setup();
        plant(&host, "etc", &outside);
        let r = host.write_atomic("/etc/secret", b"pwned", 0o644, Owner::ROOT);
        assert_refused("write", r, "/etc is a symlink to");
        assert_refused(
            "write new",
            host.write_atomic("/etc/new/x", b"x", 0o644, Owner::ROOT),
            "/etc",
        );
        assert_refused("read", host.read("/etc/secret"), "/etc");
        assert_refused("lstat", host.metadata("/etc/secret"), "/etc");
        assert_refused("remove", host.remove("/etc/secret"), "/etc");
        assert_refused("mkdir", host.create_dir_all("/etc/d", 0o755, None), "/etc");
        assert_refused("symlink", host.symlink("/dev/null", "/etc/secret"), "/etc");
        assert_refused("open", host.open_file("/etc/lock", false), "/etc");
        assert!(host.node_fs().real_dir("/etc").is_none());
        assert_untouched(&outside);
    }

    #[test]
    fn deeper_parents_and_relative_escapes_are_refused() {
        let (_d, host, outside) = setup();
        std::fs::create_dir_all(host.root().join("etc/a")).unwrap();
        plant(&host, "etc/a/b", &outside);
        assert_refused(
            "absolute deeper",
            host.write_atomic("/etc/a/b/secret", b"x", 0o644, Owner::ROOT),
            "/etc/a/b is a symlink to",
        );
        std::fs::remove_file(host.root().join("etc/a/b")).unwrap();
        // ../../../outside from <root>/etc/a: climbs above the root
        symlink("../../../outside", host.root().join("etc/a/b")).unwrap();
        assert_refused(
            "relative escape",
            host.write_atomic("/etc/a/b/secret", b"x", 0o644, Owner::ROOT),
            "/etc/a/b is a symlink to ../../../outside",
        );
        assert_refused("relative escape read", host.read("/etc/a/b/secret"), "/etc/a/b");
        assert_untouched(&outside);
    }

    /// Documented behaviour: a relative parent link that stays inside the root is followed (as
    /// Ignition and MCO write through symlinked parents); an absolute one is refused even when
    /// it would name a directory inside, since a sandbox cannot tell it from a host path.
    #[test]
    fn an_inside_relative_parent_link_is_followed_an_absolute_one_refused() {
        let (_d, host, outside) = setup();
        std::fs::create_dir_all(host.root().join("var/real")).unwrap();
        symlink("../var/real", host.root().join("etc/linked")).unwrap();
        host.write_atomic("/etc/linked/f", b"in", 0o600, Owner::ROOT).unwrap();
        assert_eq!(std::fs::read(host.root().join("var/real/f")).unwrap(), b"in");
        assert_eq!(host.read("/etc/linked/f").unwrap(), b"in");
        assert_eq!(host.metadata("/etc/linked/f").unwrap().mode, 0o600);
        assert_eq!(
            host.node_fs().real_dir("/etc/linked"),
            Some(host.root().join("var/real"))
        );
        symlink("/var/real", host.root().join("etc/abs")).unwrap();
        assert_refused(
            "absolute inside",
            host.write_atomic("/etc/abs/f", b"x", 0o644, Owner::ROOT),
            "/etc/abs",
        );
        assert_untouched(&outside);
    }

    #[test]
    fn a_managed_file_that_is_a_symlink_is_replaced_never_followed() {
        let (_d, host, outside) = setup();
        symlink(outside.join("secret"), host.root().join("etc/managed")).unwrap();
        // reading through it is refused (absolute target), lstat shows the link
        assert_refused("read", host.read("/etc/managed"), "/etc/managed");
        assert_eq!(host.metadata("/etc/managed").unwrap().kind, FileKind::Symlink);
        host.write_atomic("/etc/managed", b"mine", 0o644, Owner::ROOT).unwrap();
        assert_eq!(host.metadata("/etc/managed").unwrap().kind, FileKind::File);
        assert_eq!(host.read("/etc/managed").unwrap(), b"mine");
        symlink(outside.join("secret"), host.root().join("etc/gone")).unwrap();
        assert!(host.remove("/etc/gone").unwrap());
        symlink(outside.join("secret"), host.root().join("etc/masked")).unwrap();
        host.symlink("/dev/null", "/etc/masked").unwrap();
        assert_untouched(&outside);
    }

    #[test]
    fn dot_dot_and_unclean_paths_are_bad_paths() {
        let (_d, host, outside) = setup();
        for p in ["/etc/../../outside/secret", "/etc/./x", "etc/x", "/etc//x"] {
            assert!(
                matches!(
                    host.write_atomic(p, b"x", 0o644, Owner::ROOT),
                    Err(HostError::BadPath(_))
                ),
                "{p}"
            );
            assert!(matches!(host.read(p), Err(HostError::BadPath(_))), "{p}");
        }
        assert_untouched(&outside);
    }

    #[test]
    fn fifos_are_refused_without_blocking() {
        let (_d, host, outside) = setup();
        let fifo = host.root().join("etc/fifo");
        let (cwd, fifo_type) = (rustix::fs::CWD, rustix::fs::FileType::Fifo);
        rustix::fs::mknodat(cwd, &fifo, fifo_type, rustix::fs::Mode::from_raw_mode(0o644), 0).unwrap();
        assert_eq!(host.metadata("/etc/fifo").unwrap().kind, FileKind::Other);
        assert_refused("read fifo", host.read("/etc/fifo"), "/etc/fifo is a FIFO");
        assert_refused(
            "write fifo",
            host.write_atomic("/etc/fifo", b"x", 0o644, Owner::ROOT),
            "/etc/fifo is a FIFO",
        );
        assert_refused("open fifo", host.open_file("/etc/fifo", true), "/etc/fifo is a FIFO");
        assert!(fifo.exists());
        assert_untouched(&outside);
    }

    #[test]
    fn device_nodes_are_refused() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipping: creating a device node (mknod) needs root");
            return;
        }
        let (_d, host, _outside) = setup();
        let dev = host.root().join("etc/null");
        let made = rustix::fs::mknodat(
            rustix::fs::CWD,
            &dev,
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::Mode::from_raw_mode(0o666),
            rustix::fs::makedev(1, 3),
        );
        if let Err(e) = made {
            eprintln!("skipping: mknod is not permitted here ({e})");
            return;
        }
        assert_refused("read dev", host.read("/etc/null"), "/etc/null is a character device");
        assert_refused(
            "write dev",
            host.write_atomic("/etc/null", b"x", 0o644, Owner::ROOT),
            "character device",
        );
    }

    #[test]
    fn systemctl_refuses_a_wants_directory_leading_outside() {
        let (_d, host, outside) = setup();
        symlink(&outside, host.root().join("etc/systemd/system/multi-user.target.wants")).unwrap();
        assert_refused(
            "enable",
            host.systemctl(UnitVerb::Enable, &["x.service"]),
            "/etc/systemd/system/multi-user.target.wants is not a plain directory",
        );
        std::fs::remove_file(host.root().join("etc/systemd/system/multi-user.target.wants")).unwrap();
        plant(&host, "etc/systemd/system", &outside);
        assert_refused(
            "enable",
            host.systemctl(UnitVerb::Enable, &["x.service"]),
            "/etc/systemd/system",
        );
        assert_untouched(&outside);
    }
}
