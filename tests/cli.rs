//! The `mco` binary's client verbs against a real server and real daemons, as a user runs them:
//! get (names, KIND/NAME, -l, --field-selector, -o name|jsonpath|custom-columns|wide, -w),
//! label/annotate, apply --wait, rollout status (Updated and Degraded), delete -f, completion,
//! apply/kubectl apply alternation appending nothing, drift reasons naming every path.
//! Watch output is read line by line with a deadline, never after a sleep.

mod common;

use common::*;
use mco::model::{Kind, NodeAnnotations};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `mco ARGS` against the cluster's server (MCO_SERVER), at most 120 s.
async fn mco(c: &Cluster, args: &[&str]) -> Out {
    let o = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"))
            .args(args)
            .env("MCO_SERVER", c.server.url())
            .env("MCO_TOKEN", c.server.admin_token().expect("the admin token"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("mco finished within 120 s")
    .expect("mco runs");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
    }
}

/// Like [`mco`], expecting success.
async fn ok(c: &Cluster, args: &[&str]) -> String {
    let o = mco(c, args).await;
    assert_eq!(
        o.code, 0,
        "mco {args:?} failed:\nstdout: {}\nstderr: {}",
        o.stdout, o.stderr
    );
    o.stdout
}

/// A running `mco get ... -w`, read line by line.
struct Watch {
    _child: tokio::process::Child,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    seen: Vec<String>,
}

impl Watch {
    fn start(c: &Cluster, args: &[&str]) -> Watch {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"))
            .args(args)
            .env("MCO_SERVER", c.server.url())
            .env("MCO_TOKEN", c.server.admin_token().expect("the admin token"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("mco get -w starts");
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Watch {
            _child: child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Reads lines until one satisfies `f`; panics with every line seen after `timeout`.
    async fn until(&mut self, what: &str, timeout: Duration, f: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.next_line())
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "no watch line {what} within {timeout:?}; seen:\n{}",
                        self.seen.join("\n")
                    )
                })
                .expect("watch output readable")
                .unwrap_or_else(|| panic!("the watch ended before {what}; seen:\n{}", self.seen.join("\n")));
            self.seen.push(line.clone());
            if f(&line) {
                return line;
            }
        }
    }
}

