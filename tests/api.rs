//! The API over a real server on 127.0.0.1:0 (no nodes): bad input is refused naming the field
//! and leaves the pool's target unchanged; optimistic concurrency; a restart keeps every object
//! and resourceVersion; watches resume from a resourceVersion.

mod common;

use futures_util::StreamExt;
use mco::client::Client;
use mco::model::{Kind, DEFAULT_GROUP};
use mco::server::{self, RunningServer, ServerConfig};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

async fn start(dir: &Path) -> (RunningServer, Client) {
    let s = server::start(ServerConfig {
        data_dir: dir.to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        group: DEFAULT_GROUP.into(),
        drain_hook: None,
        ..Default::default()
    })
    .await
    .unwrap();
    let c = s.admin_client("test");
    (s, c)
}

async fn rendered_target(s: &RunningServer, pool: &str) -> String {
    let mut changes = s.hub.changes();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let t = s
            .hub
            .state()
            .pools
            .get(pool)
            .map(|p| p.spec.configuration.name.clone())
            .unwrap_or_default();
        if !t.is_empty() {
            return t;
        }
        assert!(tokio::time::Instant::now() < deadline, "pool {pool} never rendered");
        let _ = tokio::time::timeout(Duration::from_millis(200), changes.changed()).await;
    }
}

fn mc(name: &str, config: Value) -> Value {
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": config}})
}

fn file(path: &str, extra: Value) -> Value {
    let mut f = json!({"path": path, "contents": {"source": "data:,hello"}});
    for (k, v) in extra.as_object().unwrap() {
        f[k] = v.clone();
    }
    f
}

fn files(fs: Vec<Value>) -> Value {
    json!({"ignition": {"version": "3.4.0"}, "storage": {"files": fs}})
}

/// Creates `obj` and expects an Invalid naming `field` with a message containing `rule`.
async fn check_refused(c: &Client, kind: Kind, obj: Value, field: &str, rule: &str) {
    common::assert_invalid(field, c.create(kind, &obj, None).await, field, rule);
}

