//! The config drift monitor: one inotify watcher over the parents of every managed path.
//!
//! Owns watching (notify's `RecommendedWatcher`, bridged to tokio by an unbounded channel in its
//! callback) and the per-path re-check of what changed, reporting transitions as [`DriftReport`]s.
//! MCO: `pkg/daemon/config_drift_monitor.go` (mco-facts 5), with DESIGN.md section 5's changes:
//! only the managed path an event names is re-checked (everything on a `Rescan`, i.e. a kernel
//! queue overflow), SSH keys are covered, and a restored path reports [`DriftReport::Clean`].
//! It must not write to the node nor talk to the API: the agent decides what a drift means, and
//! stops the monitor around its own writes (as MCO does) so they are never reported.
//!
//! Parent directories are watched, not files: an atomic rename drops a watch on the file itself
//! (`reference/deps.md` 2.4). A missing parent is covered by its nearest existing ancestor.

use super::validate::ManagedSet;
use crate::host::Host;
use notify::{EventKind, RecursiveMode, Watcher};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A change in the drift status of the node, sent by the monitor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriftReport {
    /// Managed paths no longer match the config: `path` is the first of them (config order),
    /// `message` names them all ([`summarize`] of MCO's validation texts, e.g. `content mismatch
    /// for file "/etc/foo"`). Sent whenever the drifted paths or their messages change.
    Drift {
        path: String,
        message: String,
        /// The paths that started drifting (or changed how) with this report, each with its
        /// message: each is one drift detection.
        newly: Vec<(String, String)>,
        /// Every drifted path with its message, in config order (a DriftPolicy decides per
        /// path which of them degrade the node).
        failing: Vec<(String, String)>,
    },
    /// Every managed path matches again (also sent once at start when nothing drifted).
    Clean,
}

/// A running drift monitor. Dropping it stops it too, [`DriftMonitor::stop`] also waits for it.
#[derive(Debug)]
pub struct DriftMonitor {
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl DriftMonitor {
    /// Starts watching the paths of `set` on `host`, after one full check whose result is sent
    /// first (a [`DriftReport::Drift`] for the first failing path, or [`DriftReport::Clean`]).
    /// Must be called inside a tokio runtime. Errors: the watcher cannot be created (e.g. the
    /// inotify instance limit, 128 per user by default) or a directory cannot be watched.
    pub fn start(
        host: Arc<dyn Host>,
        set: impl Into<Arc<ManagedSet>>,
        reports: mpsc::UnboundedSender<DriftReport>,
    ) -> Result<DriftMonitor, String> {
        let (tx, rx) = mpsc::unbounded_channel();
        let watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
            if !ev.as_ref().is_ok_and(is_access) {
                let _ = tx.send(ev);
            }
        })
        .map_err(|e| format!("failed to start the config drift monitor: {e}"))?;
        let mut state = State {
            host,
            set: set.into(),
            watcher,
            watched: BTreeMap::new(),
            failing: BTreeMap::new(),
            reports,
        };
        state.ensure_watches()?;
        // The full check reports nothing itself: the initial report below is the one report of
        // what was found (a drift already present was counted twice, once by each).
        state.check_all();
        state.initial_report();
        let cancel = CancellationToken::new();
        let task = tokio::spawn(state.run(rx, cancel.clone()));
        tracing::info!("config drift monitor started");
        Ok(DriftMonitor { cancel, task })
    }

    /// Stops the monitor and waits until its watcher is closed: no report is sent afterwards.
    pub async fn stop(mut self) {
        self.cancel.cancel();
        let _ = (&mut self.task).await;
    }
}