fn cols(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_label_annotate_apply_wait_watch_delete() {
    let c = Cluster::start(1, 2).await;

    // several names, KIND/NAME, several kinds
    let out = ok(&c, &["get", "mcp", "worker", "master"]).await;
    let names: Vec<&str> = out.lines().skip(1).map(|l| cols(l)[0]).collect();
    assert_eq!(names, ["worker", "master"], "{out}");
    let out = ok(&c, &["get", "mcp/worker", "node/worker-0"]).await;
    assert!(out.starts_with("NAME ") && out.contains("\n\nNODE "), "{out}");
    // kubectl get with several kinds prints NAME as kind.group/name (printWithKind).
    assert!(
        out.contains("\nmachineconfigpool.machineconfiguration.openshift.io/worker ")
            && out.contains("\nnode/worker-0 "),
        "{out}"
    );

    // selectors
    let out = ok(
        &c,
        &["get", "nodes", "-l", "node-role.kubernetes.io/worker", "-o", "name"],
    )
    .await;
    assert_eq!(out, "node/worker-0\nnode/worker-1\n");
    let out = ok(
        &c,
        &["get", "no", "--field-selector", "metadata.name!=worker-0", "-o", "name"],
    )
    .await;
    assert_eq!(out, "node/master-0\nnode/worker-1\n");
    let refused = mco(&c, &["get", "nodes", "worker-0", "-l", "a=b"]).await;
    assert_eq!(refused.code, 1);
    assert!(
        refused
            .stderr
            .contains("name cannot be provided when a selector is specified"),
        "{}",
        refused.stderr
    );

    // jsonpath, custom-columns, wide
    let out = ok(&c, &["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"]).await;
    assert_eq!(out, "master-0 worker-0 worker-1");
    let out = ok(
        &c,
        &[
            "get",
            "node",
            "worker-0",
            "-o",
            r#"jsonpath={.status.conditions[?(@.type=="Ready")].status}"#,
        ],
    )
    .await;
    assert_eq!(out, "True");
    let out = ok(
        &c,
        &[
            "get",
            "nodes",
            "worker-0",
            "worker-1",
            "-o",
            r"custom-columns=NAME:.metadata.name,ZONE:.metadata.labels.topology\.kubernetes\.io/zone,NONE:.spec.nothing",
        ],
    )
    .await;
    // mco up spreads nodes over zones round-robin: master-0 a, worker-0 b, worker-1 c.
    assert_eq!(
        out,
        "NAME       ZONE     NONE\nworker-0   zone-b   <none>\nworker-1   zone-c   <none>\n"
    );
    let bad = mco(&c, &["get", "nodes", "-o", "jsonpath={.items[}"]).await;
    assert_eq!(bad.code, 1);
    assert!(bad.stderr.contains("invalid JSONPath"), "{}", bad.stderr);
    let out = ok(&c, &["get", "nodes", "-o", "wide"]).await;
    assert_eq!(
        cols(out.lines().next().unwrap()),
        ["NODE", "STATUS", "DESIRED", "CURRENT", "STATE", "POOL", "REASON", "BOOT", "ID"]
    );
    let w0 = out.lines().find(|l| l.starts_with("worker-0 ")).unwrap();
    let w0 = cols(w0);
    assert_eq!(
        (w0[1], w0[4], w0[5], w0[6]),
        ("Ready", "Done", "worker", "<none>"),
        "{out}"
    );
    assert_eq!(w0[7], c.boot_id("worker-0"));
    let m0 = out.lines().find(|l| l.starts_with("master-0 ")).unwrap();
    assert_eq!(cols(m0)[5], "master");

    // a cordoned node reads Ready,SchedulingDisabled (kubectl's node printer)
    c.client
        .merge_patch(
            Kind::Node,
            "master-0",
            &serde_json::json!({"spec": {"unschedulable": true}}),
            false,
        )
        .await
        .unwrap();
    let out = ok(&c, &["get", "nodes", "master-0"]).await;
    assert_eq!(
        cols(out.lines().nth(1).unwrap())[1],
        "Ready,SchedulingDisabled",
        "{out}"
    );
    c.client
        .merge_patch(
            Kind::Node,
            "master-0",
            &serde_json::json!({"spec": {"unschedulable": null}}),
            false,
        )
        .await
        .unwrap();

    // label / annotate with kubectl's overwrite rule and key- removal
    assert_eq!(
        ok(&c, &["label", "node", "worker-0", "env=prod"]).await,
        "node/worker-0 labeled\n"
    );
    let refused = mco(&c, &["label", "node/worker-0", "env=dev"]).await;
    assert_eq!(refused.code, 1);
    // kubectl prints the refusal on stderr.
    assert_eq!(
        refused.stderr, "error: 'env' already has a value (prod), and --overwrite is false\n",
        "{}",
        refused.stdout
    );
    assert_eq!(
        ok(&c, &["label", "node", "worker-0", "env=dev", "--overwrite"]).await,
        "node/worker-0 labeled\n"
    );
    let labels = |c: &Cluster| {
        c.server.hub.state().nodes["worker-0"]
            .metadata
            .labels
            .clone()
            .unwrap_or_default()
    };
    assert_eq!(labels(&c).get("env").map(String::as_str), Some("dev"));
    // kubectl label: a removal without --overwrite prints "unlabeled" (updateDataChangeMsg).
    assert_eq!(
        ok(&c, &["label", "node", "worker-0", "env-"]).await,
        "node/worker-0 unlabeled\n"
    );
    assert!(!labels(&c).contains_key("env"));
    // A prefixed key ending in '-' is a removal, also after a set, and KIND/NAME works too.
    ok(&c, &["label", "node", "worker-0", "node-role.kubernetes.io/infra="]).await;
    assert_eq!(
        ok(&c, &["label", "node", "worker-0", "node-role.kubernetes.io/infra-"]).await,
        "node/worker-0 unlabeled\n"
    );
    assert!(!labels(&c).contains_key("node-role.kubernetes.io/infra"));
    // --server before the command, as kubectl's global flag (rc 0 with the env unset too).
    let o = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"))
        .args(["--server", &c.server.url(), "get", "mcp", "worker", "-o", "name"])
        .args(["--token", &c.server.admin_token().expect("the admin token")])
        .env_remove("MCO_SERVER")
        .output()
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!("machineconfigpool.{GROUP}/worker\n")
    );
    // kubectl's resource/name rules (cli-runtime builder.go).
    let o = mco(&c, &["get", "mcp/"]).await;
    assert_eq!(
        o.stderr,
        "error: arguments in resource/name form must have a single resource and name\n"
    );
    let o = mco(&c, &["delete", "mcp", "master", "mcp/worker"]).await;
    assert_eq!(o.code, 1);
    assert!(
        o.stderr
            .starts_with("error: there is no need to specify a resource type as a separate argument"),
        "{}",
        o.stderr
    );
    let o = mco(&c, &["--server", "ftp://x", "get", "mcp"]).await;
    assert!(
        o.stderr.starts_with("error: ftp://x: unsupported scheme"),
        "{}",
        o.stderr
    );
    // kubectl -o jsonpath with no template.
    let o = mco(&c, &["get", "mcp", "-o", "jsonpath="]).await;
    assert_eq!(o.stderr, "error: template format specified but no template given\n");
    let out = ok(&c, &["annotate", "mcp", "worker", "example.com/owner=ops"]).await;
    assert_eq!(out, format!("machineconfigpool.{GROUP}/worker annotated\n"));
    assert_eq!(
        c.pool("worker").metadata.annotations.unwrap_or_default()["example.com/owner"],
        "ops"
    );
    let out = ok(
        &c,
        &["label", "nodes", "-l", "node-role.kubernetes.io/worker", "tier=web"],
    )
    .await;
    assert_eq!(out, "node/worker-0 labeled\nnode/worker-1 labeled\n");

    // apply --wait returns once the pool is updated; a watch shows the rollout row by row
    let old = c.pool("worker").spec.configuration.name;
    let mut watch = Watch::start(&c, &["get", "mcp", "worker", "-w"]);
    let header = watch
        .until("header", Duration::from_secs(30), |l| l.starts_with("NAME"))
        .await;
    assert_eq!(
        cols(&header)[..5],
        ["NAME", "CONFIG", "UPDATED", "UPDATING", "DEGRADED"]
    );
    watch
        .until("the first row", Duration::from_secs(30), |l| l.starts_with("worker "))
        .await;
    let out = ok(
        &c,
        &["apply", "-f", "examples/chrony.yaml", "--wait", "--timeout", "2m"],
    )
    .await;
    let target = c.pool("worker").spec.configuration.name;
    assert_ne!(target, old);
    assert!(
        out.contains(&format!(
            "pool \"worker\" successfully rolled out ({target} on 2 of 2 nodes)"
        )),
        "{out}"
    );
    let keys = c.keys();
    for n in workers(&c) {
        let a = NodeAnnotations::read(&c.server.hub.state().nodes[&n], &keys);
        assert_eq!(
            (a.current_config.as_str(), a.state.as_str()),
            (target.as_str(), "Done"),
            "{n}"
        );
    }
    watch
        .until("UPDATING True", Duration::from_secs(30), |l| {
            cols(l).get(3) == Some(&"True")
        })
        .await;
    watch
        .until("UPDATED True on the new config", Duration::from_secs(30), |l| {
            let c = cols(l);
            c.get(1) == Some(&target.as_str()) && c.get(2) == Some(&"True")
        })
        .await;
    drop(watch);

    // describe: one conditions table, the pool's nodes, events from the log; a MachineConfig's
    // selecting pools and files
    let out = ok(&c, &["describe", "mcp", "worker"]).await;
    assert_eq!(out.matches("Conditions:").count(), 1, "{out}");
    assert_eq!(out.matches("\n  Updated ").count(), 1, "{out}");
    assert!(
        out.contains("Machines:                2 total, 2 ready, 2 updated, 0 unavailable, 0 degraded"),
        "{out}"
    );
    let node_row = out
        .lines()
        .find(|l| l.trim_start().starts_with("worker-0 "))
        .expect("worker-0 listed");
    assert_eq!(
        cols(node_row)[2..5],
        [target.as_str(), target.as_str(), "Done"],
        "{out}"
    );
    assert!(out.contains("PoolConfigurationSet"), "{out}");
    let out = ok(&c, &["describe", "mc/99-worker-chrony"]).await;
    assert!(out.contains("Selected By:  machineconfigpool/worker\n"), "{out}");
    assert!(out.contains("/etc/chrony.conf   0644   true"), "{out}");
    assert!(out.contains("MachineConfigCreated"), "{out}");

    // rollout status on an updated pool returns at once
    let out = ok(&c, &["rollout", "status", "mcp", "worker", "--timeout", "30s"]).await;
    assert!(out.contains("successfully rolled out"), "{out}");

    // kubectl apply and mco apply of the same unchanged file, in turn: unchanged, no event
    if have_kubectl() {
        let home = tempfile::tempdir().unwrap();
        let kubeconfig = home.path().join("kubeconfig");
        // kubectl sends kubeconfig credentials over TLS only: against this plain-HTTP server the
        // admin token rides on a proxy.
        let (text, _proxy) = kubeconfig_for(&c.server, &c.server.admin_token().expect("the admin token"));
        std::fs::write(&kubeconfig, text).unwrap();
        let kubectl = |args: &[&str]| {
            std::process::Command::new("kubectl")
                .args(args)
                .arg("--cache-dir")
                .arg(home.path().join("cache"))
                .env("HOME", home.path())
                .env("KUBECONFIG", &kubeconfig)
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .output()
                .expect("kubectl runs")
        };
        let before = c.server.hub.published_seq();
        for round in 0..2 {
            let k = kubectl(&["apply", "-f", "examples/chrony.yaml"]);
            let kout = String::from_utf8_lossy(&k.stdout);
            assert!(
                kout.contains("unchanged"),
                "round {round}: kubectl apply: {kout} {}",
                String::from_utf8_lossy(&k.stderr)
            );
            let out = ok(&c, &["apply", "-f", "examples/chrony.yaml"]).await;
            assert_eq!(
                out,
                format!("machineconfig.{GROUP}/99-worker-chrony unchanged\n"),
                "round {round}"
            );
        }
        assert_eq!(
            c.server.hub.published_seq(),
            before,
            "an unchanged apply appended an event"
        );
    } else {
        eprintln!("SKIPPED the kubectl apply alternation: kubectl is not on PATH");
    }
    // An update that changes nothing appends nothing, whoever sends it.
    let before = c.server.hub.published_seq();
    let mc: serde_json::Value = c.client.get(Kind::MachineConfig, "99-worker-chrony").await.unwrap();
    c.client
        .replace(Kind::MachineConfig, "99-worker-chrony", &mc, None)
        .await
        .unwrap();
    assert_eq!(
        c.server.hub.published_seq(),
        before,
        "a replace with the same object appended an event"
    );

    // delete -f, then the object is gone
    let out = ok(&c, &["delete", "-f", "examples/chrony.yaml"]).await;
    assert_eq!(out, format!("machineconfig.{GROUP} \"99-worker-chrony\" deleted\n"));
    // rollout status at once follows the render the deletion gives (the one before chrony),
    // not the target the render controller has not moved yet.
    let out = ok(&c, &["rollout", "status", "mcp", "worker", "--timeout", "2m"]).await;
    assert!(
        out.contains(&format!("successfully rolled out ({old} on 2 of 2 nodes)")),
        "{out}"
    );
    let gone = mco(&c, &["get", "mc", "99-worker-chrony"]).await;
    assert_eq!(gone.code, 1);
    assert!(gone.stderr.contains("(NotFound)"), "{}", gone.stderr);
    let unknown = mco(&c, &["get", "pods"]).await;
    assert_eq!(unknown.code, 1);
    assert!(
        unknown.stderr.contains("doesn't have a resource type \"pods\""),
        "{}",
        unknown.stderr
    );

    // shell completions
    assert!(ok(&c, &["completion", "bash"]).await.contains("complete -F _mco"));
    assert!(ok(&c, &["completion", "zsh"]).await.starts_with("#compdef mco"));
    assert!(ok(&c, &["completion", "fish"]).await.contains("complete -c mco"));
    c.stop().await;
}