#[tokio::test]
async fn bad_input_is_refused_naming_the_field_and_the_target_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (s, c) = start(dir.path()).await;
    let before = rendered_target(&s, "worker").await;
    let seq = s.hub.store().last_seq();
    let f = "spec.config.storage.files[0]";
    let cases: Vec<(Value, String, &str)> = vec![
        (
            mc("bad-mode", files(vec![file("/etc/a", json!({"mode": 644}))])),
            format!("{f}.mode"),
            "invalid mode 01204 for /etc/a, cannot exceed 0777",
        ),
        (
            mc("bad-rel", files(vec![file("etc/a", json!({}))])),
            format!("{f}.path"),
            "path not absolute",
        ),
        (
            mc("bad-clean", files(vec![file("/etc/../a", json!({}))])),
            format!("{f}.path"),
            "not fully simplified",
        ),
        (
            mc(
                "bad-dup",
                files(vec![file("/etc/a", json!({})), file("/etc/a", json!({}))]),
            ),
            "spec.config.storage.files[1].path".into(),
            "duplicate entry defined",
        ),
        (
            mc(
                "bad-b64",
                files(vec![file(
                    "/etc/a",
                    json!({"contents": {"source": "data:;base64,aGVsbG8=="}}),
                )]),
            ),
            format!("{f}.contents.source"),
            "",
        ),
        (
            mc(
                "bad-escape",
                files(vec![file("/etc/a", json!({"contents": {"source": "data:,100%zz"}}))]),
            ),
            format!("{f}.contents.source"),
            "",
        ),
        (
            mc("bad-version", json!({"ignition": {"version": "3.9.0"}})),
            "spec.config.ignition.version".into(),
            "unknown version. Supported spec versions: 2.2,3.0,3.1,3.2,3.3,3.4,3.5",
        ),
        (
            mc(
                "bad-v2",
                json!({"ignition": {"version": "2.2.0"}, "storage": {"files": [{"filesystem": "oem", "path": "/etc/a"}]}}),
            ),
            "spec.config.storage.files[0].filesystem".into(),
            "filesystem \"oem\" is not supported",
        ),
        (
            mc(
                "bad-unit",
                json!({"ignition": {"version": "3.4.0"}, "systemd": {"units": [{"name": "foo.txt", "contents": "[Unit]\n"}]}}),
            ),
            "spec.config.systemd.units[0].name".into(),
            ".service",
        ),
        (
            mc(
                "bad-dropin",
                json!({"ignition": {"version": "3.4.0"}, "systemd": {"units": [{"name": "a.service", "dropins": [{"name": "x.txt", "contents": "[Service]\n"}]}]}}),
            ),
            "spec.config.systemd.units[0].dropins[0].name".into(),
            ".conf",
        ),
        (
            mc(
                "bad-user",
                json!({"ignition": {"version": "3.4.0"}, "passwd": {"users": [{"name": "alice", "sshAuthorizedKeys": ["ssh-ed25519 AAAA"]}]}}),
            ),
            "spec.config.passwd.users[0].name".into(),
            "core",
        ),
        (
            mc(
                "bad-disks",
                json!({"ignition": {"version": "3.4.0"}, "storage": {"disks": [{"device": "/dev/sdb"}]}}),
            ),
            "spec.config.storage.disks".into(),
            "",
        ),
        (
            mc(
                "bad-append",
                files(vec![file("/etc/a", json!({"append": [{"source": "data:,x"}]}))]),
            ),
            format!("{f}.append"),
            "append",
        ),
    ];
    for (obj, field, rule) in cases {
        check_refused(&c, Kind::MachineConfig, obj, &field, rule).await;
    }
    let pool = json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": "infra"}, "spec": {"maxUnavailable": "50 percent",
        "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": "infra"}}}});
    check_refused(&c, Kind::MachineConfigPool, pool, "spec.maxUnavailable", "").await;
    let typed = json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": "infra"}, "spec": {"paused": "yes"}});
    check_refused(&c, Kind::MachineConfigPool, typed, "spec.paused", "").await;

    let by_test: Vec<_> = s
        .hub
        .store()
        .read_after(seq)
        .map(|e| e.unwrap())
        .filter(|e| e.actor == "admin")
        .collect();
    assert!(by_test.is_empty(), "refused writes append nothing: {by_test:?}");
    assert_eq!(s.hub.state().pools["worker"].spec.configuration.name, before);
    assert!(s.hub.state().machine_configs.keys().all(|k| !k.starts_with("bad-")));
    s.stop().await;
}

#[tokio::test]
async fn conflicts_not_found_and_already_exists_are_kubernetes_statuses() {
    let dir = tempfile::tempdir().unwrap();
    let (s, c) = start(dir.path()).await;
    rendered_target(&s, "worker").await;
    let obj = mc("99-worker-x", files(vec![file("/etc/x", json!({"mode": 420}))]));
    let created = c.create(Kind::MachineConfig, &obj, None).await.unwrap();
    let rv = created["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let e = c.create(Kind::MachineConfig, &obj, None).await.unwrap_err();
    assert_eq!(
        (e.reason(), e.to_string()),
        (
            Some("AlreadyExists"),
            "machineconfigs.machineconfiguration.openshift.io \"99-worker-x\" already exists".to_string()
        )
    );
    let mut stale = created.clone();
    stale["spec"]["kernelArguments"] = json!(["a=1"]);
    c.replace(Kind::MachineConfig, "99-worker-x", &stale, None)
        .await
        .unwrap();
    stale["metadata"]["resourceVersion"] = json!(rv);
    let e = c
        .replace(Kind::MachineConfig, "99-worker-x", &stale, None)
        .await
        .unwrap_err();
    assert!(e.is_conflict(), "{e}");
    let e = c.get::<Value>(Kind::MachineConfig, "nope").await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "machineconfigs.machineconfiguration.openshift.io \"nope\" not found"
    );
    let e = c.get::<Value>(Kind::Node, "nope").await.unwrap_err();
    assert_eq!(e.to_string(), "nodes \"nope\" not found");
    s.stop().await;
}

