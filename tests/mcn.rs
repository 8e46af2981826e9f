//! MachineConfigNode as MCO 4.20 serves it (issue 30, item 1), over a real server on
//! 127.0.0.1:0 and real `mco daemon` processes on sandbox roots with node tokens: a watch of a
//! node's MCN sees every phase of a reboot rollout and of a rebootless one, in the order MCO's
//! daemon and drain controller write them (`pkg/daemon/update.go`, `pkg/daemon/daemon.go`,
//! `pkg/controller/drain/drain_controller.go` through `pkg/upgrademonitor`), each condition's
//! status and message as MCO words it; `kubectl get mcn` (and `-o wide`) prints the CRD's
//! printer columns; a node token may write only its own node's MCN (MCO's `mcn-guards`
//! policy). Expected texts are MCO's, written out here; every wait has a deadline.

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(120);
const MCNS: &str = "/apis/machineconfiguration.openshift.io/v1/machineconfignodes";

/// One condition as a watch event shows it: type, status, message.
type Cond = (String, String, String);

/// The conditions of an MCN by type.
fn conditions(m: &Value) -> BTreeMap<String, (String, String)> {
    m["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
            (s("type"), (s("status"), s("message")))
        })
        .collect()
}

/// Watches `node`'s MCN from `rv` and records, per event, the conditions whose status or
/// message changed (sorted): the transitions, in the order the writes happened.
fn watch_transitions(
    c: &Cluster,
    node: &str,
    rv: &str,
    start: BTreeMap<String, (String, String)>,
) -> Arc<Mutex<Vec<Vec<Cond>>>> {
    let out = Arc::new(Mutex::new(Vec::new()));
    let url = format!(
        "{}{MCNS}?watch=true&fieldSelector=metadata.name%3D{node}&resourceVersion={rv}",
        c.server.url()
    );
    let (http, sink) = (c.http(), out.clone());
    tokio::spawn(async move {
        let mut resp = http.get(url).send().await.expect("watch starts");
        let (mut buf, mut prev) = (Vec::new(), start);
        while let Ok(Some(chunk)) = resp.chunk().await {
            buf.extend_from_slice(&chunk);
            while let Some(i) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=i).collect();
                let ev: Value = serde_json::from_slice(&line).expect("a watch event");
                let now = conditions(&ev["object"]);
                let mut changed: Vec<Cond> = now
                    .iter()
                    .filter(|(t, v)| prev.get(*t) != Some(*v))
                    .map(|(t, (s, m))| (t.clone(), s.clone(), m.clone()))
                    .collect();
                changed.sort();
                if !changed.is_empty() {
                    sink.lock().unwrap().push(changed);
                }
                prev = now;
            }
        }
    });
    out
}

fn ev(conds: &[(&str, &str, &str)]) -> Vec<Cond> {
    let mut v: Vec<Cond> = conds
        .iter()
        .map(|(t, s, m)| (t.to_string(), s.to_string(), m.to_string()))
        .collect();
    v.sort();
    v
}

/// MCO's reset when Updated becomes True: every condition not False becomes False, its message
/// prefixed `Action during update to <desired>: ` (`generateAndApplyMachineConfigNodes`).
fn updated_with_reset(node: &str, desired: &str, before: &[(&str, &str)]) -> Vec<Cond> {
    let mut v = vec![(
        "Updated".to_string(),
        "True".to_string(),
        format!("Node {node} Updated"),
    )];
    for (t, m) in before {
        v.push((
            t.to_string(),
            "False".into(),
            format!("Action during update to {desired}: {m}"),
        ));
    }
    v.sort();
    v
}

async fn get(c: &Cluster, node: &str) -> Value {
    json_of(c.http().get(format!("{}{MCNS}/{node}", c.server.url()))).await
}

/// Waits until `node`'s MCN satisfies `f`, re-reading it on every change of the store.
async fn wait_mcn(c: &Cluster, node: &str, what: &str, f: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut changes = c.server.hub.changes();
    loop {
        let m = get(c, node).await;
        if f(&m) {
            return m;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}: {m:#}"
        );
        let _ = tokio::time::timeout(Duration::from_secs(1), changes.changed()).await;
    }
}

