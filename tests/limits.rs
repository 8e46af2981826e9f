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

/// A server on 127.0.0.1:0 in `dir` holding its inputs to `limits`.
async fn start_with_limits(dir: &std::path::Path, limits: mco::limits::Limits) -> RunningServer {
    server::start(ServerConfig {
        data_dir: dir.to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        limits,
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

// ---- Bounded inputs (issue 12, item 5): every limit, the Status it gets, the field it names ----

/// A gzip stream inflating to `members` MiB of zeros: the same 1 MiB member repeated (a
/// multi-member stream, which Go's gzip reader, Ignition and flate2's `MultiGzDecoder` read
/// whole), so a 1 GiB bomb costs about 1 MB and no time to build.
fn gzip_bomb(members: usize) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(&vec![0u8; 1 << 20]).unwrap();
    e.finish().unwrap().repeat(members)
}

fn mc_with_file(name: &str, file: Value) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": [file]}}}
    })
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Sends `body` to `url` as `s`'s admin, declaring component `actor`: (status, JSON Status).
async fn send(
    s: &RunningServer,
    method: reqwest::Method,
    url: String,
    content_type: &str,
    actor: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let resp = s
        .admin_http()
        .request(method, url)
        .header("content-type", content_type)
        .header(mco::protocol::ACTOR_HEADER, actor)
        .body(body)
        .send()
        .await
        .expect("an answer");
    let code = resp.status().as_u16();
    (code, resp.json().await.expect("a JSON Status"))
}

/// Asserts a Kubernetes Status: code, reason, a message containing `message`, and for 422 a
/// cause at `field`.
fn assert_status(what: &str, got: &(u16, Value), code: u16, reason: &str, field: Option<&str>, message: &str) {
    let (c, s) = got;
    assert_eq!(
        (*c, s["kind"].as_str(), s["reason"].as_str(), s["code"].as_u64()),
        (code, Some("Status"), Some(reason), Some(code as u64)),
        "{what}: {s}"
    );
    let m = s["message"].as_str().unwrap_or("");
    assert!(m.contains(message), "{what}: want {message:?} in {m:?}");
    if let Some(f) = field {
        let causes = s["details"]["causes"].as_array().cloned().unwrap_or_default();
        assert!(
            causes
                .iter()
                .any(|c| c["field"] == f && c["message"].as_str().unwrap_or("").contains(message)),
            "{what}: want a cause at {f}: {s}"
        );
    }
}

