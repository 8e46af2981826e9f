//! The event log's behaviour on both backends: sled in a temporary directory, and etcd (a real
//! member the test starts on loopback). The same assertions run against each: append after
//! the head and the refusal of an out-of-order one, range reads, one object's history,
//! snapshots and time travel, compaction and the refusal of reads before it, and reopening.
//! Then what only etcd has: records split over several values, batches over several
//! transactions (all or nothing), the writer's fence, and damage in etcd named at open.

mod common;

use common::etcd::{have_etcd, Etcd};
use mco::event::{Event, EventType, SCHEMA_VERSION};
use mco::state::State;
use mco::store::etcd::EtcdLog;
use mco::store::{Store, StoreError};
use std::sync::Arc;

fn pool_event(seq: u64, name: &str, body_pad: usize) -> Event {
    let body = serde_json::json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": name, "resourceVersion": seq.to_string(), "annotations": {"pad": "x".repeat(body_pad)}},
        "spec": {"paused": seq.is_multiple_of(2)},
    });
    Event {
        schema: SCHEMA_VERSION,
        seq,
        id: *uuid::Uuid::now_v7().as_bytes(),
        time_ms: 1_000 + 10 * seq as i64,
        event_type: if seq == 1 {
            EventType::PoolCreated
        } else {
            EventType::PoolUpdated
        }
        .as_str()
        .to_string(),
        object_kind: "MachineConfigPool".into(),
        name: name.into(),
        actor: "test".into(),
        reason: String::new(),
        detail: String::new(),
        body: serde_json::to_vec(&body).unwrap(),
    }
}

/// Where a test's log lives, so that it can be opened again.
enum Backend {
    Sled(tempfile::TempDir),
    Etcd { etcd: Arc<Etcd>, prefix: String },
}

impl Backend {
    fn sled() -> Backend {
        Backend::Sled(tempfile::tempdir().unwrap())
    }

    fn etcd(etcd: &Arc<Etcd>, prefix: &str) -> Backend {
        Backend::Etcd {
            etcd: etcd.clone(),
            prefix: prefix.to_string(),
        }
    }

    async fn open(&self) -> Result<Store, StoreError> {
        match self {
            Backend::Sled(dir) => Store::open(dir.path()),
            Backend::Etcd { etcd, prefix } => {
                let log = EtcdLog::connect(etcd.config("test", prefix)).await?;
                assert_eq!(log.try_acquire().await?, None, "the writer lease is free");
                Store::open_etcd(log, mco::store::SNAPSHOT_EVERY).await
            }
        }
    }

    /// Closes a store so that it can be opened again at once (etcd: its lease released).
    async fn close(&self, store: Store) {
        if let Some(log) = store.remote() {
            log.release().await;
        }
        drop(store);
    }
}

/// Both backends when etcd is installed, sled alone otherwise (the etcd half says it skipped).
async fn backends(test: &str, prefix: &str) -> Vec<Backend> {
    let mut out = vec![Backend::sled()];
    if have_etcd(test) {
        out.push(Backend::etcd(&Arc::new(Etcd::start().await), prefix));
    }
    out
}

