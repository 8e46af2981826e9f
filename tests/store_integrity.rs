//! Store integrity (issue 12 item 7, `migrations/0003-checksums.md`): a real store on disk is
//! damaged in each way a disk or an operator can damage it (a flipped byte in an event body, a
//! truncated value, a missing seq, a record under the wrong key, an unframed value, a flipped
//! byte in a snapshot), and the store refuses to open naming the first bad resourceVersion,
//! `mco store verify` exits non-zero with the same, `mco server` refuses to start, and the
//! repairs it suggests give back a store that opens.

mod common;

use mco::event::{Event, EventType, SCHEMA_VERSION};
use mco::state::State;
use mco::store::{Store, StoreError};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const EVENTS: u64 = 20;
const SNAPSHOT_AT: u64 = 10;

fn event(seq: u64) -> Event {
    let name = format!("pool-{}", seq % 3);
    let body = serde_json::json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": name, "resourceVersion": seq.to_string()}, "spec": {"paused": seq.is_multiple_of(2)}});
    Event {
        schema: SCHEMA_VERSION,
        seq,
        id: [seq as u8; 16],
        time_ms: 1_764_400_000_000 + seq as i64,
        event_type: if seq <= 3 {
            EventType::PoolCreated
        } else {
            EventType::PoolUpdated
        }
        .as_str()
        .into(),
        object_kind: "MachineConfigPool".into(),
        name,
        actor: "test".into(),
        reason: String::new(),
        detail: String::new(),
        body: serde_json::to_vec(&body).unwrap(),
    }
}

/// A data dir holding a healthy store of [`EVENTS`] events with a snapshot at [`SNAPSHOT_AT`].
async fn healthy() -> tempfile::TempDir {
    let data = tempfile::tempdir().unwrap();
    let store = Store::open(&data.path().join("store")).unwrap();
    let mut state = State::default();
    for seq in 1..=EVENTS {
        let e = event(seq);
        store.append(std::slice::from_ref(&e)).unwrap();
        state.apply(&e);
        if seq == SNAPSHOT_AT {
            store.write_snapshot(&state).unwrap();
        }
    }
    store.flush().await.unwrap();
    // Index the log, as the server's first history read does.
    assert_eq!(store.names("MachineConfigPool").unwrap().len(), 3);
    drop(store);
    data
}

/// Runs `open` until it stops failing on sled's file lock, for at most 10 s: a dropped sled
/// `Db` releases its lock only when its background flusher thread has exited.
fn once_unlocked<T, E: std::fmt::Display>(mut open: impl FnMut() -> Result<T, E>) -> Result<T, E> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match open() {
            Err(e) if e.to_string().contains("could not acquire lock") && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20)); // the flusher's exit has no event to wait on
            }
            r => return r,
        }
    }
}

/// Changes the raw sled tree `tree` of the store in `data` (the store closed).
fn tamper(data: &Path, tree: &str, f: impl FnOnce(&sled::Tree)) {
    let db = once_unlocked(|| sled::Config::new().path(data.join("store")).open()).unwrap();
    f(&db.open_tree(tree).unwrap());
    db.flush().unwrap();
}

fn key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

/// The store's refusal, as (first bad seq, tree, what).
fn refusal(data: &Path) -> (u64, &'static str, String) {
    match once_unlocked(|| Store::open(&data.join("store"))).and_then(|s| s.load_state().map(|_| s)) {
        Err(StoreError::Corrupt { seq, tree, what }) => (seq, tree, what),
        Err(e) => panic!("refused with another error: {e}"),
        Ok(_) => panic!("a damaged store opened and replayed"),
    }
}

