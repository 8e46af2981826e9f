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
//! - LIST of 10,000 nodes through the real API server (`GET /api/v1/nodes`, HTTP on
//!   loopback, body read whole), against its floor: the same bytes served from memory by a bare
//!   axum route on loopback to the same client. Target: <= 50 ms and <= 4x the floor. After
//!   the group, the PATCH acknowledgement p99 of one node on the same server is printed idle
//!   and while LISTs of the 10,000 nodes run back to back (target: within 2 ms of idle).
//!
//! Run: `cargo bench --bench fleet -- --measurement-time 10`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mco::command::{Actor, Hub, Mutation, Scope, Update};
use mco::controller::{reconcile_once, ControllerConfig, Memory};
use mco::event::Event;
use mco::model::{Kind, DEFAULT_GROUP};
use mco::store::Store;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "common/report.rs"]
mod report;
#[path = "common/serve.rs"]
mod serve;
use report::{median, Samples};
use serve::memory_server;

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

fn target_all(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let hub = rt.block_on(fleet());
    let actor = Actor::new("controller:node");
    let names: Vec<String> = (0..NODES).map(|i| format!("worker-{i:05}")).collect();
    let mut round = 0u64;
    let hub_times = Samples::default();
    let raw_times = Samples::default();

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
    let (Some(hub_median), Some(raw_median)) = (median(&hub_times), median(&raw_times)) else {
        return;
    };
    report::row_times(
        &format!(
            "target {NODES} nodes at once ({} events, {bytes} bytes; floor: one raw sled batch + flush of them)",
            events.len()
        ),
        hub_median,
        raw_median,
        "≤ 2×",
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
    let (pass_times, changed_times, scan_times) = (Samples::default(), Samples::default(), Samples::default());
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
    // A pass after one node changed (a label no controller acts on): what one change costs.
    let mut round = 0u64;
    g.bench_function("mco_controller_pass_after_one_node_changed", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                round += 1;
                let label = Update {
                    kind: Kind::Node,
                    name: format!("worker-{:05}", round as usize % NODES),
                    scope: Scope::Main,
                    precondition: None,
                    f: Box::new(move |cur| {
                        let mut next = cur.clone();
                        next["metadata"]["labels"]["bench.mco.dev/round"] = json!(round.to_string());
                        Ok(next)
                    }),
                };
                rt.block_on(hub.update_many(&[label], &Actor::new("bench"))).unwrap();
                let started = Instant::now();
                let writes = rt.block_on(reconcile_once(&hub, &cfg, true, &mut memory));
                let took = started.elapsed();
                assert_eq!(writes, 0, "a label change needs no controller write");
                changed_times.lock().unwrap().push(took);
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
    let (Some(pass), Some(changed), Some(scan)) = (median(&pass_times), median(&changed_times), median(&scan_times))
    else {
        return;
    };
    report::row_times(
        &format!("idle controller pass, {NODES} nodes, nothing changed (floor: raw scan of their config annotations)"),
        pass,
        scan,
        "≤ 10 ms and ≤ 5×",
    );
    report::row_times(
        &format!("controller pass after one of {NODES} nodes changed (floor: the same raw scan)"),
        changed,
        scan,
        "cost grows with changed nodes, not all nodes",
    );
    // An idle server runs that pass once per resync period and nothing else.
    let resync = mco::controller::RESYNC;
    report::row(
        &format!(
            "idle control plane, {NODES} nodes: CPU share of one pass per {}s resync",
            resync.as_secs()
        ),
        &format!("{:.2} % of a core", 100.0 * pass.as_secs_f64() / resync.as_secs_f64()),
        &format!(
            "{:.3} % (the raw scan)",
            100.0 * scan.as_secs_f64() / resync.as_secs_f64()
        ),
        pass.as_secs_f64() / scan.as_secs_f64(),
        "≤ 1 % of a core",
    );
}

/// GETs `url` and reads the body whole; its length.
async fn get_len(client: &reqwest::Client, url: &str) -> usize {
    let r = client.get(url).send().await.unwrap();
    assert!(r.status().is_success(), "{url}: {}", r.status());
    r.bytes().await.unwrap().len()
}

/// Times of `n` GETs of `url`, one after the other.
async fn get_times(client: &reqwest::Client, url: &str, n: usize) -> Samples {
    let times = Samples::default();
    for _ in 0..n {
        let started = Instant::now();
        get_len(client, url).await;
        times.lock().unwrap().push(started.elapsed());
    }
    times
}

/// PATCH acknowledgement times of `n` merge patches of one node's label.
async fn patch_times(client: &reqwest::Client, base: &str, n: usize) -> Samples {
    let url = format!("{base}/api/v1/nodes/worker-00000");
    let times = Samples::default();
    for i in 0..n {
        let started = Instant::now();
        let r = client
            .patch(&url)
            .header("Content-Type", "application/merge-patch+json")
            .body(json!({"metadata": {"labels": {"bench.mco.dev/i": i.to_string()}}}).to_string())
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "PATCH: {}", r.status());
        r.bytes().await.unwrap();
        times.lock().unwrap().push(started.elapsed());
    }
    times
}

/// Opens `n` watches of `url(i)` at once, each on its own connection, and waits until every
/// one has answered its headers (and, for mco, the first event line is not waited for: a watch
/// from the list's resourceVersion has none). Returns the wall time.
async fn open_watches(
    client: &reqwest::Client,
    url: impl Fn(usize) -> String,
    n: usize,
) -> (Duration, Vec<reqwest::Response>) {
    let started = Instant::now();
    let opened = futures_util::future::join_all((0..n).map(|i| client.get(url(i)).send())).await;
    let took = started.elapsed();
    let responses: Vec<reqwest::Response> = opened.into_iter().map(Result::unwrap).collect();
    assert!(responses.iter().all(|r| r.status().is_success()));
    (took, responses)
}

fn list_nodes(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = rt.block_on(serve::fleet_server(dir.path(), NODES, WATCHES, node));
    let client = server.admin_http();
    let base = server.url();
    let url = format!("{base}/api/v1/nodes");
    let pool_path = "/apis/machineconfiguration.openshift.io/v1/machineconfigpools/worker";
    // The floor: the very bytes of the list and of the pool, served from memory on loopback.
    let (bytes, pool) = rt.block_on(async {
        let list = client.get(&url).send().await.unwrap().bytes().await.unwrap();
        let pool = client
            .get(format!("{base}{pool_path}"))
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        (list, pool)
    });
    let floor = rt.block_on(memory_server(vec![
        ("/api/v1/nodes".into(), bytes.clone()),
        (pool_path.into(), pool.clone()),
    ]));
    let floor_url = format!("{floor}/api/v1/nodes");
    let list_times = Samples::default();
    let floor_times = Samples::default();
    let mut g = c.benchmark_group("list_10000_nodes");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    for (name, url, times) in [
        ("mco_api_list", &url, &list_times),
        ("same_bytes_from_memory", &floor_url, &floor_times),
    ] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let started = Instant::now();
                    let len = rt.block_on(get_len(&client, url));
                    let took = started.elapsed();
                    assert_eq!(len, bytes.len());
                    times.lock().unwrap().push(took);
                    total += took;
                }
                total
            })
        });
    }
    g.finish();
    let (Some(list), Some(floor_list)) = (median(&list_times), median(&floor_times)) else {
        return;
    };
    report::row_times(
        &format!(
            "LIST {NODES} nodes as JSON, {} bytes (floor: the same bytes served from memory)",
            bytes.len()
        ),
        list,
        floor_list,
        "≤ 50 ms and ≤ 4×",
    );

    rt.block_on(async {
        // GET one pool, p99 of 500.
        let mco = get_times(&client, &format!("{base}{pool_path}"), 500).await;
        let mem = get_times(&client, &format!("{floor}{pool_path}"), 500).await;
        let (a, b) = (report::percentile(&mco, 99.0).unwrap(), report::percentile(&mem, 99.0).unwrap());
        report::row_times(
            &format!("GET one pool, p99 of 500, {NODES} nodes (floor: the same bytes from memory)"),
            a,
            b,
            "p99 ≤ 2 ms",
        );

        // PATCH acknowledgement, idle and under back-to-back LISTs of the whole fleet.
        let idle = patch_times(&client, &base, 200).await;
        let stop = tokio_util::sync::CancellationToken::new();
        let lister = {
            let (client, url, stop) = (client.clone(), url.clone(), stop.clone());
            tokio::spawn(async move {
                let mut lists = 0;
                while !stop.is_cancelled() {
                    get_len(&client, &url).await;
                    lists += 1;
                }
                lists
            })
        };
        let busy = patch_times(&client, &base, 200).await;
        stop.cancel();
        let lists = lister.await.unwrap();
        let (idle, busy) = (report::percentile(&idle, 99.0).unwrap(), report::percentile(&busy, 99.0).unwrap());
        report::row(
            &format!("PATCH one node, p99 of 200, {NODES} nodes, during {lists} back-to-back LISTs of them (floor: the same PATCHes on the idle server)"),
            &report::ms(busy),
            &report::ms(idle),
            busy.as_secs_f64() / idle.as_secs_f64(),
            "≤ 2 ms more than idle; readers never block writers",
        );

        // 1,000 watches from the list's resourceVersion, each pinned to one node as a daemon's.
        let rv: String = serde_json::from_slice::<serde_json::Value>(&bytes).unwrap()["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
        // A fresh client for each side, every request on its own new connection.
        let fresh = || {
            reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .default_headers(
                    [(
                        reqwest::header::AUTHORIZATION,
                        format!("Bearer {}", server.admin_token().unwrap()).parse().unwrap(),
                    )]
                    .into_iter()
                    .collect(),
                )
                .build()
                .unwrap()
        };
        let (mem, held) = open_watches(&fresh(), |_| format!("{floor}{pool_path}"), WATCHES).await;
        drop(held);
        let (mco, watches) = open_watches(
            &fresh(),
            |i| format!("{url}?watch=1&resourceVersion={rv}&fieldSelector=metadata.name%3Dworker-{i:05}"),
            WATCHES,
        )
        .await;
        drop(watches);
        report::row_times(
            &format!("open {WATCHES} watches from a resourceVersion, {NODES} nodes (floor: {WATCHES} GETs of one pool from memory, at once)"),
            mco,
            mem,
            "≤ 1 s in all",
        );
    });
    rt.block_on(server.stop());
}

/// Watches opened at once by the list bench.
const WATCHES: usize = 1000;

criterion_group!(benches, target_all, idle_pass, list_nodes);
criterion_main!(benches);
