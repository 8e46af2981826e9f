//! TLS end to end: a real server serving the PKI `mco up` / `mco server init` generate, the
//! stock kubectl verifying it through the kubeconfig (skipped, saying why, without kubectl),
//! daemons converging over TLS, a client refusing a server signed by another CA, the serving
//! certificate reloaded from disk for new connections, and the insecure-listen rule.

mod common;

use common::*;
use mco::client::Client;
use mco::server::{self, ServerConfig};
use mco::tls::{ensure_pki, Pki, Trust};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

fn have_kubectl(test: &str) -> bool {
    let ok = std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIPPED {test}: kubectl is not on PATH (install kubectl to run it)");
    }
    ok
}

/// A kubeconfig for `url` trusting `ca` (PEM) with `s`'s admin token as its user's, as `mco up`
/// writes it.
fn admin_kubeconfig(s: &server::RunningServer, url: &str, ca: &[u8]) -> String {
    mco::up::kubeconfig_with_token(
        &mco::up::kubeconfig_with_ca(url, Some(ca)),
        &s.admin_token().expect("the admin token"),
    )
}

/// Runs kubectl with `kubeconfig` (own HOME and cache); (success, stdout, stderr).
async fn kubectl(kubeconfig: &str, args: &[&str]) -> (bool, String, String) {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("kubeconfig");
    std::fs::write(&path, kubeconfig).unwrap();
    let o = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new("kubectl")
            .args(args)
            .arg("--cache-dir")
            .arg(home.path().join("cache"))
            .env("HOME", home.path())
            .env("KUBECONFIG", &path)
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("kubectl finished")
    .expect("kubectl runs");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_verifies_the_server_through_the_kubeconfig() {
    if !have_kubectl("kubectl_verifies_the_server_through_the_kubeconfig") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (s, pki) = tls_server(dir.path()).await;
    assert!(s.url().starts_with("https://"), "{}", s.url());
    let ca = std::fs::read(pki.ca_cert()).unwrap();
    let kc = admin_kubeconfig(&s, &s.url(), &ca);
    assert!(!kc.contains("insecure-skip-tls-verify"));
    let (ok, out, err) = kubectl(&kc, &["get", "mcp"]).await;
    assert!(ok, "kubectl get mcp over TLS failed:\n{out}\n{err}");
    assert!(out.starts_with("NAME "), "{out}");
    // The same kubeconfig without the token: kube-apiserver's 401, as kubectl words it.
    let (ok, _, err) = kubectl(&kc.replace(&s.admin_token().unwrap(), "mco_wrong"), &["get", "mcp"]).await;
    assert!(!ok);
    assert!(
        err.contains("Unauthorized") || err.contains("must be logged in"),
        "{err}"
    );
    // The same server named `localhost` verifies too (a SAN of the certificate).
    let by_name = s.url().replace("127.0.0.1", "localhost");
    let (ok, _, err) = kubectl(&admin_kubeconfig(&s, &by_name, &ca), &["get", "nodes"]).await;
    assert!(ok, "{err}");
    // Another CA: kubectl refuses the server.
    let other = tempfile::tempdir().unwrap();
    let other_pki = Pki::in_data_dir(other.path());
    ensure_pki(&other_pki, &[]).unwrap();
    let wrong = std::fs::read(other_pki.ca_cert()).unwrap();
    let (ok, _, err) = kubectl(&admin_kubeconfig(&s, &s.url(), &wrong), &["get", "mcp"]).await;
    assert!(!ok);
    assert!(err.contains("certificate signed by unknown authority"), "{err}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_refuses_a_server_signed_by_another_ca() {
    let dir = tempfile::tempdir().unwrap();
    let (s, pki) = tls_server(dir.path()).await;
    let good = Trust::from_file(&pki.ca_cert()).unwrap();
    Client::connect_with(&s.url(), "test", s.admin_token(), Some(&good))
        .await
        .expect("the server's own CA verifies it");
    let other = tempfile::tempdir().unwrap();
    let other_pki = Pki::in_data_dir(other.path());
    ensure_pki(&other_pki, &[]).unwrap();
    let wrong = Trust::from_file(&other_pki.ca_cert()).unwrap();
    for trust in [Some(&wrong), None] {
        let e = Client::connect_with(&s.url(), "test", s.admin_token(), trust)
            .await
            .unwrap_err();
        let m = e.to_string();
        assert!(m.contains("invalid peer certificate: UnknownIssuer"), "{m}");
    }
    // The CLI says what to do.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"))
        .args(["get", "mcp", "--server", &s.url(), "--certificate-authority"])
        .arg(other_pki.ca_cert())
        .env("MCO_TOKEN", s.admin_token().unwrap())
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("--certificate-authority or MCO_CA_FILE"), "{err}");
    // With the right CA (through MCO_CA_FILE, scheme-less address: https as client-go infers),
    // once the pools exist (the server creates them just after it starts).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut changes = s.hub.changes();
    while s.hub.state().pools.len() < 2 {
        assert!(std::time::Instant::now() < deadline, "no pools after 20 s");
        let _ = tokio::time::timeout(Duration::from_secs(1), changes.changed()).await;
    }
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"))
        .args(["get", "mcp", "--server", &s.addr.to_string()])
        .env("MCO_CA_FILE", pki.ca_cert())
        .env("MCO_TOKEN", s.admin_token().unwrap())
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("NAME "),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Plain HTTP to a TLS port gets no answer it could mistake for the API.
    let plain = s.url().replace("https://", "http://");
    assert!(Client::connect(&plain, "test").await.is_err());
    // The CLI says so.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"))
        .args(["get", "mcp", "--server", &plain])
        .env("MCO_TOKEN", s.admin_token().unwrap())
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(&format!("{plain} answers in TLS: give its https:// address")),
        "{err}"
    );
    s.stop().await;
}

