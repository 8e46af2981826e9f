//! MCO's own alert rules (tests/fixtures/mco-prometheus-rules.yaml, copied from MCO's
//! install/0000_90_machine-config_01_prometheus-rules.yaml) evaluated by `promtool test rules`
//! (Debian's `prometheus` package, installed by `.ci/run`) against the series a real mco server
//! exports while a real sandbox daemon fails a kernel-type switch: the node is Degraded and its
//! pivot error counted, so MCO's `MCDPivotError` fires after its `for: 2m`, a rule written for
//! MCO's `mcd_state` (`time() - mcd_state{state="Degraded"} > 600`) fires after ten minutes, and
//! no other MCO alert fires; and MCO's `KubeletHealthState` over a real daemon's kubelet health
//! monitor polling a kubelet `healthz` endpoint that answers, fails its checks, and drops away.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

/// A worker MachineConfig switching to the 64k-pages kernel, which only aarch64 has (MCO:
/// "64k-pages is only supported for aarch64 architecture"): a failed pivot on this machine.
const PAGES_64K: &str = "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 99-worker-64k
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  kernelType: 64k-pages
";

/// The families whose values are Unix times (MCO's `SetToCurrentTime`): rebased to promtool's
/// clock, which starts at 0 (the scrape instant is 0 there).
const TIME_FAMILIES: [&str; 4] = ["mcd_state", "mcd_update_state", "mco_state", "mcd_config_drift"];

/// A rule written for MCO's `mcd_state` (issue 28): a node Degraded for more than ten minutes.
const DEGRADED_RULE: &str = "groups:
  - name: degraded-for-ten-minutes
    rules:
      - alert: NodeDegradedTenMinutes
        expr: time() - mcd_state{state=\"Degraded\"} > 600
";

fn have_promtool() -> bool {
    let ok = std::process::Command::new("promtool").arg("--version").output().is_ok();
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "promtool is not installed (Debian package prometheus): .ci/run installs it"
        );
        eprintln!("SKIPPED mco_alerts_fire_as_mcos_rules_say: promtool is not on PATH (apt-get install prometheus)");
    }
    ok
}

/// A PromQL series selector: `name{k="v",...}` with Prometheus' string escapes.
fn selector(name: &str, labels: &BTreeMap<String, String>) -> String {
    let body: Vec<String> = labels
        .iter()
        .map(|(k, v)| {
            format!(
                "{k}=\"{}\"",
                v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
            )
        })
        .collect();
    format!("{name}{{{}}}", body.join(","))
}

