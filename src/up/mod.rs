//! `mco up`: everything on one machine — a server with its embedded store and one `mco daemon`
//! child process per node, each with a sandbox root under `<data-dir>/nodes/<node>/`.
//!
//! Owns node naming (`master-0`, `worker-0`, ...), zones, supervision (a daemon that exits with
//! [`crate::daemon::REBOOT_EXIT_CODE`] "rebooted": its `<root>/run` is emptied, which gives it
//! a new boot id, and it is started again; a crashed daemon is restarted after a pause) and
//! clean shutdown on Ctrl-C or SIGTERM (daemons get SIGTERM, then the server stops).

pub mod etcd;
pub mod ha;

use crate::server::{self, ServerConfig};
use anyhow::Context;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long a sandbox reboot takes by default, in seconds: long enough to watch a rollout
/// (UPDATING True, nodes one by one), short enough for a demo. Tests use 0.
/// The client environment variables a daemon of `mco up` must not read: it is given its
/// server (`--server`), token (`--token-file`) and CA (`--ca-file`, or none without TLS) by
/// flag, for `mco up`'s own data dir; a value left in the shell for another data dir (an
/// `MCO_CA_FILE` naming a CA not written yet, an `MCO_TOKEN` of another server) would
/// otherwise stop or misdirect it.
pub const CLIENT_ENV: [&str; 5] = ["MCO_SERVER", "MCO_TOKEN", "MCO_TOKEN_FILE", "MCO_CA_FILE", "KUBECONFIG"];

pub const DEFAULT_REBOOT_SECONDS: u64 = 3;

/// Settings of `mco up`.
#[derive(Clone, Debug)]
pub struct UpConfig {
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    pub masters: usize,
    pub workers: usize,
    pub group: String,
    /// Seconds each sandbox reboot takes (the daemon's `--reboot-seconds`).
    pub reboot_seconds: u64,
    /// Daemons log JSON lines (`--log-format json`).
    pub log_json: bool,
    /// Serve TLS with the PKI under `<data-dir>/pki/` (generated on first start, reused after).
    pub tls: bool,
    /// More SANs for the serving certificate (`--tls-san`).
    pub tls_sans: Vec<String>,
    /// `--allow-insecure-listen` ([`crate::tls::check_listen`]).
    pub allow_insecure_listen: bool,
    /// Connection limits of the API listener.
    pub connections: crate::api::listen::ConnLimits,
    /// The server's input limits (README "Bounded inputs").
    pub limits: crate::limits::Limits,
    /// `--node-monitor-grace-period` ([`ServerConfig::node_monitor_grace_period`]).
    pub node_monitor_grace_period: std::time::Duration,
    /// `--ha`: three servers on a local three-member etcd cluster ([`ha`]).
    pub ha: bool,
}

/// One supervised `mco daemon` process (see [`supervise`]).
#[derive(Clone, Debug)]
pub struct DaemonProcess {
    /// The `mco` binary.
    pub exe: PathBuf,
    /// The server's URL.
    pub url: String,
    pub node: LocalNode,
    /// The node's sandbox root.
    pub root: PathBuf,
    /// Where `<node>.log` goes; `None`: the daemon inherits stderr.
    pub log_dir: Option<PathBuf>,
    /// Seconds each reboot takes (`--reboot-seconds`).
    pub reboot_seconds: u64,
    /// `--log-format json`.
    pub log_json: bool,
    /// The node's token file (`--token-file`; [`crate::api::auth::ensure_node_token`]).
    pub token_file: Option<PathBuf>,
    /// The CA the daemon verifies an `https://` server against (`--ca-file`).
    pub ca_file: Option<PathBuf>,
    /// More `mco daemon` arguments, passed as given (`mco daemon --supervise` hands its child
    /// `--lease-renew-interval` and the kubelet health monitor's flags).
    pub extra_args: Vec<String>,
}

