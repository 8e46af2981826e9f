//! API conformance with kube-apiserver, over a real server on 127.0.0.1:0 (issue 28): the
//! answers real clients rely on, each taken from Kubernetes' source.

mod common;

use common::*;
use serde_json::{json, Value};

const MCS: &str = "/apis/machineconfiguration.openshift.io/v1/machineconfigs";

fn mc(name: &str) -> Value {
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"kernelArguments": ["quiet"], "config": {"ignition": {"version": "3.4.0"}}}})
}

async fn send(
    s: &mco::server::RunningServer,
    method: reqwest::Method,
    path: &str,
    content_type: &str,
    body: Value,
) -> (u16, Value) {
    let resp = s
        .admin_http()
        .request(method, format!("{}{path}", s.url()))
        .header("content-type", content_type)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let code = resp.status().as_u16();
    (code, resp.json().await.unwrap_or(Value::Null))
}

async fn get(s: &mco::server::RunningServer, path: &str) -> (u16, Value) {
    let resp = s.admin_http().get(format!("{}{path}", s.url())).send().await.unwrap();
    let code = resp.status().as_u16();
    (code, resp.json().await.unwrap_or(Value::Null))
}

/// A patch whose result equals the stored object is not a write: kube-apiserver's store skips
/// it (`staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go` `GuaranteedUpdate`: the new
/// bytes equal the stored ones), so the resourceVersion, the generation and the log stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_op_write_appends_nothing_on_every_verb() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_server(dir.path()).await;
    let (code, created) = send(&s, reqwest::Method::POST, MCS, "application/json", mc("99-noop")).await;
    assert_eq!(code, 201, "{created}");
    let path = format!("{MCS}/99-noop");
    let (_, stored) = get(&s, &path).await;
    let writes = [
        (
            "merge",
            "application/merge-patch+json",
            json!({"spec": {"kernelArguments": ["quiet"]}}),
        ),
        (
            "json",
            "application/json-patch+json",
            json!([{"op": "replace", "path": "/spec/kernelArguments/0", "value": "quiet"}]),
        ),
        (
            "labels",
            "application/merge-patch+json",
            json!({"metadata": {"labels": {"machineconfiguration.openshift.io/role": "worker"}}}),
        ),
    ];
    for (what, ct, body) in writes {
        let (code, out) = send(&s, reqwest::Method::PATCH, &path, ct, body).await;
        assert_eq!(code, 200, "{what}: {out}");
        assert_eq!(out, stored, "{what}: a no-op patch answers the stored object as it was");
    }
    // A PUT of the object as read is no write either, nor one of the manifest with only the
    // resourceVersion (custom resources need it on update): kube-apiserver keeps the stored
    // system fields (`rest.BeforeUpdate`) and managed fields (`managedfields`, `decodeLiveOrNew`).
    let mut bare = mc("99-noop");
    bare["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"].clone();
    for body in [stored.clone(), bare] {
        let (code, out) = send(&s, reqwest::Method::PUT, &path, "application/json", body).await;
        assert_eq!(code, 200, "{out}");
        assert_eq!(out, stored, "put: the stored object as it was");
    }
    let events: Vec<_> = s
        .hub
        .store()
        .object_seqs("MachineConfig", "99-noop", 0, s.hub.published_seq())
        .unwrap();
    assert_eq!(events.len(), 1, "only the create is in the log: {events:?}");

    // The same server-side apply again, a second later: only the entry's time would move, and
    // Kubernetes keeps the old one (`IgnoreManagedFieldsTimestampsTransformer`).
    let apply = format!("{path}?fieldManager=tester");
    let (code, first) = send(
        &s,
        reqwest::Method::PATCH,
        &apply,
        "application/apply-patch+yaml",
        mc("99-noop"),
    )
    .await;
    assert_eq!(code, 200, "{first}");
    let second_of = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    let t0 = second_of();
    while second_of() == t0 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (code, again) = send(
        &s,
        reqwest::Method::PATCH,
        &apply,
        "application/apply-patch+yaml",
        mc("99-noop"),
    )
    .await;
    assert_eq!(code, 200, "{again}");
    assert_eq!(again, first, "the same apply a second later changes nothing");

    // The other kinds: a pool, a Node (strategic merge too), a KubeletConfig (stored as JSON).
    let kc = json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "KubeletConfig",
        "metadata": {"name": "max-pods"},
        "spec": {"machineConfigPoolSelector": {"matchLabels": {"pools.operator.machineconfiguration.openshift.io/nobody": ""}},
                 "kubeletConfig": {"maxPods": 300}}});
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "noop-node", "labels": {"a": "b"}}});
    let kcs = "/apis/machineconfiguration.openshift.io/v1/kubeletconfigs";
    for (list, obj) in [(kcs, kc), ("/api/v1/nodes", node)] {
        let (code, out) = send(&s, reqwest::Method::POST, list, "application/json", obj.clone()).await;
        assert_eq!(code, 201, "{out}");
    }
    let cases = [
        (
            format!("{kcs}/max-pods"),
            "application/merge-patch+json",
            json!({"spec": {"kubeletConfig": {"maxPods": 300}}}),
        ),
        (
            "/api/v1/nodes/noop-node".to_string(),
            "application/merge-patch+json",
            json!({"metadata": {"labels": {"a": "b"}}}),
        ),
        (
            "/api/v1/nodes/noop-node".to_string(),
            "application/strategic-merge-patch+json",
            json!({"metadata": {"labels": {"a": "b"}}}),
        ),
        (
            "/apis/machineconfiguration.openshift.io/v1/machineconfigpools/worker".to_string(),
            "application/merge-patch+json",
            json!({"spec": {"paused": false}}),
        ),
    ];
    for (path, ct, body) in cases {
        // Controllers may write the object's status at any time (a KubeletConfig's
        // conditions): what must not appear is a write by this client.
        let (_, stored) = get(&s, &path).await;
        let before = s.hub.published_seq();
        let (code, out) = send(&s, reqwest::Method::PATCH, &path, ct, body).await;
        assert_eq!(code, 200, "{path}: {out}");
        let name = out["metadata"]["name"].as_str().unwrap().to_string();
        let by_client: Vec<_> = s
            .hub
            .store()
            .read_range(before, s.hub.published_seq())
            .map(|e| e.unwrap())
            .filter(|e| e.name == name && e.actor == "admin")
            .collect();
        assert!(by_client.is_empty(), "{path} {ct}: a no-op patch wrote {by_client:?}");
        assert_eq!(
            out["metadata"]["generation"], stored["metadata"]["generation"],
            "{path} {ct}"
        );
    }
    s.stop().await;
}

