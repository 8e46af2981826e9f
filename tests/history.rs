//! History, diff, dry run and rollback end to end: a real server, two real worker daemons.
//!
//! Three successive versions of two MachineConfigs; `mco rollback` to the first render gives
//! the identical rendered name, every node converges to it and the files on disk equal the
//! first version byte for byte; `mco history` lists the rollback's events with actor and
//! reason; `mco diff` between the renders shows exactly the changed lines, each attributed; a
//! dry run leaves the log untouched. Then the errors: unknown render, future and compacted
//! resourceVersions, a rollback that would change another pool.

mod common;

use common::*;
use mco::cli::rollback::{Options, Target};
use mco::model::{Kind, NodeAnnotations};
use serde_json::{json, Value};
use std::time::Duration;

const ROLLOUT: Duration = Duration::from_secs(90);

fn mc(name: &str, path: &str, text: &str) -> String {
    let data: String = text.bytes().map(|b| format!("%{b:02X}")).collect();
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: {name}
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.4.0
    storage:
      files:
      - path: {path}
        mode: 420
        contents:
          source: data:,{data}
"
    )
}

/// Applies both MachineConfigs at `version` through `mco apply --reason`, and waits for the
/// rollout.
async fn apply_version(c: &Cluster, version: u32, reason: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.yaml");
    let text = format!(
        "{}---\n{}",
        mc(
            "99-worker-ntp",
            "/etc/ntp.conf",
            &format!("server ntp{version}.example.com\niburst\n")
        ),
        mc("99-worker-motd", "/etc/motd", &format!("welcome, version {version}\n"))
    );
    std::fs::write(&path, text).unwrap();
    let before = c.pool("worker").spec.configuration.name;
    let client = c.client.clone().with_reason(Some(reason.to_string()));
    let (out, ok) = mco::cli::apply(&client, &[path]).await.unwrap();
    assert!(ok, "{out}");
    c.wait_rolled_out("worker", &before, ROLLOUT).await
}

