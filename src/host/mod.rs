//! The OS boundary of the node daemon: every effect the daemon has on a node goes through [`Host`].
//!
//! Owns path resolution (node path `/etc/foo` -> real path), atomic file writes, user and group
//! lookup, `systemctl`, reboot requests and the boot id, with two implementations: [`SandboxHost`]
//! (a root directory standing in for a node; what cannot run there is recorded in a journal file)
//! and [`RealHost`] (root `/`). It must not decide *what* to write (that is [`crate::daemon`]) nor
//! talk to the API server.
//!
//! Architecture invariant: every managed file is written by [`Host::write_atomic`] (temp file in the
//! same directory, chmod, chown, fsync, rename, fsync of the directory), so no crash point leaves a
//! partial file at a managed path (afterburn `write_ssh_keys`, bootupd `statefile.rs`).

pub mod boot;
pub mod fs;
pub mod kargs;
pub mod os;
mod real;
mod sandbox;

pub use real::RealHost;
pub use sandbox::{
    SandboxHost, BOOTED_OS_PATH, BOOT_ID_PATH, CMDLINE_PATH, DEFAULT_DISABLE_PRESET, JOURNAL_PATH,
    PENDING_CMDLINE_PATH, PENDING_OS_PATH,
};

use std::path::{Path, PathBuf};

/// The directory holding a node path: `/etc/a.conf` → `/etc`, `/run` → `/`; `None` for `/`
/// and for a path without a slash.
pub fn parent_dir(path: &str) -> Option<&str> {
    match path.rfind('/')? {
        0 if path == "/" => None,
        0 => Some("/"),
        i => Some(&path[..i]),
    }
}

/// Kills the process with `SIGKILL` on the spot: the action of the daemon's failpoints when the
/// `FAILPOINTS` environment variable sets one to `return` (`tests/crash_daemon.rs`), so a crash
/// lands exactly at that step of the write path.
#[cfg(feature = "failpoints")]
pub(crate) fn sigkill_self() -> ! {
    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    unreachable!("SIGKILL cannot be caught")
}

/// Owner of a written file or directory (numeric ids, as `chown(2)` takes them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

impl Owner {
    /// `root:root` (0:0), the default owner of MachineConfig files (MCO `pkg/daemon/update.go`).
    pub const ROOT: Owner = Owner { uid: 0, gid: 0 };
}

/// What `lstat(2)` says about a node path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileMeta {
    pub kind: FileKind,
    /// Permission bits including setuid/setgid/sticky (`st_mode & 0o7777`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// Size in bytes (of the link itself for a symlink).
    pub len: u64,
    /// Target of a symlink as stored in the link (not resolved); `None` for other kinds.
    pub symlink_target: Option<PathBuf>,
}

/// File type from `lstat(2)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    /// Device, fifo or socket.
    Other,
}

/// `systemctl` verbs that change unit enablement (run offline with `--root` in a sandbox).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitVerb {
    Enable,
    Disable,
    Mask,
    Preset,
}

impl UnitVerb {
    /// The `systemctl` sub-command.
    pub fn as_str(self) -> &'static str {
        match self {
            UnitVerb::Enable => "enable",
            UnitVerb::Disable => "disable",
            UnitVerb::Mask => "mask",
            UnitVerb::Preset => "preset",
        }
    }
}

/// Actions on the running service manager: they need a live systemd, so a sandbox only records them.
/// MCO's node disruption actions Reload/Restart/DaemonReload (`pkg/daemon/update.go`, mco-facts 6.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServiceAction {
    Reload(String),
    Restart(String),
    DaemonReload,
}

impl std::fmt::Display for ServiceAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServiceAction::Reload(u) => write!(f, "reload {u}"),
            ServiceAction::Restart(u) => write!(f, "restart {u}"),
            ServiceAction::DaemonReload => f.write_str("daemon-reload"),
        }
    }
}

