//! `mco up` as a user runs it: the real binary, its real daemon children.
//!
//! Node daemons must live until their node reboots or `mco up` stops, and must not outlive a
//! `mco up` killed with SIGKILL (issue: PR_SET_PDEATHSIG follows the forking thread, and tokio's
//! blocking threads retire after 10 s idle).

use mco::client::Client;
use mco::model::{Kind, MachineConfigPool, Node, NodeAnnotations};
use serde_json::json;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `mco up`, killed (with SIGKILL: its daemons follow through their death signal)
/// when dropped, so a failing test leaves no process behind.
struct Up(Child);

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `mco up` in `data_dir` on a free port; returns the child and the server URL it printed.
fn start_up(data_dir: &Path) -> (Up, String) {
    start_up_with(data_dir, &[], &[])
}

/// [`start_up`] with more arguments and environment variables.
fn start_up_with(data_dir: &Path, more: &[&str], env: &[(&str, &str)]) -> (Up, String) {
    let mut up = Up(Command::new(env!("CARGO_BIN_EXE_mco"))
        .envs(env.iter().copied())
        .args([
            "up",
            "--listen",
            "127.0.0.1:0",
            "--masters",
            "1",
            "--workers",
            "2",
            "--reboot-seconds",
            "0",
            "--data-dir",
        ])
        .arg(data_dir)
        .args(more)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("mco up starts"));
    let stdout = up.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("mco is up: server ") {
                let _ = tx.send(rest.split(',').next().unwrap_or("").to_string());
            }
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("mco up prints its server URL");
    (up, url)
}

/// The pids of the `mco daemon` processes whose `--root` is under `data_dir`, by node name.
fn daemon_pids(data_dir: &Path) -> BTreeMap<String, u32> {
    let nodes = data_dir.join("nodes");
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.get(1).map(String::as_str) != Some("daemon") {
            continue;
        }
        let root = args.iter().skip_while(|a| *a != "--root").nth(1);
        let node = args.iter().skip_while(|a| *a != "--node").nth(1);
        if let (Some(root), Some(node)) = (root, node) {
            if Path::new(root).starts_with(&nodes) && is_alive(pid) {
                out.insert(node.clone(), pid);
            }
        }
    }
    out
}

/// Alive and not a zombie.
fn is_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            let state = s.rsplit_once(')').map(|(_, r)| r.trim_start()).unwrap_or("");
            !state.starts_with('Z') && !state.starts_with('X')
        })
        .unwrap_or(false)
}