fn on_disk(c: &Cluster, node: &str, path: &str) -> String {
    std::fs::read_to_string(c.root(node).join(path.trim_start_matches('/'))).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_returns_to_the_exact_render_and_history_tells_the_story() {
    let c = Cluster::start(0, 2).await;
    let r1 = apply_version(&c, 1, "first NTP server").await;
    let files_v1: Vec<(String, String)> = ["/etc/ntp.conf", "/etc/motd"]
        .iter()
        .map(|p| (p.to_string(), on_disk(&c, "worker-0", p)))
        .collect();
    let r2 = apply_version(&c, 2, "second NTP server").await;
    let r3 = apply_version(&c, 3, "third NTP server").await;
    assert!(r1 != r2 && r2 != r3 && r1 != r3);

    // The diff between the first and third renders: exactly the changed lines, attributed.
    let (text, differs) = mco::cli::diff::diff(&c.client, &r1, &r3, None, None, None)
        .await
        .unwrap();
    assert!(differs);
    assert!(text.contains("file /etc/ntp.conf: changed (contents)"), "{text}");
    assert!(
        text.contains("-server ntp1.example.com\n+server ntp3.example.com\n"),
        "{text}"
    );
    assert!(
        !text.contains("-iburst"),
        "an unchanged line is context, not a change:\n{text}"
    );
    assert!(
        text.contains("before: 99-worker-ntp, last changed by admin at"),
        "{text}"
    );
    assert!(text.contains("MachineConfigCreated): \"first NTP server\""), "{text}");
    assert!(text.contains("MachineConfigUpdated): \"third NTP server\""), "{text}");
    assert!(text.contains("-welcome, version 1\n+welcome, version 3\n"), "{text}");
    let pool_diff = mco::cli::diff::diff(
        &c.client,
        "mcp",
        "worker",
        Some("rv:1"),
        None,
        Some(mco::cli::OutputFormat::Json),
    )
    .await;
    assert!(pool_diff.is_err(), "the pool had no render at rv 1");

    // A dry run shows the impact and leaves the log untouched.
    let seq = c.server.hub.published_seq();
    let preview = mco::cli::rollback::rollback(
        &c.client,
        "mcp",
        "worker",
        Target::Render(r1.clone()),
        Options {
            dry_run: true,
            force: false,
        },
    )
    .await
    .unwrap();
    assert!(preview.contains("revert machineconfig/99-worker-ntp"), "{preview}");
    assert!(
        preview.contains(&format!("the restored sources render {r1}")),
        "{preview}"
    );
    assert!(
        preview.contains("node worker-0 (drain and reboot): file /etc/motd, file /etc/ntp.conf"),
        "{preview}"
    );
    assert!(preview.contains("wave 1 (maxUnavailable 1): worker-0"), "{preview}");
    assert!(preview.contains("dry run: nothing was changed"), "{preview}");
    let by_user: Vec<_> = c
        .server
        .hub
        .store()
        .read_range(seq, c.server.hub.published_seq())
        .map(|e| e.unwrap())
        .filter(|e| !e.actor.starts_with("controller:") && !e.actor.starts_with("system:node:"))
        .collect();
    assert!(by_user.is_empty(), "a dry run appends nothing: {by_user:?}");

    // The rollback: the same rendered name, every node on it, the files of version 1.
    let client = c.client.clone().with_reason(Some("v3 broke time sync".into()));
    let out = mco::cli::rollback::rollback(&client, "mcp", "worker", Target::Render(r1.clone()), Options::default())
        .await
        .unwrap();
    assert!(out.contains(&format!("pool worker targets {r1} again")), "{out}");
    let back = c.wait_rolled_out("worker", &r3, ROLLOUT).await;
    assert_eq!(
        back, r1,
        "content addressing: the restored sources render the first name"
    );
    for node in ["worker-0", "worker-1"] {
        assert_eq!(
            NodeAnnotations::read(&c.server.hub.state().nodes[node], &c.keys()).current_config,
            r1
        );
        for (path, bytes) in &files_v1 {
            assert_eq!(&on_disk(&c, node, path), bytes, "{node}:{path}");
        }
    }

    // The history tells the story: the rollback's events with actor and reason.
    let args = mco::cli::history::HistoryArgs {
        kind: Some("mc".into()),
        name: Some("99-worker-ntp".into()),
        output: Some(mco::cli::OutputFormat::Wide),
        ..Default::default()
    };
    let history = mco::cli::history::history(&c.client, &args).await.unwrap();
    let lines: Vec<&str> = history.lines().collect();
    assert_eq!(lines.len(), 5, "header, three versions, the rollback:\n{history}");
    assert!(
        lines[1].contains("MachineConfigCreated") && lines[1].ends_with("first NTP server"),
        "{history}"
    );
    assert!(
        lines[4].contains(" admin ") && lines[4].contains("generation 4") && lines[4].ends_with("v3 broke time sync"),
        "{history}"
    );
    // A rollback is reversible: undo goes back to the third render.
    let undo = mco::cli::rollback::rollback(
        &c.client,
        "mcp",
        "worker",
        Target::Previous,
        Options {
            dry_run: true,
            force: false,
        },
    )
    .await
    .unwrap();
    assert!(undo.contains(&format!("-> {r3}")), "{undo}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_errors_are_kubernetes_errors() {
    let c = Cluster::start(0, 0).await;
    let url = c.server.url();
    let api = format!("{url}/apis/history.mco.dev/v1");
    let http = c.http();
    let post = |path: &str, body: Value| http.post(format!("{api}/{path}")).json(&body).send();

    // An unknown render.
    let r = post("rollbacks", json!({"pool": "worker", "to": "rendered-worker-0000"}))
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let s: Value = r.json().await.unwrap();
    assert!(s["message"].as_str().unwrap().contains("is not in the history"), "{s}");

    // A rollback that would change another pool is refused without force.
    c.apply(&[examples().join("infra-pool.yaml")]).await;
    let r0 = c.pool("worker").spec.configuration.name;
    c.apply(&[examples().join("chrony.yaml")]).await;
    c.wait_for("worker re-rendered", ROLLOUT, |s| {
        s.pools["worker"].spec.configuration.name != r0
    })
    .await;
    let r = post("rollbacks", json!({"pool": "worker", "to": r0})).await.unwrap();
    let code = r.status();
    let s: Value = r.json().await.unwrap();
    assert_eq!(code, 409, "{s}");
    let m = s["message"].as_str().unwrap();
    assert!(m.contains("also changes pool(s) infra"), "{m}");
    let seq = c.server.hub.published_seq();
    let r = post("rollbacks", json!({"pool": "worker", "to": r0, "dryRun": true}))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let plan: Value = r.json().await.unwrap();
    assert_eq!(plan["otherPools"][0][0], "infra");
    assert!(plan["warning"].is_string());
    // Controllers may still be settling: the dry run itself appended nothing.
    let by_request = c
        .server
        .hub
        .store()
        .read_range(seq, c.server.hub.published_seq())
        .filter(|e| !e.as_ref().unwrap().actor.starts_with("controller:"))
        .count();
    assert_eq!(by_request, 0);
    let r = post("rollbacks", json!({"pool": "worker", "to": r0, "force": true}))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    c.wait_for("worker back on its first render", ROLLOUT, |s| {
        s.pools["worker"].spec.configuration.name == r0
    })
    .await;

    // A resourceVersion from the future, and one before the retained history.
    let pools = format!("{url}/apis/machineconfiguration.openshift.io/v1/machineconfigpools");
    let future = c.server.hub.published_seq() + 1000;
    let r = http
        .get(format!("{pools}?resourceVersion={future}&resourceVersionMatch=Exact"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 504);
    let r = post("store/compactions", json!({"before": "rv:10"})).await.unwrap();
    assert_eq!(r.status(), 200);
    let report: Value = r.json().await.unwrap();
    assert_eq!(report["oldestResourceVersion"], 9);
    for path in [
        format!("{pools}?resourceVersion=5&resourceVersionMatch=Exact"),
        format!("{pools}/worker?asOf=rv:3"),
    ] {
        let r = http.get(&path).send().await.unwrap();
        assert_eq!(r.status(), 410, "{path}");
        let s: Value = r.json().await.unwrap();
        assert_eq!(s["reason"], "Expired");
    }
    let r = http
        .get(format!("{pools}?resourceVersion=9&resourceVersionMatch=Exact"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "the cut itself is still readable");
    let stats = mco::cli::store::stats(&c.client).await.unwrap();
    assert!(stats.contains("oldest readable rv:  9"), "{stats}");

    // A watch from before the retained history ends with Kubernetes' ERROR event (410).
    let body = http
        .get(format!("{pools}?watch=true&resourceVersion=5"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let first: Value = serde_json::from_str(body.lines().next().unwrap()).unwrap();
    assert_eq!(
        (first["type"].as_str(), first["object"]["code"].as_i64()),
        (Some("ERROR"), Some(410)),
        "{body}"
    );

    // The pool's story keeps what the forced rollback deleted (99-worker-chrony is gone now).
    let story = mco::cli::history::history(
        &c.client,
        &mco::cli::history::HistoryArgs {
            kind: Some("mcp".into()),
            name: Some("worker".into()),
            event_type: Some("MachineConfigDeleted".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(story.contains("machineconfig/99-worker-chrony"), "{story}");

    // Compacting past the end is refused; compacting everything keeps the way back: the render
    // current at the cut is still a rollback target after the next change.
    let r = post("store/compactions", json!({"before": "rv:999999"})).await.unwrap();
    assert_eq!(r.status(), 400);
    let everything = c.server.hub.published_seq() + 1;
    let r = post("store/compactions", json!({"before": format!("rv:{everything}")}))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let at_cut = c.pool("worker").spec.configuration.name;
    c.apply(&[examples().join("ssh-key.yaml")]).await;
    c.wait_for("worker re-rendered after the cut", ROLLOUT, |s| {
        s.pools["worker"].spec.configuration.name != at_cut
    })
    .await;
    let undo = mco::cli::rollback::rollback(
        &c.client,
        "mcp",
        "worker",
        Target::Previous,
        Options {
            dry_run: true,
            force: true,
        },
    )
    .await
    .unwrap();
    assert!(
        undo.contains(&format!("-> {at_cut}")) && undo.contains("delete machineconfig/99-worker-ssh"),
        "{undo}"
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_as_of_a_past_moment() {
    let c = Cluster::start(0, 1).await;
    let r0 = c.pool("worker").spec.configuration.name;
    let at = c.server.hub.published_seq();
    let when = jiff::Timestamp::now().to_string();
    tokio::time::sleep(Duration::from_millis(5)).await;
    c.apply(&[examples().join("chrony.yaml")]).await;
    c.wait_rolled_out("worker", &r0, ROLLOUT).await;
    for point in [format!("rv:{at}"), when] {
        let pool = c
            .client
            .get_at(Kind::MachineConfigPool, "worker", Some(&point))
            .await
            .unwrap();
        assert_eq!(pool["spec"]["configuration"]["name"], r0.as_str(), "{point}");
        let nodes = c.client.list_at(Kind::Node, Some(&point)).await.unwrap();
        let node = &nodes["items"][0]["metadata"]["annotations"];
        assert_eq!(node[format!("{GROUP}/currentConfig")], r0.as_str(), "{point}");
        let listed = mco::cli::get(&c.client, "mc", None, None, Some(&point)).await.unwrap();
        assert!(!listed.contains("99-worker-chrony"), "{listed}");
    }
    let now = mco::cli::get(&c.client, "mc", None, None, None).await.unwrap();
    assert!(now.contains("99-worker-chrony"));
    c.stop().await;
}

/// `kubectl get events` (a Table, in chunks of `limit` that it continues) and a plain list
/// show the same window: the newest 500 entries, whatever the chunk size. A Table page carries
/// `metadata.continue` when more remain (kubectl stopped after its first chunk without it and
/// showed the oldest entries).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_events_pages_cover_the_newest_window_whatever_the_chunk_size() {
    let dir = tempfile::tempdir().unwrap();
    let s = mco::server::start(mco::server::ServerConfig {
        data_dir: dir.path().to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    })
    .await
    .expect("server starts");
    let http = s.admin_http();
    // A MachineConfig no pool selects (this server has none): its writes are the only ones.
    let mcs = format!("{}/apis/machineconfiguration.openshift.io/v1/machineconfigs", s.url());
    let mc = json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
                    "metadata": {"name": "99-paged"}, "spec": {"config": {"ignition": {"version": "3.4.0"}}}});
    let r = http.post(&mcs).json(&mc).send().await.unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    for i in 0..600 {
        let r = http
            .patch(format!("{mcs}/99-paged"))
            .header("Content-Type", "application/merge-patch+json")
            .body(json!({"metadata": {"annotations": {"example.com/n": i.to_string()}}}).to_string())
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.status());
    }
    // The server's own controllers may write while the test reads (the default pools render
    // after it starts), so each read is judged against the resourceVersion it answered at: the
    // window is the 500 entries up to it, oldest first, none missing.
    let rvs = |items: &[Value]| -> Vec<u64> {
        items
            .iter()
            .map(|e| e["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap())
            .collect()
    };
    let window_at = |at: u64| -> Vec<u64> { (at - 499..=at).collect() };
    // What a client asking for everything gets: the newest 500.
    let all = json_of(http.get(format!("{}/api/v1/events", s.url()))).await;
    let at: u64 = all["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        rvs(all["items"].as_array().unwrap()),
        window_at(at),
        "{}",
        all["metadata"]
    );
    // Every derived Event lives in `default`: another namespace has none, by URL or selector.
    let count = |v: &Value| v["items"].as_array().map_or(usize::MAX, Vec::len);
    for (path, want) in [
        ("/api/v1/namespaces/default/events", 500),
        ("/api/v1/namespaces/kube-system/events", 0),
        ("/api/v1/events?fieldSelector=metadata.namespace%3Ddefault", 500),
        ("/api/v1/events?fieldSelector=metadata.namespace%3Dkube-system", 0),
        ("/api/v1/events?fieldSelector=involvedObject.namespace%3Dkube-system", 0),
        ("/api/v1/events?fieldSelector=metadata.name%3Dnone", 0),
    ] {
        let list = json_of(http.get(format!("{}{path}", s.url()))).await;
        assert_eq!(count(&list), want, "{path}: {}", list["metadata"]);
    }
    let bad = http
        .get(format!("{}/api/v1/events?timeoutSeconds=abc", s.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status().as_u16(), 400, "timeoutSeconds is checked on lists too");
    // As kubectl asks: Tables, in chunks, following `continue`.
    for chunk in [500usize, 100, 7] {
        let mut rows = Vec::new();
        let mut token: Option<String> = None;
        let mut pages = 0;
        let mut first_at = None;
        loop {
            let mut url = format!("{}/api/v1/events?limit={chunk}&includeObject=Object", s.url());
            if let Some(t) = &token {
                url.push_str(&format!("&continue={t}"));
            }
            let as_table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
            let table = json_of(http.get(url).header("Accept", as_table)).await;
            assert_eq!(table["kind"], "Table", "{table}");
            first_at.get_or_insert_with(|| {
                table["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .parse::<u64>()
                    .unwrap()
            });
            pages += 1;
            rows.extend(table["rows"].as_array().unwrap().iter().map(|r| r["object"].clone()));
            match table["metadata"]["continue"].as_str() {
                Some(t) if !t.is_empty() => token = Some(t.to_string()),
                _ => break,
            }
            assert!(pages < 200, "no end to the pages");
        }
        // The window of the first page, then whatever was written while kubectl paged.
        let at = first_at.unwrap();
        let got = rvs(&rows);
        let newer = got.iter().filter(|rv| **rv > at).count();
        assert_eq!(got[..got.len() - newer], window_at(at)[..], "chunk {chunk}");
        assert_eq!(
            got,
            (at - 499..at - 499 + got.len() as u64).collect::<Vec<_>>(),
            "chunk {chunk}: contiguous"
        );
        assert_eq!(
            pages,
            got.len().div_ceil(chunk),
            "chunk {chunk}: full pages but the last"
        );
    }
    s.stop().await;
}

/// `?order=newest` (the dashboard's history view, newest first): the list reads from the head
/// down, each page's `continue` ends the next page below it, the pages together are the log
/// backwards with nothing lost or repeated, whatever the filter (a full scan, one object's
/// index, a pool's story); `resourceVersion` of the first page is the head (where a watch of
/// new events starts: that of its newest event); an unknown order is a 400 naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_lists_newest_first_in_pages() {
    let c = Cluster::start(0, 0).await;
    c.apply(&[examples().join("chrony.yaml"), examples().join("infra-pool.yaml")])
        .await;
    let url = c.server.url();
    let http = c.http();
    let list = |q: String| {
        let http = http.clone();
        let url = url.clone();
        async move { json_of(http.get(format!("{url}/apis/history.mco.dev/v1/events?{q}"))).await }
    };
    let seqs = |l: &Value| -> Vec<u64> {
        l["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["metadata"]["name"].as_str().unwrap().parse().unwrap())
            .collect()
    };
    // Unbounded, the first page starts at the head: its first entry is the log's newest event,
    // and its resourceVersion that event's.
    let head = list("order=newest&limit=1".into()).await;
    assert_eq!(
        head["items"][0]["metadata"]["name"], head["metadata"]["resourceVersion"],
        "{head}"
    );
    // Up to a fixed head (the controllers may still be writing), the pages newest first are the
    // oldest-first list reversed.
    let until = head["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    for selector in ["", "object.kind=MachineConfigPool,object.name=worker", "pool=worker"] {
        let all = list(format!("fieldSelector={selector}&until=rv:{until}&limit=10000")).await;
        let mut oldest_first = seqs(&all);
        assert!(oldest_first.len() > 3, "{selector}: {all}");
        oldest_first.reverse();
        let mut got = Vec::new();
        let mut cont = String::new();
        loop {
            let page = list(format!(
                "fieldSelector={selector}&until=rv:{until}&order=newest&limit=3&continue={cont}"
            ))
            .await;
            let s = seqs(&page);
            assert!(s.len() <= 3, "{selector}: {page}");
            got.extend(s);
            match page["metadata"]["continue"].as_str() {
                Some(t) => cont = t.to_string(),
                None => break,
            }
        }
        assert_eq!(got, oldest_first, "{selector}: the pages newest first");
    }
    let r = http
        .get(format!("{url}/apis/history.mco.dev/v1/events?order=sideways"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let s: Value = r.json().await.unwrap();
    assert!(
        s["message"].as_str().unwrap().contains("invalid order \"sideways\""),
        "{s}"
    );
    c.stop().await;
}
