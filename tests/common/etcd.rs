//! A real etcd on loopback for the tests of the etcd backend ([`mco::up::etcd::EtcdCluster`]:
//! Debian's `etcd` binary, which `.ci/run` installs, in a temporary directory). Outside CI a
//! missing binary skips the test with a message; under `CI=true` it fails it.

use mco::up::etcd::EtcdCluster;

/// A local cluster, killed (and its data removed) on drop.
pub struct Etcd {
    cluster: EtcdCluster,
    /// `127.0.0.1:PORT` of the first member's client listener.
    pub endpoint: String,
    _dir: tempfile::TempDir,
}

/// Whether an `etcd` binary is on PATH; when not, says why `test` skips (or panics under CI).
pub fn have_etcd(test: &str) -> bool {
    let found = mco::up::etcd::installed();
    if !found {
        assert!(
            std::env::var("CI").is_err(),
            "{test}: no `etcd` binary on PATH under CI (.ci/run installs Debian's etcd-server)"
        );
        eprintln!("{test}: SKIPPED: no `etcd` binary on PATH (apt-get install etcd-server)");
    }
    found
}

impl Etcd {
    /// One member, healthy.
    pub async fn start() -> Etcd {
        Etcd::start_members(1).await
    }

    /// `n` members, each healthy.
    pub async fn start_members(n: usize) -> Etcd {
        let dir = tempfile::tempdir().unwrap();
        let cluster = EtcdCluster::start(dir.path(), n)
            .await
            .expect("etcd starts on loopback");
        Etcd {
            endpoint: cluster.endpoints()[0].clone(),
            cluster,
            _dir: dir,
        }
    }

    /// Kills member `i` (SIGKILL), keeping its data.
    pub async fn kill(&mut self, i: usize) {
        self.cluster.kill(i).await;
    }

    /// Starts member `i` again on its data and ports, healthy.
    pub async fn restart(&mut self, i: usize) {
        self.cluster.restart(i).await.expect("etcd comes back");
    }

    /// `etcd://` URL of every member, for `--store`.
    pub fn url(&self) -> String {
        self.cluster.url()
    }

    /// The backend settings for a server named `name` writing under `prefix`, with a short
    /// lease so that takeovers in tests are quick.
    pub fn config(&self, name: &str, prefix: &str) -> mco::store::etcd::EtcdConfig {
        let mut cfg = mco::store::etcd::EtcdConfig::parse(&self.url(), name).unwrap();
        cfg.prefix = prefix.to_string();
        cfg.lease_ttl_secs = 2;
        cfg
    }

    /// A raw etcd client of the first member (to read or damage keys behind mco's back).
    pub async fn client(&self) -> etcd_client::Client {
        etcd_client::Client::connect([format!("http://{}", self.endpoint)], None)
            .await
            .unwrap()
    }
}