impl Drop for DriftMonitor {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// The agent's side of drift: the monitor of the config the node is settled on, the latest
/// drift message, and whether the server's `mcd_config_drift` for the node may still hold a
/// detection's time (true from the start, since a previous run of the daemon may have left one,
/// and after each detection; the next clean report clears it, as MCO's `initConfigDriftMetric`
/// at each drift monitor start, `pkg/daemon/daemon.go`).
pub(super) struct DriftWatch {
    monitor: Option<DriftMonitor>,
    /// The managed set the monitor checks (what a Revert writes back and a diff compares to).
    pub(super) set: Option<Arc<ManagedSet>>,
    /// Paths whose Revert failed: they degrade the node until they match again.
    pub(super) revert_failed: BTreeSet<String>,
    reports: mpsc::UnboundedSender<DriftReport>,
    /// The latest drift message (`None` when clean or not watching).
    pub(super) message: Option<String>,
    metric_set: bool,
}

impl DriftWatch {
    /// Not watching yet; the monitor's reports will go to `reports`.
    pub(super) fn new(reports: mpsc::UnboundedSender<DriftReport>) -> DriftWatch {
        DriftWatch {
            monitor: None,
            set: None,
            revert_failed: BTreeSet::new(),
            reports,
            message: None,
            metric_set: true,
        }
    }

    /// Watches `settled` (the config of an Idle or Booting node) unless already watching, and
    /// stops watching when there is none. A monitor that cannot start is logged, not fatal.
    pub(super) async fn sync(&mut self, host: &Arc<dyn Host>, settled: Option<&super::phase::Held>) {
        let Some(current) = settled else {
            return self.stop().await;
        };
        if self.monitor.is_some() {
            return;
        }
        let started = current
            .load()
            .and_then(|mc| ManagedSet::from_config(&**host, &mc))
            .map(Arc::new)
            .and_then(|set| DriftMonitor::start(host.clone(), set.clone(), self.reports.clone()).map(|m| (m, set)));
        match started {
            Ok((m, set)) => {
                self.set = Some(set);
                tracing::info!(config = current.name(), "config drift monitor watching");
                self.monitor = Some(m);
                super::release_freed_memory();
            }
            Err(e) => tracing::error!(error = %e, "config drift monitor not started"),
        }
    }

    /// Stops the monitor (waiting for it) and forgets the drift: the agent is about to write.
    pub(super) async fn stop(&mut self) {
        if let Some(m) = self.monitor.take() {
            m.stop().await;
        }
        self.set = None;
        self.revert_failed.clear();
        self.message = None;
    }

    /// Records the degrading drift message (`None`: no drifted path degrades the node; the
    /// caller sends one `Drift` report per newly drifted path, with its record), and through
    /// `metric` one `DriftResolved` at the first clean report after a detection (or after the
    /// start).
    pub(super) fn record(
        &mut self,
        report: &DriftReport,
        degrading: Option<String>,
        metric: impl Fn(crate::metrics::ReportKind, &str),
    ) {
        match report {
            DriftReport::Drift { newly, .. } => {
                self.metric_set |= !newly.is_empty();
                self.message = degrading;
            }
            DriftReport::Clean => {
                self.message = None;
                self.revert_failed.clear();
                if std::mem::take(&mut self.metric_set) {
                    metric(crate::metrics::ReportKind::DriftResolved, "");
                }
            }
        }
    }
}

/// An access (notify watches `IN_OPEN` and `IN_CLOSE_NOWRITE`): opening or reading a file
/// changes neither content nor mode. Dropped by the watcher's callback before it is queued:
/// the monitor's own reads (1,000 files at each full check) would otherwise queue thousands of
/// events per check, feed the monitor itself and hold their batch's memory.
fn is_access(ev: &notify::Event) -> bool {
    matches!(ev.kind, EventKind::Access(_)) && !ev.need_rescan()
}

/// How many drifted paths a reason names before it says how many more there are.
pub const NAMED_DRIFTS: usize = 3;

/// The node reason for several drifted paths: the first [`NAMED_DRIFTS`] validation messages
/// (each names its path) joined by `; `, then `; and N more drifted paths`. One message is
/// returned as it is, so a single drift reads exactly as MCO's (mco-facts 5). MCO stops at the
/// first mismatch; naming them all is mco's deliberate difference (README "Differences").
pub fn summarize(messages: &[&str]) -> String {
    let mut out = messages
        .iter()
        .take(NAMED_DRIFTS)
        .copied()
        .collect::<Vec<_>>()
        .join("; ");
    if messages.len() > NAMED_DRIFTS {
        let more = messages.len() - NAMED_DRIFTS;
        out.push_str(&format!(
            "; and {more} more drifted path{}",
            if more == 1 { "" } else { "s" }
        ));
    }
    out
}

struct State {
    host: Arc<dyn Host>,
    set: Arc<ManagedSet>,
    watcher: notify::RecommendedWatcher,
    /// Watched real directories, each with the node directories that resolve to it (one real
    /// directory may be reached through a symlinked parent inside the root).
    watched: BTreeMap<PathBuf, BTreeSet<String>>,
    /// Failing node paths with their message.
    failing: BTreeMap<String, String>,
    reports: mpsc::UnboundedSender<DriftReport>,
}

impl State {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<notify::Result<notify::Event>>, cancel: CancellationToken) {
        loop {
            let first = tokio::select! {
                _ = cancel.cancelled() => break,
                ev = rx.recv() => match ev { Some(ev) => ev, None => break },
            };
            let mut batch = vec![first];
            while let Ok(ev) = rx.try_recv() {
                batch.push(ev);
            }
            self.handle(batch);
        }
        tracing::info!("config drift monitor stopped");
    }

