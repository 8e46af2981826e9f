//! A node identity can change nothing that decides what it is given (issue 23, item 1), over a
//! real server on 127.0.0.1:0 with real node tokens: on create (POST, server-side apply of a
//! missing Node, re-creation after a delete) and on update (PUT, merge, JSON and strategic
//! patches, server-side apply, the status subresource), a node may not set or change the labels
//! Kubernetes reserves or any pool selects on (only those its token records, the admin's
//! decision, at registration), taints, `ownerReferences` or finalizers, nor delete its Node; the
//! garbage collector never deletes a Node for an owner reference; path tricks are a 4xx.

mod common;

use common::*;
use mco::model::Kind;
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
const MERGE: &str = "application/merge-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const APPLY: &str = "application/apply-patch+yaml";
const JSON: &str = "application/json";

/// Sends `method path` with `body` as `token`: (status, JSON body or the text as a string).
async fn send(c: &Cluster, token: &str, method: &str, path: &str, ct: &str, body: &Value) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .request(method.parse().unwrap(), format!("{}{path}", c.server.url()))
        .bearer_auth(token)
        .header("content-type", ct)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (code, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// Issues a node token for `node` recording `labels`, through the API as the admin: its secret.
async fn node_token(c: &Cluster, node: &str, labels: Value) -> String {
    let t: Value = c
        .client
        .post_path(
            "/apis/auth.mco.dev/v1/tokens",
            &json!({"spec": {"kind": "node", "node": node, "labels": labels}}),
        )
        .await
        .unwrap();
    assert_eq!(t["spec"]["labels"], labels);
    t["status"]["token"].as_str().unwrap().to_string()
}

fn node(name: &str, meta: Value, spec: Value) -> Value {
    let mut m = meta;
    m["name"] = json!(name);
    json!({"apiVersion": "v1", "kind": "Node", "metadata": m, "spec": spec})
}

/// Asserts NodeRestriction's 403 with `message` after `nodes "<name>" is forbidden: `.
fn assert_forbidden(what: &str, (code, status): (u16, Value), name: &str, message: &str) {
    assert_eq!(code, 403, "{what}: {status}");
    assert_eq!(status["reason"], "Forbidden", "{what}: {status}");
    assert_eq!(
        status["message"],
        format!("nodes \"{name}\" is forbidden: {message}"),
        "{what}: {status}"
    );
}

/// What decides what a node is given: its labels, taints, owner references and finalizers.
fn decisive(c: &Cluster, name: &str) -> Value {
    let v = c.server.hub.state().get_json(Kind::Node, name).unwrap();
    json!([
        v["metadata"]["labels"],
        v["spec"]["taints"],
        v["metadata"]["ownerReferences"],
        v["metadata"]["finalizers"]
    ])
}

/// As the admin: a MachineConfig `name` owned by `refs`, and the same owner references on
/// Node w0.
async fn owned_by(c: &Cluster, name: &str, refs: &Value) {
    c.client
        .create(
            Kind::MachineConfig,
            &json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
                "metadata": {"name": name, "ownerReferences": refs},
                "spec": {"config": {"ignition": {"version": "3.4.0"}}}}),
            None,
        )
        .await
        .unwrap();
    let admin = c.server.admin_token().unwrap();
    let patch = json!({"metadata": {"ownerReferences": refs}});
    let (code, st) = send(c, &admin, "PATCH", "/api/v1/nodes/w0", MERGE, &patch).await;
    assert_eq!(code, 200, "{st}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cannot_move_itself_through_any_verb() {
    let c = Cluster::start(0, 0).await;
    // A custom pool selecting on its own label: its key is pool membership too.
    c.client
        .create(
            Kind::MachineConfigPool,
            &json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
                "metadata": {"name": "special"},
                "spec": {"machineConfigSelector": {"matchExpressions": [{"key": "machineconfiguration.openshift.io/role", "operator": "In", "values": ["worker", "special"]}]},
                         "nodeSelector": {"matchLabels": {"example.com/special": "yes"}}}}),
            None,
        )
        .await
        .unwrap();
    let role = json!({"node-role.kubernetes.io/worker": ""});
    let w0 = node_token(&c, "w0", role.clone()).await;

    // Registration: none of the restricted labels but the token's, no owner references,
    // finalizers or taints, by POST and by server-side apply of the missing Node.
    let refusals = [
        (
            json!({"labels": {"node-role.kubernetes.io/master": ""}}),
            json!({}),
            "node \"w0\" is not allowed to set the following labels: node-role.kubernetes.io/master",
        ),
        (
            json!({"labels": {"node-role.kubernetes.io/worker": "", "example.com/special": "yes"}}),
            json!({}),
            "node \"w0\" is not allowed to set the following labels: example.com/special",
        ),
        (
            json!({"labels": {"node-role.kubernetes.io/worker": "no"}}),
            json!({}),
            "node \"w0\" is not allowed to set the following labels: node-role.kubernetes.io/worker",
        ),
        (
            json!({"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "gone", "uid": "u-1"}]}),
            json!({}),
            "node \"w0\" is not allowed to set ownerReferences",
        ),
        (
            json!({"finalizers": ["example.com/keep"]}),
            json!({}),
            "node \"w0\" is not allowed to set finalizers",
        ),
        (
            json!({}),
            json!({"taints": [{"key": "k", "effect": "NoSchedule"}]}),
            "node \"w0\" is not allowed to set taints",
        ),
        // What it is given is the node controller's choice: registering may only record the
        // config it booted (desired = current).
        (
            json!({"annotations": {"machineconfiguration.openshift.io/desiredConfig": "rendered-master-x"}}),
            json!({}),
            "node \"w0\" is not allowed to set annotations: machineconfiguration.openshift.io/desiredConfig (other than its currentConfig)",
        ),
        (
            json!({"annotations": {"machineconfiguration.openshift.io/lastAppliedDrain": "drain-x"}}),
            json!({}),
            "node \"w0\" is not allowed to set annotations: machineconfiguration.openshift.io/lastAppliedDrain",
        ),
    ];
    for (meta, spec, message) in &refusals {
        let body = node("w0", meta.clone(), spec.clone());
        let r = send(&c, &w0, "POST", "/api/v1/nodes", JSON, &body).await;
        assert_forbidden(&format!("POST {body}"), r, "w0", message);
        let r = send(&c, &w0, "PATCH", "/api/v1/nodes/w0?fieldManager=mcd", APPLY, &body).await;
        assert_forbidden(&format!("apply {body}"), r, "w0", message);
    }
    assert!(!c.server.hub.state().nodes.contains_key("w0"));
    // What it may register with: the token's labels (set whatever it sends) and its own.
    let (code, created) = send(
        &c,
        &w0,
        "POST",
        "/api/v1/nodes",
        JSON,
        &node(
            "w0",
            json!({"labels": {"kubernetes.io/hostname": "w0", "example.com/rack": "r1"}}),
            json!({}),
        ),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(
        created["metadata"]["labels"],
        json!({"example.com/rack": "r1", "kubernetes.io/hostname": "w0", "node-role.kubernetes.io/worker": ""})
    );
    let before = decisive(&c, "w0");
    // The node controller gives it the worker pool's config (annotations the JSON patches
    // below replace).
    c.wait_for(
        "w0 targeted by the node controller",
        std::time::Duration::from_secs(30),
        |s| {
            s.nodes["w0"]
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key("machineconfiguration.openshift.io/desiredConfig"))
        },
    )
    .await;

    // Updates by every verb: none of them may change what decides its pool or workloads.
    let own = || c.server.hub.state().get_json(Kind::Node, "w0").unwrap();
    let changes: [(&str, Value, &str); 9] = [
        (
            "/metadata/labels/node-role.kubernetes.io~1master",
            json!(""),
            "is not allowed to modify labels: node-role.kubernetes.io/master",
        ),
        (
            "/metadata/labels/node-role.kubernetes.io~1worker",
            Value::Null,
            "is not allowed to modify labels: node-role.kubernetes.io/worker",
        ),
        (
            "/metadata/labels/example.com~1special",
            json!("yes"),
            "is not allowed to modify labels: example.com/special",
        ),
        (
            "/metadata/ownerReferences",
            json!([{"apiVersion": "v1", "kind": "Node", "name": "gone", "uid": "u-1"}]),
            "node \"w0\" is not allowed to modify ownerReferences",
        ),
        (
            "/metadata/finalizers",
            json!(["example.com/keep"]),
            "node \"w0\" is not allowed to modify finalizers",
        ),
        (
            "/spec/taints",
            json!([{"key": "k", "effect": "NoSchedule"}]),
            "node \"w0\" is not allowed to modify taints",
        ),
        (
            "/metadata/annotations/machineconfiguration.openshift.io~1desiredConfig",
            json!("rendered-master-x"),
            "node \"w0\" is not allowed to modify annotations: machineconfiguration.openshift.io/desiredConfig",
        ),
        (
            "/metadata/annotations/machineconfiguration.openshift.io~1lastAppliedDrain",
            json!("drain-rendered-master-x"),
            "node \"w0\" is not allowed to modify annotations: machineconfiguration.openshift.io/lastAppliedDrain",
        ),
        (
            "/spec/configSource",
            json!({"configMap": {"name": "x", "namespace": "y", "kubeletConfigKey": "k"}}),
            "node \"w0\" is not allowed to update configSource to a new non-nil configSource",
        ),
    ];
    for (pointer, value, message) in &changes {
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        let key = key.replace("~1", "/");
        // The patch documents that make the change, one per patch type, and the whole object.
        let mut nested = json!({});
        let mut at = &mut nested;
        for seg in parent.trim_start_matches('/').split('/') {
            at = &mut at[seg];
        }
        at[key.as_str()] = value.clone();
        let op = if value.is_null() {
            json!([{"op": "remove", "path": pointer}])
        } else {
            json!([{"op": "add", "path": pointer, "value": value}])
        };
        let set = |mut obj: Value| {
            let mut at = &mut obj;
            for seg in parent.trim_start_matches('/').split('/') {
                at = &mut at[seg];
            }
            if value.is_null() {
                at.as_object_mut().unwrap().remove(&key);
            } else {
                at[key.as_str()] = value.clone();
            }
            obj
        };
        // Unconditional (Nodes allow it): the controllers annotate the Node meanwhile.
        let mut whole = set(own());
        whole["metadata"].as_object_mut().unwrap().remove("resourceVersion");
        let mut applied = node("w0", json!({}), json!({}));
        applied["metadata"]["labels"] = own()["metadata"]["labels"].clone();
        let applied = set(applied);
        let mut verbs = vec![
            ("PATCH", MERGE, nested.clone()),
            ("PATCH", STRATEGIC, nested.clone()),
            ("PATCH", JSON_PATCH, op.clone()),
            ("PUT", JSON, whole.clone()),
        ];
        // (An apply that leaves out a field another manager owns does not remove it.)
        if !value.is_null() {
            verbs.push(("PATCH", APPLY, applied.clone()));
        }
        for (method, ct, body) in verbs {
            let path = "/api/v1/nodes/w0?fieldManager=mcd&force=true";
            let r = send(&c, &w0, method, path, ct, &body).await;
            assert_forbidden(&format!("{method} {ct} {pointer}"), r, "w0", message);
        }
        // The status subresource keeps all of them whatever its body says: the write lands,
        // nothing decisive changes.
        for (method, ct, body) in [("PATCH", MERGE, nested.clone()), ("PUT", JSON, whole.clone())] {
            let (code, st) = send(&c, &w0, method, "/api/v1/nodes/w0/status", ct, &body).await;
            assert_eq!(code, 200, "{method} status {pointer}: {st}");
        }
        assert_eq!(decisive(&c, "w0"), before, "{pointer}");
    }
    // Its own annotations and unrestricted labels: its to change.
    let (code, st) = send(
        &c,
        &w0,
        "PATCH",
        "/api/v1/nodes/w0",
        MERGE,
        &json!({"metadata": {"labels": {"example.com/rack": "r2"}, "annotations": {"example.com/note": "hi"}}}),
    )
    .await;
    assert_eq!(code, 200, "{st}");
    // It cannot delete its Node (to register again), alone or in a collection.
    for path in ["/api/v1/nodes/w0", "/api/v1/nodes"] {
        let (code, st) = send(&c, &w0, "DELETE", path, JSON, &json!({})).await;
        assert_eq!(code, 403, "DELETE {path}: {st}");
    }

    // The attack of issue 23 with an admin's help: an owner reference to an owner that does
    // not exist. The garbage collector deletes a MachineConfig with the same reference, and
    // not the Node (end to end here; `controller/gc.rs` holds the rule on one pass it runs
    // itself, free of the controller loop's timing).
    let gone = json!([{"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
                       "name": "gone", "uid": "00000000-0000-0000-0000-000000000000"}]);
    owned_by(&c, "99-owned-by-nothing", &gone).await;
    c.wait_for("the garbage collector deleted 99-owned-by-nothing", WAIT, |s| {
        !s.machine_configs.contains_key("99-owned-by-nothing")
    })
    .await;
    assert!(c.server.hub.state().nodes.contains_key("w0"));
    // Nor is a Node deleted with an owner that is: a pool deleted (Background) takes the
    // MachineConfig it owns along, never the Node.
    let special = c.server.hub.state().pools["special"].metadata.uid.clone().unwrap();
    let owner = json!([{"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
                        "name": "special", "uid": special}]);
    owned_by(&c, "99-owned-by-special", &owner).await;
    let admin = c.server.admin_token().unwrap();
    let (code, st) = send(
        &c,
        &admin,
        "DELETE",
        "/apis/machineconfiguration.openshift.io/v1/machineconfigpools/special",
        JSON,
        &json!({"propagationPolicy": "Background"}),
    )
    .await;
    assert_eq!(code, 200, "{st}");
    let s = c.server.hub.state();
    assert!(!s.machine_configs.contains_key("99-owned-by-special"));
    assert!(s.nodes.contains_key("w0"));

    // Deleted by the admin, the node registers again: into the pool its token says, never
    // another.
    let (code, st) = send(&c, &admin, "DELETE", "/api/v1/nodes/w0", JSON, &json!({})).await;
    assert_eq!(code, 200, "{st}");
    let body = node(
        "w0",
        json!({"labels": {"node-role.kubernetes.io/master": ""}}),
        json!({}),
    );
    let r = send(&c, &w0, "POST", "/api/v1/nodes", JSON, &body).await;
    assert_forbidden(
        "re-created as a master",
        r,
        "w0",
        "node \"w0\" is not allowed to set the following labels: node-role.kubernetes.io/master",
    );
    let (code, st) = send(
        &c,
        &w0,
        "PATCH",
        "/api/v1/nodes/w0?fieldManager=mcd",
        APPLY,
        &node(
            "w0",
            json!({"labels": {"node-role.kubernetes.io/worker": ""}}),
            json!({}),
        ),
    )
    .await;
    assert_eq!(code, 201, "{st}");
    assert_eq!(st["metadata"]["labels"], role);
    assert!(st["metadata"]["ownerReferences"].is_null());

    // The admin decides: labelling the Node moves it.
    let (code, st) = send(
        &c,
        &admin,
        "PATCH",
        "/api/v1/nodes/w0",
        MERGE,
        &json!({"metadata": {"labels": {"example.com/special": "yes"}}}),
    )
    .await;
    assert_eq!(code, 200, "{st}");

    // Token labels are for node tokens, and valid labels.
    for spec in [
        json!({"kind": "reader", "labels": {"a": "b"}}),
        json!({"kind": "node", "node": "w1", "labels": {"bad key!": ""}}),
        json!({"kind": "node", "node": "w1", "labels": {"a": 5}}),
    ] {
        let (code, st) = send(
            &c,
            &admin,
            "POST",
            "/apis/auth.mco.dev/v1/tokens",
            JSON,
            &json!({"spec": spec}),
        )
        .await;
        assert_eq!(code, 400, "{spec}: {st}");
    }
    c.stop().await;
}

/// `mco token create --kind node --label ...` records the labels; `mco token list` shows them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mco_token_create_records_a_nodes_labels() {
    let c = Cluster::start(0, 0).await;
    let admin = c.server.admin_token().unwrap();
    let run = |args: Vec<&'static str>| {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"))
            .args(args)
            .env("MCO_SERVER", c.server.url())
            .env("MCO_TOKEN", &admin)
            .env("KUBECONFIG", "/nonexistent")
            .stdin(std::process::Stdio::null())
            .output()
    };
    let o = run(vec![
        "token",
        "create",
        "--kind",
        "node",
        "--node",
        "w1",
        "--label",
        "node-role.kubernetes.io/infra=",
        "--label",
        "example.com/rack=r1",
    ])
    .await
    .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let secret = String::from_utf8(o.stdout).unwrap().trim().to_string();
    let record = c
        .server
        .hub
        .state()
        .tokens
        .values()
        .find(|t| t.node.as_deref() == Some("w1"))
        .cloned()
        .unwrap();
    assert_eq!(
        record.labels,
        [
            ("example.com/rack".to_string(), "r1".to_string()),
            ("node-role.kubernetes.io/infra".to_string(), String::new())
        ]
        .into()
    );
    let o = run(vec!["token", "list"]).await.unwrap();
    let list = String::from_utf8(o.stdout).unwrap();
    assert!(
        list.lines()
            .any(|l| l.contains("system:node:w1") && l.contains("example.com/rack=r1,node-role.kubernetes.io/infra=")),
        "{list}"
    );
    let o = run(vec!["token", "create", "--kind", "reader", "--label", "a=b"])
        .await
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--label is only for node tokens"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = run(vec![
        "token", "create", "--kind", "node", "--node", "w2", "--label", "nokey",
    ])
    .await
    .unwrap();
    assert!(!o.status.success());
    // The node registers into the pool its token names.
    let (code, st) = send(
        &c,
        &secret,
        "POST",
        "/api/v1/nodes",
        JSON,
        &node("w1", json!({}), json!({})),
    )
    .await;
    assert_eq!(code, 201, "{st}");
    assert_eq!(st["metadata"]["labels"]["node-role.kubernetes.io/infra"], "");
    c.stop().await;
}

