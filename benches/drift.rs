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

#[path = "common/report.rs"]
mod report;
use report::Samples;

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
    let (mco, floor) = (Samples::default(), Samples::default());
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
                let took = start.elapsed();
                mco.lock().unwrap().push(took);
                total += took;
                assert_eq!(matches!(report, DriftReport::Drift { .. }), drifted);
            }
            total
        })
    });
    // The floor: a bare inotify watch (the `notify` crate, as the monitor uses) on a directory
    // of one file; the same kind of write, timed the same way to the watcher's first event.
    let bare = tempfile::tempdir().unwrap();
    let file = bare.path().join("f.conf");
    std::fs::write(&file, b"value\n").unwrap();
    let (btx, brx) = std::sync::mpsc::channel();
    let mut watcher = notify::recommended_watcher(btx).unwrap();
    notify::Watcher::watch(&mut watcher, bare.path(), notify::RecursiveMode::NonRecursive).unwrap();
    g.bench_function("floor_bare_inotify_wakeup", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for i in 0..iters {
                std::fs::write(
                    &file,
                    if i % 2 == 0 {
                        &b"tampered\n"[..]
                    } else {
                        &b"value\n"[..]
                    },
                )
                .unwrap();
                let start = Instant::now();
                brx.recv_timeout(Duration::from_secs(5)).unwrap().unwrap();
                let took = start.elapsed();
                floor.lock().unwrap().push(took);
                total += took;
                // The write's other events (modify, close) are not this iteration's wake-up.
                while brx.recv_timeout(Duration::from_millis(2)).is_ok() {}
            }
            total
        })
    });
    g.finish();
    if let (Some(m), Some(f)) = (report::percentile(&mco, 99.0), report::percentile(&floor, 99.0)) {
        report::row_times(
            "drift: write to one of 1,000 managed files → the monitor's report, p99 (floor: a bare inotify wake-up, p99)",
            m,
            f,
            "p99 ≤ 20 ms",
        );
    }
    rt.block_on(monitor.stop());
}

criterion_group!(benches, drift);
criterion_main!(benches);