    fn handle(&mut self, batch: Vec<notify::Result<notify::Event>>) {
        let mut touched: BTreeSet<String> = BTreeSet::new();
        let mut rescan = false;
        let mut structure_changed = false;
        for ev in batch {
            match ev {
                Ok(ev) => {
                    rescan |= ev.need_rescan();
                    structure_changed |= matches!(
                        ev.kind,
                        EventKind::Remove(_)
                            | EventKind::Create(_)
                            | EventKind::Modify(notify::event::ModifyKind::Name(_))
                    );
                    for p in &ev.paths {
                        touched.extend(self.managed_under(p));
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "drift watcher error, re-checking everything");
                    rescan = true;
                }
            }
        }
        if structure_changed || rescan {
            if let Err(e) = self.ensure_watches() {
                tracing::warn!(error = %e, "drift monitor could not re-watch a directory");
            }
        }
        if rescan {
            self.recheck(None);
        } else if !touched.is_empty() {
            self.recheck(Some(touched));
        }
    }

    /// Managed node paths equal to, or under, the real path `p` (an entry of a watched
    /// directory, or a watched directory itself), through every node directory that resolves
    /// to the watched one.
    fn managed_under(&self, p: &Path) -> Vec<String> {
        let mut nodes: Vec<String> = Vec::new();
        if let Some(dirs) = self.watched.get(p) {
            nodes.extend(dirs.iter().cloned());
        }
        if let (Some(parent), Some(name)) = (p.parent(), p.file_name()) {
            if let Some(dirs) = self.watched.get(parent) {
                let name = name.to_string_lossy();
                nodes.extend(dirs.iter().map(|d| format!("{}/{name}", d.trim_end_matches('/'))));
            }
        }
        let mut out = Vec::new();
        for node in nodes {
            if self.set.contains(&node) {
                out.push(node.clone());
            }
            let prefix = format!("{}/", node.trim_end_matches('/'));
            out.extend(self.set.paths().filter(|m| m.starts_with(&prefix)).map(str::to_string));
        }
        out.sort();
        out.dedup();
        out
    }

    /// Re-checks `paths` (all when `None`) and reports the transition, if any: a new drift
    /// summary whenever the set of drifted paths or their messages changed (so the reason grows
    /// and shrinks with them), Clean when the last one is restored.
    fn recheck(&mut self, paths: Option<BTreeSet<String>>) {
        let paths: Vec<String> = match paths {
            Some(p) => p.into_iter().collect(),
            None => self.set.paths().map(str::to_string).collect(),
        };
        let before = self.summary();
        let mut newly = Vec::new();
        for p in paths {
            match self.set.check_path(&*self.host, &p) {
                Ok(()) => {
                    self.failing.remove(&p);
                }
                Err(msg) => {
                    if self.failing.get(&p) != Some(&msg) {
                        newly.push((p.clone(), msg.clone()));
                    }
                    self.failing.insert(p, msg);
                }
            }
        }
        let after = self.summary();
        if after == before {
            return;
        }
        match after {
            Some((path, message)) => {
                tracing::warn!(%path, %message, "config drift detected");
                let failing = self.failing_in_order();
                let _ = self.reports.send(DriftReport::Drift {
                    path,
                    message,
                    newly,
                    failing,
                });
            }
            None => {
                tracing::info!("config drift resolved");
                let _ = self.reports.send(DriftReport::Clean);
            }
        }
    }

