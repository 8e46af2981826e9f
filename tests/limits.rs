//! Request and object size limits, as Kubernetes applies them: every client sees a JSON
//! `Status` (`RequestEntityTooLarge`, 413), never a broken pipe, and nothing is appended.
//! Real server on 127.0.0.1:0.

use mco::model::DEFAULT_GROUP;
use mco::server::{self, RunningServer, ServerConfig};
use serde_json::{json, Value};

async fn start(dir: &std::path::Path, max_body: usize) -> RunningServer {
    server::start(ServerConfig {
        data_dir: dir.to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        max_request_body_bytes: max_body,
        ..Default::default()
    })
    .await
    .unwrap()
}

/// A MachineConfig whose JSON is about `bytes` long (one file of that much base64).
fn mc_of_size(name: &str, bytes: usize) -> Vec<u8> {
    let payload = "A".repeat(bytes / 4 * 4);
    serde_json::to_vec(&json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.4.0"},
            "storage": {"files": [{"path": "/etc/big", "contents": {"source": format!("data:;base64,{payload}")}}]}}}
    }))
    .unwrap()
}

fn collection(s: &RunningServer) -> String {
    format!("{}/apis/{DEFAULT_GROUP}/v1/machineconfigs", s.url())
}

async fn post(s: &RunningServer, body: reqwest::Body) -> (u16, Value) {
    let resp = s
        .admin_http()
        .post(collection(s))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("the client sees an answer, not a broken pipe");
    let code = resp.status().as_u16();
    (code, resp.json().await.expect("a JSON body"))
}

fn assert_too_large(code: u16, status: &Value, message: &str) {
    assert_eq!(code, 413, "{status}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "RequestEntityTooLarge");
    assert_eq!(status["code"], 413);
    let m = status["message"].as_str().unwrap();
    assert!(m.starts_with("Request entity too large: "), "{m}");
    assert!(m.contains(message), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_and_objects_over_the_limits_get_a_status() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), mco::api::DEFAULT_MAX_REQUEST_BODY_BYTES).await;
    assert_eq!(mco::api::DEFAULT_MAX_REQUEST_BODY_BYTES, 3_145_728);

    // Under both limits: created.
    let (code, obj) = post(&s, mc_of_size("ok-1400k", 1_400_000).into()).await;
    assert_eq!(code, 201, "{obj}");

    // Read whole (under 3 MiB), but too large to store (etcd's 1.5 MiB): a Status, nothing appended.
    for i in 0..5 {
        let (code, status) = post(&s, mc_of_size(&format!("big-{i}"), 2_800_000).into()).await;
        assert_too_large(code, &status, "the limit for a stored object is 1572864 bytes");
    }
    // Over the body limit, with a Content-Length and chunked: the client still gets the Status.
    for i in 0..5 {
        let (code, status) = post(&s, mc_of_size(&format!("huge-{i}"), 5_000_000).into()).await;
        assert_too_large(code, &status, "limit is 3145728");
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> = mc_of_size("chunked", 5_000_000)
            .chunks(64 * 1024)
            .map(|c| Ok(c.to_vec()))
            .collect();
        let stream = futures_util::stream::iter(chunks);
        let (code, status) = post(&s, reqwest::Body::wrap_stream(stream)).await;
        assert_too_large(code, &status, "limit is 3145728");
    }
    let refused = |n: &str| n.starts_with("big-") || n.starts_with("huge-") || n == "chunked";
    let logged = s
        .hub
        .store()
        .read_range(0, s.hub.published_seq())
        .filter(|e| refused(&e.as_ref().unwrap().name))
        .count();
    assert_eq!(logged, 0, "nothing was appended for the refused objects");
    s.stop().await;
}

#[tokio::test]
async fn the_body_limit_is_a_setting() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), 1000).await;
    let (code, status) = post(&s, mc_of_size("small", 2000).into()).await;
    assert_too_large(code, &status, "limit is 1000");
    let (code, _) = post(&s, mc_of_size("tiny", 100).into()).await;
    assert_eq!(code, 201);
    s.stop().await;
}
