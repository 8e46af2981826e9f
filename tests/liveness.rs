//! Node liveness as Kubernetes does it (issue 27, item 6), over a real server on 127.0.0.1:0
//! and real `mco daemon` processes on temporary sandbox roots with node tokens: each daemon
//! renews its Lease `kube-node-lease/<node>` (served as kube-apiserver serves leases, readable
//! with kubectl); a killed daemon's node goes NotReady (Ready `Unknown`, `NodeStatusUnknown`)
//! once its lease is older than the grace period, and Ready again when it starts again; a
//! NotReady node counts unavailable, so with maxUnavailable 1 it blocks the next node's update;
//! a node may write only its own lease (NodeRestriction). The intervals are shortened by the
//! daemon's and the server's settings; every wait is for a condition, with a deadline.

mod common;

use common::*;
use mco::model::{Keys, Kind, NodeAnnotations};
use mco::server::{RunningServer, ServerConfig};
use mco::state::State;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The server's grace period in these tests, and the daemons' renewal interval.
const GRACE: Duration = Duration::from_secs(2);
const RENEW: &str = "200ms";
/// How long past the grace period a node may take to go NotReady (a pass, a flush).
const MARGIN: Duration = Duration::from_secs(5);
const WAIT: Duration = Duration::from_secs(60);
const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";

async fn server(dir: &Path) -> RunningServer {
    start_server_with(ServerConfig {
        data_dir: dir.to_path_buf(),
        node_monitor_grace_period: GRACE,
        ..Default::default()
    })
    .await
}

/// The daemon of `node`, supervised as `mco up` does (a reboot starts it again), renewing its
/// lease every [`RENEW`]; [`TestDaemon::kill`] powers the node off.
fn daemon(s: &RunningServer, dir: &Path, node: &mco::up::LocalNode, token_file: &Path) -> TestDaemon {
    TestDaemon::start_with_args(
        s.url(),
        node.clone(),
        dir.join("nodes").join(&node.name),
        dir.join("logs"),
        Some(token_file.to_path_buf()),
        vec!["--lease-renew-interval".into(), RENEW.into()],
    )
}

async fn token_file(s: &RunningServer, dir: &Path, node: &mco::up::LocalNode) -> PathBuf {
    mco::api::auth::ensure_node_token(&s.hub, dir, &node.name, &node.labels)
        .await
        .expect("node token issued")
}

/// Waits until `f(state)` holds, re-checking on every change; panics with `what`, the nodes'
/// conditions and the daemons' logs after `timeout`.
async fn wait_for(s: &RunningServer, dir: &Path, what: &str, timeout: Duration, f: impl Fn(&State) -> bool) {
    let mut changes = s.hub.changes();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if f(&s.hub.state()) {
            return;
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            let st = s.hub.state();
            let nodes: Vec<Value> = st
                .nodes
                .values()
                .map(|n| json!([n.metadata.name, n.status.as_ref().map(|s| &s.conditions)]))
                .collect();
            let logs: String = std::fs::read_dir(dir.join("logs"))
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
                .collect();
            panic!(
                "timed out after {timeout:?} waiting for: {what}\nnodes: {nodes:?}\nleases: {:?}\n{logs}",
                st.list_json(Kind::Lease)
            );
        }
        let _ = tokio::time::timeout(deadline - now, changes.changed()).await;
    }
}

fn lease(st: &State, node: &str) -> Option<Value> {
    st.get_json(Kind::Lease, &mco::model::node_lease_key(node))
}

/// The node's Ready condition as JSON (`Null` when it has none).
fn ready(st: &State, node: &str) -> Value {
    let n = st.get_json(Kind::Node, node).unwrap_or_default();
    n["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready").cloned())
        .unwrap_or_default()
}

fn is_done(st: &State, node: &str, keys: &Keys) -> bool {
    st.nodes.get(node).is_some_and(|n| {
        let a = NodeAnnotations::read(n, keys);
        a.state == "Done" && !a.current_config.is_empty() && a.current_config == a.desired_config
    })
}

