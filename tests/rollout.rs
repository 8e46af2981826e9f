//! End to end on a real server and three real daemons (1 master, 2 workers) on temp roots:
//! an example rolls out within maxUnavailable (checked from the event log), a file change
//! reboots while an SSH-key-only change does not (boot ids), drift is flagged and cleared.

mod common;

use common::*;
use mco::manifest::{parse_documents, Manifest};
use mco::model::{Keys, NodeAnnotations};
use mco::state::State;
use std::path::Path;
use std::time::Duration;

const ROLLOUT: Duration = Duration::from_secs(90);

/// The decoded bytes of `path` in the example manifest `file`.
fn example_file(file: &str, path: &str) -> Vec<u8> {
    let text = std::fs::read_to_string(examples().join(file)).unwrap();
    for doc in parse_documents(&text) {
        if let Ok(Manifest::MachineConfig(mc)) = doc {
            let cfg = mco::ignition::parse_config(mc.spec.config.as_ref().unwrap(), "spec.config").unwrap();
            if let Some(f) = cfg.storage.files.iter().find(|f| f.path == path) {
                return mco::ignition::file_contents(f).unwrap();
            }
        }
    }
    panic!("{path} not in {file}")
}

/// The annotations of `node` whose value names the rendered config `config`.
fn naming(c: &Cluster, node: &str, config: &str) -> Vec<(String, String)> {
    c.server.hub.state().nodes[node]
        .metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, v)| v.contains(config))
        .collect()
}

/// Creates a MachineConfig the daemon cannot write (a file owned by a user the node does not
/// have: MCO's `failed to retrieve UserID for username: alice`); returns the worker pool's
/// target before it.
async fn apply_unwritable(c: &Cluster) -> String {
    let t0 = c.pool("worker").spec.configuration.name;
    let bad = serde_json::json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": "99-worker-owned", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": [
            {"path": "/etc/owned.conf", "mode": 420, "user": {"name": "alice"}, "contents": {"source": "data:,x"}}]}}}});
    c.client
        .create(mco::model::Kind::MachineConfig, &bad, None)
        .await
        .unwrap();
    t0
}

/// The README's recovery from [`apply_unwritable`]: delete the bad MachineConfig, wait for the
/// pool to target `t0` again, and point `node` back at its current config (MCO's
/// RestoreDesiredConfig).
async fn abandon_unwritable(c: &Cluster, node: &str, t0: &str) {
    c.client
        .delete(mco::model::Kind::MachineConfig, "99-worker-owned")
        .await
        .unwrap();
    c.wait_for(
        "pool back on the previous rendered config",
        Duration::from_secs(10),
        |s| s.pools["worker"].spec.configuration.name == t0,
    )
    .await;
    let current = c.annotations(node).current_config;
    let patch = serde_json::json!({"metadata": {"annotations": {c.keys().desired_config(): current}}});
    c.client
        .merge_patch(mco::model::Kind::Node, node, &patch, false)
        .await
        .unwrap();
}