#[tokio::test]
async fn a_restart_keeps_every_object_and_resource_version_and_watches_resume() {
    let dir = tempfile::tempdir().unwrap();
    let (s, c) = start(dir.path()).await;
    rendered_target(&s, "worker").await;
    let chrony = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/chrony.yaml")).unwrap();
    let mcs: Vec<_> = mco::manifest::parse_documents(&chrony)
        .into_iter()
        .map(|d| d.unwrap())
        .collect();
    let obj = match &mcs[0] {
        mco::manifest::Manifest::MachineConfig(m) => serde_json::to_value(m).unwrap(),
        _ => unreachable!(),
    };
    let created = c.create(Kind::MachineConfig, &obj, Some("ntp")).await.unwrap();
    let rv_created: u64 = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    // Wait until the render controller has reacted, so the snapshot below is settled.
    let mut changes = s.hub.changes();
    while !s.hub.state().pools["worker"]
        .spec
        .configuration
        .source
        .iter()
        .any(|x| x.name == "99-worker-chrony")
    {
        tokio::time::timeout(Duration::from_secs(10), changes.changed())
            .await
            .expect("render reacts")
            .unwrap();
    }
    let ev = s
        .hub
        .store()
        .read_range(rv_created - 1, rv_created)
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(
        (ev.actor.as_str(), ev.reason.as_str(), ev.event_type.as_str()),
        ("admin", "ntp", "MachineConfigCreated")
    );
    let hub = s.hub.clone();
    s.stop().await;
    // Read after the stop: nothing writes any more.
    let before: Vec<Value> = Kind::ALL.iter().flat_map(|k| hub.state().list_json(*k)).collect();
    let seq = hub.store().last_seq();
    drop(hub);

    let (s, c) = start(dir.path()).await;
    let after: Vec<Value> = Kind::ALL.iter().flat_map(|k| s.hub.state().list_json(*k)).collect();
    assert_eq!(
        after, before,
        "every object, with its resourceVersion, survives a restart"
    );
    assert!(s.hub.store().last_seq() >= seq);
    // Time travel: the state as of the creation has the MC, the one before does not.
    assert!(s
        .hub
        .store()
        .state_at(rv_created)
        .unwrap()
        .machine_configs
        .contains_key("99-worker-chrony"));
    assert!(!s
        .hub
        .store()
        .state_at(rv_created - 1)
        .unwrap()
        .machine_configs
        .contains_key("99-worker-chrony"));
    // A watch from the creation's resourceVersion replays what came after, then goes live.
    let mut w = Box::pin(
        c.watch(Kind::MachineConfig, None, Some(&(rv_created - 1).to_string()))
            .await
            .unwrap(),
    );
    let first = tokio::time::timeout(Duration::from_secs(5), w.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        (first.type_.as_str(), first.object["metadata"]["name"].as_str()),
        ("ADDED", Some("99-worker-chrony"))
    );
    c.delete(Kind::MachineConfig, "99-worker-chrony").await.unwrap();
    loop {
        let e = tokio::time::timeout(Duration::from_secs(5), w.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if e.type_ == "DELETED" {
            assert_eq!(e.object["metadata"]["name"], "99-worker-chrony");
            break;
        }
    }
    s.stop().await;
}

/// `mco apply` is kubectl's three-way apply: a partial pool manifest changes only what it names
/// (the render controller's `spec.configuration` and the selectors survive), applying it again
/// changes nothing; a file with one bad document writes nothing; an empty input is an error.
#[tokio::test]
async fn apply_is_three_way_all_or_nothing_and_refuses_empty_input() {
    let dir = tempfile::tempdir().unwrap();
    let (s, c) = start(dir.path()).await;
    let target = rendered_target(&s, "worker").await;
    let files = tempfile::tempdir().unwrap();
    let pause = files.path().join("pause.yaml");
    std::fs::write(&pause, "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: worker\nspec:\n  paused: true\n").unwrap();
    let (out, ok) = mco::cli::apply(&c, std::slice::from_ref(&pause)).await.unwrap();
    assert!(ok && out.contains("/worker configured"), "{out}");
    let generation = {
        let st = s.hub.state();
        let w = &st.pools["worker"];
        assert!(w.spec.paused);
        assert_eq!(w.spec.configuration.name, target, "spec.configuration is kept");
        assert!(
            w.spec.machine_config_selector.is_some() && w.spec.node_selector.is_some(),
            "selectors are kept"
        );
        w.metadata.generation
    };
    let (out, ok) = mco::cli::apply(&c, std::slice::from_ref(&pause)).await.unwrap();
    assert!(ok && out.contains("/worker unchanged"), "{out}");
    assert_eq!(s.hub.state().pools["worker"].metadata.generation, generation);

    let multi = files.path().join("multi.yaml");
    std::fs::write(
        &multi,
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-worker-good\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  kernelArguments: [a=1]\n---\napiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-worker-bad\nspec:\n  config:\n    ignition:\n      version: 3.4.0\n    storage:\n      files:\n      - path: /etc/x\n        mode: 644\n",
    )
    .unwrap();
    let (out, ok) = mco::cli::apply(&c, std::slice::from_ref(&multi)).await.unwrap();
    assert!(
        !ok && out.contains("spec.config.storage.files[0].mode") && out.contains("nothing was applied"),
        "{out}"
    );
    assert!(
        !s.hub.state().machine_configs.contains_key("99-worker-good"),
        "no half-applied file"
    );

    // An unknown key inside the Ignition config: with kubectl's default `--validate=strict` an
    // error naming the object and the field, and nothing of the file written (its good
    // document neither); with `--validate=warn` a warning, as Ignition's "unused key"; with
    // `ignore` nothing is said.
    let typo = files.path().join("typo.yaml");
    std::fs::write(&typo, "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-worker-fine\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  kernelArguments: [a=1]\n---\napiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-worker-typo\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  config:\n    ignition:\n      version: 3.4.0\n    storage:\n      filez:\n      - path: /etc/x\n").unwrap();
    let (out, ok) = mco::cli::apply(&c, std::slice::from_ref(&typo)).await.unwrap();
    assert!(
        !ok && out.contains(r#"machineconfig.machineconfiguration.openshift.io "99-worker-typo": strict decoding error: unknown field "spec.config.storage.filez""#)
            && out.contains("nothing was applied"),
        "{out}"
    );
    let st = s.hub.state();
    assert!(!st.machine_configs.contains_key("99-worker-typo") && !st.machine_configs.contains_key("99-worker-fine"));
    use mco::cli::validate::Validate;
    let (out, ok) = mco::cli::apply_validated(&c, std::slice::from_ref(&typo), Validate::Warn)
        .await
        .unwrap();
    assert!(
        ok && out.contains(r#"Warning: unknown field "spec.config.storage.filez""#),
        "{out}"
    );
    std::fs::write(
        &typo,
        std::fs::read_to_string(&typo)
            .unwrap()
            .replace("99-worker-typo", "99-worker-typo2"),
    )
    .unwrap();
    let (out, ok) = mco::cli::apply_validated(&c, std::slice::from_ref(&typo), Validate::Ignore)
        .await
        .unwrap();
    assert!(ok && !out.contains("Warning"), "{out}");

    // A MachineConfig no pool selects is accepted, with a warning.
    let orphan = files.path().join("orphan.yaml");
    std::fs::write(&orphan, "apiVersion: machineconfiguration.alauda.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-orphan\n  labels:\n    machineconfiguration.alauda.io/role: worker\nspec:\n  kernelArguments: [a=1]\n").unwrap();
    let (out, ok) = mco::cli::apply(&c, &[orphan]).await.unwrap();
    assert!(
        ok && out.contains(r#"Warning: MachineConfig "99-orphan" is not selected by any MachineConfigPool"#),
        "{out}"
    );

    let empty = files.path().join("empty.yaml");
    std::fs::write(&empty, "# nothing here\n---\n").unwrap();
    let (out, ok) = mco::cli::apply(&c, &[empty]).await.unwrap();
    assert!(!ok && out.contains("no objects passed to apply"), "{out}");
    s.stop().await;
}

/// The built-in pools and base configs come back when deleted (MCO's operator re-applies them).
#[tokio::test]
async fn built_in_pools_are_recreated() {
    let dir = tempfile::tempdir().unwrap();
    let (s, c) = start(dir.path()).await;
    rendered_target(&s, "worker").await;
    c.delete(Kind::MachineConfigPool, "worker").await.unwrap();
    c.delete(Kind::MachineConfig, "00-worker").await.unwrap();
    let mut changes = s.hub.changes();
    while !(s.hub.state().pools.contains_key("worker") && s.hub.state().machine_configs.contains_key("00-worker")) {
        tokio::time::timeout(Duration::from_secs(10), changes.changed())
            .await
            .expect("recreated")
            .unwrap();
    }
    rendered_target(&s, "worker").await;
    s.stop().await;
}

/// A watch through a label selector sees an object ADDED when it starts matching and DELETED
/// when it stops, as Kubernetes' watch cache reports it; DELETE honours dryRun and uid
/// preconditions; deletecollection deletes what the selector matches.
#[tokio::test]
async fn selector_watches_delete_options_and_deletecollection() {
    let dir = tempfile::tempdir().unwrap();
    let (s, c) = start(dir.path()).await;
    rendered_target(&s, "worker").await;
    let base = format!("{}/apis/machineconfiguration.openshift.io/v1/machineconfigs", s.url());
    let rv = s.hub.state().seq;
    let resp = s
        .admin_http()
        .get(format!(
            "{base}?watch=true&labelSelector=team%3Dblue&resourceVersion={rv}"
        ))
        .send()
        .await
        .unwrap();
    let mut body = Box::pin(resp.bytes_stream());
    let mut buf = String::new();
    let mut next_event = async move || -> Value {
        loop {
            if let Some(i) = buf.find('\n') {
                let line: String = buf.drain(..=i).collect();
                return serde_json::from_str(&line).unwrap();
            }
            let chunk = tokio::time::timeout(Duration::from_secs(5), body.next())
                .await
                .expect("a watch event")
                .unwrap()
                .unwrap();
            buf.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    };
    let obj = mc("70-worker-sel", files(vec![file("/etc/sel", json!({"mode": 420}))]));
    c.create(Kind::MachineConfig, &obj, None).await.unwrap();
    let label = |v: Value| json!({"metadata": {"labels": {"team": v}}});
    c.merge_patch(Kind::MachineConfig, "70-worker-sel", &label(json!("blue")), false)
        .await
        .unwrap();
    let e = next_event().await;
    assert_eq!(
        (e["type"].as_str(), e["object"]["metadata"]["name"].as_str()),
        (Some("ADDED"), Some("70-worker-sel"))
    );
    c.merge_patch(Kind::MachineConfig, "70-worker-sel", &label(Value::Null), false)
        .await
        .unwrap();
    assert_eq!(next_event().await["type"], "DELETED");

    let http = s.admin_http();
    let del = |body: Value| http.delete(format!("{base}/70-worker-sel")).json(&body).send();
    // A dry run is admitted and answered with the object, and deletes nothing.
    let r = del(json!({"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]}))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = del(json!({"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["Some"]}))
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let r = del(json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "wrong"}}))
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let status: Value = r.json().await.unwrap();
    let uid = s.hub.state().machine_configs["70-worker-sel"]
        .metadata
        .uid
        .clone()
        .unwrap();
    assert_eq!(
        status["message"],
        format!(
            "Operation cannot be fulfilled on machineconfigs.machineconfiguration.openshift.io \"70-worker-sel\": \
             Precondition failed: UID in precondition: wrong, UID in object meta: {uid}"
        ),
        "kube-apiserver's Preconditions.Check wording"
    );
    // A resourceVersion precondition is compared as a string, as kube-apiserver compares it:
    // one that is not a number matches no object (it was ignored, and the object deleted).
    for rv in ["abc", "1"] {
        let r = del(json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": rv}}))
            .await
            .unwrap();
        assert_eq!(r.status(), 409, "resourceVersion precondition {rv:?}");
        let status: Value = r.json().await.unwrap();
        let message = status["message"].as_str().unwrap();
        assert!(
            message.contains(&format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: "
            )),
            "{message}"
        );
    }
    assert!(
        s.hub.state().machine_configs.contains_key("70-worker-sel"),
        "no refused delete deleted it"
    );

    c.merge_patch(Kind::MachineConfig, "70-worker-sel", &label(json!("gone")), false)
        .await
        .unwrap();
    let r = http
        .delete(format!("{base}?labelSelector=team%3Dgone"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(!s.hub.state().machine_configs.contains_key("70-worker-sel"));
    assert!(
        s.hub.state().machine_configs.contains_key("00-worker"),
        "only the selected objects"
    );
    s.stop().await;
}

/// `RunningServer::stop` waits for the tasks behind open watches (plain and history ones, from
/// a resourceVersion and from now): when it returns the data dir's lock is free, so a server
/// started at once on the same data dir opens the log instead of failing on sled's lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_with_open_watches_releases_the_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    {
        // Enough events that a watch from resourceVersion 1 whose client does not read fills
        // its channel and waits for room: that task must not outlive `stop`.
        let (s, _) = start(dir.path()).await;
        let actor = mco::command::Actor::new("test");
        for i in 0..400 {
            let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("n-{i}")}});
            s.hub.create(Kind::Node, node, &actor).await.unwrap();
        }
        s.stop().await;
    }
    for round in 0..5 {
        let (s, c) = start(dir.path()).await;
        let mut streams = Vec::new();
        for kind in [Kind::MachineConfigPool, Kind::Node, Kind::MachineConfig] {
            streams.push(c.watch(kind, None, None).await.unwrap().boxed());
            streams.push(c.watch(kind, None, Some("1")).await.unwrap().boxed());
        }
        let history = s
            .admin_http()
            .get(format!("{}/apis/history.mco.dev/v1/events?watch=1", s.url()))
            .send()
            .await
            .unwrap();
        assert!(history.status().is_success(), "the history watch opens");
        // The watches from now have delivered the existing objects, so their tasks are running
        // and hold the hub; the ones from resourceVersion 1 are not read at all.
        for i in [0, 2, 4] {
            let first = tokio::time::timeout(Duration::from_secs(10), streams[i].next()).await;
            assert!(
                matches!(first, Ok(Some(Ok(_)))),
                "round {round}: a watch delivers its first event"
            );
        }
        s.stop().await;
        // The streams are still held open by this client while the next server starts.
        let (again, _) = start(dir.path()).await;
        again.stop().await;
        drop((streams, history));
    }
}

