//! Crash safety of acknowledged writes (issue 12 item 6, the server half): the real `mco server`
//! binary takes concurrent creates and patches over HTTP, is killed with SIGKILL at a random
//! moment (or aborts at a random hit of one of the store's failpoints), and is restarted on the
//! same data dir. After every kill:
//! - the store opens (its full check at open: checksums, seq continuity) and verifies
//!   (`Store::verify`, and the `mco store verify` binary every 25 trials and at the end);
//! - every acknowledged write is in the log at its resourceVersion with its content;
//! - the log's head is at least the highest acknowledged resourceVersion, and after the restart
//!   the API's list resourceVersion is too (resourceVersions never go backwards);
//! - the restarted server serves every object with its last acknowledged content (or the write
//!   in flight at the kill, which may or may not have landed).
//!
//! `cargo test --features failpoints --test crash_server` runs a few trials (bounded to ~30 s);
//! the full count: `MCO_CRASH_TRIALS=1000 cargo test --features failpoints --test
//! crash_server -- --nocapture` (prints the figures; `MCO_CRASH_SEED` replays a run;
//! `MCO_CRASH_TRACE=1` prints each trial's timings).

use mco::store::Store;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};

const MC: &str = "/apis/machineconfiguration.openshift.io/v1/machineconfigs";
const LABEL: &str = "crash.mco.dev/n";
/// Concurrent writers per trial, and the most writes each makes before the kill.
const WRITERS: usize = 4;
const WRITES_PER_WRITER: usize = 12;
/// A fresh data dir every this many trials (keeps each start's full check small).
const TRIALS_PER_DIR: usize = 20;
/// The store's failpoints on the write path; a trial may abort at a random hit of one.
const FAILPOINTS: [&str; 7] = [
    "store::append::before_batch",
    "store::append::after_batch",
    "store::flush::before",
    "store::flush::after",
    "store::mark::before_rename",
    "store::snapshot::before",
    "store::snapshot::after",
];

/// The admin token of each server started so far, by its URL (`https://127.0.0.1:PORT`);
/// each start registers the token it wrote to its data dir.
static ADMIN_TOKENS: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

/// Every HTTP call of the harness, authenticated as the admin of the server `url` addresses.
fn http(client: &reqwest::Client, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
    let token = ADMIN_TOKENS
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find(|(base, _)| url.starts_with(base.as_str()))
        .map(|(_, t)| t.clone())
        .expect("a server started by this harness");
    client
        .request(method, url)
        .bearer_auth(token)
        .timeout(Duration::from_secs(20))
}

/// xorshift64*: the harness's randomness, reproducible from its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}

/// One acknowledged write: the object, the resourceVersion the server answered, the label
/// value it set.
#[derive(Clone, Debug)]
struct Ack {
    name: String,
    rv: u64,
    n: u64,
}

struct Server {
    child: tokio::process::Child,
    url: String,
}

/// Starts `mco server` on `data`; `None` when it died before listening (a failpoint hit
/// during start-up: a crash like any other).
/// Waits (at most 10 s) until nothing holds the store's file lock: a sled `Db` dropped in this
/// process (the offline checks open the store here) releases its lock only once its background
/// flusher thread has exited, and a server started before that fails on the lock instead of
/// reaching its failpoint, and an offline check fails to open.
fn wait_store_unlocked(data: &Path) {
    use nix::fcntl::{Flock, FlockArg};
    let db = data.join("store").join("db");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let Ok(file) = std::fs::File::open(&db) else { return };
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(_unlocked_on_drop) => return,
            Err(_) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20)); // the flusher's exit has no event to wait on
            }
            Err((_, e)) => panic!("the store's lock is still held after 10 s: {e}"),
        }
    }
}

/// Where every server started on `data` writes its stderr (errors and panics), appended.
fn server_log(data: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(data.join("servers.stderr"))
        .unwrap()
}

