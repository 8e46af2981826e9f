//! `mco up --ha`: the highly available control plane on one machine, to try what
//! `mco server --store etcd://…` gives a fleet: a three-member etcd cluster
//! ([`super::etcd::EtcdCluster`], kept under `<data-dir>/etcd/`), three `mco server` replicas on
//! it (`mco-0`, `mco-1`, `mco-2`, one child process each, listening on the `--listen` port and
//! the two after it, data under `<data-dir>/servers/<name>/`, logs in `<data-dir>/logs/`), and
//! the sandbox nodes' daemons pointed at all three (`--server` with the comma-separated list).
//!
//! One replica holds the event log's writer lease and runs the controllers; the others wait as
//! standbys. A replica that exits (a `kill -9` of the leader, to watch a failover) is started
//! again after a second, as systemd's `Restart=always` would, and comes back as a standby.
//! Ctrl-C stops the daemons, then the servers, then etcd.

use super::{etcd::EtcdCluster, DaemonProcess, UpConfig};
use crate::client::Client;
use crate::model::{Keys, Kind, Node};
use anyhow::Context;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The number of etcd members and of server replicas.
pub const REPLICAS: usize = 3;

/// How long the replicas may take to elect a writer and serve, and the nodes to come up.
pub const START_TIMEOUT: Duration = Duration::from_secs(90);

/// The file in a replica's data dir holding the pid of its current process.
pub const PID_FILE: &str = "server.pid";

/// One supervised `mco server` replica (see [`supervise_server`]).
#[derive(Clone, Debug)]
pub struct ServerProcess {
    /// The `mco` binary.
    pub exe: PathBuf,
    /// `--name`: the holder identity of the writer lease and of the Lease
    /// `kube-system/mco-controllers` while it leads.
    pub name: String,
    pub listen: SocketAddr,
    /// Its `--data-dir` (the admin token, if it created it, and [`PID_FILE`]).
    pub data_dir: PathBuf,
    /// `--store etcd://…`.
    pub store: String,
    /// `--tls-cert`/`--tls-key`; `None`: plain HTTP.
    pub tls: Option<crate::tls::TlsFiles>,
    pub group: String,
    pub node_monitor_grace_period: Duration,
    /// `--log-format json`.
    pub log_json: bool,
    /// Where its stdout and stderr are appended.
    pub log_file: PathBuf,
}

impl ServerProcess {
    /// The replica's URL.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.listen)
    }

    fn command(&self) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.exe);
        for var in super::CLIENT_ENV {
            cmd.env_remove(var);
        }
        cmd.arg("server")
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--listen")
            .arg(self.listen.to_string())
            .args(["--store", &self.store, "--name", &self.name, "--group", &self.group])
            .arg("--node-monitor-grace-period")
            .arg(format!("{}s", self.node_monitor_grace_period.as_secs()));
        if let Some(t) = &self.tls {
            cmd.arg("--tls-cert").arg(&t.cert).arg("--tls-key").arg(&t.key);
        }
        if self.log_json {
            cmd.args(["--log-format", "json"]);
        }
        cmd.stdin(Stdio::null());
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_file)
        {
            Ok(f) => {
                let err = f.try_clone().map(Stdio::from).unwrap_or_else(|_| Stdio::null());
                cmd.stdout(f).stderr(err);
            }
            Err(_) => {
                cmd.stdout(Stdio::null()).stderr(Stdio::null());
            }
        }
        cmd
    }
}