/// A watch from a resourceVersion after which its kind changed is told exactly what changed
/// for it since (Kubernetes' watch semantics through selectors): the objects it held at that
/// resourceVersion are read from the log after it, not from the present, and the events after
/// it come in order, then live ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_an_older_resource_version_sees_each_change_since_through_its_selectors() {
    let dir = tempfile::tempdir().unwrap();
    let (s, c) = start(dir.path()).await;
    rendered_target(&s, "worker").await;
    let team = |name: &str, team: &str| {
        json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
            "metadata": {"name": name, "labels": {"team": team}}, "spec": {"config": {"ignition": {"version": "3.2.0"}}}})
    };
    let relabel = |t: &str| json!({"metadata": {"labels": {"team": t}}});
    let mut rv0 = String::new();
    for (n, t) in [("w-a", "blue"), ("w-b", "blue"), ("w-c", "red"), ("w-d", "blue")] {
        let o = c.create(Kind::MachineConfig, &team(n, t), None).await.unwrap();
        rv0 = o["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    }
    // After rv0: a stays blue, b leaves, c joins, d is deleted, e is born blue, f red.
    c.merge_patch(
        Kind::MachineConfig,
        "w-a",
        &json!({"metadata": {"annotations": {"x": "1"}}}),
        false,
    )
    .await
    .unwrap();
    c.merge_patch(Kind::MachineConfig, "w-b", &relabel("red"), false)
        .await
        .unwrap();
    c.merge_patch(Kind::MachineConfig, "w-c", &relabel("blue"), false)
        .await
        .unwrap();
    c.delete(Kind::MachineConfig, "w-d").await.unwrap();
    c.create(Kind::MachineConfig, &team("w-e", "blue"), None).await.unwrap();
    c.create(Kind::MachineConfig, &team("w-f", "red"), None).await.unwrap();

    let base = format!("{}/apis/machineconfiguration.openshift.io/v1/machineconfigs", s.url());
    let open = |query: String| {
        let http = s.admin_http();
        let url = format!("{base}?watch=true&resourceVersion={rv0}&{query}");
        async move {
            let resp = http.get(url).send().await.unwrap();
            assert_eq!(resp.status(), 200);
            let mut body = Box::pin(resp.bytes_stream());
            let mut buf = String::new();
            async move |n: usize| -> Vec<(String, String)> {
                let mut out = Vec::new();
                while out.len() < n {
                    if let Some(i) = buf.find('\n') {
                        let line: String = buf.drain(..=i).collect();
                        let e: Value = serde_json::from_str(&line).unwrap();
                        let name = e["object"]["metadata"]["name"].as_str().unwrap().to_string();
                        out.push((e["type"].as_str().unwrap().to_string(), name));
                        continue;
                    }
                    let chunk = tokio::time::timeout(Duration::from_secs(5), body.next())
                        .await
                        .unwrap_or_else(|_| panic!("watch event {} of {n} (have {out:?})", out.len() + 1))
                        .unwrap()
                        .unwrap();
                    buf.push_str(std::str::from_utf8(&chunk).unwrap());
                }
                out
            }
        }
    };
    let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter().map(|(t, n)| (t.to_string(), n.to_string())).collect()
    };
    let mut blue = open("labelSelector=team%3Dblue".into()).await;
    assert_eq!(
        blue(5).await,
        pairs(&[
            ("MODIFIED", "w-a"),
            ("DELETED", "w-b"),
            ("ADDED", "w-c"),
            ("DELETED", "w-d"),
            ("ADDED", "w-e")
        ])
    );
    let mut only_b = open("fieldSelector=metadata.name%3Dw-b".into()).await;
    assert_eq!(only_b(1).await, pairs(&[("MODIFIED", "w-b")]));
    let mut c_if_blue = open("fieldSelector=metadata.name%3Dw-c&labelSelector=team%3Dblue".into()).await;
    assert_eq!(c_if_blue(1).await, pairs(&[("ADDED", "w-c")]));

    // Live events follow, to each watch through its own selectors.
    c.merge_patch(Kind::MachineConfig, "w-b", &relabel("blue"), false)
        .await
        .unwrap();
    c.merge_patch(Kind::MachineConfig, "w-c", &relabel("red"), false)
        .await
        .unwrap();
    assert_eq!(blue(2).await, pairs(&[("ADDED", "w-b"), ("DELETED", "w-c")]));
    assert_eq!(only_b(1).await, pairs(&[("MODIFIED", "w-b")]));
    assert_eq!(c_if_blue(1).await, pairs(&[("DELETED", "w-c")]));
    s.stop().await;
}

