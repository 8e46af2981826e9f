//! `mco explain`, `mco edit` and `mco apply --dry-run=server|client` compared step by step with
//! the stock kubectl against the same real server: the expected output is kubectl's own (its
//! stdout, its exit status, its error line), never mco's. Each test says that it skipped, and
//! why, when kubectl is not on PATH.

mod common;

use common::kubectl::*;
use common::*;
use std::path::Path;

/// `mco explain` prints what `kubectl explain` prints for every resource discovery lists,
/// alone, `--recursive`, along field paths (objects, maps, lists, leaves, `$ref`s), and with
/// kubectl's errors (unknown field, unknown resource, a group-version not served) and exit codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_every_served_kind_as_kubectl() {
    if !have_kubectl("explain_every_served_kind_as_kubectl") {
        return;
    }
    let c = Cluster::start_tls(0, 0).await;
    let k = Kubectl::new(&c.server);
    let names = k.ok(&["api-resources", "-o", "name"]).await;
    let names: Vec<&str> = names.lines().collect();
    assert!(names.len() >= 15, "{names:?}");
    let mut cases: Vec<Vec<String>> = Vec::new();
    for n in &names {
        cases.push(vec!["explain".into(), n.to_string()]);
        cases.push(vec!["explain".into(), n.to_string(), "--recursive".into()]);
    }
    let more: &[&[&str]] = &[
        &["explain", "mcp"],
        &["explain", "MachineConfigPool.spec"],
        &["explain", "mcp.spec.maxUnavailable"],
        &["explain", "mcp.spec.machineConfigSelector"],
        &["explain", "mcp.spec.machineConfigSelector.matchExpressions"],
        &["explain", "mcp.metadata"],
        &["explain", "mcp.metadata.labels"],
        &["explain", "mcp.status", "--recursive"],
        &["explain", "mcp.spec."],
        &["explain", "mc.spec.config"],
        &["explain", "mc.spec.kernelArguments"],
        &["explain", "machineconfigs.machineconfiguration.openshift.io.spec"],
        &["explain", "nodes.spec"],
        &["explain", "nodes.status.conditions"],
        &["explain", "events.history.mco.dev"],
        &["explain", "events"],
        &["explain", "leases.spec"],
        &["explain", "mcp", "--api-version=machineconfiguration.openshift.io/v1"],
        // Errors: kubectl's text and exit code 1.
        &["explain", "mcp.spec.bogus"],
        &["explain", "mcp.bogus.deeper"],
        &["explain", "mcp.spec.paused.x"],
        &["explain", "nope"],
        &["explain", "nope.spec"],
        &["explain", "mcp", "--api-version=machineconfiguration.openshift.io/v9"],
        &["explain", "mcp", "--api-version=a/b/c"],
        &["explain", "mcp", "mc"],
    ];
    cases.extend(more.iter().map(|c| c.iter().map(|s| s.to_string()).collect()));
    for case in &cases {
        let args: Vec<&str> = case.iter().map(String::as_str).collect();
        let want = k.run(&args).await;
        let got = mco_at(&c.server, &args).await;
        assert_eq!(
            got.ok, want.ok,
            "{args:?}: kubectl {} / mco {}",
            want.stderr, got.stderr
        );
        assert_eq!(got.stdout, want.stdout, "{args:?} stdout");
        if !want.ok {
            assert_eq!(got.stderr.lines().next(), want.stderr.lines().next(), "{args:?} stderr");
        }
    }
    c.stop().await;
}