/// Prints the servers' stderr of a data dir when the test fails (a dropped connection then
/// says why the server dropped it).
struct ServerLogs(PathBuf);

impl Drop for ServerLogs {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.0.join("servers.stderr")).unwrap_or_default();
            eprintln!("--- stderr of the servers on {} ---\n{log}", self.0.display());
        }
    }
}

async fn start(data: &Path, failpoints: Option<&str>) -> Option<Server> {
    wait_store_unlocked(data);
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"));
    cmd.args([
        "server",
        "--data-dir",
        data.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ])
    .args(["--snapshot-interval", "5"])
    .env("RUST_LOG", "error")
    .stdout(std::process::Stdio::piped())
    .stderr(server_log(data))
    .kill_on_drop(true);
    match failpoints {
        Some(f) => cmd.env("FAILPOINTS", f),
        None => cmd.env_remove("FAILPOINTS"),
    };
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("the server starts or dies within a minute")
        .unwrap();
    match line.and_then(|l| l.strip_prefix("mco server listening on ").map(str::to_string)) {
        Some(url) => {
            let token = mco::credentials::read_secret_file(&data.join(mco::credentials::ADMIN_TOKEN_FILE))
                .expect("the server wrote its admin token before listening");
            ADMIN_TOKENS.lock().unwrap().push((format!("{url}/"), token));
            Some(Server { child, url })
        }
        None => {
            let status = child.wait().await.unwrap();
            assert!(
                failpoints.is_some(),
                "the server failed to start without a failpoint: {status}"
            );
            None
        }
    }
}

fn mc(name: &str) -> Value {
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {LABEL: "0"}},
        "spec": {"config": {"ignition": {"version": "3.4.0"}}}})
}