/// Every bad input of the table against one server: each gets its Status (code, reason, the
/// limit named, the field for 422), and nothing is appended for any of them. The README's
/// "bad inputs tried" row counts this table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_each_get_their_status() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_with_limits(
        dir.path(),
        mco::limits::Limits {
            max_documents: 3,
            ..Default::default()
        },
    )
    .await;
    let mcs = collection(&s);
    let file_field = "spec.config.storage.files[0].contents.source";
    let post = |body: Vec<u8>, ct: &'static str| send(&s, reqwest::Method::POST, mcs.clone(), ct, "tester", body);
    let mut tried = 0;

    // 1. A gzip bomb: 1 GiB of zeros in a 1.4 MB request (the issue's report), refused at
    // admission after inflating at most the 16 MiB limit.
    let bomb = gzip_bomb(1024);
    let body = mc_with_file(
        "bomb",
        json!({"path": "/etc/bomb", "contents": {
        "compression": "gzip", "source": format!("data:;base64,{}", b64(&bomb))}}),
    );
    let body = serde_json::to_vec(&body).unwrap();
    assert!(body.len() < 1_500_000, "{}", body.len());
    let t = std::time::Instant::now();
    let got = post(body, "application/json").await;
    assert_status(
        "gzip bomb",
        &got,
        422,
        "Invalid",
        Some(file_field),
        "Too long: may not be more than 16777216 bytes once decompressed",
    );
    assert!(
        t.elapsed() < std::time::Duration::from_secs(10),
        "refused quickly: {:?}",
        t.elapsed()
    );
    tried += 1;

    // 2. Remote sources, every scheme Ignition fetches: refused, naming the field.
    for src in [
        "http://example.com/a",
        "https://example.com/a",
        "s3://bucket/key",
        "gs://bucket/key",
        "tftp://host/a",
        "arn:aws:s3:::bucket/key",
    ] {
        let body = serde_json::to_vec(&mc_with_file(
            "remote",
            json!({"path": "/etc/r", "contents": {"source": src}}),
        ))
        .unwrap();
        let got = post(body, "application/json").await;
        assert_status(
            src,
            &got,
            422,
            "Invalid",
            Some(file_field),
            "mco serves only embedded data (data: URLs); mco does not fetch remote content",
        );
        tried += 1;
    }

    // 3. JSON nesting: 101 levels, and a million.
    for depth in [101usize, 1_000_000] {
        let body = format!(
            "{{\"kind\":\"MachineConfig\",\"x\":{}{}}}",
            "[".repeat(depth - 1),
            "]".repeat(depth - 1)
        );
        let got = post(body.into_bytes(), "application/json").await;
        assert_status(
            "deep JSON",
            &got,
            400,
            "BadRequest",
            None,
            "the JSON nests deeper than the limit of 100 levels",
        );
        tried += 1;
    }

    // 4. Billion laughs in a YAML body: refused at once, not expanded.
    let mut laughs = String::from("apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: lol}\na0: &a0 [lol,lol,lol,lol,lol,lol,lol,lol,lol,lol]\n");
    for i in 1..10 {
        let p = i - 1;
        laughs.push_str(&format!(
            "a{i}: &a{i} [*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p}]\n"
        ));
    }
    let t = std::time::Instant::now();
    let got = post(laughs.into_bytes(), "application/yaml").await;
    assert_status(
        "billion laughs",
        &got,
        400,
        "BadRequest",
        None,
        "the request body is not valid YAML",
    );
    assert!(
        got.1["message"].as_str().unwrap().to_lowercase().contains("alias"),
        "{}",
        got.1
    );
    assert!(t.elapsed() < std::time::Duration::from_secs(5), "{:?}", t.elapsed());
    tried += 1;

    // 5. A JSON patch of 10,001 operations (kube-apiserver's limit is 10,000).
    let small = serde_json::to_vec(&mc_with_file(
        "patched",
        json!({"path": "/etc/p", "contents": {"source": "data:,x"}}),
    ))
    .unwrap();
    assert_eq!(post(small, "application/json").await.0, 201);
    let ops: Vec<Value> = (0..10_001)
        .map(|_| json!({"op": "test", "path": "/kind", "value": "MachineConfig"}))
        .collect();
    let got = send(
        &s,
        reqwest::Method::PATCH,
        format!("{mcs}/patched"),
        "application/json-patch+json",
        "tester",
        serde_json::to_vec(&ops).unwrap(),
    )
    .await;
    assert_status(
        "JSON patch ops",
        &got,
        413,
        "RequestEntityTooLarge",
        None,
        "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001",
    );
    tried += 1;

    // 6. More objects in one preview than max_documents (3 here).
    let objs: Vec<Value> = (0..4)
        .map(|i| mc_with_file(&format!("p{i}"), json!({"path": "/etc/p"})))
        .collect();
    let got = send(
        &s,
        reqwest::Method::POST,
        format!("{}/apis/history.mco.dev/v1/previews", s.url()),
        "application/json",
        "tester",
        serde_json::to_vec(&json!({"apply": objs})).unwrap(),
    )
    .await;
    assert_status(
        "documents",
        &got,
        413,
        "RequestEntityTooLarge",
        None,
        "4 objects in one request, the limit is 3 per apply (--max-documents)",
    );
    tried += 1;

    // 7. A file whose decoded contents are over the limit (a 17 MiB plain file does not fit the
    // body limit; the setting is tried in `the_file_limit_is_a_setting`), and a multi-member
    // gzip just over it.
    let over = gzip_bomb(17);
    let body = serde_json::to_vec(&mc_with_file(
        "over",
        json!({"path": "/etc/o", "contents": {
        "compression": "gzip", "source": format!("data:;base64,{}", b64(&over))}}),
    ))
    .unwrap();
    let got = post(body, "application/json").await;
    assert_status(
        "17 MiB gzip",
        &got,
        422,
        "Invalid",
        Some(file_field),
        "may not be more than 16777216 bytes",
    );
    tried += 1;

    let refused = ["bomb", "remote", "lol", "over", "p0", "p1", "p2", "p3"];
    let logged = s
        .hub
        .store()
        .read_range(0, s.hub.published_seq())
        .filter(|e| refused.contains(&e.as_ref().unwrap().name.as_str()))
        .count();
    assert_eq!(logged, 0, "nothing appended for a refused input");
    assert_eq!(tried, 13, "README: bad inputs tried");
    s.stop().await;
}

