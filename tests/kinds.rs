//! KubeletConfig and image mirror sets end to end: real server, real daemons on sandbox roots,
//! files read back from the nodes (mco-facts 8.1, 8.3).

mod common;

use common::*;
use mco::model::{Kind, NodeAnnotations};
use serde_json::json;
use std::time::Duration;

fn kubelet_conf(c: &Cluster, node: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(c.root(node).join("etc/kubernetes/kubelet.conf")).unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

/// Waits until every worker is Done on the worker pool's target, which contains `mc`.
async fn workers_on(c: &Cluster, mc: &str) {
    let keys = c.keys();
    let mc = mc.to_string();
    c.wait_for(
        &format!("workers Done on a render with {mc}"),
        Duration::from_secs(60),
        |s| {
            let target = &s.pools["worker"].spec.configuration.name;
            let has = s.pools["worker"].spec.configuration.source.iter().any(|r| r.name == mc);
            has && s
                .nodes
                .values()
                .filter(|n| n.metadata.name.as_deref().unwrap_or("").starts_with("worker"))
                .all(|n| {
                    let a = NodeAnnotations::read(n, &keys);
                    a.state == "Done" && a.current_config == *target
                })
        },
    )
    .await;
}

fn kubelet_config(name: &str, kubelet: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "KubeletConfig", "metadata": {"name": name},
        "spec": {"machineConfigPoolSelector": {"matchLabels": {"pools.operator.machineconfiguration.openshift.io/worker": ""}},
            "kubeletConfig": kubelet}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_configs_reach_the_workers_and_the_newest_wins_whole() {
    let c = Cluster::start(0, 2).await;
    // The template config is on the nodes from the start.
    assert_eq!(kubelet_conf(&c, "worker-0")["maxPods"], 250);

    c.client
        .create(
            Kind::KubeletConfig,
            &kubelet_config("max-pods", json!({"maxPods": 300, "protectKernelDefaults": false})),
            None,
        )
        .await
        .unwrap();
    workers_on(&c, "99-worker-generated-kubelet").await;
    for n in ["worker-0", "worker-1"] {
        let k = kubelet_conf(&c, n);
        assert_eq!(
            (k["maxPods"].clone(), k["protectKernelDefaults"].clone()),
            (json!(300), json!(false)),
            "{n}"
        );
    }
    let st = c.server.hub.state().clone();
    let mc = &st.machine_configs["99-worker-generated-kubelet"];
    let owner = &mc.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("KubeletConfig", "max-pods")
    );
    let kc = &st.objects[&Kind::KubeletConfig]["max-pods"];
    assert_eq!(
        kc["metadata"]["annotations"]["machineconfiguration.openshift.io/mc-name-suffix"],
        ""
    );
    // Current MCO: Accepted=True, then the legacy Success=True (kubelet_config_controller.go).
    assert_eq!(
        (
            &kc["status"]["conditions"][0]["type"],
            &kc["status"]["conditions"][0]["status"]
        ),
        (&json!("Accepted"), &json!("True"))
    );
    assert_eq!(
        (
            &kc["status"]["conditions"][1]["type"],
            &kc["status"]["conditions"][1]["status"]
        ),
        (&json!("Success"), &json!("True"))
    );

    // describe works for the kind, under its fully qualified name too.
    let d = mco::cli::describe(
        &c.client,
        "kubeletconfig.machineconfiguration.openshift.io",
        "max-pods",
        None,
    )
    .await
    .unwrap();
    for want in [
        "maxPods: 300",
        "Success",
        "Generated MachineConfigs: machineconfig/99-worker-generated-kubelet\n",
    ] {
        assert!(d.contains(want), "describe lacks {want:?}:\n{d}");
    }

    // A second one gets suffix -1 and, alphabetically last, wins whole. What `apply --wait`
    // follows: the generated MachineConfig, then the worker pool's new render.
    let before = mco::cli::rollout::snapshot(&c.client).await.unwrap();
    let raw = kubelet_config("pods-100", json!({"maxPods": 100}));
    c.client.create(Kind::KubeletConfig, &raw, None).await.unwrap();
    let targets = mco::cli::rollout::generated_targets(&c.client, &before, &[raw], Some(Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(targets.len(), 1, "{targets:?}");
    assert_eq!(targets[0].0, "worker");
    let pool = c.pool("worker");
    assert_eq!(pool.spec.configuration.name, targets[0].1);
    assert!(pool
        .spec
        .configuration
        .source
        .iter()
        .any(|r| r.name == "99-worker-generated-kubelet-1"));
    workers_on(&c, "99-worker-generated-kubelet-1").await;
    let k = kubelet_conf(&c, "worker-0");
    assert_eq!(
        (k["maxPods"].clone(), k["protectKernelDefaults"].clone()),
        (json!(100), json!(true))
    );

    // Editing the first one changes its MachineConfig but not the render (the -1 still wins
    // whole): `apply --wait` has no rollout to follow and returns at once, no pool named.
    let before = mco::cli::rollout::snapshot(&c.client).await.unwrap();
    let patch = json!({"spec": {"kubeletConfig": {"maxPods": 305}}});
    c.client
        .merge_patch(Kind::KubeletConfig, "max-pods", &patch, false)
        .await
        .unwrap();
    let raw = c.client.get(Kind::KubeletConfig, "max-pods").await.unwrap();
    let targets = mco::cli::rollout::generated_targets(&c.client, &before, &[raw], Some(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(targets, Vec::<(String, String)>::new());
    assert_eq!(kubelet_conf(&c, "worker-0")["maxPods"], 100, "the winner's value stays");

    // Deleting it returns the nodes to the first (its MachineConfig goes with it).
    c.client.delete(Kind::KubeletConfig, "pods-100").await.unwrap();
    c.wait_for(
        "the -1 MachineConfig is garbage-collected",
        Duration::from_secs(20),
        |s| !s.machine_configs.contains_key("99-worker-generated-kubelet-1"),
    )
    .await;
    workers_on(&c, "99-worker-generated-kubelet").await;
    c.wait_for(
        "worker-0 back on the first one (maxPods 305 since its edit)",
        Duration::from_secs(60),
        |_| kubelet_conf(&c, "worker-0")["maxPods"] == 305,
    )
    .await;

    // A forbidden field: stored, Failure naming it, nothing generated; `apply --wait` fails
    // with the condition.
    let before = mco::cli::rollout::snapshot(&c.client).await.unwrap();
    let raw = kubelet_config("bad", json!({"cgroupDriver": "cgroupfs"}));
    c.client.create(Kind::KubeletConfig, &raw, None).await.unwrap();
    let e = mco::cli::rollout::generated_targets(&c.client, &before, &[raw], Some(Duration::from_secs(20)))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("cgroupDriver is not allowed to be set"), "{e}");
    c.wait_for("bad KubeletConfig gets its condition", Duration::from_secs(20), |s| {
        s.objects[&Kind::KubeletConfig]["bad"]["status"]["conditions"][1]["type"] == "Failure"
    })
    .await;
    let st = c.server.hub.state().clone();
    let conds = &st.objects[&Kind::KubeletConfig]["bad"]["status"]["conditions"];
    assert_eq!(
        (&conds[0]["type"], &conds[0]["status"], &conds[1]["status"]),
        (&json!("Accepted"), &json!("False"), &json!("True")),
        "Accepted=False, then the legacy Failure=True"
    );
    let cond = &conds[1];
    let msg = cond["message"].as_str().unwrap();
    assert!(
        msg.contains("cgroupDriver is not allowed to be set") && msg.contains("spec.kubeletConfig.cgroupDriver"),
        "{msg}"
    );
    assert!(!st
        .machine_configs
        .keys()
        .any(|n| n.starts_with("99-worker-generated-kubelet-2")));
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digest_and_tag_mirrors_of_one_source_reach_registries_conf_as_one_entry() {
    let c = Cluster::start(0, 1).await;
    c.client
        .create(
            Kind::ImageDigestMirrorSet,
            &json!({"apiVersion": "config.openshift.io/v1", "kind": "ImageDigestMirrorSet", "metadata": {"name": "d"},
                "spec": {"imageDigestMirrors": [{"source": "quay.io/ocp", "mirrors": ["mirror.example.com/ocp"]}]}}),
            None,
        )
        .await
        .unwrap();
    c.client
        .create(
            Kind::ImageTagMirrorSet,
            &json!({"apiVersion": "config.openshift.io/v1", "kind": "ImageTagMirrorSet", "metadata": {"name": "t"},
                "spec": {"imageTagMirrors": [{"source": "quay.io/ocp", "mirrors": ["tags.example.com/ocp"]}]}}),
            None,
        )
        .await
        .unwrap();
    let root = c.root("worker-0");
    c.wait_for("registries.conf has both mirrors", Duration::from_secs(60), |_| {
        std::fs::read_to_string(root.join("etc/containers/registries.conf"))
            .is_ok_and(|t| t.contains("tags.example.com"))
    })
    .await;
    let t: toml::Table = std::fs::read_to_string(root.join("etc/containers/registries.conf"))
        .unwrap()
        .parse()
        .unwrap();
    let regs = t["registry"].as_array().unwrap();
    assert_eq!(regs.len(), 1);
    let m = regs[0]["mirror"].as_array().unwrap();
    let got: Vec<(&str, &str)> = m
        .iter()
        .map(|x| (x["location"].as_str().unwrap(), x["pull-from-mirror"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            ("mirror.example.com/ocp", "digest-only"),
            ("tags.example.com/ocp", "tag-only")
        ]
    );
    c.stop().await;
}

/// A mirror set whose only mirror is its source is not a mirror set (runtime-utils
/// `mirrorsContainsARealMirror`): no registries config comes of it, so no render and no
/// drain; next to a real mirror set it adds nothing to registries.conf. The KubeletConfig
/// created after it is the sync point: the pass that judges it has read the mirror set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_set_whose_only_mirror_is_its_source_is_ignored() {
    let c = Cluster::start(0, 0).await;
    let idms = |name: &str, source: &str, mirrors: serde_json::Value| {
        json!({"apiVersion": "config.openshift.io/v1", "kind": "ImageDigestMirrorSet", "metadata": {"name": name},
            "spec": {"imageDigestMirrors": [{"source": source, "mirrors": mirrors}]}})
    };
    c.client
        .create(
            Kind::ImageDigestMirrorSet,
            &idms("self", "quay.io/a", json!(["quay.io/a"])),
            None,
        )
        .await
        .unwrap();
    c.client
        .create(
            Kind::KubeletConfig,
            &kubelet_config("sync", json!({"maxPods": 260})),
            None,
        )
        .await
        .unwrap();
    c.wait_for("the KubeletConfig is judged", Duration::from_secs(30), |s| {
        s.objects[&Kind::KubeletConfig]["sync"]["status"]["conditions"][0]["type"] == "Accepted"
    })
    .await;
    let st = c.server.hub.state().clone();
    assert!(
        !st.machine_configs.keys().any(|n| n.ends_with("-generated-registries")),
        "no registries config from a mirror set without a real mirror"
    );

    // Next to a real mirror set: registries.conf is the one the real set alone gives.
    c.client
        .create(
            Kind::ImageDigestMirrorSet,
            &idms("real", "quay.io/b", json!(["mirror.example.com/b"])),
            None,
        )
        .await
        .unwrap();
    c.wait_for("the registries config", Duration::from_secs(30), |s| {
        s.machine_configs.contains_key("99-worker-generated-registries")
    })
    .await;
    let mc = c.server.hub.state().machine_configs["99-worker-generated-registries"].clone();
    let cfg = mco::ignition::parse_config(mc.spec.config.as_ref().unwrap(), "spec.config").unwrap();
    let text = String::from_utf8(mco::ignition::file_contents(&cfg.storage.files[0]).unwrap()).unwrap();
    let t: toml::Table = text.parse().unwrap();
    let regs = t["registry"].as_array().unwrap();
    assert_eq!(regs.len(), 1, "{text}");
    assert_eq!(regs[0]["location"].as_str(), Some("quay.io/b"));
    c.stop().await;
}

/// Adds `/etc/<file>` to a MachineConfig's files, through the API as a user would (GET, PUT).
async fn add_file(c: &Cluster, mc: &str, file: &str) {
    let mut obj: serde_json::Value = c.client.get(Kind::MachineConfig, mc).await.unwrap();
    let entry = json!({"path": format!("/etc/{file}"), "contents": {"source": "data:,edited"}});
    match obj["spec"]["config"]["storage"]["files"].as_array_mut() {
        Some(files) => files.push(entry),
        None => obj["spec"]["config"]["storage"] = json!({"files": [entry]}),
    }
    c.client.replace(Kind::MachineConfig, mc, &obj, None).await.unwrap();
}

/// MCO's template controller re-applies its MachineConfigs when it syncs, not on a
/// MachineConfig change (`template_controller.go` watches the ControllerConfig, the pull
/// secret, the APIServer and the feature gates): a user's edit of `00-worker` and of
/// `01-worker-kubelet` alike reaches the nodes and stays until the next sync, here the
/// server's restart, which puts both back and the nodes follow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn template_config_edits_stay_until_the_template_controller_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let c = Cluster::start_in(dir.path().to_path_buf(), 0, 1).await;
    let t0 = c.pool("worker").spec.configuration.name;
    add_file(&c, "00-worker", "edit-00").await;
    add_file(&c, "01-worker-kubelet", "edit-01").await;
    let edited = c.wait_rolled_out("worker", &t0, Duration::from_secs(60)).await;
    let root = c.root("worker-0");
    c.wait_for("both edits on the node", Duration::from_secs(60), |s| {
        s.pools["worker"].spec.configuration.name == edited
            && root.join("etc/edit-00").exists()
            && root.join("etc/edit-01").exists()
    })
    .await;
    assert_eq!(
        c.pool("worker").spec.configuration.name,
        edited,
        "no pass reverted either edit"
    );
    c.stop().await;

    let c = Cluster::start_in(dir.path().to_path_buf(), 0, 1).await;
    c.wait_for(
        "the template configs re-applied and rolled out",
        Duration::from_secs(60),
        |s| {
            let p = &s.pools["worker"];
            p.spec.configuration.name != edited
                && p.status.configuration.name == p.spec.configuration.name
                && !root.join("etc/edit-00").exists()
                && !root.join("etc/edit-01").exists()
        },
    )
    .await;
    for mc in ["00-worker", "01-worker-kubelet"] {
        let files = c.server.hub.state().machine_configs[mc]
            .spec
            .config
            .clone()
            .unwrap_or_default();
        assert!(!files.to_string().contains("/etc/edit-"), "{mc}: {files}");
    }
    c.stop().await;
}
