//! The node daemon end to end, on a real server with real `mco daemon` processes on sandbox
//! roots: the force file repairs units and dropins as well as files (MCO OCPBUGS-74692), units
//! without a file of their own (template instances) are enabled on running nodes as Ignition
//! enables them on new ones and leave no link behind when removed, and a node whose boot-time
//! check fails is recovered by the force file (MCO `checkStateOnFirstRun`, mco-facts 4.3.6).

mod common;

use common::*;
use mco::model::{Kind, NodeAnnotations};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

const ROLLOUT: Duration = Duration::from_secs(90);
const SVC: &str = "[Unit]\nDescription=e\n\n[Service]\nExecStart=/bin/true\n\n[Install]\nWantedBy=multi-user.target\n";
const DROPIN: &str = "[Service]\nEnvironment=OPTIONS=-4\n";
const WANTS: &str = "etc/systemd/system/multi-user.target.wants";

fn worker_mc(name: &str, config: Value) -> Value {
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": config}})
}

fn linked(root: &Path, unit: &str) -> bool {
    root.join(WANTS).join(unit).symlink_metadata().is_ok()
}

fn reason_is(c: &Cluster, node: &str, f: impl Fn(&NodeAnnotations) -> bool) -> impl Fn(&mco::state::State) -> bool {
    let keys = c.keys();
    let node = node.to_string();
    move |s| s.nodes.get(&node).is_some_and(|n| f(&NodeAnnotations::read(n, &keys)))
}

/// A node whose dropin was edited (Degraded by drift) comes back Done after
/// `touch /run/machine-config-daemon-force`, with every file, unit and dropin of its config
/// rewritten: the drifted dropin, a unit with only a dropin, a mask, an enabled unit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_force_file_rewrites_files_units_and_dropins() {
    let c = Cluster::start(0, 1).await;
    let t0 = c.pool("worker").spec.configuration.name;
    let mc = worker_mc(
        "99-worker-forced",
        json!({"ignition": {"version": "3.4.0"},
        "storage": {"files": [{"path": "/etc/forced.conf", "mode": 420, "contents": {"source": "data:,forced%0A"}}]},
        "systemd": {"units": [
            {"name": "chronyd.service", "dropins": [{"name": "10-x.conf", "contents": DROPIN}]},
            {"name": "m.service", "mask": true, "contents": SVC},
            {"name": "e.service", "enabled": true, "contents": SVC}
        ]}}),
    );
    c.client.create(Kind::MachineConfig, &mc, None).await.unwrap();
    let t1 = c.wait_rolled_out("worker", &t0, ROLLOUT).await;
    let root = c.root("worker-0");
    let dropin = root.join("etc/systemd/system/chronyd.service.d/10-x.conf");
    assert_eq!(std::fs::read_to_string(&dropin).unwrap(), DROPIN);
    assert!(linked(&root, "e.service"));

    let mut edited = DROPIN.to_string();
    edited.push_str("Environment=EXTRA=1\n");
    std::fs::write(&dropin, &edited).unwrap();
    c.wait_for(
        "drift on the dropin",
        Duration::from_secs(10),
        reason_is(&c, "worker-0", |a| {
            a.state == "Degraded"
                && a.reason == r#"content mismatch for file "/etc/systemd/system/chronyd.service.d/10-x.conf""#
        }),
    )
    .await;
    // more drift the forced rewrite must repair
    let mask = root.join("etc/systemd/system/m.service");
    std::fs::remove_file(&mask).unwrap();
    std::fs::write(&mask, SVC).unwrap();
    std::fs::write(
        root.join("etc/systemd/system/e.service"),
        "[Service]\nExecStart=/bin/false\n",
    )
    .unwrap();
    std::fs::remove_file(root.join(WANTS).join("e.service")).unwrap();

    let boot = c.boot_id("worker-0");
    let force = root.join("run/machine-config-daemon-force");
    std::fs::write(&force, b"").unwrap();
    c.wait_node_done("worker-0", ROLLOUT, |n| node_boot_id(n) != boot).await;
    assert_eq!(c.annotations("worker-0").current_config, t1);
    assert_eq!(c.annotations("worker-0").reason, "");
    assert_eq!(std::fs::read_to_string(&dropin).unwrap(), DROPIN, "dropin rewritten");
    assert_eq!(mode_of(&dropin), 0o644);
    assert_eq!(
        std::fs::read_link(&mask).unwrap(),
        Path::new("/dev/null"),
        "mask restored"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("etc/systemd/system/e.service")).unwrap(),
        SVC
    );
    assert!(linked(&root, "e.service"), "e.service enabled again");
    assert_eq!(
        std::fs::read_to_string(root.join("etc/forced.conf")).unwrap(),
        "forced\n"
    );
    assert!(!force.exists(), "the force file is consumed");
    c.stop().await;
}

