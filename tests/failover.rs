//! Clients and nodes fail over between the servers of a `--server` list (README "The event log
//! on etcd"): real `mco server` processes sharing one real etcd member on loopback, one writer
//! listening and one standby, the CLI and a real `mco daemon` given both addresses. A command
//! issued while the writer is killed succeeds once the standby listens; the daemon keeps
//! reporting, finishes the rollout under way at the kill (followed by `apply --wait`) and
//! applies a config created after the failover; a watch held across the failover sees every
//! change of its object once.

mod common;

use common::etcd::{have_etcd, Etcd};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};

/// A loopback port nothing listens on now (the listener is dropped): the address of a server
/// given in a list before it listens, or of a dead one.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Server {
    child: tokio::process::Child,
    url: String,
    /// Its first stdout line: `mco server listening on URL` once it holds the lease.
    listening: tokio::task::JoinHandle<Option<String>>,
    data: PathBuf,
}

/// Starts `mco server` on `etcd` named `name` listening (once it writes) on its own port.
fn spawn(etcd: &Etcd, data: &Path, name: &str) -> Server {
    std::fs::create_dir_all(data).unwrap();
    let port = free_port();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"))
        .args(["server", "--data-dir", data.to_str().unwrap()])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--store", &etcd.url(), "--name", name, "--etcd-lease-ttl", "2"])
        .env("RUST_LOG", "info")
        .env_remove("FAILPOINTS")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(data.join("server.stderr")).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let listening = tokio::spawn(async move {
        let line = lines.next_line().await.ok().flatten()?;
        // Keep reading so that the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        line.strip_prefix("mco server listening on ").map(str::to_string)
    });
    Server {
        child,
        url: format!("http://127.0.0.1:{port}"),
        listening,
        data: data.to_path_buf(),
    }
}

impl Server {
    /// Waits until it listens (it holds the writer lease).
    async fn listens(&mut self, within: Duration) {
        match tokio::time::timeout(within, &mut self.listening).await {
            Ok(Ok(Some(url))) => assert_eq!(url, self.url),
            other => panic!(
                "{} did not listen within {within:?} ({other:?}); its log:\n{}",
                self.url,
                std::fs::read_to_string(self.data.join("server.stderr")).unwrap_or_default()
            ),
        }
    }

    /// SIGKILL: no clean stop, its lease is left to expire.
    async fn kill(&mut self) {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
    }
}

/// A writer and a standby on one etcd, the writer listening; and the admin token.
async fn pair(etcd: &Etcd, dir: &Path) -> (Server, Server, PathBuf) {
    let mut a = spawn(etcd, &dir.join("a"), "server-a");
    a.listens(Duration::from_secs(30)).await;
    let token = dir.join("a").join(mco::credentials::ADMIN_TOKEN_FILE);
    assert!(token.is_file(), "the first server wrote the admin token");
    let b = spawn(etcd, &dir.join("b"), "server-b");
    (a, b, token)
}

/// `mco ARGS` with `--server SERVERS` and the admin token in `token`.
fn mco(servers: &str, token: &Path, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"));
    cmd.args(args)
        .args(["--server", servers])
        .env("MCO_TOKEN_FILE", token)
        .env_remove("MCO_SERVER")
        .env_remove("MCO_TOKEN")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

fn mc(name: &str, path: &str) -> Value {
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": [{
            "path": path, "mode": 420,
            "contents": {"source": "data:,failover%0A"}}]}}}})
}

