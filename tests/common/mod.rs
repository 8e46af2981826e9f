//! Test harness: a real server on 127.0.0.1:0 with a temporary data dir, and real `mco daemon`
//! processes on temporary sandbox roots, supervised exactly as `mco up` does.

#![allow(dead_code)]

pub mod daemon;
pub mod etcd;
pub mod kubectl;
pub mod nspawn;
pub mod scripts;

// Re-exported for `use common::*`; a test binary that uses none of them is no warning.
#[allow(unused_imports)]
pub use daemon::TestDaemon;
#[allow(unused_imports)]
pub use kubectl::{have_kubectl, kubeconfig_for, kubectl_as, TokenProxy};

use mco::client::Client;
use mco::model::{Keys, Kind, MachineConfigPool, NodeAnnotations};
use mco::server::{self, RunningServer, ServerConfig};
use mco::state::State;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const GROUP: &str = mco::model::DEFAULT_GROUP;

pub struct Cluster {
    pub server: RunningServer,
    pub data_dir: PathBuf,
    pub client: Client,
    pub nodes: Vec<mco::up::LocalNode>,
    _dir: Option<tempfile::TempDir>,
    stop: CancellationToken,
    supervisors: Vec<JoinHandle<()>>,
}

pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

/// What a test changes of the harness server's configuration ([`ServerConfig`]).
struct Tuning {
    /// The controllers' clock (the system's unless a test moves time itself).
    clock: mco::controller::Clock,
    /// `--drain-hook`.
    drain_hook: Option<String>,
    /// `--node-monitor-grace-period` (the server's default when `None`).
    grace: Option<std::time::Duration>,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            clock: mco::controller::Clock::system(),
            drain_hook: None,
            grace: None,
        }
    }
}