/// A template instance with `enabled: true` is served enabled by `/config/<pool>` and enabled
/// through its template on a running node; deleting the MachineConfig removes the units and
/// every `multi-user.target.wants` link (the sandbox's `disable *` preset, as on Fedora CoreOS).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn template_instances_roll_out_and_are_removed_cleanly() {
    let c = Cluster::start(0, 1).await;
    let t0 = c.pool("worker").spec.configuration.name;
    let echo = "[Unit]\nDescription=echo %i\n\n[Service]\nType=oneshot\nExecStart=/bin/echo %i\n\n[Install]\nWantedBy=multi-user.target\n";
    let mc = worker_mc(
        "99-worker-echo",
        json!({"ignition": {"version": "3.4.0"}, "systemd": {"units": [
            {"name": "example-echo@.service", "contents": echo},
            {"name": "example-echo@alpha.service", "enabled": true},
            {"name": "own.service", "enabled": true, "contents": SVC}
        ]}}),
    );
    c.client.create(Kind::MachineConfig, &mc, None).await.unwrap();
    let t1 = c.wait_rolled_out("worker", &t0, ROLLOUT).await;
    let root = c.root("worker-0");
    assert!(
        linked(&root, "example-echo@alpha.service"),
        "instance enabled through its template"
    );
    assert!(linked(&root, "own.service"));

    let served: Value = c
        .http()
        .get(format!("{}/config/worker", c.server.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let units = served["systemd"]["units"].as_array().cloned().unwrap_or_default();
    assert!(
        units
            .iter()
            .any(|u| u["name"] == "example-echo@alpha.service" && u["enabled"] == true),
        "{units:#?}"
    );

    c.client.delete(Kind::MachineConfig, "99-worker-echo").await.unwrap();
    let t2 = c.wait_rolled_out("worker", &t1, ROLLOUT).await;
    assert_eq!(t2, t0, "the previous rendered config again");
    for unit in ["example-echo@alpha.service", "own.service"] {
        assert!(!linked(&root, unit), "{unit} still linked");
    }
    for file in ["example-echo@.service", "own.service"] {
        assert!(
            !root.join("etc/systemd/system").join(file).exists(),
            "{file} left behind"
        );
    }
    c.stop().await;
}

/// The root is emptied under a running daemon; after a restart its boot check fails with MCO's
/// reason and a recovery hint; `touch /run/machine-config-daemon-force` then rewrites the config,
/// reboots and the node is Done with its files back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_force_file_recovers_a_node_that_fails_its_boot_check() {
    let c = Cluster::start(0, 0).await;
    let node = mco::up::local_nodes(0, 1).remove(0);
    let daemon = c.spawn_daemon(&node);
    c.wait_node_done("worker-0", ROLLOUT, |_| true).await;
    let t0 = c.pool("worker").spec.configuration.name;
    c.apply(&[examples().join("chrony.yaml")]).await;
    let t1 = c.wait_rolled_out("worker", &t0, ROLLOUT).await;
    let root = c.root("worker-0");
    let chrony = std::fs::read(root.join("etc/chrony.conf")).unwrap();

    empty_root(&root);
    daemon.restart();
    // The check stops at the first file of the render: the template config's registries.conf
    // (01-worker-container-runtime sorts before 99-worker-chrony).
    let rendered = c.server.hub.state().machine_configs[&t1].clone();
    let first = rendered.spec.config.as_ref().unwrap()["storage"]["files"][0]["path"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(first, "/etc/containers/registries.conf");
    let want = format!(
        "unexpected on-disk state validating against {t1}: could not stat file \"{first}\": \
         lstat {first}: no such file or directory{}",
        mco::daemon::agent::RECOVERY_HINT
    );
    c.wait_for(
        "the boot check fails with a recovery hint",
        ROLLOUT,
        reason_is(&c, "worker-0", |a| a.state == "Degraded" && a.reason == want),
    )
    .await;

    let boot = c.boot_id("worker-0");
    let force = root.join("run/machine-config-daemon-force");
    std::fs::write(&force, b"").unwrap();
    c.wait_node_done("worker-0", ROLLOUT, |n| node_boot_id(n) != boot).await;
    assert_eq!(c.annotations("worker-0").current_config, t1);
    assert_eq!(std::fs::read(root.join("etc/chrony.conf")).unwrap(), chrony);
    assert!(!force.exists(), "the force file is consumed");
    daemon.stop().await;
    c.stop().await;
}

/// The root is emptied under a running daemon (its sandbox "OS" included: no `/etc/passwd`, so
/// no `core` user) and the force file is touched at once: one forced rewrite restores the base
/// filesystem first, so the SSH keys are written too and the node is Done after one reboot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_force_file_recovers_an_emptied_root_with_ssh_keys() {
    let c = Cluster::start(0, 0).await;
    let node = mco::up::local_nodes(0, 1).remove(0);
    let daemon = c.spawn_daemon(&node);
    c.wait_node_done("worker-0", ROLLOUT, |_| true).await;
    let t0 = c.pool("worker").spec.configuration.name;
    c.apply(&[examples().join("chrony.yaml"), examples().join("ssh-key.yaml")])
        .await;
    let t1 = c
        .wait_rolled_out_with("worker", &t0, &["99-worker-chrony", "99-worker-ssh"], ROLLOUT)
        .await;
    let root = c.root("worker-0");
    let keys_path = root.join("home/core/.ssh/authorized_keys.d/ignition");
    let keys = std::fs::read(&keys_path).unwrap();
    assert!(!keys.is_empty());

    empty_root(&root);
    std::fs::create_dir_all(root.join("run")).unwrap();
    let boot = c.boot_id("worker-0");
    std::fs::write(root.join("run/machine-config-daemon-force"), b"").unwrap();
    c.wait_node_done("worker-0", ROLLOUT, |n| node_boot_id(n) != boot).await;
    assert_eq!(c.annotations("worker-0").current_config, t1);
    assert_eq!(std::fs::read(&keys_path).unwrap(), keys);
    assert!(root.join("etc/chrony.conf").exists());
    daemon.stop().await;
    c.stop().await;
}

