//! Pagination of object lists (`limit`/`continue`) over a real server on 127.0.0.1:0: pages in
//! name order with `metadata.continue` and `remainingItemCount`, every page at the first page's
//! resourceVersion (a write between pages does not show up in later pages), selectors applied
//! before the cut, Table pages, a malformed token refused with 400, a compacted one with
//! Kubernetes' 410 Expired; and the stock kubectl's `--chunk-size` printing every row once
//! (skipped, saying so, when kubectl is not on PATH).

mod common;

use common::*;
use mco::model::DEFAULT_GROUP;
use mco::server::{RunningServer, ServerConfig};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

const NAMES: [&str; 5] = ["page-a", "page-b", "page-c", "page-d", "page-e"];

async fn start(dir: &Path) -> RunningServer {
    start_server_with(ServerConfig {
        data_dir: dir.to_path_buf(),
        group: DEFAULT_GROUP.into(),
        drain_hook: None,
        ..Default::default()
    })
    .await
}

/// Nodes without role labels: no pool selects them, so no controller writes to them.
async fn create_nodes(s: &RunningServer, http: &reqwest::Client) {
    for (i, name) in NAMES.iter().enumerate() {
        let pick = if i % 2 == 0 { "yes" } else { "no" };
        let r = http
            .post(format!("{}/api/v1/nodes", s.url()))
            .json(&json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"pick": pick}}}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "create {name}: {}", r.text().await.unwrap());
    }
}