/// One writer: creates its objects and patches them in turn until a request fails (the kill).
async fn writer(url: String, trial: usize, w: usize, acks: Arc<Mutex<Vec<Ack>>>, inflight: Arc<Mutex<Vec<Ack>>>) {
    let client = reqwest::Client::new();
    let names: Vec<String> = (0..3).map(|i| format!("crash-{trial}-{w}-{i}")).collect();
    let mut n = [0u64; 3];
    for step in 0..WRITES_PER_WRITER {
        let i = step % 3;
        let name = &names[i];
        let next = if step < 3 { 0 } else { n[i] + 1 };
        inflight.lock().unwrap()[w] = Ack {
            name: name.clone(),
            rv: 0,
            n: next,
        };
        let req = if step < 3 {
            http(&client, reqwest::Method::POST, &format!("{url}{MC}")).json(&mc(name))
        } else {
            http(&client, reqwest::Method::PATCH, &format!("{url}{MC}/{name}"))
                .header("content-type", "application/merge-patch+json")
                .body(json!({"metadata": {"labels": {LABEL: next.to_string()}}}).to_string())
        };
        let Ok(resp) = req.send().await else { return };
        if !resp.status().is_success() {
            return;
        }
        let Ok(body) = resp.json::<Value>().await else { return };
        // Acknowledged: the server answered success with the object.
        let rv: u64 = body["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
        assert_eq!(body["metadata"]["labels"][LABEL], json!(next.to_string()));
        n[i] = next;
        acks.lock().unwrap().push(Ack {
            name: name.clone(),
            rv,
            n: next,
        });
    }
}

#[derive(Default, Debug)]
struct Figures {
    trials: usize,
    at_failpoints: usize,
    died_starting: usize,
    acked: usize,
    lost: usize,
}

/// After a kill: the store opens, verifies, and holds every acknowledged write at its
/// resourceVersion with its content; its head is not behind the highest acknowledged one.
fn check_offline(store_dir: &Path, acks: &[Ack], figures: &mut Figures) {
    wait_store_unlocked(store_dir.parent().expect("the store is in a data dir"));
    let store = Store::open(store_dir).unwrap_or_else(|e| panic!("the store does not open after a kill: {e}"));
    let report = store.verify().unwrap();
    assert!(
        report.ok(),
        "the store does not verify after a kill: {:?}",
        report.problems
    );
    store.load_state().expect("the store replays");
    let max = acks.iter().map(|a| a.rv).max().unwrap_or(0);
    assert!(
        store.last_seq() >= max,
        "head {} is behind acknowledged {max}",
        store.last_seq()
    );
    for a in acks {
        match store.event(a.rv).unwrap() {
            Some(ev)
                if ev.name == a.name && ev.object().unwrap()["metadata"]["labels"][LABEL] == json!(a.n.to_string()) => {
            }
            other => {
                figures.lost += 1;
                panic!("acknowledged write {a:?} is not in the log at its resourceVersion: {other:?}");
            }
        }
    }
}

/// After a restart: the list resourceVersion is not behind, and each object of the last trial
/// has its last acknowledged label value, or the one of the write in flight at the kill.
/// Errors: the request failed (the server is gone: a failpoint fired in its own startup
/// writes, after it began listening).
async fn check_online(url: &str, acks: &[Ack], inflight: &[Ack]) -> Result<(), reqwest::Error> {
    let client = reqwest::Client::new();
    let list: Value = http(&client, reqwest::Method::GET, &format!("{url}{MC}"))
        .send()
        .await?
        .json()
        .await?;
    let head: u64 = list["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    let max = acks.iter().map(|a| a.rv).max().unwrap_or(0);
    assert!(
        head >= max,
        "after the restart the list resourceVersion {head} is behind acknowledged {max}"
    );
    let mut last: std::collections::BTreeMap<&str, &Ack> = Default::default();
    for a in acks {
        last.insert(&a.name, a);
    }
    let items = list["items"].as_array().unwrap();
    for (name, a) in last {
        let item = items
            .iter()
            .find(|i| i["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("acknowledged object {name} is missing after the restart"));
        let n: u64 = item["metadata"]["labels"][LABEL].as_str().unwrap().parse().unwrap();
        let rv: u64 = item["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
        let in_flight = inflight.iter().any(|f| f.name == name && f.n == n && n == a.n + 1);
        assert!(
            (n == a.n && rv == a.rv) || (in_flight && rv > a.rv),
            "{name}: served n={n} rv={rv}, acknowledged n={} rv={}",
            a.n,
            a.rv
        );
    }
    Ok(())
}

fn verify_binary(data: &Path) {
    wait_store_unlocked(data);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mco"))
        .args(["store", "verify", "--data-dir", data.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_sigkill_and_failpoint_crashes() {
    let trials: usize = std::env::var("MCO_CRASH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let budget = if trials == 0 {
        Duration::from_secs(25)
    } else {
        Duration::MAX
    };
    let trials = if trials == 0 { usize::MAX } else { trials };
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
    eprintln!("crash_server: seed {seed} (MCO_CRASH_SEED={seed} replays it)");
    let mut rng = Rng(seed);
    let started = Instant::now();
    let mut figures = Figures::default();
    let mut dirs: Vec<tempfile::TempDir> = Vec::new();
    let mut acks: Vec<Ack> = Vec::new();
    let mut last_trial: (Vec<Ack>, Vec<Ack>) = Default::default();
    let mut trial = 0;
    while trial < trials && (started.elapsed() < budget || trial < 3) {
        if trial % TRIALS_PER_DIR == 0 {
            if let Some(d) = dirs.last() {
                verify_binary(d.path());
            }
            dirs.push(tempfile::tempdir().unwrap());
            acks.clear();
            last_trial = Default::default();
        }
        let data: PathBuf = dirs.last().unwrap().path().to_path_buf();
        // One trial in three crashes at a failpoint instead of a SIGKILL from outside.
        let failpoint = (rng.below(3) == 0).then(|| {
            let fp = FAILPOINTS[rng.below(FAILPOINTS.len() as u64) as usize];
            format!("{fp}={}*off->panic", rng.below(20))
        });
        let t0 = Instant::now();
        let Some(mut server) = start(&data, failpoint.as_deref()).await else {
            figures.died_starting += 1;
            figures.at_failpoints += 1;
            trial += 1;
            figures.trials += 1;
            check_offline(&data.join("store"), &acks, &mut figures);
            continue;
        };
        let t1 = Instant::now();
        if let Err(e) = check_online(&server.url, &last_trial.0, &last_trial.1).await {
            // A failpoint armed for this trial may fire in the server's own startup writes
            // (template sync, first renders) once it listens: it died starting. Without one,
            // a failed request is a failure.
            assert!(failpoint.is_some(), "the restarted server did not answer: {e}");
            let status = server.child.wait().await.unwrap();
            assert!(!status.success(), "the server went away without crashing: {status}");
            figures.died_starting += 1;
            figures.at_failpoints += 1;
            trial += 1;
            figures.trials += 1;
            check_offline(&data.join("store"), &acks, &mut figures);
            continue;
        }
        let t2 = Instant::now();
        let trial_acks = Arc::new(Mutex::new(Vec::new()));
        let inflight = Arc::new(Mutex::new(vec![
            Ack {
                name: String::new(),
                rv: 0,
                n: 0
            };
            WRITERS
        ]));
        let mut writers: tokio::task::JoinSet<()> = (0..WRITERS)
            .map(|w| writer(server.url.clone(), trial, w, trial_acks.clone(), inflight.clone()))
            .collect();
        if failpoint.is_some() {
            // The failpoint ends the process, or, when the burst ends before its count is
            // reached, a SIGKILL does.
            tokio::select! {
                _ = server.child.wait() => figures.at_failpoints += 1,
                _ = async { while writers.join_next().await.is_some() {} } => {}
            }
        } else {
            tokio::time::sleep(Duration::from_millis(rng.below(150))).await;
        }
        server.child.start_kill().ok();
        server.child.wait().await.unwrap();
        while let Some(w) = writers.join_next().await {
            w.unwrap();
        }
        let t3 = Instant::now();
        let trial_acks = std::mem::take(&mut *trial_acks.lock().unwrap());
        figures.acked += trial_acks.len();
        acks.extend(trial_acks.iter().cloned());
        check_offline(&data.join("store"), &acks, &mut figures);
        if std::env::var_os("MCO_CRASH_TRACE").is_some() {
            eprintln!(
                "trial {trial}: start {:?} online {:?} burst {:?} offline {:?}",
                t1 - t0,
                t2 - t1,
                t3 - t2,
                t3.elapsed()
            );
        }
        last_trial = (trial_acks, inflight.lock().unwrap().clone());
        trial += 1;
        figures.trials += 1;
        if trial % 100 == 0 {
            eprintln!(
                "crash_server: {trial} trials, {} acknowledged writes checked, {:.0} s",
                figures.acked,
                started.elapsed().as_secs_f64()
            );
        }
    }
    verify_binary(dirs.last().unwrap().path());
    eprintln!(
        "crash_server: {} trials ({} ended by a store failpoint, {} of them while starting; the rest by SIGKILL), {} acknowledged writes checked, {} lost, in {:.1} s",
        figures.trials,
        figures.at_failpoints,
        figures.died_starting,
        figures.acked,
        figures.lost,
        started.elapsed().as_secs_f64()
    );
    assert_eq!(figures.lost, 0);
    assert!(
        figures.acked > 0,
        "no write was acknowledged: the harness tests nothing"
    );
}

#[cfg(feature = "failpoints")]
/// Creates `n` MachineConfigs named `<prefix>-<i>`, returning the acknowledged writes.
async fn create_mcs(url: &str, prefix: &str, n: usize) -> Vec<Ack> {
    let client = reqwest::Client::new();
    let mut acks = Vec::new();
    for i in 0..n {
        let name = format!("{prefix}-{i}");
        let body: Value = http(&client, reqwest::Method::POST, &format!("{url}{MC}"))
            .json(&mc(&name))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let rv = body["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
        acks.push(Ack { name, rv, n: 0 });
    }
    acks
}

#[cfg(feature = "failpoints")]
/// The acknowledged writes still in the log: compaction removes the events before its cut (the
/// objects stay, and [`check_online`] checks them).
fn retained(data: &Path, acks: &[Ack]) -> Vec<Ack> {
    let store = Store::open(&data.join("store")).unwrap();
    let oldest = store.oldest_readable();
    acks.iter().filter(|a| a.rv > oldest).cloned().collect()
}

#[cfg(feature = "failpoints")]
async fn kill(mut server: Server) {
    server.child.start_kill().unwrap();
    server.child.wait().await.unwrap();
}

/// The steps outside the write path: a crash in the 0003 upgrade (before the new schema is
/// recorded), in the index catch-up at open, and in a compaction (after its snapshot, after
/// removing the events) leaves a store that opens, verifies and serves every acknowledged write.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashes_in_the_upgrade_the_index_catch_up_and_compaction_leave_a_store_that_opens() {
    // The upgrade of the frozen schema-2 store.
    let data = tempfile::tempdir().unwrap();
    let _logs = ServerLogs(data.path().to_path_buf());
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/fixtures/0002-store");
    std::fs::create_dir_all(data.path().join("store")).unwrap();
    for f in ["conf", "db"] {
        std::fs::copy(fixture.join(f), data.path().join("store").join(f)).unwrap();
    }
    assert!(
        start(data.path(), Some("store::migrate::before_version=panic"))
            .await
            .is_none(),
        "the failpoint ends the upgrade"
    );
    let server = start(data.path(), None).await.expect("the upgrade resumes");
    let node: Value = http(
        &reqwest::Client::new(),
        reqwest::Method::GET,
        &format!("{}/api/v1/nodes/worker-0", server.url),
    )
    .send()
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let rv: u64 = node["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    assert!(rv >= 4, "the fixture's node, at or after its last event: {node}");
    kill(server).await;
    let mut figures = Figures::default();
    check_offline(&data.path().join("store"), &[], &mut figures);

    // Index catch-up at open, then compaction after its snapshot and after removing events.
    let data = tempfile::tempdir().unwrap();
    let _logs = ServerLogs(data.path().to_path_buf());
    let mut acks = Vec::new();
    for (i, fp) in [
        "store::index::before_batch",
        "store::compact::after_snapshot",
        "store::compact::after_events",
    ]
    .into_iter()
    .enumerate()
    {
        let server = start(data.path(), None).await.expect("starts");
        check_online(&server.url, &acks, &[]).await.expect("the server answers");
        acks.extend(create_mcs(&server.url, &format!("step{i}"), 4).await);
        kill(server).await;
        check_offline(&data.path().join("store"), &retained(data.path(), &acks), &mut figures);
        let failing = start(data.path(), Some(&format!("{fp}=panic"))).await;
        if let Some(server) = failing {
            if fp.starts_with("store::compact") {
                // Compaction runs on request (the index catch-up at open, when the index lags).
                let head = acks.iter().map(|a| a.rv).max().unwrap();
                let r = http(
                    &reqwest::Client::new(),
                    reqwest::Method::POST,
                    &format!("{}/apis/history.mco.dev/v1/store/compactions", server.url),
                )
                .json(&json!({"before": format!("rv:{}", head - 2)}))
                .send()
                .await;
                assert!(r.is_err(), "the failpoint ends the compaction's request");
            }
            kill(server).await;
        }
        check_offline(&data.path().join("store"), &retained(data.path(), &acks), &mut figures);
        verify_binary(data.path());
    }
    let server = start(data.path(), None).await.expect("starts");
    check_online(&server.url, &acks, &[]).await.expect("the server answers");
    kill(server).await;
    assert_eq!(figures.lost, 0);
}
