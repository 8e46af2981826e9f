//! Network faults between a daemon and the server (issue 12 item 10), through a loopback fault
//! proxy ([`FaultProxy`]) the daemon talks to instead of the server: connections cut, a
//! partition (every connection refused and cut), responses cut mid-stream, delay, and a server
//! restart behind the proxy. The daemon must resume its watch from the last resourceVersion it
//! saw (no re-list: the proxy records every request line), re-list only on `410 Expired`, never
//! apply a config twice (the sandbox journal records one reboot per applied config), report its
//! state once reconnected, and finish a rollout across a server restart.

mod common;

use common::TestDaemon;
use mco::command::Hub;
use mco::model::NodeAnnotations;
use mco::server::{self, RunningServer, ServerConfig};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A TCP proxy on 127.0.0.1 in front of the server, with faults switched on and off by the test.
struct FaultProxy {
    addr: SocketAddr,
    inner: Arc<Inner>,
}

struct Inner {
    upstream: Mutex<SocketAddr>,
    /// While set, connections are accepted and closed at once, and open ones are cut.
    partitioned: AtomicBool,
    /// Delay added before forwarding each chunk, in ms.
    delay_ms: AtomicU64,
    /// The next this many connections to send more than [`Inner::cut_after`] response bytes
    /// are cut there (a response cut mid-stream).
    cuts_left: AtomicU64,
    cut_after: AtomicU64,
    /// Bumped to cut every open connection.
    generation: tokio::sync::watch::Sender<u64>,
    /// Every request line seen (`GET /api/v1/nodes/worker-0 HTTP/1.1`), in order.
    requests: Mutex<Vec<String>>,
}

impl FaultProxy {
    async fn start(upstream: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let inner = Arc::new(Inner {
            upstream: Mutex::new(upstream),
            partitioned: AtomicBool::new(false),
            delay_ms: AtomicU64::new(0),
            cuts_left: AtomicU64::new(0),
            cut_after: AtomicU64::new(0),
            generation: tokio::sync::watch::channel(0).0,
            requests: Mutex::new(Vec::new()),
        });
        let i = inner.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if i.partitioned.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                tokio::spawn(connection(i.clone(), client));
            }
        });
        FaultProxy { addr, inner }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn set_upstream(&self, addr: SocketAddr) {
        *self.inner.upstream.lock().unwrap() = addr;
    }

    /// Drops every open connection (both directions).
    fn cut_all(&self) {
        self.inner.generation.send_modify(|g| *g += 1);
    }

    fn partition(&self, on: bool) {
        self.inner.partitioned.store(on, Ordering::SeqCst);
        if on {
            self.cut_all();
        }
    }

    fn delay(&self, ms: u64) {
        self.inner.delay_ms.store(ms, Ordering::SeqCst);
    }

    /// Cuts the next `count` connections whose responses pass `after` bytes, there.
    fn cut_responses(&self, count: u64, after: u64) {
        self.inner.cut_after.store(after, Ordering::SeqCst);
        self.inner.cuts_left.store(count, Ordering::SeqCst);
    }

    fn requests(&self) -> Vec<String> {
        self.inner.requests.lock().unwrap().clone()
    }
}

/// One proxied connection: two pumps, ended by a cut.
async fn connection(i: Arc<Inner>, client: TcpStream) {
    let upstream = *i.upstream.lock().unwrap();
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let mut cut = i.generation.subscribe();
    cut.mark_unchanged();
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let up = {
        let i = i.clone();
        async move {
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                let n = cr.read(&mut buf).await.unwrap_or(0);
                if n == 0 {
                    return;
                }
                for line in String::from_utf8_lossy(&buf[..n]).split("\r\n") {
                    let method = ["GET ", "POST ", "PATCH ", "PUT ", "DELETE "];
                    if line.ends_with(" HTTP/1.1") && method.iter().any(|m| line.starts_with(m)) {
                        i.requests.lock().unwrap().push(line.to_string());
                    }
                }
                pause(&i).await;
                if sw.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    };
    let down = async move {
        let mut buf = vec![0u8; 16 * 1024];
        let mut sent = 0u64;
        loop {
            let n = sr.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            pause(&i).await;
            let after = i.cut_after.load(Ordering::SeqCst);
            if sent + n as u64 > after
                && i.cuts_left
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| c.checked_sub(1))
                    .is_ok()
            {
                let keep = (after.saturating_sub(sent)) as usize;
                let _ = cw.write_all(&buf[..keep]).await;
                return; // the response ends mid-stream
            }
            sent += n as u64;
            if cw.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        _ = up => {}
        _ = down => {}
        _ = cut.changed() => {}
    }
}

async fn pause(i: &Inner) {
    let ms = i.delay_ms.load(Ordering::SeqCst);
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

async fn start_server(data: &Path) -> RunningServer {
    server::start(ServerConfig {
        data_dir: data.to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    })
    .await
    .expect("server starts")
}

async fn wait_for(hub: &Hub, what: &str, timeout: Duration, f: impl Fn(&mco::state::State) -> bool) {
    let mut changes = hub.changes();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if f(&hub.state()) {
            return;
        }
        if tokio::time::timeout_at(deadline, changes.changed()).await.is_err() {
            panic!("timed out waiting for {what}");
        }
    }
}

fn annotations(hub: &Hub, node: &str) -> NodeAnnotations {
    NodeAnnotations::read(&hub.state().nodes[node], hub.keys())
}

async fn wait_done(hub: &Hub, node: &str, config: Option<&str>) -> String {
    let keys = hub.keys().clone();
    wait_for(
        hub,
        &format!("{node} Done on {config:?}"),
        Duration::from_secs(90),
        |s| {
            s.nodes.get(node).is_some_and(|n| {
                let a = NodeAnnotations::read(n, &keys);
                a.state == "Done"
                    && !a.current_config.is_empty()
                    && a.current_config == a.desired_config
                    && config.is_none_or(|c| a.current_config == c)
            })
        },
    )
    .await;
    annotations(hub, node).current_config
}

/// The rendered config the worker pool targets, once it is not `old`.
async fn wait_new_render(hub: &Hub, old: &str) -> String {
    wait_for(hub, "a new worker render", Duration::from_secs(30), |s| {
        s.pools
            .get("worker")
            .is_some_and(|p| !p.spec.configuration.name.is_empty() && p.spec.configuration.name != old)
    })
    .await;
    hub.state().pools["worker"].spec.configuration.name.clone()
}

/// The reboots the sandbox journal of `root` records into `config`: one per applied config.
fn reboots_into(root: &Path, config: &str) -> usize {
    let journal = std::fs::read_to_string(root.join("var/log/mco-host-journal")).unwrap_or_default();
    journal
        .lines()
        .filter(|l| l.ends_with(&format!("reboot Node will reboot into config {config}")))
        .count()
}

fn worker_mc(name: &str, content: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": [{"path": format!("/etc/{name}.conf"), "mode": 420,
            "contents": {"source": format!("data:,{content}")}}]}}}})
}