/// kubectl's own no-op writes (the same value patched again, applied again, labelled again)
/// append nothing: kubectl prints "(no change)" / "unchanged" and the resourceVersion stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_no_op_writes_append_nothing() {
    if !have_kubectl("kubectl_no_op_writes_append_nothing") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = start_server(dir.path()).await;
    let home = tempfile::tempdir().unwrap();
    let token = s.admin_token().unwrap();
    let file = home.path().join("mc.json");
    std::fs::write(&file, mc("99-kubectl-noop").to_string()).unwrap();
    let f = file.to_str().unwrap();
    let (ok, out, err) = kubectl_as(&s, home.path(), &token, &["apply", "-f", f]).await;
    assert!(ok, "{out}{err}");
    let rv = |s: &mco::server::RunningServer| {
        s.hub.state().machine_configs["99-kubectl-noop"]
            .metadata
            .resource_version
            .clone()
    };
    // The first server-side apply is a write (kubectl's Apply entry joins managedFields, as
    // in Kubernetes); the same apply again is not.
    let (ok, out, err) = kubectl_as(&s, home.path(), &token, &["apply", "--server-side", "-f", f]).await;
    assert!(ok, "{out}{err}");
    let before = rv(&s);
    for args in [
        vec!["apply", "--server-side", "-f", f],
        vec![
            "patch",
            "mc",
            "99-kubectl-noop",
            "--type=merge",
            "-p",
            r#"{"spec":{"kernelArguments":["quiet"]}}"#,
        ],
        vec![
            "patch",
            "mc",
            "99-kubectl-noop",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/kernelArguments/0","value":"quiet"}]"#,
        ],
        vec![
            "label",
            "--overwrite",
            "mc",
            "99-kubectl-noop",
            "machineconfiguration.openshift.io/role=worker",
        ],
        vec!["annotate", "mc", "99-kubectl-noop", "example.com/x-"],
    ] {
        let (ok, out, err) = kubectl_as(&s, home.path(), &token, &args).await;
        assert!(ok, "{args:?}: {out}{err}");
        assert_eq!(rv(&s), before, "{args:?} wrote: {out}{err}");
    }
    s.stop().await;
}

