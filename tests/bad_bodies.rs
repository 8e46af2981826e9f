//! No handler can panic (issue 23, item 8), over a real server on 127.0.0.1:0: every body of
//! the wrong JSON type (array, string, number, bool, null) and objects of the wrong shape, on
//! every verb that takes a body (POST, PUT, the status subresource, each PATCH type, server-side
//! apply, DELETE with DeleteOptions, the token API, the self reviews, rollbacks, previews,
//! compactions, daemon reports), on objects that exist and that do not, is a 4xx Status that
//! names the problem, and changes nothing. A handler that panics anyway is answered 500
//! InternalError and counted in `mco_api_handler_panics_total`; a debug build's server then
//! fails its test when dropped (`RunningServer`'s drop).

mod common;

use common::*;
use mco::model::Kind;
use serde_json::{json, Value};

/// Sends `method path` with `body` as `content_type` as the admin: (status, JSON body or the
/// text as a string).
async fn send(c: &Cluster, method: &str, path: &str, content_type: &str, body: &str) -> (u16, Value) {
    let resp = c
        .server
        .admin_http()
        .request(method.parse().unwrap(), format!("{}{path}", c.server.url()))
        .header("content-type", content_type)
        .body(body.to_string())
        .send()
        .await
        .unwrap_or_else(|e| panic!("{method} {path} {body}: no answer ({e}): did the handler panic?"));
    let code = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (code, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The collection a kind's objects are created in: a namespaced kind's in `kube-node-lease`.
fn collection(c: &Cluster, k: Kind) -> String {
    if k.is_namespaced() {
        c.client.namespaced_collection_path(k, mco::model::NODE_LEASE_NAMESPACE)
    } else {
        c.client.collection_path(k)
    }
}

/// Asserts a 4xx Kubernetes Status whose message is not empty, and contains `names` when given.
fn assert_refused(what: &str, code: u16, status: &Value, names: Option<&str>) {
    assert!((400..500).contains(&code), "{what}: {code} {status}");
    assert_eq!(status["kind"], "Status", "{what}: {status}");
    assert_eq!(status["code"], code, "{what}: {status}");
    let message = status["message"].as_str().unwrap_or("");
    assert!(!message.is_empty(), "{what}: {status}");
    if let Some(n) = names {
        assert!(message.contains(n), "{what}: the message names {n:?}: {message}");
    }
}

const APPLY: &str = "application/apply-patch+yaml";
const MERGE: &str = "application/merge-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const JSON: &str = "application/json";

/// Bodies of the wrong JSON type, with the type Go's decoder names.
const WRONG_TYPES: [(&str, &str); 6] = [
    ("[]", "array"),
    ("[{}]", "array"),
    ("\"x\"", "string"),
    ("5", "number"),
    ("true", "bool"),
    ("null", "null"),
];

/// Objects of the wrong shape: each must be refused wherever an object of a kind is written.
const WRONG_SHAPES: [&str; 7] = [
    r#"{"metadata": []}"#,
    r#"{"metadata": "x"}"#,
    r#"{"metadata": 5}"#,
    r#"{"metadata": {"labels": []}}"#,
    r#"{"metadata": {"annotations": "x"}}"#,
    r#"{"metadata": {"name": 5}}"#,
    r#"{"spec": "x"}"#,
];

/// JSON patches that turn an object into the wrong type or shape.
const WRONG_JSON_PATCHES: [&str; 7] = [
    "[5]",
    "[\"x\"]",
    "[[]]",
    r#"[{"op": "replace", "path": "", "value": []}]"#,
    r#"[{"op": "replace", "path": "", "value": "x"}]"#,
    r#"[{"op": "add", "path": "/metadata", "value": 5}]"#,
    r#"[{"op": "add", "path": "/metadata/labels", "value": "x"}]"#,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_of_the_wrong_type_are_a_4xx_naming_the_problem_on_every_verb() {
    let c = Cluster::start(0, 0).await;
    c.client
        .create(
            Kind::MachineConfig,
            &json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
                "metadata": {"name": "99-bodies", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
                "spec": {"config": {"ignition": {"version": "3.4.0"}}}}),
            None,
        )
        .await
        .unwrap();
    c.client
        .create(
            Kind::Node,
            &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}),
            None,
        )
        .await
        .unwrap();
    let before = c.server.hub.published_seq();

    // Every kind's collection and a missing object; the objects that exist.
    let mut objects: Vec<(Kind, String)> = Vec::new();
    for k in Kind::ALL {
        objects.push((k, format!("{}/missing", collection(&c, k))));
    }
    objects.push((
        Kind::MachineConfig,
        format!("{}/99-bodies", c.client.collection_path(Kind::MachineConfig)),
    ));
    objects.push((
        Kind::MachineConfigPool,
        format!("{}/worker", c.client.collection_path(Kind::MachineConfigPool)),
    ));
    objects.push((Kind::Node, "/api/v1/nodes/n1".to_string()));

    for (body, ty) in WRONG_TYPES {
        let names = format!("cannot unmarshal {ty}");
        let names = Some(names.as_str());
        for k in Kind::ALL {
            let path = collection(&c, k);
            let (code, st) = send(&c, "POST", &path, JSON, body).await;
            assert_refused(&format!("POST {path} {body}"), code, &st, names);
        }
        for (kind, path) in &objects {
            let status_path = format!("{path}/status");
            let mut calls = vec![
                ("PUT", path.clone(), JSON),
                ("PATCH", path.clone(), MERGE),
                ("PATCH", path.clone(), APPLY),
                ("DELETE", path.clone(), JSON),
            ];
            if kind.info().status {
                calls.push(("PUT", status_path.clone(), JSON));
                calls.push(("PATCH", status_path.clone(), MERGE));
            }
            if *kind == Kind::Node {
                calls.push(("PATCH", path.clone(), STRATEGIC));
            }
            if !body.starts_with('[') {
                calls.push(("PATCH", path.clone(), JSON_PATCH));
            }
            for (method, p, ct) in calls {
                let what = format!("{method} {p} ({ct}) {body}");
                let (code, st) = send(&c, method, &format!("{p}?fieldManager=t"), ct, body).await;
                assert_refused(&what, code, &st, names);
            }
        }
        for path in [
            "/apis/auth.mco.dev/v1/tokens",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            "/apis/history.mco.dev/v1/rollbacks",
            "/apis/history.mco.dev/v1/previews",
            "/apis/history.mco.dev/v1/store/compactions",
            mco::protocol::REPORTS_PATH,
        ] {
            let (code, st) = send(&c, "POST", path, JSON, body).await;
            assert_refused(&format!("POST {path} {body}"), code, &st, names);
        }
    }

    // The body the fuzz run found: server-side apply of `[]`, on a missing and an existing
    // object, refused with kube-apiserver's decoding error (it panicked, and answered 200).
    for name in ["missing", "99-bodies"] {
        let path = format!(
            "{}/{name}?fieldManager=t",
            c.client.collection_path(Kind::MachineConfig)
        );
        let (code, st) = send(&c, "PATCH", &path, APPLY, "[]").await;
        assert_eq!(
            (code, st["message"].as_str().unwrap_or("")),
            (
                400,
                "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}"
            ),
            "{st}"
        );
    }

    // Objects of the wrong shape, wherever an object is written.
    for body in WRONG_SHAPES {
        for k in Kind::ALL {
            let path = collection(&c, k);
            let (code, st) = send(&c, "POST", &path, JSON, body).await;
            assert_refused(&format!("POST {path} {body}"), code, &st, None);
        }
        for (kind, path) in &objects {
            let mut calls = vec![("PUT", JSON), ("PATCH", MERGE), ("PATCH", APPLY)];
            if *kind == Kind::Node {
                calls.push(("PATCH", STRATEGIC));
            }
            for (method, ct) in calls {
                let what = format!("{method} {path} ({ct}) {body}");
                let (code, st) = send(&c, method, &format!("{path}?fieldManager=t"), ct, body).await;
                assert_refused(&what, code, &st, None);
                let metadata_not_an_object = ["[]", "\"x\"", "5"]
                    .iter()
                    .any(|m| body == format!(r#"{{"metadata": {m}}}"#));
                // (A merge patch of a missing object is NotFound first, as in Kubernetes.)
                if metadata_not_an_object && code != 404 {
                    assert!(st["message"].as_str().unwrap().contains("metadata"), "{what}: {st}");
                }
            }
        }
        let preview =
            format!(r#"{{"apply": [{{"kind": "MachineConfig", "metadata": {{"name": "99-bodies"}}}}, {body}]}}"#);
        let (code, st) = send(&c, "POST", "/apis/history.mco.dev/v1/previews", JSON, &preview).await;
        assert_refused(&format!("preview {preview}"), code, &st, None);
    }
    for body in WRONG_SHAPES.iter().filter(|b| b.starts_with(r#"{"metadata""#)) {
        // With a kind, as `mco apply --dry-run` sends them: into the hub's own checks.
        for kind in ["MachineConfig", "Node"] {
            let mut obj: Value = serde_json::from_str(body).unwrap();
            obj["kind"] = json!(kind);
            let preview = json!({"apply": [obj]}).to_string();
            let (code, st) = send(&c, "POST", "/apis/history.mco.dev/v1/previews", JSON, &preview).await;
            assert_refused(&format!("preview {preview}"), code, &st, None);
        }
    }
    for (_, path) in &objects {
        for body in WRONG_JSON_PATCHES {
            let what = format!("JSON patch {path} {body}");
            let (code, st) = send(&c, "PATCH", path, JSON_PATCH, body).await;
            assert_refused(&what, code, &st, None);
        }
    }

    // DeleteOptions of the wrong shape: refused, never a real delete (a dry run asked for as a
    // string must not delete).
    for body in [
        r#"{"dryRun": "All"}"#,
        r#"{"dryRun": [5]}"#,
        r#"{"propagationPolicy": 5}"#,
        r#"{"orphanDependents": "true"}"#,
        r#"{"preconditions": "x"}"#,
        r#"{"preconditions": {"uid": 5}}"#,
        r#"{"gracePeriodSeconds": "x"}"#,
    ] {
        for (_, path) in objects.iter().skip(Kind::ALL.len()) {
            let (code, st) = send(&c, "DELETE", path, JSON, body).await;
            assert_refused(&format!("DELETE {path} {body}"), code, &st, Some("DeleteOptions"));
        }
    }
    // Fields of the wrong type in mco's own requests and the reviews name the field.
    for (path, body, field) in [
        ("/apis/auth.mco.dev/v1/tokens", r#"{"spec": {"kind": 5}}"#, "spec.kind"),
        ("/apis/auth.mco.dev/v1/tokens", r#"{"spec": []}"#, "spec"),
        (
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            r#"{"spec": {"resourceAttributes": {"verb": 5}}}"#,
            "spec.resourceAttributes.verb",
        ),
        (
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            r#"{"spec": "x"}"#,
            "spec",
        ),
        ("/apis/history.mco.dev/v1/rollbacks", r#"{"pool": []}"#, "pool"),
        ("/apis/history.mco.dev/v1/previews", r#"{"apply": {}}"#, "apply"),
        (
            "/apis/history.mco.dev/v1/store/compactions",
            r#"{"before": 5}"#,
            "before",
        ),
        (mco::protocol::REPORTS_PATH, r#"{"node": "n1", "kind": 5}"#, "kind"),
    ] {
        let (code, st) = send(&c, "POST", path, JSON, body).await;
        assert_refused(&format!("POST {path} {body}"), code, &st, Some(field));
    }

    // Nothing was written by any of them (the controllers may have written meanwhile: only
    // the admin's events would be these requests'), and every object is still there.
    let written: Vec<_> = c
        .server
        .hub
        .store()
        .read_range(before, c.server.hub.published_seq())
        .map(|e| e.unwrap())
        .filter(|e| e.actor == "admin")
        .map(|e| format!("{} {} {}", e.event_type, e.object_kind, e.name))
        .collect();
    assert!(written.is_empty(), "{written:?}");
    let st = c.server.hub.state();
    assert!(
        st.machine_configs.contains_key("99-bodies") && st.nodes.contains_key("n1") && st.pools.contains_key("worker")
    );
    assert_eq!(c.server.take_handler_panics(), 0);
    c.stop().await;
}

/// The panic layer: a handler that panics (the failpoint `api::whoami::panic`, reached only by
/// a request with `x-mco-test-panic`) is answered with kube-apiserver's 500 InternalError
/// Status, counted in `/metrics`, and the server goes on serving.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_is_answered_500_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_server(dir.path()).await;
    let whoami = |panic: bool| {
        let mut r = s
            .admin_http()
            .post(format!("{}/apis/authentication.k8s.io/v1/selfsubjectreviews", s.url()))
            .header("content-type", JSON)
            .body("{}");
        if panic {
            r = r.header("x-mco-test-panic", "1");
        }
        r.send()
    };
    let panics = |text: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix("mco_api_handler_panics_total "))
            .map(|v| v.trim().to_string())
    };
    let metrics = || async {
        s.admin_http()
            .get(format!("{}/metrics", s.url()))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    assert_eq!(panics(&metrics().await).as_deref(), Some("0"));

    fail::cfg("api::whoami::panic", "panic").unwrap();
    let resp = whoami(true).await.unwrap();
    let code = resp.status().as_u16();
    let status: Value = resp.json().await.unwrap();
    fail::remove("api::whoami::panic");
    assert_eq!(
        (code, status),
        (
            500,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Internal error occurred: the request handler panicked (counted in mco_api_handler_panics_total)",
                "reason": "InternalError", "details": {}, "code": 500})
        )
    );
    assert_eq!(panics(&metrics().await).as_deref(), Some("1"));
    assert_eq!(whoami(false).await.unwrap().status(), 201);
    // Taken here, so that the server's drop does not fail this test for the panic it caused.
    assert_eq!(s.take_handler_panics(), 1);
    assert_eq!(s.take_handler_panics(), 0);
    s.stop().await;
}
