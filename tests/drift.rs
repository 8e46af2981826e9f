//! A drift that is already there when the daemon starts: the boot check fails (Degraded, with
//! MCO's message and the recovery hint) and is retried with a growing backoff; restoring the
//! content clears it at once, not at the next retry (README "Differences": drift clears as
//! soon as the content is restored).

mod common;

use common::*;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drift_present_at_daemon_start_clears_as_soon_as_it_is_restored() {
    let c = Cluster::start(1, 0).await;
    let node = mco::up::local_nodes(0, 1).remove(0);
    let daemon = c.spawn_daemon(&node);
    c.wait_node_done("worker-0", Duration::from_secs(30), |_| true).await;
    let old = c.pool("worker").spec.configuration.name;
    c.apply(&[examples().join("chrony.yaml")]).await;
    c.wait_rolled_out("worker", &old, Duration::from_secs(60)).await;
    daemon.stop().await;

    let file = c.root("worker-0").join("etc/chrony.conf");
    let good = std::fs::read(&file).unwrap();
    std::fs::write(&file, "server evil\n").unwrap();
    let daemon = c.spawn_daemon(&node);
    c.wait_for("worker-0 Degraded by its boot check", Duration::from_secs(20), |s| {
        let a = mco::model::NodeAnnotations::read(&s.nodes["worker-0"], &c.keys());
        a.state == "Degraded"
            && a.reason.contains(r#"content mismatch for file "/etc/chrony.conf""#)
            && a.reason.contains("to recover, restore the content")
    })
    .await;
    // Let the retries back off: after three failed checks the next one is 8 s away.
    let log = c.data_dir.join("logs").join("worker-0.log");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let failures = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .matches("update failed")
            .count();
        if failures >= 3 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the boot check was not retried");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // MCO's Warning Event for the boot-time check: its message is the validation error
    // alone (`checkStateOnFirstRun`, pkg/daemon/daemon.go), not the node's wrapped reason.
    let events: serde_json::Value = json_of(
        c.http()
            .get(format!("{}/api/v1/namespaces/default/events", c.server.url())),
    )
    .await;
    let failed: Vec<&serde_json::Value> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["name"] == "worker-0" && e["reason"] == "OnDiskStateValidationFailed")
        .collect();
    assert_eq!(failed.len(), 1, "{events:#}");
    assert_eq!(failed[0]["type"], "Warning");
    assert_eq!(failed[0]["message"], r#"content mismatch for file "/etc/chrony.conf""#);
    std::fs::write(&file, &good).unwrap();
    // Well before the next retry (>= 4 s away): the drift monitor's Clean report re-checks now.
    c.wait_node_done("worker-0", Duration::from_secs(3), |_| true).await;
    daemon.stop().await;
    c.stop().await;
}

/// `/metrics` as (metric, labels) → value.
async fn scrape(c: &Cluster, metric: &str, node: &str) -> Option<f64> {
    let text = c.metrics_text().await;
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("parses");
    scrape
        .samples
        .iter()
        .find(|s| s.metric == metric && s.labels.get("node") == Some(node))
        .map(|s| match s.value {
            prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Untyped(v) => v,
            _ => f64::NAN,
        })
}

/// Waits (deadline `within`) until `metric{node}` satisfies `f`; returns its value.
async fn wait_metric(c: &Cluster, metric: &str, node: &str, within: Duration, f: impl Fn(f64) -> bool) -> f64 {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let v = scrape(c, metric, node).await;
        if let Some(v) = v.filter(|v| f(*v)) {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{metric}{{node={node}}} is {v:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Issue 24, item 8, from MCO's `pkg/daemon/daemon.go`: a drift the monitor finds sets
/// `mcd_config_drift` to the time (`onConfigDrift`: `SetToCurrentTime`) and emits a Warning
/// Event `ConfigDriftDetected` whose message is the validation error; once the file matches
/// again and the node is Done, the metric is 0 again (`initConfigDriftMetric` when the monitor
/// restarts on a node not Degraded by drift). A unit with `enabled: true` and no `[Install]`
/// section is enabled as MCO does (systemctl succeeds, the node is Done) with systemctl's
/// warning in the daemon's log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_sets_the_metric_and_mcos_warning_event_and_restoring_clears_it() {
    let c = Cluster::start(1, 0).await;
    let node = mco::up::local_nodes(0, 1).remove(0);
    let daemon = c.spawn_daemon(&node);
    c.wait_node_done("worker-0", Duration::from_secs(30), |_| true).await;
    let old = c.pool("worker").spec.configuration.name;
    let mc = c.data_dir.join("drift-mc.yaml");
    std::fs::write(
        &mc,
        r#"apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 99-drift-test
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.4.0
    storage:
      files:
      - path: /etc/drift-test
        mode: 420
        contents:
          source: data:,good%0A
    systemd:
      units:
      - name: no-install.service
        enabled: true
        contents: |
          [Unit]
          Description=a unit with no [Install] section
          [Service]
          ExecStart=/bin/true
"#,
    )
    .unwrap();
    c.apply(&[mc]).await;
    c.wait_rolled_out("worker", &old, Duration::from_secs(60)).await;
    // systemctl enable leaves it static: Done (MCO's check accepts "static"), with the warning.
    let log = c.data_dir.join("logs").join("worker-0.log");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains(r#"unit "no-install.service" has enabled: true but systemctl reports "static""#)
            && text.contains("no installation config"),
        "{text}"
    );
    // Clean: the metric is 0 (the daemon clears it at its first clean check).
    wait_metric(&c, "mcd_config_drift", "worker-0", Duration::from_secs(10), |v| {
        v == 0.0
    })
    .await;

    let file = c.root("worker-0").join("etc/drift-test");
    let before = jiff::Timestamp::now().as_second() as f64;
    std::fs::write(&file, "evil\n").unwrap();
    c.wait_for("worker-0 Degraded by drift", Duration::from_secs(20), |s| {
        let a = mco::model::NodeAnnotations::read(&s.nodes["worker-0"], &c.keys());
        a.state == "Degraded" && a.reason == r#"content mismatch for file "/etc/drift-test""#
    })
    .await;
    let at = wait_metric(&c, "mcd_config_drift", "worker-0", Duration::from_secs(10), |v| v > 0.0).await;
    assert!(
        at >= before - 1.0 && at <= before + 60.0,
        "a Unix time of now: {at} vs {before}"
    );
    // MCO's Event: Warning ConfigDriftDetected, the error as its message.
    let events: serde_json::Value = json_of(
        c.http()
            .get(format!("{}/api/v1/namespaces/default/events", c.server.url())),
    )
    .await;
    let drift: Vec<&serde_json::Value> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["name"] == "worker-0" && e["reason"] == "ConfigDriftDetected")
        .collect();
    assert_eq!(drift.len(), 1, "{events:#}");
    assert_eq!(drift[0]["type"], "Warning");
    assert_eq!(drift[0]["message"], r#"content mismatch for file "/etc/drift-test""#);

    // Restored: Done again and the metric back to 0.
    std::fs::write(&file, "good\n").unwrap();
    c.wait_node_done("worker-0", Duration::from_secs(20), |_| true).await;
    wait_metric(&c, "mcd_config_drift", "worker-0", Duration::from_secs(10), |v| {
        v == 0.0
    })
    .await;
    // The way back to Done is not a drift: still exactly one ConfigDriftDetected.
    let events: serde_json::Value = json_of(
        c.http()
            .get(format!("{}/api/v1/namespaces/default/events", c.server.url())),
    )
    .await;
    let n = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["reason"] == "ConfigDriftDetected")
        .count();
    assert_eq!(n, 1);
    daemon.stop().await;
    c.stop().await;
}
