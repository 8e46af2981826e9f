//! Node disruption policy end to end (mco-facts section 6) with real daemons on sandbox roots:
//! the default policies let SSH key and pull secret changes through without a drain or a
//! reboot, a user file policy restarts a service instead of rebooting, and the node's chosen
//! actions are in the history.

mod common;

use common::*;
use mco::event::EventType;
use mco::model::Kind;
use serde_json::{json, Value};
use std::time::Duration;

const ROLLOUT: Duration = Duration::from_secs(90);

fn data(s: &str) -> String {
    format!(
        "data:,{}",
        percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC)
    )
}

fn mc(name: &str, config: Value) -> Value {
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": config}})
}

fn file_mc(name: &str, path: &str, contents: &str) -> Value {
    mc(
        name,
        json!({"ignition": {"version": "3.4.0"}, "storage": {"files": [{"path": path, "mode": 420, "contents": {"source": data(contents)}}]}}),
    )
}

/// The worker node's events after `seq` (its drain handshake and chosen actions).
fn node_events(c: &Cluster, seq: u64) -> Vec<(EventType, String)> {
    c.server
        .hub
        .store()
        .read_after(seq)
        .map(|e| e.unwrap())
        .filter(|e| e.object_kind == "Node" && e.name == "worker-0")
        .filter_map(|e| e.event_type().map(|t| (t, e.detail.clone())))
        .collect()
}

fn journal(c: &Cluster) -> String {
    std::fs::read_to_string(c.root("worker-0").join("var/log/mco-host-journal")).unwrap_or_default()
}

/// Applies `obj` (create) and waits until the worker pool rolled out past its current config.
async fn roll_out(c: &Cluster, kind: Kind, obj: &Value) {
    let old = c.pool("worker").spec.configuration.name;
    c.client.create(kind, obj, None).await.unwrap();
    c.wait_rolled_out("worker", &old, ROLLOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssh_keys_pull_secret_and_a_restart_policy_need_no_drain_and_no_reboot() {
    let c = Cluster::start(0, 1).await;
    let boot = c.boot_id("worker-0");
    let seq = c.server.hub.store().last_seq();

    // Default policies: sshkey None, /var/lib/kubelet/config.json None (mco-facts 6.2).
    let ssh = mc(
        "99-worker-ssh",
        json!({"ignition": {"version": "3.4.0"}, "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA test"]}]}}),
    );
    roll_out(&c, Kind::MachineConfig, &ssh).await;
    let secret = file_mc(
        "99-worker-pull-secret",
        "/var/lib/kubelet/config.json",
        r#"{"auths":{}}"#,
    );
    roll_out(&c, Kind::MachineConfig, &secret).await;

    // A user file policy: chrony changes restart chronyd instead of rebooting.
    let policy = json!({"apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
        "metadata": {"name": "cluster"},
        "spec": {"nodeDisruptionPolicy": {"files": [{"path": "/etc/chrony.conf",
            "actions": [{"type": "Restart", "restart": {"serviceName": "chronyd.service"}}]}]}}});
    c.client
        .create(Kind::MachineConfiguration, &policy, None)
        .await
        .unwrap();
    c.wait_for("the operator merged the policy into the status", ROLLOUT, |s| {
        s.machine_configurations["cluster"]
            .status
            .node_disruption_policy_status
            .as_ref()
            .is_some_and(|p| p.cluster_policies.files.iter().any(|f| f.path == "/etc/chrony.conf"))
    })
    .await;
    // The impact preview plans by the same policy.
    let (preview, ok) = mco::cli::apply_dry_run(&c.client, &[examples().join("chrony.yaml")])
        .await
        .unwrap();
    assert!(ok, "{preview}");
    assert!(preview.contains("no drain, no reboot"), "{preview}");
    let chrony = file_mc(
        "99-worker-chrony",
        "/etc/chrony.conf",
        "server ntp1.example.net iburst\n",
    );
    roll_out(&c, Kind::MachineConfig, &chrony).await;

    assert_eq!(c.boot_id("worker-0"), boot, "no reboot");
    assert_eq!(
        std::fs::read_to_string(c.root("worker-0").join("etc/chrony.conf")).unwrap(),
        "server ntp1.example.net iburst\n"
    );
    let events = node_events(&c, seq);
    let kinds: Vec<EventType> = events.iter().map(|(t, _)| *t).collect();
    assert!(!kinds.contains(&EventType::NodeDrained), "never cordoned: {events:#?}");
    assert!(
        !events
            .iter()
            .any(|(t, d)| *t == EventType::NodeDrainRequested && d.contains("drain-")),
        "no drain requested: {events:#?}"
    );
    let chosen: Vec<&str> = events
        .iter()
        .filter(|(t, _)| *t == EventType::NodeActionsChosen)
        .map(|(_, d)| d.as_str())
        .collect();
    assert_eq!(chosen.len(), 3, "{events:#?}");
    assert!(chosen[0].contains("-> \"None for rendered-worker-"), "{chosen:?}");
    assert!(chosen[1].contains("-> \"None for rendered-worker-"), "{chosen:?}");
    assert!(
        chosen[2].contains("-> \"Restart chronyd.service for rendered-worker-"),
        "{chosen:?}"
    );
    let journal = journal(&c);
    assert!(journal.contains("systemctl restart chronyd.service"), "{journal}");
    assert!(!journal.contains("reboot"), "{journal}");
    let described = mco::cli::describe(&c.client, "node", "worker-0", None).await.unwrap();
    assert!(
        described.contains("Post-config Actions (last update): Restart chronyd.service for rendered-worker-"),
        "{described}"
    );
    c.stop().await;
}