/// The rule's annotation with `{{ $labels.X }}` expanded from the alerting series' labels
/// (Prometheus expands annotation templates with the series' labels, before the rule's own are
/// added; an absent label is empty), the only template construct these MCO rules use.
fn expand(template: &str, labels: &BTreeMap<String, String>) -> String {
    let mut out = template.to_string();
    while let Some(start) = out.find("{{ $labels.") {
        let end = out[start..].find("}}").expect("closed template") + start;
        let name = out[start + "{{ $labels.".len()..end].trim();
        let value = labels.get(name).cloned().unwrap_or_default();
        out.replace_range(start..end + 2, &value);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mco_alerts_fire_as_mcos_rules_say() {
    if !have_promtool() {
        return;
    }
    let c = Cluster::start(0, 1).await;
    let dir = tempfile::tempdir().unwrap();
    let mc = dir.path().join("64k.yaml");
    std::fs::write(&mc, PAGES_64K).unwrap();
    c.apply(&[mc]).await;
    let keys = c.keys();
    c.wait_for("worker-0 Degraded by the kernel switch", Duration::from_secs(30), |s| {
        let a = mco::model::NodeAnnotations::read(&s.nodes["worker-0"], &keys);
        a.state == "Degraded" && a.reason.contains("64k-pages")
    })
    .await;
    // The daemon's pivot report is sent in the background: wait for it to be counted.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = c.metrics_text().await;
        if !text.contains("mcd_pivot_errors_total{node=\"worker-0\"} 0\n")
            && text.contains("mcd_pivot_errors_total{node=\"worker-0\"}")
        {
            break text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no pivot error counted:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let scraped_at = jiff::Timestamp::now().as_millisecond() as f64 / 1000.0;
    c.stop().await;

    // Every MCO-named series of the scrape (mcd_*, mcc_*, mco_* gauges and counters), with the
    // target labels a Prometheus scrape adds, held for twelve minutes as they were scraped.
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("parses");
    let mut input = String::new();
    let mut degraded_labels = None;
    let mut pivot_labels = None;
    for s in &scrape.samples {
        let v = match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => continue,
        };
        if !["mcd_", "mcc_", "mco_"].iter().any(|p| s.metric.starts_with(p)) {
            continue;
        }
        if v.is_nan() {
            continue;
        }
        // An empty label value is no label in Prometheus.
        let mut labels: BTreeMap<String, String> = s
            .labels
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        labels.insert("job".into(), "mco".into());
        labels.insert("instance".into(), "mco-server".into());
        let v = if TIME_FAMILIES.contains(&s.metric.as_str()) && v > 0.0 {
            (v - scraped_at).round()
        } else {
            v
        };
        if s.metric == "mcd_state" && labels.get("state").map(String::as_str) == Some("Degraded") {
            degraded_labels = Some(labels.clone());
        }
        if s.metric == "mcd_pivot_errors_total" && labels.get("node").map(String::as_str) == Some("worker-0") {
            assert!(v >= 1.0, "{text}");
            pivot_labels = Some(labels.clone());
        }
        // A YAML single-quoted scalar: a quote is doubled.
        let series = selector(&s.metric, &labels).replace('\'', "''");
        writeln!(input, "      - series: '{series}'\n        values: '{v}+0x24'").unwrap();
    }
    let degraded = degraded_labels.unwrap_or_else(|| panic!("no Degraded mcd_state series:\n{text}"));
    let pivot = pivot_labels.expect("a pivot error series");
    assert!(
        degraded.get("reason").is_some_and(|r| r.contains("64k-pages")),
        "{degraded:?}"
    );

    // What MCO's rule says MCDPivotError carries: the series' labels without __name__, the
    // rule's labels, its annotations expanded.
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mco-prometheus-rules.yaml");
    let rules: serde_json::Value = serde_saphyr::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    let rule = rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().iter())
        .find(|r| r["alert"].as_str() == Some("MCDPivotError"))
        .expect("MCO's MCDPivotError rule")
        .clone();
    assert_eq!(rule["for"].as_str(), Some("2m"));
    let mut alert_labels = pivot.clone();
    for (k, v) in rule["labels"].as_object().unwrap() {
        alert_labels.insert(k.clone(), v.as_str().unwrap().trim().into());
    }
    let yaml_map = |m: &BTreeMap<String, String>, indent: &str| -> String {
        m.iter()
            .map(|(k, v)| format!("{indent}{k}: {}\n", serde_json::to_string(v).unwrap()))
            .collect()
    };
    let annotations: BTreeMap<String, String> = rule["annotations"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), expand(v.as_str().unwrap(), &pivot)))
        .collect();
    let none = |alert: &str, at: &str| {
        format!("      - eval_time: {at}\n        alertname: {alert}\n        exp_alerts: []\n")
    };
    let mut cases = String::new();
    // Before the rule's `for`: pending, not firing; after it: firing with the rule's labels.
    cases += &none("MCDPivotError", "1m");
    write!(
        cases,
        "      - eval_time: 3m\n        alertname: MCDPivotError\n        exp_alerts:\n          - exp_labels:\n{}            exp_annotations:\n{}",
        yaml_map(&alert_labels, "                "),
        yaml_map(&annotations, "                ")
    )
    .unwrap();
    // The Degraded node for nine minutes, then eleven (mcd_state holds when it degraded).
    cases += &none("NodeDegradedTenMinutes", "9m");
    write!(
        cases,
        "      - eval_time: 11m\n        alertname: NodeDegradedTenMinutes\n        exp_alerts:\n          - exp_labels:\n{}",
        yaml_map(&degraded, "                ")
    )
    .unwrap();
    // Nothing else mco exports here is an alert condition: no failed reboot, drain, pool
    // overlap, boot-image skew (mco has none), and a kubelet health count of 0 (no monitor).
    for alert in [
        "MCDRebootError",
        "MCCDrainError",
        "MCCPoolAlert",
        "MCCBootImageSkewEnforcementNone",
        "KubeletHealthState",
    ] {
        cases += &none(alert, "11m");
    }
    let extra = dir.path().join("degraded.yaml");
    std::fs::write(&extra, DEGRADED_RULE).unwrap();
    let test = format!(
        "rule_files:\n  - {}\n  - {}\nevaluation_interval: 30s\ntests:\n  - interval: 30s\n    input_series:\n{input}    alert_rule_test:\n{cases}",
        fixture.display(),
        extra.display()
    );
    let test_file = dir.path().join("test.yaml");
    std::fs::write(&test_file, &test).unwrap();
    let out = std::process::Command::new("promtool")
        .args(["test", "rules"])
        .arg(&test_file)
        .output()
        .expect("promtool runs");
    assert!(
        out.status.success(),
        "promtool test rules:\n{}{}\n--- test file:\n{test}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// How the stand-in kubelet's `healthz` answers.
const UP: u8 = 0;
/// An answer other than `ok` (the kubelet's failed-check body, HTTP 500).
const UNHEALTHY: u8 = 1;
/// The connection closed unanswered: the kubelet gone.
const DOWN: u8 = 2;

/// The kubelet's `healthz` endpoint on 127.0.0.1:0 (the node runs no kubelet): answers `ok`,
/// the kubelet's failed-check text with 500, or closes each connection unanswered, as `mode`
/// says; `served` counts the requests answered or dropped.
async fn kubelet_healthz(
    mode: std::sync::Arc<std::sync::atomic::AtomicU8>,
    served: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> (String, tokio::task::JoinHandle<()>) {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/healthz", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            let mode = mode.load(Ordering::SeqCst);
            if mode == DOWN {
                served.fetch_add(1, Ordering::SeqCst);
                drop(conn);
                continue;
            }
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let (status, body) = match mode {
                UP => ("200 OK", "ok".to_string()),
                _ => (
                    "500 Internal Server Error",
                    "[+]ping ok\n[-]syncloop failed: reason withheld\nhealthz check failed".to_string(),
                ),
            };
            let answer = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = conn.write_all(answer.as_bytes()).await;
            served.fetch_add(1, Ordering::SeqCst);
        }
    });
    (url, task)
}