#[tokio::test]
async fn the_file_limit_is_a_setting() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_with_limits(
        dir.path(),
        mco::limits::Limits {
            max_file_bytes: 1000,
            ..Default::default()
        },
    )
    .await;
    let field = "spec.config.storage.files[0].contents.source";
    let plain = |n: usize| {
        mc_with_file(
            "f",
            json!({"path": "/etc/f", "contents": {"source": format!("data:;base64,{}", b64(&vec![b'a'; n]))}}),
        )
    };
    let got = send(
        &s,
        reqwest::Method::POST,
        collection(&s),
        "application/json",
        "t",
        serde_json::to_vec(&plain(1001)).unwrap(),
    )
    .await;
    assert_status(
        "decoded",
        &got,
        422,
        "Invalid",
        Some(field),
        "Too long: may not be more than 1000 bytes once decoded",
    );
    let got = send(
        &s,
        reqwest::Method::POST,
        collection(&s),
        "application/json",
        "t",
        serde_json::to_vec(&plain(1000)).unwrap(),
    )
    .await;
    assert_eq!(got.0, 201, "{}", got.1);
    s.stop().await;
}

/// The daemon decodes with the same cap: whatever a server admitted, a node never writes more
/// than the limit (`file_contents` is what the daemon's write path calls).
#[test]
fn the_node_never_decodes_more_than_the_limit() {
    let bomb = gzip_bomb(64);
    let file: mco::ignition::File = serde_json::from_value(json!({"path": "/etc/bomb", "contents": {
        "compression": "gzip", "source": format!("data:;base64,{}", b64(&bomb))}}))
    .unwrap();
    let err = mco::ignition::file_contents_with(&file, 1 << 20).unwrap_err();
    assert!(
        err.starts_with("Too long: may not be more than 1048576 bytes once decompressed"),
        "{err}"
    );
    let err = mco::ignition::file_contents(&file).unwrap_err();
    assert!(err.contains("may not be more than 16777216 bytes"), "{err}");
}

/// Watches per client: the third watch of one identity gets 429 TooManyRequests; another
/// identity is not affected; closing a watch frees its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_per_client_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_with_limits(
        dir.path(),
        mco::limits::Limits {
            max_watches_per_client: 2,
            ..Default::default()
        },
    )
    .await;
    let url = format!("{}?watch=true", collection(&s));
    // The client is the authenticated identity, not the component a request declares: the
    // admin's watches count together whatever their x-mco-actor, a reader's separately.
    let admin = s.admin_token().unwrap();
    let (record, reader) = mco::api::auth::new_token(mco::auth::TokenKind::Reader, None, None).unwrap();
    mco::api::auth::issue(&s.hub, &record, &mco::command::Actor::new("test"))
        .await
        .unwrap();
    let open = |token: String, actor: &'static str| {
        let url = url.clone();
        async move {
            reqwest::Client::new()
                .get(url)
                .bearer_auth(token)
                .header(mco::protocol::ACTOR_HEADER, actor)
                .send()
                .await
                .unwrap()
        }
    };
    let w1 = open(admin.clone(), "watcher").await;
    let w2 = open(admin.clone(), "another-component").await;
    assert_eq!((w1.status().as_u16(), w2.status().as_u16()), (200, 200));
    let third = open(admin.clone(), "a-third-component").await;
    let code = third.status().as_u16();
    let status: Value = third.json().await.unwrap();
    assert_status("third watch", &(code, status.clone()), 429, "TooManyRequests", None,
        "Too many requests: client \"admin\" already has 2 open watches, the limit is 2 per client (--max-watches-per-client)");
    assert_eq!(status["details"]["retryAfterSeconds"], 1);
    // Every watch counts, the history's too.
    let history = reqwest::Client::new()
        .get(format!("{}/apis/history.mco.dev/v1/events?watch=true", s.url()))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(history.status().as_u16(), 429);
    let other = open(reader, "watcher").await;
    assert_eq!(other.status().as_u16(), 200);
    drop(w1);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let r = open(admin.clone(), "watcher").await;
        if r.status().as_u16() == 200 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "a closed watch frees its place");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    drop((w2, other));
    s.stop().await;
}