const REGISTRIES: &str = r#"unqualified-search-registries = ["registry.access.redhat.com", "docker.io"]
[[registry]]
prefix = ""
location = "quay.io/example"
[[registry.mirror]]
location = "mirror.example.com/example"
pull-from-mirror = "digest-only"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_only_mirror_reloads_crio_without_a_drain_and_removing_one_drains() {
    let c = Cluster::start(0, 1).await;
    roll_out(
        &c,
        Kind::MachineConfig,
        &file_mc("99-worker-registries", "/etc/containers/registries.conf", REGISTRIES),
    )
    .await;
    let boot = c.boot_id("worker-0");

    // Safe (mco-facts 6.4): a new mirror with pull-from-mirror = digest-only.
    let seq = c.server.hub.store().last_seq();
    let added = format!("{REGISTRIES}[[registry.mirror]]\nlocation = \"mirror2.example.com/example\"\npull-from-mirror = \"digest-only\"\n");
    let old = c.pool("worker").spec.configuration.name;
    let patch = json!({"spec": {"config": {"storage": {"files": [{"path": "/etc/containers/registries.conf", "mode": 420, "contents": {"source": data(&added)}}]}}}});
    c.client
        .merge_patch(Kind::MachineConfig, "99-worker-registries", &patch, false)
        .await
        .unwrap();
    c.wait_rolled_out("worker", &old, ROLLOUT).await;
    let events = node_events(&c, seq);
    assert!(!events.iter().any(|(t, _)| *t == EventType::NodeDrained), "{events:#?}");
    assert!(
        events
            .iter()
            .any(|(t, d)| *t == EventType::NodeActionsChosen && d.contains("-> \"Special for ")),
        "{events:#?}"
    );
    assert!(journal(&c).contains("systemctl reload crio.service"));

    // Unsafe: the mirror removed again -> drain, then the crio reload, still no reboot.
    let seq = c.server.hub.store().last_seq();
    let old = c.pool("worker").spec.configuration.name;
    let patch = json!({"spec": {"config": {"storage": {"files": [{"path": "/etc/containers/registries.conf", "mode": 420, "contents": {"source": data(REGISTRIES)}}]}}}});
    c.client
        .merge_patch(Kind::MachineConfig, "99-worker-registries", &patch, false)
        .await
        .unwrap();
    c.wait_rolled_out("worker", &old, ROLLOUT).await;
    let events = node_events(&c, seq);
    assert!(
        events.iter().any(|(t, _)| *t == EventType::NodeDrained),
        "drained: {events:#?}"
    );
    assert_eq!(c.boot_id("worker-0"), boot, "no reboot");
    c.stop().await;
}