/// Waits until the recorded transitions end with `last` (or time out showing them).
async fn wait_transitions(c: &Cluster, seen: &Arc<Mutex<Vec<Vec<Cond>>>>, len: usize) -> Vec<Vec<Cond>> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let got = seen.lock().unwrap().clone();
        if got.len() >= len {
            return got;
        }
        if tokio::time::Instant::now() >= deadline {
            let logs: String = std::fs::read_dir(c.data_dir.join("logs"))
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
                .collect();
            panic!("timed out: {} of {len} transitions: {got:#?}\n{logs}", got.len());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn assert_sequence(got: &[Vec<Cond>], want: &[Vec<Cond>]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g, w, "transition {i} differs; all seen: {got:#?}");
    }
    assert_eq!(got.len(), want.len(), "seen: {got:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_phase_of_a_rollout_is_written_on_the_mcn_in_mcos_order() {
    let c = Cluster::start(1, 1).await;
    let node = "worker-0";
    let t0 = c.pool("worker").spec.configuration.name;
    // Created for the node, owned by it, Updated once its daemon is Done.
    let m = wait_mcn(&c, node, "MCN Updated on the first config", |m| {
        conditions(m).get("Updated") == Some(&("True".into(), format!("Node {node} Updated")))
            && m["spec"]["configVersion"]["desired"] == t0.as_str()
    })
    .await;
    assert_eq!(m["spec"]["node"]["name"], node);
    assert_eq!(m["spec"]["pool"]["name"], "worker");
    let uid = c.server.hub.state().nodes[node].metadata.uid.clone().unwrap();
    assert_eq!(m["metadata"]["ownerReferences"][0]["kind"], "Node");
    assert_eq!(m["metadata"]["ownerReferences"][0]["uid"], uid.as_str());
    assert_eq!(m["status"]["configVersion"]["current"], t0.as_str());
    assert_eq!(conditions(&m).len(), 12, "MCO creates every condition: {m:#}");
    for (t, (s, _)) in conditions(&m) {
        assert_eq!(s, if t == "Updated" { "True" } else { "False" }, "{t}");
    }

    // A file change: drain and reboot.
    let last_drain = c.annotations(node).last_applied_drain;
    let seen = watch_transitions(
        &c,
        node,
        m["metadata"]["resourceVersion"].as_str().unwrap(),
        conditions(&m),
    );
    c.apply(&[examples().join("chrony.yaml")]).await;
    let t1 = c.wait_rolled_out("worker", &t0, WAIT).await;
    let drain = format!("drain-{t1}");
    let not_yet = |t: &str| format!("This node has not yet entered the {t} phase");
    let want = vec![
        ev(&[("Updated", "False", &format!("Node {node} needs an update"))]),
        ev(&[("UpdatePrepared", "True", "Update Compatible. Post Cfg Actions: [] Drain Required: true")]),
        ev(&[
            ("UpdateExecuted", "Unknown", "Cordoned Node as part of update executed phase"),
            ("Cordoned", "True", "Cordoned node. The node is reporting Unschedulable = true"),
        ]),
        ev(&[
            ("UpdateExecuted", "Unknown", "Draining Node as part of update executed phase"),
            ("Drained", "Unknown", &format!("Draining node. The drain will not be complete until desired drainer {drain} matches current drainer {last_drain}")),
        ]),
        ev(&[
            ("UpdateExecuted", "Unknown", "Drained Node as part of update executed phase"),
            ("Drained", "True", &format!("Drained node. The drain is complete as the desired drainer matches current drainer: {drain}")),
        ]),
        ev(&[
            ("UpdateExecuted", "Unknown", "Updating the Files and OS on disk as a part of the in progress phase"),
            ("AppliedFilesAndOS", "Unknown", "Applying files and new OS config to node. OS will not need an update. SSH Keys will not need an update"),
        ]),
        ev(&[
            ("UpdateExecuted", "True", "Updated the Files and OS on disk as a part of the in progress phase"),
            ("AppliedFilesAndOS", "True", "Applied files and new OS config to node. OS did not need an update. SSH Keys did not need an update"),
        ]),
        ev(&[("RebootedNode", "Unknown", "Upgrade requires a reboot.")]),
        ev(&[("NodeDegraded", "False", &format!("Node {node} upgrade succeeded"))]),
        // the daemon after the reboot
        ev(&[("RebootedNode", "True", "Node has rebooted")]),
        ev(&[("Resumed", "True", &format!("In desired config {t1}. Resumed normal operations. Applying proper annotations."))]),
        ev(&[
            ("UpdateComplete", "True", "Uncordoned Node as part of completing upgrade phase"),
            ("Uncordoned", "True", "UnCordoned node. The node is reporting Unschedulable = false"),
        ]),
        ev(&[("Resumed", "True", &format!("In desired config {t1}. Resumed normal operations."))]),
        updated_with_reset(
            node,
            &t1,
            &[
                ("UpdatePrepared", "Update Compatible. Post Cfg Actions: [] Drain Required: true"),
                ("UpdateExecuted", "Updated the Files and OS on disk as a part of the in progress phase"),
                ("Cordoned", "Cordoned node. The node is reporting Unschedulable = true"),
                ("Drained", &format!("Drained node. The drain is complete as the desired drainer matches current drainer: {drain}")),
                ("AppliedFilesAndOS", "Applied files and new OS config to node. OS did not need an update. SSH Keys did not need an update"),
                ("RebootedNode", "Node has rebooted"),
                ("UpdateComplete", "Uncordoned Node as part of completing upgrade phase"),
                ("Uncordoned", "UnCordoned node. The node is reporting Unschedulable = false"),
                ("Resumed", &format!("In desired config {t1}. Resumed normal operations.")),
            ],
        ),
    ];
    assert_sequence(&wait_transitions(&c, &seen, want.len()).await, &want);
    let m = get(&c, node).await;
    assert_eq!(m["spec"]["configVersion"]["desired"], t1.as_str());
    assert_eq!(m["status"]["configVersion"]["current"], t1.as_str());
    assert_eq!(m["status"]["configVersion"]["desired"], t1.as_str());
    assert_eq!(
        conditions(&m)["UpdatePostActionComplete"],
        ("False".into(), not_yet("UpdatePostActionComplete"))
    );

    // An SSH key: no drain, no reboot (MCO's sshkey policy None).
    let seen = watch_transitions(
        &c,
        node,
        m["metadata"]["resourceVersion"].as_str().unwrap(),
        conditions(&m),
    );
    c.apply(&[examples().join("ssh-key.yaml")]).await;
    let t2 = c.wait_rolled_out("worker", &t1, WAIT).await;
    let want = vec![
        ev(&[("Updated", "False", &format!("Node {node} needs an update"))]),
        ev(&[(
            "UpdatePrepared",
            "True",
            "Update Compatible. Post Cfg Actions: [] Drain Required: false",
        )]),
        ev(&[
            ("UpdateExecuted", "Unknown", "Node Drain Not required for this update."),
            ("Drained", "False", "Node Drain Not required for this update."),
        ]),
        ev(&[
            (
                "UpdateExecuted",
                "Unknown",
                "Updating the Files and OS on disk as a part of the in progress phase",
            ),
            (
                "AppliedFilesAndOS",
                "Unknown",
                "Applying files and new OS config to node. OS will not need an update. SSH Keys will  need an update",
            ),
        ]),
        ev(&[
            (
                "UpdateExecuted",
                "True",
                "Updated the Files and OS on disk as a part of the in progress phase",
            ),
            (
                "AppliedFilesAndOS",
                "True",
                "Applied files and new OS config to node. OS did not need an update. SSH Keys did  need an update",
            ),
        ]),
        ev(&[("UpdatePostActionComplete", "True", "Changes do not require a reboot")]),
        ev(&[(
            "Resumed",
            "True",
            &format!("In desired config {t2}. Resumed normal operations. Applying proper annotations."),
        )]),
        updated_with_reset(
            node,
            &t2,
            &[
                (
                    "UpdatePrepared",
                    "Update Compatible. Post Cfg Actions: [] Drain Required: false",
                ),
                (
                    "UpdateExecuted",
                    "Updated the Files and OS on disk as a part of the in progress phase",
                ),
                (
                    "AppliedFilesAndOS",
                    "Applied files and new OS config to node. OS did not need an update. SSH Keys did  need an update",
                ),
                ("UpdatePostActionComplete", "Changes do not require a reboot"),
                (
                    "Resumed",
                    &format!("In desired config {t2}. Resumed normal operations. Applying proper annotations."),
                ),
            ],
        ),
    ];
    assert_sequence(&wait_transitions(&c, &seen, want.len()).await, &want);

    // kubectl prints MCO's printer columns (the CRD's additionalPrinterColumns, upper-cased).
    if have_kubectl("every_phase_of_a_rollout_is_written_on_the_mcn_in_mcos_order") {
        let home = tempfile::tempdir().unwrap();
        let admin = c.server.admin_token().unwrap();
        let (ok, out, err) = kubectl_as(&c.server, home.path(), &admin, &["get", "mcn", node]).await;
        assert!(ok, "{err}");
        let lines: Vec<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(
            lines[0],
            ["NAME", "POOLNAME", "DESIREDCONFIG", "CURRENTCONFIG", "UPDATED", "AGE"]
        );
        assert_eq!(lines[1][..5], [node, "worker", t2.as_str(), t2.as_str(), "True"]);
        let (ok, out, err) = kubectl_as(
            &c.server,
            home.path(),
            &admin,
            &["get", "machineconfignodes", "-o", "wide"],
        )
        .await;
        assert!(ok, "{err}");
        let lines: Vec<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(
            lines[0],
            [
                "NAME",
                "POOLNAME",
                "DESIREDCONFIG",
                "CURRENTCONFIG",
                "UPDATED",
                "AGE",
                "UPDATEPREPARED",
                "UPDATEEXECUTED",
                "UPDATEPOSTACTIONCOMPLETE",
                "UPDATECOMPLETE",
                "RESUMED",
                "UPDATEDFILESANDOS",
                "CORDONEDNODE",
                "DRAINEDNODE",
                "REBOOTEDNODE",
                "UNCORDONEDNODE"
            ]
        );
        let row = lines.iter().find(|l| l[0] == node).expect("the worker's row");
        assert_eq!(row[1..5], ["worker", t2.as_str(), t2.as_str(), "True"]);
        assert_eq!(row[6..], ["False"; 10]);
        let (ok, out, err) = kubectl_as(&c.server, home.path(), &admin, &["explain", "mcn.status.configVersion"]).await;
        assert!(ok && out.contains("current") && out.contains("desired"), "{out}{err}");
        let (ok, out, err) = kubectl_as(&c.server, home.path(), &admin, &["describe", "mcn", node]).await;
        assert!(
            ok && out.contains("Node worker-0 Updated") && out.contains("Pool:"),
            "{out}{err}"
        );
    }

    // A node token writes its own MCN only (MCO's mcn-guards policy).
    let token = std::fs::read_to_string(c.data_dir.join("tokens").join(format!("{node}.token"))).unwrap();
    let as_node = |method: reqwest::Method, path: String| {
        reqwest::Client::new()
            .request(method, format!("{}{path}", c.server.url()))
            .bearer_auth(token.trim())
            .header("content-type", "application/merge-patch+json")
    };
    let patch = r#"{"status":{"observedGeneration":7}}"#;
    let master_before = get(&c, "master-0").await;
    let r = as_node(reqwest::Method::PATCH, format!("{MCNS}/master-0/status"))
        .body(patch)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let st: Value = r.json().await.unwrap();
    assert_eq!(
        st["message"],
        "machineconfignodes.machineconfiguration.openshift.io \"master-0\" is forbidden: ValidatingAdmissionPolicy 'mcn-guards' with binding 'mcn-guards-binding' denied request: updates to MCN master-0 can only be done from the MCN's owner node"
    );
    assert_eq!(
        get(&c, "master-0").await["metadata"]["resourceVersion"],
        master_before["metadata"]["resourceVersion"]
    );
    let r = as_node(reqwest::Method::PATCH, format!("{MCNS}/{node}/status"))
        .body(patch)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    // MCO's daemon role: get, create, update, patch; no list.
    let r = as_node(reqwest::Method::GET, MCNS.to_string()).send().await.unwrap();
    assert_eq!(r.status(), 403);
    c.stop().await;
}
