//! `mco sim` end to end: 20 simulated nodes drive a real child `mco server` (the built binary,
//! on 127.0.0.1:0) through one rollout of a worker MachineConfig.

mod common;

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
    assert_eq!(r.jitter, 0.5);
    let json = serde_json::to_value(&r).unwrap();
    assert!(
        json["latency"][0]["p50Ms"].is_number(),
        "camelCase throughout: {}",
        json["latency"][0]
    );

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
    assert!(r.server_cpu_secs.is_some_and(|c| c > 0.0), "{:?}", r.server_cpu_secs);
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
fn ctrl_c_sigterm_or_sighup_stops_the_simulation_and_removes_its_data_dir() {
    use nix::sys::signal::Signal;
    for (signal, said) in [
        (Signal::SIGINT, "interrupted"),
        (Signal::SIGTERM, "terminated"),
        (Signal::SIGHUP, "hung up"),
    ] {
        let tmp = tempfile::tempdir().expect("tempdir");
        // Nodes that take a minute to apply: the rollout is still running when the signal comes.
        let child = start_sim(tmp.path(), &["--nodes", "5", "--apply-ms", "60000"]);
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).expect("signal");
        let (status, err) = finish(child, Duration::from_secs(30));
        assert!(!status.success(), "{signal}: {status:?}");
        assert!(err.contains(said), "{signal}: {err}");
        assert_eq!(sim_dirs(tmp.path()), Vec::<PathBuf>::new(), "{signal}: {err}");
        assert_eq!(servers_in(tmp.path()), Vec::<i32>::new(), "{signal}: a server survived");
    }
}

/// Pids of the `mco server` processes whose command line names a path under `tmp`.
fn servers_in(tmp: &std::path::Path) -> Vec<i32> {
    let needle = tmp.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit_once(')').map(|(_, r)| r.trim_start().starts_with('Z')))
                .unwrap_or(true);
            !zombie && cmd.contains(" server ") && cmd.contains(&needle)
        })
        .collect()
}

#[test]
fn a_simulator_killed_outright_takes_its_server_with_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut child = start_sim(tmp.path(), &["--nodes", "5", "--apply-ms", "60000"]);
    assert_eq!(servers_in(tmp.path()).len(), 1, "the child server runs");
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    // The kernel sends the server its parent's death signal (SIGTERM): it shuts down. Its
    // data dir stays (nothing of the simulator ran to remove it).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !servers_in(tmp.path()).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the child server outlived its simulator by 30 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn settings_that_cannot_make_a_rollout_are_refused_naming_the_flag() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let base = SimConfig {
        nodes: 5,
        server_bin: Some(PathBuf::from(env!("CARGO_BIN_EXE_mco"))),
        data_dir: Some(tmp.path().join("never")),
        ..SimConfig::default()
    };
    let full = tmp.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("something"), "x").unwrap();
    let cases: Vec<(SimConfig, &str)> = vec![
        (
            SimConfig {
                nodes: 0,
                ..base.clone()
            },
            "--nodes",
        ),
        (
            SimConfig {
                nodes: usize::MAX,
                ..base.clone()
            },
            "--nodes",
        ),
        (
            SimConfig {
                jitter: f64::NAN,
                ..base.clone()
            },
            "--jitter",
        ),
        (
            SimConfig {
                jitter: 2.0,
                ..base.clone()
            },
            "--jitter",
        ),
        (
            SimConfig {
                jitter: -0.1,
                ..base.clone()
            },
            "--jitter",
        ),
        (
            SimConfig {
                failure_rate: 1.0,
                ..base.clone()
            },
            "--failure-rate",
        ),
        (
            SimConfig {
                failure_rate: -0.5,
                ..base.clone()
            },
            "--failure-rate",
        ),
        (
            SimConfig {
                failure_rate: f64::NAN,
                ..base.clone()
            },
            "--failure-rate",
        ),
        (
            SimConfig {
                max_unavailable: "abc".into(),
                ..base.clone()
            },
            "--max-unavailable",
        ),
        (
            SimConfig {
                max_unavailable: "1.5%".into(),
                ..base.clone()
            },
            "--max-unavailable",
        ),
        (
            SimConfig {
                max_unavailable: "-1".into(),
                ..base.clone()
            },
            "--max-unavailable",
        ),
        (
            SimConfig {
                concurrency: 0,
                ..base.clone()
            },
            "--concurrency",
        ),
        (
            SimConfig {
                timeout: Duration::ZERO,
                ..base.clone()
            },
            "--timeout",
        ),
        (
            SimConfig {
                apply: Duration::from_millis(u64::MAX),
                ..base.clone()
            },
            "--apply-ms",
        ),
        (
            SimConfig {
                reboot: Duration::from_secs(3601),
                ..base.clone()
            },
            "--reboot-ms",
        ),
        (
            SimConfig {
                data_dir: Some(full.join("something")),
                ..base.clone()
            },
            "--data-dir",
        ),
        (
            SimConfig {
                server: Some("http://127.0.0.1:1".into()),
                token: Some("t".into()),
                ..base.clone()
            },
            "--data-dir",
        ),
        (
            SimConfig {
                data_dir: Some(full.clone()),
                ..base.clone()
            },
            "--data-dir",
        ),
    ];
    for (cfg, flag) in cases {
        let what = format!("{cfg:?}");
        let e = tokio::time::timeout(Duration::from_secs(10), sim::run(cfg))
            .await
            .expect("refused at once")
            .expect_err(&what);
        assert!(e.to_string().contains(flag), "{flag}: {e:#}");
    }
    // Refused before anything started: no server was given the data dir.
    assert!(!tmp.path().join("never").exists());
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