/// A MicroTime as the API server writes it: RFC 3339, UTC, six fractional digits.
fn is_micro_time(v: &Value) -> bool {
    let s = v.as_str().unwrap_or("");
    s.len() == 27
        && s.ends_with('Z')
        && s.as_bytes()[19] == b'.'
        && s[20..26].bytes().all(|b| b.is_ascii_digit())
        && s.parse::<jiff::Timestamp>().is_ok()
}

/// A daemon's lease appears with the kubelet's fields, owned by its Node, and is renewed;
/// kubectl and the Table API print it as kube-apiserver does; killed, the daemon's node goes
/// NotReady after the grace period with kube's condition, counts unavailable in its pool, and
/// `mco get nodes` and kubectl say NotReady; started again, it is Ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_daemons_node_goes_not_ready_after_the_grace_period_and_ready_when_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path()).await;
    let node = mco::up::local_nodes(0, 1).remove(0);
    let token = token_file(&s, dir.path(), &node).await;
    let running = daemon(&s, dir.path(), &node, &token);

    wait_for(&s, dir.path(), "worker-0's lease, owned by its Node", WAIT, |st| {
        let Some(l) = lease(st, "worker-0") else { return false };
        let uid = st.nodes.get("worker-0").and_then(|n| n.metadata.uid.clone());
        uid.is_some() && l["metadata"]["ownerReferences"][0]["uid"].as_str() == uid.as_deref()
    })
    .await;
    let l = lease(&s.hub.state(), "worker-0").unwrap();
    assert_eq!(l["apiVersion"], "coordination.k8s.io/v1");
    assert_eq!(
        (l["metadata"]["namespace"].as_str(), l["metadata"]["name"].as_str()),
        (Some("kube-node-lease"), Some("worker-0"))
    );
    assert_eq!(l["spec"]["holderIdentity"], "worker-0");
    assert_eq!(l["spec"]["leaseDurationSeconds"], 40);
    assert!(is_micro_time(&l["spec"]["renewTime"]), "{l}");
    assert!(is_micro_time(&l["spec"]["acquireTime"]), "{l}");
    assert_eq!(
        (
            l["metadata"]["ownerReferences"][0]["kind"].as_str(),
            l["metadata"]["ownerReferences"][0]["apiVersion"].as_str()
        ),
        (Some("Node"), Some("v1"))
    );
    let first = l["spec"]["renewTime"].clone();
    wait_for(&s, dir.path(), "worker-0's lease renewed", WAIT, |st| {
        lease(st, "worker-0").is_some_and(|l| l["spec"]["renewTime"] != first)
    })
    .await;

    // Served as kube-apiserver serves leases: discovery, the object, the printer's Table.
    let http = s.admin_http();
    let get = |path: String, accept: &'static str| {
        let req = http.get(format!("{}{path}", s.url())).header("accept", accept);
        async move { json_of(req).await }
    };
    let disc = get("/apis/coordination.k8s.io/v1".into(), "application/json").await;
    let leases = disc["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "leases")
        .cloned();
    assert_eq!(
        leases.as_ref().map(|r| (r["namespaced"].clone(), r["kind"].clone())),
        Some((json!(true), json!("Lease"))),
        "{disc}"
    );
    let one = get(format!("{LEASES}/worker-0"), "application/json").await;
    assert_eq!(one["spec"]["holderIdentity"], "worker-0");
    let table = get(LEASES.into(), "application/json;as=Table;v=v1;g=meta.k8s.io").await;
    let cols: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, ["Name", "Holder", "Age"]);
    assert_eq!(table["rows"][0]["cells"][0], "worker-0");
    assert_eq!(table["rows"][0]["cells"][1], "worker-0");
    assert_eq!(table["rows"][0]["object"]["metadata"]["namespace"], "kube-node-lease");
    let missing = http
        .get(format!(
            "{}/apis/coordination.k8s.io/v1/namespaces/default/leases/worker-0",
            s.url()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status().as_u16(), 404);
    let status: Value = missing.json().await.unwrap();
    assert_eq!(status["message"], "leases.coordination.k8s.io \"worker-0\" not found");
    let admin = s.admin_token().unwrap();
    if have_kubectl("lease printing") {
        let (ok, out, err) = kubectl_as(&s, dir.path(), &admin, &["get", "leases", "-n", "kube-node-lease"]).await;
        assert!(ok, "{err}");
        let lines: Vec<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(lines[0], ["NAME", "HOLDER", "AGE"], "{out}");
        assert_eq!(lines[1][..2], ["worker-0", "worker-0"], "{out}");
        let (ok, out, err) = kubectl_as(&s, dir.path(), &admin, &["get", "leases", "-A"]).await;
        assert!(ok, "{err}");
        let lines: Vec<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(lines[0], ["NAMESPACE", "NAME", "HOLDER", "AGE"], "{out}");
        assert_eq!(lines[1][..3], ["kube-node-lease", "worker-0", "worker-0"], "{out}");
    }

    assert_eq!(ready(&s.hub.state(), "worker-0")["status"], "True");
    let killed = tokio::time::Instant::now();
    running.kill().await;
    wait_for(&s, dir.path(), "worker-0 NotReady", GRACE + MARGIN, |st| {
        ready(st, "worker-0")["status"] == "Unknown"
    })
    .await;
    let after = killed.elapsed();
    // The last renewal came at most one interval before the kill.
    assert!(
        after + Duration::from_millis(300) >= GRACE,
        "NotReady {after:?} after the kill, before the grace period"
    );
    let st = s.hub.state();
    let c = ready(&st, "worker-0");
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str(), c["message"].as_str()),
        (
            Some("Unknown"),
            Some("NodeStatusUnknown"),
            Some("Kubelet stopped posting node status.")
        )
    );
    assert!(
        c["lastTransitionTime"].is_string() && c["lastHeartbeatTime"].is_string(),
        "{c}"
    );
    let n: mco::model::Node = (*st.nodes["worker-0"]).clone();
    assert!(!mco::model::node_is_ready(&n));
    assert_eq!(mco::cli::output::node_status(&n), "NotReady", "mco get nodes STATUS");
    let nodes = get(
        "/api/v1/nodes/worker-0".into(),
        "application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    .await;
    assert_eq!(nodes["rows"][0]["cells"][1], "NotReady", "kubectl get nodes STATUS");
    wait_for(
        &s,
        dir.path(),
        "the worker pool counts worker-0 unavailable",
        WAIT,
        |st| {
            st.pools
                .get("worker")
                .is_some_and(|p| p.status.unavailable_machine_count == 1 && p.status.ready_machine_count == 0)
        },
    )
    .await;

    let running = daemon(&s, dir.path(), &node, &token);
    wait_for(&s, dir.path(), "worker-0 Ready again", WAIT, |st| {
        ready(st, "worker-0")["status"] == "True"
    })
    .await;
    wait_for(
        &s,
        dir.path(),
        "the worker pool counts worker-0 available",
        WAIT,
        |st| {
            st.pools
                .get("worker")
                .is_some_and(|p| p.status.unavailable_machine_count == 0)
        },
    )
    .await;
    running.kill().await;
    s.stop().await;
}

