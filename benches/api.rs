//! The API paths that scale with the fleet (issue 31), each beside its floor in the same run:
//! - kubectl's Table LIST of 10,000 nodes (`GET /api/v1/nodes` with `Accept:
//!   application/json;as=Table;v=v1;g=meta.k8s.io`, what `kubectl get nodes` sends), nodes as a
//!   kubelet reports them (status, addresses, nodeInfo, a managedFields entry), through the real
//!   API server on loopback, body read whole; the floor: the same bytes served from memory by a
//!   bare axum route to the same client. Target: ≤ 3× the floor and ≤ 30 ms.
//! - Watch fan-out: writes/s of back-to-back node PATCHes (4 writers) with no watch open, then
//!   with 400 watches open, each pinned to one node by `fieldSelector=metadata.name=<node>` as a
//!   node daemon's, every write changing a watched node (so each event goes to exactly one
//!   watcher, whose client reads it). The cost per watcher per event is the extra time per
//!   write divided by the watchers. Targets: ≤ 2 µs per watcher per event; writes/s with 400
//!   watchers ≥ 0.8× without.
//!
//! Run: `cargo bench --bench api -- --warm-up-time 1 --measurement-time 5`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use futures_util::StreamExt;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "common/report.rs"]
mod report;
#[path = "common/serve.rs"]
mod serve;
use report::{median, Samples};

const NODES: usize = 10_000;
/// kubectl's `Accept` for `kubectl get` (k8s.io/kubectl `pkg/cmd/get`, server-side printing).
const TABLE: &str =
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
const WATCHERS: usize = 400;
/// PATCHes per timed round of the fan-out bench, and the writers sending them at once.
const WRITES: usize = 200;
const WRITERS: usize = 4;

/// Node `i` as a kubelet reports it: roles, addresses, nodeInfo, the Ready condition and the
/// kubelet's managedFields entry.
fn node(i: usize) -> serde_json::Value {
    let name = format!("worker-{i:05}");
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name,
        "labels": {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "node-role.kubernetes.io/worker": "",
            "node.openshift.io/os_id": "rhcos"},
        "annotations": {
            "machineconfiguration.openshift.io/state": "Done",
            "machineconfiguration.openshift.io/currentConfig": "rendered-worker-00000000000000000000000000000000",
            "machineconfiguration.openshift.io/desiredConfig": "rendered-worker-00000000000000000000000000000000"},
        "managedFields": [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:addresses": {".": {}, "k:{\"type\":\"InternalIP\"}": {".": {}, "f:address": {}, "f:type": {}}},
                "f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:lastHeartbeatTime": {}, "f:lastTransitionTime": {}, "f:message": {}, "f:reason": {}, "f:status": {}, "f:type": {}}},
                "f:nodeInfo": {"f:containerRuntimeVersion": {}, "f:kernelVersion": {}, "f:kubeletVersion": {}, "f:osImage": {}}}}}]},
        "status": {
            "addresses": [{"type": "InternalIP", "address": format!("10.0.{}.{}", i / 250, i % 250 + 1)}, {"type": "Hostname", "address": name}],
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "KubeletReady", "message": "kubelet is posting ready status"}],
            "nodeInfo": {"architecture": "amd64", "bootID": "", "containerRuntimeVersion": "cri-o://1.33.2", "kernelVersion": "5.14.0-570.el9_6.x86_64",
                "kubeProxyVersion": "", "kubeletVersion": "v1.33.2", "machineID": "", "operatingSystem": "linux",
                "osImage": "Red Hat Enterprise Linux CoreOS 9.6", "systemUUID": ""}}})
}

fn table_list(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = rt.block_on(serve::fleet_server(dir.path(), NODES, WATCHERS, node));
    let client = server.admin_http();
    let url = format!("{}/api/v1/nodes", server.url());
    let get = |url: &str| {
        let r = client.get(url).header("Accept", TABLE);
        async move {
            let r = r.send().await.unwrap();
            assert!(r.status().is_success(), "{}", r.status());
            r.bytes().await.unwrap()
        }
    };
    let bytes = rt.block_on(get(&url));
    let table: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["rows"].as_array().unwrap().len(), NODES);
    assert_eq!(table["rows"][0]["cells"][1], "Ready");
    let floor = rt.block_on(serve::memory_server(vec![("/api/v1/nodes".into(), bytes.clone())]));
    let floor_url = format!("{floor}/api/v1/nodes");
    let (mco_times, floor_times) = (Samples::default(), Samples::default());
    let mut g = c.benchmark_group("table_list_10000_nodes");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    for (name, url, times) in [
        ("mco_api_table_list", &url, &mco_times),
        ("same_bytes_from_memory", &floor_url, &floor_times),
    ] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let started = Instant::now();
                    let len = rt.block_on(get(url)).len();
                    let took = started.elapsed();
                    // Only the ages may differ (they tick between requests).
                    assert!(len.abs_diff(bytes.len()) <= 4 * NODES, "{len} vs {}", bytes.len());
                    times.lock().unwrap().push(took);
                    total += took;
                }
                total
            })
        });
    }
    g.finish();
    if let (Some(mco), Some(floor)) = (median(&mco_times), median(&floor_times)) {
        report::row_times(
            &format!(
                "Table LIST {NODES} nodes (kubectl get nodes), {} bytes (floor: the same bytes served from memory)",
                bytes.len()
            ),
            mco,
            floor,
            "≤ 30 ms and ≤ 3×",
        );
    }
    rt.block_on(server.stop());
}

