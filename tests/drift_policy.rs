//! DriftPolicy (`policy.mco.dev/v1`, issue 30 item 3) on sandbox nodes whose daemons run with
//! their node tokens (the node authorizer lets them read the policies): `Revert` restores the
//! rendered bytes and mode and records the drift and its diff, the node stays Done and does
//! not reboot (and takes the node disruption policy's action for the path when one is named);
//! `Report` leaves the node Done with the metric raised and the Event present; a path no rule
//! matches, or a pool no policy selects, is MCO's Degrade; bad policies are refused with the
//! field named; kubectl prints the kind's columns.

mod common;

use common::*;
use mco::model::{Kind, NodeAnnotations};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

/// A DriftPolicy selecting the worker pool with `rules`.
fn policy(name: &str, rules: Value) -> Value {
    json!({"apiVersion": "policy.mco.dev/v1", "kind": "DriftPolicy", "metadata": {"name": name},
        "spec": {"poolSelector": {"matchLabels": {"pools.operator.machineconfiguration.openshift.io/worker": ""}},
                 "rules": rules}})
}

/// A cluster with one worker on `examples/chrony.yaml`; the rendered `/etc/chrony.conf` bytes.
async fn chrony_cluster() -> (Cluster, Vec<u8>) {
    let c = Cluster::start(1, 1).await;
    let old = c.pool("worker").spec.configuration.name;
    c.apply(&[examples().join("chrony.yaml")]).await;
    let rendered = c.wait_rolled_out("worker", &old, Duration::from_secs(60)).await;
    let (good, mode) = rendered_files(&c, &rendered)["/etc/chrony.conf"].clone();
    assert_eq!(mode, 0o644);
    (c, good)
}

/// The history entries of `event_type` about node `node`.
async fn drift_events(c: &Cluster, event_type: &str, node: &str) -> Vec<Value> {
    let page: Value = json_of(c.http().get(format!(
        "{}/apis/history.mco.dev/v1/events?fieldSelector=type%3D{event_type}%2Cobject.kind%3DNode%2Cobject.name%3D{node}&limit=500",
        c.server.url()
    )))
    .await;
    page["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["type"] == event_type && e["object"]["name"] == node)
        .collect()
}

/// Waits (deadline `within`) until there are at least `n` `event_type` entries about `node`.
async fn wait_events(c: &Cluster, event_type: &str, node: &str, n: usize, within: Duration) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let found = drift_events(c, event_type, node).await;
        if found.len() >= n {
            return found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{n} {event_type} events about {node} within {within:?}; found {found:#?}"
        );
        let mut changes = c.server.hub.changes();
        let _ = tokio::time::timeout(Duration::from_millis(200), changes.changed()).await;
    }
}

