//! `mco sim` end to end: 20 simulated nodes drive a real child `mco server` (the built binary,
//! on 127.0.0.1:0) through one rollout of a worker MachineConfig.

use mco::sim::{self, SimConfig};
use std::path::PathBuf;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_simulated_nodes_roll_out_one_machineconfig() {
    let cfg = SimConfig {
        nodes: 20,
        max_unavailable: "25%".into(),
        apply: Duration::from_millis(5),
        reboot: Duration::from_millis(10),
        jitter: 0.5,
        // Per-node generators have fixed seeds: with this rate some applies fail (Degraded,
        // retried after the daemon's 1 s backoff) and the rollout still completes.
        failure_rate: 0.1,
        server_bin: Some(PathBuf::from(env!("CARGO_BIN_EXE_mco"))),
        timeout: Duration::from_secs(60),
        ..SimConfig::default()
    };
    let r = sim::run(cfg).await.expect("the simulation completes");

    // The pool moved to a new worker render and every node is Done on it.
    assert!(r.old_config.starts_with("rendered-worker-"), "{}", r.old_config);
    assert!(r.new_config.starts_with("rendered-worker-"), "{}", r.new_config);
    assert_ne!(r.old_config, r.new_config);
    assert_eq!(r.nodes_at_new_config, 20);
    assert!(r.failures > 0, "the fixed seeds make some applies fail");

    // 25 % of 20 rounds down to 5 (mco-facts 3.4): 4 waves of at least (5 + 10) ms × 0.5 each.
    assert_eq!(r.max_unavailable_count, 5);
    assert!((r.ideal_secs - 0.06).abs() < 1e-9, "{}", r.ideal_secs);
    assert!(r.rollout_secs > 0.0 && r.ratio > 0.0);
    assert!((r.ratio - r.rollout_secs / r.ideal_secs).abs() < 1e-9);

    // Each node's update is at least desiredConfig (controller), Working, Done (daemon) and a
    // drain plus an uncordon request and answer: well over 2 events per node.
    assert!(r.events >= 40, "events {}", r.events);
    assert!(r.events_per_sec > 0.0);
    assert!(
        r.store_bytes_after > r.store_bytes_before,
        "{} -> {}",
        r.store_bytes_before,
        r.store_bytes_after
    );
    assert!(r.server_cpu_secs > 0.0);
    assert!(r.server_rss_bytes.unwrap_or(0) > 1 << 20);
    assert!(r.server_peak_rss_bytes >= r.server_rss_bytes);

    // The protocol's calls, as the simulated daemons made them.
    for verb in [
        "POST node",
        "PATCH node",
        "PATCH node/status",
        "GET node",
        "WATCH node (open)",
        "GET machineconfig",
        "GET machineconfiguration",
    ] {
        let l = r
            .latency
            .iter()
            .find(|l| l.verb == verb)
            .unwrap_or_else(|| panic!("no {verb} in {:?}", r.latency));
        assert!(l.count > 0 && l.p50_ms <= l.p99_ms && l.p99_ms <= l.max_ms, "{l:?}");
    }
    // Each reboot registers again and opens a new watch: at least two watches per node.
    let watches = r.latency.iter().find(|l| l.verb == "WATCH node (open)").unwrap().count;
    assert!(watches >= 40, "{watches} watches");

    let table = sim::render(&r);
    assert!(
        table.contains("rollout wall time") && table.contains("ratio wall / ideal"),
        "{table}"
    );
}

/// The data dirs of `mco sim` child servers under `tmp` (the simulator makes its own under the
/// temporary directory, `TMPDIR`).
fn sim_dirs(tmp: &std::path::Path) -> Vec<PathBuf> {
    std::fs::read_dir(tmp)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("mco-sim-"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Starts `mco sim` with its temporary directory in `tmp`, waits until its child server has
/// written its admin token there, and returns the process.
fn start_sim(tmp: &std::path::Path, args: &[&str]) -> std::process::Child {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_mco"))
        .arg("sim")
        .args(args)
        .env("TMPDIR", tmp)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("mco sim starts");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !sim_dirs(tmp).iter().any(|d| d.join("admin.token").exists()) {
        assert!(std::time::Instant::now() < deadline, "no child server data dir in 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// Waits (with a deadline) for `child` to exit and returns its status and stderr.
fn finish(mut child: std::process::Child, within: Duration) -> (std::process::ExitStatus, String) {
    let deadline = std::time::Instant::now() + within;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("mco sim did not exit within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err).expect("stderr");
    (status, err)
}

#[test]
fn ctrl_c_stops_the_simulation_and_removes_its_data_dir() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Nodes that take a minute to apply: the rollout is still running when Ctrl-C comes.
    let child = start_sim(tmp.path(), &["--nodes", "5", "--apply-ms", "60000"]);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("SIGINT");
    let (status, err) = finish(child, Duration::from_secs(30));
    assert!(!status.success(), "{status:?}");
    assert!(err.contains("interrupted"), "{err}");
    assert_eq!(sim_dirs(tmp.path()), Vec::<PathBuf>::new(), "{err}");
}

#[test]
fn a_failed_simulation_removes_its_data_dir() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // The rollout cannot finish within the timeout: the run fails.
    let child = start_sim(tmp.path(), &["--nodes", "5", "--apply-ms", "60000", "--timeout", "5s"]);
    let (status, err) = finish(child, Duration::from_secs(60));
    assert!(!status.success(), "{status:?}");
    assert!(err.contains("timed out"), "{err}");
    assert_eq!(sim_dirs(tmp.path()), Vec::<PathBuf>::new(), "{err}");
}
