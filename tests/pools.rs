//! Pool-level warnings MCO emits as Kubernetes Events, over a real server: a pool whose
//! nodeSelector is `{}` gets `SelectingAll` (Warning) each time it starts selecting all, and
//! its nodes are left alone.

mod common;

use common::*;
use mco::model::Kind;
use serde_json::{json, Value};
use std::time::Duration;

fn selecting_all_notes(c: &Cluster) -> usize {
    c.server
        .hub
        .store()
        .read_range(0, c.server.hub.published_seq())
        .filter(|e| {
            let e = e.as_ref().unwrap();
            e.name == "sel-all" && e.event_type == "PoolSelectingAll"
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_node_selector_gets_mco_selecting_all_warning() {
    let c = Cluster::start(0, 1).await;
    let pool = json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": "sel-all"},
        "spec": {"machineConfigSelector": {"matchExpressions": [{"key": "machineconfiguration.openshift.io/role", "operator": "In", "values": ["worker", "sel-all"]}]},
                 "nodeSelector": {}}});
    c.client.create(Kind::MachineConfigPool, &pool, None).await.unwrap();
    c.wait_for("a SelectingAll note", Duration::from_secs(30), |_| {
        selecting_all_notes(&c) == 1
    })
    .await;

    let url = format!(
        "{}/api/v1/events?fieldSelector=involvedObject.name=sel-all",
        c.server.url()
    );
    let events: Value = c.http().get(url).send().await.unwrap().json().await.unwrap();
    let warning = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["reason"] == "SelectingAll")
        .expect("the Warning is served as an Event");
    assert_eq!(warning["type"], "Warning");
    assert_eq!(
        warning["message"],
        "This machineconfigpool is selecting all nodes. A non-empty selector is required."
    );
    assert_eq!(warning["involvedObject"]["kind"], "MachineConfigPool");

    // Other changes make the controllers run again: no second warning while nothing changed.
    let t0 = c.pool("worker").spec.configuration.name;
    c.apply(&[examples().join("ssh-key.yaml")]).await;
    c.wait_rolled_out("worker", &t0, Duration::from_secs(60)).await;
    assert_eq!(selecting_all_notes(&c), 1);
    assert_eq!(c.annotations("worker-0").state, "Done");

    // A pool that stops selecting all and starts again is warned again.
    let set = |sel: Value| json!({"spec": {"nodeSelector": sel}});
    c.client
        .merge_patch(
            Kind::MachineConfigPool,
            "sel-all",
            &set(json!({"matchLabels": {"node-role.kubernetes.io/sel-all": ""}})),
            false,
        )
        .await
        .unwrap();
    // A controller pass has seen it once the status observed the new generation.
    c.wait_for(
        "a controller pass over the new selector",
        Duration::from_secs(10),
        |s| {
            let p = &s.pools["sel-all"];
            p.spec.node_selector.as_ref().is_some_and(|n| n.match_labels.is_some())
                && Some(p.status.observed_generation) == p.metadata.generation
        },
    )
    .await;
    // A merge patch cannot set `{}` over matchLabels (it merges): replace the selector.
    c.client
        .merge_patch(
            Kind::MachineConfigPool,
            "sel-all",
            &set(json!({"matchLabels": null})),
            false,
        )
        .await
        .unwrap();
    c.wait_for("a second SelectingAll note", Duration::from_secs(30), |_| {
        selecting_all_notes(&c) == 2
    })
    .await;
    c.stop().await;
}
