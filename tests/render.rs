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
    // No contents at all, and a typo'd key (`sources`: the server warns, as kube-apiserver
    // only warns of unknown Ignition keys) that leaves no source; `mco apply` refuses it by
    // default (`--validate=strict`), so it goes with `--validate=warn`.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mc.yaml");
    let yaml = file_mc(
        "50-worker-empty",
        "      - path: /etc/empty\n      - path: /etc/typo\n        contents: {sources: 'data:,lost'}\n",
    );
    std::fs::write(&path, yaml).unwrap();
    let (out, ok) = mco::cli::apply_validated(&c.client, &[path], mco::cli::validate::Validate::Warn)
        .await
        .unwrap();
    assert!(ok, "applied with --validate=warn: {out}");
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

/// The rendered configs of `pool` (by name).
fn renders_of(c: &Cluster, pool: &str) -> std::collections::BTreeSet<String> {
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

/// Whether `pool` targets a render whose sources include every one of `mcs` and whose merged
/// files contain `text` in `path`.
fn targets_with(s: &mco::state::State, pool: &str, mcs: &[&str], path: &str, text: &str) -> bool {
    let p = &s.pools[pool];
    let sources: Vec<&str> = p.spec.configuration.source.iter().map(|r| r.name.as_str()).collect();
    if !mcs.iter().all(|m| sources.contains(m)) {
        return false;
    }
    let Some(mc) = s.machine_configs.get(&p.spec.configuration.name) else {
        return false;
    };
    let Ok(cfg) = mco::ignition::parse_config(mc.spec.config.as_ref().unwrap(), "spec.config") else {
        return false;
    };
    cfg.storage.files.iter().any(|f| {
        f.path == path && mco::ignition::file_contents(f).is_ok_and(|b| String::from_utf8_lossy(&b).contains(text))
    })
}

/// Every change that leads to a render waits for the render delay, whatever its kind: one
/// `mco apply` of an ImageDigestMirrorSet with the Image config gives one new render per pool
/// (MCO coalesces for 5 s, `renderDelay`), not one for the mirror set and another for the Image
/// config; the same for a KubeletConfig with a ContainerRuntimeConfig. The final render holds
/// both changes, so an earlier render of one alone would be a second rendered config.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_kinds_applied_together_render_once_per_pool() {
    let c = Cluster::start(0, 0).await;
    let before: Vec<_> = ["master", "worker"].iter().map(|p| renders_of(&c, p)).collect();
    apply_yaml(
        &c,
        "apiVersion: config.openshift.io/v1
kind: ImageDigestMirrorSet
metadata:
  name: release-mirror
spec:
  imageDigestMirrors:
    - source: quay.io/openshift-release-dev/ocp-release
      mirrors:
        - mirror.example.com:5000/ocp/release
---
apiVersion: config.openshift.io/v1
kind: Image
metadata:
  name: cluster
spec:
  registrySources:
    insecureRegistries:
      - insecure.example.com
",
    )
    .await;
    for (pool, before) in ["master", "worker"].iter().zip(&before) {
        let generated = format!("99-{pool}-generated-registries");
        c.wait_for(
            &format!("{pool} on a render with the mirror and the insecure registry"),
            ROLLOUT,
            |s| {
                targets_with(
                    s,
                    pool,
                    &[&generated],
                    "/etc/containers/registries.conf",
                    "mirror.example.com:5000/ocp/release",
                ) && targets_with(
                    s,
                    pool,
                    &[&generated],
                    "/etc/containers/registries.conf",
                    "insecure.example.com",
                )
            },
        )
        .await;
        let new: Vec<String> = renders_of(&c, pool).difference(before).cloned().collect();
        assert_eq!(new.len(), 1, "{pool}: one render for one apply, got {new:?}");
    }

    let before = renders_of(&c, "worker");
    apply_yaml(
        &c,
        "apiVersion: machineconfiguration.openshift.io/v1
kind: KubeletConfig
metadata:
  name: max-pods
spec:
  machineConfigPoolSelector:
    matchLabels:
      pools.operator.machineconfiguration.openshift.io/worker: \"\"
  kubeletConfig:
    maxPods: 300
---
apiVersion: machineconfiguration.openshift.io/v1
kind: ContainerRuntimeConfig
metadata:
  name: pids
spec:
  machineConfigPoolSelector:
    matchLabels:
      pools.operator.machineconfiguration.openshift.io/worker: \"\"
  containerRuntimeConfig:
    pidsLimit: 8192
",
    )
    .await;
    c.wait_for("worker on a render with both generated configs", ROLLOUT, |s| {
        targets_with(
            s,
            "worker",
            &["99-worker-generated-kubelet", "99-worker-generated-containerruntime"],
            "/etc/kubernetes/kubelet.conf",
            "maxPods: 300",
        )
    })
    .await;
    let new: Vec<String> = renders_of(&c, "worker").difference(&before).cloned().collect();
    assert_eq!(new.len(), 1, "worker: one render for one apply, got {new:?}");
    c.stop().await;
}