/// Replays the whole log and returns the most worker nodes ever unavailable at once (MCO's
/// "unavailable for update", mco-facts 3.2).
fn max_unavailable_workers_in_log(c: &Cluster) -> usize {
    let keys = Keys::new(GROUP);
    let mut state = State::default();
    let mut worst = 0;
    for ev in c.server.hub.store().read_after(0) {
        state.apply(&ev.unwrap());
        let n = state
            .nodes
            .values()
            .filter(|n| n.metadata.name.as_deref().is_some_and(|s| s.starts_with("worker")))
            .filter(|n| {
                let a = NodeAnnotations::read(n, &keys);
                !a.current_config.is_empty() && mco::rollout::is_node_unavailable(n, &keys)
            })
            .count();
        worst = worst.max(n);
    }
    worst
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn examples_roll_out_reboot_only_when_needed_and_drift_is_flagged() {
    let c = Cluster::start(1, 2).await;
    let workers = workers(&c);
    let t0 = c.pool("worker").spec.configuration.name;
    let boots0: Vec<String> = workers.iter().map(|w| c.boot_id(w)).collect();
    let master_t0 = c.pool("master").spec.configuration.name;

    // A file change: rolled out one node at a time, with a reboot each.
    c.apply(&[examples().join("chrony.yaml")]).await;
    let t1 = c.wait_rolled_out("worker", &t0, ROLLOUT).await;
    assert!(t1.starts_with("rendered-worker-"), "{t1}");
    let want = example_file("chrony.yaml", "/etc/chrony.conf");
    for w in &workers {
        let p = c.root(w).join("etc/chrony.conf");
        assert_eq!(std::fs::read(&p).unwrap(), want, "{}", p.display());
        assert_eq!(mode_of(&p), 0o644);
        assert_eq!(c.annotations(w).current_config, t1);
    }
    assert!(
        !c.root("master-0").join("etc/chrony.conf").exists(),
        "the master pool does not select worker configs"
    );
    assert_eq!(c.pool("master").spec.configuration.name, master_t0);
    let boots1: Vec<String> = workers.iter().map(|w| c.boot_id(w)).collect();
    for (a, b) in boots0.iter().zip(&boots1) {
        assert_ne!(a, b, "a file change reboots the node");
    }
    let p = c.pool("worker");
    assert_eq!(
        (
            p.status.machine_count,
            p.status.updated_machine_count,
            p.status.ready_machine_count
        ),
        (2, 2, 2)
    );
    assert_eq!(
        max_unavailable_workers_in_log(&c),
        1,
        "maxUnavailable 1: exactly one worker at a time"
    );

    // An SSH-key-only change: no drain, no reboot.
    c.apply(&[examples().join("ssh-key.yaml")]).await;
    let t2 = c.wait_rolled_out("worker", &t1, ROLLOUT).await;
    for (w, before) in workers.iter().zip(&boots1) {
        assert_eq!(&c.boot_id(w), before, "{w}: an SSH key change does not reboot");
        assert_eq!(c.annotations(w).current_config, t2);
        let keys = c.root(w).join("home/core/.ssh/authorized_keys.d/ignition");
        let text = std::fs::read_to_string(&keys).unwrap();
        assert!(text.starts_with("ssh-ed25519 ") && text.ends_with('\n'), "{text:?}");
        assert_eq!(mode_of(&keys), 0o600);
        assert_eq!(mode_of(keys.parent().unwrap()), 0o700);
    }

    // Drift: a hand edit marks the node Degraded, restoring it returns the node to Done.
    let w = &workers[0];
    let chrony = c.root(w).join("etc/chrony.conf");
    std::fs::write(&chrony, b"server pool.ntp.org\n").unwrap();
    c.wait_for("drift reported", Duration::from_secs(5), |s| {
        let a = NodeAnnotations::read(&s.nodes[w.as_str()], &c.keys());
        a.state == "Degraded" && a.reason.contains("content mismatch for file \"/etc/chrony.conf\"")
    })
    .await;
    c.wait_for("pool Degraded", Duration::from_secs(5), |s| {
        s.pools["worker"].condition_status("Degraded") == "True"
    })
    .await;
    assert_eq!(
        std::fs::read(&chrony).unwrap(),
        b"server pool.ntp.org\n",
        "the daemon never overwrites a drifted file"
    );
    std::fs::write(&chrony, &want).unwrap();
    c.wait_for("node back to Done", Duration::from_secs(5), |s| {
        NodeAnnotations::read(&s.nodes[w.as_str()], &c.keys()).state == "Done"
    })
    .await;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&chrony, std::fs::Permissions::from_mode(0o600)).unwrap();
    c.wait_for("mode drift reported", Duration::from_secs(5), |s| {
        let a = NodeAnnotations::read(&s.nodes[w.as_str()], &c.keys());
        a.state == "Degraded" && a.reason.contains("mode mismatch for file") && a.reason.contains("/etc/chrony.conf")
    })
    .await;
    std::fs::set_permissions(&chrony, std::fs::Permissions::from_mode(0o644)).unwrap();
    c.wait_for("node back to Done", Duration::from_secs(5), |s| {
        NodeAnnotations::read(&s.nodes[w.as_str()], &c.keys()).state == "Done"
    })
    .await;
    assert_eq!(c.boot_id(w), boots1[0], "recovering from drift does not reboot");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_pool_renders_but_does_not_roll_out() {
    let c = Cluster::start(0, 2).await;
    let t0 = c.pool("worker").spec.configuration.name;
    c.client
        .merge_patch(
            mco::model::Kind::MachineConfigPool,
            "worker",
            &serde_json::json!({"spec": {"paused": true}}),
            false,
        )
        .await
        .unwrap();
    c.apply(&[examples().join("chrony.yaml")]).await;
    c.wait_for(
        "paused pool rendered and reporting it will not update",
        Duration::from_secs(20),
        |s| {
            let p = &s.pools["worker"];
            p.spec.configuration.name != t0
                && p.condition("Updating").is_some_and(|c| {
                    c.status == "False"
                        && c.message
                            .starts_with("Pool is paused; will not update to MachineConfig rendered-worker-")
                })
        },
    )
    .await;
    let t1 = c.pool("worker").spec.configuration.name;
    for w in workers(&c) {
        let a = c.annotations(&w);
        assert_eq!(
            (a.desired_config.as_str(), a.current_config.as_str()),
            (t0.as_str(), t0.as_str()),
            "{w} untouched while paused"
        );
        assert!(!c.root(&w).join("etc/chrony.conf").exists());
    }
    assert_eq!(c.pool("worker").condition_status("Updated"), "False");
    c.client
        .merge_patch(
            mco::model::Kind::MachineConfigPool,
            "worker",
            &serde_json::json!({"spec": {"paused": false}}),
            false,
        )
        .await
        .unwrap();
    assert_eq!(c.wait_rolled_out("worker", &t0, ROLLOUT).await, t1);
    assert!(Path::new(&c.root("worker-1").join("etc/chrony.conf")).exists());
    c.stop().await;
}

/// A change that fails on the node degrades it (and only it: maxUnavailable 1), with MCO's
/// reasons on the node and the pool; deleting the bad MachineConfig renders the previous config
/// again (same content, same name); the stuck node is recovered as MCO's e2e helper does, by
/// setting its desiredConfig back to its currentConfig.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_change_degrades_one_node_and_rolls_back() {
    let c = Cluster::start(0, 2).await;
    let t0 = apply_unwritable(&c).await;
    let keys = c.keys();
    c.wait_for("one worker Degraded, pool Degraded", Duration::from_secs(30), |s| {
        let degraded: Vec<_> = s
            .nodes
            .values()
            .filter(|n| NodeAnnotations::read(n, &keys).state == "Degraded")
            .collect();
        let p = &s.pools["worker"];
        degraded.len() == 1
            && NodeAnnotations::read(degraded[0], &keys)
                .reason
                .contains("failed to retrieve UserID for username: alice")
            && p.condition("NodeDegraded").is_some_and(|c| {
                c.status == "True" && c.message.contains("is reporting: \"") && c.message.contains("alice")
            })
            && p.condition_status("Degraded") == "True"
            && p.status.degraded_machine_count == 1
    })
    .await;
    let t_bad = c.pool("worker").spec.configuration.name;
    let (stuck, other) = {
        let s = c.server.hub.state();
        let stuck = s
            .nodes
            .values()
            .find(|n| NodeAnnotations::read(n, &keys).state == "Degraded")
            .unwrap()
            .metadata
            .name
            .clone()
            .unwrap();
        let other = s.nodes.keys().find(|n| **n != stuck).unwrap().clone();
        (stuck, other)
    };
    assert_eq!(
        c.annotations(&other).desired_config,
        t0,
        "maxUnavailable 1: the other worker was never targeted"
    );
    assert!(
        !naming(&c, &stuck, &t_bad).is_empty(),
        "the stuck node's annotations name the config it is trying"
    );

    // Roll back: delete the bad MC; the pool targets the previous rendered config again; point
    // the stuck node back at its current config.
    abandon_unwritable(&c, &stuck, &t0).await;
    assert_ne!(t0, t_bad);
    assert!(!c.root(&stuck).join("etc/owned.conf").exists(), "no half-applied file");
    c.wait_for(
        "every node Done on the previous config, pool Updated",
        Duration::from_secs(30),
        |s| {
            s.nodes.values().all(|n| {
                let a = NodeAnnotations::read(n, &keys);
                a.state == "Done"
                    && a.current_config == t0
                    && !n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false)
            }) && s.pools["worker"].condition_status("Updated") == "True"
                && s.pools["worker"].condition_status("Degraded") == "False"
        },
    )
    .await;
    assert_eq!(
        naming(&c, &stuck, &t_bad),
        vec![],
        "no annotation names the config the node never reached"
    );
    c.stop().await;
}

