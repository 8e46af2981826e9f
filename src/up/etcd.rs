//! A local etcd cluster for `mco up --ha`, the tests and the benchmarks: `members` etcd
//! processes (the `etcd` binary from PATH: Debian's `etcd-server`) on loopback ports, each with
//! its data directory under a directory the caller gives, tied to this process's life
//! ([`crate::process::spawn_tied`]) and killed when the cluster is dropped.
//!
//! It must not be used to run production etcd: an operator runs etcd as etcd's documentation
//! says and gives `mco server --store etcd://…` its members.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a member may take to answer `/health` after it starts.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// One member: its name, ports, data directory, and the process while it runs.
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    data_dir: PathBuf,
    child: Option<tokio::process::Child>,
}

/// A running local etcd cluster.
pub struct EtcdCluster {
    members: Vec<Member>,
    initial_cluster: String,
}

/// Why a local etcd cluster cannot be started.
#[derive(Debug, thiserror::Error)]
pub enum EtcdClusterError {
    /// No `etcd` binary on PATH.
    #[error("no `etcd` binary on PATH: install etcd (Debian and Ubuntu: `apt-get install etcd-server`; else a release from https://github.com/etcd-io/etcd/releases) and try again")]
    NotInstalled,
    /// A member did not start or did not become healthy in time.
    #[error("etcd member {name} (client port {port}): {what}")]
    Member { name: String, port: u16, what: String },
}

/// Whether an `etcd` binary is on PATH.
pub fn installed() -> bool {
    std::process::Command::new("etcd")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The file of a persistent cluster's ports ([`EtcdCluster::start_persistent`]).
pub const PORTS_FILE: &str = "ports";

/// Free `(client, peer)` loopback ports for `members` members (at least one).
fn choose_ports(members: usize) -> Result<Vec<(u16, u16)>, EtcdClusterError> {
    (0..members.max(1))
        .map(|i| {
            let port = || {
                free_port().map_err(|e| EtcdClusterError::Member {
                    name: format!("etcd-{i}"),
                    port: 0,
                    what: e.to_string(),
                })
            };
            Ok((port()?, port()?))
        })
        .collect()
}

/// The port pairs of a [`PORTS_FILE`]; `None` when a line is not two ports or there is none.
fn parse_ports(text: &str) -> Option<Vec<(u16, u16)>> {
    let pairs: Option<Vec<(u16, u16)>> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut f = l.split_whitespace();
            let pair = (f.next()?.parse().ok()?, f.next()?.parse().ok()?);
            f.next().is_none().then_some(pair)
        })
        .collect();
    pairs.filter(|p| !p.is_empty())
}