/// An executable shell script `name` in `dir` holding `text`; its path.
fn script(dir: &Path, name: &str, text: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// An EDITOR for both clients: copies each file it is given to `$EDIT_LOG/<n>` (so the test sees
/// the header of every round), then runs `sed -i "$EDIT_SED"` on it.
fn editor_script(dir: &Path) -> String {
    script(
        dir,
        "editor.sh",
        "#!/bin/sh\nn=$(ls \"$EDIT_LOG\" | wc -l)\ncp \"$1\" \"$EDIT_LOG/$n\"\nsed -i \"$EDIT_SED\" \"$1\"\n",
    )
}

/// kubectl's and mco's temporary files named alike (`/…/kubectl-edit-123.yaml`, `/…/mco-edit-9.yaml` → FILE).
fn files_named(s: &str) -> String {
    s.split_inclusive(['"', ' ', '\n', '`'])
        .map(|w| {
            let end = w.len() - w.trim_end_matches(['"', ' ', '\n', '`']).len();
            let (word, tail) = w.split_at(w.len() - end);
            if word.contains("-edit-") && (word.ends_with(".yaml") || word.ends_with(".json")) {
                format!("FILE{tail}")
            } else {
                w.to_string()
            }
        })
        .collect()
}

/// The comment lines of each file the editor was given, in order.
fn headers(log: &Path) -> Vec<Vec<String>> {
    let mut files: Vec<_> = std::fs::read_dir(log).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort_by_key(|p| p.file_name().unwrap().to_string_lossy().parse::<u32>().unwrap());
    files
        .iter()
        .map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .take_while(|l| l.starts_with('#'))
                .map(str::to_string)
                .collect()
        })
        .collect()
}