impl Cluster {
    /// A server and `masters + workers` daemons, waiting until every pool is Updated.
    pub async fn start(masters: usize, workers: usize) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let mut c = Cluster::start_in(path, masters, workers).await;
        c._dir = Some(dir);
        c
    }

    /// Like [`Cluster::start`] with the server configured for API group `group`.
    pub async fn start_with_group(group: &str, masters: usize, workers: usize) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let mut c = Cluster::start_full(path, group, masters, workers).await;
        c._dir = Some(dir);
        c
    }

    pub async fn start_in(data_dir: PathBuf, masters: usize, workers: usize) -> Cluster {
        Cluster::start_full(data_dir, GROUP, masters, workers).await
    }

    async fn start_full(data_dir: PathBuf, group: &str, masters: usize, workers: usize) -> Cluster {
        Cluster::start_with_tls(data_dir, group, masters, workers, false).await
    }

    /// Like [`Cluster::start`] serving TLS with a PKI generated under `<data-dir>/pki`; the
    /// daemons and [`Cluster::client`] verify it against its CA.
    pub async fn start_tls(masters: usize, workers: usize) -> Cluster {
        Cluster::start_tls_with_group(GROUP, masters, workers).await
    }

    /// [`Cluster::start_tls`] with the server configured for API group `group`.
    pub async fn start_tls_with_group(group: &str, masters: usize, workers: usize) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let mut c = Cluster::start_with_tls(path, group, masters, workers, true).await;
        c._dir = Some(dir);
        c
    }

    /// [`Cluster::start_tls`] on `data_dir`, keeping a PKI already there (`mco server init`).
    pub async fn start_tls_in(data_dir: PathBuf, masters: usize, workers: usize) -> Cluster {
        Cluster::start_with_tls(data_dir, GROUP, masters, workers, true).await
    }

    /// [`Cluster::start_tls_in`] with no sandbox nodes and the server's node-monitor grace
    /// period `grace` (how long a node lease may go unrenewed before the node is NotReady).
    pub async fn start_tls_in_with_grace(data_dir: PathBuf, grace: std::time::Duration) -> Cluster {
        let tuning = Tuning {
            grace: Some(grace),
            ..Tuning::default()
        };
        Cluster::start_configured(data_dir, GROUP, 0, 0, true, tuning).await
    }

    /// Like [`Cluster::start`] with the controllers on `clock` (a manual one: the test moves
    /// time, [`mco::controller::Clock::set`]).
    pub async fn start_with_clock(masters: usize, workers: usize, clock: mco::controller::Clock) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let tuning = Tuning {
            clock,
            ..Tuning::default()
        };
        let mut c = Cluster::start_configured(path, GROUP, masters, workers, false, tuning).await;
        c._dir = Some(dir);
        c
    }

    /// Like [`Cluster::start`] with `hook` as the server's drain hook (`--drain-hook`, run for
    /// each node the drain controller drains).
    pub async fn start_with_drain_hook(masters: usize, workers: usize, hook: &str) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let tuning = Tuning {
            drain_hook: Some(hook.into()),
            ..Tuning::default()
        };
        let mut c = Cluster::start_configured(path, GROUP, masters, workers, false, tuning).await;
        c._dir = Some(dir);
        c
    }

    async fn start_with_tls(data_dir: PathBuf, group: &str, masters: usize, workers: usize, tls: bool) -> Cluster {
        Cluster::start_configured(data_dir, group, masters, workers, tls, Tuning::default()).await
    }

    async fn start_configured(
        data_dir: PathBuf,
        group: &str,
        masters: usize,
        workers: usize,
        tls: bool,
        tuning: Tuning,
    ) -> Cluster {
        let Tuning {
            clock,
            drain_hook,
            grace,
        } = tuning;
        let pki = mco::tls::Pki::in_data_dir(&data_dir);
        if tls {
            mco::tls::ensure_pki(&pki, &[]).expect("PKI generated");
        }
        let server = server::start(ServerConfig {
            data_dir: data_dir.clone(),
            listen: "127.0.0.1:0".parse().unwrap(),
            group: group.into(),
            drain_hook,
            tls: tls.then(|| pki.serving()),
            clock,
            node_monitor_grace_period: grace.unwrap_or(ServerConfig::default().node_monitor_grace_period),
            ..Default::default()
        })
        .await
        .expect("server starts");
        // Authentication is always on: the harness acts as the admin the server bootstrapped,
        // verifying the server against its CA when it serves TLS.
        let ca_file = tls.then(|| pki.ca_cert());
        let client = server.admin_client("test");
        let nodes = mco::up::local_nodes(masters, workers);
        let stop = CancellationToken::new();
        let mut supervisors = Vec::new();
        for n in &nodes {
            let root = data_dir.join("nodes").join(&n.name);
            std::fs::create_dir_all(&root).unwrap();
            let token_file = mco::api::auth::ensure_node_token(&server.hub, &data_dir, &n.name, &n.labels)
                .await
                .expect("node token issued");
            let process = mco::up::DaemonProcess {
                exe: PathBuf::from(env!("CARGO_BIN_EXE_mco")),
                url: server.url(),
                node: n.clone(),
                root,
                log_dir: Some(data_dir.join("logs")),
                // Instant sandbox reboots keep the suite fast.
                reboot_seconds: 0,
                log_json: false,
                token_file: Some(token_file),
                ca_file: ca_file.clone(),
                extra_args: Vec::new(),
            };
            supervisors.push(tokio::spawn(mco::up::supervise(process, stop.clone())));
        }
        let c = Cluster {
            server,
            data_dir,
            client,
            nodes,
            _dir: None,
            stop,
            supervisors,
        };
        let keys = c.keys();
        let want = masters + workers;
        c.wait_for(
            "every node registered and Done, every pool Updated",
            Duration::from_secs(60),
            |s| {
                s.nodes.len() == want
                    && ["master", "worker"]
                        .iter()
                        .all(|p| s.pools.get(*p).is_some_and(|p| !p.spec.configuration.name.is_empty()))
                    && s.nodes.values().all(|n| {
                        let a = NodeAnnotations::read(n, &keys);
                        let booted = n
                            .status
                            .as_ref()
                            .and_then(|s| s.node_info.as_ref())
                            .is_some_and(|i| !i.boot_id.is_empty());
                        booted
                            && a.state == "Done"
                            && !a.current_config.is_empty()
                            && a.current_config == a.desired_config
                    })
                    && s.pools.values().all(|p| {
                        p.condition_status("Updated") == "True"
                            && p.status.configuration.name == p.spec.configuration.name
                    })
            },
        )
        .await;
        c
    }

    pub fn keys(&self) -> Keys {
        self.server.hub.keys().clone()
    }

    pub fn root(&self, node: &str) -> PathBuf {
        self.data_dir.join("nodes").join(node)
    }

    /// Waits until `f(state)` holds, re-checking on every change; panics with `what` and the
    /// node/pool summary after `timeout`.
    pub async fn wait_for(&self, what: &str, timeout: Duration, f: impl Fn(&State) -> bool) {
        let mut changes = self.server.hub.changes();
        let deadline = tokio::time::Instant::now() + timeout;
        let mut seen = None;
        loop {
            let st = self.server.hub.state();
            if seen.is_none() && f(&st) {
                seen = Some(st.seq);
            }
            // The projection is swapped in just before the published resourceVersion moves:
            // return once reads of the log (`published_seq`) also reach what `f` saw.
            if seen.is_some_and(|seq| self.server.hub.published_seq() >= seq) {
                return;
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                panic!("timed out after {timeout:?} waiting for: {what}\n{}", self.summary());
            }
            let _ = tokio::time::timeout(deadline - now, changes.changed()).await;
        }
    }

    /// A readable dump of pools and nodes for failure messages.
    pub fn summary(&self) -> String {
        let st = self.server.hub.state();
        let keys = self.keys();
        let mut s = String::new();
        for p in st.pools.values() {
            s += &format!(
                "pool {} target={} status={} updated={}/{} conds={:?}\n",
                p.name(),
                p.spec.configuration.name,
                p.status.configuration.name,
                p.status.updated_machine_count,
                p.status.machine_count,
                p.status
                    .conditions
                    .iter()
                    .map(|c| format!("{}={} {}", c.type_, c.status, c.message))
                    .collect::<Vec<_>>()
            );
        }
        for n in st.nodes.values() {
            let a = NodeAnnotations::read(n, &keys);
            s += &format!(
                "node {} desired={} current={} state={} reason={:?} drain={}/{}\n",
                n.metadata.name.as_deref().unwrap_or(""),
                a.desired_config,
                a.current_config,
                a.state,
                a.reason,
                a.desired_drain,
                a.last_applied_drain
            );
        }
        // The last lines of each daemon's log, so a timeout says what the daemons were doing.
        let mut logs: Vec<_> = std::fs::read_dir(self.data_dir.join("logs"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect();
        logs.sort();
        for log in logs {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            s += &format!("--- last lines of {}\n", log.display());
            for l in &lines[lines.len().saturating_sub(25)..] {
                s += l;
                s += "\n";
            }
        }
        s
    }

    pub fn pool(&self, name: &str) -> MachineConfigPool {
        self.server
            .hub
            .state()
            .pools
            .get(name)
            .map(|p| (**p).clone())
            .unwrap_or_else(|| panic!("pool {name} exists"))
    }

    pub fn annotations(&self, node: &str) -> NodeAnnotations {
        NodeAnnotations::read(&self.server.hub.state().nodes[node], &self.keys())
    }

    pub fn boot_id(&self, node: &str) -> String {
        self.server.hub.state().nodes[node]
            .status
            .as_ref()
            .and_then(|s| s.node_info.as_ref())
            .map(|i| i.boot_id.clone())
            .unwrap_or_default()
    }

    /// Applies manifest files through the same code path as `mco apply -f`.
    pub async fn apply(&self, files: &[PathBuf]) -> String {
        let (out, ok) = mco::cli::apply(&self.client, files).await.expect("apply runs");
        assert!(ok, "apply failed:\n{out}");
        out
    }

    /// Waits until `pool` targets a config other than `old` and has rolled it out to every node.
    pub async fn wait_rolled_out(&self, pool: &str, old: &str, timeout: Duration) -> String {
        self.wait_rolled_out_with(pool, old, &[], timeout).await
    }

    /// [`Cluster::wait_rolled_out`] to a render made from (at least) the MachineConfigs `mcs`:
    /// after applying several MachineConfigs one by one, a render of only the first ones may
    /// roll out before the last is rendered.
    pub async fn wait_rolled_out_with(&self, pool: &str, old: &str, mcs: &[&str], timeout: Duration) -> String {
        let keys = self.keys();
        self.wait_for(
            &format!("pool {pool} rolled out past {old} with {mcs:?}"),
            timeout,
            |s| {
                let Some(p) = s.pools.get(pool) else { return false };
                let target = &p.spec.configuration.name;
                target != old
                    && mcs
                        .iter()
                        .all(|mc| p.spec.configuration.source.iter().any(|r| r.name == *mc))
                    && p.status.configuration.name == *target
                    && p.condition_status("Updated") == "True"
                    && s.nodes
                        .values()
                        .all(|n| NodeAnnotations::read(n, &keys).state == "Done")
            },
        )
        .await;
        self.pool(pool).spec.configuration.name
    }

    pub async fn stop(self) {
        self.stop.cancel();
        for s in self.supervisors {
            let _ = s.await;
        }
        self.server.stop().await;
    }
}

/// The worker node names.
pub fn workers(c: &Cluster) -> Vec<String> {
    c.nodes
        .iter()
        .filter(|n| n.name.starts_with("worker"))
        .map(|n| n.name.clone())
        .collect()
}

pub fn mode_of(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

pub fn kind_list(c: &Cluster, kind: Kind) -> usize {
    c.server.hub.state().list_json(kind).len()
}

impl Cluster {
    /// The token file of node `name` (`<data_dir>/tokens/<name>.token`), issuing its node token
    /// recording `labels` (those its daemon registers with, its role among them) when needed,
    /// as `mco up` does.
    pub async fn node_token_file(&self, name: &str, labels: &[(&str, &str)]) -> PathBuf {
        let labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        mco::api::auth::ensure_node_token(&self.server.hub, &self.data_dir, name, &labels)
            .await
            .expect("node token issued")
    }

    /// A plain HTTP client carrying the admin token.
    pub fn http(&self) -> reqwest::Client {
        self.server.admin_http()
    }

    /// The server's `/metrics` text, as the admin scrapes it.
    pub async fn metrics_text(&self) -> String {
        let url = format!("{}/metrics", self.server.url());
        self.http().get(url).send().await.unwrap().text().await.unwrap()
    }

    /// Waits until node `name` is Done on the config its pool targets (a config other than
    /// `old`), with `booted` holding for its Node.
    pub async fn wait_node_done(&self, name: &str, timeout: Duration, booted: impl Fn(&mco::model::Node) -> bool) {
        let keys = self.keys();
        self.wait_for(&format!("{name} Done"), timeout, |s| {
            s.nodes.get(name).is_some_and(|n| {
                let a = NodeAnnotations::read(n, &keys);
                a.state == "Done" && !a.current_config.is_empty() && a.current_config == a.desired_config && booted(n)
            })
        })
        .await;
    }
}

/// The boot id a Node reports (`status.nodeInfo.bootID`, empty when absent).
/// The status and reason of the Node's Ready condition (empty strings when it has none).
pub fn node_ready(n: &mco::model::Node) -> (String, String) {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
        .unwrap_or_default()
}

pub fn node_boot_id(n: &mco::model::Node) -> String {
    n.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.boot_id.clone())
        .unwrap_or_default()
}

/// Expects `result` to be an Invalid (422) naming `field` with a message containing `rule`.
pub fn assert_invalid(
    what: &str,
    result: Result<serde_json::Value, mco::client::ClientError>,
    field: &str,
    rule: &str,
) {
    match result {
        Err(mco::client::ClientError::Status(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{what}: {}", s.message);
            let causes = s.details.map(|d| d.causes).unwrap_or_default();
            assert!(
                causes.iter().any(|c| c.field == field && c.message.contains(rule)),
                "{what}: want {field}: {rule}\ngot {causes:#?}"
            );
            assert!(s.message.contains(field), "{what}: {}", s.message);
        }
        other => panic!("{what}: expected Invalid naming {field}, got {other:?}"),
    }
}

/// A server alone (no daemons) on 127.0.0.1:0 with its data in `dir`, as its defaults have it,
/// once its controllers' first pass is done ([`wait_settled`]).
pub async fn start_server(dir: &Path) -> RunningServer {
    start_server_with(ServerConfig {
        data_dir: dir.to_path_buf(),
        ..Default::default()
    })
    .await
}

/// A server alone started from `cfg` with its listen address on 127.0.0.1:0, once its
/// controllers' first pass is done ([`wait_settled`]).
pub async fn start_server_with(cfg: ServerConfig) -> RunningServer {
    let s = server::start(ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..cfg
    })
    .await
    .expect("server starts");
    wait_settled(&s).await;
    s
}

/// Waits (deadline 20 s) until the built-in pools exist and each points at a rendered config:
/// the template controller and the render controller have run their first pass, so a test
/// reading `worker` or `master` right after a start does not race them. Controllers may still
/// write afterwards (pool status): a test asserting an exact resourceVersion must bracket it
/// between the head before and after, or filter the log by actor.
pub async fn wait_settled(s: &RunningServer) {
    let mut changes = s.hub.changes();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let rendered = |pool: &str| {
            s.hub
                .state()
                .pools
                .get(pool)
                .is_some_and(|p| !p.spec.configuration.name.is_empty())
        };
        if rendered("master") && rendered("worker") {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the built-in pools were not rendered within 20 s of the server's start"
        );
        let _ = tokio::time::timeout(Duration::from_millis(200), changes.changed()).await;
    }
}

