//! The event log on etcd (issue 26), on a local etcd started by the bench (`mco::up::etcd`,
//! Debian's `etcd` binary; the bench says so and measures nothing without it):
//! - durable append of one event and of a batch of 100 through `Store::append` +
//!   `Store::flush` on etcd (one guarded, fenced transaction per flush), beside raw etcd
//!   transactions of the same bytes with the same guard on the head, from a bench client in
//!   the same run (target ≥ 0.7× the raw rate), on 1 and on 3 members.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use etcd_client::{Compare, CompareOp, Txn, TxnOp};
use mco::event::{Event, EventType, SCHEMA_VERSION};
use mco::store::etcd::EtcdLog;
use mco::store::Store;
use serde_json::json;

#[path = "common/report.rs"]
mod report;
use report::Samples;

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
    if !mco::up::etcd::installed() {
        eprintln!("benches/etcd.rs: SKIPPED: no `etcd` binary on PATH (apt-get install etcd-server)");
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    for members in [1usize, 3] {
        let dir = tempfile::tempdir().unwrap();
        let cluster = rt
            .block_on(mco::up::etcd::EtcdCluster::start(dir.path(), members))
            .unwrap();
        let mut cfg = mco::store::etcd::EtcdConfig::parse(&cluster.url(), "bench").unwrap();
        cfg.prefix = "/mco/".into();
        let store = rt.block_on(async {
            let log = EtcdLog::connect(cfg).await.unwrap();
            assert_eq!(log.try_acquire().await.unwrap(), None);
            Store::open_etcd(log, mco::store::SNAPSHOT_EVERY).await.unwrap()
        });
        let mut raw = rt
            .block_on(etcd_client::Client::connect(
                cluster
                    .endpoints()
                    .iter()
                    .map(|e| format!("http://{e}"))
                    .collect::<Vec<_>>(),
                None,
            ))
            .unwrap();
        for batch in [1u64, 100] {
            let mut g = c.benchmark_group(format!("etcd_{members}_members_durable_append_batch_{batch}"));
            g.throughput(Throughput::Elements(batch));
            g.sample_size(20);
            let (mco_times, raw_times) = (Samples::default(), Samples::default());
            let mut seq = store.last_seq();
            g.bench_function("mco_store", |b| {
                b.iter_batched(
                    || {
                        let evs: Vec<Event> = (1..=batch).map(|i| node_event(seq + i)).collect();
                        seq += batch;
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
            // The floor: the same framed records under the same keys of another prefix, one
            // transaction guarded on a head key, as a hand-written client would do it.
            let mut raw_seq = 0u64;
            g.bench_function("raw_etcd_txn", |b| {
                b.iter_batched(
                    || {
                        let recs: Vec<(u64, Vec<u8>)> = (1..=batch)
                            .map(|i| {
                                let e = node_event(raw_seq + i);
                                (raw_seq + i, mco::store::record::frame_with(|out| e.encode_into(out)))
                            })
                            .collect();
                        raw_seq += batch;
                        recs
                    },
                    |recs| {
                        report::timed(&raw_times, || {
                            rt.block_on(async {
                                let head = recs[0].0 - 1;
                                let last = recs.last().unwrap().0;
                                let mut ops: Vec<TxnOp> = recs
                                    .into_iter()
                                    .map(|(s, v)| TxnOp::put(format!("/raw-{batch}/events/{s:020}"), v, None))
                                    .collect();
                                let head_key = format!("/raw-{batch}/head");
                                ops.push(TxnOp::put(head_key.clone(), last.to_be_bytes().to_vec(), None));
                                let guard = if head == 0 {
                                    Compare::create_revision(head_key, CompareOp::Equal, 0)
                                } else {
                                    Compare::value(head_key, CompareOp::Equal, head.to_be_bytes().to_vec())
                                };
                                let r = raw.txn(Txn::new().when([guard]).and_then(ops)).await.unwrap();
                                assert!(r.succeeded());
                            })
                        })
                    },
                    BatchSize::SmallInput,
                )
            });
            g.finish();
            if let (Some(m), Some(r)) = (report::median(&mco_times), report::median(&raw_times)) {
                report::row(
                    &format!("durable append on etcd ({members} member(s)), batch of {batch} + flush (floor: one raw guarded etcd transaction of the same bytes); ratio = rate against raw"),
                    &report::ms(m),
                    &report::ms(r),
                    r.as_secs_f64() / m.as_secs_f64(),
                    "≥ 0.7× raw's rate",
                );
            }
        }
        if let Some(log) = store.remote() {
            rt.block_on(log.release());
        }
        drop(store);
        rt.block_on(cluster.stop());
    }
}

criterion_group!(benches, append);
criterion_main!(benches);