/// `mco edit` against kubectl edit, on twin objects (kubectl edits `*-k`, mco `*-m`), each step
/// with the same sed script as editor: no change, a change, `--output-patch`, `-o json`, an
/// invalid object (reopened with the server's causes in the header, then given up with the file
/// kept), a syntax error, a changed name, a stale resourceVersion (the conflict), an empty file,
/// a missing object. Then a change made by someone else while the editor is open: no conflict
/// for either, and both writes stand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_as_kubectl() {
    if !have_kubectl("edit_as_kubectl") {
        return;
    }
    let c = Cluster::start_tls(0, 0).await;
    let k = Kubectl::new(&c.server);
    let tmp = tempfile::tempdir().unwrap();
    let editor = editor_script(tmp.path());
    let manifests = tmp.path().join("twins.yaml");
    let mut text = String::new();
    for s in ["k", "m"] {
        text.push_str(&format!(
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: edit-{s}\nspec:\n  paused: false\n  maxUnavailable: 1\n  machineConfigSelector:\n    matchExpressions:\n    - key: machineconfiguration.openshift.io/role\n      operator: In\n      values: [worker, edit-{s}]\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/edit-{s}: \"\"\n---\n"
        ));
        text.push_str(&format!(
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 50-edit-{s}\n  labels:\n    machineconfiguration.openshift.io/role: edit-{s}\nspec:\n  config:\n    ignition:\n      version: 3.4.0\n---\n"
        ));
    }
    std::fs::write(&manifests, text).unwrap();
    k.ok(&["apply", "-f", &manifests.display().to_string()]).await;

    let steps: &[(&[&str], &str)] = &[
        (&["edit", "mcp", "edit-S"], ""),
        (&["edit", "mcp", "edit-S"], "s/paused: false/paused: true/"),
        (
            &["edit", "mcp/edit-S", "--output-patch"],
            "s/paused: true/paused: false/",
        ),
        (
            &["edit", "mcp", "edit-S", "-o", "json"],
            "s/\"paused\": false/\"paused\": true/",
        ),
        (
            &["edit", "mc", "50-edit-S"],
            r#"s/version: ["']*3.4.0["']*$/version: 9.9.9/"#,
        ),
        (
            &["edit", "mcp", "edit-S"],
            "s/^kind: MachineConfigPool$/kind: Machine: ConfigPool/",
        ),
        (&["edit", "mcp", "edit-S"], "s/name: edit-S$/name: renamed/"),
        (
            &["edit", "mcp", "edit-S"],
            "s/resourceVersion: .*/resourceVersion: \"1\"/;s/paused: true/paused: false/",
        ),
        (&["edit", "mcp", "edit-S"], "d"),
        (&["edit", "mcp", "nope"], "s/a/b/"),
    ];
    for (i, (step, sed)) in steps.iter().enumerate() {
        let mut runs = Vec::new();
        for s in ["k", "m"] {
            let log = tmp.path().join(format!("log-{i}-{s}"));
            std::fs::create_dir(&log).unwrap();
            let sed = sed.replace("edit-S", &format!("edit-{s}"));
            let files = tmp.path().join(format!("tmp-{i}-{s}"));
            std::fs::create_dir(&files).unwrap();
            let env = [
                ("EDITOR", editor.as_str()),
                ("EDIT_LOG", log.to_str().unwrap()),
                ("EDIT_SED", sed.as_str()),
                ("TMPDIR", files.to_str().unwrap()),
            ];
            let args: Vec<String> = step.iter().map(|a| a.replace("edit-S", &format!("edit-{s}"))).collect();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = match s {
                "k" => k.run_env(&args, &env).await,
                _ => mco_env(&c.server, &args, &env).await,
            };
            let kept = std::fs::read_dir(&files).unwrap().count();
            runs.push((out, headers(&log), kept));
        }
        let norm = |s: &str| files_named(s).replace("edit-k", "edit-S").replace("edit-m", "edit-S");
        let ((want, want_h, want_kept), (got, got_h, got_kept)) = (&runs[0], &runs[1]);
        assert_eq!(
            got.ok, want.ok,
            "{step:?}: kubectl {} / mco {}",
            want.stderr, got.stderr
        );
        // Printed objects (`-o json`) alike but for what differs between twins.
        let same = |s: &str| -> Vec<String> {
            norm(s)
                .lines()
                .filter(|l| {
                    ![
                        "uid",
                        "resourceVersion",
                        "Timestamp",
                        "generation",
                        "rendered-",
                        "Time\"",
                    ]
                    .iter()
                    .any(|w| l.contains(w))
                })
                .map(str::to_string)
                .collect()
        };
        assert_eq!(
            same(&got.stdout),
            same(&want.stdout),
            "{step:?} stdout:\n{}",
            got.stdout
        );
        // The error lines; kubectl's retry hint names `kubectl replace`, mco's `mco apply`.
        let lines = |s: &str| -> Vec<String> {
            norm(s)
                .lines()
                .filter(|l| !l.starts_with("You can run"))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(
            lines(&got.stderr),
            lines(&want.stderr),
            "{step:?} stderr:\n{}\nheaders: kubectl {want_h:?} mco {got_h:?}",
            got.stderr
        );
        assert_eq!(got_kept, want_kept, "{step:?}: files kept");
        assert_eq!(got_h.len(), want_h.len(), "{step:?}: editor rounds");
        for (g, w) in got_h.iter().zip(want_h) {
            // A syntax error's own text is the YAML parser's (Go's or serde-saphyr's).
            let cut = |h: &[String]| -> Vec<String> {
                h.iter()
                    .map(|l| norm(l).split(" failed validation\": ").next().unwrap().to_string())
                    .collect()
            };
            assert_eq!(cut(g), cut(w), "{step:?}: header");
        }
    }
    // Both twins end alike.
    for (kind, a, b) in [("mcp", "edit-k", "edit-m"), ("mc", "50-edit-k", "50-edit-m")] {
        let get = |n: &str| {
            let k = &k;
            let n = n.to_string();
            async move {
                k.ok(&[
                    "get",
                    kind,
                    &n,
                    "-o",
                    "jsonpath={.spec.paused}{.spec.config.ignition.version}",
                ])
                .await
            }
        };
        assert_eq!(get(a).await, get(b).await, "{kind}");
    }

    // A change someone else makes while the editor is open is no conflict for either: the patch
    // carries only the edited field and no resourceVersion, so both writes stand.
    for (s, labeller) in [("k", "kubectl"), ("m", env!("CARGO_BIN_EXE_mco"))] {
        let name = format!("edit-{s}");
        let race = script(
            tmp.path(),
            &format!("race-{s}.sh"),
            &format!(
                "#!/bin/sh\n{labeller} label mcp {name} meanwhile=1 >/dev/null\nsed -i 's/paused: true/paused: false/' \"$1\"\n"
            ),
        );
        assert!(c.pool(&name).spec.paused, "set by the -o json step");
        let env = [("EDITOR", race.as_str()), ("TMPDIR", tmp.path().to_str().unwrap())];
        let out = match s {
            "k" => k.run_env(&["edit", "mcp", &name], &env).await,
            _ => mco_env(&c.server, &["edit", "mcp", &name], &env).await,
        };
        assert!(out.ok, "{s}: {}", out.stderr);
        assert_eq!(
            out.stdout.trim(),
            format!("machineconfigpool.machineconfiguration.openshift.io/{name} edited")
        );
        let after = c.pool(&name);
        assert!(!after.spec.paused, "{s}: the edit was written");
        assert_eq!(
            after.metadata.labels.unwrap().get("meanwhile").map(String::as_str),
            Some("1"),
            "{s}: the label written meanwhile is kept"
        );
    }
    c.stop().await;
}