    /// Checks every managed path, recording what fails, without reporting.
    fn check_all(&mut self) {
        let paths: Vec<String> = self.set.paths().map(str::to_string).collect();
        for p in paths {
            match self.set.check_path(&*self.host, &p) {
                Ok(()) => self.failing.remove(&p),
                Err(msg) => self.failing.insert(p, msg),
            };
        }
    }

    /// The first drifted path (in config order) and a message naming every drifted path:
    /// [`summarize`] of their messages.
    fn summary(&self) -> Option<(String, String)> {
        let failing: Vec<(&str, &str)> = self
            .set
            .paths()
            .filter_map(|p| self.failing.get(p).map(|m| (p, m.as_str())))
            .collect();
        let first = failing.first()?.0.to_string();
        Some((first, summarize(&failing.iter().map(|(_, m)| *m).collect::<Vec<_>>())))
    }

    /// Every failing path with its message, in config order.
    fn failing_in_order(&self) -> Vec<(String, String)> {
        self.set
            .paths()
            .filter_map(|p| self.failing.get(p).map(|m| (p.to_string(), m.clone())))
            .collect()
    }

    fn initial_report(&self) {
        let report = match self.summary() {
            Some((path, message)) => DriftReport::Drift {
                path,
                message,
                newly: self.failing_in_order(),
                failing: self.failing_in_order(),
            },
            None => DriftReport::Clean,
        };
        let _ = self.reports.send(report);
    }

    /// Watches, for every managed path, the real directory of each of its ancestors that
    /// resolves under the host's confinement (beneath a sandbox root: a parent symlink leading
    /// outside is never watched nor read through), up to the root: the parent sees the file
    /// change, and every ancestor sees a directory on the path renamed, removed or swapped for
    /// a link (a watch follows the moved directory, so the parent of each path component is
    /// the one that sees the swap); forgets watches on directories no longer wanted or gone.
    fn ensure_watches(&mut self) -> Result<(), String> {
        let mut wanted: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
        let node_fs = self.host.node_fs();
        for p in self.set.paths() {
            let mut dir = crate::host::parent_dir(p).map(str::to_string);
            while let Some(d) = dir {
                if let Some(real) = node_fs.real_dir(&d) {
                    let fresh = wanted.entry(real).or_default().insert(d.clone());
                    if !fresh {
                        // this ancestor and those above it are already wanted
                        break;
                    }
                }
                dir = crate::host::parent_dir(&d).map(str::to_string);
            }
        }
        let gone: Vec<PathBuf> = self
            .watched
            .keys()
            .filter(|d| !wanted.contains_key(*d) || !d.is_dir())
            .cloned()
            .collect();
        for d in gone {
            let _ = self.watcher.unwatch(&d);
            self.watched.remove(&d);
        }
        for (d, nodes) in wanted {
            if !self.watched.contains_key(&d) {
                self.watcher
                    .watch(&d, RecursiveMode::NonRecursive)
                    .map_err(|e| format!("failed to watch {}: {e}", d.display()))?;
            }
            self.watched.insert(d, nodes);
        }
        Ok(())
    }
}

#[cfg(test)]
mod summary {
    use super::summarize;

