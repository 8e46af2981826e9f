//! A controller decision that changes many objects is one atomic append (issue 13, "batch what
//! is one decision"), over a real server on 127.0.0.1:0 without daemons: the node controller
//! targets every waiting worker at once, and its events (one per node, as before) come from one
//! commit: consecutive resourceVersions with one timestamp.

use mco::model::{NodeAnnotations, DEFAULT_GROUP};
use mco::server::{self, ServerConfig};
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn targeting_many_nodes_is_one_append() {
    let dir = tempfile::tempdir().unwrap();
    let s = server::start(ServerConfig {
        data_dir: dir.path().to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        group: DEFAULT_GROUP.into(),
        drain_hook: None,
        ..Default::default()
    })
    .await
    .unwrap();
    let http = s.admin_http();
    const N: usize = 40;
    let keys = s.hub.keys().clone();
    let mut changes = s.hub.changes();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while s
        .hub
        .state()
        .pools
        .get("worker")
        .is_none_or(|p| p.spec.configuration.name.is_empty())
    {
        assert!(tokio::time::Instant::now() < deadline, "the worker pool never rendered");
        let _ = tokio::time::timeout_at(deadline, changes.changed()).await;
    }
    // The pool paused while the nodes join, then resumed: the controller's next pass finds
    // all of them waiting for their first config, one decision.
    let pool = format!(
        "{}/apis/machineconfiguration.openshift.io/v1/machineconfigpools/worker",
        s.url()
    );
    let pause = |paused: bool| {
        http.patch(&pool)
            .header("Content-Type", "application/merge-patch+json")
            .body(json!({"spec": {"paused": paused}}).to_string())
            .send()
    };
    assert!(pause(true).await.unwrap().status().is_success());
    for i in 0..N {
        let r = http
            .post(format!("{}/api/v1/nodes", s.url()))
            .json(
                &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("fleet-{i:02}"),
                "labels": {"node-role.kubernetes.io/worker": ""}}}),
            )
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    }
    assert!(pause(false).await.unwrap().status().is_success());
    loop {
        let targeted = s
            .hub
            .state()
            .nodes
            .values()
            .filter(|n| !NodeAnnotations::read(n, &keys).desired_config.is_empty())
            .count();
        if targeted == N {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{targeted} of {N} nodes targeted"
        );
        let _ = tokio::time::timeout_at(deadline, changes.changed()).await;
    }
    let store = s.hub.store().clone();
    let events: Vec<mco::event::Event> = tokio::task::spawn_blocking(move || {
        store
            .read_after(0)
            .map(Result::unwrap)
            .filter(|e| e.actor == "controller:node" && e.name.starts_with("fleet-"))
            .collect()
    })
    .await
    .unwrap();
    // One event per node, as before batching.
    assert_eq!(
        events.len(),
        N,
        "{:?}",
        events.iter().map(|e| &e.name).collect::<Vec<_>>()
    );
    // One commit: consecutive seqs, one timestamp.
    for w in events.windows(2) {
        assert_eq!(
            (w[1].seq, w[1].time_ms),
            (w[0].seq + 1, w[0].time_ms),
            "{} then {}",
            w[0].name,
            w[1].name
        );
    }
    s.shutdown.cancel();
}
