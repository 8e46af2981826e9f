//! Real systemd hosts for tests: Debian bookworm containers booted by `systemd-nspawn -b`, with
//! systemd as PID 1, the real `systemctl`, D-Bus and journald, and real reboots (a fresh boot id
//! each). It owns the prerequisites check (skip, or fail under `CI=true`), the cached root file
//! system (one `debootstrap` per machine, built atomically under a lock), one copy-on-write
//! root per host (an overlay over the cache), the boot loop (nspawn exits 133 when the host
//! reboots: boot it again) and the clean-up of every container, also when a test fails or a
//! previous test process was killed. It knows nothing of mco: tests/realhost.rs joins the
//! hosts as nodes. Facts it relies on: ../shared/reference/realhost.md.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The suite (the recipe of the cached root is in its name: a new recipe builds a new cache).
const ROOTFS: &str = "bookworm-minbase-systemd-dbus";

/// Where the root file system is cached between runs (`MCO_REALHOST_CACHE`, default
/// `/var/cache/mco-test`).
pub fn cache_dir() -> PathBuf {
    std::env::var_os("MCO_REALHOST_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/mco-test"))
}

/// Where the per-host roots live while a test runs: `<dir>/<test pid>-<name>/`.
fn hosts_dir() -> PathBuf {
    PathBuf::from("/var/tmp/mco-realhost")
}

fn on_path(exe: &str) -> bool {
    Command::new(exe)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What this machine lacks to boot real hosts (empty: nothing).
fn missing() -> Vec<String> {
    let mut m = Vec::new();
    if !nix::unistd::geteuid().is_root() {
        m.push("not running as root (systemd-nspawn and mounts need root)".to_string());
    }
    if !on_path("systemd-nspawn") {
        m.push("systemd-nspawn is not installed (apt-get install systemd-container)".into());
    }
    if !on_path("nsenter") {
        m.push("nsenter is not installed (apt-get install util-linux)".into());
    }
    let cached = cache_dir().join(ROOTFS).join("usr/lib/systemd/systemd").exists();
    if !cached && !Path::new("/usr/sbin/debootstrap").exists() && !on_path("debootstrap") {
        m.push(format!(
            "debootstrap is not installed (apt-get install debootstrap) and no root file system is cached in {}",
            cache_dir().display()
        ));
    }
    m
}

/// Whether `test` can boot real hosts here. When it cannot, says why on the terminal (even
/// without `--nocapture`) and returns
/// false (the test then skips), except under `CI=true`, where a missing prerequisite fails the
/// test: CI installs them (`.ci/run`), so a skip there would hide a broken setup.
pub fn available(test: &str) -> bool {
    let missing = missing();
    if missing.is_empty() {
        return true;
    }
    let why = missing.join("; ");
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: a real-host test must run under CI=true, but {why}");
    }
    // Written past libtest's capture (which takes only `print!`/`eprint!`), so that a skip is
    // seen without `--nocapture`.
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
    false
}

