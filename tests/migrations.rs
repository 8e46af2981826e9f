//! Frozen store-format fixtures (`migrations/fixtures/`) must keep decoding and folding into the
//! same state, whatever later schemas add.

use mco::event::{Event, EventType, SCHEMA_VERSION};
use mco::state::State;
use std::path::Path;

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations/fixtures")
        .join(name)
}

/// The events the 0001 fixture was written from (kept here so the fixture can be rebuilt with
/// `MCO_WRITE_FIXTURES=1 cargo test --test migrations` — only ever for a *new* fixture).
fn schema1_events() -> Vec<Event> {
    let ev = |seq: u64, t: EventType, kind: &str, name: &str, body: serde_json::Value| Event {
        schema: 1,
        seq,
        id: [seq as u8; 16],
        time_ms: 1_764_400_000_000 + seq as i64,
        event_type: t.as_str().into(),
        object_kind: kind.into(),
        name: name.into(),
        actor: "controller:template".into(),
        reason: String::new(),
        detail: String::new(),
        body: serde_json::to_vec(&body).unwrap(),
    };
    let g = "machineconfiguration.openshift.io";
    vec![
        ev(
            1,
            EventType::PoolCreated,
            "MachineConfigPool",
            "worker",
            serde_json::json!({"apiVersion": format!("{g}/v1"), "kind": "MachineConfigPool",
            "metadata": {"name": "worker", "resourceVersion": "1", "generation": 1},
            "spec": {"machineConfigSelector": {"matchLabels": {format!("{g}/role"): "worker"}}, "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}}}}),
        ),
        ev(
            2,
            EventType::MachineConfigCreated,
            "MachineConfig",
            "99-worker-chrony",
            serde_json::json!({"apiVersion": format!("{g}/v1"), "kind": "MachineConfig",
            "metadata": {"name": "99-worker-chrony", "resourceVersion": "2", "labels": {format!("{g}/role"): "worker"}},
            "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": [{"path": "/etc/chrony.conf", "mode": 420, "contents": {"source": "data:,server%20ntp1%0A"}}]}}}}),
        ),
        ev(
            3,
            EventType::NodeRegistered,
            "Node",
            "worker-0",
            serde_json::json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "worker-0", "resourceVersion": "3", "labels": {"node-role.kubernetes.io/worker": ""}}}),
        ),
        ev(
            4,
            EventType::NodeStateChanged,
            "Node",
            "worker-0",
            serde_json::json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "worker-0", "resourceVersion": "4", "labels": {"node-role.kubernetes.io/worker": ""},
            "annotations": {format!("{g}/state"): "Done"}}}),
        ),
        ev(
            5,
            EventType::MachineConfigDeleted,
            "MachineConfig",
            "99-worker-chrony",
            serde_json::json!({"metadata": {"name": "99-worker-chrony"}}),
        ),
    ]
}

#[test]
fn schema_1_fixture_still_decodes_and_folds() {
    let path = fixture("0001-events.bin");
    if std::env::var_os("MCO_WRITE_FIXTURES").is_some() && !path.exists() {
        let mut out = Vec::new();
        for e in schema1_events() {
            let b = e.encode();
            out.extend_from_slice(&(b.len() as u32).to_be_bytes());
            out.extend_from_slice(&b);
        }
        std::fs::write(&path, out).unwrap();
    }
    let bytes = std::fs::read(&path).expect("the frozen fixture is committed");
    let mut events = Vec::new();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        events.push(Event::decode(&rest[4..4 + len]).expect("schema-1 envelope decodes"));
        rest = &rest[4 + len..];
    }
    assert_eq!(events, schema1_events(), "the fixture is frozen: never rewrite it");
    assert!(events.iter().all(|e| e.schema <= SCHEMA_VERSION));
    let mut state = State::default();
    for e in &events {
        state.apply(e);
    }
    assert_eq!(state.seq, 5);
    assert!(state.machine_configs.is_empty());
    assert_eq!(state.pools["worker"].metadata.resource_version.as_deref(), Some("1"));
    let keys = mco::model::Keys::default();
    assert_eq!(
        mco::model::NodeAnnotations::read(&state.nodes["worker-0"], &keys).state,
        "Done"
    );
}