/// A client that names no field manager is recorded under its User-Agent's prefix
/// (kube-apiserver's `prefixFromUserAgent`), not a made-up name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_field_manager_is_the_user_agent_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_server(dir.path()).await;
    for (i, (ua, want)) in [
        (Some("OpenAPI-Generator/33.1.0/python"), Some("OpenAPI-Generator")),
        (Some("kubectl/v1.33.0 (linux/amd64) kubernetes/abcdef"), Some("kubectl")),
        (Some("grafana"), Some("grafana")),
        (None, None),
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("99-ua-{i}");
        let mut r = s
            .admin_http()
            .post(format!("{}{MCS}", s.url()))
            .header("content-type", "application/json")
            .body(mc(&name).to_string());
        // reqwest sends no User-Agent unless told to.
        if let Some(ua) = ua {
            r = r.header("user-agent", ua);
        }
        let resp = r.send().await.unwrap();
        assert_eq!(resp.status(), 201);
        let created: Value = resp.json().await.unwrap();
        let entry = &created["metadata"]["managedFields"][0];
        assert_eq!(entry["manager"].as_str(), want, "{ua:?}: {entry}");
        assert_eq!(entry["operation"], "Update");
    }
    s.stop().await;
}

/// `/version/` (the Python client's `VersionApi().get_code()`) answers as `/version`, without
/// credentials as kube-apiserver's `system:public-info-viewer` allows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_answers_with_and_without_the_trailing_slash() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_server(dir.path()).await;
    let anonymous = reqwest::Client::builder()
        .tls_backend_preconfigured(mco::tls::client_config(s.ca().as_ref()).unwrap())
        .build()
        .unwrap();
    let mut seen = Vec::new();
    for path in ["/version", "/version/"] {
        let resp = anonymous.get(format!("{}{path}", s.url())).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["major"], "1", "{path}: {v}");
        seen.push(v);
    }
    assert_eq!(seen[0], seen[1]);
    s.stop().await;
}

/// A Node as kube-apiserver serializes it: `spec: {}` and a status with `daemonEndpoints`
/// and `nodeInfo`, even when the writer sent neither (Go structs, not pointers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_always_has_a_spec_and_a_status() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_server(dir.path()).await;
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bare"}});
    let (code, created) = send(&s, reqwest::Method::POST, "/api/v1/nodes", "application/json", node).await;
    assert_eq!(code, 201, "{created}");
    let (_, got) = get(&s, "/api/v1/nodes/bare").await;
    for v in [&created, &got] {
        assert_eq!(v["spec"], json!({}), "{v}");
        assert_eq!(
            v["status"]["daemonEndpoints"],
            json!({"kubeletEndpoint": {"Port": 0}}),
            "{v}"
        );
        let info = &v["status"]["nodeInfo"];
        for key in [
            "machineID",
            "systemUUID",
            "bootID",
            "kernelVersion",
            "osImage",
            "containerRuntimeVersion",
            "kubeletVersion",
            "kubeProxyVersion",
            "operatingSystem",
            "architecture",
        ] {
            assert_eq!(info[key], "", "{key}: {v}");
        }
    }
    let (_, list) = get(&s, "/api/v1/nodes").await;
    assert_eq!(list["items"][0]["spec"], json!({}));
    s.stop().await;
}