/// The README's Degraded-node recovery with the force file: desiredConfig set back to
/// currentConfig and `touch /run/machine-config-daemon-force` rewrite the current config and
/// reboot; afterwards no annotation of the node (post-config actions, drain requests, reason)
/// names the config it never reached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_degraded_node_recovery_forgets_the_abandoned_config() {
    let c = Cluster::start(0, 1).await;
    let t0 = apply_unwritable(&c).await;
    let keys = c.keys();
    c.wait_for(
        "worker-0 Degraded on the unwritable config",
        Duration::from_secs(30),
        |s| {
            let a = NodeAnnotations::read(&s.nodes["worker-0"], &keys);
            a.state == "Degraded" && a.reason.contains("alice")
        },
    )
    .await;
    let t_bad = c.annotations("worker-0").desired_config;
    assert_ne!(t_bad, t0);
    let before = naming(&c, "worker-0", &t_bad);
    assert!(
        before.iter().any(|(k, _)| k == mco::disruption::ACTIONS_ANNOTATION),
        "the daemon chose actions for {t_bad}: {before:?}"
    );
    let boot = c.boot_id("worker-0");
    abandon_unwritable(&c, "worker-0", &t0).await;
    std::fs::write(c.root("worker-0").join("run/machine-config-daemon-force"), b"").unwrap();
    c.wait_for(
        "worker-0 Done on its config after a forced reboot",
        Duration::from_secs(60),
        |s| {
            let n = &s.nodes["worker-0"];
            let a = NodeAnnotations::read(n, &keys);
            a.state == "Done"
                && a.current_config == t0
                && node_boot_id(n) != boot
                && a.desired_drain == a.last_applied_drain
        },
    )
    .await;
    assert_eq!(
        naming(&c, "worker-0", &t_bad),
        vec![],
        "no annotation names the config the node never reached"
    );
    c.stop().await;
}