/// `--server` drives a given server over TLS, verified against its CA, and refuses a server
/// whose worker pool already has machines (the run counts them to know its nodes are in).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_given_tls_server_is_driven_and_a_pool_with_machines_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = common::tls_server(dir.path()).await;
    assert!(s.url().starts_with("https://"), "{}", s.url());
    let given = SimConfig {
        nodes: 5,
        apply: Duration::from_millis(5),
        reboot: Duration::from_millis(10),
        server: Some(s.url()),
        token: s.admin_token(),
        trust: s.ca(),
        timeout: Duration::from_secs(60),
        ..SimConfig::default()
    };
    let e = sim::run(SimConfig {
        token: Some("not-a-token".into()),
        ..given.clone()
    })
    .await
    .expect_err("a wrong token");
    assert!(e.to_string().contains("refused the token"), "{e:#}");
    let r = sim::run(given.clone())
        .await
        .expect("the simulation over TLS completes");
    assert_eq!(r.nodes_at_new_config, 5);
    assert_eq!(
        r.server_cpu_secs, None,
        "another process's CPU is not the simulator's to read"
    );
    assert!(sim::render(&r).contains("n/a (a server given by --server)"));
    // Without the CA the server's certificate is refused.
    let e = sim::run(SimConfig {
        trust: None,
        ..given.clone()
    })
    .await
    .expect_err("unverified");
    assert!(format!("{e:#}").to_lowercase().contains("certificate"), "{e:#}");
    // Again on the same server: its worker pool now has the 5 nodes of the first run.
    let e = sim::run(given.clone()).await.expect_err("a pool with machines");
    assert!(e.to_string().contains("already has 5 machines"), "{e:#}");
    // A paused pool would never roll out: refused at once, not waited on.
    let pool = format!(
        "{}/apis/machineconfiguration.openshift.io/v1/machineconfigpools/worker",
        s.url()
    );
    let r = s
        .admin_http()
        .patch(pool)
        .header("Content-Type", "application/merge-patch+json")
        .body(r#"{"spec":{"paused":true}}"#)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let e = sim::run(given).await.expect_err("a paused pool");
    assert!(e.to_string().contains("paused"), "{e:#}");
    s.stop().await;
}

/// Issue 24, item 11: over TLS the clients speak HTTP/2, and a server allows 200 concurrent
/// streams per connection. 300 nodes sharing one connection held 300 watches open, and every
/// other call waited for a stream that never came: the run stalled. Each simulated node has its
/// own client (its own connection), as each real daemon does, so the rollout completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hundred_nodes_over_tls_each_on_its_own_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = common::tls_server(dir.path()).await;
    assert!(s.url().starts_with("https://"), "{}", s.url());
    let started = std::time::Instant::now();
    let r = sim::run(SimConfig {
        nodes: 300,
        max_unavailable: "50%".into(),
        apply: Duration::from_millis(5),
        reboot: Duration::from_millis(10),
        server: Some(s.url()),
        token: s.admin_token(),
        trust: s.ca(),
        timeout: Duration::from_secs(150),
        ..SimConfig::default()
    })
    .await
    .expect("300 nodes over TLS complete");
    assert_eq!(r.nodes_at_new_config, 300);
    assert_eq!(r.timed_out, None);
    // Every node opened its watch at least twice (boot, then after its reboot).
    let watches = r.latency.iter().find(|l| l.verb == "WATCH node (open)").unwrap().count;
    assert!(watches >= 600, "{watches} watches");
    eprintln!(
        "300 nodes over TLS: {:.1} s in all, rollout {:.1} s",
        started.elapsed().as_secs_f64(),
        r.rollout_secs
    );
    s.stop().await;
}

/// `--timeout` ends the run wherever it is, with the report of what it did, and exit 1.
#[test]
fn a_tiny_timeout_prints_the_report_and_exits_non_zero() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for (args, json) in [
        (&["--nodes", "5", "--apply-ms", "60000", "--timeout", "2s"][..], false),
        (
            &["--nodes", "5", "--apply-ms", "60000", "--timeout", "2s", "--json"][..],
            true,
        ),
    ] {
        let started = std::time::Instant::now();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mco"))
            .arg("sim")
            .args(args)
            .env("TMPDIR", tmp.path())
            .output()
            .expect("mco sim runs");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
        // 2 s, then the cleanup (the child server gets SIGTERM), well within the bound.
        assert!(started.elapsed() < Duration::from_secs(30), "{:?}", started.elapsed());
        assert!(stderr.contains("timed out after 2s waiting for"), "{stderr}");
        if json {
            let r: serde_json::Value = serde_json::from_str(&stdout).expect("the report as JSON");
            assert_eq!(r["nodes"], 5, "{r}");
            assert!(
                r["timedOut"].as_str().is_some_and(|t| t.contains("--timeout 2s")),
                "{r}"
            );
        } else {
            assert!(stdout.contains("TIMED OUT"), "{stdout}");
            assert!(stdout.contains("rollout wall time"), "{stdout}");
            assert!(stdout.contains("| nodes "), "{stdout}");
        }
    }
    assert_eq!(sim_dirs(tmp.path()), Vec::<PathBuf>::new());
}