/// The certificate a new TLS connection to `addr` is served, trusting `ca`.
async fn served_cert(addr: std::net::SocketAddr, ca: &Trust) -> Vec<u8> {
    let cfg = mco::tls::client_config(Some(ca)).unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(cfg));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let tls = connector.connect(name, tcp).await.expect("TLS handshake");
    tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

fn pem_der(path: &Path) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::from_pem_file(path).unwrap().to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_serving_certificate_is_reloaded_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let (s, pki) = tls_server(dir.path()).await;
    let ca = Trust::from_file(&pki.ca_cert()).unwrap();
    let first = pem_der(&pki.server_cert());
    assert_eq!(served_cert(s.addr, &ca).await, first);
    // An open connection keeps working across the swap.
    let client = Client::new_trusting(&s.url(), GROUP, "test", Some(&ca)).with_token(s.admin_token());
    let _: serde_json::Value = client.get_path("/version").await.unwrap();
    // Replace the files (a new SAN issues a new serving certificate from the same CA).
    ensure_pki(&pki, &["renewed.example.com".into()]).unwrap();
    let second = pem_der(&pki.server_cert());
    assert_ne!(first, second);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if served_cert(s.addr, &ca).await == second {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "new connections still get the old certificate after 10 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _: serde_json::Value = client.get_path("/version").await.unwrap();
    // A broken file does not take the server down: the last good certificate stays.
    std::fs::write(pki.server_key(), b"not a key").unwrap();
    tokio::time::sleep(mco::tls::RELOAD_INTERVAL * 2).await;
    assert_eq!(served_cert(s.addr, &ca).await, second);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemons_converge_over_tls() {
    let c = Cluster::start_tls(1, 1).await;
    assert!(c.server.url().starts_with("https://"));
    // A change rolls out through the daemons, which reach the server over TLS only.
    let old = c.pool("worker").spec.configuration.name;
    let mc = serde_json::json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": "99-worker-tls", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.4.0"},
                 "storage": {"files": [{"path": "/etc/tls-test", "mode": 420, "contents": {"source": "data:,over%20tls"}}]}}}
    });
    c.client
        .create(mco::model::Kind::MachineConfig, &mc, None)
        .await
        .unwrap();
    let keys = c.keys();
    c.wait_for("the worker updated over TLS", Duration::from_secs(60), |s| {
        let p = &s.pools["worker"];
        p.spec.configuration.name != old
            && s.nodes.get("worker-0").is_some_and(|n| {
                let a = mco::model::NodeAnnotations::read(n, &keys);
                a.state == "Done" && a.current_config == p.spec.configuration.name
            })
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(c.root("worker-0").join("etc/tls-test")).unwrap(),
        "over tls"
    );
}