fn have_kubectl() -> bool {
    std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

const TWO_FILES: &str = r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 99-worker-two-files
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.4.0
    storage:
      files:
        - path: /etc/two/a.conf
          mode: 420
          contents:
            source: data:,a
        - path: /etc/two/b.conf
          mode: 420
          contents:
            source: data:,b
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_reasons_name_every_path_and_rollout_status_fails_on_degraded() {
    let c = Cluster::start(1, 1).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("two.yaml");
    std::fs::write(&file, TWO_FILES).unwrap();
    let old = c.pool("worker").spec.configuration.name;
    c.apply(std::slice::from_ref(&file)).await;
    c.wait_rolled_out("worker", &old, Duration::from_secs(60)).await;

    let root = c.root("worker-0");
    let write = |p: &str, s: &str| std::fs::write(root.join(p.trim_start_matches('/')), s).unwrap();
    write("/etc/two/a.conf", "tampered");
    write("/etc/two/b.conf", "tampered");
    // MCO's message for each path (mco-facts 5), both named in the reason
    let a_msg = r#"content mismatch for file "/etc/two/a.conf""#;
    let b_msg = r#"content mismatch for file "/etc/two/b.conf""#;
    c.wait_for("worker-0 Degraded naming both files", Duration::from_secs(20), |s| {
        let a = NodeAnnotations::read(&s.nodes["worker-0"], &c.keys());
        a.state == "Degraded" && a.reason == format!("{a_msg}; {b_msg}")
    })
    .await;
    c.wait_for("pool worker degraded", Duration::from_secs(20), |s| {
        s.pools["worker"].condition_status("NodeDegraded") == "True"
    })
    .await;

    let failed = mco(&c, &["rollout", "status", "mcp", "worker", "--timeout", "30s"]).await;
    assert_eq!(failed.code, 1, "{}", failed.stdout);
    assert!(
        failed.stderr.contains("pool \"worker\" is NodeDegraded"),
        "{}",
        failed.stderr
    );
    assert!(
        failed
            .stderr
            .contains(&format!("worker-0 (Degraded): {a_msg}; {b_msg}")),
        "{}",
        failed.stderr
    );
    let timeout = mco(&c, &["rollout", "status", "mcp/master", "--timeout", "0s"]).await;
    assert_eq!(
        timeout.code, 0,
        "an updated pool returns even with no time left: {}",
        timeout.stderr
    );

    // restoring one file shrinks the reason to the other; restoring both returns to Done
    write("/etc/two/a.conf", "a");
    c.wait_for("reason names only b", Duration::from_secs(20), |s| {
        let a = NodeAnnotations::read(&s.nodes["worker-0"], &c.keys());
        a.state == "Degraded" && a.reason == b_msg
    })
    .await;
    write("/etc/two/b.conf", "b");
    c.wait_node_done("worker-0", Duration::from_secs(20), |_| true).await;

    c.wait_for("pool worker Updated again", Duration::from_secs(20), |s| {
        let p = &s.pools["worker"];
        p.condition_status("Updated") == "True" && p.status.updated_machine_count == 1
    })
    .await;

    // /metrics, parsed as Prometheus does, shows the rollout and the drift. The daemon's
    // report that the drift is fixed is sent in the background: wait for it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = c.metrics_text().await;
        if text.contains("mcd_config_drift{node=\"worker-0\"} 0.0\n") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the drift metric was not cleared:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let target = c.pool("worker").spec.configuration.name;
    let text = c.metrics_text().await;
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("parses");
    let value = |name: &str, want: &[(&str, &str)]| -> Option<f64> {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == name && want.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                _ => f64::NAN,
            })
    };
    let has = |name: &str| scrape.samples.iter().any(|s| s.metric == name);
    // MCO's families (pkg/daemon/metrics.go, pkg/controller/common/metrics.go): the state
    // metrics hold the Unix time their labels were set (`UpdateStateMetric`:
    // `SetToCurrentTime`), one series per node.
    let started = jiff::Timestamp::now().as_second() as f64 - 600.0;
    let now = jiff::Timestamp::now().as_second() as f64 + 1.0;
    let recent = |v: Option<f64>| v.is_some_and(|v| v > started && v < now);
    assert!(
        recent(value(
            "mcd_state",
            &[("node", "worker-0"), ("state", "Done"), ("reason", "")]
        )),
        "{text}"
    );
    assert_eq!(
        scrape
            .samples
            .iter()
            .filter(|s| s.metric == "mcd_state" && s.labels.get("node") == Some("worker-0"))
            .count(),
        1,
        "one mcd_state series per node: {text}"
    );
    assert!(recent(value(
        "mcd_update_state",
        &[("node", "worker-0"), ("config", &target), ("err", "")]
    )));
    // mco_state: the pool's latest True condition, at its lastTransitionTime.
    assert!(
        recent(value(
            "mco_state",
            &[("node", "worker-0"), ("pool", "worker"), ("state", "Updated")]
        )),
        "{text}"
    );
    assert_eq!(
        value("mcd_pivot_errors_total", &[("node", "worker-0")]),
        Some(0.0),
        "{text}"
    );
    assert_eq!(value("mcc_boot_image_skew_enforcement_none", &[]), Some(0.0), "{text}");
    assert_eq!(value("mco_machine_count", &[("pool", "worker")]), Some(1.0));
    assert_eq!(value("mco_updated_machine_count", &[("pool", "worker")]), Some(1.0));
    assert_eq!(value("mco_degraded_machine_count", &[("pool", "worker")]), Some(0.0));
    assert_eq!(value("mco_unavailable_machine_count", &[("pool", "worker")]), Some(0.0));
    assert_eq!(value("mcc_pool_alert", &[("node", "initialize")]), Some(0.0));
    // worker-0 was drained for the rollout, successfully
    assert_eq!(value("mcc_drain_err", &[("node", "worker-0")]), Some(0.0), "{text}");
    assert_eq!(value("mcd_reboots_failed_total", &[("node", "worker-0")]), Some(0.0));
    // Fixed: 0 again (MCO's initConfigDriftMetric when the monitor restarts on a node that
    // is not Degraded by drift); tests/drift.rs sees the Unix time while the drift lasts.
    assert_eq!(value("mcd_config_drift", &[("node", "worker-0")]), Some(0.0), "{text}");
    // mco's own
    // two drifted files, one detection each, in one series: the kind of mismatch is the label,
    // never the path (bounded label values).
    let detections: Vec<(String, f64)> = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "mco_drift_detections_total" && s.labels.get("node") == Some("worker-0"))
        .map(|s| {
            let v = match s.value {
                prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) => v,
                _ => f64::NAN,
            };
            (s.labels.get("mismatch").unwrap_or("").to_string(), v)
        })
        .collect();
    assert_eq!(detections, [("contents".to_string(), 2.0)], "{text}");
    assert!(
        value(
            "mco_store_events_appended_total",
            &[("type", "RenderedConfigGenerated")]
        )
        .unwrap()
            >= 1.0
    );
    assert!(value("mco_store_events_appended_total", &[("type", "NodeStateChanged")]).unwrap() >= 1.0);
    for h in [
        "mco_store_append_duration_seconds_count",
        "mco_store_flush_duration_seconds_count",
        "mco_render_duration_seconds_count",
    ] {
        assert!(value(h, &[]).unwrap() >= 1.0, "{h}");
    }
    assert!(
        value(
            "mco_api_request_duration_seconds_count",
            &[("verb", "patch"), ("resource", "nodes")]
        )
        .unwrap()
            >= 1.0
    );
    // the daemons' node watches are open
    assert!(value("mco_api_watch_connections", &[]).unwrap() >= 2.0, "{text}");
    // histogram buckets parse as one histogram value per label set
    assert!(scrape
        .samples
        .iter()
        .any(|s| s.metric == "mco_api_request_duration_seconds"
            && matches!(&s.value, prometheus_parse::Value::Histogram(b) if !b.is_empty())));
    assert!(has("mco_render_duration_seconds"));
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_server_on_a_data_dir_in_use_names_the_holder() {
    let c = Cluster::start(0, 0).await;
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"))
        .args(["server", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&c.data_dir)
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    let me = std::process::id();
    assert!(
        err.contains(&format!(
            "the data dir {} is in use by process {me} (",
            c.data_dir.display()
        )),
        "{err}"
    );
    // A listen address in use suggests --listen.
    let port = c.server.url().rsplit(':').next().unwrap().to_string();
    let other = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"))
        .args(["server", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(other.path())
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the address is in use") && err.contains("--listen"),
        "{err}"
    );
    // An https:// address nobody serves cannot be reached; a non-mco endpoint says so.
    let out = mco(&c, &["get", "mcp", "--server", "https://127.0.0.1:1"]).await;
    assert!(
        out.stderr
            .contains("cannot reach the mco server at https://127.0.0.1:1"),
        "{}",
        out.stderr
    );
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = other.local_addr().unwrap();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        // Answers every request with a plain-text page, as some other web server would.
        for mut s in other.incoming().flatten().take(4) {
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
            );
        }
    });
    let out = mco(&c, &["get", "mcp", "--server", &addr.to_string()]).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains(&format!("http://{addr} is not an mco server")),
        "{}",
        out.stderr
    );
    c.stop().await;
}

