//! Store integrity (issue 12 item 7, `migrations/0003-checksums.md`): a real store on disk is
//! damaged in each way a disk or an operator can damage it (a flipped byte in an event body, a
//! truncated value, a missing seq, a record under the wrong key, an unframed value, a flipped
//! byte in a snapshot), and the store refuses to open naming the first bad resourceVersion,
//! `mco store verify` exits non-zero with the same, `mco server` refuses to start, and the
//! repairs it suggests give back a store that opens.

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
    assert_eq!(v["schemaVersion"], 3);
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
    assert_eq!(what, "the value has no checksum frame (first byte 0x03, expected 0xc3)");
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