/// Keeps one replica running: writes its pid to [`PID_FILE`] at every start, starts it again a
/// second after it exits, and stops it with SIGTERM (SIGKILL after 15 s) when `stop` is
/// cancelled.
pub async fn supervise_server(p: ServerProcess, stop: CancellationToken) {
    let _ = std::fs::create_dir_all(&p.data_dir);
    loop {
        let mut child = match crate::process::spawn_tied(p.command(), nix::sys::signal::Signal::SIGTERM).await {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(server = p.name, error = %e, "cannot start the server replica");
                return;
            }
        };
        if let Some(pid) = child.id() {
            let _ = std::fs::write(p.data_dir.join(PID_FILE), format!("{pid}\n"));
        }
        let status = tokio::select! {
            s = child.wait() => s,
            _ = stop.cancelled() => {
                super::stop_child(&mut child).await;
                let _ = std::fs::remove_file(p.data_dir.join(PID_FILE));
                return;
            }
        };
        tracing::warn!(server = p.name, status = ?status.ok(), "server replica exited; starting it again in 1s (as a standby)");
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stop.cancelled() => return,
        }
    }
}

/// The replicas' listen addresses: `listen` and the ports after it, or free ports when its
/// port is 0.
pub fn replica_addresses(listen: SocketAddr, n: usize) -> anyhow::Result<Vec<SocketAddr>> {
    (0..n)
        .map(|i| {
            if listen.port() == 0 {
                let l = std::net::TcpListener::bind(listen).with_context(|| format!("choosing a port on {listen}"))?;
                Ok(l.local_addr()?)
            } else {
                let port = listen
                    .port()
                    .checked_add(i as u16)
                    .context("--listen port too high for three replicas")?;
                Ok(SocketAddr::new(listen.ip(), port))
            }
        })
        .collect()
}

/// Runs `mco up --ha` until Ctrl-C or SIGTERM.
pub async fn run(cfg: UpConfig) -> anyhow::Result<()> {
    let pki = crate::tls::Pki::in_data_dir(&cfg.data_dir);
    crate::tls::check_listen(cfg.listen, cfg.tls, cfg.allow_insecure_listen)?;
    if cfg.tls {
        crate::tls::ensure_pki(&pki, &cfg.tls_sans)?;
    }
    let etcd_dir = cfg.data_dir.join("etcd");
    let etcd = EtcdCluster::start_persistent(&etcd_dir, REPLICAS)
        .await
        .with_context(|| {
            format!(
                "starting the local etcd cluster in {} (its ports are in {})",
                etcd_dir.display(),
                etcd_dir.join(super::etcd::PORTS_FILE).display()
            )
        })?;
    let exe = std::env::current_exe().context("locating the mco binary")?;
    let logs = cfg.data_dir.join("logs");
    std::fs::create_dir_all(&logs)?;
    let stop = CancellationToken::new();
    let replicas: Vec<ServerProcess> = replica_addresses(cfg.listen, REPLICAS)?
        .into_iter()
        .enumerate()
        .map(|(i, listen)| {
            let name = format!("mco-{i}");
            ServerProcess {
                exe: exe.clone(),
                listen,
                data_dir: cfg.data_dir.join("servers").join(&name),
                store: etcd.url(),
                tls: cfg.tls.then(|| pki.serving()),
                group: cfg.group.clone(),
                node_monitor_grace_period: cfg.node_monitor_grace_period,
                log_json: cfg.log_json,
                log_file: logs.join(format!("{name}.log")),
                name,
            }
        })
        .collect();
    let servers = replicas.iter().map(ServerProcess::url).collect::<Vec<_>>().join(",");
    let mut supervisors: Vec<_> = replicas
        .iter()
        .map(|r| tokio::spawn(supervise_server(r.clone(), stop.clone())))
        .collect();
    let started = start_nodes(&cfg, &replicas, &servers, &exe, &stop).await;
    let (client, nodes, daemons) = match started {
        Ok(s) => s,
        Err(e) => {
            stop.cancel();
            for s in supervisors {
                let _ = s.await;
            }
            etcd.stop().await;
            return Err(e);
        }
    };
    let ca_file = cfg.tls.then(|| pki.ca_cert());
    // kubectl talks to one server: the kubeconfig names the first replica.
    let admin = crate::credentials::read_secret_file(&cfg.data_dir.join(crate::credentials::ADMIN_TOKEN_FILE));
    let kubeconfig = super::write_kubeconfig_for(&cfg.data_dir, &replicas[0].url(), admin, ca_file.as_deref())?;
    println!(
        "mco is up: servers {servers} ({REPLICAS} replicas on a {REPLICAS}-member etcd cluster), {} nodes ({})",
        nodes.len(),
        nodes.join(", ")
    );
    for r in &replicas {
        println!("  server:     {} {} (data {})", r.name, r.url(), r.data_dir.display());
    }
    let leader = leader(&client).await.unwrap_or_else(|| "(electing)".to_string());
    println!("  leader:     {leader} (the Lease kube-system/mco-controllers names it)");
    println!("  etcd:       {} (data {})", etcd.url(), etcd_dir.display());
    super::print_locations(
        &cfg.data_dir,
        &format!("{}{}", replicas[0].url(), crate::api::ui::UI_PATH),
        &kubeconfig,
    );
    let ca_flag = match &ca_file {
        Some(f) if !is_default_ca(f) => format!(" --certificate-authority {}", f.display()),
        _ => String::new(),
    };
    let mco = format!("{}mco{ca_flag} --server {servers}", super::token_env(&cfg.data_dir));
    println!("Try, in another terminal:");
    println!("  {mco} apply -f examples/chrony.yaml --wait");
    println!(
        "  kill -9 $(cat {}/servers/{leader}/{PID_FILE})   # the leader: a standby takes over within the lease",
        cfg.data_dir.display()
    );
    println!("  {mco} get leases   # HOLDER of kube-system/mco-controllers: the leader");
    println!("  {mco} history");
    println!("Stop with Ctrl-C.");
    super::wait_for_signal().await;
    println!("shutting down…");
    stop.cancel();
    for d in daemons {
        let _ = d.await;
    }
    for s in supervisors.drain(..) {
        let _ = s.await;
    }
    etcd.stop().await;
    Ok(())
}