/// Sends [`WRITES`] merge PATCHes of watched nodes' labels from [`WRITERS`] writers at once,
/// round `round`; the wall time.
async fn write_round(client: &reqwest::Client, base: &str, round: usize) -> Duration {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let writers = (0..WRITERS).map(|_| {
        let (client, next) = (client.clone(), next.clone());
        let base = base.to_string();
        async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= WRITES {
                    return;
                }
                let url = format!("{base}/api/v1/nodes/worker-{:05}", (round * WRITES + i) % WATCHERS);
                let r = client
                    .patch(&url)
                    .header("Content-Type", "application/merge-patch+json")
                    .body(json!({"metadata": {"labels": {"bench.mco.dev/round": round.to_string()}}}).to_string())
                    .send()
                    .await
                    .unwrap();
                assert!(r.status().is_success(), "PATCH: {}", r.status());
                r.bytes().await.unwrap();
            }
        }
    });
    futures_util::future::join_all(writers).await;
    started.elapsed()
}

fn watch_fanout(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = rt.block_on(serve::fleet_server(dir.path(), WATCHERS, WATCHERS, node));
    let client = server.admin_http();
    let base = server.url();
    let (none_times, watched_times) = (Samples::default(), Samples::default());
    let received = Arc::new(AtomicUsize::new(0));
    let mut round = 0;
    let mut g = c.benchmark_group("watch_fanout_400_pinned");
    g.sample_size(10);
    g.throughput(Throughput::Elements(WRITES as u64));
    let bench = |g: &mut criterion::BenchmarkGroup<_>, name: &str, round: &mut usize, times: &Samples| {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    *round += 1;
                    let took = rt.block_on(write_round(&client, &base, *round));
                    times.lock().unwrap().push(took);
                    total += took;
                }
                total
            })
        });
    };
    bench(&mut g, "patches_no_watchers", &mut round, &none_times);
    // 400 watches, each pinned to one node as a daemon's, each on its own connection, read as
    // they stream (a client that stops reading would be dropped by its watch).
    let rv = rt.block_on(async {
        let r = client.get(format!("{base}/api/v1/nodes?limit=1")).send().await.unwrap();
        r.json::<serde_json::Value>().await.unwrap()["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string()
    });
    let watches: Vec<_> = (0..WATCHERS)
        .map(|i| {
            let url =
                format!("{base}/api/v1/nodes?watch=1&resourceVersion={rv}&fieldSelector=metadata.name%3Dworker-{i:05}");
            let (client, received) = (
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
                    .unwrap(),
                received.clone(),
            );
            rt.spawn(async move {
                let r = client.get(url).send().await.unwrap();
                assert!(r.status().is_success());
                let mut body = r.bytes_stream();
                while let Some(Ok(chunk)) = body.next().await {
                    received.fetch_add(chunk.iter().filter(|b| **b == b'\n').count(), Ordering::Relaxed);
                }
            })
        })
        .collect();
    // Each watch has answered once its first event arrived: one write to every watched node.
    let before = round;
    rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(60);
        while received.load(Ordering::Relaxed) < WATCHERS {
            round += 1;
            write_round(&client, &base, round).await;
            assert!(
                Instant::now() < deadline,
                "the {WATCHERS} watches did not all see a write"
            );
        }
    });
    let seen_from = received.load(Ordering::Relaxed);
    let patched_from = round;
    bench(&mut g, "patches_400_pinned_watchers", &mut round, &watched_times);
    g.finish();
    // Every write after the watches opened reached its node's watcher.
    let sent = (round - patched_from) * WRITES;
    let deadline = Instant::now() + Duration::from_secs(30);
    while received.load(Ordering::Relaxed) < seen_from + sent && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let seen = received.load(Ordering::Relaxed) - seen_from;
    assert!(
        seen >= sent,
        "the watchers saw {seen} of {sent} events (rounds {before}..{round})"
    );
    for w in watches {
        w.abort();
    }
    if let (Some(none), Some(watched)) = (median(&none_times), median(&watched_times)) {
        let per_write = |d: Duration| d.as_secs_f64() / WRITES as f64;
        let extra = (per_write(watched) - per_write(none)).max(0.0);
        report::row(
            &format!("watch fan-out: extra time per write per watcher, {WATCHERS} watches pinned by name, {WRITERS} writers (floor: the time per write with no watch open; ratio: per write with / without)"),
            &format!("{:.3} µs", extra * 1e6 / WATCHERS as f64),
            &report::ms(Duration::from_secs_f64(per_write(none))),
            per_write(watched) / per_write(none),
            "≤ 2 µs per watcher per event",
        );
        let rate = |d: Duration| WRITES as f64 / d.as_secs_f64();
        report::row(
            &format!("node PATCHes/s with {WATCHERS} pinned watches, each write watched (floor: the same writes, no watch open)"),
            &format!("{:.0}/s", rate(watched)),
            &format!("{:.0}/s", rate(none)),
            rate(watched) / rate(none),
            "≥ 0.8×",
        );
    }
    rt.block_on(server.stop());
}

criterion_group!(benches, table_list, watch_fanout);
criterion_main!(benches);