impl DaemonProcess {
    /// The daemon of `node` under `mco up` (`cfg`): its root `<data-dir>/nodes/<node>`, its log in `<data-dir>/logs/`, the server(s) at `url`.
    fn of_up(
        cfg: &UpConfig,
        exe: &Path,
        url: &str,
        node: &LocalNode,
        token_file: PathBuf,
        ca_file: Option<PathBuf>,
    ) -> DaemonProcess {
        DaemonProcess {
            exe: exe.to_path_buf(),
            url: url.to_string(),
            node: node.clone(),
            root: cfg.data_dir.join("nodes").join(&node.name),
            log_dir: Some(cfg.data_dir.join("logs")),
            reboot_seconds: cfg.reboot_seconds,
            log_json: cfg.log_json,
            token_file: Some(token_file),
            ca_file,
            extra_args: Vec::new(),
        }
    }
}

/// Starts the server, explaining the common failures: a data dir in use (naming the process
/// holding its lock, from `/proc/locks`) and a listen address in use (suggesting `--listen`).
///
/// A start that fails leaves nothing behind it created: a store directory that did not exist
/// before is removed, and the data dir too when that leaves it empty.
pub async fn start_server(cfg: ServerConfig) -> anyhow::Result<server::RunningServer> {
    let data_dir = cfg.data_dir.clone();
    let listen = cfg.listen;
    let store_dir = data_dir.join("store");
    let fresh = !store_dir.exists();
    let data_dir_fresh = !data_dir.exists();
    let started = server::start(cfg).await;
    if started.is_err() && fresh {
        let _ = std::fs::remove_dir_all(&store_dir);
        if data_dir_fresh {
            // Only when empty: remove_dir refuses a directory with anything in it.
            let _ = std::fs::remove_dir(&data_dir);
        }
    }
    started.map_err(|e| {
        let chain = format!("{e:#}");
        if chain.contains("could not acquire lock") || chain.contains("WouldBlock") {
            let holder = lock_holder(&data_dir.join("store"))
                .map(|(pid, cmd)| format!(" by process {pid} ({cmd})"))
                .unwrap_or_default();
            anyhow::anyhow!(
                "the data dir {} is in use{holder}: only one `mco up` or `mco server` can use a data dir; \
                 stop that one or give another --data-dir",
                data_dir.display()
            )
        } else if chain.contains("Address already in use") {
            anyhow::anyhow!(
                "cannot listen on {listen}: the address is in use (another `mco up` or `mco server`?); \
                 give another with --listen, e.g. --listen 127.0.0.1:0 for any free port"
            )
        } else {
            e
        }
    })
}

/// The process holding a lock on a file directly under `dir` (sled locks `<store>/db`), from
/// `/proc/locks`: its pid and command line.
pub fn lock_holder(dir: &Path) -> Option<(u32, String)> {
    use std::os::unix::fs::MetadataExt;
    let inodes: Vec<u64> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.ino())
        .collect();
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    for line in locks.lines() {
        // `1: FLOCK  ADVISORY  WRITE 12345 08:01:1234567 0 EOF`
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(pos) = f.iter().position(|x| x.matches(':').count() == 2) else {
            continue;
        };
        let inode: u64 = f[pos].rsplit(':').next()?.parse().ok()?;
        if !inodes.contains(&inode) {
            continue;
        }
        let pid: u32 = f.get(pos - 1)?.parse().ok()?;
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| {
                b.split(|c| *c == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        return Some((pid, cmd));
    }
    None
}

/// One local node: its name and the labels its daemon registers.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalNode {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

/// Zones the local nodes are spread over, round-robin.
pub const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];

/// The nodes `mco up` runs: `master-0..`, then `worker-0..`, spread over [`ZONES`].
pub fn local_nodes(masters: usize, workers: usize) -> Vec<LocalNode> {
    let roles = std::iter::repeat_n("master", masters)
        .enumerate()
        .chain(std::iter::repeat_n("worker", workers).enumerate());
    roles
        .enumerate()
        .map(|(i, (n, role))| LocalNode {
            name: format!("{role}-{n}"),
            labels: [
                (format!("node-role.kubernetes.io/{role}"), String::new()),
                (
                    "topology.kubernetes.io/zone".to_string(),
                    ZONES[i % ZONES.len()].to_string(),
                ),
                ("kubernetes.io/os".to_string(), "linux".to_string()),
                ("kubernetes.io/hostname".to_string(), format!("{role}-{n}")),
            ]
            .into(),
        })
        .collect()
}

