//! `mco server --store etcd://…` as a user runs it: real `mco server` processes sharing one
//! real etcd member on loopback. One writes the log while the other waits as a standby; when
//! the writer is killed with SIGKILL (no clean stop, its lease left to expire) the standby
//! takes over within the lease and serves every acknowledged write, and the log goes on
//! without a gap. A clean stop gives the lease up at once.

mod common;

use common::etcd::{have_etcd, Etcd};
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};

const MC: &str = "apis/machineconfiguration.openshift.io/v1/machineconfigs";

struct Server {
    child: tokio::process::Child,
    /// Its first stdout line: `mco server listening on URL` once it holds the lease.
    listening: tokio::task::JoinHandle<Option<String>>,
}

/// Starts `mco server` on `etcd` named `name`, data (admin token, logs) in `data`.
fn spawn(etcd: &Etcd, data: &Path, name: &str) -> Server {
    std::fs::create_dir_all(data).unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"))
        .args([
            "server",
            "--data-dir",
            data.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--store", &etcd.url(), "--name", name, "--etcd-lease-ttl", "2"])
        .env("RUST_LOG", "info")
        .env_remove("FAILPOINTS")
        .stdout(std::process::Stdio::piped())
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
    Server { child, listening }
}

async fn url_of(s: &mut Server, within: Duration, data: &Path) -> String {
    match tokio::time::timeout(within, &mut s.listening).await {
        Ok(Ok(Some(url))) => url,
        other => panic!(
            "the server did not listen within {within:?} ({other:?}); its log:\n{}",
            std::fs::read_to_string(data.join("server.stderr")).unwrap_or_default()
        ),
    }
}

fn mc(name: &str) -> Value {
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.4.0"}}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_the_log_when_the_writer_is_killed() {
    if !have_etcd("a_standby_takes_over_the_log_when_the_writer_is_killed") {
        return;
    }
    let etcd = Etcd::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (da, db) = (dir.path().join("a"), dir.path().join("b"));
    let mut a = spawn(&etcd, &da, "server-a");
    let url_a = url_of(&mut a, Duration::from_secs(60), &da).await;
    let token = mco::credentials::read_secret_file(&da.join(mco::credentials::ADMIN_TOKEN_FILE))
        .expect("the first server wrote the admin token");
    let mut b = spawn(&etcd, &db, "server-b");
    let http = reqwest::Client::new();
    // A standby stops on SIGTERM as a writer does (a supervisor must be able to stop it).
    let mut standby = spawn(&etcd, &dir.path().join("standby"), "server-standby");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(dir.path().join("standby/server.stderr"))
        .unwrap_or_default()
        .contains("standby")
    {
        assert!(Instant::now() < deadline, "the standby did not say it waits");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(standby.child.id().unwrap() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), standby.child.wait())
        .await
        .expect("a standby stops on SIGTERM")
        .unwrap();
    assert!(status.success(), "{status}");

    // The client's ledger: every write acknowledged by the writer, with its resourceVersion.
    let mut ledger: Vec<(String, String)> = Vec::new();
    for i in 0..20 {
        let name = format!("99-worker-ha-{i}");
        let r = http
            .post(format!("{url_a}/{MC}"))
            .bearer_auth(&token)
            .json(&mc(&name))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
        let body: Value = r.json().await.unwrap();
        ledger.push((name, body["metadata"]["resourceVersion"].as_str().unwrap().to_string()));
    }
    assert!(
        !b.listening.is_finished(),
        "the standby waits while the writer holds the lease"
    );

    a.child.start_kill().unwrap();
    a.child.wait().await.unwrap();
    let killed = Instant::now();
    let url_b = url_of(&mut b, Duration::from_secs(30), &db).await;
    let failover = killed.elapsed();
    eprintln!("failover: SIGKILL of the writer to the standby listening: {failover:?} (lease 2 s)");
    assert!(failover < Duration::from_secs(15), "{failover:?}");

    // The new leader is the holder of the controllers' Lease, as kube-controller-manager's.
    let lease: Value = http
        .get(format!(
            "{url_b}/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/mco-controllers"
        ))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "server-b", "{lease}");
    assert_eq!(lease["spec"]["leaseTransitions"], 1, "{lease}");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 2, "{lease}");

    // Every acknowledged write is served by the new writer, at the version it was acknowledged.
    for (name, rv) in &ledger {
        let r = http
            .get(format!("{url_b}/{MC}/{name}"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{name} after the failover");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["metadata"]["resourceVersion"], rv.as_str(), "{name}");
    }
    // And the log goes on after the old head, without a gap: the next write's version is past
    // every acknowledged one, and the history holds every version from 1 to it.
    let r = http
        .post(format!("{url_b}/{MC}"))
        .bearer_auth(&token)
        .json(&mc("99-worker-after"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let next: u64 = r.json::<Value>().await.unwrap()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let last_acked: u64 = ledger.last().unwrap().1.parse().unwrap();
    assert!(next > last_acked, "{next} after {last_acked}");
    let mut seqs: Vec<u64> = Vec::new();
    let mut cont = String::new();
    loop {
        let page: Value = http
            .get(format!(
                "{url_b}/apis/history.mco.dev/v1/events?limit=500&continue={cont}"
            ))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let items = page["items"]
            .as_array()
            .unwrap_or_else(|| panic!("a history page: {page}"));
        seqs.extend(items.iter().map(|item| item["seq"].as_u64().expect("seq")));
        cont = page["metadata"]["continue"].as_str().unwrap_or_default().to_string();
        if cont.is_empty() {
            break;
        }
    }
    seqs.sort_unstable();
    let expected: Vec<u64> = (1..=*seqs.last().unwrap()).collect();
    assert_eq!(seqs, expected, "the history has every resourceVersion once");
    assert!(seqs.len() as u64 >= next);

    // A clean stop gives the lease up at once: a third server takes over without waiting for it
    // to expire.
    let dc = dir.path().join("c");
    let mut c = spawn(&etcd, &dc, "server-c");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(b.child.id().unwrap() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let stopped = Instant::now();
    b.child.wait().await.unwrap();
    let url_c = url_of(&mut c, Duration::from_secs(30), &dc).await;
    eprintln!("handover after a clean stop: {:?}", stopped.elapsed());
    let r = http
        .get(format!("{url_c}/{MC}/99-worker-after"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

/// An unreachable etcd is refused at start with the endpoints named, and nothing listens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_etcd_is_named_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"))
        .args([
            "server",
            "--data-dir",
            dir.path().to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--store", &format!("etcd://127.0.0.1:{port}")])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("127.0.0.1:{port}")) && err.contains("etcd"),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("listening"));
    let bad = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"))
        .args([
            "server",
            "--data-dir",
            dir.path().to_str().unwrap(),
            "--store",
            "etcd://nohost",
        ])
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("\"nohost\" is not HOST:PORT"), "{err}");
}

/// With etcd gone, the writer is not ready (`/readyz` 500, the reason on `/readyz/store`) and
/// a write fails with a Status instead of hanging or being acknowledged; `/metrics` says it
/// held the writer lease. When etcd is back, a server opens the log with every write that was
/// acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_etcd_writes_fail_cleanly_and_readiness_says_so() {
    if !have_etcd("without_etcd_writes_fail_cleanly_and_readiness_says_so") {
        return;
    }
    let mut etcd = Etcd::start().await;
    let dir = tempfile::tempdir().unwrap();
    let s = common::start_server_with(mco::server::ServerConfig {
        data_dir: dir.path().join("a"),
        etcd: Some(etcd.config("a", "/mco/")),
        ..Default::default()
    })
    .await;
    let http = s.admin_http();
    let ok = http.get(format!("{}/readyz", s.url())).send().await.unwrap();
    assert_eq!(ok.status(), 200);
    let metrics = http
        .get(format!("{}/metrics", s.url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.lines().any(|l| l == "mco_store_etcd_writer 1"), "{metrics}");
    let created = http
        .post(format!("{}/{MC}", s.url()))
        .json(&mc("99-worker-before"))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);

    etcd.kill(0).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = http.get(format!("{}/readyz", s.url())).send().await.unwrap();
        if r.status() == 500 {
            break;
        }
        assert!(Instant::now() < deadline, "/readyz stayed ok without etcd");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let why = http
        .get(format!("{}/readyz/store", s.url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(why.contains("etcd"), "{why}");
    let started = Instant::now();
    let refused = http
        .post(format!("{}/{MC}", s.url()))
        .json(&mc("99-worker-during"))
        .send()
        .await
        .unwrap();
    assert!(refused.status().is_server_error(), "{}", refused.status());
    let status: Value = refused.json().await.unwrap();
    assert_eq!(status["kind"], "Status", "{status}");
    assert!(started.elapsed() < Duration::from_secs(15), "{:?}", started.elapsed());
    s.stop().await;

    etcd.restart(0).await;
    let s = common::start_server_with(mco::server::ServerConfig {
        data_dir: dir.path().join("b"),
        etcd: Some(etcd.config("b", "/mco/")),
        ..Default::default()
    })
    .await;
    let state = s.hub.state();
    assert!(state
        .get_json(mco::model::Kind::MachineConfig, "99-worker-before")
        .is_some());
    assert!(state
        .get_json(mco::model::Kind::MachineConfig, "99-worker-during")
        .is_none());
}

/// On three etcd members: with one member killed writes go on; with two, a write fails with a
/// 503 Status (never acknowledged) and `/readyz` fails; when one comes back, writes succeed
/// again and every acknowledged one is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_member_etcd_loses_one_member_then_quorum_and_recovers() {
    if !have_etcd("a_three_member_etcd_loses_one_member_then_quorum_and_recovers") {
        return;
    }
    let mut etcd = Etcd::start_members(3).await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = etcd.config("a", "/mco/");
    // Longer than the outage below, so that the writer keeps its lease through it.
    cfg.lease_ttl_secs = 30;
    let s = common::start_server_with(mco::server::ServerConfig {
        data_dir: dir.path().to_path_buf(),
        etcd: Some(cfg),
        ..Default::default()
    })
    .await;
    let http = s.admin_http();
    let create = |name: &str| http.post(format!("{}/{MC}", s.url())).json(&mc(name)).send();
    assert_eq!(create("99-worker-three").await.unwrap().status(), 201);
    etcd.kill(0).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        // The client may first try the member that is gone: a write acknowledged is in the log.
        let r = create("99-worker-two").await.unwrap();
        // 409: an earlier try was committed though its answer was lost.
        if r.status() == 201 || r.status() == 409 {
            break;
        }
        assert_eq!(r.status(), 503, "{}", r.text().await.unwrap());
        assert!(
            Instant::now() < deadline,
            "no write went through with two of three members"
        );
    }
    etcd.kill(1).await;
    let r = create("99-worker-one").await.unwrap();
    assert_eq!(r.status(), 503);
    let status: Value = r.json().await.unwrap();
    assert_eq!(
        (status["kind"].as_str(), status["reason"].as_str()),
        (Some("Status"), Some("ServiceUnavailable")),
        "{status}"
    );
    assert_eq!(
        http.get(format!("{}/readyz", s.url())).send().await.unwrap().status(),
        500
    );

    etcd.restart(1).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    // A new name each try: one that got a 503 may still have been committed (its answer lost),
    // and only a write this server acknowledges proves the log writable again.
    let mut back = 0;
    loop {
        back += 1;
        let r = create(&format!("99-worker-back-{back}")).await.unwrap();
        if r.status() == 201 {
            break;
        }
        assert_eq!(r.status(), 503);
        assert!(Instant::now() < deadline, "writes did not resume with two members back");
    }
    // Ready again once a write went through (the failed ones no longer count).
    let deadline = Instant::now() + Duration::from_secs(15);
    while http.get(format!("{}/readyz", s.url())).send().await.unwrap().status() != 200 {
        assert!(Instant::now() < deadline, "/readyz did not come back with the writes");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let state = s.hub.state();
    let last_back = format!("99-worker-back-{back}");
    for name in ["99-worker-three", "99-worker-two", last_back.as_str()] {
        assert!(
            state.get_json(mco::model::Kind::MachineConfig, name).is_some(),
            "{name}"
        );
    }
}

/// Kills of random servers (SIGKILL, writer or standby, each restarted at once) while two
/// clients write through whichever server holds the lease: no acknowledged write is lost, no
/// resourceVersion is given twice, the history has every resourceVersion once, and a fresh
/// fold of the log in etcd equals what the last writer serves. `MCO_HA_KILLS` kills (default 6;
/// the README's figure is from 200).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kills_of_random_servers() {
    use std::sync::{Arc, Mutex};
    if !have_etcd("acknowledged_writes_survive_kills_of_random_servers") {
        return;
    }
    let kills: usize = std::env::var("MCO_HA_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let etcd = Etcd::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (url_tx, url_rx) = tokio::sync::watch::channel(String::new());
    let start = |i: usize| {
        let data = dir.path().join(format!("s{i}"));
        let mut s = spawn(&etcd, &data, &format!("server-{i}"));
        let (tx, listening) = (
            url_tx.clone(),
            std::mem::replace(&mut s.listening, tokio::spawn(async { None })),
        );
        s.listening = tokio::spawn(async move {
            let url = listening.await.ok().flatten();
            if let Some(u) = &url {
                tx.send_replace(u.clone());
            }
            url
        });
        s
    };
    let mut servers: Vec<Server> = (0..3).map(start).collect();
    let mut first = url_rx.clone();
    tokio::time::timeout(Duration::from_secs(60), first.wait_for(|u| !u.is_empty()))
        .await
        .expect("a server takes the lease")
        .unwrap();
    let token = loop {
        // The first writer wrote the admin token into its own data dir.
        if let Some(t) = (0..3).find_map(|i| {
            mco::credentials::read_secret_file(
                &dir.path()
                    .join(format!("s{i}"))
                    .join(mco::credentials::ADMIN_TOKEN_FILE),
            )
        }) {
            break t;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };

    let ledger: Arc<Mutex<Vec<(String, u64)>>> = Arc::default();
    let stop = tokio_util::sync::CancellationToken::new();
    let mut writers = Vec::new();
    for w in 0..2 {
        let (ledger, stop, urls, token) = (ledger.clone(), stop.clone(), url_rx.clone(), token.clone());
        writers.push(tokio::spawn(async move {
            let http = reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap();
            let mut n = 0;
            while !stop.is_cancelled() {
                let url = urls.borrow().clone();
                let name = format!("99-worker-kill-{w}-{n}");
                let sent = http
                    .post(format!("{url}/{MC}"))
                    .bearer_auth(&token)
                    .json(&mc(&name))
                    .send()
                    .await;
                match sent {
                    Ok(r) if r.status() == 201 => {
                        let body: Value = r.json().await.unwrap();
                        let rv = body["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
                        ledger.lock().unwrap().push((name, rv));
                        n += 1;
                    }
                    // Not acknowledged (a 503 from a deposed or cut-off writer, a connection
                    // refused by a dead one): that name may or may not be in the log; move on.
                    _ => {
                        n += 1;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        }));
    }

    let mut seed: u64 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("kills of random servers: {kills}, seed {seed}");
    let started = Instant::now();
    for k in 0..kills {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let i = (seed >> 33) as usize % 3;
        let acked_before = ledger.lock().unwrap().len();
        servers[i].child.start_kill().unwrap();
        servers[i].child.wait().await.unwrap();
        servers[i] = start(i);
        // Wait until writes are acknowledged again (a new writer, or the same one when a
        // standby was killed).
        let deadline = Instant::now() + Duration::from_secs(30);
        while ledger.lock().unwrap().len() < acked_before + 2 {
            assert!(
                Instant::now() < deadline,
                "kill {k} (server {i}): no write acknowledged within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    stop.cancel();
    for w in writers {
        w.await.unwrap();
    }
    let ledger = ledger.lock().unwrap().clone();
    eprintln!(
        "{} acknowledged writes over {kills} kills in {:?}",
        ledger.len(),
        started.elapsed()
    );

    // No resourceVersion given twice.
    let mut rvs: Vec<u64> = ledger.iter().map(|(_, rv)| *rv).collect();
    rvs.sort_unstable();
    let n = rvs.len();
    rvs.dedup();
    assert_eq!(rvs.len(), n, "a resourceVersion was acknowledged twice");
    // Every acknowledged write is served by the last writer at its version.
    let url = url_rx.borrow().clone();
    let http = reqwest::Client::new();
    let list: Value = http
        .get(format!("{url}/{MC}"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let served: std::collections::BTreeMap<String, String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap().to_string(),
                o["metadata"]["resourceVersion"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (name, rv) in &ledger {
        assert_eq!(served.get(name), Some(&rv.to_string()), "{name} acknowledged at {rv}");
    }
    for s in &mut servers {
        let _ = s.child.start_kill();
        let _ = s.child.wait().await;
    }
    // A fresh fold of the log in etcd serves the same MachineConfigs.
    let log = mco::store::etcd::EtcdLog::connect(etcd.config("check", "/mco/"))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while log.try_acquire().await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "the killed writer's lease did not expire");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let store = mco::store::Store::open_etcd(log, mco::store::SNAPSHOT_EVERY)
        .await
        .unwrap();
    let state = store.load_state().unwrap();
    let folded: std::collections::BTreeMap<String, String> = state
        .machine_configs
        .iter()
        .map(|(n, mc)| (n.to_string(), mc.metadata.resource_version.clone().unwrap_or_default()))
        .collect();
    for (name, rv) in &served {
        assert_eq!(folded.get(name), Some(rv), "{name}");
    }
    let seqs: Vec<u64> = store.read_range(0, store.last_seq()).map(|e| e.unwrap().seq).collect();
    assert_eq!(
        seqs,
        (1..=store.last_seq()).collect::<Vec<_>>(),
        "every resourceVersion once"
    );
}
