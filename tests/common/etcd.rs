//! A real etcd member on loopback for the tests of the etcd backend: Debian's `etcd` binary
//! (package `etcd-server`, which `.ci/run` installs), a temporary data directory, free ports.
//! Outside CI a missing binary skips the test with a message; under `CI=true` it fails it.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One etcd member, killed (and its data removed) on drop.
pub struct Etcd {
    child: Child,
    /// `127.0.0.1:PORT` of its client listener.
    pub endpoint: String,
    args: Vec<String>,
    _dir: tempfile::TempDir,
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether an `etcd` binary is on PATH; when not, says why `test` skips (or panics under CI).
pub fn have_etcd(test: &str) -> bool {
    let found = Command::new("etcd")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var("CI").is_err(),
            "{test}: no `etcd` binary on PATH under CI (.ci/run installs Debian's etcd-server)"
        );
        eprintln!("{test}: SKIPPED: no `etcd` binary on PATH (apt-get install etcd-server)");
    }
    found
}

fn free_port() -> (std::net::TcpListener, u16) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    (l, port)
}

impl Etcd {
    /// Starts a one-member cluster and waits until it answers `/health` (20 s deadline). A port
    /// taken between choosing it and etcd binding it is retried with new ports.
    pub fn start() -> Etcd {
        for _ in 0..5 {
            if let Some(etcd) = Etcd::try_start() {
                return etcd;
            }
        }
        panic!("etcd did not start on loopback in 5 attempts");
    }

    fn try_start() -> Option<Etcd> {
        let dir = tempfile::tempdir().unwrap();
        let ((l1, client), (l2, peer)) = (free_port(), free_port());
        drop((l1, l2));
        let client_url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let data = dir.path().join("data");
        let args: Vec<String> = [
            "--name",
            "t",
            "--data-dir",
            data.to_str().unwrap(),
            "--listen-client-urls",
            &client_url,
            "--advertise-client-urls",
            &client_url,
            "--listen-peer-urls",
            &peer_url,
            "--initial-advertise-peer-urls",
            &peer_url,
            "--initial-cluster",
            &format!("t={peer_url}"),
            "--logger",
            "zap",
            "--log-level",
            "error",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        let mut child = spawn(&args);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if child.try_wait().unwrap().is_some() {
                return None; // a port was taken meanwhile
            }
            if health(client) {
                return Some(Etcd {
                    child,
                    endpoint: format!("127.0.0.1:{client}"),
                    args,
                    _dir: dir,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("etcd on {client_url} did not become healthy within 20 s");
    }

    /// Kills the member (SIGKILL), keeping its data.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the member again on its data and ports, and waits until it is healthy.
    pub fn restart(&mut self) {
        self.child = spawn(&self.args);
        let port: u16 = self.endpoint.rsplit_once(':').unwrap().1.parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !health(port) {
            assert!(Instant::now() < deadline, "etcd did not come back within 20 s");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `etcd://` URL of this member, for `--store`.
    pub fn url(&self) -> String {
        format!("etcd://{}", self.endpoint)
    }

    /// The backend settings for a server named `name` writing under `prefix`, with a short
    /// lease so that takeovers in tests are quick.
    pub fn config(&self, name: &str, prefix: &str) -> mco::store::etcd::EtcdConfig {
        let mut cfg = mco::store::etcd::EtcdConfig::parse(&self.url(), name).unwrap();
        cfg.prefix = prefix.to_string();
        cfg.lease_ttl_secs = 2;
        cfg
    }

    /// A raw etcd client of this member (to read or damage keys behind mco's back).
    pub async fn client(&self) -> etcd_client::Client {
        etcd_client::Client::connect([format!("http://{}", self.endpoint)], None)
            .await
            .unwrap()
    }
}

fn spawn(args: &[String]) -> Child {
    Command::new("etcd")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("etcd starts")
}

/// Whether etcd's `/health` answers healthy (a plain HTTP/1.1 GET, no client library).
fn health(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.contains("\"health\":\"true\"")
}
