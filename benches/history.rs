//! History benchmarks (issue: the log becomes the product), each beside its floor:
//! - time-travel read (`Store::state_at`) against the distance from the nearest snapshot
//!   (0, 1,000, 5,000, 9,999 events) and against history length (100,000 vs 1,000,000 events),
//!   beside the floor of the same work done raw: parsing the same snapshot bytes plus a raw
//!   sled range scan and decode of the same events;
//! - one object's history (a MachineConfig with 10 events) in a 1,000,000-event log through
//!   the per-object index, beside raw sled gets of the same 10 keys (target: <= 10 ms);
//! - the diff of two renders of 1,000 files each (100 changed), beside decoding the same
//!   2,000 data URLs (the part no diff can skip).
//!
//! Run: `cargo bench --bench history` (builds a 1,000,000-event log in a temporary directory
//! first: about a minute and 0.5 GB of disk).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use mco::event::{Event, EventType, SCHEMA_VERSION};
use mco::model::MachineConfig;
use mco::state::State;
use mco::store::record::HEADER;
use mco::store::{Store, SNAPSHOT_EVERY};
use serde_json::json;
use std::collections::BTreeMap;

#[path = "common/report.rs"]
mod report;
use report::Samples;

const G: &str = "machineconfiguration.openshift.io";

fn node_event(seq: u64) -> Event {
    let n = seq % 100;
    let body = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("worker-{n}"), "resourceVersion": seq.to_string(),
        "annotations": {format!("{G}/state"): if seq.is_multiple_of(2) { "Done" } else { "Working" },
        format!("{G}/currentConfig"): "rendered-worker-0123456789abcdef0123456789abcdef"}}});
    Event {
        schema: SCHEMA_VERSION,
        seq,
        id: *uuid::Uuid::now_v7().as_bytes(),
        time_ms: 1_700_000_000_000 + seq as i64,
        event_type: EventType::NodeStateChanged.as_str().into(),
        object_kind: "Node".into(),
        name: format!("worker-{n}"),
        actor: format!("daemon:worker-{n}"),
        reason: String::new(),
        detail: "state: \"Working\" -> \"Done\"".into(),
        body: serde_json::to_vec(&body).unwrap(),
    }
}

/// Every 100,000th event is an update of MachineConfig `99-worker-rare` (10 in a million).
fn event(seq: u64) -> Event {
    if seq.is_multiple_of(100_000) {
        let mut e = node_event(seq);
        e.event_type = EventType::MachineConfigUpdated.as_str().into();
        e.object_kind = "MachineConfig".into();
        e.name = "99-worker-rare".into();
        e.body = serde_json::to_vec(&json!({"apiVersion": format!("{G}/v1"), "kind": "MachineConfig",
            "metadata": {"name": "99-worker-rare", "resourceVersion": seq.to_string()}, "spec": {"kernelArguments": [format!("v={seq}")]}}))
        .unwrap();
        return e;
    }
    node_event(seq)
}

/// A store of `events` events with a snapshot every [`SNAPSHOT_EVERY`], and the bytes of
/// their bodies.
fn build(dir: &std::path::Path, events: u64) -> (Store, u64) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = Store::open(dir).unwrap();
        let mut state = State::default();
        let mut seq = 0;
        let mut bodies = 0;
        while seq < events {
            let evs: Vec<Event> = (1..=1000).map(|i| event(seq + i)).collect();
            bodies += evs.iter().map(|e| e.body.len() as u64).sum::<u64>();
            store.append(&evs).unwrap();
            for e in &evs {
                state.apply(e);
            }
            seq += 1000;
            if seq.is_multiple_of(SNAPSHOT_EVERY) {
                store.write_snapshot(&state).unwrap();
            }
        }
        store.flush().await.unwrap();
        (store, bodies)
    })
}