fn label(b: &Backend) -> &'static str {
    match b {
        Backend::Sled(_) => "sled",
        Backend::Etcd { .. } => "etcd",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_reads_and_reopening_agree_on_both_backends() {
    for b in backends("appends_reads_and_reopening_agree_on_both_backends", "/mco/").await {
        let store = b.open().await.unwrap();
        let events: Vec<Event> = (1..=40)
            .map(|s| pool_event(s, if s.is_multiple_of(2) { "a" } else { "b" }, 10))
            .collect();
        store.append(&events[..10]).unwrap();
        store.flush().await.unwrap();
        store.append(&events[10..]).unwrap();
        store.flush().await.unwrap();
        assert_eq!((store.last_seq(), store.flushed_seq()), (40, 40), "{}", label(&b));
        let err = store.append(&[pool_event(40, "a", 0)]).unwrap_err();
        assert!(
            matches!(err, StoreError::OutOfOrder { got: 40, last: 40 }),
            "{}: {err}",
            label(&b)
        );
        let range: Vec<u64> = store.read_range(5, 9).map(|e| e.unwrap().seq).collect();
        assert_eq!(range, vec![6, 7, 8, 9]);
        assert_eq!(store.event(17).unwrap().unwrap().body, events[16].body);
        assert_eq!(
            store.object_seqs("MachineConfigPool", "a", 30, 40).unwrap(),
            vec![32, 34, 36, 38, 40]
        );
        assert_eq!(store.seq_at_time(1_000 + 10 * 25 + 5).unwrap(), 25);
        let state = store.load_state().unwrap();
        b.close(store).await;

        let store = b.open().await.unwrap();
        assert_eq!(store.last_seq(), 40, "{}: reopened", label(&b));
        let reread: Vec<Event> = store.read_range(0, 40).map(|e| e.unwrap()).collect();
        assert_eq!(reread, events, "{}: every record as appended", label(&b));
        assert_eq!(store.load_state().unwrap(), state);
        assert_eq!(
            store.object_seqs("MachineConfigPool", "b", 0, 10).unwrap(),
            vec![1, 3, 5, 7, 9]
        );
        // Appending goes on after the reopened head.
        store.append(&[pool_event(41, "a", 0)]).unwrap();
        store.flush().await.unwrap();
        b.close(store).await;
        assert_eq!(b.open().await.unwrap().last_seq(), 41);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_time_travel_and_compaction_agree_on_both_backends() {
    for b in backends("snapshots_time_travel_and_compaction_agree_on_both_backends", "/mco-c/").await {
        let store = b.open().await.unwrap().with_snapshot_every(5);
        let mut state = State::default();
        let mut at = Vec::new();
        for s in 1..=40u64 {
            let e = pool_event(s, if s.is_multiple_of(2) { "even" } else { "odd" }, 0);
            store.append(std::slice::from_ref(&e)).unwrap();
            state.apply(&e);
            at.push(state.clone());
            if s.is_multiple_of(5) {
                store.write_snapshot(&state).unwrap();
            }
        }
        store.flush().await.unwrap();
        for s in [3u64, 10, 24, 25, 33] {
            assert_eq!(
                store.state_at(s).unwrap(),
                at[s as usize - 1],
                "{}: state at {s}",
                label(&b)
            );
        }
        let store2 = store.clone();
        let report = tokio::task::spawn_blocking(move || store2.compact(26))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (report.events_removed, report.oldest_resource_version),
            (25, 25),
            "{}",
            label(&b)
        );
        assert!(matches!(
            store.state_at(24),
            Err(StoreError::Compacted { seq: 24, oldest: 25 })
        ));
        assert_eq!(store.state_at(25).unwrap(), at[24]);
        b.close(store).await;

        // A store opened after the compaction starts from the cut.
        let store = b.open().await.unwrap();
        assert_eq!(store.oldest_readable(), 25, "{}: reopened after compaction", label(&b));
        assert!(
            matches!(store.state_at(24), Err(StoreError::Compacted { .. })),
            "{}",
            label(&b)
        );
        assert_eq!(store.state_at(30).unwrap(), at[29], "{}", label(&b));
        assert_eq!(store.load_state().unwrap(), state, "{}", label(&b));
        assert_eq!(store.read_range(0, 40).count(), 15);
        assert_eq!(
            store.object_seqs("MachineConfigPool", "even", 0, 40).unwrap(),
            vec![26, 28, 30, 32, 34, 36, 38, 40]
        );
        b.close(store).await;
    }
}

/// What only etcd needs: a record larger than one etcd value, and a batch larger than one
/// transaction (etcd's defaults: 1.5 MiB requests, 128 operations), written and read back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_splits_large_records_and_batches_over_transactions() {
    if !have_etcd("etcd_splits_large_records_and_batches_over_transactions") {
        return;
    }
    let etcd = Arc::new(Etcd::start().await);
    let b = Backend::etcd(&etcd, "/mco/");
    let store = b.open().await.unwrap();
    // 1.4 MiB: over etcd's default request limit once framed with the envelope.
    let big = pool_event(1, "big", 1_400_000);
    let many: Vec<Event> = (2..=301).map(|s| pool_event(s, "many", 2_000)).collect();
    store.append(std::slice::from_ref(&big)).unwrap();
    store.flush().await.unwrap();
    store.append(&many).unwrap();
    store.flush().await.unwrap();
    b.close(store).await;
    let store = b.open().await.unwrap();
    assert_eq!(store.event(1).unwrap().unwrap(), big);
    let reread: Vec<Event> = store.read_range(1, 301).map(|e| e.unwrap()).collect();
    assert_eq!(reread, many);
    b.close(store).await;
}

/// A batch over several transactions cut short (the writer lost between two of them) is not
/// in the log for the next writer, which clears it and appends after the old head.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_a_batch_cut_short_is_none_of_the_log() {
    if !have_etcd("etcd_a_batch_cut_short_is_none_of_the_log") {
        return;
    }
    let etcd = Arc::new(Etcd::start().await);
    let b = Backend::etcd(&etcd, "/mco/");
    let store = b.open().await.unwrap();
    store.append(&[pool_event(1, "p", 0)]).unwrap();
    store.flush().await.unwrap();
    let batch: Vec<Event> = (2..=400).map(|s| pool_event(s, "p", 3_000)).collect();
    store.append(&batch).unwrap();
    fail::cfg("store::etcd::between_transactions", "return").unwrap();
    let err = store.flush().await.unwrap_err();
    fail::remove("store::etcd::between_transactions");
    assert!(err.to_string().contains("between_transactions"), "{err}");
    b.close(store).await;

    let store = b.open().await.unwrap();
    assert_eq!(store.last_seq(), 1, "none of the cut-short batch is in the log");
    assert_eq!(store.read_range(0, 400).count(), 1);
    let next: Vec<Event> = (2..=3).map(|s| pool_event(s, "q", 0)).collect();
    store.append(&next).unwrap();
    store.flush().await.unwrap();
    b.close(store).await;
    let store = b.open().await.unwrap();
    let reread: Vec<Event> = store.read_range(0, 400).map(|e| e.unwrap()).collect();
    assert_eq!(
        reread.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
        ["p", "q", "q"]
    );
    b.close(store).await;
}