fn mco(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mco")).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

fn verify(data: &Path) -> (bool, String) {
    mco(&["store", "verify", "--data-dir", data.to_str().unwrap()])
}

#[tokio::test]
async fn a_healthy_store_verifies() {
    let data = healthy().await;
    let (ok, out) = verify(data.path());
    assert!(ok, "{out}");
    assert!(out.contains("events:           20 (resourceVersions 1..20)"), "{out}");
    assert!(out.contains("snapshots:        1"), "{out}");
    assert!(out.contains("result:           ok"), "{out}");
    let (ok, json) = mco(&[
        "store",
        "verify",
        "--data-dir",
        data.path().to_str().unwrap(),
        "-o",
        "json",
    ]);
    assert!(ok, "{json}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["schemaVersion"], 4);
    assert_eq!(v["problems"], serde_json::json!([]));
    assert_eq!(v["indexEntries"], 20);
}

#[tokio::test]
async fn a_flipped_byte_in_an_event_body_is_refused_at_its_resource_version() {
    let data = healthy().await;
    tamper(data.path(), "events", |t| {
        let mut v = t.get(key(7)).unwrap().unwrap().to_vec();
        let at = v.len() - 10; // inside the JSON body, the envelope's last field
        v[at] ^= 0x01;
        t.insert(key(7), v).unwrap();
    });
    let (seq, tree, what) = refusal(data.path());
    assert_eq!((seq, tree), (7, "events"));
    assert!(what.starts_with("checksum mismatch"), "{what}");
    let (ok, out) = verify(data.path());
    assert!(!ok, "verify exits non-zero: {out}");
    assert!(out.contains("result:           CORRUPT, 1 problem(s)"), "{out}");
    assert!(out.contains("events at resourceVersion 7: checksum mismatch"), "{out}");
    assert!(out.contains("mco store truncate --data-dir DIR --after 6"), "{out}");
}

#[tokio::test]
async fn a_truncated_value_is_refused() {
    let data = healthy().await;
    tamper(data.path(), "events", |t| {
        let v = t.get(key(12)).unwrap().unwrap().to_vec();
        t.insert(key(12), &v[..v.len() / 2]).unwrap();
        t.insert(key(15), &v[..3]).unwrap();
    });
    let (seq, _, what) = refusal(data.path());
    assert_eq!(seq, 12, "the first bad one");
    assert!(what.starts_with("checksum mismatch"), "{what}");
    let (ok, out) = verify(data.path());
    assert!(!ok);
    assert!(
        out.contains("events at resourceVersion 15: the value is truncated (3 bytes"),
        "{out}"
    );
}

#[tokio::test]
async fn a_missing_seq_is_refused() {
    let data = healthy().await;
    tamper(data.path(), "events", |t| {
        t.remove(key(9)).unwrap();
        t.remove(key(10)).unwrap();
    });
    let (seq, tree, what) = refusal(data.path());
    assert_eq!((seq, tree), (9, "events"));
    assert_eq!(
        what,
        "missing: the next retained event is resourceVersion 11 (2 missing)"
    );
    let (ok, out) = verify(data.path());
    assert!(!ok);
    // The index still names the removed events.
    assert!(
        out.contains("index at resourceVersion 9: the index names an event the log does not hold"),
        "{out}"
    );
}

#[tokio::test]
async fn a_record_under_another_key_or_without_its_frame_is_refused() {
    let data = healthy().await;
    tamper(data.path(), "events", |t| {
        let five = t.get(key(5)).unwrap().unwrap();
        t.insert(key(6), five).unwrap();
    });
    let (seq, _, what) = refusal(data.path());
    assert_eq!(seq, 6);
    assert_eq!(what, "the record stored under it says resourceVersion 5");

    let data = healthy().await;
    tamper(data.path(), "events", |t| {
        // What a schema-2 build would have written: the bare envelope.
        t.insert(key(4), event(4).encode()).unwrap();
    });
    let (seq, _, what) = refusal(data.path());
    assert_eq!(seq, 4);
    assert_eq!(what, "the value has no checksum frame (first byte 0x04, expected 0xc3)");
}

#[tokio::test]
async fn a_damaged_snapshot_is_refused_and_can_be_dropped() {
    let data = healthy().await;
    tamper(data.path(), "snapshots", |t| {
        let mut v = t.get(key(SNAPSHOT_AT)).unwrap().unwrap().to_vec();
        let at = v.len() / 2;
        v[at] ^= 0x20;
        t.insert(key(SNAPSHOT_AT), v).unwrap();
    });
    let (seq, tree, what) = refusal(data.path());
    assert_eq!((seq, tree), (SNAPSHOT_AT, "snapshots"));
    assert!(what.starts_with("checksum mismatch"), "{what}");
    let (ok, out) = verify(data.path());
    assert!(!ok);
    assert!(out.contains("--drop-snapshot 10"), "{out}");
    // The repair: the snapshot is derived from events the log still holds.
    let (ok, out) = mco(&[
        "store",
        "verify",
        "--data-dir",
        data.path().to_str().unwrap(),
        "--drop-snapshot",
        "10",
    ]);
    assert!(ok, "{out}");
    assert!(out.contains("removed the snapshot at resourceVersion 10"), "{out}");
    let state = once_unlocked(|| Store::open(&data.path().join("store")))
        .unwrap()
        .load_state()
        .unwrap();
    assert_eq!(state.seq, EVENTS);
}

#[tokio::test]
async fn truncating_after_the_last_good_event_gives_a_store_that_opens() {
    let data = healthy().await;
    tamper(data.path(), "events", |t| {
        let mut v = t.get(key(14)).unwrap().unwrap().to_vec();
        v[20] ^= 0xff;
        t.insert(key(14), v).unwrap();
    });
    assert_eq!(refusal(data.path()).0, 14);
    let (ok, out) = mco(&[
        "store",
        "truncate",
        "--data-dir",
        data.path().to_str().unwrap(),
        "--after",
        "13",
    ]);
    assert!(ok, "{out}");
    assert_eq!(
        out,
        "removed 7 events after resourceVersion 13; the log now ends at resourceVersion 13\n"
    );
    let (ok, out) = verify(data.path());
    assert!(ok, "{out}");
    let store = Store::open(&data.path().join("store")).unwrap();
    assert_eq!(store.load_state().unwrap().seq, 13);
    assert_eq!(
        store.object_seqs("MachineConfigPool", "pool-2", 0, 100).unwrap(),
        vec![2, 5, 8, 11]
    );
}

#[tokio::test]
async fn the_server_refuses_to_start_on_a_corrupt_store() {
    let data = healthy().await;
    tamper(data.path(), "events", |t| {
        let mut v = t.get(key(3)).unwrap().unwrap().to_vec();
        let last = v.len() - 1;
        v[last] ^= 0x04;
        t.insert(key(3), v).unwrap();
    });
    let out = Command::new(env!("CARGO_BIN_EXE_mco"))
        .args([
            "server",
            "--data-dir",
            data.path().to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the event log is corrupt at resourceVersion 3 (events: checksum mismatch"),
        "{err}"
    );
    assert!(err.contains("restore the data directory from a backup"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("listening"));
}

#[tokio::test]
async fn verify_explains_a_store_from_before_checksums_and_one_in_use() {
    let data = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/fixtures/0002-store");
    std::fs::create_dir_all(data.path().join("store")).unwrap();
    for f in ["conf", "db"] {
        std::fs::copy(fixture.join(f), data.path().join("store").join(f)).unwrap();
    }
    let (ok, out) = verify(data.path());
    assert!(!ok);
    assert!(
        out.contains("the store has schema 2, from before record checksums (migrations/0003-checksums.md): start `mco server` on it once to upgrade it"),
        "{out}"
    );
    let data = healthy().await;
    let _open = Store::open(&data.path().join("store")).unwrap();
    let (ok, out) = verify(data.path());
    assert!(!ok);
    assert!(out.contains("the store is in use (held by pid"), "{out}");
    assert!(out.contains("stop the server first"), "{out}");
}

// ---- Random damage to every store file (issue 23 item 2) ----

/// xorshift64*: the trials' randomness, reproducible from `MCO_DAMAGE_SEED`.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}

/// Every key and value of every tree, and the mark's bytes: what "nothing lost" compares.
type Contents = Vec<(String, Vec<(Vec<u8>, Vec<u8>)>)>;

/// The raw contents of the store in `dir` as sled's recovery gives them back (no mco check),
/// or `None` when sled cannot open or read it.
fn raw_contents(dir: &Path) -> Option<Contents> {
    let db = std::panic::catch_unwind(|| sled::Config::new().path(dir).open())
        .ok()?
        .ok()?;
    let mut out = Contents::new();
    for tree in ["events", "snapshots", "meta", "index"] {
        let t = db.open_tree(tree).ok()?;
        let kv: Option<Vec<_>> = t
            .iter()
            .map(|r| r.ok().map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect();
        out.push((tree.into(), kv?));
    }
    out.push((
        "mark".into(),
        vec![(vec![], std::fs::read(dir.join("high-water-mark")).ok()?)],
    ));
    Some(out)
}

/// Copies the store directory `from` (sled's `conf`, `db`, `snap.*`, `blobs/`, the mark) to `to`.
fn copy_store(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_store(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// The files of a store directory by kind: `db`, `conf`, `blobs`, `snap` (sled's page-table
/// snapshots), `mark`.
fn store_files(dir: &Path) -> std::collections::BTreeMap<&'static str, Vec<std::path::PathBuf>> {
    let mut out: std::collections::BTreeMap<&'static str, Vec<_>> = Default::default();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        let kind = match name.as_str() {
            "db" => "db",
            "conf" => "conf",
            "high-water-mark" => "mark",
            "blobs" => {
                for b in std::fs::read_dir(e.path()).unwrap() {
                    out.entry("blobs").or_default().push(b.unwrap().path());
                }
                continue;
            }
            n if n.starts_with("snap.") => "snap",
            _ => continue,
        };
        out.entry(kind).or_default().push(e.path());
    }
    out
}

/// A MachineConfig with one file of `size` bytes (`size` over sled's 128 KiB page threshold
/// puts it in `blobs/`).
fn big_mc(name: &str, size: usize) -> serde_json::Value {
    let contents = format!("data:,{}", "a".repeat(size));
    serde_json::json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": [
            {"path": format!("/etc/{name}"), "mode": 420, "contents": {"source": contents}}]}}}})
}