/// A `core` user created after an SSH-key config was applied (the daemon skipped the keys then,
/// as MCO does on a node without `core`): the daemon's next start is not Degraded on
/// `could not stat file "/home/core/.ssh/authorized_keys.d/ignition"`, its next update passes
/// the pre-flight check and writes the keys (seen on real hosts, `useradd -m core` after the
/// first boot).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_core_user_created_after_the_keys_were_applied_does_not_degrade_the_next_start() {
    let c = Cluster::start(0, 0).await;
    let node = mco::up::local_nodes(0, 1).remove(0);
    let root = c.root(&node.name);
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/bash\n").unwrap();
    std::fs::write(root.join("etc/group"), "root:x:0:\n").unwrap();
    let daemon = c.spawn_daemon(&node);
    c.wait_node_done("worker-0", ROLLOUT, |_| true).await;
    let t0 = c.pool("worker").spec.configuration.name;
    c.apply(&[examples().join("ssh-key.yaml")]).await;
    let t1 = c.wait_rolled_out_with("worker", &t0, &["99-worker-ssh"], ROLLOUT).await;
    let keys = root.join("home/core/.ssh/authorized_keys.d/ignition");
    assert!(!keys.exists(), "no core user: the keys are skipped");
    daemon.stop().await;

    // `useradd -m core`, then the daemon starts again.
    std::fs::write(
        root.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000::/home/core:/bin/bash\n",
    )
    .unwrap();
    std::fs::write(root.join("etc/group"), "root:x:0:\ncore:x:1000:\n").unwrap();
    std::fs::create_dir_all(root.join("home/core")).unwrap();
    let daemon = c.spawn_daemon(&node);
    c.apply(&[examples().join("chrony.yaml")]).await;
    c.wait_rolled_out_with("worker", &t1, &["99-worker-chrony"], ROLLOUT)
        .await;
    let a = c.annotations("worker-0");
    assert_eq!((a.state.as_str(), a.reason.as_str()), ("Done", ""));
    assert!(std::fs::read_to_string(&keys).unwrap().starts_with("ssh-ed25519 "));
    daemon.stop().await;
    c.stop().await;
}

/// Removes everything under a node root, as if the node's disk were wiped under its daemon.
fn empty_root(root: &std::path::Path) {
    for entry in std::fs::read_dir(root).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() && !path.is_symlink() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
    }
}
