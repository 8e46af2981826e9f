//! The official Kubernetes Python client (`kubernetes` on PyPI) against a real server with a
//! real daemon (issue 28): `tests/python/client.py` drives CoreV1Api, VersionApi,
//! CustomObjectsApi, `watch.Watch().stream()` with a resumed resourceVersion and the
//! DynamicClient. The client lives in the virtual environment `.ci/run` builds
//! (`MCO_PYTHON_VENV`, default `/var/cache/mco-test/python-client`); outside CI the test skips,
//! saying so, when that venv cannot be had, and in CI (`CI=true`) it fails.

mod common;

use common::scripts::*;
use common::*;
use std::path::PathBuf;

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
    let test = "the_python_client_works_as_against_kube_apiserver";
    let Some(py) = installed(test, "the Python client", python()) else {
        return;
    };
    let c = Cluster::start_tls(0, 1).await;
    let node = workers(&c).remove(0);
    let dir = tempfile::tempdir().unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/client.py");
    let stdout = run_script(&c, dir.path(), &py, &script, &node).await;
    let line = |what: &str| ok_line(&stdout, what);
    // kube-apiserver's version object as mco fills it (src/api/health.rs).
    assert_eq!(line("version"), concat!("v1.33.0-mco-", env!("CARGO_PKG_VERSION")));
    assert_eq!(line("node spec.unschedulable"), "None");
    assert_eq!(
        line("dynamic kind MachineConfig"),
        format!("{}/v1", c.server.hub.group())
    );
    assert_eq!(line("watch resumed"), "MODIFIED 99-python ['a=2']");
    // kube-apiserver's default field manager: the User-Agent up to its first `/`
    // (`prefixFromUserAgent`, staging/src/k8s.io/apiserver/pkg/endpoints/handlers/rest.go).
    let agent = line("user agent");
    assert_eq!(line("created by"), agent.split('/').next().unwrap(), "{agent}");
    assert_eq!(line("done"), "all checks passed");
    assert!(!c.server.hub.state().machine_configs.contains_key("99-python"));
    c.stop().await;
}
