//! mco as services: the systemd units in config/systemd pass `systemd-analyze verify` (with
//! ExecStart pointed at the built binary), and a standalone `mco daemon --supervise` survives
//! its own sandbox reboot, as a daemon under the unit's `Restart=always` does.

mod common;

use common::*;
use std::process::Stdio;
use std::time::Duration;

#[test]
fn systemd_units_verify() {
    let Ok(out) = std::process::Command::new("systemd-analyze").arg("--version").output() else {
        eprintln!("SKIPPED systemd_units_verify: systemd-analyze is not installed");
        return;
    };
    assert!(out.status.success());
    let dir = tempfile::tempdir().unwrap();
    let units = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/systemd");
    let mut paths = Vec::new();
    for name in ["mco-server.service", "mco-daemon.service"] {
        let text = std::fs::read_to_string(units.join(name)).unwrap();
        assert!(text.contains("ExecStart=/usr/local/bin/mco "), "{name}");
        assert!(text.contains("\nRestart="), "{name} restarts on exit");
        let local = text.replace("/usr/local/bin/mco", env!("CARGO_BIN_EXE_mco"));
        let p = dir.path().join(name);
        std::fs::write(&p, local).unwrap();
        paths.push(p);
    }
    let daemon = std::fs::read_to_string(units.join("mco-daemon.service")).unwrap();
    // Root, server and node come from an environment file, so one unit runs a host or a sandbox.
    assert!(daemon.contains("EnvironmentFile=-/etc/mco/daemon.env"));
    assert!(daemon.contains("--root ${MCO_ROOT}") && daemon.contains("Environment=MCO_ROOT=/\n"));
    assert!(daemon.contains("--server ${MCO_SERVER}") && daemon.contains("--node ${MCO_NODE}"));
    // The daemon exits 75 (EX_TEMPFAIL) before every reboot: a success, not a failed unit.
    assert!(
        daemon.contains("\nSuccessExitStatus=75\n"),
        "mco-daemon.service: SuccessExitStatus=75"
    );
    let out = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .args(&paths)
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "systemd-analyze verify: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supervised_daemon_survives_its_sandbox_reboot() {
    let c = Cluster::start(1, 0).await;
    let root = c.data_dir.join("nodes").join("worker-0");
    std::fs::create_dir_all(&root).unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"))
        .args(["daemon", "--supervise", "--reboot-seconds", "0", "--node", "worker-0"])
        .args(["--label", "node-role.kubernetes.io/worker="])
        .arg("--token-file")
        .arg(
            c.node_token_file("worker-0", &[("node-role.kubernetes.io/worker", "")])
                .await,
        )
        .arg("--server")
        .arg(c.server.url())
        .arg("--root")
        .arg(&root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    c.wait_node_done("worker-0", Duration::from_secs(30), |n| !node_boot_id(n).is_empty())
        .await;
    let boot = c.boot_id("worker-0");
    let old = c.pool("worker").spec.configuration.name;
    // A file change reboots the node (MCO's default disruption policy).
    c.apply(&[examples().join("chrony.yaml")]).await;
    let new = c.wait_rolled_out("worker", &old, Duration::from_secs(60)).await;
    c.wait_node_done("worker-0", Duration::from_secs(30), |n| node_boot_id(n) != boot)
        .await;
    assert_eq!(c.annotations("worker-0").current_config, new);
    assert!(root.join("etc/chrony.conf").exists());
    // SIGTERM stops the supervisor and its child.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id().unwrap() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("the supervisor exits on SIGTERM")
        .unwrap();
    assert!(status.success(), "{status:?}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_format_json_writes_one_json_object_per_line() {
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"))
        .args([
            "server",
            "--listen",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "--data-dir",
        ])
        .arg(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("a log line within 30 s")
        .unwrap()
        .expect("the server logs");
    let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(v["level"], "INFO", "{line}");
    assert!(v["fields"]["message"].is_string(), "{line}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id().unwrap() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("the server stops on SIGTERM")
        .unwrap();
    assert!(status.success(), "{status:?}");
}