/// A dead address before a live one: the command goes to the live one. Every server of the
/// list is checked, and a token is never sent in clear to any of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_skips_a_dead_server_of_the_list() {
    let dir = tempfile::tempdir().unwrap();
    let s = common::start_server(dir.path()).await;
    let token = dir.path().join(mco::credentials::ADMIN_TOKEN_FILE);
    let dead = format!("http://127.0.0.1:{}", free_port());
    let list = format!("{dead},{}", s.url());
    let out = mco(&list, &token, &["get", "mc"]).output().await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("00-worker"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // Each element is checked: a scheme mco does not speak, a token over plain HTTP to an
    // address other than loopback.
    let out = mco(&format!("{},ftp://127.0.0.1:1", s.url()), &token, &["get", "mc"])
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("ftp://127.0.0.1:1: unsupported scheme"),
        "{err}"
    );
    let out = mco(&format!("{},http://192.0.2.7:7443", s.url()), &token, &["get", "mc"])
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("http://192.0.2.7:7443: refusing to send a token"),
        "{err}"
    );

    // No server of the list answers: the error names every one tried.
    let dead2 = format!("http://127.0.0.1:{}", free_port());
    let client = mco::client::Client::new(&format!("{dead},{dead2}"), "machineconfiguration.openshift.io", "t")
        .with_failover_bound(Duration::from_millis(600));
    let started = Instant::now();
    let e = client.list(mco::model::Kind::MachineConfig).await.unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!("cannot reach the mco server at {dead}, {dead2}")),
        "{msg}"
    );
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    // A Status answer is returned as it is, never failed over.
    let client = mco::client::Client::new(&format!("{},{dead}", s.url()), "machineconfiguration.openshift.io", "t");
    let e = client
        .get::<Value>(mco::model::Kind::MachineConfig, "nope")
        .await
        .unwrap_err();
    assert!(
        matches!(e, mco::client::ClientError::Status(ref st) if st.code == 401 || st.code == 404),
        "{e}"
    );
    assert_eq!(client.server(), s.url());
    s.stop().await;
}

/// The writer is killed (SIGKILL) and `mco apply` is issued at once with both servers: it
/// succeeds once the standby takes over (lease 2 s), within the client's failover bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_issued_as_the_writer_is_killed_succeeds() {
    if !have_etcd("a_command_issued_as_the_writer_is_killed_succeeds") {
        return;
    }
    let etcd = Etcd::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (mut a, mut b, token) = pair(&etcd, dir.path()).await;
    let list = format!("{},{}", a.url, b.url);
    let manifest = dir.path().join("mc.yaml");
    std::fs::write(&manifest, mc("99-worker-failover", "/etc/failover").to_string()).unwrap();

    a.kill().await;
    let killed = Instant::now();
    let out = mco(&list, &token, &["apply", "-f", manifest.to_str().unwrap()])
        .output()
        .await
        .unwrap();
    let took = killed.elapsed();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "machineconfig.machineconfiguration.openshift.io/99-worker-failover created\n"
    );
    eprintln!("mco apply issued at the writer's SIGKILL answered after {took:?} (lease 2 s)");
    assert!(took < mco::client::FAILOVER_BOUND, "{took:?}");
    b.listens(Duration::from_secs(1)).await;
    let out = mco(&b.url, &token, &["get", "mc", "99-worker-failover", "-o", "name"])
        .output()
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "machineconfig.machineconfiguration.openshift.io/99-worker-failover\n"
    );
}