/// A TLS server on 127.0.0.1:0 with a fresh PKI under `<dir>/pki` (as `mco up` makes it), no
/// daemons.
pub async fn tls_server(dir: &Path) -> (RunningServer, mco::tls::Pki) {
    let pki = mco::tls::Pki::in_data_dir(dir);
    mco::tls::ensure_pki(&pki, &[]).unwrap();
    let s = server::start(ServerConfig {
        data_dir: dir.to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        tls: Some(pki.serving()),
        ..Default::default()
    })
    .await
    .expect("server starts");
    (s, pki)
}

/// Sends `req` and reads its answer as JSON (panics on a transport error or a non-JSON body).
pub async fn json_of(req: reqwest::RequestBuilder) -> serde_json::Value {
    req.send().await.unwrap().json().await.unwrap()
}

/// Every managed file of a rendered config: node path -> (bytes, mode).
pub fn rendered_files(c: &Cluster, name: &str) -> std::collections::BTreeMap<String, (Vec<u8>, u32)> {
    let mc: mco::model::MachineConfig = c.server.hub.state().machine_configs[name].as_ref().clone();
    let cfg = mco::daemon::apply::ignition_config(&mc).unwrap();
    let mut out: std::collections::BTreeMap<String, (Vec<u8>, u32)> = cfg
        .storage
        .files
        .iter()
        .map(|f| {
            (
                f.path.clone(),
                (
                    mco::ignition::file_contents(f).unwrap(),
                    f.mode.map(|m| m as u32).unwrap_or(0o644),
                ),
            )
        })
        .collect();
    if let Some(keys) = mco::daemon::apply::ssh_keys_contents(&cfg) {
        out.insert(mco::daemon::apply::SSH_KEYS_PATH.to_string(), (keys, 0o600));
    }
    out
}