/// MCO's force file: a drifted node is recovered by `touch /run/machine-config-daemon-force`:
/// every file is rewritten, the node reboots, and the file is consumed (mco-facts 5(b)).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_force_file_recovers_a_drifted_node() {
    let c = Cluster::start(0, 1).await;
    let t0 = c.pool("worker").spec.configuration.name;
    c.apply(&[examples().join("chrony.yaml")]).await;
    let t1 = c.wait_rolled_out("worker", &t0, ROLLOUT).await;
    let chrony = c.root("worker-0").join("etc/chrony.conf");
    std::fs::write(&chrony, b"server evil\n").unwrap();
    let keys = c.keys();
    c.wait_for("drift reported", Duration::from_secs(5), |s| {
        NodeAnnotations::read(&s.nodes["worker-0"], &keys).state == "Degraded"
    })
    .await;
    let boot = c.boot_id("worker-0");
    let force = c.root("worker-0").join("run/machine-config-daemon-force");
    std::fs::write(&force, b"").unwrap();
    c.wait_for("forced update done after a reboot", Duration::from_secs(30), |s| {
        let n = &s.nodes["worker-0"];
        let a = NodeAnnotations::read(n, &keys);
        let booted = n
            .status
            .as_ref()
            .and_then(|s| s.node_info.as_ref())
            .map(|i| i.boot_id.clone())
            .unwrap_or_default();
        a.state == "Done" && a.current_config == t1 && booted != boot
    })
    .await;
    assert_eq!(
        std::fs::read(&chrony).unwrap(),
        example_file("chrony.yaml", "/etc/chrony.conf"),
        "rewritten"
    );
    assert!(!force.exists(), "the force file is consumed");
    c.stop().await;
}

/// A deleted Node comes back: its daemon registers it again, carrying the config it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_node_registers_again() {
    let c = Cluster::start(0, 1).await;
    let t0 = c.pool("worker").spec.configuration.name;
    let uid = c.server.hub.state().nodes["worker-0"].metadata.uid.clone();
    c.client.delete(mco::model::Kind::Node, "worker-0").await.unwrap();
    let keys = c.keys();
    c.wait_for("worker-0 registered again and Done", Duration::from_secs(30), |s| {
        s.nodes.get("worker-0").is_some_and(|n| {
            let a = NodeAnnotations::read(n, &keys);
            n.metadata.uid != uid && a.state == "Done" && a.current_config == t0
        })
    })
    .await;
    c.stop().await;
}

/// Applying a directory of manifests costs one rollout, not one per file: the render waits for
/// its inputs to settle (MCO's render delay), so each worker reboots once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applying_a_directory_reboots_each_node_once() {
    let c = Cluster::start(0, 2).await;
    let t0 = c.pool("worker").spec.configuration.name;
    let reboots = |w: &str| {
        std::fs::read_to_string(c.root(w).join("var/log/mco-host-journal"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("reboot"))
            .count()
    };
    let before: Vec<usize> = workers(&c).iter().map(|w| reboots(w)).collect();
    let files: Vec<_> = [
        "chrony.yaml",
        "gzip-motd.yaml",
        "unit-with-dropin.yaml",
        "ssh-key.yaml",
        "kernel-args.yaml",
    ]
    .iter()
    .map(|f| examples().join(f))
    .collect();
    c.apply(&files).await;
    let t1 = c.wait_rolled_out("worker", &t0, ROLLOUT).await;
    let sources = c.pool("worker").spec.configuration.source.len();
    assert_eq!(
        sources, 8,
        "00-worker, the two template configs (01-worker-*) and the five examples are all in {t1}"
    );
    for (w, b) in workers(&c).iter().zip(before) {
        assert_eq!(reboots(w), b + 1, "{w} rebooted once");
        assert!(c
            .root(w)
            .join("etc/systemd/system/textfile-collector.service.d/10-environment.conf")
            .exists());
        assert!(c.root(w).join("etc/motd").exists());
    }
    c.stop().await;
}