/// The worker pool's first rendered config, once it has one (before `deadline`).
async fn worker_first_render(s: &RunningServer, deadline: std::time::Instant) -> String {
    loop {
        if let Some(p) = s.hub.state().pools.get("worker") {
            if !p.spec.configuration.name.is_empty() {
                return p.spec.configuration.name.clone();
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the worker pool gets a first render"
        );
        let mut ch = s.hub.changes();
        let _ = tokio::time::timeout(std::time::Duration::from_millis(200), ch.changed()).await;
    }
}

/// The worker pool's RenderDegraded message, once it is True (before `deadline`).
async fn worker_render_degraded(s: &RunningServer, deadline: std::time::Instant) -> String {
    loop {
        if let Some(p) = s.hub.state().pools.get("worker") {
            if p.condition_status("RenderDegraded") == "True" {
                return p.condition("RenderDegraded").unwrap().message.clone();
            }
        }
        assert!(std::time::Instant::now() < deadline, "the pool goes RenderDegraded");
        let mut ch = s.hub.changes();
        let _ = tokio::time::timeout(std::time::Duration::from_millis(200), ch.changed()).await;
    }
}

/// A rendered config over the limit: the pool goes RenderDegraded naming it, and keeps pointing
/// at its previous rendered config (no node is ever told to apply the oversized one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rendered_config_over_the_limit_degrades_the_pool() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_with_limits(
        dir.path(),
        mco::limits::Limits {
            max_rendered_bytes: 200_000,
            ..Default::default()
        },
    )
    .await;
    let worker = |st: &mco::state::State| st.pools.get("worker").cloned();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let before = worker_first_render(&s, deadline).await;
    // 250 kB of file contents: each MachineConfig is fine, the rendered config is not.
    let big = mc_with_file(
        "99-big",
        json!({"path": "/etc/big", "contents": {"source": format!("data:;base64,{}", b64(&vec![b'x'; 190_000]))}}),
    );
    let got = send(
        &s,
        reqwest::Method::POST,
        collection(&s),
        "application/json",
        "t",
        serde_json::to_vec(&big).unwrap(),
    )
    .await;
    assert_eq!(got.0, 201, "{}", got.1);
    let message = worker_render_degraded(&s, deadline).await;
    assert!(message.starts_with("Failed to render configuration for pool worker: could not generate rendered MachineConfig: rendered MachineConfig rendered-worker-"), "{message}");
    assert!(
        message.contains("is too large:")
            && message.ends_with("bytes, the limit is 200000 bytes (--max-rendered-bytes)"),
        "{message}"
    );
    let p = worker(&s.hub.state()).unwrap();
    assert_eq!(
        p.spec.configuration.name, before,
        "the pool still points at its previous render"
    );
    assert!(
        !s.hub
            .state()
            .machine_configs
            .keys()
            .any(|n| n.starts_with("rendered-worker-")
                && *n != before
                && s.hub.state().machine_configs[n]
                    .spec
                    .config
                    .as_ref()
                    .is_some_and(|c| c.to_string().contains("/etc/big"))),
        "the oversized rendered config was never stored"
    );
    s.stop().await;
}

