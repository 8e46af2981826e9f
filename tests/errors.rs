//! Errors Kubernetes clients expect, over a real server on 127.0.0.1:0: a resourceVersion from
//! the future, duplicated JSON keys under strict decoding, media types, percent-encoded names.

use mco::model::DEFAULT_GROUP;
use mco::server::{self, RunningServer, ServerConfig};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

async fn start(dir: &std::path::Path) -> RunningServer {
    server::start(ServerConfig {
        data_dir: dir.to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    })
    .await
    .unwrap()
}

async fn get(s: &RunningServer, url: String) -> (u16, Value) {
    let resp = s.admin_http().get(url).send().await.unwrap();
    let code = resp.status().as_u16();
    (code, resp.json().await.unwrap_or(Value::Null))
}

fn pools(s: &RunningServer) -> String {
    format!("{}/apis/{DEFAULT_GROUP}/v1/machineconfigpools", s.url())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_version_newer_than_the_log_is_too_large() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path()).await;
    let future = s.hub.published_seq() + 1_000_000;
    for url in [
        format!("{}?watch=true&resourceVersion={future}", pools(&s)),
        format!("{}?resourceVersion={future}", pools(&s)),
        format!("{}/worker?resourceVersion={future}", pools(&s)),
    ] {
        let started = Instant::now();
        let (code, status) = tokio::time::timeout(Duration::from_secs(20), get(&s, url.clone()))
            .await
            .expect("answered, not a silent hang");
        assert_eq!(code, 504, "{url}: {status}");
        assert_eq!(status["reason"], "Timeout");
        let message = status["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("Timeout: Too large resource version: {future}, current: ")),
            "{message}"
        );
        assert_eq!(status["details"]["causes"][0]["reason"], "ResourceVersionTooLarge");
        assert_eq!(status["details"]["retryAfterSeconds"], 1);
        // The API server waits for the version to appear before giving up (3 s).
        assert!(started.elapsed() >= Duration::from_secs(3));
    }
    // A version the log has is served at once.
    let now = s.hub.published_seq();
    let (code, _) = get(&s, format!("{}?resourceVersion={now}", pools(&s))).await;
    assert_eq!(code, 200);
    let (code, status) = get(&s, format!("{}?resourceVersion=abc", pools(&s))).await;
    assert_eq!((code, status["reason"].as_str()), (400, Some("BadRequest")));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicated_keys_are_named_under_strict_decoding() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path()).await;
    let url = format!("{}/apis/{DEFAULT_GROUP}/v1/machineconfigs", s.url());
    let body = r#"{"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": "dup", "name": "dup2", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"kernelArguments": ["a"], "kernelArguments": ["b"]}}"#;
    let post = |validation: &str| {
        s.admin_http()
            .post(format!("{url}?fieldValidation={validation}"))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let resp = post("Strict").await.unwrap();
    assert_eq!(resp.status(), 400);
    let status: Value = resp.json().await.unwrap();
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains(
            r#"strict decoding error: duplicate field "metadata.name", duplicate field "spec.kernelArguments""#
        ),
        "{message}"
    );
    assert!(!s.hub.state().machine_configs.contains_key("dup2"));

    // Warn (Kubernetes' default without kubectl): accepted, last value wins, with warnings.
    let resp = post("Warn").await.unwrap();
    assert_eq!(resp.status(), 201);
    let warnings: Vec<String> = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(r#"duplicate field \"metadata.name\""#)),
        "{warnings:?}"
    );
    let created: Value = resp.json().await.unwrap();
    assert_eq!(created["metadata"]["name"], "dup2");
    assert_eq!(created["spec"]["kernelArguments"], json!(["b"]));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_types_and_encoded_names() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path()).await;
    let resp = s
        .admin_http()
        .post(pools(&s))
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 415);
    let status: Value = resp.json().await.unwrap();
    assert_eq!(status["reason"], "UnsupportedMediaType");

    // Names in paths are percent-decoded: %77orker is worker (once the built-in pool exists).
    let mut changes = s.hub.changes();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !s.hub.state().pools.contains_key("worker") {
        tokio::time::timeout_at(deadline, changes.changed())
            .await
            .expect("the built-in pools are created")
            .unwrap();
    }
    let (code, pool) = get(&s, format!("{}/%77orker", pools(&s))).await;
    assert_eq!(code, 200, "{pool}");
    assert_eq!(pool["metadata"]["name"], "worker");
    let (code, status) = get(&s, format!("{}/no%20such", pools(&s))).await;
    assert_eq!(code, 404);
    assert!(
        status["message"].as_str().unwrap().contains("\"no such\" not found"),
        "{status}"
    );
    s.stop().await;
}

