//! kubectl and mco side by side against one server: kubectl with its own HOME, discovery cache
//! and kubeconfig (the server's admin), `mco` as a process with the same credentials. The tests
//! comparing the two (`tests/kubectl.rs`, `tests/kubectl_verbs.rs`) run both and compare. Also
//! the kubeconfig a test's kubectl gets ([`kubeconfig_for`], [`kubectl_as`]) and the
//! [`TokenProxy`] that authenticates kubectl against a plain-HTTP server.

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

/// Whether kubectl is on PATH; says that `test` is skipped when it is not.
pub fn have_kubectl(test: &str) -> bool {
    let ok = std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIPPED {test}: kubectl is not on PATH (install kubectl to run the kubectl compatibility tests)");
    }
    ok
}

/// Runs kubectl as the identity of `token` with a kubeconfig carrying it
/// (`users[].user.token`) and the server's CA, as `mco up` writes it, with `home` as its HOME
/// (and cache): (success, stdout, stderr).
pub async fn kubectl_as(
    s: &mco::server::RunningServer,
    home: &Path,
    token: &str,
    args: &[&str],
) -> (bool, String, String) {
    let (text, _proxy) = kubeconfig_for(s, token);
    let tag = &token[token.len() - 8..];
    let kubeconfig = home.join(format!("kubeconfig-{tag}"));
    std::fs::write(&kubeconfig, text).unwrap();
    let o = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new("kubectl")
            .args(args)
            .arg("--cache-dir")
            .arg(home.join(format!("cache-{tag}")))
            .env("HOME", home)
            .env("KUBECONFIG", &kubeconfig)
            .stdin(std::process::Stdio::null())
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

/// A kubeconfig for kubectl authenticating to `server` with bearer `token`: over TLS the
/// kubeconfig carries the server's CA and the token (as `mco up` writes it); against a
/// plain-HTTP server it points at a [`TokenProxy`] adding the token (returned: keep it alive).
pub fn kubeconfig_for(server: &mco::server::RunningServer, token: &str) -> (String, Option<TokenProxy>) {
    if server.url().starts_with("https://") {
        let ca = std::fs::read(mco::tls::Pki::in_data_dir(&server.data_dir).ca_cert()).expect("the server's CA");
        let kc = mco::up::kubeconfig_with_ca(&server.url(), Some(&ca));
        (mco::up::kubeconfig_with_token(&kc, token), None)
    } else {
        let proxy = TokenProxy::start(&server.url(), token);
        (mco::up::kubeconfig(&proxy.url), Some(proxy))
    }
}

/// A loopback HTTP proxy adding `Authorization: Bearer <token>` to every request it forwards
/// to `upstream` (streaming both ways, so watches pass), as `kubectl proxy` does. kubectl sends
/// a kubeconfig's credentials only over TLS (kubernetes/kubectl#744), so kubectl against a
/// plain-HTTP server authenticates through this. Stops when dropped.
pub struct TokenProxy {
    pub url: String,
    task: JoinHandle<()>,
}

impl Drop for TokenProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TokenProxy {
    /// Starts the proxy on 127.0.0.1:0 (inside a tokio runtime).
    pub fn start(upstream: &str, token: &str) -> TokenProxy {
        use axum::body::Body;
        use axum::http::header;
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", std_listener.local_addr().unwrap());
        let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
        let (http, upstream, token) = (reqwest::Client::new(), upstream.to_string(), token.to_string());
        let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
            let (http, upstream, token) = (http.clone(), upstream.clone(), token.clone());
            async move {
                let (parts, body) = req.into_parts();
                let path = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
                let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
                let mut rb = http
                    .request(parts.method.clone(), format!("{upstream}{path}"))
                    .body(bytes);
                for (k, v) in &parts.headers {
                    if ![header::HOST, header::AUTHORIZATION, header::CONTENT_LENGTH].contains(k) {
                        rb = rb.header(k, v);
                    }
                }
                match rb.bearer_auth(&token).send().await {
                    Ok(r) => {
                        let mut b = axum::http::Response::builder().status(r.status().as_u16());
                        for (k, v) in r.headers() {
                            if ![header::CONTENT_LENGTH, header::TRANSFER_ENCODING, header::CONNECTION].contains(k) {
                                b = b.header(k, v);
                            }
                        }
                        b.body(Body::from_stream(r.bytes_stream())).unwrap()
                    }
                    Err(e) => axum::http::Response::builder()
                        .status(502)
                        .body(Body::from(e.to_string()))
                        .unwrap(),
                }
            }
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        TokenProxy { url, task }
    }
}