/// One writer at a time: a second server finds the lease held and is named the holder; when
/// the first gives it up the second takes over, and the first's writes are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_the_writer_lease_fences_a_deposed_writer() {
    if !have_etcd("etcd_the_writer_lease_fences_a_deposed_writer") {
        return;
    }
    let etcd = Etcd::start().await;
    let first = EtcdLog::connect(etcd.config("first", "/mco/")).await.unwrap();
    assert_eq!(first.try_acquire().await.unwrap(), None);
    let store = Store::open_etcd(first.clone(), mco::store::SNAPSHOT_EVERY)
        .await
        .unwrap();
    store.append(&[pool_event(1, "p", 0)]).unwrap();
    store.flush().await.unwrap();

    let second = EtcdLog::connect(etcd.config("second", "/mco/")).await.unwrap();
    assert_eq!(second.try_acquire().await.unwrap().as_deref(), Some("first"));
    first.release().await;
    assert_eq!(
        second.try_acquire().await.unwrap(),
        None,
        "free once the first released it"
    );
    let taken = Store::open_etcd(second.clone(), mco::store::SNAPSHOT_EVERY)
        .await
        .unwrap();
    assert_eq!(taken.last_seq(), 1);

    store.append(&[pool_event(2, "p", 0)]).unwrap();
    let err = store.flush().await.unwrap_err();
    assert!(matches!(err, StoreError::Fenced { .. }), "{err}");
    assert!(first.lost(), "the deposed writer knows it lost the lease");
    taken.append(&[pool_event(2, "q", 0)]).unwrap();
    taken.flush().await.unwrap();
    assert_eq!(taken.event(2).unwrap().unwrap().name, "q");
}

/// Damage in etcd is refused at open, naming the first bad resourceVersion: a flipped byte in
/// a record, and a record missing below the head.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_damage_is_named_at_open() {
    if !have_etcd("etcd_damage_is_named_at_open") {
        return;
    }
    let etcd = Arc::new(Etcd::start().await);
    for (prefix, damage) in [("/flip/", "flip"), ("/gone/", "delete"), ("/headless/", "head")] {
        let b = Backend::etcd(&etcd, prefix);
        let store = b.open().await.unwrap();
        let events: Vec<Event> = (1..=5).map(|s| pool_event(s, "p", 0)).collect();
        store.append(&events).unwrap();
        store.flush().await.unwrap();
        b.close(store).await;
        let mut raw = etcd.client().await;
        let key = format!("{prefix}events/{:020}", 3);
        if damage == "flip" {
            let mut v = raw.get(key.clone(), None).await.unwrap().kvs()[0].value().to_vec();
            let last = v.len() - 1;
            v[last] ^= 0x01;
            raw.put(key, v, None).await.unwrap();
        } else if damage == "delete" {
            raw.delete(key, None).await.unwrap();
        } else {
            // The head gone: the log must not look empty (nor a backup of it).
            raw.delete(format!("{prefix}head"), None).await.unwrap();
        }
        let err = b.open().await.err().expect("a damaged log is refused");
        let at = if damage == "head" { 1 } else { 3 };
        match &err {
            StoreError::Corrupt { seq, tree: "etcd", .. } if *seq == at => {}
            other => panic!("{damage}: expected corruption at {at} in etcd, got {other}"),
        }
        if damage == "head" {
            assert!(err.to_string().contains("records up to 5 are stored"), "{err}");
            let log = EtcdLog::connect(etcd.config("export", prefix)).await.unwrap();
            let export = mco::store::etcd_export_entries(&log).await;
            assert!(export.is_err(), "an export of a headless log is refused");
        }
        assert!(err.to_string().contains("etcdctl snapshot restore"), "{err}");
    }
}

