//! Daemon crash safety under SIGKILL (issue 12 item 6, the daemon half): a real server, and a
//! real `mco daemon` on a sandbox root run by this test's own supervisor (restarting it as
//! `mco up` does). Each trial changes a MachineConfig of several files (so every managed file
//! changes), then kills the daemon with SIGKILL:
//! - at one to three random moments of the apply (random delays after the change; a later kill
//!   lands in the apply the restarted daemon resumes), or
//! - exactly at a crash-sensitive step, with the `fail` crate's failpoints set through the
//!   `FAILPOINTS` environment variable of the next daemon start (`return` = SIGKILL itself):
//!   after the temp file is written (before fsync), after fsync (before rename), after rename
//!   (before the directory fsync), between files, before `currentconfig`, before and after a
//!   node annotation update, before the reboot.
//!
//! Right after each kill, before the daemon is restarted, every managed file of the old and the
//! new rendered config must hold exactly the old or the new bytes (or be absent where one
//! config does not have it): a partial or empty file is a failure. After each trial the node
//! must converge (Done on the new config) with every managed file's bytes and mode as rendered
//! and no temp file left. The figures are printed:
//!
//! ```sh
//! cargo test --features failpoints --test crash_daemon -- --nocapture        # 6 trials, ~30 s
//! MCO_CRASH_TRIALS=300 cargo test --features failpoints --test crash_daemon -- --nocapture
//! ```
//! (`MCO_CRASH_SEED` fixes the random sequence; the seed used is printed.)

mod common;

use common::*;
use mco::model::Kind;
use serde_json::json;
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const ROLLOUT: Duration = Duration::from_secs(90);
const MC: &str = "99-worker-crash";

/// The daemon's failpoints (`src/host/fs.rs`, `src/daemon/apply.rs`, `src/daemon/agent.rs`).
const FAILPOINTS: &[&str] = &[
    "host::write::before_fsync",
    "host::write::before_rename",
    "host::write::before_dir_fsync",
    "daemon::write::between_files",
    "daemon::write::before_currentconfig",
    "daemon::annotate::before",
    "daemon::annotate::after",
    "daemon::reboot::before",
];

/// A small xorshift generator: no extra dependency, reproducible from a printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What each managed node path may hold at a crash: the old or the new bytes, or absence.
type Allowed = BTreeMap<String, Vec<Option<Vec<u8>>>>;

/// The regular files under a root right after a kill: node path -> bytes (symlinks and other
/// kinds as a marker).
type Snapshot = BTreeMap<String, Vec<u8>>;

#[derive(Default)]
struct Stats {
    /// SIGKILLs sent by the test: at a random moment of an apply, or to an idle daemon to start
    /// one carrying a failpoint.
    random_kills: usize,
    /// Daemons that killed themselves at a failpoint, by failpoint.
    failpoint_kills: BTreeMap<String, usize>,
    /// Managed files checked right after a kill.
    files_checked: usize,
    /// Files found partial, empty or otherwise neither old nor new right after a kill.
    partial: Vec<String>,
    /// Snapshots taken at kills of the current trial, checked once its new render is known.
    pending: Vec<Snapshot>,
}

struct Supervisor {
    kill: tokio::sync::mpsc::UnboundedSender<()>,
    failpoints: Arc<Mutex<Option<String>>>,
    stats: Arc<Mutex<Stats>>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

/// Every file under `root` (not `run`, emptied at each boot), not following links.
fn snapshot(root: &Path) -> Snapshot {
    let mut out = Snapshot::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            let node = format!("/{}", p.strip_prefix(root).unwrap().display());
            if ft.is_dir() {
                if node != "/run" {
                    stack.push(p);
                }
            } else if ft.is_file() {
                out.insert(node, std::fs::read(&p).unwrap_or_default());
            } else {
                out.insert(node, b"<not a regular file>".to_vec());
            }
        }
    }
    out
}

/// Checks a snapshot taken right after a kill against what each managed path may hold.
fn check_after_kill(snap: &Snapshot, allowed: &Allowed, stats: &mut Stats) {
    for (path, ok) in allowed {
        let have = snap.get(path).cloned();
        stats.files_checked += 1;
        if !ok.contains(&have) {
            stats.partial.push(format!(
                "{path}: {} bytes, neither the old nor the new content",
                have.map_or(0, |h| h.len())
            ));
        }
    }
}