/// The floor of a store's size: the same events, encoded as the store encodes them, in one
/// raw sled tree (no index, no snapshots); its bytes on disk.
fn raw_store_bytes(events: u64) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::Config::new().path(dir.path()).open().unwrap();
    let tree = db.open_tree("events").unwrap();
    let mut seq = 0;
    while seq < events {
        let mut batch = sled::Batch::default();
        for i in 1..=1000 {
            batch.insert(
                &(seq + i).to_be_bytes(),
                mco::store::record::frame(&event(seq + i).encode()),
            );
        }
        tree.apply_batch(batch).unwrap();
        seq += 1000;
    }
    db.flush().unwrap();
    drop(tree);
    drop(db);
    report::dir_bytes(dir.path())
}

/// The floor of `state_at(seq)`: parse the same snapshot bytes, scan and decode the same
/// events from a raw sled range, fold them.
fn raw_state_at(db: &sled::Db, seq: u64) -> State {
    let snaps = db.open_tree("snapshots").unwrap();
    let events = db.open_tree("events").unwrap();
    let (k, v) = snaps.range(..=seq.to_be_bytes()).next_back().unwrap().unwrap();
    // Past the record frame's header (the floor does not check the CRC).
    let mut state: State = serde_json::from_slice(&v[HEADER..]).unwrap();
    let from = u64::from_be_bytes(k.as_ref().try_into().unwrap());
    for r in events.range((from + 1).to_be_bytes()..=seq.to_be_bytes()) {
        let (_, v) = r.unwrap();
        state.apply(&Event::decode(&v[HEADER..]).unwrap());
    }
    state
}

fn time_travel(c: &mut Criterion) {
    let mut g = c.benchmark_group("time_travel");
    g.sample_size(10);
    // Samples by (what, distance from the snapshot), for the report.
    let samples: BTreeMap<(&str, u64), Samples> = [0u64, 1_000, 5_000, 9_999]
        .into_iter()
        .flat_map(|d| [(("mco", d), Samples::default()), (("raw", d), Samples::default())])
        .collect();
    let (index, gets) = (Samples::default(), Samples::default());
    for total in [100_000u64, 1_000_000] {
        let dir = tempfile::tempdir().unwrap();
        let (store, bodies) = build(dir.path(), total);
        if total == 1_000_000 {
            let (mco, raw) = (report::dir_bytes(dir.path()), raw_store_bytes(total));
            report::row(
                &format!("store size after 10⁶ events, {} MB of event bodies (floor: the same framed events in one raw sled tree)", bodies / 1_000_000),
                &format!("{:.2}× the bodies ({} MB)", mco as f64 / bodies as f64, mco / 1_000_000),
                &format!("{:.2}× ({} MB)", raw as f64 / bodies as f64, raw / 1_000_000),
                mco as f64 / raw as f64,
                "≤ 2× the bodies",
            );
        }
        let base = total - SNAPSHOT_EVERY; // a snapshot sits at `base`
        for distance in [0u64, 1_000, 5_000, 9_999] {
            let id = format!("{total}_events/distance_{distance}");
            let s = &samples[&("mco", distance)];
            g.bench_with_input(BenchmarkId::new("mco_state_at", &id), &distance, |b, d| {
                b.iter(|| {
                    let read = || store.state_at(base + d).unwrap();
                    if total == 1_000_000 {
                        report::timed(s, read)
                    } else {
                        read()
                    }
                })
            });
        }
        if total == 1_000_000 {
            // The one-object history, through the index, and its floor.
            g.bench_function("object_history_10_of_1m/mco_index", |b| {
                b.iter(|| {
                    report::timed(&index, || {
                        let seqs = store.object_seqs("MachineConfig", "99-worker-rare", 0, total).unwrap();
                        assert_eq!(seqs.len(), 10);
                        seqs.into_iter()
                            .map(|s| store.event(s).unwrap().unwrap())
                            .collect::<Vec<_>>()
                    })
                })
            });
            let keys: Vec<u64> = (1..=10).map(|i| i * 100_000).collect();
            drop(store);
            let db = sled::Config::new().path(dir.path()).open().unwrap();
            let events = db.open_tree("events").unwrap();
            g.bench_function("object_history_10_of_1m/raw_sled_gets", |b| {
                b.iter(|| {
                    report::timed(&gets, || {
                        keys.iter()
                            .map(|k| Event::decode(&events.get(k.to_be_bytes()).unwrap().unwrap()[HEADER..]).unwrap())
                            .collect::<Vec<_>>()
                    })
                })
            });
            for distance in [0u64, 1_000, 5_000, 9_999] {
                let id = format!("{total}_events/distance_{distance}");
                let s = &samples[&("raw", distance)];
                g.bench_with_input(BenchmarkId::new("raw_floor", &id), &distance, |b, d| {
                    b.iter(|| report::timed(s, || raw_state_at(&db, base + d)))
                });
            }
        }
    }
    g.finish();
    if let (Some(m), Some(r)) = (report::median(&index), report::median(&gets)) {
        report::row_times(
            "one object's history (10 events) in a 10⁶-event log, through the per-object index (floor: 10 raw sled gets of the same keys)",
            m,
            r,
            "≤ 10 ms",
        );
    }
    for d in [0u64, 1_000, 5_000, 9_999] {
        if let (Some(m), Some(r)) = (
            report::median(&samples[&("mco", d)]),
            report::median(&samples[&("raw", d)]),
        ) {
            report::row_times(
                &format!("time-travel read in a 10⁶-event log, {d} events past a snapshot (floor: parse the same snapshot, raw scan and fold of the same events)"),
                m,
                r,
                "cost bounded by the snapshot interval",
            );
        }
    }
}