/// Ignition spec 2.2 input (issue item: MCO translates it with ign-converter): stored as
/// given, rolled out byte-exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_2_2_machine_config_rolls_out_byte_exact_and_reads_back_as_given() {
    let c = Cluster::start(0, 1).await;
    let old = c.pool("worker").spec.configuration.name;
    c.apply(&[examples().join("sctp-spec2.yaml")]).await;
    c.wait_rolled_out("worker", &old, ROLLOUT).await;
    let root = c.root("worker-0");
    assert_eq!(
        std::fs::read(root.join("etc/modules-load.d/sctp-load.conf")).unwrap(),
        b"sctp"
    );
    assert_eq!(
        std::fs::read(root.join("etc/modprobe.d/sctp-blacklist.conf")).unwrap(),
        b""
    );
    assert_eq!(mode_of(&root.join("etc/modules-load.d/sctp-load.conf")), 0o644);
    let stored: Value = c.client.get(Kind::MachineConfig, "load-sctp-module").await.unwrap();
    assert_eq!(stored["spec"]["config"]["ignition"]["version"], "2.2.0");
    assert_eq!(stored["spec"]["config"]["storage"]["files"][0]["filesystem"], "root");
    let rendered: Value = c
        .client
        .get(Kind::MachineConfig, &c.pool("worker").spec.configuration.name)
        .await
        .unwrap();
    assert_eq!(rendered["spec"]["config"]["ignition"]["version"], "3.4.0");
    c.stop().await;
}

/// The policy example applies and is served back with the defaults merged into its status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_example_is_served_with_merged_status() {
    let c = Cluster::start(0, 0).await;
    c.apply(&[examples().join("node-disruption-policy.yaml")]).await;
    c.wait_for("status written", ROLLOUT, |s| {
        s.machine_configurations
            .get("cluster")
            .is_some_and(|m| m.status.observed_generation == m.metadata.generation)
    })
    .await;
    let got: Value = c.client.get(Kind::MachineConfiguration, "cluster").await.unwrap();
    assert_eq!(got["apiVersion"], "operator.openshift.io/v1");
    let files = got["status"]["nodeDisruptionPolicyStatus"]["clusterPolicies"]["files"]
        .as_array()
        .unwrap();
    assert_eq!(files.len(), 14, "13 defaults and the user's");
    assert_eq!(files[13]["path"], "/etc/chrony.conf");
    let units = got["status"]["nodeDisruptionPolicyStatus"]["clusterPolicies"]["units"]
        .as_array()
        .unwrap();
    assert_eq!(units[1]["name"], "chronyd.service");
    // Only `cluster` is admitted, and Special is not user-settable.
    let mut other = serde_json::to_value(&c.server.hub.state().machine_configurations["cluster"]).unwrap();
    other["metadata"] = json!({"name": "other"});
    other.as_object_mut().unwrap().remove("status");
    let err = c
        .client
        .create(Kind::MachineConfiguration, &other, None)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), Some("Invalid"), "{err}");
    let special = json!({"spec": {"nodeDisruptionPolicy": {"sshkey": {"actions": [{"type": "Special"}]}}}});
    let err = c
        .client
        .merge_patch(Kind::MachineConfiguration, "cluster", &special, false)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("spec.nodeDisruptionPolicy.sshkey.actions[0].type"),
        "{err}"
    );
    c.stop().await;
}

