//! Property: for generated histories of applies, patches, deletes, renders and node
//! transitions written through the hub, the state read at every resourceVersion
//! (`Store::state_at`, across snapshots taken every 3 events) equals a fresh fold of that
//! prefix of the log, and equals what was served live at that moment.

use mco::command::{Actor, Hub, Propagation, Scope};
use mco::model::Kind;
use mco::state::State;
use mco::store::Store;
use proptest::prelude::*;
use serde_json::{json, Value};

#[derive(Clone, Debug)]
enum Op {
    /// Create or update MachineConfig `mc-<i>` with a file whose contents are `v`.
    ApplyMc(u8, u8),
    DeleteMc(u8),
    /// Register or move node `node-<i>` to `state` on `rendered-worker-<c>`.
    Node(u8, u8, u8),
    DeleteNode(u8),
    /// A render: `rendered-worker-<c>` owned by the pool, and the pool pointed at it.
    Render(u8),
    Pause(bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..4u8, 0..4u8).prop_map(|(i, v)| Op::ApplyMc(i, v)),
        (0..4u8).prop_map(Op::DeleteMc),
        (0..3u8, 0..3u8, 0..3u8).prop_map(|(i, s, c)| Op::Node(i, s, c)),
        (0..3u8).prop_map(Op::DeleteNode),
        (0..3u8).prop_map(Op::Render),
        any::<bool>().prop_map(Op::Pause),
    ]
}

const G: &str = "machineconfiguration.openshift.io";

fn mc(i: u8, v: u8) -> Value {
    json!({"apiVersion": format!("{G}/v1"), "kind": "MachineConfig",
        "metadata": {"name": format!("mc-{i}"), "labels": {format!("{G}/role"): "worker"}},
        "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": [{"path": format!("/etc/f{i}"), "contents": {"source": format!("data:,v{v}")}}]}}}})
}

async fn run(hub: &Hub, op: &Op, actor: &Actor) {
    let _ = match op {
        Op::ApplyMc(i, v) => match hub.create(Kind::MachineConfig, mc(*i, *v), actor).await {
            Ok(o) => Ok(o),
            Err(_) => {
                let new = mc(*i, *v);
                hub.update(
                    Kind::MachineConfig,
                    &format!("mc-{i}"),
                    Scope::Main,
                    None,
                    actor,
                    move |cur| {
                        let mut n = cur.clone();
                        n["spec"] = new["spec"].clone();
                        Ok(n)
                    },
                )
                .await
            }
        },
        Op::DeleteMc(i) => {
            hub.delete(
                Kind::MachineConfig,
                &format!("mc-{i}"),
                None,
                Propagation::Background,
                actor,
            )
            .await
        }
        Op::Node(i, s, c) => {
            let name = format!("node-{i}");
            let state = ["Done", "Working", "Degraded"][*s as usize];
            let ann =
                json!({format!("{G}/state"): state, format!("{G}/currentConfig"): format!("rendered-worker-{c}")});
            let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"node-role.kubernetes.io/worker": ""}, "annotations": ann}});
            match hub.create(Kind::Node, node.clone(), actor).await {
                Ok(o) => Ok(o),
                Err(_) => {
                    hub.update(Kind::Node, &name, Scope::Main, None, actor, move |cur| {
                        let mut n = cur.clone();
                        n["metadata"]["annotations"] = node["metadata"]["annotations"].clone();
                        Ok(n)
                    })
                    .await
                }
            }
        }
        Op::DeleteNode(i) => {
            hub.delete(Kind::Node, &format!("node-{i}"), None, Propagation::Background, actor)
                .await
        }
        Op::Render(c) => {
            let name = format!("rendered-worker-{c}");
            let uid = hub.state().pools["worker"].metadata.uid.clone().unwrap_or_default();
            let rendered = json!({"apiVersion": format!("{G}/v1"), "kind": "MachineConfig",
                "metadata": {"name": name, "ownerReferences": [{"apiVersion": format!("{G}/v1"), "kind": "MachineConfigPool", "name": "worker", "uid": uid, "controller": true}]},
                "spec": {"config": {"ignition": {"version": "3.4.0"}}, "kernelArguments": [format!("k={c}")]}});
            let _ = hub.create(Kind::MachineConfig, rendered, actor).await;
            hub.update(
                Kind::MachineConfigPool,
                "worker",
                Scope::Main,
                None,
                actor,
                move |cur| {
                    let mut p = cur.clone();
                    p["spec"]["configuration"] = json!({"name": name});
                    Ok(p)
                },
            )
            .await
        }
        Op::Pause(paused) => {
            hub.update(
                Kind::MachineConfigPool,
                "worker",
                Scope::Main,
                None,
                actor,
                move |cur| {
                    let mut p = cur.clone();
                    p["spec"]["paused"] = json!(paused);
                    Ok(p)
                },
            )
            .await
        }
    };
}

fn check_history(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let hub = Hub::open(Store::temporary().unwrap().with_snapshot_every(3), G).unwrap();
        let actor = Actor::new("proptest");
        let pool = json!({"apiVersion": format!("{G}/v1"), "kind": "MachineConfigPool", "metadata": {"name": "worker"},
            "spec": {"machineConfigSelector": {"matchLabels": {format!("{G}/role"): "worker"}},
                     "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}}}});
        hub.create(Kind::MachineConfigPool, pool, &actor).await.unwrap();
        let mut live = vec![(hub.published_seq(), State::clone(&hub.state()))];
        for op in &ops {
            run(&hub, op, &actor).await;
            live.push((hub.published_seq(), State::clone(&hub.state())));
        }
        let last = hub.published_seq();
        let events: Vec<_> = hub.store().read_range(0, last).map(|e| e.unwrap()).collect();
        prop_assert_eq!(events.len() as u64, last);
        let mut fold = State::default();
        let mut folds = vec![fold.clone()];
        for e in &events {
            fold.apply(e);
            folds.push(fold.clone());
        }
        for (seq, folded) in folds.iter().enumerate() {
            let read = hub.store().state_at(seq as u64).unwrap();
            prop_assert_eq!(&read, folded, "state_at({}) differs from the fold of the prefix", seq);
        }
        for (seq, served) in &live {
            prop_assert_eq!(
                &folds[*seq as usize],
                served,
                "what was served at {} differs from the log",
                seq
            );
        }
        prop_assert_eq!(&hub.store().load_state().unwrap(), &*hub.state());
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn every_resource_version_reads_as_the_fold_of_its_prefix(ops in proptest::collection::vec(op(), 1..40)) {
        check_history(ops)?;
    }
}
