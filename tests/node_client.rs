//! The official Kubernetes JavaScript client (`@kubernetes/client-node` 1.4.0 on npm, which
//! Node.js dashboards and tools build on) against a real server with a real daemon (issue 28):
//! `tests/node/client.mjs` drives VersionApi, CoreV1Api, CustomObjectsApi, the generic
//! KubernetesObjectApi (discovery), an informer and a Watch. The package lives in the folder
//! `.ci/run` installs it into (`MCO_NODE_CLIENT`, default `/var/cache/mco-test/node-client`);
//! outside CI the test skips, saying so, when it cannot be had, and in CI (`CI=true`) it fails.

mod common;

use common::scripts::*;
use common::*;
use std::path::{Path, PathBuf};

/// The folder holding `node_modules/@kubernetes/client-node`, or why there is none.
fn client_node() -> Result<PathBuf, String> {
    let dir =
        PathBuf::from(std::env::var("MCO_NODE_CLIENT").unwrap_or_else(|_| "/var/cache/mco-test/node-client".into()));
    let package = dir.join("node_modules/@kubernetes/client-node/package.json");
    if !package.exists() {
        return Err(format!(
            "{} is missing (run .ci/run, which installs it)",
            package.display()
        ));
    }
    std::process::Command::new("node")
        .arg("--version")
        .output()
        .map_err(|e| format!("node cannot run: {e} (Debian package nodejs)"))?;
    Ok(dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_javascript_client_works_as_against_kube_apiserver() {
    let test = "the_javascript_client_works_as_against_kube_apiserver";
    let Some(modules) = installed(test, "@kubernetes/client-node", client_node()) else {
        return;
    };
    let c = Cluster::start_tls(0, 1).await;
    let node = workers(&c).remove(0);
    let dir = tempfile::tempdir().unwrap();
    // An ES module resolves its imports from its own folder up: the script beside a link to
    // the installed packages.
    let script = dir.path().join("client.mjs");
    std::fs::copy(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/node/client.mjs"),
        &script,
    )
    .unwrap();
    std::os::unix::fs::symlink(modules.join("node_modules"), dir.path().join("node_modules")).unwrap();
    let stdout = run_script(&c, dir.path(), Path::new("node"), &script, &node).await;
    let line = |what: &str| ok_line(&stdout, what);
    assert_eq!(line("version"), concat!("v1.33.0-mco-", env!("CARGO_PKG_VERSION")));
    assert_eq!(line("node spec.unschedulable"), "undefined");
    // maxPods of MCO's kubelet template, written at the node's first boot before its kubelet's
    // first status.
    assert_eq!(line("node capacity pods"), "250");
    assert_eq!(line("node address"), format!("InternalIP=127.0.0.1,Hostname={node}"));
    assert_eq!(line("nodes listed"), node);
    assert_eq!(line("pools"), "master,worker");
    assert_eq!(line("worker rendered"), "true");
    assert_eq!(line("object api read"), r#"["a=2"]"#);
    assert_eq!(
        line("informer"),
        r#"add 99-node-client; update 99-node-client ["a=2"]; delete 99-node-client"#
    );
    assert_eq!(line("done"), "all checks passed");
    assert!(!c.server.hub.state().machine_configs.contains_key("99-node-client"));
    assert_eq!(
        c.server.hub.state().nodes[node.as_str()]
            .metadata
            .labels
            .as_ref()
            .unwrap()["example.com/js"],
        "yes"
    );
    c.stop().await;
}