/// Failures of host operations. The text is what ends up in a node's Degraded `reason`, so it names
/// the node path and the operation once.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// A filesystem call failed. `path` is the node path (`/etc/foo`), not the sandbox path.
    #[error("{op} {path}: {err}")]
    Io {
        op: &'static str,
        path: String,
        err: std::io::Error,
    },
    /// A node path that is not absolute or not fully simplified (`.`, `..`, `//`, a trailing
    /// `/`): Ignition's "path not absolute" / "path is not fully simplified" (mco-facts 1.7).
    #[error("invalid node path {0:?}: must be absolute and fully simplified (no '.', '..', '//' or trailing '/')")]
    BadPath(String),
    /// The host refused to act on a node path because of what is on disk: a symlink leading
    /// outside the node root, a FIFO, socket or device node where a file is managed
    /// (`reason` says which, naming the path). See [`fs`] for the rules.
    #[error("refusing to {op} {path}: {reason}")]
    Refused {
        op: &'static str,
        path: String,
        reason: String,
    },
    /// A command (`systemctl ...`) could not run or exited non-zero; `detail` is its stderr (or
    /// stdout when stderr is empty), `exit` its exit status (`None`: it could not run or was
    /// killed by a signal).
    #[error("{command} failed: {detail}")]
    Command {
        command: String,
        detail: String,
        exit: Option<i32>,
    },
    /// A host file (passwd, boot id) has content that cannot be read.
    #[error("{0}")]
    Invalid(String),
}

impl HostError {
    /// What the failing command printed (`detail`), or the whole message for other errors:
    /// the part of a `systemctl` failure MCO puts in its own messages (`error enabling units: %s`
    /// with the command's output, `pkg/daemon/update.go`).
    pub fn output(&self) -> String {
        match self {
            HostError::Command { detail, .. } => detail.clone(),
            other => other.to_string(),
        }
    }

    /// True for a [`HostError::Refused`] (confinement).
    pub fn is_refused(&self) -> bool {
        matches!(self, HostError::Refused { .. })
    }

    /// True when the error is an `ENOENT` from the filesystem.
    pub fn is_not_found(&self) -> bool {
        matches!(self, HostError::Io { err, .. } if err.kind() == std::io::ErrorKind::NotFound)
    }

    fn io(op: &'static str, path: &str, err: std::io::Error) -> HostError {
        HostError::Io {
            op,
            path: path.to_string(),
            err,
        }
    }
}

/// Everything the daemon does to a node. Node paths are absolute paths as the node sees them
/// (`/etc/foo`); implementations map them under their root. Calls are blocking and small (files of
/// a MachineConfig); async callers may use `spawn_blocking`.
pub trait Host: Send + Sync + std::fmt::Debug {
    /// The real directory that is the node's `/`.
    fn root(&self) -> &Path;

    /// Restores what the node's operating system provides and a MachineConfig relies on (the
    /// `core` user, the systemd directories) where it is missing. A real host has its OS:
    /// nothing to do. A sandbox recreates its minimal filesystem, so the force file's rewrite
    /// recovers even a root that was emptied.
    fn ensure_base_os(&self) -> Result<(), HostError> {
        Ok(())
    }

    /// Whether [`Host::write_atomic`] and [`Host::create_dir_all`] apply ownership. A sandbox run
    /// by an unprivileged user cannot `chown` to other users; it then leaves files owned by itself.
    fn applies_ownership(&self) -> bool {
        true
    }

    /// How node paths are resolved beneath [`Host::root`] ([`fs::Confinement`]): beneath the
    /// root for a sandbox, as the kernel does on a real host.
    fn confinement(&self) -> fs::Confinement {
        fs::Confinement::Host
    }