/// `--at`: AGE is relative to the moment shown, not to the present: kubectl's AGE is "now
/// minus creationTimestamp", and under `--at` "now" is the moment read (the `--at` time, or
/// the time of event N for `rv:N`). `get` and `describe`'s Events table both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ages_under_at_are_relative_to_the_moment_shown() {
    let c = Cluster::start(0, 1).await;
    ok(&c, &["apply", "-f", "examples/chrony.yaml"]).await;
    let mc = c.server.hub.state().machine_configs["99-worker-chrony"].clone();
    let created = mc.metadata.creation_timestamp.clone().unwrap().0;
    let rv = mc.metadata.resource_version.clone().unwrap();
    // Two hours after the creation (the state then is the present one): kubectl prints
    // durations under 3 h in minutes.
    let later = (created + jiff::SignedDuration::from_hours(2)).to_string();
    let out = ok(&c, &["get", "mc", "99-worker-chrony", "--at", &later]).await;
    let row = out.lines().nth(1).unwrap_or_else(|| panic!("a row in:\n{out}"));
    assert_eq!(cols(row).last(), Some(&"120m"), "{out}");
    // At the event that created it: age 0.
    let out = ok(&c, &["get", "mc", "99-worker-chrony", "--at", &format!("rv:{rv}")]).await;
    let row = out.lines().nth(1).unwrap_or_else(|| panic!("a row in:\n{out}"));
    assert_eq!(cols(row).last(), Some(&"0s"), "{out}");
    // describe: the pool's events up to the moment, aged from it (each event happened within
    // a minute of the pool's creation, so 119m or 120m before the moment two hours later).
    let pool_created = c.pool("worker").metadata.creation_timestamp.unwrap().0;
    let later = (pool_created + jiff::SignedDuration::from_hours(2)).to_string();
    let out = ok(&c, &["describe", "mcp", "worker", "--at", &later]).await;
    let events: Vec<&str> = out.lines().skip_while(|l| !l.starts_with("Events:")).skip(2).collect();
    assert!(!events.is_empty(), "the pool has events:\n{out}");
    for e in events {
        let age = cols(e)[2];
        assert!(age == "119m" || age == "120m", "{e}\n{out}");
    }
    c.stop().await;
}