impl Supervisor {
    async fn start(c: &Cluster, node: mco::up::LocalNode) -> Supervisor {
        let root = c.root(&node.name);
        std::fs::create_dir_all(&root).unwrap();
        let logs = c.data_dir.join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        // The node's own token (system:node:<name>), as `mco up` issues it.
        let token_file = mco::api::auth::ensure_node_token(&c.server.hub, &c.data_dir, &node.name, &node.labels)
            .await
            .expect("node token issued");
        let (kill, mut kills) = tokio::sync::mpsc::unbounded_channel::<()>();
        let failpoints: Arc<Mutex<Option<String>>> = Arc::default();
        let stats: Arc<Mutex<Stats>> = Arc::default();
        let stop = CancellationToken::new();
        let (fps, sts, stopped, server) = (failpoints.clone(), stats.clone(), stop.clone(), c.server.url());
        let task = tokio::spawn(async move {
            loop {
                let mut cmd = common::daemon::daemon_command(&server, &node, &root, Some(&token_file), &logs);
                let fp = fps.lock().unwrap().take();
                match &fp {
                    Some(fp) => cmd.env("FAILPOINTS", fp),
                    None => cmd.env_remove("FAILPOINTS"),
                };
                let mut child = cmd.spawn().expect("mco daemon starts");
                let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
                let (status, by_us) = tokio::select! {
                    s = child.wait() => (s.unwrap(), false),
                    Some(()) = kills.recv() => {
                        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
                        (child.wait().await.unwrap(), true)
                    }
                    _ = stopped.cancelled() => {
                        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
                        let _ = child.wait().await;
                        return;
                    }
                };
                if status.code() == Some(mco::daemon::REBOOT_EXIT_CODE) {
                    mco::up::empty_run_dir(&root);
                    continue;
                }
                if status.signal() == Some(nix::sys::signal::Signal::SIGKILL as i32) {
                    let mut st = sts.lock().unwrap();
                    if by_us {
                        st.random_kills += 1;
                    } else {
                        let name = fp.as_deref().unwrap_or("?").split('=').next().unwrap().to_string();
                        *st.failpoint_kills.entry(name).or_default() += 1;
                    }
                    st.pending.push(snapshot(&root));
                    continue;
                }
                // another exit (e.g. the server was not reachable yet): start again shortly
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        Supervisor {
            kill,
            failpoints,
            stats,
            stop,
            task,
        }
    }

    async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// The MachineConfig of trial `i`: six files of 1 KiB .. 192 KiB whose bytes all change with `i`.
fn crash_mc(i: usize) -> serde_json::Value {
    use base64::Engine as _;
    let files: Vec<serde_json::Value> = (0..6)
        .map(|f| {
            let size = [1, 4, 16, 64, 128, 192][f] * 1024 + f * 7;
            let line = format!("trial {i} file {f}\n");
            let body: String = line.repeat(size / line.len() + 1);
            let b64 = base64::engine::general_purpose::STANDARD.encode(body.as_bytes());
            json!({"path": format!("/etc/crash/dir{}/file{f}.conf", f % 3), "mode": if f % 2 == 0 { 420 } else { 384 },
                   "contents": {"source": format!("data:;base64,{b64}")}})
        })
        .collect();
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": MC, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": files},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": [format!("ssh-ed25519 AAAA trial-{i}")]}]}}}})
}

/// What a crash between `old` and `new` may leave at each path.
fn allowed_between(old: &BTreeMap<String, (Vec<u8>, u32)>, new: &BTreeMap<String, (Vec<u8>, u32)>) -> Allowed {
    let mut out = Allowed::new();
    for path in old.keys().chain(new.keys()) {
        let mut ok = vec![
            old.get(path).map(|(b, _)| b.clone()),
            new.get(path).map(|(b, _)| b.clone()),
        ];
        ok.dedup();
        out.insert(path.clone(), ok);
    }
    out
}

/// Temp files of the atomic write anywhere under `root`.
fn temp_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(p);
            } else if mco::host::fs::is_temp_name(&e.file_name().to_string_lossy()) {
                out.push(p);
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_apply_never_leaves_a_partial_file() {
    let trials: usize = std::env::var("MCO_CRASH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let seed: u64 = std::env::var("MCO_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("crash trials: {trials}, MCO_CRASH_SEED={seed}");
    let mut rng = Rng(seed);
    // which failpoint the short run starts with varies with the seed; the long run cycles all
    let fp_offset = rng.below(FAILPOINTS.len() as u64) as usize;
    let c = Cluster::start(0, 0).await;
    let node = mco::up::local_nodes(0, 1).remove(0);
    let sup = Supervisor::start(&c, node).await;
    c.wait_node_done("worker-0", ROLLOUT, |_| true).await;
    let root = c.root("worker-0");
    let started = std::time::Instant::now();

    for i in 0..trials {
        let old = c.pool("worker").spec.configuration.name;
        let old_files = rendered_files(&c, &old);
        let use_failpoint = i % 2 == 1;
        if use_failpoint {
            let fp = FAILPOINTS[(fp_offset + i / 2) % FAILPOINTS.len()];
            // how many hits to let pass: anywhere among the render's files for the write path
            // (so kills land among the changed files too), a few for annotations
            let files = old_files.len() as u64;
            let skip = match fp {
                "daemon::write::before_currentconfig" | "daemon::reboot::before" => 0,
                "daemon::annotate::before" | "daemon::annotate::after" => rng.below(4),
                _ => rng.below(files + 4),
            };
            *sup.failpoints.lock().unwrap() = Some(format!("{fp}={skip}*off->return"));
            // the running (idle) daemon is replaced by one carrying the failpoint
            sup.kill.send(()).unwrap();
        }
        // Each trial's change reboots the node (file changes: MCO's default policy).
        let boot = c.boot_id("worker-0");
        let mc = crash_mc(i);
        if i == 0 {
            c.client.create(Kind::MachineConfig, &mc, None).await.unwrap();
        } else {
            let patch = json!({"spec": mc["spec"]});
            c.client
                .merge_patch(Kind::MachineConfig, MC, &patch, false)
                .await
                .unwrap();
        }
        // the render the pool will get, once the controller made it
        c.wait_for("a new render", Duration::from_secs(30), |s| {
            s.pools["worker"].spec.configuration.name != old
        })
        .await;
        let new = c.pool("worker").spec.configuration.name;
        let allowed = allowed_between(&old_files, &rendered_files(&c, &new));
        // one to three SIGKILLs at random moments (one, maybe, after a failpoint's), each
        // landing in the apply or in the resumed apply of the daemon started after the last
        let random = if use_failpoint { rng.below(2) } else { 1 + rng.below(3) };
        for _ in 0..random {
            tokio::time::sleep(Duration::from_millis(rng.below(1500))).await;
            sup.kill.send(()).unwrap();
        }
        let new = c.wait_rolled_out("worker", &old, ROLLOUT).await;
        // converged after a reboot, also when a kill came between the writes and the reboot
        // request (daemon::reboot::before): the boot that owed it asked again
        assert_ne!(c.boot_id("worker-0"), boot, "trial {i}: Done on {new} without a reboot");
        // converged: every managed file as rendered, no temp file left
        for (path, (bytes, mode)) in rendered_files(&c, &new) {
            let real = root.join(path.trim_start_matches('/'));
            assert_eq!(
                std::fs::read(&real).unwrap(),
                bytes,
                "trial {i}: {path} after convergence"
            );
            assert_eq!(mode_of(&real), mode, "trial {i}: mode of {path}");
        }
        assert_eq!(temp_files(&root), Vec::<PathBuf>::new(), "trial {i}: temp files left");
        let mut guard = sup.stats.lock().unwrap();
        let st = &mut *guard;
        for snap in std::mem::take(&mut st.pending) {
            check_after_kill(&snap, &allowed, st);
        }
        assert!(
            st.partial.is_empty(),
            "trial {i}: partial files after a kill: {:?}",
            st.partial
        );
        let fp_kills: usize = st.failpoint_kills.values().sum();
        eprintln!(
            "trial {i} converged at {:.0?}: SIGKILLs so far {} ({} random, {} at failpoints), \
             files checked after kills {}, partial or empty {}",
            started.elapsed(),
            st.random_kills + fp_kills,
            st.random_kills,
            fp_kills,
            st.files_checked,
            st.partial.len()
        );
    }
    let log = std::fs::read_to_string(c.data_dir.join("logs/worker-0.log")).unwrap_or_default();
    let resumed = log
        .matches("an update was interrupted while writing; resuming it")
        .count();
    let st = std::mem::take(&mut *sup.stats.lock().unwrap());
    let fp_kills: usize = st.failpoint_kills.values().sum();
    println!(
        "daemon crash trials: {trials}; SIGKILLs: {} ({} at random moments, {} at failpoints {:?}); \
         managed files checked right after a kill: {}; partial or empty files: {}; \
         updates resumed after a kill mid-write: {resumed}; elapsed {:.0?}",
        st.random_kills + fp_kills,
        st.random_kills,
        fp_kills,
        st.failpoint_kills,
        st.files_checked,
        st.partial.len(),
        started.elapsed()
    );
    assert!(st.random_kills + fp_kills >= trials / 2, "too few kills landed");
    sup.stop().await;
    c.stop().await;
}
