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
    let mut seq = 0u64;
    g.bench_function("mco_store", |b| {
        b.iter_batched(
            || {
                let evs: Vec<Event> = (1..=BATCH).map(|i| node_event(seq + i)).collect();
                seq += BATCH;
                evs
            },
            |evs| {
                rt.block_on(async {
                    store.append(&evs).unwrap();
                    store.flush().await.unwrap();
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
                let mut batch = sled::Batch::default();
                for (s, v) in evs {
                    batch.insert(&s.to_be_bytes(), v);
                }
                tree.apply_batch(batch).unwrap();
                db.flush().unwrap();
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
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
    let store = rt.block_on(async { Store::open(dir.path()).unwrap() });
    let mut g = c.benchmark_group("cold_start");
    g.sample_size(10);
    g.bench_function("load_state_210k_events_100_nodes", |b| {
        b.iter(|| store.load_state().unwrap())
    });
    g.bench_function("state_at_mid_log", |b| {
        b.iter(|| store.state_at(EVENTS / 2 + 4321).unwrap())
    });
    g.finish();
}

criterion_group!(benches, append, replay);
criterion_main!(benches);