/// The envelope's bytes never change: every event of the frozen fixture encodes today to the
/// exact bytes it was written with (the body is a byte string, which bincode 1.3.3 writes as
/// the sequence of u8 the fixture holds).
#[test]
fn schema_1_fixture_encodes_to_its_frozen_bytes() {
    let bytes = std::fs::read(fixture("0001-events.bin")).expect("the frozen fixture is committed");
    let mut rest = &bytes[..];
    let mut n = 0;
    while !rest.is_empty() {
        let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        let frozen = &rest[4..4 + len];
        let event = Event::decode(frozen).unwrap();
        assert_eq!(event.encode(), frozen, "event {} re-encodes to other bytes", event.seq);
        let mut appended = vec![7u8];
        event.encode_into(&mut appended);
        assert_eq!(&appended[1..], frozen);
        rest = &rest[4 + len..];
        n += 1;
    }
    assert_eq!(n, schema1_events().len());
}

/// A whole store directory written by schema 2 (`migrations/0002-object-index.md`): events
/// (schema 1 and 2 envelopes, a note), the object index, a snapshot. It must keep opening and
/// replaying to the same state. Opened from a copy: sled writes to the directory it opens.
#[tokio::test]
async fn schema_2_store_fixture_opens_and_replays() {
    let path = fixture("0002-store");
    if std::env::var_os("MCO_WRITE_FIXTURES").is_some() && !path.exists() {
        let store = mco::store::Store::open(&path).unwrap();
        let mut events = schema1_events();
        let mut state = State::default();
        for e in &mut events {
            e.schema = 2;
        }
        let mut note = events[0].clone();
        note.seq = 6;
        note.event_type = EventType::PoolSelectingAll.as_str().into();
        note.detail = "This machineconfigpool is selecting all nodes. A non-empty selector is required.".into();
        events.push(note);
        for e in &events[..3] {
            state.apply(e);
        }
        store.append(&events[..3]).unwrap();
        store.write_snapshot(&state).unwrap();
        store.append(&events[3..]).unwrap();
        store.flush().await.unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    for entry in walk(&path) {
        let rel = entry.strip_prefix(&path).unwrap();
        let to = dir.path().join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &to).unwrap();
    }
    let store = mco::store::Store::open(dir.path()).expect("the frozen schema-2 store opens");
    assert_eq!(store.last_seq(), 6);
    let state = store.load_state().unwrap();
    assert_eq!(state.seq, 6);
    assert!(state.machine_configs.is_empty());
    assert_eq!(state.pools["worker"].metadata.resource_version.as_deref(), Some("1"));
    let keys = mco::model::Keys::default();
    assert_eq!(
        mco::model::NodeAnnotations::read(&state.nodes["worker-0"], &keys).state,
        "Done"
    );
    assert_eq!(store.state_at(2).unwrap().machine_configs.len(), 1);
    assert_eq!(
        store.object_seqs("MachineConfigPool", "worker", 0, 6).unwrap(),
        vec![1, 6]
    );
    assert_eq!(
        store.object_seqs("MachineConfig", "99-worker-chrony", 0, 6).unwrap(),
        vec![2, 5]
    );
    // Upgraded to schema 3 (migrations/0003-checksums.md): every record framed with its
    // checksum; then to schema 4 (0004-high-water-mark.md): the mark of the log it holds; and
    // the whole store verifies.
    let report = store.verify().unwrap();
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!(
        (
            report.schema_version,
            report.events,
            report.snapshots,
            report.index_entries
        ),
        (4, 6, 1, 6)
    );
    assert_eq!(report.acknowledged_through, Some(6));
}