/// A real store written by the server (MachineConfigs, large ones among them so that sled keeps
/// blobs, and the controllers' own events), stopped; then each kind of store file gets one
/// random byte changed in at least 30 independent copies. Each copy is either refused (with an
/// error naming the last resourceVersion it can prove and the repair, a claim checked against
/// the copy) or opens with every event the server acknowledged, byte for byte; a refusal of a
/// copy whose every record sled still returns intact (mark included) is a false alarm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_damage_to_any_store_file_is_refused_or_harmless() {
    // Stopped cleanly (sled writes its page table at close), and killed (sled's recovery then
    // scans the tail of its log, and stops at a damaged record: the case of issue 23).
    let graceful = damage_trials(false).await;
    let killed = damage_trials(true).await;
    eprintln!("refused for acknowledged events missing: {graceful} (clean stop), {killed} (killed)");
}

/// What sled's recovery does after a damaged record of its log (drops it and every record
/// after it, silently), done exactly: the tail of a flushed store removed behind mco's back.
/// The store is refused, naming the last resourceVersion the log holds and the repair, and
/// `mco store truncate` (accepting the loss) gives a store that opens. A log ahead of the mark
/// (a crash between sled's flush and the mark's write) opens.
#[tokio::test]
async fn acknowledged_events_sled_drops_are_refused_and_a_lagging_mark_is_not() {
    let data = healthy().await;
    tamper(data.path(), "events", |t| {
        for seq in 16..=EVENTS {
            t.remove(key(seq)).unwrap();
        }
    });
    let (seq, tree, what) = refusal(data.path());
    assert_eq!((seq, tree), (16, "events"));
    assert!(
        what.contains("the log ends at resourceVersion 15, but the high-water mark")
            && what.contains("5 acknowledged events lost"),
        "{what}"
    );
    let (ok, out) = verify(data.path());
    assert!(!ok, "{out}");
    assert!(
        out.contains("events at resourceVersion 16: missing: the log ends at resourceVersion 15"),
        "{out}"
    );
    assert!(out.contains("mco store truncate --data-dir DIR --after 15"), "{out}");
    let (ok, out) = mco(&[
        "store",
        "truncate",
        "--data-dir",
        data.path().to_str().unwrap(),
        "--after",
        "15",
    ]);
    assert!(ok, "{out}");
    let store = once_unlocked(|| Store::open(&data.path().join("store"))).unwrap();
    assert_eq!(store.load_state().unwrap().seq, 15);
    drop(store);

    // The mark behind the log: what a crash between sled's flush and the mark's write leaves.
    let data = healthy().await;
    let mark_file = data.path().join("store/high-water-mark");
    let behind = {
        // The mark of the first 12 events of the same log.
        let mut chain = 0u32;
        let db = once_unlocked(|| sled::Config::new().path(data.path().join("store")).open()).unwrap();
        let events = db.open_tree("events").unwrap();
        for seq in 1..=12u64 {
            let v = events.get(key(seq)).unwrap().unwrap();
            chain = mco::store::mark::chain(chain, seq, mco::store::mark::record_crc(&v));
        }
        mco::store::mark::Mark { seq: 12, chain }
    };
    mco::store::mark::write(&data.path().join("store"), behind).unwrap();
    let store = once_unlocked(|| Store::open(&data.path().join("store"))).unwrap();
    assert_eq!(store.load_state().unwrap().seq, EVENTS, "a lagging mark is not a loss");
    drop(store);
    // A mark whose chain differs (a record replaced by another valid one) is refused.
    mco::store::mark::write(
        &data.path().join("store"),
        mco::store::mark::Mark {
            seq: 12,
            chain: behind.chain ^ 1,
        },
    )
    .unwrap();
    let (seq, _, what) = refusal(data.path());
    assert_eq!(seq, 1, "nothing can be proven");
    assert!(what.contains("are not the acknowledged ones"), "{what}");
    // A missing mark in a schema-4 store is refused.
    std::fs::remove_file(&mark_file).unwrap();
    let (seq, tree, what) = refusal(data.path());
    assert_eq!((seq, tree), (EVENTS + 1, "mark"), "{what}");
    assert!(what.contains("is missing"), "{what}");
}