#[tokio::test]
async fn a_non_loopback_listen_without_tls_is_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let e = server::start(ServerConfig {
        data_dir: dir.path().to_path_buf(),
        listen: "0.0.0.0:0".parse().unwrap(),
        ..Default::default()
    })
    .await
    .err()
    .expect("refused");
    let m = format!("{e:#}");
    assert!(m.contains("refusing to listen on 0.0.0.0:0 without TLS"), "{m}");
    assert!(m.contains("--allow-insecure-listen"), "{m}");
    assert!(!dir.path().join("store").exists(), "nothing created before the refusal");
    let s = server::start(ServerConfig {
        data_dir: dir.path().to_path_buf(),
        listen: "0.0.0.0:0".parse().unwrap(),
        allow_insecure_listen: true,
        ..Default::default()
    })
    .await
    .expect("allowed with the flag");
    s.stop().await;
    // With TLS it needs no flag.
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::in_data_dir(dir.path());
    ensure_pki(&pki, &[]).unwrap();
    let s = server::start(ServerConfig {
        data_dir: dir.path().to_path_buf(),
        listen: "0.0.0.0:0".parse().unwrap(),
        tls: Some(pki.serving()),
        ..Default::default()
    })
    .await
    .expect("TLS with authentication on");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_machine_config_server_serves_tls_and_stalled_handshakes_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::in_data_dir(dir.path());
    ensure_pki(&pki, &[]).unwrap();
    let s = server::start(ServerConfig {
        data_dir: dir.path().to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        mcs_listen: Some("127.0.0.1:0".parse().unwrap()),
        tls: Some(pki.serving()),
        connections: mco::api::listen::ConnLimits {
            header_read_timeout: Duration::from_secs(1),
            ..Default::default()
        },
        ..Default::default()
    })
    .await
    .expect("server starts");
    let mcs = s.mcs_url().expect("an MCS listener");
    assert!(mcs.starts_with("https://"), "{mcs}");
    // A new node's first boot: Ignition fetches its pool's config over TLS.
    // The admin's client, verifying the generated CA.
    let http = s.admin_http();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let resp = http.get(format!("{mcs}/config/worker")).send().await.unwrap();
        if resp.status() == 200 {
            let cfg: serde_json::Value = resp.json().await.unwrap();
            assert!(cfg["ignition"]["version"].is_string(), "{cfg}");
            break;
        }
        // The worker pool's first render is still being produced.
        assert!(tokio::time::Instant::now() < deadline, "no config: {}", resp.status());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A client that opens a TCP connection and never starts its handshake is closed after the
    // header-read timeout.
    use tokio::io::AsyncReadExt;
    let started = std::time::Instant::now();
    let mut stalled = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(10), stalled.read(&mut buf))
        .await
        .expect("the stalled handshake is closed")
        .unwrap_or(0);
    assert_eq!(n, 0);
    let closed = started.elapsed();
    assert!(
        closed >= Duration::from_secs(1) && closed < Duration::from_secs(4),
        "{closed:?}"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mco_server_init_then_mco_server_serves_https() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mco"))
        .args(["server", "init", "--tls-san", "mco.example.com", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("CA generated: "), "{text}");
    assert!(text.contains("mco.example.com"), "{text}");
    let pki = Pki::in_data_dir(dir.path());
    assert!(pki.has_serving());
    // Run again: everything kept.
    let again = std::process::Command::new(env!("CARGO_BIN_EXE_mco"))
        .args(["server", "init", "--tls-san", "mco.example.com", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&again.stdout).contains("serving certificate kept"));
    // `mco server` on that data dir serves TLS without a flag.
    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"))
        .args(["server", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(server.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("the server prints its URL")
        .unwrap()
        .unwrap_or_default();
    let url = line.strip_prefix("mco server listening on ").unwrap_or("").to_string();
    assert!(url.starts_with("https://127.0.0.1:"), "{line}");
    let trust = Trust::from_file(&pki.ca_cert()).unwrap();
    let token = mco::credentials::read_secret_file(&dir.path().join(mco::credentials::ADMIN_TOKEN_FILE));
    assert!(token.is_some(), "mco server writes <data-dir>/admin.token");
    Client::connect_with(&url, "test", token, Some(&trust))
        .await
        .expect("verified against the generated CA");
    let _ = server.kill().await;
}