/// Kernel arguments (mco-facts 4.2.j, 4.4): a change drains and reboots, the booted command line
/// holds the new arguments, and an argument missing after boot degrades the node naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_argument_change_reboots_into_the_new_command_line() {
    let c = Cluster::start(0, 1).await;
    let boot = c.boot_id("worker-0");
    let old = c.pool("worker").spec.configuration.name;
    c.apply(&[examples().join("kernel-args.yaml")]).await;
    c.wait_node_done("worker-0", ROLLOUT, |n| node_boot_id(n) != boot).await;
    c.wait_rolled_out("worker", &old, ROLLOUT).await;
    let root = c.root("worker-0");
    let cmdline = std::fs::read_to_string(root.join("proc/cmdline")).unwrap();
    assert_eq!(cmdline.trim(), "audit=1 audit_backlog_limit=8192");
    assert!(journal(&c).contains("rpm-ostree kargs --append=audit=1 --append=audit_backlog_limit=8192"));

    // Replace one entry by a quoted pair: old arguments deleted, new ones appended.
    let boot = c.boot_id("worker-0");
    let old = c.pool("worker").spec.configuration.name;
    let patch = json!({"spec": {"kernelArguments": ["audit=1", "\"isolcpus=1 nohz_full=1\" nosmt"]}});
    c.client
        .merge_patch(Kind::MachineConfig, "05-worker-kernelarg-audit", &patch, false)
        .await
        .unwrap();
    c.wait_node_done("worker-0", ROLLOUT, |n| node_boot_id(n) != boot).await;
    c.wait_rolled_out("worker", &old, ROLLOUT).await;
    let cmdline = std::fs::read_to_string(root.join("proc/cmdline")).unwrap();
    assert_eq!(cmdline.trim(), "audit=1 \"isolcpus=1 nohz_full=1\" nosmt");

    // Extensions and the realtime kernel: recorded for the next boot, booted after it.
    let boot = c.boot_id("worker-0");
    let old = c.pool("worker").spec.configuration.name;
    let patch = json!({"spec": {"extensions": ["usbguard"], "kernelType": "realtime"}});
    c.client
        .merge_patch(Kind::MachineConfig, "05-worker-kernelarg-audit", &patch, false)
        .await
        .unwrap();
    c.wait_node_done("worker-0", ROLLOUT, |n| node_boot_id(n) != boot).await;
    c.wait_rolled_out("worker", &old, ROLLOUT).await;
    let booted: Value =
        serde_json::from_slice(&std::fs::read(root.join("var/lib/mco/os.booted.json")).unwrap()).unwrap();
    assert_eq!(booted["kernelType"], "realtime");
    assert_eq!(booted["packages"], json!(["usbguard"]));
    assert!(journal(&c).contains("rpm-ostree update --install usbguard"));

    // An argument lost from the booted command line: the next update's pre-flight check
    // degrades the node and names it.
    std::fs::write(root.join("proc/cmdline"), "audit=1 \"isolcpus=1 nohz_full=1\"\n").unwrap();
    c.client
        .create(
            Kind::MachineConfig,
            &file_mc("99-worker-motd", "/etc/motd", "hi\n"),
            None,
        )
        .await
        .unwrap();
    let keys = c.keys();
    c.wait_for("worker-0 Degraded naming nosmt", ROLLOUT, |s| {
        let a = mco::model::NodeAnnotations::read(&s.nodes["worker-0"], &keys);
        a.state == "Degraded" && a.reason.contains("missing expected kernel arguments: [nosmt]")
    })
    .await;
    c.stop().await;
}

/// `spec.irreconcilableValidationOverrides` (openshift/api operator/v1, MCO 4.20) relaxes
/// MCO's day-2 check of `storage.disks`, `filesystems` and `raid`; mco refuses those sections
/// in every MachineConfig, so the override would be accepted and ignored: the API refuses it
/// with 422 naming the field, and nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn irreconcilable_validation_overrides_are_refused_naming_the_field() {
    let c = Cluster::start(0, 0).await;
    let obj = json!({"apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration", "metadata": {"name": "cluster"},
        "spec": {"irreconcilableValidationOverrides": {"storage": ["Disks"]}}});
    let err = c
        .client
        .create(Kind::MachineConfiguration, &obj, None)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), Some("Invalid"), "{err}");
    assert!(
        err.to_string().contains("spec.irreconcilableValidationOverrides"),
        "{err}"
    );
    assert!(!c.server.hub.state().machine_configurations.contains_key("cluster"));
    c.stop().await;
}