/// Watch requests for the node since request `from`, as (index, resourceVersion).
fn node_watches(reqs: &[String], node: &str, from: usize) -> Vec<(usize, u64)> {
    let field = format!(
        "fieldSelector={}",
        percent_encoding::utf8_percent_encode(&format!("metadata.name={node}"), percent_encoding::NON_ALPHANUMERIC)
    );
    reqs.iter()
        .enumerate()
        .skip(from)
        .filter(|(_, r)| r.starts_with("GET /api/v1/nodes?watch=true") && r.contains(&field))
        .filter_map(|(i, r)| {
            let rv = r.split("resourceVersion=").nth(1)?.split([' ', '&']).next()?;
            Some((i, rv.parse().ok()?))
        })
        .collect()
}

/// Lists (re-lists) of the node since request `from`: a GET of it, or a list without `watch`.
fn node_gets(reqs: &[String], node: &str, from: usize) -> Vec<usize> {
    let get = format!("GET /api/v1/nodes/{node} HTTP/1.1");
    reqs.iter()
        .enumerate()
        .skip(from)
        .filter(|(_, r)| **r == get || (r.starts_with("GET /api/v1/nodes?") && !r.contains("watch=true")))
        .map(|(i, _)| i)
        .collect()
}

async fn wait_until(what: &str, timeout: Duration, f: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + timeout;
    while !f() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await; // polling the proxy's record
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_resumes_its_watch_relists_only_on_410_and_reports_after_a_partition() {
    let data = tempfile::tempdir().unwrap();
    let server = start_server(data.path()).await;
    let hub = server.hub.clone();
    let proxy = FaultProxy::start(server.addr).await;
    let node = mco::up::local_nodes(0, 1).remove(0);
    let root = data.path().join("nodes").join(&node.name);
    let token = mco::api::auth::ensure_node_token(&server.hub, data.path(), &node.name, &node.labels)
        .await
        .expect("node token issued");
    let daemon = TestDaemon::start(
        proxy.url(),
        node.clone(),
        root.clone(),
        data.path().join("logs"),
        Some(token),
    );
    let first = wait_done(&hub, &node.name, None).await;
    let log = data.path().join("logs").join(format!("{}.log", node.name));
    wait_until("the daemon idle after its first boot", Duration::from_secs(30), || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("config drift monitor watching")
            && !node_watches(&proxy.requests(), &node.name, 0).is_empty()
    })
    .await;

    // 1. A cut: the watch resumes from the newest resourceVersion it delivered (at most the
    // node's, at least the one the first watch started from), without a re-list.
    let rv: u64 = hub.state().nodes[&node.name]
        .metadata
        .resource_version
        .clone()
        .unwrap()
        .parse()
        .unwrap();
    let first_watch = node_watches(&proxy.requests(), &node.name, 0)[0].1;
    let mark = proxy.requests().len();
    proxy.cut_all();
    wait_until("the resumed watch", Duration::from_secs(30), || {
        !node_watches(&proxy.requests(), &node.name, mark).is_empty()
    })
    .await;
    let reqs = proxy.requests();
    let resumed = node_watches(&reqs, &node.name, mark)[0].1;
    assert!(
        first_watch <= resumed && resumed <= rv,
        "resumed from {resumed}, not between the first watch's {first_watch} and the node's {rv}"
    );
    assert!(
        node_gets(&reqs, &node.name, mark).is_empty(),
        "no re-list after a cut: {:?}",
        &reqs[mark..]
    );

    // 2. Its resourceVersion compacted away: the resumed watch gets 410 Expired, and the daemon
    // re-lists (one GET of the node), then watches from the listed resourceVersion.
    for i in 0..3 {
        hub.create(
            mco::model::Kind::MachineConfig,
            serde_json::json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
                "metadata": {"name": format!("00-unselected-{i}")}, "spec": {}}),
            &mco::command::Actor::new("test"),
        )
        .await
        .unwrap();
    }
    let head = hub.store().last_seq();
    hub.store().compact(head).unwrap();
    let mark = proxy.requests().len();
    proxy.cut_all();
    wait_until("a watch after the re-list", Duration::from_secs(30), || {
        node_watches(&proxy.requests(), &node.name, mark).len() >= 2
    })
    .await;
    let reqs = proxy.requests();
    let watches = node_watches(&reqs, &node.name, mark);
    let gets = node_gets(&reqs, &node.name, mark);
    assert!(
        watches[0].1 >= resumed && watches[0].1 < head - 1,
        "first tries to resume: {watches:?}"
    );
    assert_eq!(gets.len(), 1, "one re-list after 410: {:?}", &reqs[mark..]);
    assert!(watches[0].0 < gets[0] && gets[0] < watches[1].0, "{:?}", &reqs[mark..]);
    assert!(watches[1].1 >= head - 1, "watches from the re-listed resourceVersion");

    // 3. A partition while the rollout starts: the server sets desiredConfig, the daemon cannot
    // see it; once the partition heals the daemon resumes, applies it once and reports Done,
    // through delayed traffic and responses cut mid-stream.
    proxy.partition(true);
    hub.create(
        mco::model::Kind::MachineConfig,
        worker_mc("99-netfault", "one"),
        &mco::command::Actor::new("test"),
    )
    .await
    .unwrap();
    let target = wait_new_render(&hub, &first).await;
    let keys = hub.keys().clone();
    wait_for(&hub, "desiredConfig set on the node", Duration::from_secs(30), |s| {
        NodeAnnotations::read(&s.nodes[&node.name], &keys).desired_config == target
    })
    .await;
    let a = annotations(&hub, &node.name);
    assert_eq!(
        (a.current_config.as_str(), a.state.as_str()),
        (first.as_str(), "Done"),
        "partitioned: no report"
    );
    proxy.delay(5);
    proxy.cut_responses(3, 200);
    proxy.partition(false);
    wait_done(&hub, &node.name, Some(&target)).await;
    assert_eq!(reboots_into(&root, &target), 1, "applied exactly once");
    assert_eq!(
        std::fs::read_to_string(root.join("etc/99-netfault.conf")).unwrap(),
        "one"
    );
    daemon.stop().await;
    server.stop().await;
    if std::env::var_os("MCO_NETFAULT_LOG").is_some() {
        eprintln!(
            "{}",
            std::fs::read_to_string(data.path().join("logs/worker-0.log")).unwrap()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restart_during_a_rollout_finishes_the_rollout() {
    let data = tempfile::tempdir().unwrap();
    let server = start_server(data.path()).await;
    let proxy = FaultProxy::start(server.addr).await;
    let node = mco::up::local_nodes(0, 1).remove(0);
    let root = data.path().join("nodes").join(&node.name);
    let token = mco::api::auth::ensure_node_token(&server.hub, data.path(), &node.name, &node.labels)
        .await
        .expect("node token issued");
    let daemon = TestDaemon::start(
        proxy.url(),
        node.clone(),
        root.clone(),
        data.path().join("logs"),
        Some(token),
    );
    let first = wait_done(&server.hub, &node.name, None).await;
    server
        .hub
        .create(
            mco::model::Kind::MachineConfig,
            worker_mc("99-restart", "two"),
            &mco::command::Actor::new("test"),
        )
        .await
        .unwrap();
    let target = wait_new_render(&server.hub, &first).await;
    // The server goes away while the node works on the update.
    let keys = server.hub.keys().clone();
    wait_for(&server.hub, "the node Working", Duration::from_secs(30), |s| {
        NodeAnnotations::read(&s.nodes[&node.name], &keys).state == "Working"
    })
    .await;
    server.stop().await;
    let server = start_server(data.path()).await;
    proxy.set_upstream(server.addr);
    wait_done(&server.hub, &node.name, Some(&target)).await;
    assert_eq!(reboots_into(&root, &target), 1, "applied exactly once");
    assert_eq!(
        std::fs::read_to_string(root.join("etc/99-restart.conf")).unwrap(),
        "two"
    );
    let keys = server.hub.keys().clone();
    wait_for(&server.hub, "the worker pool Updated", Duration::from_secs(30), |s| {
        let p = &s.pools["worker"];
        p.condition_status("Updated") == "True" && p.status.configuration.name == target
    })
    .await;
    let _ = keys;
    daemon.stop().await;
    server.stop().await;
}