/// `--field-selector spec.unschedulable=true`, the usual way to list cordoned nodes, and
/// kube-apiserver's refusal of a field a kind does not offer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_select_on_spec_unschedulable() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_server(dir.path()).await;
    for (name, spec) in [
        ("n-cordoned", json!({"unschedulable": true})),
        ("n-open", json!({})),
        ("n-false", json!({"unschedulable": false})),
    ] {
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec});
        let (code, out) = send(&s, reqwest::Method::POST, "/api/v1/nodes", "application/json", node).await;
        assert_eq!(code, 201, "{out}");
    }
    let names = |v: &Value| -> Vec<String> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    for (selector, want) in [
        ("spec.unschedulable=true", vec!["n-cordoned"]),
        ("spec.unschedulable==true", vec!["n-cordoned"]),
        ("spec.unschedulable!=true", vec!["n-false", "n-open"]),
        ("spec.unschedulable=false", vec!["n-false", "n-open"]),
        ("spec.unschedulable=false,metadata.name!=n-open", vec!["n-false"]),
    ] {
        let (code, list) = get(&s, &format!("/api/v1/nodes?fieldSelector={selector}")).await;
        assert_eq!(code, 200, "{selector}: {list}");
        assert_eq!(names(&list), want, "{selector}");
    }
    for (path, field) in [
        ("/api/v1/nodes?fieldSelector=spec.podCIDR=x", "spec.podCIDR"),
        (
            &format!("{MCS}?fieldSelector=spec.unschedulable=true") as &str,
            "spec.unschedulable",
        ),
    ] {
        let (code, status) = get(&s, path).await;
        assert_eq!(code, 400, "{path}: {status}");
        assert_eq!(
            status["message"],
            format!("field label not supported: {field}"),
            "{path}"
        );
    }
    if have_kubectl("nodes_select_on_spec_unschedulable (kubectl part)") {
        let home = tempfile::tempdir().unwrap();
        let token = s.admin_token().unwrap();
        let (ok, out, err) = kubectl_as(
            &s,
            home.path(),
            &token,
            &[
                "get",
                "nodes",
                "--field-selector",
                "spec.unschedulable=true",
                "-o",
                "name",
            ],
        )
        .await;
        assert!(ok, "{err}");
        assert_eq!(out.trim(), "node/n-cordoned");
    }
    s.stop().await;
}

