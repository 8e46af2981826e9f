//! Daemon memory (DESIGN.md section 8: ≤ 15 MiB resident with 1,000 managed files): two real
//! `mco daemon` processes against an in-process server on loopback, one a worker whose pool's
//! rendered config holds 1,000 files, one a master on the built-in config (the floor: the same
//! daemon with an empty config, in the same run). Each boots into its config (the first boot
//! writes it; a restart finds it on disk) and its resident memory (`VmRSS`, and the peak
//! `VmHWM`) is read once its drift monitor watches the files.
//!
//! Run: `cargo bench --bench daemon`

use mco::command::Actor;
use mco::model::{Kind, NodeAnnotations};
use serde_json::json;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "common/report.rs"]
mod report;

const FILES: usize = 1000;
const DEADLINE: Duration = Duration::from_secs(120);
/// What the daemon logs once its drift monitor watches the config.
const WATCHING: &str = "config drift monitor watching";

/// `VmRSS`, `VmHWM` and `RssAnon` of `pid`, in bytes.
fn rss(pid: u32) -> (u64, u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
            .unwrap()
    };
    (field("VmRSS:"), field("VmHWM:"), field("RssAnon:"))
}

fn daemon(url: &str, node: &str, role: &str, root: &Path, token: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_mco"))
        .args(["daemon", "--server", url, "--node", node, "--reboot-seconds", "0"])
        .arg("--root")
        .arg(root)
        .arg("--token-file")
        .arg(token)
        .args(["--label", &format!("node-role.kubernetes.io/{role}=")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(root.with_extension("log"))
                .unwrap(),
        )
        .spawn()
        .unwrap()
}

/// Waits for `f` over the server's projection, at each change, until `DEADLINE`.
async fn wait_for(server: &mco::server::RunningServer, what: &str, f: impl Fn(&mco::state::State) -> bool) {
    let mut changes = server.hub.changes();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !f(&server.hub.state()) {
        if tokio::time::timeout_at(deadline, changes.changed()).await.is_err() {
            panic!("timed out waiting for {what}");
        }
    }
}

/// criterion's options that take a value as the next argument (`--warm-up-time 1`, as
/// `benches/report.sh` passes): that value is not a name filter.
const VALUED: &[&str] = &[
    "--warm-up-time",
    "--measurement-time",
    "--sample-size",
    "--nresamples",
    "--noise-threshold",
    "--confidence-level",
    "--significance-level",
    "--save-baseline",
    "--baseline",
    "--baseline-lenient",
    "--load-baseline",
    "--profile-time",
    "--output-format",
    "--plotting-backend",
    "--color",
    "--format",
    "--logfile",
];

/// The name filter among a bench's arguments, as criterion reads it: the first argument that
/// is neither an option nor an option's value.
fn filter(args: impl Iterator<Item = String>) -> Option<String> {
    let mut args = args;
    while let Some(a) = args.next() {
        if VALUED.contains(&a.as_str()) {
            args.next();
        } else if !a.starts_with('-') {
            return Some(a);
        }
    }
    None
}

fn main() {
    // criterion-style filtering: `cargo bench` passes `--bench`; a filter that is not ours skips.
    if filter(std::env::args().skip(1)).is_some_and(|f| !"daemon_rss".contains(f.as_str())) {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let server = mco::server::start(mco::server::ServerConfig {
            data_dir: dir.path().join("data"),
            listen: ([127, 0, 0, 1], 0).into(),
            ..Default::default()
        })
        .await
        .unwrap();
        let files: Vec<_> = (0..FILES)
            .map(|i| json!({"path": format!("/etc/bench/d{}/f{i}.conf", i % 20), "mode": 420,
                "contents": {"source": format!("data:,setting%20{i}%3Dvalue-{i}%0A")}}))
            .collect();
        let mc = json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
            "metadata": {"name": "50-worker-bench", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
            "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": files}}}});
        server.hub.create(Kind::MachineConfig, mc, &Actor::new("bench")).await.unwrap();
        wait_for(&server, "the worker render with the 1,000 files", |s| {
            s.pools.get("worker").is_some_and(|p| {
                p.spec.configuration.source.iter().any(|r| r.name == "50-worker-bench")
            })
        })
        .await;
        let url = server.url();
        let keys = server.hub.keys().clone();
        let nodes = [("worker-0", "worker"), ("master-0", "master")];
        let mut roots = Vec::new();
        for (node, role) in nodes {
            let labels = [(format!("node-role.kubernetes.io/{role}"), String::new())].into();
            let token = mco::api::auth::ensure_node_token(&server.hub, &dir.path().join("data"), node, &labels).await.unwrap();
            roots.push((dir.path().join(node), token));
        }
        // Each daemon twice: its first boot (it writes its config, then watches it), then a
        // restart (it finds the config on disk and only watches it: a daemon's steady state).
        let mut figures = Vec::new();
        for run in 1..=2 {
            let mut running: Vec<Child> = nodes
                .iter()
                .zip(&roots)
                .map(|((node, role), (root, token))| {
                    std::fs::create_dir_all(root).unwrap();
                    daemon(&url, node, role, root, token)
                })
                .collect();
            wait_for(&server, "both nodes Done on their pool's render", |s| {
                nodes.iter().all(|(node, role)| {
                    let Some(n) = s.nodes.get(*node) else { return false };
                    let a = NodeAnnotations::read(n, &keys);
                    let target = s.pools.get(*role).map(|p| p.spec.configuration.name.as_str());
                    a.state == "Done" && Some(a.current_config.as_str()) == target && a.desired_config == a.current_config
                })
            })
            .await;
            // Watching: the monitor has said so in this run's log.
            for (root, _) in &roots {
                let log = root.with_extension("log");
                let started = Instant::now();
                while std::fs::read_to_string(&log).unwrap_or_default().matches(WATCHING).count() < run {
                    assert!(started.elapsed() < DEADLINE, "no drift monitor in {}", log.display());
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            figures.push((rss(running[0].id()), rss(running[1].id())));
            for c in &mut running {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        let mib = |b: u64| format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0));
        for ((worker, master), when) in figures.iter().zip(["after its first boot wrote them", "after a restart"]) {
            report::row(
                &format!("daemon resident memory, {FILES} managed files, watching, {when} (peak in brackets; floor: the same daemon on the built-in config)"),
                &format!("{} ({})", mib(worker.0), mib(worker.1)),
                &format!("{} ({})", mib(master.0), mib(master.1)),
                worker.0 as f64 / master.0 as f64,
                "≤ 15 MiB",
            );
        }
        // What the config itself costs: the private (anonymous) part of the resident set. The
        // rest is the `mco` binary's pages (file-backed, shared with every mco process).
        let (worker, master) = figures[1];
        report::row(
            &format!("daemon private (anonymous) memory, {FILES} managed files, after a restart (floor: the same daemon on the built-in config)"),
            &mib(worker.2),
            &mib(master.2),
            worker.2 as f64 / master.2 as f64,
            "(the config's own cost)",
        );
        server.stop().await;
    });
}