/// Every state the node reported from seq `after` on (its NodeStateChanged events).
async fn states_since(c: &Cluster, node: &str, after: u64) -> Vec<String> {
    drift_events(c, "NodeStateChanged", node)
        .await
        .iter()
        .filter(|e| e["seq"].as_u64().unwrap_or(0) > after)
        .map(|e| e["summary"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Waits (deadline `within`) until `path` holds `bytes` with `mode`.
async fn wait_file(path: &std::path::Path, bytes: &[u8], mode: u32, within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let now = (std::fs::read(path).ok(), mode_of(path));
        if now.0.as_deref() == Some(bytes) && now.1 == mode {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{} is {now:?}", path.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Creates the DriftPolicy `workers` with `rules`.
async fn create_workers_policy(c: &Cluster, rules: Value) {
    c.client
        .create(Kind::DriftPolicy, &policy("workers", rules), None)
        .await
        .unwrap();
}

fn head(c: &Cluster) -> u64 {
    c.server.hub.published_seq()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revert_restores_the_bytes_and_mode_and_records_the_diff_without_a_reboot() {
    let (c, good) = chrony_cluster().await;
    create_workers_policy(&c, json!([{"paths": ["/etc/chrony.*"], "action": "Revert"}])).await;
    let boot = c.boot_id("worker-0");
    let since = head(&c);
    let file = c.root("worker-0").join("etc/chrony.conf");

    std::fs::write(&file, "server evil.example.net iburst\n").unwrap();
    wait_file(&file, &good, 0o644, Duration::from_secs(20)).await;
    let drifted = wait_events(&c, "NodeConfigDrifted", "worker-0", 1, Duration::from_secs(20)).await;
    let detail = drifted[0]["detail"].as_str().unwrap();
    let first = detail.lines().next().unwrap();
    assert_eq!(
        first,
        r#"/etc/chrony.conf: contents mismatch, Revert by workers: spec.rules[0]: content mismatch for file "/etc/chrony.conf""#
    );
    // The diff from the drifted bytes to the rendered ones, as `similar` (git's format) writes it.
    let want_diff = mco::diff::unified(
        "server evil.example.net iburst\n",
        std::str::from_utf8(&good).unwrap(),
        "/etc/chrony.conf (on disk)",
        "/etc/chrony.conf (rendered)",
    );
    assert_eq!(&detail[first.len() + 1..], want_diff);
    let reverted = wait_events(&c, "NodeConfigReverted", "worker-0", 1, Duration::from_secs(20)).await;
    let summary = reverted[0]["summary"].as_str().unwrap();
    let rendered = c.pool("worker").spec.configuration.name;
    assert_eq!(
        summary,
        format!(
            "node worker-0: revert of /etc/chrony.conf: reverted to {rendered} ({} bytes, mode 0644); no node disruption policy names the path: no action, no reboot",
            good.len()
        )
    );
    assert_eq!(reverted[0]["actor"], "system:node:worker-0");

    // A mode change alone: the mode is restored, the record says mode.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    wait_events(&c, "NodeConfigReverted", "worker-0", 2, Duration::from_secs(20)).await;
    wait_file(&file, &good, 0o644, Duration::from_secs(5)).await;
    let drifted = drift_events(&c, "NodeConfigDrifted", "worker-0").await;
    assert!(
        drifted[1]["detail"]
            .as_str()
            .unwrap()
            .starts_with("/etc/chrony.conf: mode mismatch, Revert"),
        "{drifted:#?}"
    );
    // Done throughout, never rebooted.
    assert_eq!(c.annotations("worker-0").state, "Done");
    assert_eq!(states_since(&c, "worker-0", since).await, Vec::<String>::new());
    assert_eq!(c.boot_id("worker-0"), boot, "no reboot");
    c.stop().await;
}

/// The node disruption policy names the path (Restart chronyd.service): the revert restarts
/// it, as an update changing the file alone would, and still does not reboot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revert_takes_the_disruption_policy_action_for_the_path() {
    let (c, good) = chrony_cluster().await;
    let ndp = json!({"apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration", "metadata": {"name": "cluster"},
        "spec": {"nodeDisruptionPolicy": {"files": [{"path": "/etc/chrony.conf",
            "actions": [{"type": "Restart", "restart": {"serviceName": "chronyd.service"}}]}]}}});
    c.client.create(Kind::MachineConfiguration, &ndp, None).await.unwrap();
    create_workers_policy(&c, json!([{"paths": ["/etc/chrony.conf"], "action": "Revert"}])).await;
    let boot = c.boot_id("worker-0");
    let file = c.root("worker-0").join("etc/chrony.conf");
    std::fs::write(&file, "server evil\n").unwrap();
    let reverted = wait_events(&c, "NodeConfigReverted", "worker-0", 1, Duration::from_secs(20)).await;
    assert!(
        reverted[0]["summary"]
            .as_str()
            .unwrap()
            .ends_with("; node disruption policy actions: Restart chronyd.service"),
        "{reverted:#?}"
    );
    wait_file(&file, &good, 0o644, Duration::from_secs(5)).await;
    let journal = std::fs::read_to_string(c.root("worker-0").join("var/log/mco-host-journal")).unwrap_or_default();
    assert!(
        journal
            .lines()
            .any(|l| l.ends_with(" systemctl restart chronyd.service")),
        "{journal}"
    );
    assert_eq!(c.annotations("worker-0").state, "Done");
    assert_eq!(c.boot_id("worker-0"), boot, "no reboot");
    c.stop().await;
}

/// `/metrics`'s `metric{node}` value.
async fn node_metric(c: &Cluster, metric: &str, node: &str) -> Option<f64> {
    let text = c.metrics_text().await;
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("parses");
    scrape
        .samples
        .iter()
        .find(|s| s.metric == metric && s.labels.get("node") == Some(node))
        .map(|s| match s.value {
            prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v)
            | prometheus_parse::Value::Counter(v) => v,
            _ => f64::NAN,
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_leaves_the_node_done_with_the_metric_and_the_event() {
    let (c, good) = chrony_cluster().await;
    create_workers_policy(&c, json!([{"paths": ["/etc/**"], "action": "Report"}])).await;
    let since = head(&c);
    let file = c.root("worker-0").join("etc/chrony.conf");
    std::fs::write(&file, "server evil\n").unwrap();
    let drifted = wait_events(&c, "NodeConfigDrifted", "worker-0", 1, Duration::from_secs(20)).await;
    assert!(
        drifted[0]["summary"].as_str().unwrap().starts_with(
            "node worker-0: drift of /etc/chrony.conf: contents mismatch, Report by workers: spec.rules[0]"
        ),
        "{drifted:#?}"
    );
    // MCO's metric and Warning Event, as for a Degrade.
    assert!(node_metric(&c, "mcd_config_drift", "worker-0").await.unwrap_or(0.0) > 0.0);
    assert!(
        node_metric(&c, "mco_drift_detections_total", "worker-0")
            .await
            .unwrap_or(0.0)
            >= 1.0
    );
    let events: Value = json_of(
        c.http()
            .get(format!("{}/api/v1/namespaces/default/events", c.server.url())),
    )
    .await;
    let drift: Vec<&Value> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["name"] == "worker-0" && e["reason"] == "ConfigDriftDetected")
        .collect();
    assert_eq!(drift.len(), 1, "{events:#}");
    assert_eq!(drift[0]["type"], "Warning");
    assert!(
        drift[0]["message"].as_str().unwrap().contains("-server evil"),
        "{:#}",
        drift[0]
    );
    // The node stays Done and the file stays as it was edited.
    assert_eq!(c.annotations("worker-0").state, "Done");
    assert_eq!(states_since(&c, "worker-0", since).await, Vec::<String>::new());
    assert_eq!(std::fs::read(&file).unwrap(), b"server evil\n");
    // Restored by hand: the metric is 0 again.
    std::fs::write(&file, &good).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while node_metric(&c, "mcd_config_drift", "worker-0").await != Some(0.0) {
        assert!(tokio::time::Instant::now() < deadline, "mcd_config_drift back to 0");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.stop().await;
}

/// A Reported drift does not block the next update: MCO's pre-flight (`validateOnDiskState`
/// before `triggerUpdate`) would fail on the edited file and degrade the node; under a Report
/// rule the update goes through and writes the path again from the new rendered config.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reported_drift_does_not_fail_the_next_update() {
    let (c, good) = chrony_cluster().await;
    create_workers_policy(&c, json!([{"paths": ["/etc/chrony.conf"], "action": "Report"}])).await;
    let file = c.root("worker-0").join("etc/chrony.conf");
    std::fs::write(&file, "server evil\n").unwrap();
    wait_events(&c, "NodeConfigDrifted", "worker-0", 1, Duration::from_secs(20)).await;
    assert_eq!(c.annotations("worker-0").state, "Done");
    let old = c.pool("worker").spec.configuration.name;
    c.apply(&[examples().join("gzip-motd.yaml")]).await;
    let rendered = c
        .wait_rolled_out_with("worker", &old, &["99-worker-motd"], Duration::from_secs(60))
        .await;
    assert_eq!(c.annotations("worker-0").current_config, rendered);
    assert_eq!(
        std::fs::read(&file).unwrap(),
        good,
        "chrony.conf written again from the new render"
    );
    assert!(c.root("worker-0").join("etc/motd").exists());
    c.stop().await;
}

/// A path no rule matches, and a policy selecting another pool: MCO's Degrade with MCO's
/// message, and the drift recorded with its diff all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmatched_paths_and_unselected_pools_degrade_as_mco() {
    let (c, good) = chrony_cluster().await;
    create_workers_policy(&c, json!([{"paths": ["/etc/motd"], "action": "Revert"}])).await;
    let mut infra = policy("infra", json!([{"paths": ["/**"], "action": "Report"}]));
    infra["spec"]["poolSelector"] =
        json!({"matchLabels": {"pools.operator.machineconfiguration.openshift.io/infra": ""}});
    c.client.create(Kind::DriftPolicy, &infra, None).await.unwrap();
    let file = c.root("worker-0").join("etc/chrony.conf");
    std::fs::write(&file, "server evil\n").unwrap();
    c.wait_for("worker-0 Degraded by drift", Duration::from_secs(20), |s| {
        let a = NodeAnnotations::read(&s.nodes["worker-0"], &c.keys());
        a.state == "Degraded" && a.reason == r#"content mismatch for file "/etc/chrony.conf""#
    })
    .await;
    let drifted = wait_events(&c, "NodeConfigDrifted", "worker-0", 1, Duration::from_secs(20)).await;
    let detail = drifted[0]["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("/etc/chrony.conf: contents mismatch, Degrade (no DriftPolicy rule matched): "),
        "{detail}"
    );
    assert!(detail.contains("\n-server evil\n"), "{detail}");
    // One ConfigDriftDetected Warning, MCO's, from the Degraded write; the note is its own type.
    let events: Value = json_of(
        c.http()
            .get(format!("{}/api/v1/namespaces/default/events", c.server.url())),
    )
    .await;
    let reasons: Vec<&str> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["name"] == "worker-0")
        .filter_map(|e| e["reason"].as_str())
        .filter(|r| r.contains("Drift"))
        .collect();
    assert_eq!(reasons, ["NodeConfigDrifted", "ConfigDriftDetected"], "{events:#}");
    std::fs::write(&file, &good).unwrap();
    c.wait_node_done("worker-0", Duration::from_secs(20), |_| true).await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_policies_are_refused_and_kubectl_prints_the_columns() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_server(dir.path()).await;
    let client = s.admin_client("test");
    let bad = policy(
        "workers",
        json!([{"paths": ["/etc/chrony.conf"], "action": "Revert"}, {"paths": ["/etc/x"], "action": "Fix"}]),
    );
    assert_invalid(
        "bad action",
        client.create(Kind::DriftPolicy, &bad, None).await,
        "spec.rules[1].action",
        r#"Unsupported value: "Fix": supported values: "Degrade", "Report", "Revert""#,
    );
    let bad = policy("workers", json!([{"paths": ["etc/x", "/etc/[ab"], "action": "Report"}]));
    assert_invalid(
        "relative glob",
        client.create(Kind::DriftPolicy, &bad, None).await,
        "spec.rules[0].paths[0]",
        r#"Invalid value: "etc/x": must be an absolute path glob"#,
    );
    assert_invalid(
        "unclosed class",
        client.create(Kind::DriftPolicy, &bad, None).await,
        "spec.rules[0].paths[1]",
        r#"Invalid value: "/etc/[ab": unterminated character class"#,
    );
    assert_invalid(
        "no rules",
        client
            .create(Kind::DriftPolicy, &policy("workers", json!([])), None)
            .await,
        "spec.rules",
        "Required value",
    );
    let good = policy(
        "workers",
        json!([{"paths": ["/etc/chrony.conf"], "action": "Revert"}, {"paths": ["/etc/ssh/**"], "action": "Report"},
               {"paths": ["/etc/x"], "action": "Revert"}]),
    );
    client.create(Kind::DriftPolicy, &good, None).await.unwrap();
    if !have_kubectl("bad_policies_are_refused_and_kubectl_prints_the_columns") {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let admin = s.admin_token().unwrap();
    let (ok, out, err) = kubectl_as(&s, home.path(), &admin, &["get", "driftpolicies"]).await;
    assert!(ok, "{err}");
    println!("{out}");
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "RULES", "ACTIONS", "POOLS", "AGE"]);
    let row: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        &row[..4],
        [
            "workers",
            "3",
            "Revert,Report",
            "pools.operator.machineconfiguration.openshift.io/worker="
        ]
    );
    let (ok, out, err) = kubectl_as(
        &s,
        home.path(),
        &admin,
        &["get", "dp", "workers", "-o", "jsonpath={.apiVersion}"],
    )
    .await;
    assert!(ok, "{err}");
    assert_eq!(out, "policy.mco.dev/v1");
    // kube-apiserver's words through kubectl too (kubectl prefixes `The <kind> "<name>"`
    // from the Status details, as it does for any refused object).
    let bad_file = home.path().join("bad.yaml");
    std::fs::write(
        &bad_file,
        serde_json::to_string(&policy("bad", json!([{"paths": ["/x"], "action": "revert"}]))).unwrap(),
    )
    .unwrap();
    let (ok, _, err) = kubectl_as(&s, home.path(), &admin, &["create", "-f", bad_file.to_str().unwrap()]).await;
    assert!(!ok);
    assert!(
        err.contains(r#"The DriftPolicy "bad" is invalid: spec.rules[0].action: Unsupported value: "revert": supported values: "Degrade", "Report", "Revert""#),
        "{err}"
    );
    s.stop().await;
}