/// Every route answers a method it does not take with a Kubernetes Status (405
/// `MethodNotAllowed`, as kube-apiserver) and an `Allow` header naming the methods it takes, never
/// an empty body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_405_is_a_status_with_the_allowed_methods() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path()).await;
    let h = "/apis/history.mco.dev/v1";
    for (method, path, allow) in [
        ("GET", format!("{h}/store/compactions"), "POST"),
        ("GET", format!("{h}/previews"), "POST"),
        ("GET", format!("{h}/rollbacks"), "POST"),
        ("POST", format!("{h}/store/stats"), "GET,HEAD"),
        ("DELETE", format!("{h}/events"), "GET,HEAD"),
        ("PUT", "/apis/auth.mco.dev/v1/tokens".to_string(), "GET,HEAD,POST"),
        ("POST", "/version".to_string(), "GET,HEAD"),
        ("POST", "/metrics".to_string(), "GET,HEAD"),
    ] {
        let resp = s
            .admin_http()
            .request(method.parse().unwrap(), format!("{}{path}", s.url()))
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 405, "{method} {path}");
        let allowed = resp
            .headers()
            .get("allow")
            .map(|v| v.to_str().unwrap().replace(' ', ""));
        assert_eq!(allowed.as_deref(), Some(allow), "{method} {path}");
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        assert_eq!(
            (body["kind"].as_str(), body["reason"].as_str(), body["code"].as_u64()),
            (Some("Status"), Some("MethodNotAllowed"), Some(405)),
            "{method} {path}: {body}"
        );
        assert_eq!(
            body["message"],
            "the server does not allow this method on the requested resource"
        );
    }
    s.stop().await;
}

/// Counts the ERROR events of the thread's tracing subscriber.
struct ErrorEvents(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for ErrorEvents {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if *event.metadata().level() == tracing::Level::ERROR {
            let mut fields = String::new();
            struct Fields<'a>(&'a mut String);
            impl tracing::field::Visit for Fields<'_> {
                fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                    self.0.push_str(&format!("{}={v:?} ", f.name()));
                }
            }
            event.record(&mut Fields(&mut fields));
            self.0.lock().unwrap().push(fields);
        }
    }
}

/// A resourceVersion newer than the log is the client's mistake: answered 504 as
/// kube-apiserver does, and not logged as a server ERROR. The runtime is single-threaded so
/// the thread's subscriber sees every request's events.
#[tokio::test(flavor = "current_thread")]
async fn a_too_large_resource_version_is_not_a_server_error_in_the_log() {
    use tracing_subscriber::layer::SubscriberExt;
    let errors = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let subscriber = tracing_subscriber::registry().with(ErrorEvents(errors.clone()));
    let _guard = tracing::subscriber::set_default(subscriber);
    tracing::error!(probe = true, "the layer sees ERROR events");
    assert_eq!(errors.lock().unwrap().len(), 1, "the probe is captured");
    errors.lock().unwrap().clear();
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path()).await;
    let future = s.hub.published_seq() + 1_000_000;
    let (code, status) = get(&s, format!("{}/worker?resourceVersion={future}", pools(&s))).await;
    assert_eq!((code, status["reason"].as_str()), (504, Some("Timeout")));
    // A request after it: the first one's response (and its log) is complete.
    let (code, _) = get(&s, format!("{}/worker", pools(&s))).await;
    assert_eq!(code, 200);
    assert_eq!(*errors.lock().unwrap(), Vec::<String>::new(), "no ERROR logged");
    s.stop().await;
}
