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
        let mut child = Command::new("etcd")
            .args(["--name", "t", "--data-dir"])
            .arg(dir.path().join("data"))
            .args([
                "--listen-client-urls",
                &client_url,
                "--advertise-client-urls",
                &client_url,
            ])
            .args([
                "--listen-peer-urls",
                &peer_url,
                "--initial-advertise-peer-urls",
                &peer_url,
            ])
            .args(["--initial-cluster", &format!("t={peer_url}")])
            .args(["--logger", "zap", "--log-level", "error"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("etcd starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if child.try_wait().unwrap().is_some() {
                return None; // a port was taken meanwhile
            }
            if health(client) {
                return Some(Etcd {
                    child,
                    endpoint: format!("127.0.0.1:{client}"),
                    _dir: dir,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("etcd on {client_url} did not become healthy within 20 s");
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
