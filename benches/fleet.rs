//! Fleet-scale benchmarks (DESIGN.md section 8, issue 13):
//! - targeting 10,000 nodes at once (maxUnavailable 100 %): the node controller's decision
//!   written through [`Hub::update_many`] (each node's `desiredConfig` annotation set by the same
//!   kind of update the controller makes: read, change, validate, classify, one event per node,
//!   one atomic append, one flush, fold and publish), against its floor measured in the same run:
//!   one raw sled batch insert + flush of the same number of events of the same bytes.
//!   Target: <= 2x the floor. The ratio of the medians is printed after the group.
//!
//! - an idle controller pass over 10,000 nodes (every controller, nothing to do: the pass the
//!   reconcile loop runs after every write and on its resync tick), against its floor: a raw
//!   scan of the same nodes' config annotations in the projection.
//!   Target: <= 10 ms and <= 5x the floor.
//!
//! Run: `cargo bench --bench fleet -- --measurement-time 10`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mco::command::{Actor, Hub, Mutation, Scope, Update};
use mco::controller::{reconcile_once, ControllerConfig, Memory};
use mco::event::Event;
use mco::model::{Kind, DEFAULT_GROUP};
use mco::store::Store;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const NODES: usize = 10_000;

fn node(i: usize) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("worker-{i:05}"),
        "labels": {"node-role.kubernetes.io/worker": ""},
        "annotations": {
            "machineconfiguration.openshift.io/state": "Done",
            "machineconfiguration.openshift.io/currentConfig": "rendered-worker-00000000000000000000000000000000",
            "machineconfiguration.openshift.io/desiredConfig": "rendered-worker-00000000000000000000000000000000"}}})
}

/// A hub over a temporary store holding the [`NODES`] nodes of [`node`], created in one batch.
async fn fleet() -> Arc<Hub> {
    let hub = Hub::open(Store::temporary().unwrap(), DEFAULT_GROUP).unwrap();
    let creates = (0..NODES)
        .map(|i| Mutation::Create {
            kind: Kind::Node,
            object: node(i),
        })
        .collect();
    hub.batch(creates, "", &Actor::new("bench")).await.unwrap();
    hub
}

/// The node controller's change of one node: `desiredConfig = target`.
fn target_update(name: String, target: &str) -> Update<'static> {
    let target = target.to_string();
    Update {
        kind: Kind::Node,
        name,
        scope: Scope::Main,
        precondition: None,
        f: Box::new(move |cur| {
            let mut next = cur.clone();
            next["metadata"]["annotations"]["machineconfiguration.openshift.io/desiredConfig"] = json!(target);
            Ok(next)
        }),
    }
}

/// The median, or `None` when the benchmark did not run (filtered out).
fn median(v: &mut [Duration]) -> Option<Duration> {
    v.sort();
    v.get(v.len() / 2).copied()
}

fn target_all(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let hub = rt.block_on(fleet());
    let actor = Actor::new("controller:node");
    let names: Vec<String> = (0..NODES).map(|i| format!("worker-{i:05}")).collect();
    let mut round = 0u64;
    let hub_times = Arc::new(Mutex::new(Vec::new()));
    let raw_times = Arc::new(Mutex::new(Vec::new()));

    let mut g = c.benchmark_group("target_10000_nodes");
    g.throughput(Throughput::Elements(NODES as u64));
    g.sample_size(10);
    g.bench_function("mco_hub_update_many", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                round += 1;
                let target = format!("rendered-worker-{round:032x}");
                let updates: Vec<Update> = names.iter().map(|n| target_update(n.clone(), &target)).collect();
                let started = Instant::now();
                let results = rt.block_on(hub.update_many(&updates, &actor)).unwrap();
                let took = started.elapsed();
                assert!(results.iter().all(Result::is_ok));
                hub_times.lock().unwrap().push(took);
                total += took;
            }
            total
        })
    });

    // The floor: the very events the hub appended last (same count, same bytes), re-keyed into
    // a fresh sled tree in one batch and one flush.
    let last = hub.store().last_seq();
    let events: Vec<Event> = hub
        .store()
        .read_after(last - NODES as u64)
        .map(Result::unwrap)
        .collect();
    assert_eq!(events.len(), NODES);
    let db = sled::Config::new().temporary(true).open().unwrap();
    let tree = db.open_tree("events").unwrap();
    let mut seq = 0u64;
    g.bench_function("raw_sled_batch", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let encoded: Vec<(u64, Vec<u8>)> = events
                    .iter()
                    .map(|e| {
                        seq += 1;
                        (seq, e.encode())
                    })
                    .collect();
                let started = Instant::now();
                let mut batch = sled::Batch::default();
                for (s, v) in encoded {
                    batch.insert(&s.to_be_bytes(), v);
                }
                tree.apply_batch(batch).unwrap();
                db.flush().unwrap();
                let took = started.elapsed();
                raw_times.lock().unwrap().push(took);
                total += took;
            }
            total
        })
    });
    g.finish();

    let bytes: usize = events.iter().map(|e| e.encode().len()).sum();
    let (Some(hub_median), Some(raw_median)) = (
        median(&mut hub_times.lock().unwrap()),
        median(&mut raw_times.lock().unwrap()),
    ) else {
        return;
    };
    println!(
        "target {NODES} nodes ({} events, {bytes} bytes): mco hub {:.1} ms, raw sled batch {:.1} ms, ratio {:.2}x (target <= 2x)",
        events.len(),
        hub_median.as_secs_f64() * 1e3,
        raw_median.as_secs_f64() * 1e3,
        hub_median.as_secs_f64() / raw_median.as_secs_f64()
    );
}

