//! Owner references are honoured as Kubernetes' garbage collector does: deleting a pool deletes
//! its rendered configs (propagationPolicy Background, the default, and Foreground) or keeps them
//! without the reference (Orphan), in the same atomic batch; objects whose owners are all gone
//! are collected. Real server on 127.0.0.1:0, no nodes.

mod common;

use common::*;
use mco::model::{Kind, MachineConfig};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

fn rendered_of(c: &Cluster, pool: &str) -> Vec<String> {
    let prefix = format!("rendered-{pool}-");
    c.server
        .hub
        .state()
        .machine_configs
        .keys()
        .filter(|n| n.starts_with(&prefix))
        .cloned()
        .collect()
}

async fn infra_pool_rendered(c: &Cluster) -> Vec<String> {
    c.apply(&[examples().join("infra-pool.yaml")]).await;
    c.wait_for("a rendered-infra config", WAIT, |s| {
        s.pools
            .get("infra")
            .is_some_and(|p| !p.spec.configuration.name.is_empty())
    })
    .await;
    rendered_of(c, "infra")
}

/// DELETE with a DeleteOptions body, as kubectl sends it.
async fn delete_pool(c: &Cluster, body: Value) -> reqwest::Response {
    c.http()
        .delete(format!(
            "{}/apis/machineconfiguration.openshift.io/v1/machineconfigpools/infra",
            c.server.url()
        ))
        .header("x-mco-actor", "gc-test")
        .json(&body)
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_pool_honours_the_propagation_policy() {
    let c = Cluster::start(0, 0).await;

    for body in [
        json!({}),
        json!({"propagationPolicy": "Background"}),
        json!({"propagationPolicy": "Foreground"}),
    ] {
        let rendered = infra_pool_rendered(&c).await;
        assert!(!rendered.is_empty());
        let before = c.server.hub.published_seq();
        let resp = delete_pool(&c, body.clone()).await;
        assert_eq!(resp.status(), 200, "{body}");
        // One atomic batch: the pool and every rendered config it owned.
        let st = c.server.hub.state();
        assert!(!st.pools.contains_key("infra"));
        assert!(
            rendered_of(&c, "infra").is_empty(),
            "{body}: {:?}",
            rendered_of(&c, "infra")
        );
        let events: Vec<_> = c
            .server
            .hub
            .store()
            .read_range(before, st.seq)
            .map(|e| e.unwrap())
            .filter(|e| e.actor == "admin") // the x-mco-actor header is not who did it
            .collect();
        drop(st);
        let deleted: Vec<_> = events
            .iter()
            .filter(|e| e.event_type == "MachineConfigDeleted")
            .map(|e| e.name.clone())
            .collect();
        assert_eq!(deleted.len(), rendered.len(), "{body}");
        let times: std::collections::BTreeSet<_> = events.iter().map(|e| e.time_ms).collect();
        assert_eq!(times.len(), 1, "one batch");
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(
            seqs.len() as u64,
            seqs[seqs.len() - 1] - seqs[0] + 1,
            "one contiguous batch"
        );
        let pool_first = events[0].event_type == "PoolDeleted";
        assert_eq!(
            pool_first,
            body["propagationPolicy"] != "Foreground",
            "{body}: owner order"
        );
        assert!(events
            .iter()
            .filter(|e| e.event_type == "MachineConfigDeleted")
            .all(|e| e.detail.contains("deleted with its owner MachineConfigPool \"infra\"")));
    }

    // Orphan: the rendered configs stay, without the reference, and are not collected later.
    let rendered = infra_pool_rendered(&c).await;
    let resp = delete_pool(&c, json!({"propagationPolicy": "Orphan"})).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(rendered_of(&c, "infra"), rendered);
    for name in &rendered {
        let mc: MachineConfig = c.client.get(Kind::MachineConfig, name).await.unwrap();
        assert!(mc.metadata.owner_references.is_none(), "{name} keeps no reference");
    }

    // A new pool of that name adopts the orphaned render it produces again (MCO's re-apply
    // merges owner references), so deleting it takes the render along.
    let again = infra_pool_rendered(&c).await;
    assert_eq!(again, rendered);
    let uid = c.pool("infra").metadata.uid.clone().unwrap();
    c.wait_for("the render is adopted", WAIT, |s| {
        s.machine_configs[&rendered[0]]
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.uid == uid)
    })
    .await;
    assert_eq!(delete_pool(&c, json!({})).await.status(), 200);
    assert!(rendered_of(&c, "infra").is_empty());

    // Bad policies are refused with Kubernetes' messages.
    infra_pool_rendered(&c).await;
    let resp = delete_pool(&c, json!({"propagationPolicy": "Sometimes"})).await;
    assert_eq!(resp.status(), 400);
    let status: Value = resp.json().await.unwrap();
    assert!(status["message"]
        .as_str()
        .unwrap()
        .contains("Unsupported value: \"Sometimes\""));
    let resp = delete_pool(&c, json!({"propagationPolicy": "Orphan", "orphanDependents": true})).await;
    assert_eq!(resp.status(), 400);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_whose_owners_are_gone_are_collected() {
    let c = Cluster::start(0, 0).await;
    let owned = |name: &str, kind: &str, uid: &str| {
        json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
            "metadata": {"name": name, "ownerReferences": [{"apiVersion": "v1", "kind": kind, "name": "gone", "uid": uid}]},
            "spec": {}})
    };
    // Owned by a pool that does not exist: garbage.
    c.client
        .create(
            Kind::MachineConfig,
            &owned("dangling", "MachineConfigPool", "no-such-uid"),
            None,
        )
        .await
        .unwrap();
    // Owned by a kind mco does not store: cannot be resolved, so it is left alone.
    c.client
        .create(
            Kind::MachineConfig,
            &owned("foreign", "ControllerConfig", "other-uid"),
            None,
        )
        .await
        .unwrap();
    c.wait_for("the dangling dependent is collected", WAIT, |s| {
        !s.machine_configs.contains_key("dangling")
    })
    .await;
    assert!(c.server.hub.state().machine_configs.contains_key("foreign"));
    let collected = c
        .server
        .hub
        .store()
        .read_range(0, c.server.hub.published_seq())
        .map(|e| e.unwrap())
        .find(|e| e.name == "dangling" && e.event_type == "MachineConfigDeleted")
        .unwrap();
    assert_eq!(collected.actor, "controller:garbage-collector");
    c.stop().await;
}