impl EtcdCluster {
    /// Starts `members` members (1 or 3, or any odd count) with data under `dir/etcd-<i>` and
    /// waits until each answers `/health`. A port taken between choosing it and etcd binding it
    /// is retried with new ports (up to 5 times).
    pub async fn start(dir: &Path, members: usize) -> Result<EtcdCluster, EtcdClusterError> {
        if !installed() {
            return Err(EtcdClusterError::NotInstalled);
        }
        let mut last = None;
        for _ in 0..5 {
            match EtcdCluster::try_start(dir, members).await {
                Ok(c) => return Ok(c),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("at least one attempt"))
    }

    /// Starts the cluster of `dir` that outlives this process (`mco up --ha`): its members'
    /// ports are kept in `dir/ports` (one `CLIENT PEER` line per member), since a member's data
    /// names its peers' URLs; the first start chooses them. A start whose ports were taken
    /// meanwhile fails, naming the member and its port.
    pub async fn start_persistent(dir: &Path, members: usize) -> Result<EtcdCluster, EtcdClusterError> {
        if !installed() {
            return Err(EtcdClusterError::NotInstalled);
        }
        let file = dir.join(PORTS_FILE);
        if let Ok(text) = std::fs::read_to_string(&file) {
            let ports = parse_ports(&text).ok_or_else(|| EtcdClusterError::Member {
                name: "etcd-0".into(),
                port: 0,
                what: format!("{} is not one `CLIENT PEER` port pair a line", file.display()),
            })?;
            return EtcdCluster::start_on(dir, &ports).await;
        }
        let mut last = None;
        for _ in 0..5 {
            let ports = choose_ports(members)?;
            match EtcdCluster::start_on(dir, &ports).await {
                Ok(c) => {
                    let text: String = ports.iter().map(|(c, p)| format!("{c} {p}\n")).collect();
                    std::fs::create_dir_all(dir)
                        .and_then(|()| std::fs::write(&file, text))
                        .map_err(|e| EtcdClusterError::Member {
                            name: "etcd-0".into(),
                            port: ports[0].0,
                            what: format!("writing {}: {e}", file.display()),
                        })?;
                    return Ok(c);
                }
                Err(e) => {
                    // A new cluster that failed leaves no member data naming the ports it lost.
                    for i in 0..ports.len() {
                        let _ = std::fs::remove_dir_all(dir.join(format!("etcd-{i}")));
                    }
                    last = Some(e);
                }
            }
        }
        Err(last.expect("at least one attempt"))
    }

    async fn try_start(dir: &Path, members: usize) -> Result<EtcdCluster, EtcdClusterError> {
        EtcdCluster::start_on(dir, &choose_ports(members)?).await
    }

    /// Starts one member per `(client, peer)` port pair and waits until each is healthy.
    async fn start_on(dir: &Path, ports: &[(u16, u16)]) -> Result<EtcdCluster, EtcdClusterError> {
        let list: Vec<Member> = ports
            .iter()
            .enumerate()
            .map(|(i, &(client_port, peer_port))| {
                let name = format!("etcd-{i}");
                Member {
                    client_port,
                    peer_port,
                    data_dir: dir.join(&name),
                    name,
                    child: None,
                }
            })
            .collect();
        let initial_cluster = list
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        let mut cluster = EtcdCluster {
            members: list,
            initial_cluster,
        };
        for i in 0..cluster.members.len() {
            cluster.spawn(i).await?;
        }
        for i in 0..cluster.members.len() {
            cluster.wait_healthy(i).await?;
        }
        Ok(cluster)
    }

    async fn spawn(&mut self, i: usize) -> Result<(), EtcdClusterError> {
        let m = &self.members[i];
        let client = format!("http://127.0.0.1:{}", m.client_port);
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let state = if m.data_dir.join("member").exists() {
            "existing"
        } else {
            "new"
        };
        let mut cmd = tokio::process::Command::new("etcd");
        cmd.arg("--name")
            .arg(&m.name)
            .arg("--data-dir")
            .arg(&m.data_dir)
            .args(["--listen-client-urls", &client, "--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-state", state, "--initial-cluster-token", "mco-up"])
            .args(["--logger", "zap", "--log-level", "error"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        let child = crate::process::spawn_tied(cmd, nix::sys::signal::Signal::SIGKILL)
            .await
            .map_err(|e| EtcdClusterError::Member {
                name: m.name.clone(),
                port: m.client_port,
                what: format!("cannot start etcd: {e}"),
            })?;
        self.members[i].child = Some(child);
        Ok(())
    }

    async fn wait_healthy(&mut self, i: usize) -> Result<(), EtcdClusterError> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let m = &mut self.members[i];
            let err = |what: String| EtcdClusterError::Member {
                name: m.name.clone(),
                port: m.client_port,
                what,
            };
            if let Some(status) = m.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                return Err(err(format!("exited with {status} (a port taken meanwhile?)")));
            }
            if healthy(m.client_port).await {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(err(format!("not healthy within {START_TIMEOUT:?}")));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `HOST:PORT` of every member's client listener.
    pub fn endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.client_port))
            .collect()
    }

    /// `etcd://HOST:PORT,…` for `mco server --store`.
    pub fn url(&self) -> String {
        format!("etcd://{}", self.endpoints().join(","))
    }

    /// Kills member `i` (SIGKILL), keeping its data.
    pub async fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.start_kill();
            let _ = c.wait().await;
        }
    }

    /// Starts member `i` again on its data and ports and waits until it is healthy.
    pub async fn restart(&mut self, i: usize) -> Result<(), EtcdClusterError> {
        self.kill(i).await;
        self.spawn(i).await?;
        self.wait_healthy(i).await
    }

    /// Stops every member (SIGKILL; etcd's WAL makes that safe) and waits for them.
    pub async fn stop(mut self) {
        for i in 0..self.members.len() {
            self.kill(i).await;
        }
    }
}

/// Whether the member answers `/health` with `"health":"true"` (a plain HTTP/1.1 GET).
async fn healthy(port: u16) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let probe = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        s.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await?;
        let mut out = String::new();
        s.read_to_string(&mut out).await?;
        Ok::<_, std::io::Error>(out.contains("\"health\":\"true\""))
    };
    matches!(tokio::time::timeout(Duration::from_secs(2), probe).await, Ok(Ok(true)))
}

#[cfg(test)]
mod tests {
    use super::parse_ports;

    #[test]
    fn ports_file_is_one_pair_a_line() {
        assert_eq!(
            parse_ports("2379 2380\n2381 2382\n\n"),
            Some(vec![(2379, 2380), (2381, 2382)])
        );
        assert_eq!(parse_ports(""), None);
        assert_eq!(parse_ports("2379\n"), None);
        assert_eq!(parse_ports("2379 2380 2381\n"), None);
        assert_eq!(parse_ports("2379 http\n"), None);
    }
}