    #[test]
    fn reasons_name_the_first_few_and_count_the_rest() {
        assert_eq!(summarize(&["a"]), "a");
        assert_eq!(summarize(&["a", "b"]), "a; b");
        assert_eq!(summarize(&["a", "b", "c", "d"]), "a; b; c; and 1 more drifted path");
        assert_eq!(
            summarize(&["a", "b", "c", "d", "e"]),
            "a; b; c; and 2 more drifted paths"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::apply::{write_config, WriteMode};
    use crate::daemon::test_support::{mc, sandbox};
    use serde_json::json;
    use std::os::unix::fs::PermissionsExt;
    use std::time::Duration;

    async fn next(rx: &mut mpsc::UnboundedReceiver<DriftReport>) -> DriftReport {
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("no drift report within 5 s")
            .expect("monitor channel closed")
    }

    #[tokio::test]
    async fn reports_content_and_mode_drift_and_recovery() {
        let (_d, host) = sandbox();
        let cfg = mc(
            "rendered-worker-1",
            json!({"ignition": {"version": "3.4.0"},
                   "storage": {"files": [{"path": "/etc/drift/a.conf", "mode": 420, "contents": {"source": "data:,a"}}]},
                   "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA k"]}]}}),
        );
        write_config(&host, WriteMode::FirstBoot, &cfg).unwrap();
        let host: Arc<dyn Host> = Arc::new(host);
        let set = ManagedSet::from_config(&*host, &cfg).unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let monitor = DriftMonitor::start(host.clone(), set, tx).unwrap();
        assert_eq!(next(&mut rx).await, DriftReport::Clean);

        let real = host.resolve("/etc/drift/a.conf").unwrap();
        std::fs::write(&real, "b").unwrap();
        let drifted = vec![(
            "/etc/drift/a.conf".to_string(),
            r#"content mismatch for file "/etc/drift/a.conf""#.to_string(),
        )];
        let want = DriftReport::Drift {
            path: "/etc/drift/a.conf".into(),
            message: r#"content mismatch for file "/etc/drift/a.conf""#.into(),
            newly: drifted.clone(),
            failing: drifted,
        };
        assert_eq!(next(&mut rx).await, want);

        std::fs::write(&real, "a").unwrap();
        assert_eq!(next(&mut rx).await, DriftReport::Clean);

        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
        match next(&mut rx).await {
            DriftReport::Drift { message, .. } => {
                assert!(message.starts_with("mode mismatch for file: "), "{message}")
            }
            other => panic!("expected drift, got {other:?}"),
        }
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(next(&mut rx).await, DriftReport::Clean);

        // an atomic replace (rename over the file) is seen through the parent watch
        let keys = host.resolve(crate::daemon::apply::SSH_KEYS_PATH).unwrap();
        let tmp = keys.with_file_name("tmp");
        std::fs::write(&tmp, "ssh-rsa intruder\n").unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::rename(&tmp, &keys).unwrap();
        match next(&mut rx).await {
            DriftReport::Drift { path, .. } => {
                assert_eq!(path, crate::daemon::apply::SSH_KEYS_PATH)
            }
            other => panic!("expected drift, got {other:?}"),
        }
        monitor.stop().await;
        // stopped: no more reports
        std::fs::write(&real, "c").unwrap();
        assert!(rx.recv().await.is_none());
    }

    /// A parent directory swapped for a symlink leading outside the root (the watched directory
    /// moved away, a link planted in its place) is drift at once, refused by the confinement,
    /// even when what the link leads to holds the very same bytes.
    #[tokio::test]
    async fn a_parent_swapped_for_a_link_outside_is_drift() {
        let (_dir, host) = sandbox();
        let elsewhere = tempfile::tempdir().unwrap();
        let cfg = mc(
            "rendered-worker-1",
            json!({"ignition": {"version": "3.4.0"},
                   "storage": {"files": [{"path": "/etc/drift/a.conf", "mode": 420, "contents": {"source": "data:,a"}}]}}),
        );
        write_config(&host, WriteMode::FirstBoot, &cfg).unwrap();
        let host: Arc<dyn Host> = Arc::new(host);
        let set = ManagedSet::from_config(&*host, &cfg).unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let monitor = DriftMonitor::start(host.clone(), set, tx).unwrap();
        assert_eq!(next(&mut rx).await, DriftReport::Clean);

        let etc = host.resolve("/etc").unwrap();
        let outside = elsewhere.path().join("outside");
        std::fs::create_dir_all(outside.join("drift")).unwrap();
        std::fs::write(outside.join("drift/a.conf"), "a").unwrap();
        std::fs::rename(&etc, etc.with_file_name("etc.real")).unwrap();
        std::os::unix::fs::symlink(&outside, &etc).unwrap();
        match next(&mut rx).await {
            DriftReport::Drift { path, message, .. } => {
                assert_eq!(path, "/etc/drift/a.conf");
                assert!(message.contains("leads outside the node root"), "{message}");
            }
            other => panic!("expected drift, got {other:?}"),
        }
        // The plant removed and the directory back: clean again.
        std::fs::remove_file(&etc).unwrap();
        std::fs::rename(etc.with_file_name("etc.real"), &etc).unwrap();
        assert_eq!(next(&mut rx).await, DriftReport::Clean);
        monitor.stop().await;
    }

    /// A drift already there when the monitor starts is reported once, by the initial report
    /// (the daemon counts each report's `newly` in `mco_drift_detections_total`).
    #[tokio::test]
    async fn drift_present_at_start_is_reported_once() {
        let (_d, host) = sandbox();
        let cfg = mc(
            "rendered-worker-1",
            json!({"ignition": {"version": "3.4.0"},
                   "storage": {"files": [{"path": "/etc/drift/a.conf", "mode": 420, "contents": {"source": "data:,a"}}]}}),
        );
        write_config(&host, WriteMode::FirstBoot, &cfg).unwrap();
        let host: Arc<dyn Host> = Arc::new(host);
        let real = host.resolve("/etc/drift/a.conf").unwrap();
        std::fs::write(&real, "b").unwrap();
        let set = ManagedSet::from_config(&*host, &cfg).unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let monitor = DriftMonitor::start(host.clone(), set, tx).unwrap();
        let message = r#"content mismatch for file "/etc/drift/a.conf""#.to_string();
        let drifted = vec![("/etc/drift/a.conf".to_string(), message.clone())];
        let want = DriftReport::Drift {
            path: "/etc/drift/a.conf".into(),
            message: message.clone(),
            newly: drifted.clone(),
            failing: drifted,
        };
        assert_eq!(next(&mut rx).await, want);
        monitor.stop().await;
        assert!(rx.recv().await.is_none(), "one report only");
    }
}