/// `mco apply -f` refuses more objects than the limit before sending anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_refuses_too_many_documents() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), mco::api::DEFAULT_MAX_REQUEST_BODY_BYTES).await;
    let n = mco::limits::DEFAULT_MAX_DOCUMENTS + 1;
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&format!(
            "---\napiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: m{i}\n"
        ));
    }
    let path = dir.path().join("many.yaml");
    std::fs::write(&path, text).unwrap();
    let client = s.admin_client("test");
    let (out, ok) = mco::cli::apply(&client, &[path]).await.unwrap();
    assert!(!ok);
    assert_eq!(out, format!("error: the files hold {n} objects (documents and List items), the limit is 1000 per apply: apply them in smaller sets\n"));
    assert!(!s.hub.state().machine_configs.contains_key("m0"), "nothing sent");
    s.stop().await;
}

/// YAML nested as deep as the depth budget allows, or far deeper, is parsed or refused with a
/// Status naming the limit, never by overflowing a worker's stack (which aborted the server:
/// every identity that may write, a node's own server-side apply included, could send it):
/// flow mappings at 5,000 levels and at 96.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_yaml_is_refused_or_parsed_and_the_server_lives() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), mco::api::DEFAULT_MAX_REQUEST_BODY_BYTES).await;
    let nested = |depth: usize| {
        let mut v = String::from("1");
        for _ in 0..depth {
            v = format!("{{a: {v}}}");
        }
        v
    };
    let mc = format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: deep\n  annotations:\n    x: {}\nspec: {{}}\n",
        nested(5000)
    );
    let got = send(
        &s,
        reqwest::Method::POST,
        collection(&s),
        "application/yaml",
        "t",
        mc.into_bytes(),
    )
    .await;
    assert_status(
        "5,000 levels of YAML",
        &got,
        400,
        "BadRequest",
        None,
        "the YAML nests deeper than the limit of 100 levels (--max-json-depth)",
    );
    // 96 levels under an annotation: within the budget, so it is parsed (on a stack that fits
    // it) and refused for what it is (an annotation is a string).
    let mc = format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: deep\n  annotations:\n    x: {}\nspec: {{}}\n",
        nested(96)
    );
    let got = send(
        &s,
        reqwest::Method::POST,
        collection(&s),
        "application/yaml",
        "t",
        mc.into_bytes(),
    )
    .await;
    assert_status(
        "96 levels of YAML",
        &got,
        422,
        "Invalid",
        None,
        "metadata.annotations.x: invalid type: map, expected a string",
    );
    let health = reqwest::get(format!("{}/healthz", s.url())).await.unwrap();
    assert_eq!(health.status().as_u16(), 200);
    s.stop().await;
}

/// The request line (URL included) and headers are held to `--max-header-bytes` with a Status
/// naming it; beyond the connection's buffer the HTTP layer answers a bare 431.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_headers_and_urls_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_with_limits(
        dir.path(),
        mco::limits::Limits {
            max_header_bytes: 4096,
            ..Default::default()
        },
    )
    .await;
    let http = s.admin_http();
    // Within the limit: answered as usual.
    let ok = http
        .get(collection(&s))
        .header("x-pad", "p".repeat(1000))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status().as_u16(), 200);
    // A header over it, and a URL over it: 431 with a Status naming the setting.
    for (what, req) in [
        (
            "a long header",
            http.get(collection(&s)).header("x-pad", "p".repeat(5000)),
        ),
        (
            "a long URL",
            http.get(format!("{}?labelSelector=a%3D{}", collection(&s), "b".repeat(5000))),
        ),
    ] {
        let resp = req.send().await.unwrap();
        let code = resp.status().as_u16();
        let status: Value = resp.json().await.unwrap();
        assert_status(
            what,
            &(code, status),
            431,
            "RequestHeaderFieldsTooLarge",
            None,
            "bytes, the limit is 4096 (--max-header-bytes)",
        );
    }
    // Far beyond the connection's read buffer (limit + 64 KiB): the HTTP layer's own 431.
    let resp = http
        .get(collection(&s))
        .header("x-pad", "p".repeat(200 * 1024))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 431);
    assert!(
        http.get(collection(&s)).send().await.unwrap().status().is_success(),
        "the server still answers"
    );
    s.stop().await;
}

