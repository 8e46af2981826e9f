//! Event log benchmarks (DESIGN.md section 8):
//! - durable batched append through `Store::append` + `Store::flush` against raw sled
//!   `apply_batch` + `flush` of the same bytes, in the same run (target: >= 80 %);
//! - cold start: rebuilding state with `Store::load_state` from a log of 200,000 events with
//!   snapshots (target for 1,000,000 events: <= 1 s; with snapshots the cost is one snapshot
//!   plus at most `SNAPSHOT_EVERY` events, independent of the log's length).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use mco::event::{Event, EventType, SCHEMA_VERSION};
use mco::state::State;
use mco::store::{Store, SNAPSHOT_EVERY};
use serde_json::json;
use std::time::Instant;

#[path = "common/report.rs"]
mod report;
use report::Samples;

const BATCH: u64 = 100;

fn node_event(seq: u64) -> Event {
    let n = seq % 100;
    let body = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("worker-{n}"), "resourceVersion": seq.to_string(),
        "annotations": {"machineconfiguration.openshift.io/state": if seq.is_multiple_of(2) { "Done" } else { "Working" },
        "machineconfiguration.openshift.io/currentConfig": "rendered-worker-0123456789abcdef0123456789abcdef"}}});
    Event {
        schema: SCHEMA_VERSION,
        seq,
        id: *uuid::Uuid::now_v7().as_bytes(),
        time_ms: 1_700_000_000_000,
        event_type: EventType::NodeStateChanged.as_str().into(),
        object_kind: "Node".into(),
        name: format!("worker-{n}"),
        actor: format!("daemon:worker-{n}"),
        reason: String::new(),
        detail: "state: \"Working\" -> \"Done\"".into(),
        body: serde_json::to_vec(&body).unwrap(),
    }
}

fn append(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut g = c.benchmark_group("durable_append_batch_100");
    g.throughput(Throughput::Elements(BATCH));
    g.sample_size(30);
    let store = rt.block_on(async { Store::temporary().unwrap() });
    let (mco_times, raw_times) = (Samples::default(), Samples::default());
    let mut seq = 0u64;
    g.bench_function("mco_store", |b| {
        b.iter_batched(
            || {
                let evs: Vec<Event> = (1..=BATCH).map(|i| node_event(seq + i)).collect();
                seq += BATCH;
                evs
            },
            |evs| {
                report::timed(&mco_times, || {
                    rt.block_on(async {
                        store.append(&evs).unwrap();
                        store.flush().await.unwrap();
                    })
                })
            },
            BatchSize::SmallInput,
        )
    });
    let db = sled::Config::new().temporary(true).open().unwrap();
    let tree = db.open_tree("events").unwrap();
    let mut raw_seq = 0u64;
    g.bench_function("raw_sled", |b| {
        b.iter_batched(
            || {
                let evs: Vec<(u64, Vec<u8>)> = (1..=BATCH)
                    .map(|i| (raw_seq + i, node_event(raw_seq + i).encode()))
                    .collect();
                raw_seq += BATCH;
                evs
            },
            |evs| {
                report::timed(&raw_times, || {
                    let mut batch = sled::Batch::default();
                    for (s, v) in evs {
                        batch.insert(&s.to_be_bytes(), v);
                    }
                    tree.apply_batch(batch).unwrap();
                    db.flush().unwrap();
                })
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
    if let (Some(m), Some(r)) = (report::median(&mco_times), report::median(&raw_times)) {
        // A rate ratio: raw's time over mco's (≥ 0.8 means at least 80 % of raw's rate).
        report::row(
            "durable append, batch of 100 events + flush (floor: raw sled apply_batch + flush of the same bytes); ratio = rate against raw",
            &report::ms(m),
            &report::ms(r),
            r.as_secs_f64() / m.as_secs_f64(),
            "≥ 0.8× raw's rate",
        );
    }
}

/// The floor of a cold start: parse the newest snapshot's bytes and fold the events after it,
/// read by a raw sled range scan (no checksum, no index).
fn raw_load(db: &sled::Db) -> State {
    let snaps = db.open_tree("snapshots").unwrap();
    let events = db.open_tree("events").unwrap();
    let (k, v) = snaps.iter().next_back().unwrap().unwrap();
    let mut state: State = serde_json::from_slice(&v[mco::store::record::HEADER..]).unwrap();
    let from = u64::from_be_bytes(k.as_ref().try_into().unwrap());
    for r in events.range((from + 1).to_be_bytes()..) {
        let (_, v) = r.unwrap();
        state.apply(&Event::decode(&v[mco::store::record::HEADER..]).unwrap());
    }
    state
}

fn replay(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    const EVENTS: u64 = 200_000;
    rt.block_on(async {
        let store = Store::open(dir.path()).unwrap();
        let mut state = State::default();
        let mut seq = 0;
        while seq < EVENTS {
            let evs: Vec<Event> = (1..=1000).map(|i| node_event(seq + i)).collect();
            store.append(&evs).unwrap();
            for e in &evs {
                state.apply(e);
            }
            seq += 1000;
            if seq.is_multiple_of(SNAPSHOT_EVERY) {
                store.write_snapshot(&state).unwrap();
            }
        }
        // leave a tail of events after the last snapshot, the worst case
        let evs: Vec<Event> = (1..SNAPSHOT_EVERY).map(|i| node_event(seq + i)).collect();
        store.append(&evs).unwrap();
        store.flush().await.unwrap();
    });
    // The first start after the write run (sled's recovery included), once.
    let started = Instant::now();
    let store = Store::open(dir.path()).unwrap();
    let first = store.load_state().unwrap();
    let first_start = started.elapsed();
    drop(store);
    let db = sled::Config::new().path(dir.path()).open().unwrap();
    let (mco_times, raw_times) = (Samples::default(), Samples::default());
    let mut g = c.benchmark_group("cold_start");
    g.sample_size(10);
    g.bench_function("raw_floor_210k_events_100_nodes", |b| {
        b.iter(|| report::timed(&raw_times, || raw_load(&db)))
    });
    assert_eq!(raw_load(&db), first);
    drop(db);
    let store = Store::open(dir.path()).unwrap();
    g.bench_function("load_state_210k_events_100_nodes", |b| {
        b.iter(|| report::timed(&mco_times, || store.load_state().unwrap()))
    });
    g.bench_function("state_at_mid_log", |b| {
        b.iter(|| store.state_at(EVENTS / 2 + 4321).unwrap())
    });
    g.finish();
    if let (Some(m), Some(r)) = (report::median(&mco_times), report::median(&raw_times)) {
        report::row_times(
            "rebuild state at start, 210,000-event log: newest snapshot + 9,999 events (floor: parse the same snapshot, raw scan and fold of the same events)",
            m,
            r,
            "≤ 1 s for 10⁶ events (the cost does not grow with the log)",
        );
        report::row_times(
            "first start after the write run: open the store (sled recovery) + rebuild (floor: a warm rebuild, above)",
            first_start,
            m,
            "≤ 1 s",
        );
    }
}

criterion_group!(benches, append, replay);
criterion_main!(benches);