/// Writes a store with the server (in process, stopped; or the binary, SIGKILLed after its
/// last acknowledgement), then damages copies of it; returns how many were refused because
/// acknowledged events were missing.
async fn damage_trials(kill: bool) -> u32 {
    let started = Instant::now();
    let seed: u64 = std::env::var("MCO_DAMAGE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_0023);
    let data = tempfile::tempdir().unwrap();
    let (url, token, mut child, server) = if kill {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"))
            .args([
                "server",
                "--data-dir",
                data.path().to_str().unwrap(),
                "--listen",
                "127.0.0.1:0",
            ])
            .env("RUST_LOG", "error")
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("the server starts within a minute")
            .unwrap()
            .unwrap();
        let url = line.strip_prefix("mco server listening on ").unwrap().to_string();
        let token = mco::credentials::read_secret_file(&data.path().join(mco::credentials::ADMIN_TOKEN_FILE)).unwrap();
        (url, token, Some(child), None)
    } else {
        let server = common::start_server(data.path()).await;
        (server.url(), server.admin_token().unwrap(), None, Some(server))
    };
    let http = reqwest::Client::new();
    let mut acked = Vec::new();
    for i in 0..100usize {
        let size = if i % 25 == 3 && !kill { 160 * 1024 } else { 64 + i * 16 };
        let r = http
            .post(format!(
                "{url}/apis/machineconfiguration.openshift.io/v1/machineconfigs"
            ))
            .bearer_auth(&token)
            .json(&big_mc(&format!("damage-{i:02}"), size))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
        let v: serde_json::Value = r.json().await.unwrap();
        acked.push(
            v["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap(),
        );
    }
    if let Some(server) = server {
        server.stop().await;
    }
    if let Some(child) = child.as_mut() {
        child.kill().await.unwrap();
    }
    let pristine = data.path().join("store");
    let (expected, state) = {
        let store = once_unlocked(|| Store::open(&pristine)).unwrap();
        let evs: Vec<Event> = store.read_after(0).map(|e| e.unwrap()).collect();
        (evs, store.load_state().unwrap())
    };
    let _ = once_unlocked(|| sled::Config::new().path(&pristine).open()).unwrap();
    let last = expected.last().unwrap().seq;
    assert!(
        acked.iter().all(|rv| *rv <= last),
        "every acknowledged write is in the log"
    );
    let files = store_files(&pristine);
    for kind in ["db", "conf", "blobs", "mark"] {
        if kind == "blobs" && kill {
            continue; // small values only: sled's log then holds every record
        }
        assert!(files.contains_key(kind), "the store has {kind} files: {files:?}");
    }
    let pristine_raw = raw_contents(&pristine).expect("the pristine store reads");
    let mut rng = Rng(seed);
    let mut tally: std::collections::BTreeMap<&str, (u32, u32)> = Default::default();
    let mut binaries_checked = 0;
    let mut lost_through_mark = 0;
    for (kind, paths) in &files {
        for trial in 0..30 {
            let file = &paths[rng.below(paths.len() as u64) as usize];
            let rel = file.strip_prefix(&pristine).unwrap().to_path_buf();
            let mut bytes = std::fs::read(file).unwrap();
            // A byte of the written part (sled preallocates its segments with zeros).
            let written = bytes.iter().rposition(|b| *b != 0).map_or(bytes.len(), |i| i + 1);
            let at = rng.below(written as u64) as usize;
            bytes[at] ^= 1 + rng.below(255) as u8;
            // One damaged copy per reader: sled's recovery rewrites what it opens (it cuts its
            // log at the damage), so no reader may see what another one left.
            let damaged = || {
                let copy = tempfile::tempdir().unwrap();
                copy_store(&pristine, &copy.path().join("store"));
                std::fs::write(copy.path().join("store").join(&rel), &bytes).unwrap();
                copy
            };
            let copy = damaged();
            let dir = copy.path().join("store");
            let what = format!("seed {seed:#x}, {kind} trial {trial}: byte {at} of {}", rel.display());
            let intact = raw_contents(&damaged().path().join("store")).is_some_and(|c| c == pristine_raw);
            let opened = std::panic::catch_unwind(|| Store::open(&dir))
                .unwrap_or_else(|_| panic!("{what}: opening the store panicked"));
            if std::env::var("MCO_DAMAGE_DEBUG").is_ok() {
                eprintln!("{what}: open: {:?}", opened.as_ref().err().map(|e| e.to_string()));
            }
            match opened.and_then(|s| s.load_state().map(|st| (s, st))) {
                Ok((store, st)) => {
                    let evs: Vec<Event> = store.read_after(0).map(|e| e.unwrap()).collect();
                    assert!(
                        evs == expected,
                        "{what}: opened with {} of {} events",
                        evs.len(),
                        expected.len()
                    );
                    assert!(st == state, "{what}: opened with another state");
                    tally.entry(kind).or_default().0 += 1;
                }
                Err(e) => {
                    assert!(!intact, "{what}: refused a store that lost nothing: {e}");
                    let text = e.to_string();
                    assert!(
                        text.contains("mco store verify --data-dir DIR") && text.contains("from a backup"),
                        "{what}: the refusal names the repair: {text}"
                    );
                    if text.contains("acknowledged events lost") {
                        lost_through_mark += 1;
                    }
                    if let StoreError::Corrupt { seq, tree, .. } = &e {
                        // The claim: the records before `seq` are the acknowledged ones.
                        let sled_pages = text.contains("`mco store truncate` cannot help here");
                        if *tree != "snapshots" && *seq > 1 && !sled_pages {
                            assert!(text.contains(&format!("--after {}", seq - 1)), "{what}: {text}");
                            // The repair offered works: after it the store opens with the
                            // acknowledged events before `seq`.
                            let repaired = damaged();
                            let dir = repaired.path().join("store");
                            Store::open_for_repair(&dir)
                                .unwrap()
                                .truncate_after(seq - 1)
                                .unwrap_or_else(|e| panic!("{what}: the repair {text} fails: {e}"));
                            let store = once_unlocked(|| Store::open(&dir))
                                .unwrap_or_else(|e| panic!("{what}: refused after the repair {text}: {e}"));
                            assert_eq!(store.last_seq(), seq - 1, "{what}: after the repair");
                            drop(store);
                            let claim = damaged();
                            let store = Store::open_for_repair(&claim.path().join("store")).unwrap();
                            let before: Vec<Event> = store
                                .read_range(0, seq - 1)
                                .map(|e| {
                                    e.unwrap_or_else(|e| panic!("{what}: {e}, reading what {text} says is intact"))
                                })
                                .collect();
                            assert!(
                                before[..] == expected[..(*seq as usize - 1).min(expected.len())],
                                "{what}: the events before resourceVersion {seq} are not the acknowledged ones"
                            );
                        }
                    } else {
                        assert!(text.contains("no resourceVersion can be proven"), "{what}: {text}");
                    }
                    if trial < 2 {
                        // `mco store verify` and `mco server` say the same.
                        binaries_checked += 1;
                        let (copy_v, copy_s) = (damaged(), damaged());
                        let (ok, out) = verify(copy_v.path());
                        assert!(!ok, "{what}: verify passed a refused store: {out}");
                        // The same words, about the copy the binary read.
                        let first_line = text.split(';').next().unwrap();
                        let as_in = |c: &tempfile::TempDir| {
                            first_line.replace(copy.path().to_str().unwrap(), c.path().to_str().unwrap())
                        };
                        assert!(
                            out.contains(&as_in(&copy_v)),
                            "{what}: verify says\n{out}\nthe store said {text}"
                        );
                        let out = Command::new(env!("CARGO_BIN_EXE_mco"))
                            .args([
                                "server",
                                "--data-dir",
                                copy_s.path().to_str().unwrap(),
                                "--listen",
                                "127.0.0.1:0",
                            ])
                            .output()
                            .unwrap();
                        assert!(!out.status.success(), "{what}: the server started");
                        let err = String::from_utf8_lossy(&out.stderr);
                        assert!(err.contains(&as_in(&copy_s)), "{what}: the server said {err}");
                    }
                    tally.entry(kind).or_default().1 += 1;
                }
            }
        }
    }
    eprintln!(
        "random store damage ({}): {} (opened whole, refused) per file kind; {binaries_checked} refusals checked with the binaries; {:.1} s",
        if kill { "server killed" } else { "server stopped" },
        tally.iter().map(|(k, (o, r))| format!("{k}: {o}/{r}")).collect::<Vec<_>>().join(", "),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(tally["mark"], (0, 30), "every damaged mark is refused");
    lost_through_mark
}