/// Waits for a writer, takes the admin token, issues the node tokens and starts the daemons,
/// then waits until the nodes are up: the client, the node names and the daemons' supervisors.
async fn start_nodes(
    cfg: &UpConfig,
    replicas: &[ServerProcess],
    servers: &str,
    exe: &Path,
    stop: &CancellationToken,
) -> anyhow::Result<(Client, Vec<String>, Vec<tokio::task::JoinHandle<()>>)> {
    let deadline = tokio::time::Instant::now() + START_TIMEOUT;
    let token = admin_token(&cfg.data_dir, replicas, deadline).await?;
    let trust = match cfg.tls {
        true => Some(crate::tls::Trust::from_file(
            &crate::tls::Pki::in_data_dir(&cfg.data_dir).ca_cert(),
        )?),
        false => None,
    };
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    let client = Client::connect_within(servers, "mco-up", Some(token), trust.as_ref(), left)
        .await
        .with_context(|| {
            format!(
                "no server of {servers} answered within {START_TIMEOUT:?}: see {}/logs/mco-*.log",
                cfg.data_dir.display()
            )
        })?;
    let nodes = super::local_nodes(cfg.masters, cfg.workers);
    let mut daemons = Vec::new();
    for node in &nodes {
        let token_file = node_token(&client, &cfg.data_dir, node, servers, trust.as_ref()).await?;
        let ca_file = cfg.tls.then(|| crate::tls::Pki::in_data_dir(&cfg.data_dir).ca_cert());
        let process = DaemonProcess::of_up(cfg, exe, servers, node, token_file, ca_file);
        std::fs::create_dir_all(&process.root)?;
        daemons.push(tokio::spawn(super::supervise(process, stop.clone())));
    }
    let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
    wait_nodes_up(&client, &names, &Keys::new(&cfg.group), deadline).await;
    Ok((client, names, daemons))
}