/// The status codes kube-apiserver gives: a JSON patch that does not apply is 422 (its
/// `applyJSPatch`), an update of an object that does not exist is 404 (no create on update),
/// whatever the body holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patches_that_do_not_apply_are_422_and_updates_of_missing_objects_404() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_server(dir.path()).await;
    let (code, _) = send(&s, reqwest::Method::POST, MCS, "application/json", mc("99-codes")).await;
    assert_eq!(code, 201);
    let path = format!("{MCS}/99-codes");
    // The cause worded as evanphx/json-patch, kube-apiserver's JSON patch library, words it
    // (`patch.go`: `testing value %s failed` wrapping ErrTestFailed, `error in remove for path`
    // wrapping partialDoc's `Unable to remove nonexistent key` / partialArray's `Unable to
    // access invalid index`, and `… operation does not apply: doc is missing path` wrapping
    // ErrMissing); `None`: any message.
    for (ops, want_cause) in [
        (
            json!([{"op": "test", "path": "/spec/kernelArguments/0", "value": "loud"}]),
            Some("testing value /spec/kernelArguments/0 failed: test failed"),
        ),
        (
            json!([{"op": "test", "path": "/spec/nope/0", "value": "x"}]),
            Some("test operation does not apply: is missing path: /spec/nope/0: missing value"),
        ),
        (
            json!([{"op": "remove", "path": "/spec/osImageURL"}]),
            Some("error in remove for path: '/spec/osImageURL': Unable to remove nonexistent key: osImageURL: missing value"),
        ),
        (
            json!([{"op": "remove", "path": "/spec/kernelArguments/3"}]),
            Some("error in remove for path: '/spec/kernelArguments/3': Unable to access invalid index: 3: invalid index referenced"),
        ),
        (
            json!([{"op": "remove", "path": "/spec/nope/x"}]),
            Some("remove operation does not apply: doc is missing path: \"/spec/nope/x\": missing value"),
        ),
        (
            json!([{"op": "add", "path": "/spec/nope/x", "value": 1}]),
            Some("add operation does not apply: doc is missing path: \"/spec/nope/x\": missing value"),
        ),
        // The document as the failing operation finds it: the first operation applied.
        (
            json!([{"op": "remove", "path": "/spec/kernelArguments"}, {"op": "test", "path": "/spec/kernelArguments", "value": ["quiet"]}]),
            Some("testing value /spec/kernelArguments failed: test failed"),
        ),
        (
            json!([{"op": "replace", "path": "/metadata/annotations/none", "value": "x"}]),
            None,
        ),
    ] {
        let (code, status) = send(
            &s,
            reqwest::Method::PATCH,
            &path,
            "application/json-patch+json",
            ops.clone(),
        )
        .await;
        assert_eq!(code, 422, "{ops}: {status}");
        assert_eq!(status["reason"], "Invalid");
        assert_eq!(
            status["message"],
            "the server rejected our request due to an error in our request"
        );
        let cause = &status["details"]["causes"][0];
        assert_eq!(cause["reason"], "UnexpectedServerResponse", "{status}");
        assert!(!cause["message"].as_str().unwrap().is_empty(), "{status}");
        if let Some(want) = want_cause {
            assert_eq!(cause["message"], want, "{ops}");
        }
    }
    let (_, stored) = get(&s, &path).await;
    assert_eq!(stored["metadata"]["generation"], 1, "nothing was written");

    let mut with_rv = mc("99-missing");
    with_rv["metadata"]["resourceVersion"] = json!("5");
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "missing"}});
    for (path, body) in [
        (format!("{MCS}/99-missing"), mc("99-missing")),
        (format!("{MCS}/99-missing"), with_rv),
        ("/api/v1/nodes/missing".to_string(), node),
    ] {
        let (code, status) = send(&s, reqwest::Method::PUT, &path, "application/json", body).await;
        assert_eq!(code, 404, "{path}: {status}");
        assert_eq!(status["reason"], "NotFound", "{path}");
    }
    s.stop().await;
}

