//! Render benchmark (DESIGN.md section 8): one pool rendered from 1,000 MachineConfigs with
//! 10 files each (target <= 50 ms), selection + merge + rendered name.

use criterion::{criterion_group, criterion_main, Criterion};
use mco::model::{MachineConfig, MachineConfigPool};
use serde_json::json;

#[path = "common/report.rs"]
mod report;
use report::Samples;

fn inputs() -> (MachineConfigPool, Vec<MachineConfig>) {
    let pool: MachineConfigPool = serde_json::from_value(json!({"metadata": {"name": "worker"},
        "spec": {"machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": "worker"}}}}))
    .unwrap();
    let mcs = (0..1000)
        .map(|i| {
            let files: Vec<_> = (0..10)
                .map(|f| {
                    json!({"path": format!("/etc/bench/{}/file-{f}.conf", i % 300), "mode": 420,
                    "contents": {"source": format!("data:,setting%3D{i}-{f}%0A")}})
                })
                .collect();
            serde_json::from_value(json!({"metadata": {"name": format!("{:04}-worker-bench", i),
                "labels": {"machineconfiguration.openshift.io/role": "worker"}},
                "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": files}},
                         "kernelArguments": [format!("bench.{i}=1")]}}))
            .unwrap()
        })
        .collect();
    (pool, mcs)
}

fn render(c: &mut Criterion) {
    let (pool, mcs) = inputs();
    let refs: Vec<&MachineConfig> = mcs.iter().collect();
    let (render, floor) = (Samples::default(), Samples::default());
    let mut g = c.benchmark_group("render");
    g.sample_size(20);
    g.bench_function("pool_1000_mcs_x_10_files", |b| {
        b.iter(|| report::timed(&render, || mco::render::render_pool(&pool, &refs).unwrap()))
    });
    // The floor: serialise the same MachineConfigs' configs (a render reads every one of them
    // and writes their merge, of about the same size).
    g.bench_function("floor_serialize_inputs", |b| {
        b.iter(|| {
            report::timed(&floor, || {
                refs.iter()
                    .map(|mc| serde_json::to_vec(&mc.spec.config).unwrap().len())
                    .sum::<usize>()
            })
        })
    });
    g.finish();
    if let (Some(r), Some(f)) = (report::median(&render), report::median(&floor)) {
        report::row(
            "render one pool from 1,000 MachineConfigs × 10 files (floor: serialising their configs)",
            &report::ms(r),
            &report::ms(f),
            r.as_secs_f64() / f.as_secs_f64(),
            "≤ 50 ms",
        );
    }
}

criterion_group!(benches, render);
criterion_main!(benches);
