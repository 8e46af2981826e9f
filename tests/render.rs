//! The render controller never points a pool at a rendered config that does not exist: a merge
//! that Ignition would refuse keeps the pool on its previous render, with RenderDegraded naming
//! the field and the MachineConfigs that wrote it, and recovers once the inputs are fixed. Real
//! server, one real worker daemon.

mod common;

use common::*;
use mco::model::{Kind, MachineConfig, NodeAnnotations};
use std::time::Duration;

const ROLLOUT: Duration = Duration::from_secs(90);

/// Applies YAML through the same path as `mco apply -f` (warnings are allowed).
async fn apply_yaml(c: &Cluster, yaml: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mc.yaml");
    std::fs::write(&path, yaml).unwrap();
    c.apply(&[path]).await;
}

fn file_mc(name: &str, files: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: {name}
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.4.0
    storage:
      files:
{files}"
    )
}

fn condition(c: &Cluster, pool: &str, t: &str) -> (String, String) {
    let p = c.pool(pool);
    p.condition(t)
        .map(|c| (c.status.clone(), c.message.clone()))
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_merge_keeps_the_previous_render_and_recovers_when_fixed() {
    let c = Cluster::start(0, 1).await;
    let t0 = c.pool("worker").spec.configuration.name;
    apply_yaml(
        &c,
        &file_mc(
            "10-worker-a",
            "      - path: /etc/example-owner.conf\n        user: {id: 0}\n        contents: {source: 'data:,a'}\n",
        ),
    )
    .await;
    let good = c.wait_rolled_out("worker", &t0, ROLLOUT).await;

    // Valid alone, invalid merged: the entry ends up with both user.id and user.name.
    apply_yaml(
        &c,
        &file_mc(
            "20-worker-b",
            "      - path: /etc/example-owner.conf\n        user: {name: root}\n        contents: {source: 'data:,b'}\n",
        ),
    )
    .await;
    c.wait_for("RenderDegraded=True on worker", ROLLOUT, |s| {
        s.pools["worker"].condition_status("RenderDegraded") == "True"
    })
    .await;
    let (_, message) = condition(&c, "worker", "RenderDegraded");
    assert!(
        message.starts_with(
            "Failed to render configuration for pool worker: could not generate rendered MachineConfig: the merged config of "
        ),
        "{message}"
    );
    assert!(
        // files[0..4] are the template configs' (registries.conf, policy.json, 00-default, kubelet.conf).
        message.contains("spec.config.storage.files[4].user: cannot set both id and name"),
        "{message}"
    );
    assert!(message.contains("(set by 10-worker-a, 20-worker-b)"), "{message}");
    c.wait_for("worker Degraded", ROLLOUT, |s| {
        s.pools["worker"].condition_status("Degraded") == "True"
    })
    .await;
    let pool = c.pool("worker");
    assert_eq!(pool.spec.configuration.name, good, "the pool keeps its previous render");
    c.client
        .get::<MachineConfig>(Kind::MachineConfig, &pool.spec.configuration.name)
        .await
        .expect("the render the pool points at exists");

    // A later MachineConfig is blocked while the merge stays invalid ...
    apply_yaml(
        &c,
        &file_mc(
            "30-worker-c",
            "      - path: /etc/c\n        contents: {source: 'data:,c'}\n",
        ),
    )
    .await;
    c.wait_for("the message still names the merge", ROLLOUT, |s| {
        let p = &s.pools["worker"];
        p.condition("RenderDegraded")
            .is_some_and(|c| c.status == "True" && c.message.contains("30-worker-c"))
    })
    .await;
    assert_eq!(c.pool("worker").spec.configuration.name, good);

    // ... and everything proceeds once the inputs are fixed.
    c.client.delete(Kind::MachineConfig, "20-worker-b").await.unwrap();
    let fixed = c.wait_rolled_out("worker", &good, ROLLOUT).await;
    assert_eq!(
        condition(&c, "worker", "RenderDegraded"),
        ("False".into(), String::new())
    );
    assert_eq!(condition(&c, "worker", "Degraded").0, "False");
    assert_eq!(c.annotations("worker-0").current_config, fixed);
    let root = c.root("worker-0");
    assert_eq!(std::fs::read(root.join("etc/c")).unwrap(), b"c");
    assert_eq!(std::fs::read(root.join("etc/example-owner.conf")).unwrap(), b"a");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_without_contents_is_the_empty_file_on_every_path() {
    let c = Cluster::start(0, 1).await;
    let t0 = c.pool("worker").spec.configuration.name;
    // No contents at all, and a typo'd key (`sources`, warned about) that leaves no source.
    apply_yaml(
        &c,
        &file_mc(
            "50-worker-empty",
            "      - path: /etc/empty\n      - path: /etc/typo\n        contents: {sources: 'data:,lost'}\n",
        ),
    )
    .await;
    let rendered = c.wait_rolled_out("worker", &t0, ROLLOUT).await;
    assert_eq!(condition(&c, "worker", "RenderDegraded").0, "False");
    let root = c.root("worker-0");
    for f in ["etc/empty", "etc/typo"] {
        let md = std::fs::metadata(root.join(f)).unwrap();
        assert_eq!(md.len(), 0, "{f} is the empty file");
    }
    assert_eq!(mode_of(&root.join("etc/empty")), 0o644);
    assert_eq!(
        NodeAnnotations::read(&c.server.hub.state().nodes["worker-0"], &c.keys()).state,
        "Done"
    );

    // The rendered config and what a new node gets from /config/worker are valid Ignition.
    let mc: MachineConfig = c.client.get(Kind::MachineConfig, &rendered).await.unwrap();
    let cfg = mco::ignition::parse_config(mc.spec.config.as_ref().unwrap(), "spec.config").unwrap();
    let empty = cfg.storage.files.iter().find(|f| f.path == "/etc/empty").unwrap();
    assert_eq!(empty.overwrite, Some(true));
    assert_eq!(mco::ignition::file_contents(empty).unwrap(), b"");
    let served: serde_json::Value = c
        .http()
        .get(format!("{}/config/worker", c.server.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    mco::ignition::parse_config(&served, "config").expect("/config/worker is valid Ignition");
    c.stop().await;
}