/// With maxUnavailable 1, a NotReady node is the one node allowed to be unavailable: a new
/// config rolls out to no other node until it is Ready again, then to both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_not_ready_node_blocks_the_next_nodes_update() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path()).await;
    let keys = s.hub.keys().clone();
    let nodes = mco::up::local_nodes(0, 2);
    let mut tokens = Vec::new();
    for n in &nodes {
        tokens.push(token_file(&s, dir.path(), n).await);
    }
    let d0 = daemon(&s, dir.path(), &nodes[0], &tokens[0]);
    let d1 = daemon(&s, dir.path(), &nodes[1], &tokens[1]);
    wait_for(&s, dir.path(), "both workers Done", WAIT, |st| {
        is_done(st, "worker-0", &keys) && is_done(st, "worker-1", &keys)
    })
    .await;
    let old = s.hub.state().pools["worker"].spec.configuration.name.clone();

    d1.kill().await;
    wait_for(&s, dir.path(), "worker-1 NotReady", GRACE + MARGIN, |st| {
        ready(st, "worker-1")["status"] == "Unknown"
    })
    .await;

    let client = s.admin_client("test");
    let mc = json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": "99-worker-liveness", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": [{"path": "/etc/liveness", "mode": 420,
            "contents": {"source": "data:,up"}}]}}}});
    client.create(Kind::MachineConfig, &mc, None).await.unwrap();
    // The pool's status says it is updating to the new render: the node controller has run
    // (in the same pass, before the status controller) with the new target at least once.
    wait_for(
        &s,
        dir.path(),
        "the worker pool updating to the new render",
        WAIT,
        |st| {
            st.pools.get("worker").is_some_and(|p| {
                let target = &p.spec.configuration.name;
                *target != old
                    && p.status.conditions.iter().any(|c| {
                        c.type_ == "Updating"
                            && c.status == "True"
                            && c.message == format!("All nodes are updating to MachineConfig {target}")
                    })
                    && p.status.unavailable_machine_count == 1
            })
        },
    )
    .await;
    let st = s.hub.state();
    for n in ["worker-0", "worker-1"] {
        assert_eq!(
            NodeAnnotations::read(&st.nodes[n], &keys).desired_config,
            old,
            "{n} was not targeted"
        );
    }

    let d1 = daemon(&s, dir.path(), &nodes[1], &tokens[1]);
    wait_for(&s, dir.path(), "both workers on the new render", WAIT, |st| {
        let target = &st.pools["worker"].spec.configuration.name;
        ["worker-0", "worker-1"]
            .iter()
            .all(|n| is_done(st, n, &keys) && NodeAnnotations::read(&st.nodes[*n], &keys).current_config == *target)
    })
    .await;
    d0.kill().await;
    d1.kill().await;
    s.stop().await;
}

