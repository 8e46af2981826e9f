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
    std::fs::write(&file, &good).unwrap();
    // Well before the next retry (>= 4 s away): the drift monitor's Clean report re-checks now.
    c.wait_node_done("worker-0", Duration::from_secs(3), |_| true).await;
    daemon.stop().await;
    c.stop().await;
}