/// A kubeconfig pointing kubectl at the local server.
pub fn kubeconfig(server_url: &str) -> String {
    kubeconfig_with_ca(server_url, None)
}

/// A kubeconfig pointing kubectl at the server at `server_url`, verifying it against the CA
/// `ca_pem` (`certificate-authority-data`, base64 of the PEM, as kubectl reads it) when given.
pub fn kubeconfig_with_ca(server_url: &str, ca_pem: Option<&[u8]>) -> String {
    use base64::Engine;
    let ca = ca_pem
        .map(|p| {
            format!(
                "\n    certificate-authority-data: {}",
                base64::engine::general_purpose::STANDARD.encode(p)
            )
        })
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: mco\n  cluster:\n    server: {server_url}{ca}\ncontexts:\n- name: mco\n  context:\n    cluster: mco\n    user: mco\ncurrent-context: mco\nusers:\n- name: mco\n  user: {{}}\n"
    )
}

/// `kubeconfig` (as [`kubeconfig`] writes it) with bearer `token` as its user's credential
/// (`users[].user.token`).
pub fn kubeconfig_with_token(kubeconfig: &str, token: &str) -> String {
    kubeconfig.replace("  user: {}\n", &format!("  user:\n    token: {token}\n"))
}

/// Writes `<data_dir>/kubeconfig` (0600: it holds the admin token) for the server `running`,
/// trusting the CA in `ca_file` (its `certificate-authority-data`) when given, with the server's
/// admin token, if it has one; returns its path.
///
/// Errors: reading `ca_file`, the file write.
pub fn write_kubeconfig(
    running: &server::RunningServer,
    data_dir: &Path,
    ca_file: Option<&Path>,
) -> anyhow::Result<PathBuf> {
    write_kubeconfig_for(data_dir, &running.url(), running.admin_token(), ca_file)
}

/// [`write_kubeconfig`] for the server at `url`, with `admin_token` as the user's credential.
pub fn write_kubeconfig_for(
    data_dir: &Path,
    url: &str,
    admin_token: Option<String>,
    ca_file: Option<&Path>,
) -> anyhow::Result<PathBuf> {
    let path = data_dir.join("kubeconfig");
    let ca_pem = match ca_file {
        Some(f) => Some(std::fs::read(f).with_context(|| format!("reading {}", f.display()))?),
        None => None,
    };
    let mut text = kubeconfig_with_ca(url, ca_pem.as_deref());
    if let Some(t) = admin_token {
        text = kubeconfig_with_token(&text, &t);
    }
    crate::credentials::write_secret_file(&path, text.trim_end())?;
    Ok(path)
}