fn render_of(version: u32) -> MachineConfig {
    let files: Vec<serde_json::Value> = (0..1000)
        .map(|i| {
            let v = if i % 10 == 0 { version } else { 0 };
            json!({"path": format!("/etc/bench/f{i}.conf"), "mode": 420,
                   "contents": {"source": format!("data:,line%201%0Aline%202%20of%20file%20{i}%0Aversion%20{v}%0Aline%204%0A")}})
        })
        .collect();
    serde_json::from_value(json!({"metadata": {"name": format!("rendered-worker-{version}")},
        "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": files}}}}))
    .unwrap()
}

fn diff(c: &mut Criterion) {
    let (a, b) = (render_of(1), render_of(2));
    let mut g = c.benchmark_group("diff_1000_files");
    let none = |_: &str| None;
    let (mco, floor) = (Samples::default(), Samples::default());
    g.bench_function("mco_diff", |bench| {
        bench.iter(|| {
            report::timed(&mco, || {
                let d = mco::diff::diff(
                    mco::diff::Input {
                        config: &a,
                        provenance: &none,
                    },
                    mco::diff::Input {
                        config: &b,
                        provenance: &none,
                    },
                )
                .unwrap();
                assert_eq!(d.items.len(), 100);
                d
            })
        })
    });
    let decode = |mc: &MachineConfig| {
        let cfg: mco::ignition::Config = serde_json::from_value(mc.spec.config.clone().unwrap()).unwrap();
        cfg.storage
            .files
            .iter()
            .map(|f| mco::ignition::file_contents(f).unwrap().len())
            .sum::<usize>()
    };
    g.bench_function("floor_decode_both", |bench| {
        bench.iter(|| report::timed(&floor, || decode(&a) + decode(&b)))
    });
    g.finish();
    if let (Some(m), Some(r)) = (report::median(&mco), report::median(&floor)) {
        report::row_times(
            "diff of two renders of 1,000 files each, 100 changed (floor: decoding the same 2,000 data URLs)",
            m,
            r,
            "(no target; the diff can skip no decode)",
        );
    }
}

criterion_group!(benches, diff, time_travel);
criterion_main!(benches);