    /// The node filesystem every file operation below goes through.
    fn node_fs(&self) -> fs::NodeFs<'_> {
        fs::NodeFs {
            root: self.root(),
            confinement: self.confinement(),
        }
    }

    /// Maps a node path to the real path under [`Host::root`], as a string join: for display,
    /// logs and tests only. No file operation of the daemon uses it (a symlink under the root
    /// could lead the joined path anywhere); they go through [`Host::node_fs`].
    /// Errors: [`HostError::BadPath`] for a path that is not absolute and fully simplified.
    fn resolve(&self, node_path: &str) -> Result<PathBuf, HostError> {
        fs::node_components(node_path)?;
        Ok(self.root().join(node_path.trim_start_matches('/')))
    }

    /// Reads a whole regular file, following a final symlink (beneath the root in a sandbox).
    /// Errors: [`HostError::Refused`] for a FIFO, socket or device (never opened blocking) and
    /// for a path leading outside a sandbox root.
    fn read(&self, path: &str) -> Result<Vec<u8>, HostError> {
        self.node_fs().read(path)
    }

    /// `lstat` of a node path (a symlink is reported as such, with its target).
    fn metadata(&self, path: &str) -> Result<FileMeta, HostError> {
        self.node_fs().lstat(path)
    }

    /// True when `lstat` succeeds.
    fn exists(&self, path: &str) -> bool {
        self.metadata(path).is_ok()
    }

    /// Writes `data` to `path` atomically with permission bits `mode` (e.g. `0o644`) and `owner`:
    /// missing parent directories are created `0755` (owned by the process), then a temp file in
    /// the same directory is written, chown-ed, chmod-ed, fsync-ed and renamed over `path`, and the
    /// directory is fsync-ed. A symlink at `path` is replaced, not followed; a FIFO, socket or
    /// device there is refused ([`HostError::Refused`]). On error no temp file is left behind.
    fn write_atomic(&self, path: &str, data: &[u8], mode: u32, owner: Owner) -> Result<(), HostError> {
        let owner = self.applies_ownership().then_some(owner);
        self.node_fs().write_atomic(path, data, mode, owner)
    }

    /// Creates `path` and its missing parents; every directory created gets `mode` (not subject to
    /// the umask) and, when given, `owner`. An existing final directory gets `mode` and `owner` too.
    fn create_dir_all(&self, path: &str, mode: u32, owner: Option<Owner>) -> Result<(), HostError> {
        let owner = owner.filter(|_| self.applies_ownership());
        self.node_fs().create_dir_all(path, mode, owner)
    }

    /// Removes a file or symlink (never following it). Returns `Ok(false)` when nothing was there.
    fn remove(&self, path: &str) -> Result<bool, HostError> {
        self.node_fs().remove(path)
    }

    /// Makes `path` a symlink to `target` (stored verbatim, e.g. `/dev/null` for a masked unit),
    /// replacing whatever was there atomically; parents are created `0755`.
    fn symlink(&self, target: &str, path: &str) -> Result<(), HostError> {
        self.node_fs().symlink_atomic(target, path)
    }

    /// Removes temp files of [`Host::write_atomic`] left in directory `dir` by a killed process
    /// (`.<name>.mco-tmp.<pid>.<n>`); returns how many. Nothing when `dir` does not exist.
    fn remove_temp_files(&self, dir: &str) -> Result<usize, HostError> {
        self.node_fs().remove_temp_files(dir)
    }

    /// Opens the daemon's own regular file `path` for writing (created `0644`, parents `0755`),
    /// at its end when `append`; a final symlink is not followed.
    fn open_file(&self, path: &str, append: bool) -> Result<std::fs::File, HostError> {
        self.node_fs().open_file(path, append)
    }

    /// User id of `name` on the node; `Ok(None)` when there is no such user.
    fn lookup_user(&self, name: &str) -> Result<Option<u32>, HostError>;

    /// Group id of `name` on the node; `Ok(None)` when there is no such group.
    fn lookup_group(&self, name: &str) -> Result<Option<u32>, HostError>;

    /// `systemctl <verb> <units...>`. A unit systemd cannot find is an error
    /// (`Failed to enable unit, unit X does not exist.` in `detail`).
    fn systemctl(&self, verb: UnitVerb, units: &[&str]) -> Result<(), HostError>;

    /// `systemctl is-enabled <unit>`: `enabled`, `disabled`, `static`, `alias`, `masked`, ...;
    /// `not-found` when systemd cannot resolve a unit file for it: no file of that name in any
    /// unit directory (`/etc`, `/run`, `/usr/lib/systemd/system`), no alias link, and for an
    /// instance (`name@inst.service`) no template (`name@.service`) either.
    fn unit_state(&self, unit: &str) -> Result<String, HostError>;

    /// Runs (or, in a sandbox, records) a service manager action.
    fn service(&self, action: &ServiceAction) -> Result<(), HostError>;

    /// Requests a reboot. On a real host `systemctl reboot`; in a sandbox the request is recorded
    /// and the daemon process exits with [`crate::daemon::REBOOT_EXIT_CODE`] for its supervisor.
    fn reboot(&self, reason: &str) -> Result<(), HostError>;

    /// The id of the current boot (a UUID), reported as the Node's `status.nodeInfo.bootID`.
    fn boot_id(&self) -> Result<String, HostError>;

    /// Stages a kernel-argument update for the next boot (MCO: `rpm-ostree kargs
    /// --delete-if-present=... --append=...`, mco-facts 4.2.j; a real host through its boot
    /// setup, [`boot`]). Nothing for an empty update.
    fn update_kernel_arguments(&self, update: &kargs::KargsUpdate) -> Result<(), HostError>;

    /// The booted kernel command line (`/proc/cmdline`).
    fn kernel_cmdline(&self) -> Result<String, HostError>;

    /// Stages the OS image, kernel type and extensions of `to` for the next boot (MCO's
    /// `rpm-ostree rebase / override / update`, mco-facts 4.2.j). Nothing when `from == to`.
    fn update_os(&self, from: &os::OsState, to: &os::OsState) -> Result<(), HostError>;

    /// The booted OS state; `None` when the host cannot tell (not an rpm-ostree host: MCO
    /// leaves OS changes to CoreOS nodes and skips the check elsewhere).
    fn booted_os(&self) -> Result<Option<os::OsState>, HostError>;
}