async fn wait_until<F, Fut>(what: &str, timeout: Duration, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn nodes_done(client: &Client, want: usize) -> bool {
    let Ok(list) = client.list(Kind::Node).await else {
        return false;
    };
    let keys = mco::model::Keys::new(client.group());
    let nodes: Vec<Node> = serde_json::from_value(list["items"].clone()).unwrap_or_default();
    nodes.len() == want
        && nodes.iter().all(|n| {
            let a = NodeAnnotations::read(n, &keys);
            a.state == "Done" && !a.current_config.is_empty() && a.current_config == a.desired_config
        })
}

async fn pool_updated_past(client: &Client, pool: &str, old: &str) -> bool {
    match client.get::<MachineConfigPool>(Kind::MachineConfigPool, pool).await {
        Ok(p) => {
            let target = &p.spec.configuration.name;
            !target.is_empty()
                && target != old
                && p.status.configuration.name == *target
                && p.condition_status("Updated") == "True"
        }
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemons_live_until_their_reboot_and_die_with_a_killed_mco_up() {
    let dir = tempfile::tempdir().unwrap();
    let (mut up, url) = start_up(dir.path());
    let token = mco::credentials::read_secret_file(&dir.path().join(mco::credentials::ADMIN_TOKEN_FILE));
    assert!(token.is_some(), "mco up writes <data-dir>/admin.token");
    // TLS by default: the daemons and this client verify the server against the generated CA;
    // the kubeconfig carries the CA and the admin token as its user's; each node has its own
    // token file; every credential is owner-only.
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let pki = mco::tls::Pki::in_data_dir(dir.path());
    let trust = mco::tls::Trust::from_file(&pki.ca_cert()).unwrap();
    let client = Client::new_trusting(&url, mco::model::DEFAULT_GROUP, "test", Some(&trust)).with_token(token.clone());
    let mode = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    };
    assert_eq!(mode(&pki.dir), 0o700);
    assert_eq!(mode(&pki.ca_key()), 0o600);
    assert_eq!(mode(&pki.server_key()), 0o600);
    assert_eq!(mode(&dir.path().join("store")), 0o700);
    let kubeconfig_path = dir.path().join("kubeconfig");
    assert_eq!(mode(&kubeconfig_path), 0o600);
    let kubeconfig = std::fs::read_to_string(&kubeconfig_path).unwrap();
    assert!(kubeconfig.contains(&format!("server: {url}\n")), "{kubeconfig}");
    assert!(kubeconfig.contains("certificate-authority-data: "), "{kubeconfig}");
    assert!(!kubeconfig.contains("insecure-skip-tls-verify"), "{kubeconfig}");
    assert_eq!(
        mco::cli::token::kubeconfig_token(&kubeconfig_path),
        token,
        "{kubeconfig}"
    );
    wait_until("every node Done", Duration::from_secs(60), || nodes_done(&client, 3)).await;
    // The stock kubectl works with the kubeconfig exactly as mco up wrote it (TLS verified
    // against its CA, the admin token sent as the user's bearer token).
    if Command::new("kubectl").arg("version").arg("--client").output().is_ok() {
        let home = tempfile::tempdir().unwrap();
        let out = Command::new("kubectl")
            .args(["get", "nodes", "-o", "name"])
            .env("HOME", home.path())
            .env("KUBECONFIG", &kubeconfig_path)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(stdout.lines().count(), 3, "{stdout}");
        assert!(stdout.contains("node/worker-1"), "{stdout}");
    } else {
        eprintln!("SKIPPED the kubectl step: kubectl is not on PATH (install kubectl to run it)");
    }
    for f in [
        "admin.token",
        "kubeconfig",
        "tokens/master-0.token",
        "tokens/worker-0.token",
        "tokens/worker-1.token",
    ] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(f)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{f}");
    }
    let tokens: serde_json::Value = client.get_path("/apis/auth.mco.dev/v1/tokens").await.unwrap();
    let mut identities: Vec<&str> = tokens["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["spec"]["identity"].as_str().unwrap())
        .collect();
    identities.sort();
    assert_eq!(
        identities,
        [
            "admin",
            "system:node:master-0",
            "system:node:worker-0",
            "system:node:worker-1"
        ]
    );
    let worker_before = client
        .get::<MachineConfigPool>(Kind::MachineConfigPool, "worker")
        .await
        .unwrap()
        .spec
        .configuration
        .name;
    let first = daemon_pids(dir.path());
    assert_eq!(first.len(), 3, "{first:?}");

    // A file change: the worker is drained (the drain controller runs) and reboots.
    let mc = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": "99-worker-pid-test", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.4.0"},
                 "storage": {"files": [{"path": "/etc/pid-test", "contents": {"source": "data:,x"}}]}}}
    });
    client.create(Kind::MachineConfig, &mc, None).await.unwrap();
    wait_until("the worker pool rolled out", Duration::from_secs(60), || {
        pool_updated_past(&client, "worker", &worker_before)
    })
    .await;
    wait_until("every node Done", Duration::from_secs(30), || nodes_done(&client, 3)).await;
    let after_rollout = daemon_pids(dir.path());
    assert_eq!(
        after_rollout["master-0"], first["master-0"],
        "the master daemon restarted"
    );
    assert_ne!(after_rollout["worker-0"], first["worker-0"], "the worker rebooted");

    // Idle for longer than tokio's blocking-thread keep-alive (10 s): nobody restarts.
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert_eq!(daemon_pids(dir.path()), after_rollout, "a daemon restarted while idle");
    assert!(nodes_done(&client, 3).await);

    // kill -9 of mco up: its daemons go with it.
    up.0.kill().unwrap();
    up.0.wait().unwrap();
    let orphans = || daemon_pids(dir.path());
    let deadline = Instant::now() + Duration::from_secs(20);
    while !orphans().is_empty() {
        assert!(Instant::now() < deadline, "daemons outlived mco up: {:?}", orphans());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Client variables left in the shell for another data dir (an `MCO_CA_FILE` naming a CA not
/// written yet, another server's `MCO_SERVER` and `MCO_TOKEN`, a `KUBECONFIG`) neither stop
/// `mco up` nor reach its daemons: it starts, and every node registers and gets Done with the
/// credentials of its own data dir. Without TLS, where no `--ca-file` would override the
/// variable in a daemon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mco_up_ignores_client_credentials_of_another_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = dir.path().join("elsewhere");
    let ca = elsewhere.join("pki/ca.crt");
    let kubeconfig = elsewhere.join("kubeconfig");
    let (_up, url) = start_up_with(
        &dir.path().join("data"),
        &["--no-tls"],
        &[
            ("MCO_CA_FILE", ca.to_str().unwrap()),
            ("MCO_SERVER", "https://127.0.0.1:1"),
            ("MCO_TOKEN", "not-a-token-of-this-server"),
            ("KUBECONFIG", kubeconfig.to_str().unwrap()),
        ],
    );
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let token = mco::credentials::read_secret_file(&dir.path().join("data").join(mco::credentials::ADMIN_TOKEN_FILE));
    let client = Client::new(&url, mco::model::DEFAULT_GROUP, "test").with_token(token);
    wait_until("every node Done", Duration::from_secs(60), || nodes_done(&client, 3)).await;
    assert!(
        !ca.exists() && !elsewhere.exists(),
        "nothing written for the other data dir"
    );
}