#[cfg(test)]
mod relative_root {
    use super::*;
    use crate::daemon::apply::{write_config, WriteMode};
    use crate::daemon::test_support::mc;
    use crate::host::SandboxHost;
    use serde_json::json;
    use std::io::Write;
    use std::time::Duration;

    /// `mco up --data-dir ./mco-data` hands daemons a relative root: drift must still be seen,
    /// and an append (`echo x >> file`) is drift as much as a rewrite.
    #[tokio::test]
    async fn appends_under_a_relative_root_are_drift() {
        let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
        std::fs::create_dir_all(&base).unwrap();
        let dir = tempfile::tempdir_in(&base).unwrap();
        let cwd = std::env::current_dir().unwrap();
        let rel = dir
            .path()
            .strip_prefix(&cwd)
            .expect("tests run from the package directory")
            .to_path_buf();
        assert!(rel.is_relative());
        let host = SandboxHost::init(&rel).unwrap();
        let cfg = mc(
            "rendered-worker-1",
            json!({"ignition": {"version": "3.4.0"},
                   "storage": {"files": [{"path": "/etc/chrony.conf", "mode": 420, "contents": {"source": "data:,server%20a%0A"}}]}}),
        );
        write_config(&host, WriteMode::FirstBoot, &cfg).unwrap();
        let host: Arc<dyn Host> = Arc::new(host);
        let set = ManagedSet::from_config(&*host, &cfg).unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let monitor = DriftMonitor::start(host.clone(), set, tx).unwrap();
        let wait = Duration::from_secs(5);
        let first = tokio::time::timeout(wait, rx.recv())
            .await
            .expect("a report within 5 s");
        assert_eq!(first, Some(DriftReport::Clean));
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(rel.join("etc/chrony.conf"))
            .unwrap();
        f.write_all(b"server evil\n").unwrap();
        drop(f);
        let drift = tokio::time::timeout(wait, rx.recv())
            .await
            .expect("a drift report within 5 s");
        assert!(matches!(drift, Some(DriftReport::Drift { .. })), "{drift:?}");
        monitor.stop().await;
    }
}