/// Runs `command` with `args`, returning stdout; a non-zero exit is [`HostError::Command`] with
/// stderr (or stdout when stderr is empty).
pub(crate) fn run_command(command: &str, args: &[String]) -> Result<String, HostError> {
    let shown = format!("{command} {}", args.join(" "));
    let out = std::process::Command::new(command)
        .args(args)
        .output()
        .map_err(|e| HostError::Command {
            command: shown.clone(),
            detail: e.to_string(),
            exit: None,
        })?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        let detail = if stderr.is_empty() {
            stdout.trim().to_string()
        } else {
            stderr
        };
        let detail = if detail.is_empty() {
            out.status.to_string()
        } else {
            detail
        };
        return Err(HostError::Command {
            command: shown,
            detail,
            exit: out.status.code(),
        });
    }
    Ok(stdout)
}

/// `systemctl [prefix...] is-enabled <unit>` interpreted: is-enabled exits 1 for `disabled` and
/// `masked` with the state on stdout, and with an empty stdout when the unit file does not exist.
pub(crate) fn is_enabled(prefix: &[String], unit: &str) -> Result<String, HostError> {
    let mut args = prefix.to_vec();
    args.push("is-enabled".into());
    args.push(unit.into());
    let out = std::process::Command::new("systemctl")
        .args(&args)
        .output()
        .map_err(|e| HostError::Command {
            command: format!("systemctl {}", args.join(" ")),
            detail: e.to_string(),
            exit: None,
        })?;
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !stdout.is_empty() {
        return Ok(stdout);
    }
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if stderr.contains("No such file") || stderr.contains("not found") || stderr.contains("does not exist") {
        return Ok("not-found".to_string());
    }
    Err(HostError::Command {
        command: format!("systemctl {}", args.join(" ")),
        detail: stderr,
        exit: out.status.code(),
    })
}

/// The text of Go's `*os.PathError` for a failed filesystem call of the host
/// ([`crate::gofmt::os_path_error`]): `<op> <node path>: <errno text>`. `op` is Go's operation
/// (`lstat`, `open`, `remove`, `symlink`), which may differ from the one the host recorded (a
/// read fails in Go's `open`). Other host errors are shown as they are.
pub fn path_error(op: &str, e: &HostError) -> String {
    match e {
        HostError::Io { err, path, .. } => crate::gofmt::os_path_error(op, path, err),
        other => other.to_string(),
    }
}

/// Go's `*exec.ExitError` text for a failed command: `exit status <n>`; the error itself when the
/// command could not run or has no exit status.
pub fn exit_error(e: &HostError) -> String {
    match e {
        HostError::Command { exit: Some(n), .. } => format!("exit status {n}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{exit_error, path_error, HostError};

    #[test]
    fn path_errors_read_as_go_prints_them() {
        let e = HostError::Io {
            op: "read",
            path: "/etc/x".into(),
            err: std::io::Error::from_raw_os_error(2),
        };
        assert_eq!(path_error("open", &e), "open /etc/x: no such file or directory");
        let e = HostError::Command {
            command: "systemctl disable a".into(),
            detail: "boom".into(),
            exit: Some(1),
        };
        assert_eq!(exit_error(&e), "exit status 1");
    }

    #[test]
    fn parent_dir_of_node_paths() {
        let cases = [
            ("/etc/kubernetes/kubelet.conf", Some("/etc/kubernetes")),
            ("/run", Some("/")),
            ("/", None),
            ("relative", None),
        ];
        for (path, want) in cases {
            assert_eq!(super::parent_dir(path), want, "{path}");
        }
    }
}
