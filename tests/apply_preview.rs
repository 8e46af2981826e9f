//! `mco apply --dry-run` and `mco apply --wait` preview exactly what `mco apply` writes
//! (kubectl's three-way merge, [`mco::apply::result`]): a key the manifest removed since the last
//! apply is gone from the preview too, so a valid change is not refused with a conflict that only
//! the kept key would make, and the dry run lists the removal.

mod common;

use common::*;
use std::process::Stdio;
use std::time::Duration;

/// Runs `mco ARGS` against the cluster's server, at most 180 s; `(exit code, stdout, stderr)`.
async fn mco(c: &Cluster, args: &[&str]) -> (i32, String, String) {
    let o = tokio::time::timeout(
        Duration::from_secs(180),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"))
            .args(args)
            .env("MCO_SERVER", c.server.url())
            .env("MCO_TOKEN", c.server.admin_token().expect("the admin token"))
            .env_remove("MCO_CA_FILE")
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("mco finished within 180 s")
    .expect("mco runs");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

const PATH: &str = "/etc/systemd/system/mco-preview.service.d/10-preview.conf";

/// The MachineConfig `99-worker-preview` with Ignition config `config`, as a JSON manifest.
fn manifest(config: serde_json::Value) -> String {
    let mut ignition = serde_json::json!({"ignition": {"version": "3.4.0"}});
    json_patch::merge(&mut ignition, &config);
    serde_json::json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": "99-worker-preview", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": ignition},
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_and_wait_see_the_keys_the_manifest_removed() {
    let c = Cluster::start(1, 1).await;
    let dir = tempfile::tempdir().unwrap();
    let v1 = dir.path().join("v1.json");
    let v2 = dir.path().join("v2.json");
    // First version: the path is a plain file.
    let as_file = manifest(serde_json::json!({"storage": {"files": [
        {"path": PATH, "mode": 420, "contents": {"source": "data:,written%20as%20a%20file%0A"}}
    ]}}));
    // Second version: `storage` removed, the same path now written as the unit's dropin (MCO's
    // daemon keeps such a file: "replaced with systemd dropin"). Valid alone; a conflict
    // (Ignition's "path conflicts with systemd unit or dropin") only if the removed file were kept.
    let as_dropin = manifest(
        serde_json::json!({"systemd": {"units": [{"name": "mco-preview.service", "dropins": [
            {"name": "10-preview.conf", "contents": "[Unit]\nDescription=written as a dropin\n"}
        ]}]}}),
    );
    std::fs::write(&v1, as_file).unwrap();
    std::fs::write(&v2, as_dropin).unwrap();
    let v1s = v1.to_str().unwrap();
    let v2s = v2.to_str().unwrap();

    let (code, out, err) = mco(&c, &["apply", "-f", v1s, "--wait", "--timeout", "2m"]).await;
    assert_eq!(code, 0, "apply v1 --wait:\n{out}\n{err}");
    let first = c.pool("worker").spec.configuration.name;
    let node = workers(&c).remove(0);
    let on_node = c.root(&node).join(PATH.trim_start_matches('/'));
    assert_eq!(std::fs::read_to_string(&on_node).unwrap(), "written as a file\n");

    // The dry run: the pool renders (no conflict), the file is listed as removed and the unit
    // as changed, nothing is written.
    let (code, out, err) = mco(&c, &["apply", "-f", v2s, "--dry-run"]).await;
    assert_eq!(code, 0, "apply v2 --dry-run:\n{out}\n{err}");
    assert!(!out.contains("would not render"), "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("pool worker: "))
        .unwrap_or_else(|| panic!("a worker line in:\n{out}"));
    let predicted = line.rsplit(' ').next().unwrap().to_string();
    assert!(predicted.starts_with("rendered-worker-") && predicted != first, "{out}");
    assert!(
        out.contains(&format!("node {node} ")) && out.contains(&format!("file {PATH} (removed)")),
        "the dry run names the removed file:\n{out}"
    );
    assert!(out.contains("dropin mco-preview.service/10-preview.conf"), "{out}");
    assert!(out.contains("dry run: nothing was changed"), "{out}");
    assert_eq!(
        c.pool("worker").spec.configuration.name,
        first,
        "the dry run wrote nothing"
    );
    let mc = &c.server.hub.state().machine_configs["99-worker-preview"];
    assert_eq!(
        mc.spec.config.as_ref().unwrap()["storage"]["files"][0]["path"],
        PATH,
        "the dry run wrote nothing"
    );

    // --wait: accepted, and it waits for the render the dry run predicted, which is the one the
    // render controller makes from the object `mco apply` wrote.
    let (code, out, err) = mco(&c, &["apply", "-f", v2s, "--wait", "--timeout", "2m"]).await;
    assert_eq!(code, 0, "apply v2 --wait:\n{out}\n{err}");
    let target = c.pool("worker").spec.configuration.name;
    assert_eq!(target, predicted, "the preview's render is the one made");
    assert!(
        out.contains(&format!(
            "pool \"worker\" successfully rolled out ({target} on 1 of 1 nodes)"
        )),
        "{out}"
    );
    let mc = &c.server.hub.state().machine_configs["99-worker-preview"];
    let config = mc.spec.config.clone().unwrap();
    assert!(
        config["storage"]["files"].is_null(),
        "the apply removed the file: {config}"
    );
    assert_eq!(
        std::fs::read_to_string(&on_node).unwrap(),
        "[Unit]\nDescription=written as a dropin\n"
    );
    assert_eq!(c.annotations(&node).current_config, target);
    c.stop().await;
}
