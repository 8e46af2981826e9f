//! The stock kubectl against a real mco server with real daemons: discovery, server-side
//! printing, OpenAPI (apply/create validation, explain), every write verb, reads, watch,
//! describe, and the seeds' node custom-columns command. Each test says that it skipped, and
//! why, when kubectl is not on PATH. kubectl runs with a temporary HOME and cache dir so that
//! its discovery cache cannot leak between runs.

mod common;

use common::kubectl::*;
use common::*;
use mco::model::NodeAnnotations;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncBufReadExt;

const MCP_HEADER: &str = "NAME     CONFIG   UPDATED   UPDATING   DEGRADED   MACHINECOUNT   READYMACHINECOUNT   UPDATEDMACHINECOUNT   DEGRADEDMACHINECOUNT   AGE";

fn examples_dir() -> String {
    examples().display().to_string()
}

/// The header line of a table with its columns collapsed to single spaces.
fn header(out: &str) -> String {
    out.lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn row<'a>(out: &'a str, name: &str) -> Vec<&'a str> {
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_printing_reads_and_explain() {
    if !have_kubectl("discovery_printing_reads_and_explain") {
        return;
    }
    let c = Cluster::start_tls(1, 2).await;
    let k = Kubectl::new(&c.server);

    let res = k.ok(&["api-resources"]).await;
    for (name, short) in [
        ("machineconfigpools", "mcp"),
        ("machineconfigs", "mc"),
        ("nodes", "no"),
        ("kubeletconfigs", "kc"),
        ("containerruntimeconfigs", "ctrcfg"),
        ("imagedigestmirrorsets", "idms"),
        ("imagetagmirrorsets", "itms"),
        ("imagecontentsourcepolicies", "icsp"),
    ] {
        let with_short = res.lines().any(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            cols.first() == Some(&name) && cols.get(1) == Some(&short)
        });
        assert!(with_short, "{name} with short name {short}:\n{res}");
    }
    assert!(
        res.lines()
            .any(|l| l.starts_with("machineconfigurations ") && l.contains("operator.openshift.io/v1")),
        "{res}"
    );
    // The node disruption policy through kubectl: apply, list (Name, Age), status merged.
    k.ok(&[
        "apply",
        "-f",
        &examples().join("node-disruption-policy.yaml").to_string_lossy(),
    ])
    .await;
    let list = k.ok(&["get", "machineconfigurations"]).await;
    assert_eq!(header(&list), "NAME AGE", "{list}");
    assert!(!row(&list, "cluster").is_empty());
    c.wait_for("the operator's status", std::time::Duration::from_secs(30), |s| {
        s.machine_configurations["cluster"].status.observed_generation == Some(1)
    })
    .await;
    let path = k
        .ok(&[
            "get",
            "machineconfiguration",
            "cluster",
            "-o",
            "jsonpath={.status.nodeDisruptionPolicyStatus.clusterPolicies.files[13].path}",
        ])
        .await;
    assert_eq!(path.trim(), "/etc/chrony.conf");

    let mcp = k.ok(&["get", "mcp"]).await;
    assert_eq!(header(&mcp), header(MCP_HEADER), "{mcp}");
    let w = row(&mcp, "worker");
    let target = c.pool("worker").status.configuration.name;
    assert_eq!(
        &w[1..9],
        &[target.as_str(), "True", "False", "False", "2", "2", "2", "0"],
        "{mcp}"
    );
    assert!(!row(&mcp, "master").is_empty());

    let mc = k.ok(&["get", "machineconfig"]).await;
    assert_eq!(header(&mc), "NAME GENERATEDBYCONTROLLER IGNITIONVERSION AGE");
    assert_eq!(&row(&mc, &target)[1..3], &["mco-0.1.0", "3.4.0"]);
    // Template configs carry the controller version, as MCO's do.
    assert_eq!(&row(&mc, "00-worker")[1..3], &["mco-0.1.0", "3.4.0"]);

    let nodes = k.ok(&["get", "nodes"]).await;
    assert_eq!(header(&nodes), "NAME STATUS ROLES AGE VERSION");
    assert_eq!(&row(&nodes, "worker-0")[1..3], &["Ready", "worker"]);
    assert_eq!(&row(&nodes, "master-0")[1..3], &["Ready", "master"]);
    let wide = k.ok(&["get", "nodes", "-o", "wide"]).await;
    assert_eq!(
        header(&wide),
        "NAME STATUS ROLES AGE VERSION INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME"
    );

    // The seeds' node command, with the openshift group (the default).
    let cc = k
        .ok(&[
            "get",
            "node",
            "-o",
            r"custom-columns=NODE:.metadata.name,DESIRED:.metadata.annotations.machineconfiguration\.openshift\.io/desiredConfig,CURRENT:.metadata.annotations.machineconfiguration\.openshift\.io/currentConfig,STATE:.metadata.annotations.machineconfiguration\.openshift\.io/state",
        ])
        .await;
    assert_eq!(header(&cc), "NODE DESIRED CURRENT STATE");
    assert_eq!(
        row(&cc, "worker-1"),
        vec!["worker-1", target.as_str(), target.as_str(), "Done"]
    );

    assert_eq!(
        k.ok(&["get", "mcp", "worker", "-o", "jsonpath={.status.machineCount}"])
            .await,
        "2"
    );
    assert_eq!(k.ok(&["get", "mcp", "-o", "name"]).await, "machineconfigpool.machineconfiguration.openshift.io/master\nmachineconfigpool.machineconfiguration.openshift.io/worker\n");
    let sel = k
        .ok(&[
            "get",
            "mc",
            "-l",
            "machineconfiguration.openshift.io/role=worker",
            "-o",
            "name",
        ])
        .await;
    // The worker role's base config and its template configs (mco-facts 9).
    assert_eq!(
        sel,
        "machineconfig.machineconfiguration.openshift.io/00-worker\n\
         machineconfig.machineconfiguration.openshift.io/01-worker-container-runtime\n\
         machineconfig.machineconfiguration.openshift.io/01-worker-kubelet\n"
    );
    let f = k
        .ok(&[
            "get",
            "nodes",
            "--field-selector",
            "metadata.name=worker-1",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(f, "node/worker-1\n");
    let y = k.ok(&["get", "mcp", "worker", "-o", "yaml"]).await;
    assert!(
        y.contains("kind: MachineConfigPool") && y.contains("machineCount: 2"),
        "{y}"
    );

    let e = k.ok(&["explain", "machineconfigpool.spec"]).await;
    assert!(
        e.contains("KIND:       MachineConfigPool") && e.contains("maxUnavailable") && e.contains("paused"),
        "{e}"
    );

    let err = k.fails(&["get", "mcp", "nope"]).await;
    assert_eq!(
        err.trim(),
        r#"Error from server (NotFound): machineconfigpools.machineconfiguration.openshift.io "nope" not found"#
    );
    // The generated-config kinds: apply, short names, MCO's (absent) columns, explain.
    k.ok(&[
        "apply",
        "-f",
        &examples().join("kubeletconfig.yaml").display().to_string(),
    ])
    .await;
    k.ok(&[
        "apply",
        "-f",
        &examples().join("imagedigestmirrorset.yaml").display().to_string(),
    ])
    .await;
    let kc = k.ok(&["get", "kc"]).await;
    assert_eq!(header(&kc), "NAME AGE", "{kc}");
    assert!(!row(&kc, "set-max-pods").is_empty(), "{kc}");
    assert!(!row(&k.ok(&["get", "idms"]).await, "release-mirror").is_empty());
    let ex = k.ok(&["explain", "kubeletconfig.spec"]).await;
    assert!(
        ex.contains("machineConfigPoolSelector") && ex.contains("autoSizingReserved"),
        "{ex}"
    );
    let ex = k.ok(&["explain", "imagedigestmirrorset.spec.imageDigestMirrors"]).await;
    assert!(ex.contains("mirrorSourcePolicy"), "{ex}");
    let status = k
        .ok(&[
            "get",
            "kc",
            "set-max-pods",
            "-o",
            "jsonpath={.status.conditions[0].type}",
        ])
        .await;
    // Current MCO's first KubeletConfig condition is Accepted (the legacy Success follows).
    assert!(status.is_empty() || status == "Accepted", "{status}");

    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_watch_patch_describe_and_every_write_verb() {
    if !have_kubectl("apply_watch_patch_describe_and_every_write_verb") {
        return;
    }
    let c = Cluster::start_tls(1, 2).await;
    let k = Kubectl::new(&c.server);
    let t0 = c.pool("worker").spec.configuration.name;

    // Watch the pools while the examples roll out.
    let mut watch = k
        .command(&["get", "mcp", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(watch.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(header(&first), header(MCP_HEADER));

    let applied = k.ok(&["apply", "-f", &examples_dir()]).await;
    assert!(
        applied.contains("machineconfig.machineconfiguration.openshift.io/99-worker-chrony created"),
        "{applied}"
    );
    assert!(
        applied.contains("machineconfigpool.machineconfiguration.openshift.io/infra created"),
        "{applied}"
    );
    let again = k.ok(&["apply", "-f", &examples_dir()]).await;
    assert!(
        again.lines().all(|l| l.ends_with(" unchanged")),
        "second apply changes nothing:\n{again}"
    );

    let t1 = c.wait_rolled_out("worker", &t0, Duration::from_secs(90)).await;
    // Give kubectl the last event, then read what it printed.
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !seen
        .iter()
        .any(|r: &Vec<String>| r[0] == "worker" && r[1] == t1 && r[2] == "True")
    {
        let line = tokio::time::timeout_at(deadline, lines.next_line())
            .await
            .expect("watch shows the pool Updated")
            .unwrap()
            .unwrap();
        seen.push(line.split_whitespace().map(str::to_string).collect());
    }
    assert!(
        seen.iter()
            .any(|r| r[0] == "worker" && r[2] == "False" && r[3] == "True"),
        "watch shows worker Updating: {seen:?}"
    );
    let _ = watch.kill().await;
    assert_eq!(
        std::fs::read_to_string(c.root("worker-0").join("etc/chrony.conf"))
            .unwrap()
            .lines()
            .nth(1),
        Some("server ntp1.example.net iburst")
    );

    // describe: conditions, counts and the events mco records.
    let d = k.ok(&["describe", "mcp", "worker"]).await;
    for want in [
        "Name:         worker",
        "Type:                  Updated",
        "Machine Count:",
        "Updated Machine Count:",
        "Events:",
        "PoolStatusUpdated",
    ] {
        assert!(d.contains(want), "describe mcp worker lacks {want:?}:\n{d}");
    }
    let dn = k.ok(&["describe", "node", "worker-0"]).await;
    assert!(
        dn.contains("machineconfiguration.openshift.io/state: Done") && dn.contains("NodeDesiredConfigSet"),
        "{dn}"
    );

    // Pausing with kubectl patch.
    k.ok(&[
        "patch",
        "mcp",
        "worker",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"paused":true}}"#,
    ])
    .await;
    assert!(c.pool("worker").spec.paused);
    let smp = k
        .fails(&["patch", "mcp", "worker", "-p", r#"{"spec":{"paused":false}}"#])
        .await;
    assert!(
        smp.contains("application/strategic-merge-patch+json is not supported"),
        "{smp}"
    );
    k.ok(&[
        "patch",
        "mcp",
        "worker",
        "--type",
        "json",
        "-p",
        r#"[{"op":"replace","path":"/spec/paused","value":false}]"#,
    ])
    .await;
    assert!(!c.pool("worker").spec.paused);

    // Labels, annotations, selectors, edit.
    k.ok(&["label", "mc", "99-worker-motd", "team=ops"]).await;
    k.ok(&["annotate", "mcp", "infra", "owner=platform"]).await;
    assert_eq!(
        k.ok(&["get", "mc", "-l", "team=ops", "-o", "name"]).await,
        "machineconfig.machineconfiguration.openshift.io/99-worker-motd\n"
    );
    let edited = k
        .run_env(
            &["edit", "mcp", "infra"],
            &[("EDITOR", "sed -i s/maxUnavailable:\\ 1/maxUnavailable:\\ 2/")],
        )
        .await;
    assert!(edited.ok, "{}", edited.stderr);
    assert_eq!(
        k.ok(&["get", "mcp", "infra", "-o", "jsonpath={.spec.maxUnavailable}"])
            .await,
        "2"
    );

    // Nodes: cordon shows SchedulingDisabled; strategic merge patch works for nodes.
    k.ok(&["cordon", "worker-1"]).await;
    assert_eq!(
        row(&k.ok(&["get", "nodes"]).await, "worker-1")[1],
        "Ready,SchedulingDisabled"
    );
    assert!(
        k.ok(&["describe", "node", "worker-1"]).await.contains("NodeCordoned"),
        "the cordon is in the node's history"
    );
    k.ok(&["uncordon", "worker-1"]).await;
    assert_eq!(row(&k.ok(&["get", "nodes"]).await, "worker-1")[1], "Ready");
    k.ok(&[
        "patch",
        "node",
        "worker-1",
        "-p",
        r#"{"metadata":{"labels":{"rack":"r1"}}}"#,
    ])
    .await;
    assert_eq!(
        k.ok(&["get", "node", "-l", "rack=r1", "-o", "name"]).await,
        "node/worker-1\n"
    );

    // create / replace / delete, errors as Kubernetes words them.
    let dup = k
        .fails(&["create", "-f", &examples().join("chrony.yaml").display().to_string()])
        .await;
    assert!(
        dup.contains(r#"Error from server (AlreadyExists): error when creating"#)
            && dup.contains(r#"machineconfigs.machineconfiguration.openshift.io "99-worker-chrony" already exists"#),
        "{dup}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let motd = tmp.path().join("motd.yaml");
    let cur = k.ok(&["get", "mc", "99-worker-motd", "-o", "yaml"]).await;
    std::fs::write(&motd, cur.replace("team: ops", "team: sre")).unwrap();
    k.ok(&["replace", "-f", &motd.display().to_string()]).await;
    // The file still carries the old resourceVersion: replacing again is a Conflict.
    let stale = k.fails(&["replace", "-f", &motd.display().to_string()]).await;
    assert!(
        stale.contains("Error from server (Conflict)")
            && stale.contains(r#"Operation cannot be fulfilled on machineconfigs.machineconfiguration.openshift.io "99-worker-motd": the object has been modified"#),
        "{stale}"
    );
    assert_eq!(
        k.ok(&["get", "mc", "-l", "team=sre", "-o", "name"]).await,
        "machineconfig.machineconfiguration.openshift.io/99-worker-motd\n"
    );

    // Strict field validation names the unknown field; Warn warns.
    let bad = tmp.path().join("bad.yaml");
    std::fs::write(&bad, "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: typo\nspec:\n  pausd: true\n").unwrap();
    let strict = k.fails(&["apply", "-f", &bad.display().to_string()]).await;
    assert!(
        strict.contains(r#"strict decoding error: unknown field "spec.pausd""#),
        "{strict}"
    );
    let warn = k
        .run(&["create", "--validate=warn", "-f", &bad.display().to_string()])
        .await;
    assert!(
        warn.ok && warn.stderr.contains(r#"unknown field "spec.pausd""#),
        "{}",
        warn.stderr
    );
    k.ok(&["delete", "-f", &bad.display().to_string()]).await;
    // Invalid values name the field, as an Invalid status.
    let mode = tmp.path().join("mode.yaml");
    std::fs::write(&mode, "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-worker-mode\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  config:\n    ignition:\n      version: 3.4.0\n    storage:\n      files:\n      - path: /etc/x\n        mode: 644\n        contents:\n          source: data:,x\n").unwrap();
    let inv = k.fails(&["apply", "-f", &mode.display().to_string()]).await;
    // kubectl words an Invalid status as it does for any Kubernetes kind.
    assert!(inv.contains(r#"The MachineConfig "99-worker-mode" is invalid: spec.config.storage.files[0].mode: invalid mode 01204 for /etc/x, cannot exceed 0777"#), "{inv}");

    // Server-side apply: field ownership and conflicts.
    let ssa = tmp.path().join("ssa.yaml");
    std::fs::write(&ssa, "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: ssa\nspec:\n  maxUnavailable: 1\n  machineConfigSelector:\n    matchLabels:\n      machineconfiguration.openshift.io/role: worker\n").unwrap();
    let ssa_path = ssa.display().to_string();
    assert!(k
        .ok(&["apply", "--server-side", "-f", &ssa_path])
        .await
        .contains("serverside-applied"));
    k.ok(&[
        "patch",
        "mcp",
        "ssa",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"maxUnavailable":3}}"#,
        "--field-manager",
        "someone",
    ])
    .await;
    let conflict = k.fails(&["apply", "--server-side", "-f", &ssa_path]).await;
    assert!(
        conflict.contains(r#"Apply failed with 1 conflict: conflict with "someone""#)
            && conflict.contains(".spec.maxUnavailable"),
        "{conflict}"
    );
    k.ok(&["apply", "--server-side", "--force-conflicts", "-f", &ssa_path])
        .await;
    assert_eq!(
        k.ok(&["get", "mcp", "ssa", "-o", "jsonpath={.spec.maxUnavailable}"])
            .await,
        "1"
    );

    // delete by label selector and by file.
    k.ok(&["label", "mcp", "ssa", "tier=tmp"]).await;
    assert!(k
        .ok(&["delete", "mcp", "-l", "tier=tmp"])
        .await
        .contains(r#"machineconfigpool.machineconfiguration.openshift.io "ssa" deleted"#));
    // --cascade=orphan keeps the pool's rendered configs, without the owner reference; the
    // default cascade (background) takes them along.
    let rendered_infra = |c: &Cluster| -> Vec<String> {
        c.server
            .hub
            .state()
            .machine_configs
            .keys()
            .filter(|n| n.starts_with("rendered-infra-"))
            .cloned()
            .collect()
    };
    let orphans = rendered_infra(&c);
    assert!(!orphans.is_empty());
    k.ok(&["delete", "mcp", "infra", "--cascade=orphan"]).await;
    assert_eq!(rendered_infra(&c), orphans);
    assert!(orphans.iter().all(|n| c.server.hub.state().machine_configs[n]
        .metadata
        .owner_references
        .is_none()));
    let infra = examples().join("infra-pool.yaml").display().to_string();
    k.ok(&["apply", "-f", &infra]).await;
    c.wait_for(
        "the re-created infra pool adopts its render",
        Duration::from_secs(30),
        |s| {
            let Some(uid) = s.pools.get("infra").and_then(|p| p.metadata.uid.clone()) else {
                return false;
            };
            orphans.iter().all(|n| {
                s.machine_configs[n]
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.uid == uid)
            })
        },
    )
    .await;
    k.ok(&["delete", "-f", &infra]).await;
    assert!(!c.server.hub.state().pools.contains_key("infra"));
    assert!(rendered_infra(&c).is_empty());
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seeds_custom_columns_command_with_the_alauda_group() {
    if !have_kubectl("the_seeds_custom_columns_command_with_the_alauda_group") {
        return;
    }
    let c = Cluster::start_tls_with_group("machineconfiguration.alauda.io", 1, 2).await;
    let k = Kubectl::new(&c.server);
    // kubectl maps a manifest's group through discovery, which lists the configured group
    // alone (the other is served, not discovered: README "kubectl"): the example in the
    // alauda group.
    let dir = tempfile::tempdir().unwrap();
    let chrony = dir.path().join("chrony.yaml");
    let text = std::fs::read_to_string(examples().join("chrony.yaml")).unwrap();
    let alauda = text.replace(
        "machineconfiguration.openshift.io/v1",
        "machineconfiguration.alauda.io/v1",
    );
    std::fs::write(&chrony, alauda).unwrap();
    k.ok(&["apply", "-f", &chrony.display().to_string()]).await;
    let t0 = c.pool("worker").status.configuration.name.clone();
    let t1 = c.wait_rolled_out("worker", &t0, Duration::from_secs(90)).await;
    let out = k
        .ok(&[
            "get",
            "node",
            "-o",
            // The seed's command line after the shell removed its double quotes.
            r"custom-columns=NODE:.metadata.name,DESIRED:.metadata.annotations.machineconfiguration\.alauda\.io/desiredConfig,CURRENT:.metadata.annotations.machineconfiguration\.alauda\.io/currentConfig,STATE:.metadata.annotations.machineconfiguration\.alauda\.io/state",
        ])
        .await;
    assert_eq!(header(&out), "NODE DESIRED CURRENT STATE");
    for w in ["worker-0", "worker-1"] {
        assert_eq!(row(&out, w), vec![w, t1.as_str(), t1.as_str(), "Done"], "{out}");
        assert_eq!(
            NodeAnnotations::read(&c.server.hub.state().nodes[w], &c.keys()).state,
            "Done"
        );
    }
    assert_eq!(
        k.ok(&["get", "mc", "99-worker-chrony", "-o", "jsonpath={.apiVersion}"])
            .await,
        "machineconfiguration.alauda.io/v1"
    );
    assert!(Path::new(&c.root("worker-0").join("etc/chrony.conf")).exists());
    c.stop().await;
}

/// The history with the stock kubectl: `get events` columns, `describe` events, server-side
/// dry runs (`apply`, `delete`), `kubectl diff`, and a time-travel read with `get --raw`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_dry_runs_diff_and_exact_reads() {
    if !have_kubectl("events_dry_runs_diff_and_exact_reads") {
        return;
    }
    let c = Cluster::start_tls(0, 1).await;
    let k = Kubectl::new(&c.server);
    let chrony = examples().join("chrony.yaml").display().to_string();
    let t0 = c.pool("worker").spec.configuration.name;
    let before_apply = c.server.hub.published_seq();

    // Server-side dry runs change nothing.
    let out = k.ok(&["apply", "--dry-run=server", "-f", &chrony]).await;
    assert!(out.contains("created (server dry run)"), "{out}");
    assert!(!c.server.hub.state().machine_configs.contains_key("99-worker-chrony"));

    k.ok(&["apply", "-f", &chrony]).await;
    c.wait_rolled_out("worker", &t0, Duration::from_secs(90)).await;

    // kubectl diff: a changed manifest shows the change and exits 1; nothing is written.
    let changed = std::fs::read_to_string(&chrony)
        .unwrap()
        .replace("mode: 420", "mode: 384");
    assert!(changed.contains("mode: 384"), "the example has mode 420");
    let dir = tempfile::tempdir().unwrap();
    let changed_path = dir.path().join("chrony.yaml");
    std::fs::write(&changed_path, changed).unwrap();
    let seq = c.server.hub.published_seq();
    let d = k.run(&["diff", "-f", &changed_path.display().to_string()]).await;
    assert!(
        !d.ok,
        "kubectl diff exits 1 on a difference:\n{}\n{}",
        d.stdout, d.stderr
    );
    let lines: Vec<String> = d
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert!(
        lines.iter().any(|l| l == "- mode: 420") && lines.iter().any(|l| l == "+ mode: 384"),
        "{}",
        d.stdout
    );
    let unchanged = k.run(&["diff", "-f", &chrony]).await;
    assert!(unchanged.ok && unchanged.stdout.is_empty(), "{}", unchanged.stdout);
    let out = k.ok(&["delete", "mc", "99-worker-chrony", "--dry-run=server"]).await;
    assert!(out.contains("deleted (server dry run)"), "{out}");
    assert!(c.server.hub.state().machine_configs.contains_key("99-worker-chrony"));
    let mine = c
        .server
        .hub
        .store()
        .read_range(seq, c.server.hub.published_seq())
        .filter(|e| e.as_ref().unwrap().actor == "admin")
        .count();
    assert_eq!(mine, 0, "dry runs append nothing");

    // kubectl get events: the usual columns, from the log.
    let events = k.ok(&["get", "events"]).await;
    assert_eq!(header(&events), "LAST SEEN TYPE REASON OBJECT MESSAGE", "{events}");
    assert!(events.contains("machineconfig/99-worker-chrony"), "{events}");
    let warnings = k.ok(&["get", "events", "--field-selector", "type=Warning"]).await;
    assert!(!warnings.contains("Normal"), "{warnings}");
    let bad = k.fails(&["get", "events", "--field-selector", "bogus=x"]).await;
    assert!(bad.contains("field label not supported: bogus"), "{bad}");
    let sorted = k.ok(&["get", "events", "--sort-by=.lastTimestamp"]).await;
    assert!(sorted.lines().count() > 5, "--sort-by gets whole Events:\n{sorted}");
    // kubectl get events -w: new events stream in as one-row Tables.
    let mut watch = k
        .command(&[
            "get",
            "events",
            "-w",
            "--field-selector",
            "involvedObject.name=99-worker-ssh",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(watch.stdout.take().unwrap()).lines();
    k.ok(&["apply", "-f", &examples().join("ssh-key.yaml").display().to_string()])
        .await;
    let mut seen = Vec::new();
    while !seen.iter().any(|l: &String| l.contains("machineconfig/99-worker-ssh")) {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("no event line from kubectl get events -w: {seen:?}"))
            .unwrap()
            .expect("kubectl get events -w keeps running");
        seen.push(line);
    }
    let _ = watch.kill().await;
    // kubectl describe: the object's whole history.
    let described = k.ok(&["describe", "mc", "99-worker-chrony"]).await;
    assert!(
        described.contains("MachineConfigCreated")
            && described.contains("applied machineconfig/99-worker-chrony generation 1"),
        "{described}"
    );
    let node = k.ok(&["describe", "node", "worker-0"]).await;
    assert!(node.contains("NodeStateChanged"), "{node}");

    // get --raw as of an exact resourceVersion: before the apply, no chrony config.
    let raw = k
        .ok(&[
            "get",
            "--raw",
            &format!("/apis/machineconfiguration.openshift.io/v1/machineconfigs?resourceVersion={before_apply}&resourceVersionMatch=Exact"),
        ])
        .await;
    let list: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(list["metadata"]["resourceVersion"], before_apply.to_string());
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert!(
        !names.contains(&"99-worker-chrony") && names.contains(&"00-worker"),
        "{names:?}"
    );
    c.stop().await;
}

/// `mco label|annotate` print what kubectl prints, step by step on twin pools: kubectl edits
/// pool `master`, mco pool `worker`, from the same labels (expected output: kubectl's own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_and_annotate_print_what_kubectl_prints() {
    if !have_kubectl("label_and_annotate_print_what_kubectl_prints") {
        return;
    }
    let c = Cluster::start_tls(0, 0).await;
    let k = Kubectl::new(&c.server);
    let steps: &[&[&str]] = &[
        &["label", "mcp", "POOL", "a=1"],
        &["label", "mcp", "POOL", "a=1"],
        &["label", "mcp", "POOL", "a=2"],
        &["label", "mcp", "POOL", "example.com/infra="],
        &["label", "mcp", "POOL", "example.com/infra-"],
        &["label", "mcp/POOL", "b=1", "example.com/gone-"],
        &["label", "mcp", "POOL", "a=x", "a-"],
        &["label", "mcp", "POOL", "a=2", "--overwrite"],
        &["label", "mcp", "POOL", "a-", "--overwrite"],
        &["label", "mcp", "POOL"],
        &["label", "mcp", "POOL", "c=1", "POOL"],
        &["annotate", "mcp", "POOL", "k=v"],
        &["annotate", "mcp", "POOL", "k=v"],
        &["annotate", "mcp", "POOL", "k=w"],
        &["annotate", "mcp", "POOL", "k-"],
    ];
    for step in steps {
        let on = |pool: &str| step.iter().map(|a| a.replace("POOL", pool)).collect::<Vec<_>>();
        let kargs = on("master");
        let margs = on("worker");
        let want = k.run(&kargs.iter().map(String::as_str).collect::<Vec<_>>()).await;
        let got = mco_at(&c.server, &margs.iter().map(String::as_str).collect::<Vec<_>>()).await;
        let norm = |s: &str| s.replace("master", "POOL").replace("worker", "POOL");
        assert_eq!(
            got.ok, want.ok,
            "{step:?}: kubectl {} / mco {}",
            want.stderr, got.stderr
        );
        assert_eq!(norm(&got.stdout), norm(&want.stdout), "{step:?} stdout");
        if !want.ok {
            // kubectl's message (its usage hint lines, "See 'kubectl label -h'", aside).
            let first = |s: &str| norm(s.lines().next().unwrap_or(""));
            assert_eq!(first(&got.stderr), first(&want.stderr), "{step:?} stderr");
        }
    }
    c.stop().await;
}

/// `mco get` flags print what kubectl prints against the same server: several kinds,
/// `--no-headers`, `--show-labels`, `-L`, jsonpath objects (sorted keys), the empty list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_flags_print_what_kubectl_prints() {
    if !have_kubectl("get_flags_print_what_kubectl_prints") {
        return;
    }
    let c = Cluster::start_tls(0, 0).await;
    let k = Kubectl::new(&c.server);
    // Words of each line, the AGE column (index 9 of a pool row) dropped: it ticks between runs.
    let words = |s: &str| -> Vec<Vec<String>> {
        s.lines()
            .map(|l| {
                l.split_whitespace()
                    .enumerate()
                    .filter(|(i, _)| *i != 9)
                    .map(|(_, w)| w.to_string())
                    .collect()
            })
            .collect()
    };
    let cases: &[&[&str]] = &[
        &["get", "mcp,mc", "-o", "name"],
        &["get", "mcp", "--no-headers", "--show-labels"],
        &[
            "get",
            "mcp",
            "-L",
            "pools.operator.machineconfiguration.openshift.io/worker",
        ],
        &["get", "mcp", "worker", "-o", "jsonpath={.metadata.labels}"],
        &["get", "kubeletconfig", "-o", "jsonpath={.items}{.kind}"],
        // --sort-by: kubectl's JSONPath subset, stable, natural string order.
        &["get", "mc", "--sort-by", ".metadata.creationTimestamp", "-o", "name"],
        &["get", "mcp", "--sort-by", "{.metadata.name}"],
        &["get", "mcp", "--sort-by", "status.machineCount", "-o", "name"],
        &["get", "mc", "--sort-by", ".spec.config.ignition.version", "-o", "name"],
    ];
    for args in cases {
        let want = k.ok(args).await;
        let got = mco_at(&c.server, args).await;
        assert!(got.ok, "mco {args:?}: {}", got.stderr);
        assert_eq!(
            words(&got.stdout),
            words(&want),
            "{args:?}\nmco:\n{}\nkubectl:\n{want}",
            got.stdout
        );
    }
    c.stop().await;
}

/// `mco cordon|uncordon|drain` and `mco patch` print what kubectl prints and exit as it does,
/// step by step on twins: kubectl acts on node worker-0 and pool master, mco on worker-1 and
/// worker, from the same state (expected output: kubectl's own). `mco rollout pause|resume`
/// prints kubectl's rollout texts (pkg/cmd/rollout/rollout_pause.go: `paused`, `already
/// paused`; rollout_resume.go likewise) and sets the `spec.paused` kubectl then reads; `mco
/// apply` refuses an unknown field as kubectl's default `--validate=strict` does, writing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cordon_drain_patch_pause_and_validate_as_kubectl() {
    if !have_kubectl("cordon_drain_patch_pause_and_validate_as_kubectl") {
        return;
    }
    let c = Cluster::start_tls(0, 2).await;
    let k = Kubectl::new(&c.server);
    let steps: &[&[&str]] = &[
        &["cordon", "NODE"],
        &["cordon", "NODE"],
        &["uncordon", "NODE"],
        &["uncordon", "NODE"],
        &["cordon", "NODE", "--dry-run=client"],
        &["cordon", "NODE", "--dry-run=server"],
        &["drain", "NODE", "--ignore-daemonsets", "--delete-emptydir-data"],
        &["uncordon", "NODE"],
        &["cordon", "nope"],
        &[
            "patch",
            "mcp",
            "POOL",
            "--type",
            "merge",
            "-p",
            r#"{"metadata":{"labels":{"x":"1"}}}"#,
        ],
        &[
            "patch",
            "mcp",
            "POOL",
            "--type",
            "merge",
            "-p",
            r#"{"metadata":{"labels":{"x":"1"}}}"#,
        ],
        &[
            "patch",
            "mcp/POOL",
            "--type",
            "json",
            "-p",
            r#"[{"op":"add","path":"/metadata/labels/y","value":"2"}]"#,
        ],
        &[
            "patch",
            "mcp",
            "POOL",
            "--type",
            "json",
            "-p",
            r#"[{"op":"test","path":"/metadata/labels/x","value":"no"}]"#,
        ],
        &["patch", "mcp", "POOL", "-p", r#"{"metadata":{"labels":{"z":"1"}}}"#],
        &[
            "patch",
            "mcp",
            "POOL",
            "--type",
            "merge",
            "-p",
            "metadata:\n  labels:\n    w: '3'\n",
        ],
        &[
            "patch",
            "mcp",
            "POOL",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"paused":true}}"#,
            "--dry-run=server",
        ],
        &["patch", "mcp", "nope", "--type", "merge", "-p", "{}"],
        &["patch", "node", "NODE", "-p", r#"{"metadata":{"labels":{"s":"1"}}}"#],
    ];
    let norm = |s: &str| {
        s.replace("worker-0", "NODE")
            .replace("worker-1", "NODE")
            .replace("master", "POOL")
            .replace("worker", "POOL")
    };
    for step in steps {
        let on = |node: &str, pool: &str| {
            step.iter()
                .map(|a| a.replace("NODE", node).replace("POOL", pool))
                .collect::<Vec<_>>()
        };
        let (kargs, margs) = (on("worker-0", "master"), on("worker-1", "worker"));
        let want = k.run(&kargs.iter().map(String::as_str).collect::<Vec<_>>()).await;
        let got = mco_at(&c.server, &margs.iter().map(String::as_str).collect::<Vec<_>>()).await;
        assert_eq!(
            got.ok, want.ok,
            "{step:?}: kubectl {} / mco {}",
            want.stderr, got.stderr
        );
        assert_eq!(norm(&got.stdout), norm(&want.stdout), "{step:?} stdout");
        if !want.ok {
            let first = |s: &str| norm(s.lines().next().unwrap_or(""));
            assert_eq!(first(&got.stderr), first(&want.stderr), "{step:?} stderr");
        }
    }
    // Both twins end alike: the same labels, both schedulable.
    let pool_labels = |p: &str| c.pool(p).metadata.labels.clone().unwrap_or_default();
    let (m, w) = (pool_labels("master"), pool_labels("worker"));
    for key in ["x", "y", "w"] {
        assert_eq!(m.get(key), w.get(key), "label {key}");
        assert!(w.contains_key(key), "label {key}");
    }

    // rollout pause and resume, as kubectl reads them.
    let pause = mco_at(&c.server, &["rollout", "pause", "worker"]).await;
    assert!(pause.ok, "{}", pause.stderr);
    assert_eq!(
        pause.stdout,
        "machineconfigpool.machineconfiguration.openshift.io/worker paused\n"
    );
    assert_eq!(
        k.ok(&["get", "mcp", "worker", "-o", "jsonpath={.spec.paused}"]).await,
        "true"
    );
    let again = mco_at(&c.server, &["rollout", "pause", "mcp/worker"]).await;
    assert_eq!(
        again.stdout,
        "machineconfigpool.machineconfiguration.openshift.io/worker already paused\n"
    );
    let resume = mco_at(&c.server, &["rollout", "resume", "mcp", "worker"]).await;
    assert_eq!(
        resume.stdout,
        "machineconfigpool.machineconfiguration.openshift.io/worker resumed\n"
    );
    assert_eq!(
        k.ok(&["get", "mcp", "worker", "-o", "jsonpath={.spec.paused}"]).await,
        "false"
    );
    let missing = mco_at(&c.server, &["rollout", "pause", "nope"]).await;
    assert!(!missing.ok);
    assert_eq!(
        missing.stderr.lines().next(),
        Some(r#"Error from server (NotFound): machineconfigpools.machineconfiguration.openshift.io "nope" not found"#)
    );

    // Strict validation by default, as kubectl's: exit 1, the field named, nothing written;
    // warn: written, the field warned about.
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.yaml");
    std::fs::write(&bad, "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: typo\nspec:\n  pausd: true\n").unwrap();
    let bad = bad.display().to_string();
    for validate in [
        None,
        Some("--validate=strict"),
        Some("--validate=true"),
        Some("--validate"),
    ] {
        let mut args = vec!["apply", "-f", &bad];
        args.extend(validate);
        let want = k.run(&args).await;
        let got = mco_at(&c.server, &args).await;
        assert!(
            !want.ok && !got.ok,
            "{args:?}: kubectl {} / mco {}",
            want.stderr,
            got.stdout
        );
        let said = format!("{}{}", got.stdout, got.stderr);
        assert!(
            said.contains(r#"machineconfigpool.machineconfiguration.openshift.io "typo": strict decoding error: unknown field "spec.pausd""#),
            "{said}"
        );
        assert!(!c.server.hub.state().pools.contains_key("typo"), "nothing written");
    }
    let warn = mco_at(&c.server, &["apply", "-f", &bad, "--validate=warn"]).await;
    assert!(warn.ok, "{}", warn.stderr);
    // kubectl prints warnings on stderr (client-go's warning handler), results on stdout.
    assert!(
        warn.stderr.contains(r#"Warning: unknown field "spec.pausd""#) && !warn.stdout.contains("Warning"),
        "{}",
        warn.stderr
    );
    assert!(
        warn.stdout
            .contains("machineconfigpool.machineconfiguration.openshift.io/typo created"),
        "{}",
        warn.stdout
    );
    let ignore = mco_at(&c.server, &["apply", "-f", &bad, "--validate=false"]).await;
    assert!(ignore.ok && !ignore.stderr.contains("Warning"), "{}", ignore.stderr);
    let bogus_k = k.run(&["apply", "-f", &bad, "--validate=bogus"]).await;
    let bogus_m = mco_at(&c.server, &["apply", "-f", &bad, "--validate=bogus"]).await;
    assert!(!bogus_k.ok && !bogus_m.ok);
    assert!(
        bogus_m.stderr.contains(
            r#"invalid - validate option "bogus"; must be one of: strict (or true), warn, ignore (or false)"#
        ),
        "{}",
        bogus_m.stderr
    );
    c.stop().await;
}

/// Go's `text/tabwriter` as kubectl's printers configure it (`printers.GetNewTabWriter`:
/// minwidth 6, padding 3, spaces): every cell but a line's last padded to its column's widest
/// cell plus 3, at least 6.
fn tabwriter(lines: &[Vec<String>]) -> String {
    let columns = lines.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            lines
                .iter()
                .filter_map(|l| l.get(c))
                .map(|s| s.chars().count() + 3)
                .max()
                .unwrap_or(0)
                .max(6)
        })
        .collect();
    let mut out = String::new();
    for l in lines {
        for (c, cell) in l.iter().enumerate() {
            if c + 1 == l.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}", w = widths[c]));
            }
        }
        out.push('\n');
    }
    out
}

/// `kubectl get nodes -o wide` and `--show-labels` print, byte for byte, what kube-apiserver's
/// node printer (`pkg/printers/internalversion/printers.go` `printNode`, `findNodeRoles`,
/// `getNodeInternalIP`/`getNodeExternalIP`) and kubectl's label column (`labels.FormatLabels`:
/// `k=v` sorted by key, `<none>` when empty) give for nodes chosen to reach every branch: Ready
/// with two roles and both addresses, NotReady and cordoned with the same role from `kubernetes.io/role` and a role label
/// and an empty nodeInfo, and one with no labels and no status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_table_prints_as_kube_apiserver() {
    if !have_kubectl("node_table_prints_as_kube_apiserver") {
        return;
    }
    let c = Cluster::start_tls(0, 0).await;
    let k = Kubectl::new(&c.server);
    let info = |kubelet: &str, os: &str, kernel: &str, runtime: &str| {
        serde_json::json!({"architecture": "amd64", "bootID": "", "containerRuntimeVersion": runtime, "kernelVersion": kernel,
            "kubeProxyVersion": "", "kubeletVersion": kubelet, "machineID": "", "operatingSystem": "linux", "osImage": os, "systemUUID": ""})
    };
    let nodes = [
        serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "alpha",
            "labels": {"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/infra": "", "kubernetes.io/os": "linux"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "MemoryPressure", "status": "False"}],
                "addresses": [{"type": "Hostname", "address": "alpha"}, {"type": "InternalIP", "address": "10.0.0.1"},
                    {"type": "ExternalIP", "address": "203.0.113.5"}, {"type": "InternalIP", "address": "10.0.0.9"}],
                "nodeInfo": info("v1.33.2", "Red Hat Enterprise Linux CoreOS 9.6", "5.14.0-570.el9_6.x86_64", "cri-o://1.33.2")}}),
        serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bravo",
            "labels": {"kubernetes.io/role": "master", "node-role.kubernetes.io/master": ""}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown"}], "nodeInfo": info("", "", "", "")}}),
        serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "charlie"}}),
    ];
    let creates = nodes
        .iter()
        .map(|n| mco::command::Mutation::Create {
            kind: mco::model::Kind::Node,
            object: n.clone(),
        })
        .collect();
    c.server
        .hub
        .batch(creates, "", &mco::command::Actor::new("test"))
        .await
        .unwrap();
    let created: Vec<jiff::Timestamp> = nodes
        .iter()
        .map(|n| {
            let name = n["metadata"]["name"].as_str().unwrap();
            let o = c.server.hub.state().get_json(mco::model::Kind::Node, name).unwrap();
            o["metadata"]["creationTimestamp"].as_str().unwrap().parse().unwrap()
        })
        .collect();
    // The rule's cells, without AGE (index 3), which is checked against the clock instead.
    let wide: [[&str; 9]; 3] = [
        [
            "alpha",
            "Ready",
            "infra,worker",
            "v1.33.2",
            "10.0.0.1",
            "203.0.113.5",
            "Red Hat Enterprise Linux CoreOS 9.6",
            "5.14.0-570.el9_6.x86_64",
            "cri-o://1.33.2",
        ],
        [
            "bravo",
            "NotReady,SchedulingDisabled",
            "master",
            "",
            "<none>",
            "<none>",
            "<unknown>",
            "<unknown>",
            "<unknown>",
        ],
        [
            "charlie",
            "Unknown",
            "<none>",
            "",
            "<none>",
            "<none>",
            "<unknown>",
            "<unknown>",
            "<unknown>",
        ],
    ];
    let labels = [
        "kubernetes.io/os=linux,node-role.kubernetes.io/infra=,node-role.kubernetes.io/worker=",
        "kubernetes.io/role=master,node-role.kubernetes.io/master=",
        "<none>",
    ];
    for (args, header, show_labels) in [
        (
            &["get", "nodes", "-o", "wide"][..],
            &[
                "NAME",
                "STATUS",
                "ROLES",
                "AGE",
                "VERSION",
                "INTERNAL-IP",
                "EXTERNAL-IP",
                "OS-IMAGE",
                "KERNEL-VERSION",
                "CONTAINER-RUNTIME",
            ][..],
            false,
        ),
        (
            &["get", "nodes", "--show-labels"][..],
            &["NAME", "STATUS", "ROLES", "AGE", "VERSION", "LABELS"][..],
            true,
        ),
    ] {
        let cells_of = |i: usize| -> Vec<&str> {
            if show_labels {
                let mut v = wide[i][..4].to_vec();
                v.push(labels[i]);
                v
            } else {
                wide[i].to_vec()
            }
        };
        let before = jiff::Timestamp::now();
        let out = k.ok(args).await;
        let after = jiff::Timestamp::now();
        let mut lines = vec![header.iter().map(|s| s.to_string()).collect::<Vec<_>>()];
        for (i, created) in created.iter().enumerate() {
            // AGE: kubectl's HumanDuration of the seconds since creationTimestamp, `<n>s` under 2
            // minutes, read at some moment while kubectl ran.
            let printed = out
                .lines()
                .nth(i + 1)
                .and_then(|l| l.split_whitespace().nth(3))
                .unwrap_or_else(|| panic!("{args:?}: no row {i}:\n{out}"))
                .to_string();
            let (lo, hi) = ((before - *created).get_seconds(), (after - *created).get_seconds() + 1);
            assert!(
                (lo..=hi).any(|s| printed == format!("{s}s")),
                "{args:?}: AGE {printed:?} outside {lo}..={hi}s:\n{out}"
            );
            let mut row: Vec<String> = cells_of(i).iter().map(|s| s.to_string()).collect();
            row.insert(3, printed);
            lines.push(row);
        }
        assert_eq!(out, tabwriter(&lines), "{args:?}");
    }
    c.stop().await;
}