/// The admin token: `<data-dir>/admin-token`, copied there from the data dir of the replica
/// that created it when the log was new (the first writer).
async fn admin_token(
    data_dir: &Path,
    replicas: &[ServerProcess],
    deadline: tokio::time::Instant,
) -> anyhow::Result<String> {
    let own = data_dir.join(crate::credentials::ADMIN_TOKEN_FILE);
    loop {
        if let Some(t) = crate::credentials::read_secret_file(&own) {
            return Ok(t);
        }
        for r in replicas {
            if let Some(t) =
                crate::credentials::read_secret_file(&r.data_dir.join(crate::credentials::ADMIN_TOKEN_FILE))
            {
                crate::credentials::write_secret_file(&own, &t)?;
                return Ok(t);
            }
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!(
                "no server replica wrote an admin token within {START_TIMEOUT:?} (and {} is missing): see {}/logs/mco-*.log",
                own.display(),
                data_dir.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The node's token file (`<data-dir>/tokens/<node>`): kept when the servers still accept it,
/// else a node token issued through the API with the node's labels (its role among them).
async fn node_token(
    admin: &Client,
    data_dir: &Path,
    node: &super::LocalNode,
    servers: &str,
    trust: Option<&crate::tls::Trust>,
) -> anyhow::Result<PathBuf> {
    let path = crate::credentials::node_token_file(data_dir, &node.name);
    if let Some(secret) = crate::credentials::read_secret_file(&path) {
        // NodeRestriction lets a node read its own Node: 404 before it registers, 401 for a
        // token the log does not hold (a new etcd data dir).
        let as_node = Client::new_trusting(servers, admin.group(), "mco-up", trust).with_token(Some(secret));
        match as_node.get::<serde_json::Value>(Kind::Node, &node.name).await {
            Ok(_) => return Ok(path),
            Err(e) if e.is_not_found() => return Ok(path),
            Err(_) => {}
        }
    }
    let spec = serde_json::json!({"kind": "node", "node": node.name, "labels": node.labels});
    let token: serde_json::Value = admin
        .post_path(
            &format!("/apis/{}/tokens", crate::auth::API_VERSION),
            &serde_json::json!({"apiVersion": crate::auth::API_VERSION, "kind": "Token", "spec": spec}),
        )
        .await
        .with_context(|| format!("issuing the node token of {}", node.name))?;
    let secret = token["status"]["token"]
        .as_str()
        .filter(|s| !s.is_empty())
        .with_context(|| format!("the server issued no secret for the node token of {}", node.name))?;
    crate::credentials::write_secret_file(&path, secret)?;
    Ok(path)
}

/// Waits until every node is up ([`super::settled`]) or `deadline`, reading through the API.
async fn wait_nodes_up(client: &Client, nodes: &[String], keys: &Keys, deadline: tokio::time::Instant) {
    while tokio::time::Instant::now() < deadline {
        let up = match client.list(Kind::Node).await {
            Ok(list) => list["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|n| serde_json::from_value::<Node>(n.clone()).ok())
                .filter(|n| n.metadata.name.as_ref().is_some_and(|m| nodes.contains(m)) && super::settled(n, keys))
                .count(),
            Err(_) => 0,
        };
        if up == nodes.len() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The holder of the Lease `kube-system/mco-controllers`: the replica running the controllers.
pub async fn leader(client: &Client) -> Option<String> {
    let lease: serde_json::Value = client
        .get_path("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/mco-controllers")
        .await
        .ok()?;
    lease["spec"]["holderIdentity"].as_str().map(str::to_string)
}

/// Whether `f` is the CA file clients read without a flag.
fn is_default_ca(f: &Path) -> bool {
    std::path::absolute(crate::server::DEFAULT_CA_FILE).is_ok_and(|d| d == f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_listen_on_consecutive_ports() {
        let got = replica_addresses("127.0.0.1:7443".parse().unwrap(), 3).unwrap();
        let ports: Vec<u16> = got.iter().map(|a| a.port()).collect();
        assert_eq!(ports, [7443, 7444, 7445]);
        let free = replica_addresses("127.0.0.1:0".parse().unwrap(), 3).unwrap();
        assert!(free.iter().all(|a| a.port() != 0));
        assert!(replica_addresses("127.0.0.1:65535".parse().unwrap(), 3).is_err());
    }
}