/// A watch of core Events without a resourceVersion first sends the Events a list returns now
/// (Kubernetes' "get state and start at most recent"), then the new ones; discovery says
/// Events can be watched and lists both self reviews.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_events_watch_starts_with_the_current_events() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_server(dir.path()).await;
    let (code, _) = send(&s, reqwest::Method::POST, MCS, "application/json", mc("99-watched")).await;
    assert_eq!(code, 201);
    let selector = "fieldSelector=involvedObject.name=99-watched";
    let (_, list) = get(&s, &format!("/api/v1/events?{selector}")).await;
    let listed: Vec<Value> = list["items"].as_array().unwrap().clone();
    assert!(!listed.is_empty(), "{list}");

    let mut resp = s
        .admin_http()
        .get(format!("{}/api/v1/events?watch=true&{selector}", s.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    // A change after the watch began: its Event follows the initial ones.
    let patch = json!({"spec": {"kernelArguments": ["quiet", "loud"]}});
    let (code, _) = send(
        &s,
        reqwest::Method::PATCH,
        &format!("{MCS}/99-watched"),
        "application/merge-patch+json",
        patch,
    )
    .await;
    assert_eq!(code, 200);
    let mut lines: Vec<Value> = Vec::new();
    let mut buf = String::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while lines.len() < listed.len() + 1 {
        let chunk = tokio::time::timeout_at(deadline, resp.chunk())
            .await
            .expect("the watch sent the initial Events and the new one within 20 s")
            .unwrap()
            .expect("the stream stays open");
        buf.push_str(std::str::from_utf8(&chunk).unwrap());
        while let Some(i) = buf.find('\n') {
            lines.push(serde_json::from_str(&buf[..i]).unwrap());
            buf.drain(..=i);
        }
    }
    for (line, item) in lines.iter().zip(&listed) {
        assert_eq!(line["type"], "ADDED");
        assert_eq!(&line["object"], item, "the initial state is what the list returned");
    }
    let last = &lines[listed.len()];
    assert_eq!(last["type"], "ADDED");
    assert_eq!(last["object"]["involvedObject"]["name"], "99-watched");
    assert!(!listed.contains(&last["object"]), "the new Event is new: {last}");

    let (_, core) = get(&s, "/api/v1").await;
    let events = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "events")
        .unwrap();
    assert_eq!(events["verbs"], json!(["get", "list", "watch"]));
    let (_, authz) = get(&s, "/apis/authorization.k8s.io/v1").await;
    let names: Vec<&str> = authz["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]);
    s.stop().await;
}

/// `/metrics` negotiates its format as kube-apiserver does: OpenMetrics when the scrape asks
/// for it (Prometheus does), Prometheus text 0.0.4 otherwise; the text passes
/// `promtool check metrics` (Debian's `prometheus` package, installed by `.ci/run`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_answer_in_the_format_asked_for_and_pass_promtool() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_server(dir.path()).await;
    let (code, _) = send(&s, reqwest::Method::POST, MCS, "application/json", mc("99-metrics")).await;
    assert_eq!(code, 201);
    let scrape = |accept: Option<&'static str>| {
        let mut r = s.admin_http().get(format!("{}/metrics", s.url()));
        if let Some(a) = accept {
            r = r.header("accept", a);
        }
        async move {
            let resp = r.send().await.unwrap();
            let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
            (ct, resp.text().await.unwrap())
        }
    };
    let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    let (ct, om) = scrape(Some(prometheus)).await;
    assert!(ct.starts_with("application/openmetrics-text; version=1.0.0"), "{ct}");
    assert!(om.ends_with("# EOF\n"));
    for accept in [None, Some("text/plain;version=0.0.4"), Some("*/*")] {
        let (ct, text) = scrape(accept).await;
        assert_eq!(ct, "text/plain; version=0.0.4; charset=utf-8", "{accept:?}");
        assert!(!text.contains("# EOF"), "{accept:?}");
        assert!(
            text.contains("# TYPE mco_store_events_appended_total counter\n"),
            "{text}"
        );
        assert!(!text.contains("..\n"), "a HELP text with a second full stop: {text}");
    }
    let (_, text) = scrape(None).await;
    let promtool = std::process::Command::new("promtool").arg("--version").output();
    if promtool.is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "promtool is not installed (Debian package prometheus): .ci/run installs it"
        );
        eprintln!("SKIPPED the promtool part: promtool is not on PATH (apt-get install prometheus)");
    } else {
        let mut child = std::process::Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // 0: clean; 3: lint findings only (1 would be a parse error). The only findings allowed
        // are on MCO's own metric names, kept as MCO exports them so its alert rules and
        // dashboards work (`pkg/controller/common/metrics.go`: mco_machine_count, ...).
        assert!(
            matches!(out.status.code(), Some(0 | 3)),
            "promtool check metrics: {said}\n{text}"
        );
        let mcos_names = [
            "mco_machine_count",
            "mco_updated_machine_count",
            "mco_degraded_machine_count",
            "mco_unavailable_machine_count",
        ];
        for finding in said.lines().filter(|l| !l.trim().is_empty()) {
            assert!(
                mcos_names.iter().any(|n| finding.starts_with(&format!(
                    "{n} non-histogram and non-summary metrics should not have \"_count\" suffix"
                ))),
                "promtool finding on a name mco chose: {finding}\n{said}"
            );
        }
    }
    s.stop().await;
}

/// `kubectl get all` finds the `all` category (pods, always empty here) and says there is
/// nothing, as against a cluster with no workloads, instead of an unknown resource type.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_all_finds_no_resources() {
    if !have_kubectl("kubectl_get_all_finds_no_resources") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = start_server(dir.path()).await;
    let home = tempfile::tempdir().unwrap();
    let token = s.admin_token().unwrap();
    let (ok, out, err) = kubectl_as(&s, home.path(), &token, &["get", "all"]).await;
    assert!(ok, "{out}{err}");
    assert!(err.contains("No resources found"), "{out}{err}");
    s.stop().await;
}
