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
    sample(c, metric, "node", node).await
}

/// The value of `metric{label=value}` on `/metrics`; `None` when the scrape has no such sample.
async fn sample(c: &Cluster, metric: &str, label: &str, value: &str) -> Option<f64> {
    let text = c.metrics_text().await;
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("parses");
    scrape
        .samples
        .iter()
        .find(|s| s.metric == metric && s.labels.get(label) == Some(value))
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

/// `metric{pool}` on `/metrics`.
async fn pool_metric(c: &Cluster, metric: &str, pool: &str) -> Option<f64> {
    sample(c, metric, "pool", pool).await
}

/// A node Degraded by drift is counted at once by its pool and by the metric alike: MCO's
/// node controller counts the pool's Degraded and Unreconcilable nodes in
/// `status.degradedMachineCount` on the sync the node's change triggers
/// (`pkg/controller/node/status.go` `calculateStatus`) and sets `mco_degraded_machine_count`
/// from the same count (`pkg/controller/common/metrics.go`). Both reach 1 within a deadline of
/// the node's change, and once the pool's status (read over the API) shows it, every later
/// scrape shows it too, until the content is restored and both are 0 again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_degraded_node_is_counted_by_the_pool_status_and_the_metric_alike() {
    let c = Cluster::start(1, 1).await;
    let old = c.pool("worker").spec.configuration.name;
    c.apply(&[examples().join("chrony.yaml")]).await;
    c.wait_rolled_out("worker", &old, Duration::from_secs(60)).await;
    let counted = |pool: &serde_json::Value| pool["status"]["degradedMachineCount"].as_i64().unwrap_or(-1);
    let pool: serde_json::Value = c
        .client
        .get(mco::model::Kind::MachineConfigPool, "worker")
        .await
        .unwrap();
    assert_eq!(counted(&pool), 0);
    assert_eq!(pool_metric(&c, "mco_degraded_machine_count", "worker").await, Some(0.0));

    let file = c.root("worker-0").join("etc/chrony.conf");
    let good = std::fs::read(&file).unwrap();
    std::fs::write(&file, "server evil\n").unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut pool_counted = false;
    loop {
        let pool: serde_json::Value = c
            .client
            .get(mco::model::Kind::MachineConfigPool, "worker")
            .await
            .unwrap();
        let metric = pool_metric(&c, "mco_degraded_machine_count", "worker").await;
        if counted(&pool) == 1 {
            pool_counted = true;
        }
        if pool_counted {
            assert_eq!(
                metric,
                Some(1.0),
                "the pool counts the Degraded node, the metric scraped after it does not"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "20 s after the drift: pool {}, metric {metric:?}\n{}",
            pool["status"],
            c.summary()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // And it stays so while the node is Degraded.
    for _ in 0..20 {
        assert_eq!(pool_metric(&c, "mco_degraded_machine_count", "worker").await, Some(1.0));
        assert_eq!(c.annotations("worker-0").state, "Degraded");
    }
    std::fs::write(&file, &good).unwrap();
    c.wait_node_done("worker-0", Duration::from_secs(20), |_| true).await;
    c.wait_for("the pool counts no Degraded node", Duration::from_secs(10), |s| {
        s.pools["worker"].status.degraded_machine_count == 0
    })
    .await;
    assert_eq!(pool_metric(&c, "mco_degraded_machine_count", "worker").await, Some(0.0));
    c.stop().await;
}

/// The pool status (and so `mco_degraded_machine_count`) counts a node gone Degraded while the
/// drain controller waits for its drain hook on another node: MCO's node controller syncs a
/// pool's status on its own work queue (`pkg/controller/node/status.go`), never behind the
/// drain controller's (`pkg/controller/drain/drain_controller.go`), whose hook may take 90 s a
/// node. The hook here holds the first worker's drain until the test lets it go; the other
/// worker's drift is counted by both within the deadline while the hook still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_degraded_while_a_drain_hook_runs_is_counted_at_once() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let block = dir.path().join("block");
    let hook = dir.path().join("hook.sh");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\ntouch \"{}/draining-$1\"\nwhile [ -e \"{}\" ]; do sleep 0.05; done\n",
            dir.path().display(),
            block.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let c = Cluster::start_with_drain_hook(1, 2, &hook.display().to_string()).await;
    let old = c.pool("worker").spec.configuration.name;
    c.apply(&[examples().join("chrony.yaml")]).await;
    let old = c.wait_rolled_out("worker", &old, Duration::from_secs(60)).await;
    for w in ["worker-0", "worker-1"] {
        let _ = std::fs::remove_file(dir.path().join(format!("draining-{w}")));
    }

    // The next rollout's first drain waits in the hook.
    std::fs::write(&block, "").unwrap();
    let mc = c.data_dir.join("second.yaml");
    std::fs::write(
        &mc,
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-worker-second\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  config:\n    ignition:\n      version: 3.4.0\n    storage:\n      files:\n      - path: /etc/second\n        mode: 420\n        contents:\n          source: data:,second%0A\n",
    )
    .unwrap();
    c.apply(&[mc]).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let drained = loop {
        if let Some(w) = ["worker-0", "worker-1"]
            .into_iter()
            .find(|w| dir.path().join(format!("draining-{w}")).exists())
        {
            break w;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no drain reached the hook\n{}",
            c.summary()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let other = if drained == "worker-0" { "worker-1" } else { "worker-0" };
    assert_eq!(c.annotations(other).current_config, old, "{other} waits its turn");

    let file = c.root(other).join("etc/chrony.conf");
    let good = std::fs::read(&file).unwrap();
    std::fs::write(&file, "server evil\n").unwrap();
    c.wait_for(
        &format!("the pool counts {other} Degraded while {drained}'s drain hook runs"),
        Duration::from_secs(10),
        |s| s.pools["worker"].status.degraded_machine_count == 1,
    )
    .await;
    assert_eq!(pool_metric(&c, "mco_degraded_machine_count", "worker").await, Some(1.0));
    let a = c.annotations(drained);
    assert!(
        a.desired_drain != a.last_applied_drain,
        "{drained}'s drain is still unanswered"
    );

    // Let the hook go: the drain is answered and the rollout goes on once the drift is undone.
    std::fs::remove_file(&block).unwrap();
    std::fs::write(&file, &good).unwrap();
    c.wait_rolled_out("worker", &old, Duration::from_secs(90)).await;
    assert_eq!(pool_metric(&c, "mco_degraded_machine_count", "worker").await, Some(0.0));
    c.stop().await;
}
