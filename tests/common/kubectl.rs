//! kubectl and mco side by side against one server: kubectl with its own HOME, discovery cache
//! and kubeconfig (the server's admin), `mco` as a process with the same credentials. The tests
//! comparing the two (`tests/kubectl.rs`, `tests/kubectl_verbs.rs`) run both and compare.

use super::*;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

/// kubectl pointed at one server, with its own HOME and discovery cache, authenticated as the
/// server's admin.
pub struct Kubectl {
    home: tempfile::TempDir,
    kubeconfig: PathBuf,
    /// kubectl sends kubeconfig credentials over TLS only (kubernetes/kubectl#744): the tests'
    /// servers serve TLS, so this is `None` unless a server is plain HTTP.
    _proxy: Option<TokenProxy>,
}

pub struct Out {
    pub ok: bool,
    /// The exit status (`None`: ended by a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Kubectl {
    /// kubectl as the server's admin: the kubeconfig `mco up` writes (CA and admin token).
    pub fn new(server: &mco::server::RunningServer) -> Kubectl {
        let home = tempfile::tempdir().unwrap();
        let kubeconfig = home.path().join("kubeconfig");
        let (text, proxy) = kubeconfig_for(server, &server.admin_token().expect("the admin token"));
        std::fs::write(&kubeconfig, text).unwrap();
        Kubectl {
            home,
            kubeconfig,
            _proxy: proxy,
        }
    }

    pub fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new("kubectl");
        c.args(args)
            .arg("--cache-dir")
            .arg(self.home.path().join("cache"))
            .env("HOME", self.home.path())
            .env("KUBECONFIG", &self.kubeconfig)
            .stdin(Stdio::null());
        c
    }

    pub async fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Out {
        let mut c = self.command(args);
        for (k, v) in env {
            c.env(k, v);
        }
        let o = tokio::time::timeout(Duration::from_secs(60), c.output())
            .await
            .expect("kubectl finished")
            .expect("kubectl runs");
        Out {
            ok: o.status.success(),
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into(),
            stderr: String::from_utf8_lossy(&o.stderr).into(),
        }
    }

    pub async fn run(&self, args: &[&str]) -> Out {
        self.run_env(args, &[]).await
    }

    /// Runs and expects success; returns stdout.
    pub async fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args).await;
        assert!(o.ok, "kubectl {args:?} failed:\n{}\n{}", o.stdout, o.stderr);
        o.stdout
    }

    /// Runs and expects failure; returns stderr.
    pub async fn fails(&self, args: &[&str]) -> String {
        let o = self.run(args).await;
        assert!(!o.ok, "kubectl {args:?} should fail:\n{}", o.stdout);
        o.stderr
    }
}

/// Runs `mco ARGS` against `server` with its admin token: (exit status success, stdout, stderr).
pub async fn mco_at(server: &mco::server::RunningServer, args: &[&str]) -> Out {
    mco_env(server, args, &[]).await
}

/// [`mco_at`] with more environment variables (`EDITOR`, ...).
pub async fn mco_env(server: &mco::server::RunningServer, args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"));
    c.args(args)
        .env("MCO_SERVER", server.url())
        .env("MCO_CA_FILE", mco::tls::Pki::in_data_dir(&server.data_dir).ca_cert())
        .env("MCO_TOKEN", server.admin_token().expect("the admin token"))
        .stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let o = tokio::time::timeout(Duration::from_secs(60), c.output())
        .await
        .expect("mco finished")
        .expect("mco runs");
    Out {
        ok: o.status.success(),
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
    }
}