async fn get(http: &reqwest::Client, url: &str) -> (u16, Value) {
    let r = http.get(url).send().await.unwrap();
    let code = r.status().as_u16();
    (code, r.json().await.unwrap())
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn token(list: &Value) -> String {
    let t = list["metadata"]["continue"].as_str().unwrap_or("");
    // Opaque to clients; URL-safe in practice, encoded anyway as a client would.
    percent_encoding::utf8_percent_encode(t, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Walks every page of `url` (which has `limit`), returning the pages.
async fn walk(http: &reqwest::Client, url: &str) -> Vec<Value> {
    let mut pages = Vec::new();
    let (code, mut page) = get(http, url).await;
    assert_eq!(code, 200, "{page}");
    loop {
        let next = token(&page);
        pages.push(page);
        if next.is_empty() {
            return pages;
        }
        let (code, p) = get(http, &format!("{url}&continue={next}")).await;
        assert_eq!(code, 200, "{p}");
        page = p;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_walk_in_name_order_at_one_resource_version() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path()).await;
    let http = s.admin_http();
    create_nodes(&s, &http).await;
    let base = format!("{}/api/v1/nodes", s.url());

    let pages = walk(&http, &format!("{base}?limit=2")).await;
    let got: Vec<Vec<String>> = pages.iter().map(names).collect();
    assert_eq!(
        got,
        [vec!["page-a", "page-b"], vec!["page-c", "page-d"], vec!["page-e"]]
    );
    let remaining: Vec<Value> = pages
        .iter()
        .map(|p| p["metadata"]["remainingItemCount"].clone())
        .collect();
    assert_eq!(remaining, [json!(3), json!(1), Value::Null]);
    let rvs: Vec<&Value> = pages.iter().map(|p| &p["metadata"]["resourceVersion"]).collect();
    assert!(rvs.iter().all(|rv| *rv == rvs[0] && rv.is_string()), "{rvs:?}");
    assert!(pages[2]["metadata"].get("continue").is_none(), "{}", pages[2]);
    assert_eq!(pages[0]["kind"], "NodeList");

    // Without a limit, or with limit=0, the list comes whole, as before.
    for url in [base.clone(), format!("{base}?limit=0")] {
        let (_, all) = get(&http, &url).await;
        assert_eq!(names(&all), NAMES);
        assert!(all["metadata"].get("continue").is_none());
    }

    // Selectors apply before the cut: a page holds `limit` selected objects.
    let pages = walk(&http, &format!("{base}?labelSelector=pick%3Dyes&limit=2")).await;
    let got: Vec<Vec<String>> = pages.iter().map(names).collect();
    assert_eq!(got, [vec!["page-a", "page-c"], vec!["page-e"]]);
    assert_eq!(pages[0]["metadata"]["remainingItemCount"], 1);
    let pages = walk(
        &http,
        &format!("{base}?fieldSelector=metadata.name%21%3Dpage-a&limit=3"),
    )
    .await;
    let got: Vec<Vec<String>> = pages.iter().map(names).collect();
    assert_eq!(got, [vec!["page-b", "page-c", "page-d"], vec!["page-e"]]);

    // The Table pages too (kubectl's chunked `get`).
    let table = |url: String| {
        http.get(url)
            .header(
                "Accept",
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            )
            .send()
    };
    let first: Value = table(format!("{base}?limit=3")).await.unwrap().json().await.unwrap();
    assert_eq!(first["kind"], "Table");
    let rows: Vec<&str> = first["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["cells"][0].as_str().unwrap())
        .collect();
    assert_eq!(rows, ["page-a", "page-b", "page-c"]);
    assert_eq!(first["metadata"]["remainingItemCount"], 2);
    let rest: Value = table(format!("{base}?limit=3&continue={}", token(&first)))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rows: Vec<&str> = rest["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["cells"][0].as_str().unwrap())
        .collect();
    assert_eq!(rows, ["page-d", "page-e"]);
    assert_eq!(
        rest["metadata"]["resourceVersion"],
        first["metadata"]["resourceVersion"]
    );
    assert!(rest["metadata"].get("continue").is_none());

    // Every kind pages: MachineConfigs (the built-in templates and rendered configs).
    let pages = walk(
        &http,
        &format!(
            "{}/apis/machineconfiguration.openshift.io/v1/machineconfigs?limit=1",
            s.url()
        ),
    )
    .await;
    let walked: Vec<String> = pages.iter().flat_map(names).collect();
    let rv: u64 = pages[0]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let rv_text = rv.to_string();
    assert!(pages
        .iter()
        .all(|p| p["metadata"]["resourceVersion"] == rv_text.as_str()));
    let store = s.hub.store().clone();
    let then = tokio::task::spawn_blocking(move || store.state_at(rv).unwrap())
        .await
        .unwrap();
    let want: Vec<String> = then.machine_configs.keys().cloned().collect();
    assert_eq!(walked, want);
    assert!(walked.len() > 1 && walked.windows(2).all(|w| w[0] < w[1]), "{walked:?}");
    s.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_between_pages_do_not_show_up_in_later_pages() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path()).await;
    let http = s.admin_http();
    create_nodes(&s, &http).await;
    let base = format!("{}/api/v1/nodes", s.url());
    let (_, first) = get(&http, &format!("{base}?limit=2")).await;
    assert_eq!(names(&first), ["page-a", "page-b"]);
    let rv = first["metadata"]["resourceVersion"].clone();
    let c_before = s.hub.state().nodes["page-c"].metadata.resource_version.clone().unwrap();

    // Between the pages: a node created where the next page reads, one changed, one deleted.
    let r = http
        .post(&base)
        .json(&json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "page-bb"}}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let r = http
        .patch(format!("{base}/page-c"))
        .header("Content-Type", "application/merge-patch+json")
        .body(r#"{"metadata":{"labels":{"pick":"changed"}}}"#)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let r = http.delete(format!("{base}/page-e")).send().await.unwrap();
    assert!(r.status().is_success());

    let (code, second) = get(&http, &format!("{base}?limit=2&continue={}", token(&first))).await;
    assert_eq!(code, 200, "{second}");
    assert_eq!(names(&second), ["page-c", "page-d"]);
    assert_eq!(second["metadata"]["resourceVersion"], rv);
    assert_eq!(second["items"][0]["metadata"]["labels"]["pick"], "yes");
    assert_eq!(second["items"][0]["metadata"]["resourceVersion"], c_before.as_str());
    let (_, third) = get(&http, &format!("{base}?limit=2&continue={}", token(&second))).await;
    assert_eq!(names(&third), ["page-e"]);
    assert_eq!(third["metadata"]["resourceVersion"], rv);
    assert!(third["metadata"].get("continue").is_none());

    // A new list sees the present.
    let (_, now) = get(&http, &base).await;
    assert_eq!(names(&now), ["page-a", "page-b", "page-bb", "page-c", "page-d"]);
    assert_ne!(now["metadata"]["resourceVersion"], rv);
    s.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_and_compacted_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path()).await;
    let http = s.admin_http();
    create_nodes(&s, &http).await;
    let base = format!("{}/api/v1/nodes", s.url());

    for bad in ["not-a-token", "eyJ2IjoidjIifQ"] {
        let (code, status) = get(&http, &format!("{base}?limit=2&continue={bad}")).await;
        assert_eq!(code, 400, "{status}");
        assert_eq!(status["reason"], "BadRequest");
        assert!(
            status["message"]
                .as_str()
                .unwrap()
                .starts_with("invalid continue token: continue key is not valid: "),
            "{status}"
        );
    }
    let (_, first) = get(&http, &format!("{base}?limit=2")).await;
    let (code, status) = get(
        &http,
        &format!("{base}?limit=2&resourceVersion=1&continue={}", token(&first)),
    )
    .await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(
        status["message"],
        "specifying resource version is not allowed when using continue"
    );

    // The list's resourceVersion compacted away: 410 Expired with Kubernetes' message and a
    // token for the (inconsistent) remainder.
    let r = http.delete(format!("{base}/page-d")).send().await.unwrap();
    assert!(r.status().is_success());
    let store = s.hub.store().clone();
    let head = store.last_seq();
    tokio::task::spawn_blocking(move || store.compact(head + 1).unwrap())
        .await
        .unwrap();
    let (code, status) = get(&http, &format!("{base}?limit=2&continue={}", token(&first))).await;
    assert_eq!(code, 410, "{status}");
    assert_eq!(status["reason"], "Expired");
    assert_eq!(status["code"], 410);
    assert_eq!(status["message"], "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.");
    // The remainder is served from the present: its resourceVersion is the head at some moment
    // of the request (a controller may write meanwhile), never one before the compaction.
    let before = s.hub.published_seq();
    let (code, rest) = get(&http, &format!("{base}?limit=2&continue={}", token(&status))).await;
    let after = s.hub.published_seq();
    assert_eq!(code, 200, "{rest}");
    assert_eq!(names(&rest), ["page-c", "page-e"]);
    let rv: u64 = rest["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    assert!((before..=after).contains(&rv), "{rv} outside {before}..={after}");
    s.shutdown.cancel();
}

fn have_kubectl(test: &str) -> bool {
    let ok = std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIPPED {test}: kubectl is not on PATH (install kubectl to run the kubectl pagination test)");
    }
    ok
}

/// The first column of every row of kubectl's table output (header left out).
fn printed_names(out: &str) -> Vec<String> {
    out.lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_chunked_get_prints_every_row_once() {
    if !have_kubectl("kubectl_chunked_get_prints_every_row_once") {
        return;
    }
    let c = Cluster::start_tls(0, 0).await;
    let http = c.server.admin_http();
    create_nodes(&c.server, &http).await;
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = home.path().join("kubeconfig");
    let (text, _proxy) = kubeconfig_for(&c.server, &c.server.admin_token().expect("the admin token"));
    std::fs::write(&kubeconfig, text).unwrap();
    let kubectl = |args: &'static [&'static str]| {
        let mut cmd = tokio::process::Command::new("kubectl");
        cmd.args(args)
            .arg("--cache-dir")
            .arg(home.path().join("cache"))
            .env("HOME", home.path())
            .env("KUBECONFIG", &kubeconfig)
            .stdin(Stdio::null());
        async move {
            let o = tokio::time::timeout(Duration::from_secs(60), cmd.output())
                .await
                .expect("kubectl finished")
                .expect("kubectl runs");
            let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
            let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
            assert!(o.status.success(), "kubectl {args:?} failed:\n{stdout}\n{stderr}");
            (stdout, stderr)
        }
    };
    // -v=6 logs each request: the pages were asked for, and followed.
    let (out, log) = kubectl(&["get", "nodes", "--chunk-size=2", "-v=6"]).await;
    assert!(log.contains("/api/v1/nodes?limit=2\""), "{log}");
    assert_eq!(log.matches("/api/v1/nodes?continue=").count(), 2, "{log}");
    assert!(out.starts_with("NAME"), "{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with("NAME")).count(), 1, "{out}");
    assert_eq!(printed_names(&out), NAMES, "{out}");

    let (out, log) = kubectl(&["get", "mc", "--chunk-size=1", "-v=6"]).await;
    let want: Vec<String> = c.server.hub.state().machine_configs.keys().cloned().collect();
    assert!(want.len() > 2, "{want:?}");
    assert_eq!(out.lines().filter(|l| l.starts_with("NAME")).count(), 1, "{out}");
    assert_eq!(printed_names(&out), want, "{out}");
    assert_eq!(log.matches("machineconfigs?continue=").count(), want.len() - 1, "{log}");
    c.stop().await;
}