/// `mco apply --dry-run=server|client` prints kubectl's lines (`created (server dry run)`,
/// `configured (dry run)`, `unchanged (server dry run)`) and writes nothing; with strict
/// validation (the default) an unknown field is an error naming the object and the field in
/// every dry run, the impact preview of `--dry-run` alone included. kubectl's server dry run
/// refuses it too; kubectl's client dry run, which leaves the check to the server it never
/// writes to, does not: there mco differs on purpose (README).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_dry_runs_validate_as_kubectl() {
    if !have_kubectl("apply_dry_runs_validate_as_kubectl") {
        return;
    }
    let c = Cluster::start_tls(0, 0).await;
    let k = Kubectl::new(&c.server);
    let tmp = tempfile::tempdir().unwrap();
    let file = |name: &str, extra: &str| {
        let p = tmp.path().join(format!("{name}.yaml"));
        std::fs::write(&p, format!("apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: {name}\nspec:\n  machineConfigSelector:\n    matchExpressions:\n    - key: machineconfiguration.openshift.io/role\n      operator: In\n      values: [worker, {name}]\n{extra}")).unwrap();
        p.display().to_string()
    };
    let bad = file("typo", "  pausd: true\n");
    let strict = r#"machineconfigpool.machineconfiguration.openshift.io "typo": strict decoding error: unknown field "spec.pausd""#;
    for args in [
        vec!["apply", "-f", &bad, "--dry-run=server"],
        vec!["apply", "-f", &bad, "--dry-run=server", "--validate=strict"],
        vec!["apply", "-f", &bad, "--dry-run=client", "--validate=true"],
        vec!["apply", "-f", &bad, "--dry-run=client"],
        vec!["apply", "-f", &bad, "--dry-run"],
    ] {
        let got = mco_at(&c.server, &args).await;
        assert!(!got.ok, "{args:?}: {}", got.stdout);
        let said = format!("{}{}", got.stdout, got.stderr);
        assert!(said.contains(strict), "{args:?}: {said}");
        if args[3] == "--dry-run=server" {
            let want = k.run(&args).await;
            assert!(!want.ok, "kubectl {args:?}: {}", want.stdout);
            assert!(want.stderr.contains(r#"unknown field "spec.pausd""#), "{}", want.stderr);
        }
        assert!(
            !c.server.hub.state().pools.contains_key("typo"),
            "{args:?}: nothing written"
        );
    }
    let warn = mco_at(&c.server, &["apply", "-f", &bad, "--dry-run=server", "--validate=warn"]).await;
    assert!(warn.ok, "{}", warn.stdout);
    // kubectl prints warnings on stderr (client-go's warning handler), results on stdout.
    assert!(
        warn.stderr.contains(r#"Warning: unknown field "spec.pausd""#) && !warn.stdout.contains("Warning"),
        "{}",
        warn.stderr
    );
    assert!(
        warn.stdout
            .contains("machineconfigpool.machineconfiguration.openshift.io/typo created (server dry run)"),
        "{}",
        warn.stdout
    );
    assert!(!c.server.hub.state().pools.contains_key("typo"), "nothing written");

    // Twins: kubectl applies dry-k, mco dry-m, step by step from the same state.
    let steps: &[(&str, &[&str])] = &[
        ("", &["--dry-run=server"]),
        ("", &["--dry-run=client"]),
        ("", &[]),
        ("", &["--dry-run=server"]),
        ("  paused: true\n", &["--dry-run=server"]),
        ("  paused: true\n", &["--dry-run=client"]),
        ("  paused: true\n", &["--dry-run=none"]),
        ("", &["--dry-run=bogus"]),
    ];
    for (extra, flags) in steps {
        let mut runs = Vec::new();
        for s in ["k", "m"] {
            let f = file(&format!("dry-{s}"), extra);
            let mut args = vec!["apply", "-f", f.as_str()];
            args.extend(flags.iter());
            runs.push(match s {
                "k" => k.run(&args).await,
                _ => mco_at(&c.server, &args).await,
            });
        }
        let norm = |s: &str| s.replace("dry-k", "dry-S").replace("dry-m", "dry-S");
        let (want, got) = (&runs[0], &runs[1]);
        assert_eq!(
            got.ok, want.ok,
            "{flags:?}: kubectl {} / mco {}{}",
            want.stderr, got.stdout, got.stderr
        );
        if want.ok {
            assert_eq!(norm(&got.stdout), norm(&want.stdout), "{extra:?} {flags:?}");
        } else {
            let last = |s: &str| norm(s).lines().next().unwrap_or("").to_string();
            assert_eq!(last(&got.stderr), last(&want.stderr), "{flags:?}");
        }
        let state = c.server.hub.state();
        assert_eq!(
            state.pools.contains_key("dry-k"),
            state.pools.contains_key("dry-m"),
            "{flags:?}"
        );
        let paused = |n: &str| state.pools.get(n).map(|p| p.spec.paused);
        assert_eq!(paused("dry-k"), paused("dry-m"), "{flags:?}");
    }
    c.stop().await;
}

/// Every mco verb that mirrors a kubectl verb prints where kubectl prints and exits as it exits,
/// compared case by case with the stock kubectl against the same server from the same state:
/// results on stdout; `error: …` and `Error from server (…)` lines, and `Warning:` lines, on
/// stderr (kubectl's `CheckErr` and client-go's warning handler); exit 0 on success, 1 on any
/// error, a usage error included (cobra's 1, not clap's 2). Where both succeed, stdout is the
/// same text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_verb_prints_and_exits_as_kubectl() {
    if !have_kubectl("every_verb_prints_and_exits_as_kubectl") {
        return;
    }
    let c = Cluster::start_tls(0, 0).await;
    let k = Kubectl::new(&c.server);
    let tmp = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let p = tmp.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let mc = |name: &str, extra: &str| {
        format!("apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: {name}\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  kernelArguments: [quiet]\n{extra}")
    };
    let good = file("good.yaml", &mc("99-worker-streams", ""));
    let typo = file("typo.yaml", &mc("99-worker-typo", "  kernelArgs: [x]\n"));
    let invalid = file(
        "invalid.yaml",
        &mc("99-worker-invalid", "  config:\n    ignition:\n      version: 9.9.9\n"),
    );
    let bad_label = file(
        "label.yaml",
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: streams-node\n  labels:\n    role: \"not a value!\"\n",
    );
    let missing = tmp.path().join("missing.yaml").display().to_string();
    let empty = file("empty.yaml", "");
    // Each case: the arguments, and the kubectl command that undoes what kubectl's run changed,
    // so that mco's run starts from the same state.
    let cases: Vec<(Vec<&str>, Option<Vec<&str>>)> = vec![
        (
            vec!["apply", "-f", &good],
            Some(vec!["delete", "mc", "99-worker-streams"]),
        ),
        (vec!["apply", "-f", &good], None),
        (vec!["apply", "-f", &typo], None),
        (
            vec!["apply", "-f", &typo, "--validate=warn"],
            Some(vec!["delete", "mc", "99-worker-typo"]),
        ),
        (vec!["apply", "-f", &invalid], None),
        (vec!["apply", "-f", &bad_label], None),
        (vec!["apply", "-f", &missing], None),
        (vec!["apply", "-f", &empty], None),
        (vec!["apply", "-f", &good, "--bogus-flag"], None),
        (vec!["apply", "-f", &good, "--dry-run=server"], None),
        (vec!["apply", "-f", &good, "--validate=bogus"], None),
        (vec!["apply"], None),
        (vec!["get", "mc", "99-worker-streams", "-o", "name"], None),
        (vec!["get", "mc", "nope"], None),
        (vec!["get", "nosuchkind"], None),
        (vec!["get", "mc", "-o", "bogus"], None),
        (vec!["describe", "mc", "nope"], None),
        (vec!["describe", "nosuchkind", "x"], None),
        (vec!["delete", "mc", "nope"], None),
        (vec!["delete", "mc", "-l", "nothing=here"], None),
        (vec!["label", "mc", "nope", "a=b"], None),
        (
            vec!["label", "mc", "99-worker-streams", "a=b"],
            Some(vec!["label", "mc", "99-worker-streams", "a-"]),
        ),
        (vec!["label", "mc", "99-worker-streams", "a=c"], None),
        (vec!["annotate", "mc", "nope", "a=b"], None),
        (vec!["cordon", "nope"], None),
        (vec!["uncordon", "nope"], None),
        (vec!["drain", "nope"], None),
        (vec!["cordon"], None),
        (vec!["patch", "mc", "nope", "--type", "merge", "-p", "{}"], None),
        (
            vec!["patch", "mc", "99-worker-streams", "--type", "merge", "-p", "not json"],
            None,
        ),
        (
            vec!["patch", "mc", "99-worker-streams", "--type", "bogus", "-p", "{}"],
            None,
        ),
        (vec!["edit", "mc", "nope"], None),
        (vec!["explain", "nope"], None),
        (vec!["explain", "mcp.spec.paused"], None),
        (vec!["rollout", "pause", "mcp", "nope"], None),
        (vec!["rollout", "resume", "mcp", "nope"], None),
        (
            vec!["delete", "mc", "99-worker-typo"],
            Some(vec!["apply", "-f", &typo, "--validate=false"]),
        ),
    ];
    for (args, undo) in &cases {
        let want = k.run_env(args, &[("EDITOR", "true")]).await;
        if let Some(undo) = undo {
            let o = k.run(undo).await;
            assert!(o.ok, "kubectl {undo:?}: {}", o.stderr);
        }
        let got = mco_env(&c.server, args, &[("EDITOR", "true")]).await;
        let what = format!(
            "{args:?}\n--- kubectl ({:?}):\n{}{}\n--- mco ({:?}):\n{}{}",
            want.code, want.stdout, want.stderr, got.code, got.stdout, got.stderr
        );
        assert_eq!(got.code, want.code, "exit code: {what}");
        assert_eq!(got.stdout.is_empty(), want.stdout.is_empty(), "stdout: {what}");
        assert_eq!(got.stderr.is_empty(), want.stderr.is_empty(), "stderr: {what}");
        if want.ok {
            assert_eq!(got.stdout, want.stdout, "{what}");
        }
        for (who, o) in [("kubectl", &want), ("mco", &got)] {
            for line in o.stdout.lines() {
                assert!(
                    !line.starts_with("error:")
                        && !line.starts_with("Error from server")
                        && !line.starts_with("Warning:"),
                    "{who} printed an error on stdout: {what}"
                );
            }
        }
    }
    c.stop().await;
}