/// NodeRestriction's `admitLease`: a node creates, renews and deletes its own lease only, in
/// `kube-node-lease` only, with kube-apiserver's Forbidden; a lease is admitted with
/// `ValidateLease`'s field errors; the namespace of the body is the request's.
#[tokio::test]
async fn a_node_writes_only_its_own_lease() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path()).await;
    let nodes = mco::up::local_nodes(0, 1);
    let token = mco::credentials::read_secret_file(&token_file(&s, dir.path(), &nodes[0]).await).unwrap();
    let admin = s.admin_token().unwrap();
    let send = |token: &str, method: &str, path: &str, body: Value| {
        let mut req = reqwest::Client::new()
            .request(method.parse().unwrap(), format!("{}{path}", s.url()))
            .bearer_auth(token);
        if !body.is_null() {
            let ct = if method == "PATCH" {
                "application/merge-patch+json"
            } else {
                "application/json"
            };
            req = req.header("content-type", ct).body(body.to_string());
        }
        async move {
            let resp = req.send().await.unwrap();
            let code = resp.status().as_u16();
            (code, resp.json::<Value>().await.unwrap_or_default())
        }
    };
    let lease = |name: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40}})
    };
    let forbidden = |(code, st): (u16, Value), name: &str, message: &str| {
        assert_eq!(code, 403, "{st}");
        assert_eq!(st["reason"], "Forbidden", "{st}");
        assert_eq!(
            st["message"],
            format!("leases.coordination.k8s.io \"{name}\" is forbidden: {message}"),
            "{st}"
        );
        assert_eq!(
            st["details"],
            json!({"name": name, "group": "coordination.k8s.io", "kind": "leases"}),
            "{st}"
        );
    };
    const OTHER: &str = "can only access node lease with the same name as the requesting node";

    let (code, own) = send(&token, "POST", LEASES, lease("worker-0")).await;
    assert_eq!(code, 201, "{own}");
    assert_eq!(
        own["metadata"]["namespace"], "kube-node-lease",
        "the request's namespace"
    );
    forbidden(send(&token, "POST", LEASES, lease("worker-1")).await, "worker-1", OTHER);
    let (code, _) = send(&admin, "POST", LEASES, lease("worker-1")).await;
    assert_eq!(code, 201);
    let renew = json!({"spec": {"renewTime": "2026-12-03T12:00:00.000000Z"}});
    let (code, renewed) = send(&token, "PATCH", &format!("{LEASES}/worker-0"), renew.clone()).await;
    assert_eq!(
        (code, renewed["spec"]["renewTime"].as_str()),
        (200, Some("2026-12-03T12:00:00.000000Z"))
    );
    forbidden(
        send(&token, "PATCH", &format!("{LEASES}/worker-1"), renew.clone()).await,
        "worker-1",
        OTHER,
    );
    let mut put = s.hub.state().get_json(Kind::Lease, "kube-node-lease/worker-1").unwrap();
    put["spec"]["holderIdentity"] = json!("worker-0");
    forbidden(
        send(&token, "PUT", &format!("{LEASES}/worker-1"), put).await,
        "worker-1",
        OTHER,
    );
    forbidden(
        send(&token, "DELETE", &format!("{LEASES}/worker-1"), Value::Null).await,
        "worker-1",
        OTHER,
    );
    let elsewhere = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    forbidden(
        send(&token, "POST", elsewhere, lease("worker-0")).await,
        "worker-0",
        "can only access leases in the \"kube-node-lease\" system namespace",
    );
    assert_eq!(
        s.hub.state().get_json(Kind::Lease, "kube-node-lease/worker-1").unwrap()["spec"]["holderIdentity"],
        "worker-1",
        "unchanged"
    );

    // Admission: the body's namespace is the request's; ValidateLease's rules.
    let mut other_ns = lease("worker-2");
    other_ns["metadata"]["namespace"] = json!("default");
    let (code, st) = send(&admin, "POST", LEASES, other_ns).await;
    assert_eq!(code, 400, "{st}");
    assert_eq!(
        st["message"],
        "the namespace of the provided object does not match the namespace sent on the request"
    );
    let mut bad = lease("worker-2");
    bad["spec"]["leaseDurationSeconds"] = json!(0);
    let (code, st) = send(&admin, "POST", LEASES, bad).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(st["details"]["causes"][0]["field"], "spec.leaseDurationSeconds", "{st}");
    assert_eq!(
        st["message"],
        "Lease.coordination.k8s.io \"worker-2\" is invalid: spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"
    );
    // A lease is addressed in its namespace only; the other namespace's list does not see it.
    let (code, _) = send(
        &admin,
        "GET",
        "/apis/coordination.k8s.io/v1/leases/worker-0",
        Value::Null,
    )
    .await;
    assert_eq!(code, 404);
    let (_, all) = send(&admin, "GET", "/apis/coordination.k8s.io/v1/leases", Value::Null).await;
    assert_eq!(all["items"].as_array().map(Vec::len), Some(2), "{all}");
    let (_, none) = send(&admin, "GET", elsewhere, Value::Null).await;
    assert_eq!(none["items"].as_array().map(Vec::len), Some(0), "{none}");
    // Lease writes are no Kubernetes Events, unless asked for by kind.
    let (_, events) = send(&admin, "GET", "/api/v1/events", Value::Null).await;
    let kinds: Vec<&Value> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["involvedObject"]["kind"])
        .collect();
    assert!(!kinds.is_empty() && !kinds.contains(&&json!("Lease")), "{kinds:?}");
    let (_, events) = send(
        &admin,
        "GET",
        "/api/v1/events?fieldSelector=involvedObject.kind%3DLease",
        Value::Null,
    )
    .await;
    assert_eq!(events["items"].as_array().map(Vec::len), Some(3), "{events}");
    // The node deletes its own lease.
    let (code, _) = send(&token, "DELETE", &format!("{LEASES}/worker-0"), Value::Null).await;
    assert_eq!(code, 200);
    s.stop().await;
}