/// The cached root file system, built on first use: `debootstrap --variant=minbase
/// --include=systemd,systemd-sysv,dbus bookworm` (mirror `MCO_DEBIAN_MIRROR`, default
/// `http://deb.debian.org/debian`) into a temporary directory renamed into place when complete,
/// under an exclusive lock so concurrent test processes build it once. Never booted itself:
/// each host boots an overlay over it.
pub fn rootfs() -> PathBuf {
    let cache = cache_dir();
    let dir = cache.join(ROOTFS);
    let ready = |d: &Path| d.join("usr/lib/systemd/systemd").exists();
    if ready(&dir) {
        return dir;
    }
    std::fs::create_dir_all(&cache).unwrap();
    let lock = std::fs::File::create(cache.join(format!("{ROOTFS}.lock"))).unwrap();
    let _lock = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| e)
        .expect("lock of the root file system cache");
    if ready(&dir) {
        return dir; // another process built it while this one waited
    }
    // Leftovers of a build that was killed: nobody else builds while the lock is held.
    for e in std::fs::read_dir(&cache).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with(&format!("{ROOTFS}.tmp.")) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    let tmp = cache.join(format!("{ROOTFS}.tmp.{}", std::process::id()));
    let log = cache.join(format!("{ROOTFS}.log"));
    let mirror = std::env::var("MCO_DEBIAN_MIRROR").unwrap_or_else(|_| "http://deb.debian.org/debian".into());
    eprintln!(
        "building the real-host root file system in {} (debootstrap, about a minute; log {})",
        dir.display(),
        log.display()
    );
    let started = Instant::now();
    let status = Command::new("debootstrap")
        .args(["--variant=minbase", "--include=systemd,systemd-sysv,dbus", "bookworm"])
        .arg(&tmp)
        .arg(&mirror)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::from(std::fs::File::options().append(true).open(&log).unwrap()))
        .status()
        .expect("debootstrap runs");
    if !status.success() || !ready(&tmp) {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(20).collect();
        let _ = std::fs::remove_dir_all(&tmp);
        panic!(
            "debootstrap of bookworm from {mirror} failed ({status}); last lines of {}:\n{}",
            log.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    std::fs::rename(&tmp, &dir).unwrap();
    eprintln!("root file system built in {:.0?}", started.elapsed());
    dir
}

/// The boot loop's state, shared with the thread that runs it.
#[derive(Default)]
struct Boots {
    /// Set by [`Host::drop`]: no further boot.
    stop: bool,
    /// The running `systemd-nspawn`'s pid.
    nspawn: Option<u32>,
    /// How many times nspawn was started (boots).
    started: usize,
    /// Each finished nspawn's exit status (133: the host rebooted).
    exits: Vec<Option<i32>>,
}

/// One real host: a root (an overlay over [`rootfs`], or a copy where overlays cannot be
/// mounted) booted by `systemd-nspawn -b --register=no --keep-unit` without a private network,
/// so it shares loopback with the test's server, and booted again each time it reboots. Dropped,
/// it kills the container (its PID 1, hence every process in it), unmounts and removes its root.
pub struct Host {
    pub name: String,
    dir: PathBuf,
    root: PathBuf,
    overlay: bool,
    boots: Arc<Mutex<Boots>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Host {
    /// A host named `name` (its host name; its machine name adds the test's pid) with a fresh
    /// root, not booted.
    pub fn create(name: &str) -> Host {
        let lower = rootfs();
        reap_stale_hosts();
        let dir = hosts_dir().join(format!("{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let root = dir.join("root");
        for d in ["upper", "work", "root"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        let opts = format!(
            "lowerdir={},upperdir={},workdir={}",
            lower.display(),
            dir.join("upper").display(),
            dir.join("work").display()
        );
        let overlay = Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o", &opts])
            .arg(&root)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !overlay {
            // No overlayfs here (e.g. inside an unprivileged container): a plain copy (~2 s).
            let ok = Command::new("cp")
                .args(["-a", "--reflink=auto"])
                .arg(format!("{}/.", lower.display()))
                .arg(&root)
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "copy of {} into {}", lower.display(), root.display());
        }
        let host = Host {
            name: name.into(),
            dir,
            root,
            overlay,
            boots: Arc::default(),
            thread: None,
        };
        // Its own identity: host name and machine id (the cache's are the build machine's).
        host.write("/etc/hostname", format!("{name}\n").as_bytes(), 0o644);
        let id = uuid::Uuid::now_v7().simple().to_string();
        host.write("/etc/machine-id", format!("{id}\n").as_bytes(), 0o444);
        host
    }

    /// The host's root directory as seen from the test (its `/`).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `path` (absolute, inside the host) as seen from the test.
    pub fn path(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    /// Writes `bytes` to `path` inside the host with `mode`, creating its directories.
    pub fn write(&self, path: &str, bytes: &[u8], mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        let p = self.path(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let _ = std::fs::remove_file(&p); // a read-only file (machine-id) is replaced, not opened
        std::fs::File::create(&p).unwrap().write_all(bytes).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// Boots the host, and again each time nspawn exits 133 (a reboot inside), until dropped.
    /// The console goes to `<dir>/console.log`.
    pub fn boot(&mut self) {
        assert!(self.thread.is_none(), "{} is booted once", self.name);
        // The machine name is unique on this machine (nspawn keeps per-name state in /run even
        // with --register=no); the host name is /etc/hostname's.
        let name = format!("{}-{}", self.name, std::process::id());
        let (root, boots) = (self.root.clone(), self.boots.clone());
        let console = self.dir.join("console.log");
        self.thread = Some(std::thread::spawn(move || {
            loop {
                let mut child = {
                    let mut b = boots.lock().unwrap();
                    if b.stop {
                        return;
                    }
                    let out = std::fs::File::options()
                        .create(true)
                        .append(true)
                        .open(&console)
                        .unwrap();
                    let child = Command::new("systemd-nspawn")
                        .args(["-b", "--register=no", "--keep-unit", "--console=read-only", "-q"])
                        .arg(format!("--machine={name}"))
                        .arg("-D")
                        .arg(&root)
                        .stdin(Stdio::null())
                        .stdout(out.try_clone().unwrap())
                        .stderr(out)
                        .spawn()
                        .expect("systemd-nspawn starts");
                    b.nspawn = Some(child.id());
                    b.started += 1;
                    child
                };
                let status = child.wait().expect("systemd-nspawn waited for");
                let mut b = boots.lock().unwrap();
                b.nspawn = None;
                b.exits.push(status.code());
                if status.code() != Some(133) {
                    return; // powered off, killed, or failed to start: no more boots
                }
            }
        }));
    }

    /// How many times the host was booted (nspawn started).
    pub fn boots(&self) -> usize {
        self.boots.lock().unwrap().started
    }

    /// The exit status of each nspawn run that ended (133 for each reboot).
    pub fn exits(&self) -> Vec<Option<i32>> {
        self.boots.lock().unwrap().exits.clone()
    }

    /// The pid (in the test's namespace) of the running container's PID 1.
    pub fn leader(&self) -> Option<i32> {
        let nspawn = self.boots.lock().unwrap().nspawn?;
        children_of(nspawn as i32).into_iter().next()
    }

    /// Waits until the host has booted (`systemctl is-system-running --wait` returns: boot
    /// finished, `running` or `degraded`), deadline `timeout`; the host's state word.
    pub async fn wait_booted(&self, timeout: Duration) -> String {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(leader) = self.leader() {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                // Entering the namespaces races the container's own setup: retry until it answers.
                if let Ok((_, out, _)) = nsenter(leader, &["systemctl", "is-system-running", "--wait"], left).await {
                    let state = out.trim().to_string();
                    if ["running", "degraded"].contains(&state.as_str()) {
                        return state;
                    }
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} did not finish booting within {timeout:?}\n{}",
                self.name,
                self.console_tail(30)
            );
            tokio::time::sleep(Duration::from_millis(50)).await; // poll interval of a deadline wait
        }
    }

    /// Runs `args` inside the host (all its namespaces, through `nsenter`), deadline 60 s:
    /// (success, stdout, stderr).
    pub async fn exec(&self, args: &[&str]) -> (bool, String, String) {
        let leader = self
            .leader()
            .unwrap_or_else(|| panic!("{} is not running (exec {args:?})", self.name));
        nsenter(leader, args, Duration::from_secs(60))
            .await
            .unwrap_or_else(|e| panic!("{}: {args:?}: {e}", self.name))
    }

    /// Powers the host off (`systemctl poweroff` inside: nspawn exits 0 and is not booted
    /// again) and waits for nspawn's exit, deadline `timeout`; its exit status.
    pub async fn power_off(&self, timeout: Duration) -> Option<i32> {
        let before = self.exits().len();
        // The call may be cut by the shutdown it starts: its own result says nothing.
        let _ = self.exec(&["systemctl", "poweroff"]).await;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(exit) = self.exits().get(before) {
                return *exit;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} did not power off within {timeout:?}",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(50)).await; // poll interval of a deadline wait
        }
    }

    /// The host's boot id as its kernel reports it inside (`/proc/sys/kernel/random/boot_id`).
    pub async fn boot_id(&self) -> String {
        let (ok, out, err) = self.exec(&["cat", "/proc/sys/kernel/random/boot_id"]).await;
        assert!(ok, "{}: boot id: {err}", self.name);
        out.trim().to_string()
    }

    /// The journal of `unit` over every boot, read from the host's files (`journalctl
    /// --directory`), its last `lines` lines.
    pub fn journal(&self, unit: &str, lines: usize) -> String {
        let out = Command::new("journalctl")
            .arg(format!("--directory={}", self.path("/var/log/journal").display()))
            .args([
                "--no-pager",
                "-o",
                "short-monotonic",
                "-n",
                &lines.to_string(),
                "-u",
                unit,
            ])
            .output();
        match out {
            Ok(o) => String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr),
            Err(e) => format!("journalctl: {e}"),
        }
    }

    /// The last `lines` lines of the console (every boot's).
    pub fn console_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.dir.join("console.log")).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Stops the boot loop and kills the container: SIGKILL to its PID 1 ends every process of
    /// its PID namespace, then nspawn exits; nspawn itself is killed if it has not within 10 s.
    fn kill(&mut self) {
        let nspawn = {
            let mut b = self.boots.lock().unwrap();
            b.stop = true;
            b.nspawn
        };
        if let Some(pid) = nspawn {
            for leader in children_of(pid as i32) {
                signal(leader, nix::sys::signal::Signal::SIGKILL);
            }
        }
        if let Some(t) = self.thread.take() {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20)); // poll interval of a deadline wait
            }
            if !t.is_finished() {
                if let Some(pid) = nspawn {
                    signal(pid as i32, nix::sys::signal::Signal::SIGKILL);
                }
            }
            let _ = t.join();
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- {}: nspawn started {} times, exits {:?}\n--- journal of mco-daemon.service:\n{}\n--- journal of the reboot unit:\n{}\n--- console:\n{}",
                self.name,
                self.boots(),
                self.exits(),
                self.journal("mco-daemon.service", 80),
                // The transient unit the daemon's reboot runs in (`host::real::REBOOT_UNIT`):
                // why a requested reboot did not happen.
                self.journal("mco-daemon-reboot.service", 30),
                self.console_tail(20)
            );
        }
        self.kill();
        remove_root(&self.dir, self.overlay);
    }
}