/// A real `mco daemon` on a sandbox root given both servers keeps reporting across the writer's
/// SIGKILL, finishes the rollout under way (`apply --wait` follows it to the end) and applies a
/// MachineConfig created after it; `mco get -w` on the pool, held across
/// the failover, prints every change of the pool once, in order, with no gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_and_a_watch_follow_the_writer_across_a_failover() {
    if !have_etcd("a_daemon_and_a_watch_follow_the_writer_across_a_failover") {
        return;
    }
    let etcd = Etcd::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (mut a, mut b, token) = pair(&etcd, dir.path()).await;
    let list = format!("{},{}", a.url, b.url);
    let secret = mco::credentials::read_secret_file(&token).unwrap();
    let client = mco::client::Client::connect_with(&list, "test", Some(secret), None)
        .await
        .unwrap();
    let root = dir.path().join("nodes").join("worker-0");
    let node = mco::up::LocalNode {
        name: "worker-0".into(),
        labels: [("node-role.kubernetes.io/worker".to_string(), String::new())].into(),
    };
    let daemon = common::TestDaemon::start(
        list.clone(),
        node,
        root.clone(),
        dir.path().join("logs"),
        Some(token.clone()),
    );
    let first = wait_node_on_target(&client, "", Duration::from_secs(30)).await;

    // The watch: the pool's resourceVersion at every line, the current one first.
    let mut watch = mco(
        &list,
        &token,
        &[
            "get",
            "mcp",
            "worker",
            "-w",
            "-o",
            "jsonpath={.metadata.resourceVersion}{\"\\n\"}",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(std::fs::File::create(dir.path().join("watch.stderr")).unwrap())
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let start_rv: u64 = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("the watch prints the pool")
        .unwrap()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
    tokio::spawn(async move {
        while let Ok(Some(l)) = lines.next_line().await {
            let _ = seen_tx.send(l.trim().parse().expect("a resourceVersion a line"));
        }
    });

    // A rollout under way, followed by `apply --wait` (the rollout watch), when the writer dies.
    let manifest = dir.path().join("before.yaml");
    std::fs::write(&manifest, mc("99-worker-before", "/etc/before-failover").to_string()).unwrap();
    let applying = mco(
        &list,
        &token,
        &["apply", "-f", manifest.to_str().unwrap(), "--wait", "--timeout", "40s"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pool: Value = client.get(mco::model::Kind::MachineConfigPool, "worker").await.unwrap();
        if pool["spec"]["configuration"]["name"]
            .as_str()
            .is_some_and(|t| t != first)
        {
            break;
        }
        assert!(Instant::now() < deadline, "the pool was not re-targeted: {pool}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    a.kill().await;
    b.listens(Duration::from_secs(15)).await;
    let applied = tokio::time::timeout(Duration::from_secs(45), applying.wait_with_output())
        .await
        .expect("apply --wait ends")
        .unwrap();
    assert!(
        applied.status.success() && String::from_utf8_lossy(&applied.stdout).contains("successfully rolled out"),
        "{}{}",
        String::from_utf8_lossy(&applied.stdout),
        String::from_utf8_lossy(&applied.stderr)
    );
    let second = wait_node_on_target(&client, &first, Duration::from_secs(25)).await;

    client
        .create(
            mco::model::Kind::MachineConfig,
            &mc("99-worker-after", "/etc/after-failover"),
            None,
        )
        .await
        .expect("created through the list after the failover");
    let target = wait_node_on_target(&client, &second, Duration::from_secs(25)).await;
    assert_ne!(target, first);
    assert!(
        root.join("etc/before-failover").is_file(),
        "the daemon wrote the first config's file"
    );
    assert!(
        root.join("etc/after-failover").is_file(),
        "the daemon wrote the new config's file"
    );

    // Every change of the pool after the watch's start, from the log's history, each seen once.
    let pool: Value = client.get(mco::model::Kind::MachineConfigPool, "worker").await.unwrap();
    let head: u64 = pool["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while seen.last() != Some(&head) {
        match tokio::time::timeout_at(deadline, seen_rx.recv()).await {
            Ok(Some(rv)) => seen.push(rv),
            other => panic!(
                "the watch stopped before the pool's resourceVersion {head} ({other:?}); seen {seen:?}; its stderr:\n{}",
                std::fs::read_to_string(dir.path().join("watch.stderr")).unwrap_or_default()
            ),
        }
    }
    let history: Value = client
        .get_path("/apis/history.mco.dev/v1/events?fieldSelector=object.kind%3DMachineConfigPool,object.name%3Dworker&limit=500")
        .await
        .unwrap();
    let mut changes: Vec<u64> = history["items"]
        .as_array()
        .unwrap_or_else(|| panic!("a history page: {history}"))
        .iter()
        .map(|e| e["seq"].as_u64().expect("seq"))
        .filter(|seq| (start_rv + 1..=head).contains(seq))
        .collect();
    changes.sort_unstable();
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "strictly increasing: {seen:?}");
    assert_eq!(seen, changes, "every change of the pool once, none missed");
    assert!(seen.len() >= 2, "the rollout changed the pool: {seen:?}");
    watch.start_kill().unwrap();
    daemon.stop().await;
}

/// Waits until node worker-0 is Done on its pool's target, and the target is not `other`.
async fn wait_node_on_target(client: &mco::client::Client, other: &str, within: Duration) -> String {
    let keys = mco::model::Keys::new(mco::model::DEFAULT_GROUP);
    let deadline = Instant::now() + within;
    let mut last = String::new();
    loop {
        let pool: Result<Value, _> = client.get(mco::model::Kind::MachineConfigPool, "worker").await;
        let node: Result<Value, _> = client.get(mco::model::Kind::Node, "worker-0").await;
        if let (Ok(pool), Ok(node)) = (pool, node) {
            let target = pool["spec"]["configuration"]["name"].as_str().unwrap_or("").to_string();
            let ann = &node["metadata"]["annotations"];
            let current = ann[keys.current_config()].as_str().unwrap_or("");
            let state = ann[keys.state()].as_str().unwrap_or("");
            if !target.is_empty() && target != other && current == target && state == "Done" {
                return target;
            }
            last = format!("target {target}, node on {current} ({state})");
        }
        assert!(
            Instant::now() < deadline,
            "worker-0 not on a new target within {within:?}: {last}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A running `mco up --ha`, killed with SIGKILL when dropped (its servers, daemons and etcd
/// members follow through their death signals).
struct UpHa {
    child: tokio::process::Child,
    data: PathBuf,
    servers: String,
}

impl UpHa {
    /// `mco up --ha` in `data` on free ports with `workers` workers and no master; waits for
    /// its banner and returns it with the server list it printed.
    async fn start(data: &Path, workers: usize, reboot_seconds: u64) -> UpHa {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"))
            .args(["up", "--ha", "--listen", "127.0.0.1:0", "--masters", "0"])
            .args([
                "--workers",
                &workers.to_string(),
                "--reboot-seconds",
                &reboot_seconds.to_string(),
            ])
            .arg("--data-dir")
            .arg(data)
            .env_remove("FAILPOINTS")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(data.with_extension("stderr")).unwrap())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let banner = async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(rest) = line.strip_prefix("mco is up: servers ") {
                    return rest.split_whitespace().next().map(str::to_string);
                }
            }
            None
        };
        let servers = tokio::time::timeout(Duration::from_secs(120), banner)
            .await
            .ok()
            .flatten()
            .unwrap_or_else(|| {
                panic!(
                    "mco up --ha printed no banner; its stderr:\n{}",
                    std::fs::read_to_string(data.with_extension("stderr")).unwrap_or_default()
                )
            });
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        UpHa {
            child,
            data: data.to_path_buf(),
            servers,
        }
    }

    async fn client(&self) -> mco::client::Client {
        let token = mco::credentials::read_secret_file(&self.data.join(mco::credentials::ADMIN_TOKEN_FILE)).unwrap();
        let trust = mco::tls::Trust::from_file(&self.data.join("pki").join("ca.crt")).unwrap();
        mco::client::Client::connect_with(&self.servers, "test", Some(token), Some(&trust))
            .await
            .unwrap()
    }

    /// The leader's pid, from the Lease naming it and its replica's pid file.
    async fn leader(&self, client: &mco::client::Client) -> (String, i32) {
        let name = mco::up::ha::leader(client).await.expect("a leader holds the Lease");
        let pid = std::fs::read_to_string(self.data.join("servers").join(&name).join(mco::up::ha::PID_FILE)).unwrap();
        (name, pid.trim().parse().unwrap())
    }
}

/// `mco up --ha` as the README's walk-through: a MachineConfig applied with `--wait`, the
/// leader killed with SIGKILL while its rollout runs: another replica leads, the rollout
/// completes on every node (each applies the new config once), and the history has no gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mco_up_ha_finishes_a_rollout_across_a_leader_kill() {
    if !have_etcd("mco_up_ha_finishes_a_rollout_across_a_leader_kill") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut up = UpHa::start(&data, 3, 1).await;
    assert_eq!(up.servers.split(',').count(), 3, "three replicas: {}", up.servers);
    let client = up.client().await;
    let (leader, pid) = up.leader(&client).await;
    let pool: Value = client.get(mco::model::Kind::MachineConfigPool, "worker").await.unwrap();
    let before = pool["spec"]["configuration"]["name"].as_str().unwrap().to_string();

    let head: Value = client
        .get_path("/apis/history.mco.dev/v1/events?limit=1")
        .await
        .unwrap();
    let head: u64 = head["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    let manifest = dir.path().join("mc.yaml");
    std::fs::write(&manifest, mc("99-worker-ha", "/etc/ha-failover").to_string()).unwrap();
    let token = data.join(mco::credentials::ADMIN_TOKEN_FILE);
    let applying = mco(
        &up.servers,
        &token,
        &["apply", "-f", manifest.to_str().unwrap(), "--wait", "--timeout", "120s"],
    )
    .env("MCO_CA_FILE", data.join("pki").join("ca.crt"))
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();

    // Mid-rollout: the pool has its new target and a node is being updated to it.
    let keys = mco::model::Keys::new(mco::model::DEFAULT_GROUP);
    let deadline = Instant::now() + Duration::from_secs(60);
    let target = loop {
        let pool: Value = client.get(mco::model::Kind::MachineConfigPool, "worker").await.unwrap();
        let target = pool["spec"]["configuration"]["name"].as_str().unwrap_or("").to_string();
        let nodes = client.list(mco::model::Kind::Node).await.unwrap();
        let targeted = nodes["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["metadata"]["annotations"][keys.desired_config()].as_str() == Some(target.as_str()));
        if target != before && targeted {
            break target;
        }
        assert!(
            Instant::now() < deadline,
            "no node targeted with a new render within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL).unwrap();

    let out = tokio::time::timeout(Duration::from_secs(150), applying.wait_with_output())
        .await
        .expect("apply --wait ends")
        .unwrap();
    assert!(
        out.status.success(),
        "apply --wait across the leader's kill: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Another process leads: a standby, or the killed replica started again (as a standby)
    // and taking the lease once it expired.
    let (new_leader, new_pid) = up.leader(&client).await;
    assert_ne!(
        new_pid, pid,
        "another process leads after the kill of {leader}'s (now {new_leader})"
    );
    let nodes = client.list(mco::model::Kind::Node).await.unwrap();
    for n in nodes["items"].as_array().unwrap() {
        let ann = &n["metadata"]["annotations"];
        assert_eq!(
            ann[keys.current_config()].as_str(),
            Some(target.as_str()),
            "{}",
            n["metadata"]["name"]
        );
        assert_eq!(ann[keys.state()].as_str(), Some("Done"), "{}", n["metadata"]["name"]);
    }

    // The history: every resourceVersion from the first to the head, once; after the apply
    // each node started updating once (no second apply).
    let mut seqs = Vec::new();
    let mut updates = std::collections::BTreeMap::<String, usize>::new();
    let mut cont = String::new();
    loop {
        let page: Value = client
            .get_path(&format!("/apis/history.mco.dev/v1/events?limit=500&continue={cont}"))
            .await
            .unwrap();
        for e in page["items"].as_array().unwrap() {
            let seq = e["metadata"]["name"].as_str().unwrap().parse::<u64>().unwrap();
            seqs.push(seq);
            let summary = e["summary"].as_str().unwrap_or("");
            if seq > head && e["object"]["kind"] == "Node" && summary.contains("→ Working") {
                *updates
                    .entry(e["object"]["name"].as_str().unwrap().to_string())
                    .or_default() += 1;
            }
        }
        match page["metadata"]["continue"].as_str() {
            Some(c) if !c.is_empty() => cont = c.to_string(),
            _ => break,
        }
    }
    seqs.sort_unstable();
    let gaps: Vec<(u64, u64)> = seqs
        .windows(2)
        .filter(|w| w[1] != w[0] + 1)
        .map(|w| (w[0], w[1]))
        .collect();
    assert!(gaps.is_empty(), "the history has gaps or repeats: {gaps:?}");
    assert_eq!(updates.len(), 3, "every node updated: {updates:?}");
    assert!(
        updates.values().all(|&n| n == 1),
        "a node started updating more than once: {updates:?}"
    );
    up.child.start_kill().unwrap();
    let _ = up.child.wait().await;
}