/// Runs `mco up` until Ctrl-C or SIGTERM ([`ha::run`] with `--ha`).
pub async fn run(cfg: UpConfig) -> anyhow::Result<()> {
    std::fs::create_dir_all(&cfg.data_dir).with_context(|| format!("creating {}", cfg.data_dir.display()))?;
    let mut cfg = cfg;
    cfg.data_dir =
        std::path::absolute(&cfg.data_dir).with_context(|| format!("resolving {}", cfg.data_dir.display()))?;
    // One data dir holds one control plane: the sled log of `mco up` or the etcd cluster of
    // `mco up --ha`; starting the other kind on it would show an empty fleet.
    let (etcd_dir, store_dir) = (cfg.data_dir.join("etcd"), cfg.data_dir.join("store"));
    match (cfg.ha, etcd_dir.exists(), store_dir.exists()) {
        (false, true, _) => anyhow::bail!(
            "{} holds the etcd cluster of `mco up --ha`: start it with --ha, or give another --data-dir",
            cfg.data_dir.display()
        ),
        (true, _, true) => anyhow::bail!(
            "{} holds the event log of `mco up` (no --ha): start it without --ha, or give another --data-dir \
             (`mco store export` and `mco store import --store etcd://…` move a log to etcd)",
            cfg.data_dir.display()
        ),
        (true, ..) => return ha::run(cfg).await,
        _ => {}
    }
    let pki = crate::tls::Pki::in_data_dir(&cfg.data_dir);
    if cfg.tls {
        let r = crate::tls::ensure_pki(&pki, &cfg.tls_sans)?;
        if r.new_ca || r.new_serving {
            tracing::info!(dir = %pki.dir.display(), new_ca = r.new_ca, sans = ?r.sans, "generated TLS certificates");
        }
    }
    let running = start_server(ServerConfig {
        data_dir: cfg.data_dir.clone(),
        listen: cfg.listen,
        group: cfg.group.clone(),
        drain_hook: None,
        tls: cfg.tls.then(|| pki.serving()),
        allow_insecure_listen: cfg.allow_insecure_listen,
        connections: cfg.connections.clone(),
        limits: cfg.limits.clone(),
        node_monitor_grace_period: cfg.node_monitor_grace_period,
        ..Default::default()
    })
    .await?;
    let url = running.url();
    let ca_file = cfg.tls.then(|| pki.ca_cert());
    let kubeconfig_path = write_kubeconfig(&running, &cfg.data_dir, ca_file.as_deref())?;
    let exe = std::env::current_exe().context("locating the mco binary")?;
    let stop = CancellationToken::new();
    let mut supervisors = Vec::new();
    let nodes = local_nodes(cfg.masters, cfg.workers);
    let bar = nodes_bar(nodes.len());
    for node in &nodes {
        if let Some(b) = &bar {
            b.set_message(format!("starting {}", node.name));
        }
        let known = running.hub.state().nodes.contains_key(&node.name);
        // The node's labels, its role among them, are recorded with its token: the admin's
        // decision, which NodeRestriction lets the node register with and nothing else.
        let token_file =
            crate::api::auth::ensure_node_token(&running.hub, &cfg.data_dir, &node.name, &node.labels).await?;
        let process = DaemonProcess::of_up(&cfg, &exe, &url, node, token_file, ca_file.clone());
        std::fs::create_dir_all(&process.root)?;
        supervisors.push(tokio::spawn(supervise(process, stop.clone())));
        if !known {
            // Wait for the node to register, then let the clock move on: distinct creation
            // times give the rollout its oldest-first order (timestamps have 1 s resolution).
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            while !running.hub.state().nodes.contains_key(&node.name) && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let created = jiff::Timestamp::now().as_second();
            while jiff::Timestamp::now().as_second() == created {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    wait_nodes_up(&running, &nodes, bar).await;
    println!(
        "mco is up: server {url}, {} nodes ({})",
        nodes.len(),
        nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(", ")
    );
    print_locations(
        &cfg.data_dir,
        &format!("{url}{}", crate::api::ui::UI_PATH),
        &kubeconfig_path,
    );
    let default_ca = ca_file
        .as_ref()
        .is_none_or(|f| std::path::absolute(crate::server::DEFAULT_CA_FILE).is_ok_and(|d| d == *f));
    let mut server_flag = if cfg.listen.to_string() == crate::server::DEFAULT_LISTEN && default_ca {
        String::new()
    } else {
        format!(" --server {url}")
    };
    if let (Some(f), false) = (&ca_file, default_ca) {
        server_flag = format!(" --certificate-authority {}{server_flag}", f.display());
    }
    let env = token_env(&cfg.data_dir);
    println!("Try, in another terminal:");
    println!("  {env}mco{server_flag} get mcp");
    println!("  {env}mco{server_flag} apply -f examples/chrony.yaml");
    println!("  {env}mco{server_flag} get nodes      # watch DESIRED/CURRENT/STATE change node by node");
    println!("  KUBECONFIG={} kubectl get mcp", kubeconfig_path.display());
    println!("Stop with Ctrl-C.");
    wait_for_signal().await;
    println!("shutting down…");
    stop.cancel();
    for s in supervisors {
        let _ = s.await;
    }
    running.stop().await;
    Ok(())
}

/// The lines of `mco up`'s banner saying where things are: the dashboard at `dashboard`, the
/// data dir, the node roots, the logs, the kubeconfig and the tokens. The admin token is never
/// printed (this output may go to a journal or a log collector): the page asks for a token on
/// its first call, or takes one from the URL fragment, which browsers never send to the server.
fn print_locations(data_dir: &Path, dashboard: &str, kubeconfig: &Path) {
    let admin = data_dir.join(crate::credentials::ADMIN_TOKEN_FILE);
    println!(
        "  dashboard:  {dashboard} (sign in with the token in {}, or open {dashboard}#token=<token>)",
        admin.display()
    );
    println!("  data:       {}", data_dir.display());
    println!("  node roots: {}", data_dir.join("nodes").display());
    println!("  logs:       {}", data_dir.join("logs").display());
    println!("  kubeconfig: {} (admin token)", kubeconfig.display());
    println!("  tokens:     {} (0600; node tokens in tokens/)", admin.display());
    println!();
}

/// What the banner's sample commands need in front of them for the admin token: nothing when
/// it is `./mco-data/admin.token` (the client reads it there for a loopback server), else
/// `MCO_TOKEN_FILE=<data-dir>/admin.token `.
fn token_env(data_dir: &Path) -> String {
    let admin = data_dir.join(crate::credentials::ADMIN_TOKEN_FILE);
    let default = Path::new("mco-data").join(crate::credentials::ADMIN_TOKEN_FILE);
    if std::path::absolute(default).is_ok_and(|d| d == admin) {
        String::new()
    } else {
        format!("MCO_TOKEN_FILE={} ", admin.display())
    }
}

async fn wait_for_signal() {
    let mut term =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler installs");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// Keeps one node's daemon running: restarts it after a reboot (with an emptied `<root>/run`)
/// or a crash, and stops it with SIGTERM when `stop` is cancelled.
pub async fn supervise(p: DaemonProcess, stop: CancellationToken) {
    let DaemonProcess {
        exe,
        url,
        node,
        root,
        log_dir,
        reboot_seconds,
        log_json,
        token_file,
        ca_file,
        extra_args,
    } = p;
    if let Some(l) = &log_dir {
        let _ = std::fs::create_dir_all(l);
    }
    loop {
        let mut cmd = tokio::process::Command::new(&exe);
        for var in CLIENT_ENV {
            cmd.env_remove(var);
        }
        cmd.arg("daemon")
            .arg("--server")
            .arg(&url)
            .arg("--node")
            .arg(&node.name)
            .arg("--root")
            .arg(&root)
            .arg("--reboot-seconds")
            .arg(reboot_seconds.to_string());
        if log_json {
            cmd.args(["--log-format", "json"]);
        }
        if let Some(t) = &token_file {
            cmd.arg("--token-file").arg(t);
        }
        if let Some(f) = &ca_file {
            cmd.arg("--ca-file").arg(f);
        }
        for (k, v) in &node.labels {
            cmd.arg("--label").arg(format!("{k}={v}"));
        }
        cmd.args(&extra_args);
        cmd.stdin(Stdio::null()).stdout(Stdio::null());
        if let Some(l) = &log_dir {
            match std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(l.join(format!("{}.log", node.name)))
            {
                Ok(f) => cmd.stderr(f),
                Err(_) => cmd.stderr(Stdio::null()),
            };
        }
        // SIGTERM reaches the daemon if `mco up` dies without cleaning up (kill -9), so no
        // orphaned daemon keeps acting on the node root; it never comes from a retiring thread.
        let mut child = match crate::process::spawn_tied(cmd, nix::sys::signal::Signal::SIGTERM).await {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(node = node.name, error = %e, "cannot start the node daemon");
                return;
            }
        };
        let status = tokio::select! {
            s = child.wait() => s,
            _ = stop.cancelled() => {
                stop_child(&mut child).await;
                return;
            }
        };
        match status.ok().and_then(|s| s.code()) {
            Some(crate::daemon::REBOOT_EXIT_CODE) => {
                tracing::info!(node = node.name, "node rebooting");
                empty_run_dir(&root);
            }
            code => {
                tracing::warn!(node = node.name, ?code, "node daemon exited; restarting in 2s");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                    _ = stop.cancelled() => return,
                }
            }
        }
    }
}

/// Stops a supervised child: SIGTERM, then SIGKILL if it has not exited within 15 s.
async fn stop_child(child: &mut tokio::process::Child) {
    if let Some(pid) = child.id() {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    if tokio::time::timeout(Duration::from_secs(15), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
}

/// The bar `mco up` shows while its nodes come up (indicatif's template syntax).
pub const BAR_TEMPLATE: &str = "{spinner} nodes up [{bar:30}] {pos}/{len} {msg}";

/// The node bar, when stdout is a terminal.
fn nodes_bar(n: usize) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal().then(|| {
        let b = indicatif::ProgressBar::new(n as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(BAR_TEMPLATE)
                .expect("template parses")
                .progress_chars("=> "),
        );
        b.enable_steady_tick(Duration::from_millis(120));
        b
    })
}

/// Waits (at most 60 s) until every local node has booted and is Done on its pool's config,
/// with a progress bar on a terminal.
async fn wait_nodes_up(running: &server::RunningServer, nodes: &[LocalNode], bar: Option<indicatif::ProgressBar>) {
    let keys = running.hub.keys().clone();
    let mut changes = running.hub.changes();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let up: Vec<&str> = {
            // The read guard must not be held across the wait below: writers would block.
            let state = running.hub.state();
            nodes
                .iter()
                .filter(|n| state.nodes.get(&n.name).is_some_and(|node| settled(node, &keys)))
                .map(|n| n.name.as_str())
                .collect()
        };
        if let Some(b) = &bar {
            b.set_position(up.len() as u64);
            b.set_message(up.join(", "));
        }
        let now = tokio::time::Instant::now();
        if up.len() == nodes.len() || now >= deadline {
            break;
        }
        let _ = tokio::time::timeout(deadline - now, changes.changed()).await;
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
}

/// Whether a node is up as `mco up` waits for it: Done on a config that is its desiredConfig.
pub fn settled(node: &crate::model::Node, keys: &crate::model::Keys) -> bool {
    let a = crate::model::NodeAnnotations::read(node, keys);
    a.state == "Done" && !a.current_config.is_empty() && a.current_config == a.desired_config
}

/// Empties `<root>/run`, as a reboot empties its tmpfs (the next boot gets a new boot id).
pub fn empty_run_dir(root: &Path) {
    let run = root.join("run");
    let _ = std::fs::remove_dir_all(&run);
    let _ = std::fs::create_dir_all(&run);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_failed_start_leaves_no_store_behind() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let data_dir = tmp.path().join("data");
        let e = start_server(ServerConfig {
            data_dir: data_dir.clone(),
            listen: taken.local_addr().unwrap(),
            ..Default::default()
        })
        .await
        .err()
        .expect("the address is in use");
        assert!(e.to_string().contains("the address is in use"), "{e:#}");
        assert!(!data_dir.join("store").exists());
        assert!(!data_dir.exists());
    }

    #[test]
    fn node_names_roles_and_zones() {
        let n = local_nodes(1, 2);
        let names: Vec<_> = n.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["master-0", "worker-0", "worker-1"]);
        assert!(n[0].labels.contains_key("node-role.kubernetes.io/master"));
        assert!(n[2].labels.contains_key("node-role.kubernetes.io/worker"));
        let zones: Vec<_> = n
            .iter()
            .map(|n| n.labels["topology.kubernetes.io/zone"].as_str())
            .collect();
        assert_eq!(zones, ["zone-a", "zone-b", "zone-c"]);
    }
}