/// The value of `mcd_kubelet_state{node="worker-0"}` in a scrape.
fn kubelet_state(text: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix("mcd_kubelet_state{node=\"worker-0\"} "))
        .map(|v| v.trim().parse().unwrap())
}

/// MCO's `KubeletHealthState` (`mcd_kubelet_state > 2`) against the series a real server exports
/// while a real daemon's kubelet health monitor (`--kubelet-healthz-endpoint`, MCO's
/// `runKubeletHealthzMonitor`) polls a kubelet `healthz` endpoint: 0 while it answers `ok`;
/// still 0 while it answers 500 with the kubelet's failed-check text (MCO's `getHealth` counts
/// only a request that fails); counting consecutive failures once the endpoint drops every
/// connection, so the alert fires with MCO's labels and annotations at the third; 0 again, and
/// the alert resolved, once it answers `ok`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_health_state_fires_as_mcos_rule_says() {
    use std::sync::atomic::Ordering;
    if !have_promtool() {
        return;
    }
    let c = Cluster::start(0, 0).await;
    let mode = std::sync::Arc::new(std::sync::atomic::AtomicU8::new(UP));
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (url, kubelet) = kubelet_healthz(mode.clone(), served.clone()).await;
    let node = mco::up::local_nodes(0, 1).remove(0);
    let labels: Vec<(&str, &str)> = node.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let token = c.node_token_file(&node.name, &labels).await;
    let daemon = TestDaemon::start_with_args(
        c.server.url(),
        node.clone(),
        c.root(&node.name),
        c.data_dir.join("logs"),
        Some(token),
        vec![
            "--kubelet-healthz-endpoint".into(),
            url,
            "--kubelet-healthz-interval".into(),
            "100ms".into(),
        ],
    );
    let log = c.data_dir.join("logs").join("worker-0.log");
    // Waits until the scrape satisfies `f` (checked after each change of the stand-in's count).
    let scrape_until = |what: &'static str, f: Box<dyn Fn(&str) -> bool + Send>| {
        let c = &c;
        let log = log.clone();
        async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            loop {
                let text = c.metrics_text().await;
                if f(&text) {
                    return text;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "timed out waiting for {what}:\n{}\n--- daemon log:\n{}",
                    text.lines()
                        .filter(|l| l.contains("kubelet"))
                        .collect::<Vec<_>>()
                        .join("\n"),
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    // Healthy: checked twice, the count 0.
    let up_text = scrape_until(
        "two healthy checks",
        Box::new({
            let served = served.clone();
            move |t| served.load(Ordering::SeqCst) >= 2 && kubelet_state(t) == Some(0.0)
        }),
    )
    .await;
    assert!(up_text.contains("# TYPE mcd_kubelet_state gauge\n"), "{up_text}");
    assert!(
        up_text.contains("# HELP mcd_kubelet_state state of kubelet health monitor\n"),
        "{up_text}"
    );
    // Unhealthy answers: once five more are served, at least three checks got one and ended
    // (each check starts after the previous one's report), and none counted.
    mode.store(UNHEALTHY, Ordering::SeqCst);
    let from = served.load(Ordering::SeqCst);
    let unhealthy = scrape_until(
        "five unhealthy answers",
        Box::new({
            let served = served.clone();
            move |_| served.load(Ordering::SeqCst) >= from + 5
        }),
    )
    .await;
    assert_eq!(
        kubelet_state(&unhealthy),
        Some(0.0),
        "a non-ok answer is no failure in MCO"
    );
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("Kubelet Healthz Endpoint returned: [+]ping ok"),
        "MCO's warning for a body other than ok"
    );
    // Gone: consecutive failures counted past MCO's threshold.
    mode.store(DOWN, Ordering::SeqCst);
    let down_text = scrape_until(
        "three failed checks",
        Box::new(|t| kubelet_state(t).is_some_and(|v| v >= 3.0)),
    )
    .await;
    let failures = kubelet_state(&down_text).unwrap();
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("kubelet health check has failed 3 times"),
        "MCO's failure text"
    );
    // Back: the count is reset by the first success.
    mode.store(UP, Ordering::SeqCst);
    let back_text = scrape_until("the kubelet healthy again", Box::new(|t| kubelet_state(t) == Some(0.0))).await;
    daemon.stop().await;
    kubelet.abort();
    c.stop().await;

    // The three scrapes as one series, each held for a minute (promtool's clock: 0, 1m, 2m).
    let values: Vec<f64> = [&up_text, &down_text, &back_text]
        .iter()
        .map(|t| kubelet_state(t).unwrap())
        .collect();
    assert_eq!(values, vec![0.0, failures, 0.0]);
    let series = "mcd_kubelet_state{instance=\"mco-server\",job=\"mco\",node=\"worker-0\"}";
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mco-prometheus-rules.yaml");
    let rules: serde_json::Value = serde_saphyr::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    let rule = rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().iter())
        .find(|r| r["alert"].as_str() == Some("KubeletHealthState"))
        .expect("MCO's KubeletHealthState rule")
        .clone();
    assert_eq!(rule["expr"].as_str().map(str::trim), Some("mcd_kubelet_state > 2"));
    assert!(rule.get("for").is_none(), "MCO's rule fires at once");
    let mut alert_labels: BTreeMap<String, String> = [("instance", "mco-server"), ("job", "mco"), ("node", "worker-0")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for (k, v) in rule["labels"].as_object().unwrap() {
        alert_labels.insert(k.clone(), v.as_str().unwrap().trim().into());
    }
    let yaml_map = |m: &BTreeMap<String, String>, indent: &str| -> String {
        m.iter()
            .map(|(k, v)| format!("{indent}{k}: {}\n", serde_json::to_string(v).unwrap()))
            .collect()
    };
    let annotations: BTreeMap<String, String> = rule["annotations"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), expand(v.as_str().unwrap(), &alert_labels)))
        .collect();
    let none =
        |at: &str| format!("      - eval_time: {at}\n        alertname: KubeletHealthState\n        exp_alerts: []\n");
    let mut cases = none("30s");
    write!(
        cases,
        "      - eval_time: 1m\n        alertname: KubeletHealthState\n        exp_alerts:\n          - exp_labels:\n{}            exp_annotations:\n{}",
        yaml_map(&alert_labels, "                "),
        yaml_map(&annotations, "                ")
    )
    .unwrap();
    cases += &none("2m30s");
    let v = |x: f64| format!("{x} {x}");
    let test = format!(
        "rule_files:\n  - {}\nevaluation_interval: 30s\ntests:\n  - interval: 30s\n    input_series:\n      - series: '{series}'\n        values: '{} {} {} {}'\n    alert_rule_test:\n{cases}",
        fixture.display(),
        v(values[0]),
        v(values[1]),
        v(values[2]),
        v(values[2]),
    );
    let dir = tempfile::tempdir().unwrap();
    let test_file = dir.path().join("kubelet.yaml");
    std::fs::write(&test_file, &test).unwrap();
    let out = std::process::Command::new("promtool")
        .args(["test", "rules"])
        .arg(&test_file)
        .output()
        .expect("promtool runs");
    assert!(
        out.status.success(),
        "promtool test rules:\n{}{}\n--- test file:\n{test}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