/// The resourceVersion of an object answer.
fn rv_of(o: &Value) -> u64 {
    o["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap()
}

/// Read-your-writes under contention, as Kubernetes guarantees it (a write acknowledged is
/// returned by every later GET, or something newer: etcd's linearizable reads; a failed
/// compare in `GuaranteedUpdate`, `k8s.io/apiserver/pkg/storage/etcd3/store.go`, is judged
/// against etcd's committed head): writers doing GET then PUT with the resourceVersion just
/// read on one object, and a client whose PATCH changes nothing. Every 409 is explained by a
/// newer version the GET after it returns; every acknowledged write (a no-op's answer too) is
/// returned by the writer's next GET or something newer; every writer finishes within the
/// deadline (no livelock); and a watch started before the writes sees each acknowledged
/// write's event.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn get_put_writers_see_their_writes_and_every_conflict_is_a_readable_newer_version() {
    const WRITERS: usize = 4;
    const WRITES: usize = 15;
    let dir = tempfile::tempdir().unwrap();
    let (s, c) = start(dir.path()).await;
    // A role no pool selects: no controller touches it.
    let obj = json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": "99-rmw", "labels": {"machineconfiguration.openshift.io/role": "rmw"}},
        "spec": {"config": {"ignition": {"version": "3.2.0"}}}});
    let created = c.create(Kind::MachineConfig, &obj, None).await.unwrap();
    let start_rv = created["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let mut events = Box::pin(
        c.watch(Kind::MachineConfig, Some("99-rmw"), Some(&start_rv))
            .await
            .unwrap(),
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            let (mut acknowledged, mut conflicts) = (Vec::new(), 0usize);
            for i in 0..WRITES {
                loop {
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "writer {w} still on write {i} at the deadline ({conflicts} conflicts)"
                    );
                    let mut cur: Value = c.get(Kind::MachineConfig, "99-rmw").await.unwrap();
                    let read = rv_of(&cur);
                    cur["metadata"]["annotations"][format!("writer-{w}")] = json!(i.to_string());
                    match c.replace(Kind::MachineConfig, "99-rmw", &cur, None).await {
                        Ok(o) => {
                            let rv = rv_of(&o);
                            assert!(rv > read, "writer {w}: a change answered with rv {rv}, read {read}");
                            let after: Value = c.get(Kind::MachineConfig, "99-rmw").await.unwrap();
                            assert!(
                                rv_of(&after) >= rv,
                                "writer {w}: write {i} acknowledged at rv {rv}, the GET after it returned {}",
                                rv_of(&after)
                            );
                            acknowledged.push(rv);
                            break;
                        }
                        Err(e) if e.is_conflict() => {
                            conflicts += 1;
                            let after: Value = c.get(Kind::MachineConfig, "99-rmw").await.unwrap();
                            assert!(
                                rv_of(&after) > read,
                                "writer {w}: 409 for rv {read}, yet the GET after it returned rv {}",
                                rv_of(&after)
                            );
                        }
                        Err(e) => panic!("writer {w}: {e}"),
                    }
                }
            }
            (acknowledged, conflicts)
        }));
    }
    // A client whose patch changes nothing after its first: answered with the stored version,
    // which must be readable once answered.
    let noop = {
        let c = c.clone();
        tokio::spawn(async move {
            let patch = json!({"metadata": {"labels": {"rmw-noop": "yes"}}});
            let mut acknowledged = Vec::new();
            for _ in 0..(WRITERS * WRITES) {
                let o = c
                    .merge_patch(Kind::MachineConfig, "99-rmw", &patch, false)
                    .await
                    .unwrap();
                let after: Value = c.get(Kind::MachineConfig, "99-rmw").await.unwrap();
                assert!(
                    rv_of(&after) >= rv_of(&o),
                    "a patch answered at rv {}, the GET after it returned {}",
                    rv_of(&o),
                    rv_of(&after)
                );
                acknowledged.push(rv_of(&o));
            }
            acknowledged
        })
    };
    let mut acknowledged = std::collections::BTreeSet::new();
    let mut conflicts = 0;
    for t in tasks {
        let (rvs, n) = t.await.unwrap();
        acknowledged.extend(rvs);
        conflicts += n;
    }
    acknowledged.extend(noop.await.unwrap());
    acknowledged.remove(&rv_of(&created));
    assert!(acknowledged.len() > WRITERS * WRITES, "the writes and the first patch");
    // Every acknowledged version reaches the watch started before them, in order.
    let mut seen = Vec::new();
    while seen.last().is_none_or(|last| last < acknowledged.last().unwrap()) {
        let e = tokio::time::timeout_at(deadline, events.next())
            .await
            .unwrap_or_else(|_| panic!("the watch got {seen:?}, acknowledged {acknowledged:?}"))
            .unwrap()
            .unwrap();
        assert_eq!(e.type_, "MODIFIED");
        seen.push(rv_of(&e.object));
    }
    assert!(seen.windows(2).all(|p| p[0] < p[1]), "in order: {seen:?}");
    let missing: Vec<_> = acknowledged.iter().filter(|rv| !seen.contains(rv)).collect();
    assert!(missing.is_empty(), "acknowledged but never watched: {missing:?}");
    eprintln!("{} writes acknowledged, {conflicts} conflicts", acknowledged.len());
    s.stop().await;
}
