//! Authentication and authorization over a real server on 127.0.0.1:0: kube-apiserver's 401 and
//! 403 Status bodies, reader / admin / node / bootstrap tokens, NodeRestriction with real
//! daemons holding node tokens, the event actor taken from the token (never from a header),
//! `mco token create|list|revoke`, and the stock kubectl with a token in its kubeconfig
//! (`kubectl auth can-i`, `kubectl auth whoami`; skipped, saying so, without kubectl).

mod common;

use common::*;
use mco::client::Client;
use mco::model::Kind;
use mco::server::RunningServer;
use serde_json::{json, Value};
use std::process::Stdio;
use std::time::Duration;

/// kube-apiserver's answer to a request without valid credentials, byte for byte as JSON.
fn unauthorized() -> Value {
    json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401})
}

async fn start(dir: &std::path::Path) -> RunningServer {
    start_server(dir).await
}

/// GET `path` with `token` (none: no Authorization header): (status, JSON body or Null).
async fn get(s: &RunningServer, path: &str, token: Option<&str>) -> (u16, Value) {
    let mut r = reqwest::Client::new().get(format!("{}{path}", s.url()));
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    let resp = r.send().await.unwrap();
    let code = resp.status().as_u16();
    (code, resp.json().await.unwrap_or(Value::Null))
}

/// Sends `method path` with a JSON body as `token`: (status, JSON body).
async fn send(
    s: &RunningServer,
    method: reqwest::Method,
    path: &str,
    token: &str,
    ct: &str,
    body: Value,
) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .request(method, format!("{}{path}", s.url()))
        .bearer_auth(token)
        .header("content-type", ct)
        .header("x-mco-actor", "controller:render")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let code = resp.status().as_u16();
    (code, resp.json().await.unwrap_or(Value::Null))
}

/// Issues a token through the API as the admin: (id, secret).
async fn issue(admin: &Client, kind: &str, node: Option<&str>, name: Option<&str>) -> (String, String) {
    let mut spec = json!({"kind": kind});
    if let Some(n) = node {
        spec["node"] = json!(n);
    }
    if let Some(n) = name {
        spec["identity"] = json!(n);
    }
    let t: Value = admin
        .post_path("/apis/auth.mco.dev/v1/tokens", &json!({"spec": spec}))
        .await
        .unwrap();
    (
        t["metadata"]["name"].as_str().unwrap().to_string(),
        t["status"]["token"].as_str().unwrap().to_string(),
    )
}

