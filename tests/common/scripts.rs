//! A Kubernetes client library driven by its own language's program (`tests/python/client.py`,
//! `tests/node/client.mjs`) against a real server: the library found where `.ci/run` installs
//! it (a test skips, saying so, without it, and fails in CI), the program run with a
//! kubeconfig of the server's admin, and its `ok <what>: <value>` lines read back.

use super::*;
use std::path::Path;
use std::time::Duration;

/// `found`, or `None` after saying that `test` skipped (outside CI); in CI (`CI=true`) a missing
/// library fails the test.
pub fn installed<T>(test: &str, library: &str, found: Result<T, String>) -> Option<T> {
    match found {
        Ok(t) => Some(t),
        Err(why) if std::env::var("CI").as_deref() != Ok("true") => {
            eprintln!("SKIPPED {test}: {why}");
            None
        }
        Err(why) => panic!("{library} is not installed in CI: {why}"),
    }
}

/// Runs `program script KUBECONFIG GROUP NODE` in `dir` (its HOME, where the kubeconfig is
/// written), at most 120 s, expecting success; returns its stdout.
pub async fn run_script(c: &Cluster, dir: &Path, program: &Path, script: &Path, node: &str) -> String {
    let (text, _proxy) = kubeconfig_for(&c.server, &c.server.admin_token().unwrap());
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, text).unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(program)
            .arg(script)
            .arg(&kubeconfig)
            .arg(c.server.hub.group())
            .arg(node)
            .env("HOME", dir)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("{} {} finished within 120 s", program.display(), script.display()))
    .unwrap_or_else(|e| panic!("{} runs: {e}", program.display()));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} {} failed:\n{stdout}\n{stderr}",
        program.display(),
        script.display()
    );
    eprintln!("{stdout}");
    stdout
}

/// The value of the program's line `ok <what>: <value>`.
pub fn ok_line(stdout: &str, what: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("ok {what}: ")))
        .unwrap_or_else(|| panic!("no line for {what}:\n{stdout}"))
        .to_string()
}