/// Path tricks (`..`, `.`, encoded slashes and dots, NUL, bad escapes) on every route, by every
/// method, as every kind of identity: a 4xx or a 2xx, never a 5xx. `/config/../api/v1/nodes`
/// with a bootstrap token (it answered 500) is 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_tricks_are_never_a_server_error() {
    let c = Cluster::start(0, 0).await;
    let admin = c.server.admin_token().unwrap();
    let mut tokens = vec![admin.clone()];
    for spec in [
        json!({"kind": "bootstrap"}),
        json!({"kind": "reader"}),
        json!({"kind": "node", "node": "w0"}),
    ] {
        let t: Value = c
            .client
            .post_path("/apis/auth.mco.dev/v1/tokens", &json!({"spec": spec}))
            .await
            .unwrap();
        tokens.push(t["status"]["token"].as_str().unwrap().to_string());
    }
    // Raw bytes on the wire: an HTTP client would normalize the `..` away.
    let addr = c.server.addr;
    let bootstrap = tokens[1].clone();
    assert_eq!(
        raw_request(addr, "GET", "/config/../api/v1/nodes", &bootstrap).await,
        (
            400,
            "the path element \"..\" cannot be part of a pool's path".to_string()
        )
    );
    let routes = [
        "/config/worker",
        "/config",
        "/api/v1/nodes",
        "/api/v1/nodes/w0",
        "/api/v1/nodes/w0/status",
        "/api/v1/namespaces/default/events",
        "/apis/machineconfiguration.openshift.io/v1/machineconfigs",
        "/apis/machineconfiguration.openshift.io/v1/machineconfigpools/worker/status",
        "/apis/history.mco.dev/v1/events",
        "/apis/history.mco.dev/v1/diffs",
        "/apis/history.mco.dev/v1/rollbacks",
        "/apis/auth.mco.dev/v1/tokens",
        "/apis/metrics.mco.dev/v1/reports",
        "/openapi/v3/apis/machineconfiguration.openshift.io/v1",
        "/ui",
        "/metrics",
    ];
    let tricks = [
        "/..",
        "/../..",
        "/../../api/v1/nodes",
        "/.",
        "/%2e%2e",
        "/%2E%2e/x",
        "/%2f",
        "%2f..",
        "/a%2fb",
        "/a%5cb",
        "/%00",
        "/%ff",
        "/%",
        "/%zz",
        "//",
        "/./.",
    ];
    for route in routes {
        for trick in tricks {
            for method in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
                for token in &tokens {
                    let path = format!("{route}{trick}");
                    let (code, _) = raw_request(addr, method, &path, token).await;
                    assert!(code < 500, "{method} {path}: {code}");
                }
            }
        }
    }
    assert_eq!(c.server.take_handler_panics(), 0);
    c.stop().await;
}

/// Sends one HTTP/1.1 request with `path` exactly as given: (status code, body).
async fn raw_request(addr: std::net::SocketAddr, method: &str, path: &str, token: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = "{}";
    let req = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {token}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let _ = s.read_to_end(&mut head).await;
    let text = String::from_utf8_lossy(&head);
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("{method} {path}: no status line in {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}