/// `n` MiB of zeros, gzipped once (a real single-member stream, built in memory).
fn gzip_zeros_mib(n: usize) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let mib = vec![0u8; 1 << 20];
    for _ in 0..n {
        e.write_all(&mib).unwrap();
    }
    e.finish().unwrap()
}

/// A MachineConfig for the worker pool with `files` gzip files of `gz` each.
fn mc_with_gzip_files(name: &str, files: usize, gz: &[u8]) -> Value {
    let source = format!("data:;base64,{}", b64(gz));
    let files: Vec<Value> = (0..files)
        .map(|i| json!({"path": format!("/etc/{name}/f{i}"), "contents": {"source": source, "compression": "gzip"}}))
        .collect();
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": files}}}
    })
}

/// Issue 23 item 7: 60 gzip files of 15 MiB of zeros each (each under the 16 MiB per-file
/// limit; about 900 MiB on every node) in one MachineConfig: refused at admission with a 422
/// naming the per-object limit of all files' contents, and nothing is appended. At the default
/// limits, and the limit is a setting (`--max-object-contents-bytes`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_files_of_one_machine_config_are_bounded_together() {
    let gz = gzip_zeros_mib(15);
    let dir = tempfile::tempdir().unwrap();
    let s = start_with_limits(dir.path(), mco::limits::Limits::default()).await;
    let body = serde_json::to_vec(&mc_with_gzip_files("99-many", 60, &gz)).unwrap();
    let got = send(&s, reqwest::Method::POST, collection(&s), "application/json", "t", body).await;
    let limit = mco::limits::DEFAULT_MAX_OBJECT_CONTENTS_BYTES;
    assert_status(
        "60 x 15 MiB",
        &got,
        422,
        "Invalid",
        Some("spec.config.storage.files"),
        &format!("may not add up to more than {limit} bytes once decoded and decompressed (the limit of all files' contents per MachineConfig, --max-object-contents-bytes)"),
    );
    assert!(
        !s.hub.state().machine_configs.contains_key("99-many"),
        "nothing was stored"
    );
    // Four such files (60 MiB) fit the default.
    let body = serde_json::to_vec(&mc_with_gzip_files("99-four", 4, &gz)).unwrap();
    let got = send(&s, reqwest::Method::POST, collection(&s), "application/json", "t", body).await;
    assert_eq!(got.0, 201, "{}", got.1);
    s.stop().await;
}

/// Two MachineConfigs each under the per-object limit whose rendered config is over the
/// per-render limit of all files' contents: each is admitted, the render is refused, the pool
/// goes RenderDegraded naming the limit, and keeps its previous rendered config.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_files_of_a_rendered_config_are_bounded_together() {
    let gz = gzip_zeros_mib(15);
    let dir = tempfile::tempdir().unwrap();
    let limits = mco::limits::Limits {
        max_object_contents_bytes: 32 << 20,
        max_rendered_contents_bytes: 48 << 20,
        ..Default::default()
    };
    let s = start_with_limits(dir.path(), limits).await;
    let worker = |st: &mco::state::State| st.pools.get("worker").cloned();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let before = worker_first_render(&s, deadline).await;
    // 30 MiB each: under 32 MiB; together 60 MiB: over 48 MiB.
    for name in ["99-a", "99-b"] {
        let body = serde_json::to_vec(&mc_with_gzip_files(name, 2, &gz)).unwrap();
        let got = send(&s, reqwest::Method::POST, collection(&s), "application/json", "t", body).await;
        assert_eq!(got.0, 201, "{name}: {}", got.1);
    }
    let message = worker_render_degraded(&s, deadline).await;
    assert!(
        message
            .starts_with("Failed to render configuration for pool worker: could not generate rendered MachineConfig: "),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "may not add up to more than {} bytes once decoded and decompressed (the limit of all files' contents per rendered config, --max-rendered-contents-bytes)",
            48 << 20
        )),
        "{message}"
    );
    let p = worker(&s.hub.state()).unwrap();
    assert_eq!(
        p.spec.configuration.name, before,
        "the pool still points at its previous render"
    );
    s.stop().await;
}