/// Unmounts (when an overlay) and removes a host's directory.
fn remove_root(dir: &Path, overlay: bool) {
    let root = dir.join("root");
    if overlay || is_mount_point(&root) {
        let ok = Command::new("umount").arg(&root).status().is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&root).status();
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

fn is_mount_point(p: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let p = p.to_string_lossy();
    mounts.lines().any(|l| l.split(' ').nth(1) == Some(&*p))
}

/// Hosts left behind by a test process that was killed (its pid is gone): their containers
/// killed, roots unmounted and removed.
fn reap_stale_hosts() {
    for e in std::fs::read_dir(hosts_dir()).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        if pid == std::process::id() as i32 || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let root = e.path().join("root");
        for nspawn in processes_with_arg(&root.to_string_lossy()) {
            for leader in children_of(nspawn) {
                signal(leader, nix::sys::signal::Signal::SIGKILL);
            }
            signal(nspawn, nix::sys::signal::Signal::SIGKILL);
        }
        remove_root(&e.path(), false);
    }
}

fn signal(pid: i32, sig: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
}

/// Every process's (pid, parent pid), from `/proc/<pid>/stat`.
fn processes() -> Vec<(i32, i32)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: comm may hold spaces and parentheses.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse().ok());
        if let Some(ppid) = ppid {
            out.push((pid, ppid));
        }
    }
    out
}

fn children_of(parent: i32) -> Vec<i32> {
    processes()
        .into_iter()
        .filter(|(_, pp)| *pp == parent)
        .map(|(p, _)| p)
        .collect()
}

/// The `systemd-nspawn` processes one of whose arguments is `arg`.
fn processes_with_arg(arg: &str) -> Vec<i32> {
    processes()
        .into_iter()
        .filter_map(|(pid, _)| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            let is_nspawn = args.first().is_some_and(|a| a.ends_with(b"systemd-nspawn"));
            (is_nspawn && args.contains(&arg.as_bytes())).then_some(pid)
        })
        .collect()
}

/// `nsenter -t leader -a -- args` with a deadline: (success, stdout, stderr).
async fn nsenter(leader: i32, args: &[&str], timeout: Duration) -> Result<(bool, String, String), String> {
    let run = tokio::process::Command::new("nsenter")
        .args(["-t", &leader.to_string(), "-a", "--"])
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(timeout, run).await {
        Err(_) => Err(format!("no answer within {timeout:?}")),
        Ok(Err(e)) => Err(format!("nsenter: {e}")),
        Ok(Ok(o)) => Ok((
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )),
    }
}