/// A whole store directory written by schema 3 (`migrations/0003-checksums.md`): the 0002
/// fixture's events and snapshot, every record framed with its CRC-32. It must keep opening,
/// verifying and replaying to the same state.
#[tokio::test]
async fn schema_3_store_fixture_opens_verifies_and_replays() {
    let path = fixture("0003-store");
    if std::env::var_os("MCO_WRITE_FIXTURES").is_some() && !path.exists() {
        let store = mco::store::Store::open(&path).unwrap();
        let mut events = schema1_events();
        for e in &mut events {
            e.schema = 3;
        }
        let mut state = State::default();
        for e in &events[..3] {
            state.apply(e);
        }
        store.append(&events[..3]).unwrap();
        store.write_snapshot(&state).unwrap();
        store.append(&events[3..]).unwrap();
        store.flush().await.unwrap();
        assert_eq!(store.names("Node").unwrap().len(), 1, "indexed");
    }
    let dir = copy(&path);
    let store = mco::store::Store::open(dir.path()).expect("the frozen schema-3 store opens");
    let report = store.verify().unwrap();
    assert!(report.ok(), "{:?}", report.problems);
    // Upgraded to schema 4 (0004-high-water-mark.md): the mark records the 5 events.
    assert_eq!((report.schema_version, report.events, report.snapshots), (4, 5, 1));
    assert_eq!(report.acknowledged_through, Some(5));
    let state = store.load_state().unwrap();
    assert_eq!(state.seq, 5);
    assert!(state.machine_configs.is_empty());
    assert_eq!(store.state_at(3).unwrap().machine_configs.len(), 1);
    assert_eq!(store.object_seqs("Node", "worker-0", 0, 5).unwrap(), vec![3, 4]);
}

/// The 0003 upgrade resumes after a crash part-way: some records framed, some not, the schema
/// still 2. Reopening frames the rest, and a schema-2 value that does not decode is refused
/// rather than framed (its checksum would vouch for garbage).
#[tokio::test]
async fn the_checksum_upgrade_resumes_and_refuses_an_undecodable_old_record() {
    let dir = copy(&fixture("0002-store"));
    {
        // No background flusher (its thread keeps the file lock after the drop).
        let db = sled::Config::new()
            .path(dir.path())
            .flush_every_ms(None)
            .open()
            .unwrap();
        let events = db.open_tree("events").unwrap();
        for seq in [1u64, 2] {
            let v = events.get(seq.to_be_bytes()).unwrap().unwrap();
            events.insert(seq.to_be_bytes(), mco::store::record::frame(&v)).unwrap();
        }
        db.flush().unwrap();
    }
    wait_for_sled_lock(dir.path());
    let store = mco::store::Store::open(dir.path()).expect("the half-upgraded store opens");
    assert!(store.verify().unwrap().ok());
    assert_eq!(store.load_state().unwrap().seq, 6);
    drop(store);

    let dir = copy(&fixture("0002-store"));
    {
        // No background flusher (its thread keeps the file lock after the drop).
        let db = sled::Config::new()
            .path(dir.path())
            .flush_every_ms(None)
            .open()
            .unwrap();
        let events = db.open_tree("events").unwrap();
        let mut v = events.get(4u64.to_be_bytes()).unwrap().unwrap().to_vec();
        v.truncate(30);
        events.insert(4u64.to_be_bytes(), v).unwrap();
        db.flush().unwrap();
    }
    wait_for_sled_lock(dir.path());
    match mco::store::Store::open(dir.path()) {
        Err(mco::store::StoreError::Corrupt {
            seq: 4,
            tree: "events",
            what,
        }) => {
            assert!(what.starts_with("event envelope does not decode"), "{what}")
        }
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("an undecodable schema-2 record was framed"),
    }
}

/// Waits (10 s at most) until no process holds sled's lock on `<dir>/db`: a dropped sled `Db`
/// releases it only once its last background task lets go of the file, which under load can
/// be after the drop returns (the store opened right after found it still held).
fn wait_for_sled_lock(dir: &Path) {
    use std::os::fd::AsRawFd;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let file = std::fs::File::open(dir.join("db")).expect("sled's db file");
    #[allow(deprecated)]
    while let Err(e) = nix::fcntl::flock(file.as_raw_fd(), nix::fcntl::FlockArg::LockExclusiveNonblock) {
        assert_eq!(e, nix::errno::Errno::EWOULDBLOCK, "flock");
        assert!(
            std::time::Instant::now() < deadline,
            "sled's lock still held 10 s after the drop"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Closing the file releases the probe's own lock.
}

/// A copy of a fixture directory: sled writes to the directory it opens.
fn copy(path: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in walk(path) {
        let rel = entry.strip_prefix(path).unwrap();
        let to = dir.path().join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &to).unwrap();
    }
    dir
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("the frozen fixture is committed") {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