/// A fleet settled at its pool's rendered config: the controllers have nothing to do.
fn settled_fleet(rt: &tokio::runtime::Runtime) -> Arc<Hub> {
    rt.block_on(async {
        let hub = fleet().await;
        let cfg = ControllerConfig::default();
        let mut memory = Memory::default();
        while reconcile_once(&hub, &cfg, true, &mut memory).await > 0 {}
        // The nodes report the target as their current config, as daemons would.
        let target = hub.state().pools["worker"].spec.configuration.name.clone();
        let updates: Vec<Update> = (0..NODES)
            .map(|i| {
                let target = target.clone();
                Update {
                    kind: Kind::Node,
                    name: format!("worker-{i:05}"),
                    scope: Scope::Main,
                    precondition: None,
                    f: Box::new(move |cur| {
                        let mut next = cur.clone();
                        let a = &mut next["metadata"]["annotations"];
                        a["machineconfiguration.openshift.io/currentConfig"] = json!(target);
                        a["machineconfiguration.openshift.io/desiredConfig"] = json!(target);
                        a["machineconfiguration.openshift.io/state"] = json!("Done");
                        Ok(next)
                    }),
                }
            })
            .collect();
        hub.update_many(&updates, &Actor::new("bench")).await.unwrap();
        while reconcile_once(&hub, &cfg, true, &mut memory).await > 0 {}
        hub
    })
}

fn idle_pass(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let hub = settled_fleet(&rt);
    let cfg = ControllerConfig::default();
    let mut memory = Memory::default();
    let pass_times = Arc::new(Mutex::new(Vec::new()));
    let scan_times = Arc::new(Mutex::new(Vec::new()));
    let mut g = c.benchmark_group("idle_pass_10000_nodes");
    g.sample_size(10);
    g.bench_function("mco_controller_pass", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let started = Instant::now();
                let writes = rt.block_on(reconcile_once(&hub, &cfg, true, &mut memory));
                let took = started.elapsed();
                assert_eq!(writes, 0, "an idle pass writes nothing");
                pass_times.lock().unwrap().push(took);
                total += took;
            }
            total
        })
    });
    // The floor: read each node's desired and current config and state from the projection.
    let keys = hub.keys().clone();
    let (cc, dc, st) = (keys.current_config(), keys.desired_config(), keys.state());
    g.bench_function("raw_annotation_scan", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let started = Instant::now();
                let state = hub.state();
                let done = state
                    .nodes
                    .values()
                    .filter(|n| {
                        let a = n.metadata.annotations.as_ref();
                        let get = |k: &str| a.and_then(|a| a.get(k)).map(String::as_str);
                        get(&cc) == get(&dc) && get(&st) == Some("Done")
                    })
                    .count();
                drop(state);
                let took = started.elapsed();
                assert_eq!(done, NODES);
                scan_times.lock().unwrap().push(took);
                total += took;
            }
            total
        })
    });
    g.finish();
    let (Some(pass), Some(scan)) = (
        median(&mut pass_times.lock().unwrap()),
        median(&mut scan_times.lock().unwrap()),
    ) else {
        return;
    };
    println!(
        "idle pass, {NODES} nodes: mco controllers {:.2} ms, raw annotation scan {:.2} ms, ratio {:.1}x (target <= 10 ms and <= 5x)",
        pass.as_secs_f64() * 1e3,
        scan.as_secs_f64() * 1e3,
        pass.as_secs_f64() / scan.as_secs_f64()
    );
}

criterion_group!(benches, target_all, idle_pass);
criterion_main!(benches);