fn mco(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mco"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mco {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn entries(path: &std::path::Path) -> Vec<mco::store::export::Entry> {
    mco::store::export::read_entries(&mut std::fs::File::open(path).unwrap()).unwrap()
}

/// sled → export → etcd → export → a new sled dir → export: every event record byte for byte
/// (so every seq, time, actor and body), the compaction's cut and its snapshot, the same state
/// now and in the past on every copy. An import into a store that is not empty is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_moves_between_backends_and_back_unchanged() {
    use mco::store::export::Entry;
    if !have_etcd("a_log_moves_between_backends_and_back_unchanged") {
        return;
    }
    let etcd = Etcd::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (d1, d2) = (dir.path().join("one"), dir.path().join("two"));
    let (then, now) = {
        let store = Store::open(&d1.join("store")).unwrap().with_snapshot_every(10);
        let mut state = State::default();
        let mut then = None;
        for s in 1..=60u64 {
            let e = pool_event(s, ["a", "b", "c"][s as usize % 3], 100);
            store.append(std::slice::from_ref(&e)).unwrap();
            state.apply(&e);
            if s.is_multiple_of(10) {
                store.write_snapshot(&state).unwrap();
            }
            if s == 35 {
                then = Some(state.clone());
            }
        }
        store.flush().await.unwrap();
        store.compact(21).unwrap();
        (then.unwrap(), state)
    };
    let f = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let said = mco(&[
        "store",
        "export",
        "--data-dir",
        d1.to_str().unwrap(),
        "-f",
        &f("1.export"),
    ]);
    assert!(said.contains("exported 40 events (resourceVersions 21..=60)"), "{said}");
    let url = etcd.url();
    let said = mco(&[
        "store",
        "import",
        "--store",
        &url,
        "--etcd-prefix",
        "/imported/",
        "-f",
        &f("1.export"),
    ]);
    assert!(said.contains("imported 40 events"), "{said}");
    mco(&[
        "store",
        "export",
        "--store",
        &url,
        "--etcd-prefix",
        "/imported/",
        "-f",
        &f("2.export"),
    ]);
    mco(&[
        "store",
        "import",
        "--data-dir",
        d2.to_str().unwrap(),
        "-f",
        &f("2.export"),
    ]);
    mco(&[
        "store",
        "export",
        "--data-dir",
        d2.to_str().unwrap(),
        "-f",
        &f("3.export"),
    ]);

    let events = |es: &[Entry]| -> Vec<Entry> {
        es.iter()
            .filter(|e| matches!(e, Entry::Event { .. }))
            .cloned()
            .collect()
    };
    let cut = |es: &[Entry]| -> Vec<Entry> {
        es.iter()
            .filter(|e| matches!(e, Entry::CompactedBefore(_) | Entry::Snapshot { seq: 20, .. }))
            .cloned()
            .collect()
    };
    let (e1, e2, e3) = (
        entries(&dir.path().join("1.export")),
        entries(&dir.path().join("2.export")),
        entries(&dir.path().join("3.export")),
    );
    assert_eq!(events(&e1).len(), 40);
    assert_eq!(events(&e1), events(&e2), "sled → etcd: every record byte for byte");
    assert_eq!(events(&e2), events(&e3), "etcd → sled");
    assert_eq!(cut(&e1).len(), 2, "the cut and its snapshot");
    assert_eq!(cut(&e1), cut(&e2));
    assert_eq!(cut(&e2), cut(&e3));

    let log = EtcdLog::connect(etcd.config("check", "/imported/")).await.unwrap();
    assert_eq!(log.try_acquire().await.unwrap(), None);
    let on_etcd = Store::open_etcd(log, 10).await.unwrap();
    let on_sled = Store::open(&d2.join("store")).unwrap();
    for s in [&on_etcd, &on_sled] {
        assert_eq!(s.load_state().unwrap(), now);
        assert_eq!(s.state_at(35).unwrap(), then);
        assert_eq!(s.oldest_readable(), 20);
    }
    // Not into a store that holds a log.
    on_etcd.remote().unwrap().release().await;
    drop(on_sled);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mco"))
        .args([
            "store",
            "import",
            "--store",
            &url,
            "--etcd-prefix",
            "/imported/",
            "-f",
            &f("1.export"),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not empty"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mco"))
        .args([
            "store",
            "import",
            "--data-dir",
            d2.to_str().unwrap(),
            "-f",
            &f("1.export"),
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("already holds an event log"));
}