fn mc(name: &str) -> Value {
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.4.0"},
            "storage": {"files": [{"path": "/etc/auth-test", "mode": 420, "contents": {"source": "data:,hello"}}]}}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_bad_and_revoked_tokens_get_kubernetes_401() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path()).await;
    // The first admin token is in <data-dir>/admin.token, owner-only.
    let admin_file = dir.path().join(mco::credentials::ADMIN_TOKEN_FILE);
    assert_eq!(mode_of(&admin_file), 0o600);
    let admin = s.admin_client("test");

    for path in [
        "/api/v1/nodes",
        "/apis",
        "/api",
        "/metrics",
        "/config/worker",
        "/openapi/v3",
        "/apis/history.mco.dev/v1/events",
        "/apis/auth.mco.dev/v1/tokens",
        "/no/such/path",
    ] {
        assert_eq!(
            get(&s, path, None).await,
            (401, unauthorized()),
            "{path} without a token"
        );
        assert_eq!(
            get(&s, path, Some("mco_not-a-token")).await,
            (401, unauthorized()),
            "{path} with a bad token"
        );
    }
    // Health, version and the dashboard's static files are public, as in Kubernetes.
    for path in ["/healthz", "/readyz", "/livez", "/version", "/ui/", "/ui/app.js"] {
        let r = reqwest::get(format!("{}{path}", s.url())).await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
    }

    let (id, reader) = issue(&admin, "reader", None, None).await;
    assert_eq!(get(&s, "/api/v1/nodes", Some(&reader)).await.0, 200);
    // The log keeps the hash only: neither the state, the history nor the token API has the
    // secret, and the history has no hash either.
    let record = s.hub.state().tokens[&id].clone();
    assert_eq!(record.hash, mco::auth::hash(&reader));
    assert_eq!(
        (record.identity.as_str(), record.kind),
        ("reader", mco::auth::TokenKind::Reader)
    );
    let store_bytes: Vec<u8> = s.hub.store().read_after(0).flat_map(|e| e.unwrap().body).collect();
    assert!(
        !String::from_utf8_lossy(&store_bytes).contains(&reader),
        "the secret is never logged"
    );
    let (_, hist) = get(
        &s,
        "/apis/history.mco.dev/v1/events?fieldSelector=type=TokenIssued&includeObject=true",
        Some(&reader),
    )
    .await;
    let issued: Vec<&Value> = hist["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["object"]["name"] == json!(id))
        .collect();
    assert_eq!(issued.len(), 1, "{hist}");
    assert_eq!(issued[0]["actor"], "admin");
    assert!(!issued[0].to_string().contains(&record.hash), "{}", issued[0]);
    let (_, listed) = get(&s, "/apis/auth.mco.dev/v1/tokens", Some(&s.admin_token().unwrap())).await;
    assert!(
        !listed.to_string().contains(&record.hash) && listed.to_string().contains(&id),
        "{listed}"
    );

    // Revocation takes effect on the next request, and ends the token's open watches.
    let mut watch = reqwest::Client::new()
        .get(format!(
            "{}/apis/machineconfiguration.openshift.io/v1/machineconfigpools?watch=1",
            s.url()
        ))
        .bearer_auth(&reader)
        .send()
        .await
        .unwrap();
    assert_eq!(watch.status().as_u16(), 200);
    let watching = tokio::spawn(async move { while let Ok(Some(_)) = watch.chunk().await {} });
    let gone: Value = admin
        .delete_path(&format!("/apis/auth.mco.dev/v1/tokens/{id}"))
        .await
        .unwrap();
    assert_eq!(gone["metadata"]["name"], json!(id));
    assert_eq!(get(&s, "/api/v1/nodes", Some(&reader)).await, (401, unauthorized()));
    tokio::time::timeout(Duration::from_secs(10), watching)
        .await
        .expect("the revoked token's watch ends")
        .unwrap();
    let revoked = s
        .hub
        .store()
        .read_after(0)
        .map(|e| e.unwrap())
        .filter(|e| e.event_type == "TokenRevoked")
        .count();
    assert_eq!(revoked, 1);

    // Tokens are state folded from the log: a restart keeps the admin token and the revocation.
    let (_, second) = issue(&admin, "reader", None, Some("auditor")).await;
    let admin_token = s.admin_token().unwrap();
    s.stop().await;
    let s = start(dir.path()).await;
    assert_eq!(
        s.admin_token().unwrap(),
        admin_token,
        "no second admin token on restart"
    );
    assert_eq!(get(&s, "/api/v1/nodes", Some(&reader)).await.0, 401);
    assert_eq!(get(&s, "/api/v1/nodes", Some(&second)).await.0, 200);
    assert_eq!(get(&s, "/api/v1/nodes", Some(&admin_token)).await.0, 200);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_reads_everything_but_tokens_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path()).await;
    let admin = s.admin_client("test");
    let (_, reader) = issue(&admin, "reader", None, None).await;
    let mcs = "/apis/machineconfiguration.openshift.io/v1/machineconfigs";
    for path in [
        mcs,
        "/api/v1/nodes",
        "/apis/machineconfiguration.openshift.io/v1/machineconfigpools/worker",
        "/apis/history.mco.dev/v1/events",
        "/metrics",
        "/apis",
    ] {
        assert_eq!(get(&s, path, Some(&reader)).await.0, 200, "{path}");
    }
    let seq = s.hub.published_seq();
    let (code, status) = send(
        &s,
        reqwest::Method::POST,
        mcs,
        &reader,
        "application/json",
        mc("99-reader"),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "machineconfigs.machineconfiguration.openshift.io is forbidden: User \"reader\" cannot create resource \"machineconfigs\" in API group \"machineconfiguration.openshift.io\" at the cluster scope",
            "reason": "Forbidden", "details": {"group": "machineconfiguration.openshift.io", "kind": "machineconfigs"}, "code": 403})
    );
    let (code, status) = send(
        &s,
        reqwest::Method::PATCH,
        "/apis/machineconfiguration.openshift.io/v1/machineconfigpools/worker",
        &reader,
        "application/merge-patch+json",
        json!({"spec": {"paused": true}}),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        "machineconfigpools.machineconfiguration.openshift.io \"worker\" is forbidden: User \"reader\" cannot patch resource \"machineconfigpools\" in API group \"machineconfiguration.openshift.io\" at the cluster scope"
    );
    assert_eq!(
        status["details"],
        json!({"name": "worker", "group": "machineconfiguration.openshift.io", "kind": "machineconfigpools"})
    );
    let (code, status) = get(&s, "/apis/auth.mco.dev/v1/tokens", Some(&reader)).await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        "tokens.auth.mco.dev is forbidden: User \"reader\" cannot list resource \"tokens\" in API group \"auth.mco.dev\" at the cluster scope"
    );
    let (code, status) = send(
        &s,
        reqwest::Method::POST,
        "/apis/history.mco.dev/v1/rollbacks",
        &reader,
        "application/json",
        json!({"pool": "worker", "undo": true}),
    )
    .await;
    assert_eq!((code, status["reason"].as_str()), (403, Some("Forbidden")), "{status}");
    let by_reader = s
        .hub
        .store()
        .read_after(seq)
        .map(|e| e.unwrap())
        .filter(|e| e.actor == "reader")
        .count();
    assert_eq!(by_reader, 0, "refused writes append nothing");

    // A bootstrap token fetches Ignition configs, and nothing else.
    let (_, boot) = issue(&admin, "bootstrap", None, None).await;
    let worker_rendered = async {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while s
            .hub
            .state()
            .pools
            .get("worker")
            .is_none_or(|p| p.spec.configuration.name.is_empty())
        {
            assert!(tokio::time::Instant::now() < deadline, "worker rendered");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    worker_rendered.await;
    let r = reqwest::Client::new()
        .get(format!("{}/config/worker", s.url()))
        .bearer_auth(&boot)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (code, status) = get(&s, "/apis", Some(&boot)).await;
    assert_eq!(code, 403);
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with("forbidden: User \"system:bootstrap:"),
        "{status}"
    );
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .ends_with("\" cannot get path \"/apis\""),
        "{status}"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn node_tokens_write_only_their_own_node_and_daemons_converge_with_them() {
    // The harness runs every daemon with its own node token (tokens/<node>.token).
    let c = Cluster::start(0, 2).await;
    let token =
        |n: &str| mco::credentials::read_secret_file(&c.data_dir.join("tokens").join(format!("{n}.token"))).unwrap();
    let w0 = token("worker-0");
    assert_eq!(mode_of(&c.data_dir.join("tokens/worker-0.token")), 0o600);
    let s = &c.server;

    // Another node: the authorizer's 403, with kube-apiserver's message.
    let (code, status) = send(
        s,
        reqwest::Method::PATCH,
        "/api/v1/nodes/worker-1",
        &w0,
        "application/merge-patch+json",
        json!({"metadata": {"annotations": {"x": "y"}}}),
    )
    .await;
    assert_eq!(
        (code, status),
        (
            403,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "nodes \"worker-1\" is forbidden: User \"system:node:worker-0\" cannot patch resource \"nodes\" in API group \"\" at the cluster scope",
            "reason": "Forbidden", "details": {"name": "worker-1", "kind": "nodes"}, "code": 403})
        )
    );
    let (code, status) = send(
        s,
        reqwest::Method::PATCH,
        "/api/v1/nodes/worker-1/status",
        &w0,
        "application/merge-patch+json",
        json!({"status": {}}),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(status["message"], "nodes \"worker-1\" is forbidden: User \"system:node:worker-0\" cannot patch resource \"nodes/status\" in API group \"\" at the cluster scope");
    // Creating another node: NodeRestriction's message.
    let (code, status) = send(
        s,
        reqwest::Method::POST,
        "/api/v1/nodes",
        &w0,
        "application/json",
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-9"}}),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        "nodes \"worker-9\" is forbidden: node \"worker-0\" is not allowed to modify node \"worker-9\""
    );
    // Its own pool membership: NodeRestriction refuses node-role labels, by merge patch, JSON
    // patch and update alike.
    let relabel = json!({"metadata": {"labels": {"node-role.kubernetes.io/infra": ""}}});
    let (code, status) = send(
        s,
        reqwest::Method::PATCH,
        "/api/v1/nodes/worker-0",
        &w0,
        "application/merge-patch+json",
        relabel,
    )
    .await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        "nodes \"worker-0\" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/infra"
    );
    assert_eq!(status["reason"], "Forbidden");
    let (code, status) = send(
        s,
        reqwest::Method::PATCH,
        "/api/v1/nodes/worker-0",
        &w0,
        "application/json-patch+json",
        json!([{"op": "remove", "path": "/metadata/labels/node-role.kubernetes.io~1worker"}]),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        status["message"],
        "nodes \"worker-0\" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/worker"
    );
    let mut own: Value = get(s, "/api/v1/nodes/worker-0", Some(&w0)).await.1;
    own["metadata"]["labels"]["node-role.kubernetes.io/master"] = json!("");
    let (code, _) = send(
        s,
        reqwest::Method::PUT,
        "/api/v1/nodes/worker-0",
        &w0,
        "application/json",
        own,
    )
    .await;
    assert_eq!(code, 403);
    // Its own annotations and other labels: allowed.
    let (code, status) = send(
        s,
        reqwest::Method::PATCH,
        "/api/v1/nodes/worker-0",
        &w0,
        "application/merge-patch+json",
        json!({"metadata": {"labels": {"example.com/rack": "r1"}, "annotations": {"example.com/note": "hi"}}}),
    )
    .await;
    assert_eq!(code, 200, "{status}");
    // A custom pool selecting on other labels: their keys are the node's pool membership too,
    // so the node may neither add nor remove them (by merge patch or server-side apply).
    c.client
        .create(
            mco::model::Kind::MachineConfigPool,
            &json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
                "metadata": {"name": "special"},
                "spec": {"machineConfigSelector": {"matchExpressions": [{"key": "machineconfiguration.openshift.io/role", "operator": "In", "values": ["worker", "special"]}]},
                         "nodeSelector": {"matchLabels": {"example.com/special": "yes"},
                                          "matchExpressions": [{"key": "example.com/tier", "operator": "In", "values": ["gold"]}]}}}),
            None,
        )
        .await
        .unwrap();
    for (ct, body) in [
        (
            "application/merge-patch+json",
            json!({"metadata": {"labels": {"example.com/special": "yes"}}}),
        ),
        (
            "application/merge-patch+json",
            json!({"metadata": {"labels": {"example.com/tier": "gold"}}}),
        ),
        (
            "application/merge-patch+json",
            json!({"metadata": {"labels": {"example.com/rack": null, "example.com/special": "yes"}}}),
        ),
    ] {
        let (code, status) = send(
            s,
            reqwest::Method::PATCH,
            "/api/v1/nodes/worker-0",
            &w0,
            ct,
            body.clone(),
        )
        .await;
        assert_eq!(code, 403, "{body}: {status}");
        let m = status["message"].as_str().unwrap();
        assert!(
            m.starts_with("nodes \"worker-0\" is forbidden: is not allowed to modify labels: example.com/"),
            "{m}"
        );
    }
    let labels = c.server.hub.state().nodes["worker-0"]
        .metadata
        .labels
        .clone()
        .unwrap_or_default();
    assert!(
        !labels.contains_key("example.com/special") && labels.contains_key("example.com/rack"),
        "{labels:?}"
    );
    // No MachineConfig or pool writes, no deletes, no other node's reports.
    let (code, _) = send(
        s,
        reqwest::Method::POST,
        "/apis/machineconfiguration.openshift.io/v1/machineconfigs",
        &w0,
        "application/json",
        mc("99-node"),
    )
    .await;
    assert_eq!(code, 403);
    let (code, _) = send(
        s,
        reqwest::Method::DELETE,
        "/api/v1/nodes/worker-0",
        &w0,
        "application/json",
        json!({}),
    )
    .await;
    assert_eq!(code, 403);
    let (code, status) = send(
        s,
        reqwest::Method::POST,
        mco::protocol::REPORTS_PATH,
        &w0,
        "application/json",
        json!({"node": "worker-1", "kind": "drift", "reason": "forged"}),
    )
    .await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        "reports.metrics.mco.dev is forbidden: node \"worker-0\" is not allowed to modify node \"worker-1\""
    );
    let (code, _) = send(
        s,
        reqwest::Method::GET,
        "/apis/auth.mco.dev/v1/tokens",
        &w0,
        "application/json",
        json!({}),
    )
    .await;
    assert_eq!(code, 403);

    // A rollout with node tokens only: the daemons register, drain, write and report as
    // themselves, and every daemon write is recorded under its node's identity.
    let before = c.pool("worker").spec.configuration.name;
    let seq = s.hub.published_seq();
    c.client
        .create(Kind::MachineConfig, &mc("99-worker-auth"), Some("auth test"))
        .await
        .unwrap();
    c.wait_rolled_out("worker", &before, Duration::from_secs(90)).await;
    assert_eq!(
        std::fs::read_to_string(c.root("worker-1").join("etc/auth-test")).unwrap(),
        "hello"
    );
    let events: Vec<_> = s
        .hub
        .store()
        .read_range(seq, s.hub.published_seq())
        .map(|e| e.unwrap())
        .collect();
    for n in ["worker-0", "worker-1"] {
        let by_daemon: Vec<_> = events
            .iter()
            .filter(|e| e.name == n && matches!(e.event_type.as_str(), "NodeStateChanged" | "NodeDrainRequested"))
            .collect();
        assert!(!by_daemon.is_empty(), "{n} reported");
        assert!(
            by_daemon.iter().all(|e| e.actor == format!("system:node:{n}")),
            "{by_daemon:?}"
        );
    }
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_actor_is_the_tokens_identity_whatever_the_headers_say() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path()).await;
    let admin = s.admin_client("test");
    let (_, alice) = issue(&admin, "admin", None, Some("alice")).await;
    let seq = s.hub.published_seq();
    // The request claims to be the render controller (x-mco-actor) and kubectl (user agent).
    let resp = reqwest::Client::new()
        .post(format!(
            "{}/apis/machineconfiguration.openshift.io/v1/machineconfigs",
            s.url()
        ))
        .bearer_auth(&alice)
        .header("x-mco-actor", "controller:render")
        .header("user-agent", "kubectl/v1.32.4")
        .header("x-mco-reason", "ticket 42")
        .json(&mc("99-alice"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let created: Value = resp.json().await.unwrap();
    let ev = s
        .hub
        .store()
        .read_after(seq)
        .map(|e| e.unwrap())
        .find(|e| e.name == "99-alice")
        .unwrap();
    assert_eq!((ev.actor.as_str(), ev.reason.as_str()), ("alice", "ticket 42"));
    // The declared component is only the (client-chosen, as in Kubernetes) field manager.
    assert_eq!(created["metadata"]["managedFields"][0]["manager"], "controller:render");
    // The history and /api/v1/events show the same identity.
    let hist: Value = admin
        .get_path("/apis/history.mco.dev/v1/events?fieldSelector=object.name=99-alice")
        .await
        .unwrap();
    assert_eq!(hist["items"][0]["actor"], "alice");
    let core: Value = admin.get_path("/api/v1/events").await.unwrap();
    let mine = core["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["involvedObject"]["name"] == "99-alice")
        .unwrap();
    assert_eq!(mine["source"]["component"], "alice");
    // SelfSubjectReview (kubectl auth whoami).
    let me: Value = Client::new(&s.url(), common::GROUP, "x")
        .with_token(Some(alice.clone()))
        .post_path(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
        )
        .await
        .unwrap();
    assert_eq!(me["status"]["userInfo"]["username"], "alice");
    assert_eq!(
        me["status"]["userInfo"]["groups"],
        json!(["system:masters", "system:authenticated"])
    );
    s.stop().await;
}

/// Runs `mco ARGS` against `s` with `token` in MCO_TOKEN.
async fn mco(s: &RunningServer, token: &str, args: &[&str]) -> (bool, String, String) {
    let o = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"))
        .args(args)
        .env("MCO_SERVER", s.url())
        .env("MCO_TOKEN", token)
        .env("KUBECONFIG", "/nonexistent")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mco_token_creates_lists_and_revokes() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path()).await;
    let admin = s.admin_token().unwrap();
    // One identity, one kind: the default names of the other kinds, and a name another kind's
    // token already holds, are refused.
    let (ok, _, err) = mco(&s, &admin, &["token", "create", "--kind", "reader", "--name", "admin"]).await;
    assert!(!ok);
    assert!(err.contains("default name of another kind"), "{err}");
    let (ok, _, err) = mco(&s, &admin, &["token", "create", "--kind", "admin", "--name", "ops"]).await;
    assert!(ok, "{err}");
    let (ok, _, err) = mco(&s, &admin, &["token", "create", "--kind", "reader", "--name", "ops"]).await;
    assert!(!ok);
    assert!(err.contains("\"ops\": already the identity of admin token "), "{err}");
    let (ok, _, err) = mco(&s, &admin, &["token", "create", "--kind", "admin", "--name", "ops"]).await;
    assert!(ok, "a second token of the same identity and kind: {err}");
    // A bootstrap token used with the CLI: told what it is for.
    let (ok, boot, err) = mco(&s, &admin, &["token", "create", "--kind", "bootstrap"]).await;
    assert!(ok, "{err}");
    let (ok, _, err) = mco(&s, boot.trim(), &["get", "mcp"]).await;
    assert!(!ok);
    assert!(
        err.contains("refused this token the API's discovery (403 Forbidden"),
        "{err}"
    );
    assert!(err.contains("a bootstrap token only fetches Ignition configs"), "{err}");
    let (ok, secret, err) = mco(&s, &admin, &["token", "create", "--kind", "node", "--node", "worker-3"]).await;
    assert!(ok, "{err}");
    let secret = secret.trim().to_string();
    assert!(secret.starts_with("mco_") && secret.len() == 68, "{secret}");
    assert!(err.contains("issued for system:node:worker-3 (node)"), "{err}");
    let id = s
        .hub
        .state()
        .token_by_hash(&mco::auth::hash(&secret))
        .unwrap()
        .id
        .clone();
    let (ok, list, err) = mco(&s, &admin, &["token", "list"]).await;
    assert!(ok, "{err}");
    assert!(list.starts_with("ID "), "{list}");
    let row = list
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{list}"));
    assert_eq!(
        row.split_whitespace().take(4).collect::<Vec<_>>(),
        [id.as_str(), "node", "system:node:worker-3", "worker-3"]
    );
    assert!(!list.contains(&secret) && !list.contains(&mco::auth::hash(&secret)));
    // A node token cannot manage tokens.
    let (ok, _, err) = mco(&s, &secret, &["token", "list"]).await;
    assert!(!ok);
    assert!(
        err.contains("tokens.auth.mco.dev is forbidden: User \"system:node:worker-3\" cannot list resource \"tokens\""),
        "{err}"
    );
    let (ok, out, err) = mco(&s, &admin, &["token", "revoke", &id]).await;
    assert!(ok, "{err}");
    assert_eq!(out, format!("token {id} revoked (system:node:worker-3)\n"));
    let (ok, _, err) = mco(&s, &secret, &["get", "mcp"]).await;
    assert!(!ok);
    assert!(err.contains("401 Unauthorized"), "{err}");
    let (ok, _, err) = mco(&s, &admin, &["token", "create", "--kind", "node"]).await;
    assert!(!ok && err.contains("a node token needs --node NAME"), "{err}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_with_a_kubeconfig_token_and_auth_can_i() {
    if !have_kubectl("kubectl_with_a_kubeconfig_token_and_auth_can_i") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = tls_server(dir.path()).await;
    let home = tempfile::tempdir().unwrap();
    let client = s.admin_client("test");
    let admin = s.admin_token().unwrap();
    let (_, reader) = issue(&client, "reader", None, None).await;
    let (_, node) = issue(&client, "node", Some("worker-0"), None).await;

    let (ok, out, err) = kubectl_as(&s, home.path(), &admin, &["get", "mcp", "-o", "name"]).await;
    assert!(ok, "{err}");
    assert!(
        out.contains("machineconfigpool.machineconfiguration.openshift.io/worker"),
        "{out}"
    );
    let (ok, _, err) = kubectl_as(&s, home.path(), "mco_wrong", &["get", "mcp"]).await;
    assert!(!ok);
    assert!(err.contains("You must be logged in to the server"), "{err}");

    // `kubectl auth can-i`: yes (exit 0) or no (exit 1), per identity.
    for (who, token, args, yes) in [
        ("admin", &admin, &["create", "machineconfigs"][..], true),
        ("reader", &reader, &["create", "machineconfigs"], false),
        ("reader", &reader, &["list", "machineconfigs"], true),
        ("reader", &reader, &["list", "tokens.auth.mco.dev"], false),
        ("node", &node, &["create", "machineconfigs"], false),
        ("node", &node, &["get", "machineconfigs"], true),
        ("node", &node, &["patch", "nodes/worker-0"], true),
        ("node", &node, &["patch", "nodes/worker-1"], false),
        (
            "node",
            &node,
            &["patch", "nodes/worker-0", "--subresource=status"],
            true,
        ),
        ("node", &node, &["delete", "nodes/worker-0"], false),
    ] {
        let mut a = vec!["auth", "can-i"];
        a.extend_from_slice(args);
        let (ok, out, err) = kubectl_as(&s, home.path(), token, &a).await;
        assert_eq!(
            (ok, out.trim()),
            (yes, if yes { "yes" } else { "no" }),
            "{who} can-i {args:?}: {err}"
        );
    }
    // A reader's write, as kubectl prints the 403.
    let file = home.path().join("mc.json");
    std::fs::write(&file, mc("99-kubectl").to_string()).unwrap();
    let (ok, _, err) = kubectl_as(&s, home.path(), &reader, &["create", "-f", file.to_str().unwrap()]).await;
    assert!(!ok);
    assert!(
        err.contains("Error from server (Forbidden)")
            && err.contains("User \"reader\" cannot create resource \"machineconfigs\""),
        "{err}"
    );
    // `kubectl auth whoami`.
    let (ok, out, err) = kubectl_as(&s, home.path(), &node, &["auth", "whoami"]).await;
    assert!(ok, "{err}");
    assert!(
        out.contains("system:node:worker-0") && out.contains("system:nodes"),
        "{out}"
    );
    // `kubectl auth can-i --list`: the rules each identity holds (SelfSubjectRulesReview).
    let (ok, out, err) = kubectl_as(&s, home.path(), &reader, &["auth", "can-i", "--list"]).await;
    assert!(ok, "{err}");
    let row = out
        .lines()
        .find(|l| l.starts_with("*.machineconfiguration.openshift.io "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(row.ends_with("[get list watch]"), "{out}");
    assert!(!out.contains("auth.mco.dev"), "a reader does not read tokens: {out}");
    let (ok, out, err) = kubectl_as(&s, home.path(), &node, &["auth", "can-i", "--list"]).await;
    assert!(ok, "{err}");
    let own = out
        .lines()
        .find(|l| l.starts_with("nodes/status "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(own.contains("[worker-0]") && own.contains("[update patch]"), "{out}");
    let (ok, out, err) = kubectl_as(&s, home.path(), &admin, &["auth", "can-i", "--list"]).await;
    assert!(ok, "{err}");
    assert!(
        out.lines().any(|l| l.starts_with("*.* ") && l.ends_with("[*]")),
        "{out}"
    );
    s.stop().await;
}

/// The CLI and the daemon never send a token over plain HTTP to an address other than
/// loopback: they refuse to start, before any connection (kubectl never sends credentials
/// over plain HTTP either).
#[test]
fn tokens_are_never_sent_over_plain_http_off_loopback() {
    for args in [
        vec!["--server", "192.0.2.2:9999", "get", "mcp"],
        vec!["--server", "http://192.0.2.2:9999", "get", "nodes"],
        vec![
            "daemon",
            "--server",
            "http://192.0.2.2:9999",
            "--node",
            "worker-0",
            "--root",
            "/nonexistent",
        ],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mco"))
            .args(&args)
            .env("MCO_TOKEN", "mco_not_to_be_sent")
            .current_dir(std::env::temp_dir())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            err.contains(
                "http://192.0.2.2:9999: refusing to send a token over plain HTTP to an address other than loopback"
            ),
            "{args:?}: {err}"
        );
    }
}

/// A plain-HTTP server is reached directly, never through `HTTP_PROXY`/`ALL_PROXY` (the proxy
/// would read the token in clear), and a refused request with a large body still gets its
/// Status (the body is read before the answer, as for a 413).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_proxy_for_plain_http_and_refusals_of_large_bodies_are_answered() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path()).await;
    let proxy = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_url = format!("http://{}", proxy.local_addr().unwrap());
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"))
        .args(["get", "mcp", "--server", &s.url()])
        .env("MCO_TOKEN", s.admin_token().unwrap())
        .env("HTTP_PROXY", &proxy_url)
        .env("http_proxy", &proxy_url)
        .env("ALL_PROXY", &proxy_url)
        .current_dir(dir.path())
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let reached = tokio::time::timeout(Duration::from_millis(200), proxy.accept()).await;
    assert!(reached.is_err(), "the proxy was contacted");

    let (_, reader) = issue(&s.admin_client("test"), "reader", None, None).await;
    let mut big = mc("99-big");
    big["metadata"]["annotations"] = json!({"pad": "x".repeat(1_000_000)});
    let (code, status) = send(
        &s,
        reqwest::Method::POST,
        "/apis/machineconfiguration.openshift.io/v1/machineconfigs",
        &reader,
        "application/json",
        big.clone(),
    )
    .await;
    assert_eq!((code, status["reason"].as_str()), (403, Some("Forbidden")), "{status}");
    let resp = reqwest::Client::new()
        .post(format!(
            "{}/apis/machineconfiguration.openshift.io/v1/machineconfigs",
            s.url()
        ))
        .header("content-type", "application/json")
        .body(big.to_string())
        .send()
        .await
        .expect("the 401 arrives, not a broken pipe");
    assert_eq!(resp.status().as_u16(), 401);
    s.stop().await;
}

/// A fake server on 127.0.0.1:0 that answers every request with kube-apiserver's 401 and
/// records each request's Authorization header (`""` when there is none).
async fn recording_server() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let s2 = seen.clone();
    let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
        let seen = s2.clone();
        async move {
            let auth = headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            seen.lock().unwrap().push(auth);
            (
                axum::http::StatusCode::UNAUTHORIZED,
                [("content-type", "application/json")],
                unauthorized().to_string(),
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

/// A kubeconfig whose current context `ops` (user `alice`) holds `token` for the cluster at `server`.
fn kubeconfig_at(server: &str, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n\
         contexts:\n- name: ops\n  context:\n    cluster: c\n    user: alice\ncurrent-context: ops\n\
         users:\n- name: alice\n  user:\n    token: {token}\n"
    )
}

/// Runs `mco ARGS` in an empty directory (no ./mco-data) with HOME there and `env`; (success,
/// stderr).
async fn mco_env(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let home = tempfile::tempdir().unwrap();
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"));
    c.args(args)
        .current_dir(home.path())
        .env("HOME", home.path())
        .env_remove("MCO_SERVER")
        .env_remove("MCO_TOKEN")
        .env_remove("MCO_TOKEN_FILE")
        .env_remove("MCO_CA_FILE")
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let o = tokio::time::timeout(Duration::from_secs(60), c.output())
        .await
        .expect("mco ends")
        .unwrap();
    (o.status.success(), String::from_utf8_lossy(&o.stderr).into())
}

/// Credentials follow their server (kubectl's rule: a kubeconfig's credentials belong to its
/// context's cluster): with KUBECONFIG set for another cluster and MCO_SERVER at a fake server
/// recording the Authorization header, neither the CLI nor the daemon sends that cluster's
/// token; the kubeconfig's token goes to its own server (chosen by the context or by
/// MCO_SERVER naming the same server); each 401 names the credential source used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_follow_their_server() {
    let (fake, seen) = recording_server().await;
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other-cluster");
    std::fs::write(&other, kubeconfig_at("https://10.255.0.1:6443", "other-cluster-secret")).unwrap();
    let other = other.to_str().unwrap();
    let leaked =
        |seen: &std::sync::Mutex<Vec<String>>| seen.lock().unwrap().iter().any(|a| a.contains("other-cluster-secret"));

    // CLI: KUBECONFIG for another cluster, MCO_SERVER at mco: no token at all, and the 401 says so.
    let (ok, err) = mco_env(&["get", "mcp"], &[("KUBECONFIG", other), ("MCO_SERVER", &fake)]).await;
    assert!(!ok);
    assert!(!seen.lock().unwrap().is_empty(), "the fake server was asked");
    assert!(
        !leaked(&seen),
        "the other cluster's token reached mco: {:?}",
        seen.lock().unwrap()
    );
    assert!(
        seen.lock().unwrap().iter().all(|a| a.is_empty()),
        "{:?}",
        seen.lock().unwrap()
    );
    assert!(err.contains(&format!("401 Unauthorized from {fake}")), "{err}");
    assert!(err.contains("no token"), "{err}");

    // The same with MCO_TOKEN: that token is sent, and the 401 names $MCO_TOKEN.
    seen.lock().unwrap().clear();
    let (ok, err) = mco_env(
        &["get", "mcp"],
        &[
            ("KUBECONFIG", other),
            ("MCO_SERVER", &fake),
            ("MCO_TOKEN", "env-secret"),
        ],
    )
    .await;
    assert!(!ok);
    assert!(!leaked(&seen));
    assert!(
        seen.lock().unwrap().iter().all(|a| a == "Bearer env-secret"),
        "{:?}",
        seen.lock().unwrap()
    );
    assert!(err.contains("the token in $MCO_TOKEN was refused"), "{err}");

    // The daemon resolves the same way: its start-up check never sends the other cluster's token.
    seen.lock().unwrap().clear();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let (ok, err) = mco_env(
        &[
            "daemon",
            "--server",
            &fake,
            "--node",
            "n1",
            "--root",
            root.to_str().unwrap(),
        ],
        &[("KUBECONFIG", other)],
    )
    .await;
    assert!(!ok, "the daemon refuses a server that refuses it");
    assert!(!seen.lock().unwrap().is_empty());
    assert!(!leaked(&seen), "{:?}", seen.lock().unwrap());
    assert!(err.contains(&format!("401 Unauthorized from {fake}")), "{err}");

    // A kubeconfig for the fake server itself: its context is used whole (server and token),
    // and the 401 names the context and user.
    let own = dir.path().join("own");
    std::fs::write(&own, kubeconfig_at(&fake, "own-secret")).unwrap();
    let own = own.to_str().unwrap();
    seen.lock().unwrap().clear();
    let (ok, err) = mco_env(&["get", "mcp"], &[("KUBECONFIG", own)]).await;
    assert!(!ok);
    assert!(
        seen.lock().unwrap().iter().all(|a| a == "Bearer own-secret"),
        "{:?}",
        seen.lock().unwrap()
    );
    assert!(!seen.lock().unwrap().is_empty());
    assert!(
        err.contains(&format!(
            "the token from $KUBECONFIG ({own}) context 'ops' (user 'alice') was refused"
        )),
        "{err}"
    );
    // MCO_SERVER naming that same server keeps the context's token with it.
    seen.lock().unwrap().clear();
    let (_, err) = mco_env(
        &["get", "mcp"],
        &[("KUBECONFIG", own), ("MCO_SERVER", &format!("{fake}/"))],
    )
    .await;
    assert!(
        seen.lock().unwrap().iter().all(|a| a == "Bearer own-secret"),
        "{:?}",
        seen.lock().unwrap()
    );
    assert!(err.contains("context 'ops' (user 'alice') was refused"), "{err}");
}
