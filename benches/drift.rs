//! Drift detection latency (DESIGN.md section 8, target p99 <= 20 ms from the write to the
//! report): one `DriftMonitor` (one inotify watcher) on a sandbox node with 1,000 managed files;
//! each iteration rewrites one managed file (alternately drifted and restored) and waits for
//! the monitor's report, timed from the end of the write. Measures the node side; the API write that follows is one PATCH.

use criterion::{criterion_group, criterion_main, Criterion};
use mco::daemon::apply::{write_config, WriteMode};
use mco::daemon::drift::{DriftMonitor, DriftReport};
use mco::daemon::validate::ManagedSet;
use mco::host::{Host, SandboxHost};
use mco::model::MachineConfig;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

const N_FILES: usize = 1000;

fn drift(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let host = SandboxHost::init(dir.path()).unwrap();
    let files: Vec<_> = (0..N_FILES)
        .map(|i| json!({"path": format!("/etc/bench/d{}/f{i}.conf", i % 20), "mode": 420, "contents": {"source": format!("data:,value-{i}%0A")}}))
        .collect();
    let mc: MachineConfig = serde_json::from_value(json!({"metadata": {"name": "rendered-worker-bench"},
        "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": files}}}}))
    .unwrap();
    write_config(&host, WriteMode::FirstBoot, &mc).unwrap();
    let host: Arc<dyn Host> = Arc::new(host);
    let target = host.resolve("/etc/bench/d7/f507.conf").unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let monitor = rt.block_on(async {
        let set = ManagedSet::from_config(&*host, &mc).unwrap();
        let m = DriftMonitor::start(host.clone(), set, tx).unwrap();
        assert_eq!(rx.recv().await, Some(DriftReport::Clean));
        m
    });
    let mut drifted = false;
    let mut g = c.benchmark_group("drift");
    g.sample_size(50);
    g.bench_function("write_to_report_1000_managed_files", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                drifted = !drifted;
                let content: &[u8] = if drifted { b"tampered\n" } else { b"value-507\n" };
                // Timed from the moment the write completed (the drift exists from then on):
                // the write itself can take milliseconds on a filesystem mounted with
                // `discard` (truncating a file with allocated blocks), which is not detection.
                std::fs::write(&target, content).unwrap();
                let start = Instant::now();
                let report = rt.block_on(async {
                    tokio::time::timeout(Duration::from_secs(5), rx.recv())
                        .await
                        .unwrap()
                        .unwrap()
                });
                total += start.elapsed();
                assert_eq!(matches!(report, DriftReport::Drift { .. }), drifted);
            }
            total
        })
    });
    g.finish();
    rt.block_on(monitor.stop());
}

criterion_group!(benches, drift);
criterion_main!(benches);
