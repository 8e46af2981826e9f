//! The official Kubernetes Python client (`kubernetes` on PyPI) against a real server with a
//! real daemon (issue 28): `tests/python/client.py` drives CoreV1Api, VersionApi,
//! CustomObjectsApi, `watch.Watch().stream()` with a resumed resourceVersion and the
//! DynamicClient. The client lives in the virtual environment `.ci/run` builds
//! (`MCO_PYTHON_VENV`, default `/var/cache/mco-test/python-client`); outside CI the test skips,
//! saying so, when that venv cannot be had, and in CI (`CI=true`) it fails.

mod common;

use common::*;
use std::path::PathBuf;
use std::time::Duration;

/// The venv's python with the `kubernetes` package, or why there is none.
fn python() -> Result<PathBuf, String> {
    let venv = std::env::var("MCO_PYTHON_VENV").unwrap_or_else(|_| "/var/cache/mco-test/python-client".into());
    let py = PathBuf::from(&venv).join("bin/python");
    let out = std::process::Command::new(&py)
        .args(["-c", "import kubernetes; print(kubernetes.__version__)"])
        .output()
        .map_err(|e| format!("{} cannot run: {e} (run .ci/run, which builds the venv)", py.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} has no kubernetes package: {}",
            py.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(py)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_works_as_against_kube_apiserver() {
    let py = match python() {
        Ok(p) => p,
        Err(why) if std::env::var("CI").as_deref() != Ok("true") => {
            eprintln!("SKIPPED the_python_client_works_as_against_kube_apiserver: {why}");
            return;
        }
        Err(why) => panic!("the Python client is not installed in CI: {why}"),
    };
    let c = Cluster::start_tls(0, 1).await;
    let node = workers(&c).remove(0);
    let dir = tempfile::tempdir().unwrap();
    let (text, _proxy) = kubeconfig_for(&c.server, &c.server.admin_token().unwrap());
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, text).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/client.py");
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(py)
            .arg(script)
            .arg(&kubeconfig)
            .arg(c.server.hub.group())
            .arg(&node)
            .env("HOME", dir.path())
            .output(),
    )
    .await
    .expect("the Python client finished within 120 s")
    .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the Python client failed:\n{stdout}\n{stderr}");
    eprintln!("{stdout}");
    let line = |what: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("ok {what}: ")))
            .unwrap_or_else(|| panic!("no line for {what}:\n{stdout}"))
            .to_string()
    };
    // kube-apiserver's version object as mco fills it (src/api/health.rs).
    assert_eq!(line("version"), concat!("v1.33.0-mco-", env!("CARGO_PKG_VERSION")));
    assert_eq!(line("node spec.unschedulable"), "None");
    assert_eq!(
        line("dynamic kind MachineConfig"),
        format!("{}/v1", c.server.hub.group())
    );
    assert_eq!(line("watch resumed"), "MODIFIED 99-python ['a=2']");
    assert_eq!(line("done"), "all checks passed");
    assert!(!c.server.hub.state().machine_configs.contains_key("99-python"));
    c.stop().await;
}
