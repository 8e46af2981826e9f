//! Browser tests of the dashboard (`web/`, served at `/ui/`): Debian's chromium, headless,
//! driven through chromedriver (started here on a free port) with fantoccini, against a real
//! server and real daemons. `dashboard_in_a_browser` uses one cluster and one browser for every
//! check, in the order a user would go: the page's own rules against MCO's; every view loads
//! without console errors; pause and resume with the keyboard, after a confirmation; applying
//! MachineConfigs moves the pool's progress bar to done without a reload; a gzip file shows
//! decompressed and a render attributed; a drifted file turns the node red with its path; the
//! diff view shows the change attributed; a rollback through the preview and the confirmation
//! returns the pool to the earlier render; the time slider shows the earlier config, and a
//! deleted MachineConfig as it was. Along the way, the trial's defects: URLs parsed from the raw
//! hash and built encoded (`+01:00` offsets, `&` and `+` in values), malformed URLs, trailing
//! slashes, unknown objects without actions, conditions drawn by their meaning, CONFIG from
//! `.status.configuration.name`, the connection indicator following the view's own watches, a
//! drifted node listed as degraded (not updating), a stale rollback preview dropped, a rollback
//! that changes nothing not offered, history pages as URLs, the focus on navigation only, the
//! time slider before the first event and at the oldest readable moment, the rollback page
//! with no prior render left; then (issue 29) the YAML and JSON views parsed back, the
//! Machine Config Server view, the pool's last diff, the rollout timeline of a past rollout,
//! every view at 390 px and the AA contrast of every text in both themes; then the second
//! trial's defects: the sign-in help naming `DATA_DIR/admin.token` and `MCO_TOKEN_FILE`, the
//! nodes view's sort and filters kept through a reload, a cordoned mark for every cordon the
//! history records in the rollout timeline, its marks apart and its lanes whole at 1400 and
//! 390 px; the time slider's Page Up stopping at the newest event and `rv=0` drawn as the
//! empty fleet (`time_slider_keeps_focus_one_event_per_arrow`), an action's error undimmed in
//! a stale view (`stale_views_are_dimmed_and_action_errors_stay`).
//! `live_views_reconnect_and_resume` restarts the server under an open page;
//! `a_token_link_in_an_open_tab_is_taken_and_never_shown` (issue 23 item 4) and a reader's
//! views without actions; `stale_views_are_dimmed_and_action_errors_stay`;
//! `time_slider_keeps_focus_one_event_per_arrow` and the loading states;
//! `ten_thousand_nodes_sorted_and_filtered` (a real server's 10,000 nodes, a node's older
//! timeline, the pools sorted and filtered); `dashboard_files_are_served` checks the HTTP
//! answers without a browser.
//!
//! Without chromium or chromedriver the browser tests say `SKIPPED` and why on the terminal
//! (even without `--nocapture`) and pass, except with `CI=true`, where they fail (`.ci/run`
//! installs both). A failing check saves a screenshot under `target/ui-screenshots/`. With
//! `MCO_UI_SCREENSHOTS=DIR` the main views are also saved there (the README's pictures).

mod common;

use common::Cluster;
use fantoccini::{Client as Browser, ClientBuilder, Locator};
use futures_util::FutureExt;
use serde_json::{json, Value};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(60);
/// The WebDriver key code of Enter.
const ENTER: &str = "\u{E007}";

fn find_program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    names
        .iter()
        .find_map(|n| std::env::split_paths(&path).map(|d| d.join(n)).find(|p| p.is_file()))
}

/// chromedriver on a free loopback port, killed when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start_driver(chromedriver: &Path) -> Driver {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(chromedriver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let url = format!("http://127.0.0.1:{port}");
    let driver = Driver { child, url };
    let http = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(r) = http.get(format!("{}/status", driver.url)).send().await {
            if r.status().is_success() {
                return driver;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "chromedriver did not answer /status within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn start_browser(driver: &Driver, chromium: &Path) -> Browser {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1400,1000", "--no-first-run", "--disable-extensions"],
        }),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .expect("a chromium session starts")
}

/// Evaluates `script` (a function body) in the page.
async fn js(b: &Browser, script: &str) -> Value {
    b.execute(script, vec![]).await.expect("script runs")
}

/// Waits until `script` returns a truthy value, panicking with `what` and the page's text.
async fn wait_js(b: &Browser, what: &str, script: &str) -> Value {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let v = js(b, script).await;
        if !(v.is_null() || v == json!(false) || v == json!("") || v == json!(0)) {
            return v;
        }
        if tokio::time::Instant::now() >= deadline {
            let text = js(b, "return document.getElementById('main').innerText").await;
            panic!(
                "timed out waiting for {what}; the page shows:\n{}",
                text.as_str().unwrap_or("")
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Navigates within the page (hash change: no reload) and waits for `ready`.
async fn view(b: &Browser, hash: &str, ready: &str) {
    js(b, &format!("location.hash = {}; return true", json!(hash))).await;
    wait_js(b, &format!("view {hash}"), ready).await;
}

/// The console errors and uncaught exceptions the page collected.
async fn errors(b: &Browser) -> Vec<String> {
    serde_json::from_value(js(b, "return window.__errors || []").await).unwrap_or_default()
}

async fn save_screenshot(b: &Browser, dir: &Path, name: &str) {
    std::fs::create_dir_all(dir).unwrap();
    if let Ok(png) = b.screenshot().await {
        let _ = std::fs::write(dir.join(format!("{name}.png")), png);
    }
}

/// A node's MCO state annotation.
fn node_state(c: &Cluster, node: &str) -> String {
    c.annotations(node).state
}

/// chromedriver and a headless chromium session, or `None` (printing why) without them.
async fn browser(test: &str) -> Option<(Driver, Browser)> {
    let (Some(chromium), Some(chromedriver)) = (
        find_program(&["chromium", "chromium-browser"]),
        find_program(&["chromedriver"]),
    ) else {
        let why = format!(
            "{test}: chromium and chromedriver are not both on PATH \
             (apt-get install chromium chromium-driver; .ci/run does this)"
        );
        // In CI (`CI=true`, as CI services set it) a browser test that cannot run is a failure.
        assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and {why}");
        // Written past libtest's capture (which takes only `print!`/`eprint!`), so that a skip is
        // seen without `--nocapture`.
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "SKIPPED {why}");
        return None;
    };
    let driver = start_driver(&chromedriver).await;
    let b = start_browser(&driver, &chromium).await;
    Some((driver, b))
}

/// Runs `checks`; when they fail, saves a screenshot to `target/ui-screenshots/TEST.png`
/// before failing the test.
async fn run(test: &str, b: &Browser, checks: impl std::future::Future<Output = ()>) {
    let outcome = AssertUnwindSafe(checks).catch_unwind().await;
    if let Err(p) = outcome {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ui-screenshots");
        save_screenshot(b, &dir, test).await;
        eprintln!("screenshot saved to {}", dir.join(format!("{test}.png")).display());
        std::panic::resume_unwind(p);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dashboard_in_a_browser() {
    let Some((driver, b)) = browser("dashboard_in_a_browser").await else {
        return;
    };
    let c = Cluster::start(1, 2).await;
    run("dashboard_in_a_browser", &b, checks(&b, &c)).await;
    let _ = b.close().await;
    drop(driver);
    c.stop().await;
}

/// The server goes away under an open page: the page says it is reconnecting, then resumes
/// its watches from the last resourceVersion it saw and shows what changed meanwhile; the
/// history's head (newest first) follows the log, new events on top; a resume from before the retained history (410)
/// lists again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn live_views_reconnect_and_resume() {
    let Some((driver, b)) = browser("live_views_reconnect_and_resume").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = |listen| mco::server::ServerConfig {
        data_dir: dir.path().to_path_buf(),
        listen,
        group: common::GROUP.into(),
        drain_hook: None,
        ..Default::default()
    };
    let server = mco::server::start(config("127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    let addr = server.addr;
    run("live_views_reconnect_and_resume", &b, async {
        let token = server.admin_token().expect("the admin token");
        b.goto(&format!("http://{addr}/ui/#token={token}&/pools")).await.unwrap();
        wait_js(&b, "the pools, live", "return document.querySelector('#pools tr[data-name=worker]') && document.getElementById('conn').dataset.state === 'live'").await;
        server.stop().await;
        wait_js(&b, "the reconnecting state", "const c = document.getElementById('conn'); return c.dataset.state === 'reconnecting' && c.textContent.includes('reconnecting')").await;
        let server = restart(|| config(addr)).await;
        let client = server.admin_client("test");
        let pool = json!({
            "apiVersion": format!("{}/v1", common::GROUP), "kind": "MachineConfigPool",
            "metadata": {"name": "infra"},
            "spec": {
                "machineConfigSelector": {"matchExpressions": [{"key": format!("{}/role", common::GROUP), "operator": "In", "values": ["worker", "infra"]}]},
                "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/infra": ""}},
            },
        });
        client.create(mco::model::Kind::MachineConfigPool, &pool, None).await.expect("infra is created");
        wait_js(&b, "the pool created after the restart, live", "return document.querySelector('#pools tr[data-name=infra]') && document.getElementById('conn').dataset.state === 'live'").await;

        // The history's head (its first page, newest first) follows the log: a new event is
        // its first row.
        view(&b, "#/history?kind=MachineConfigPool&name=gpu", "const l = document.getElementById('history-live'); return l && !l.hidden").await;
        let mut gpu = pool.clone();
        gpu["metadata"]["name"] = json!("gpu");
        client.create(mco::model::Kind::MachineConfigPool, &gpu, None).await.expect("gpu is created");
        wait_js(&b, "the new event in the history", "const rows = [...document.querySelectorAll('#history tbody tr')]; const rv = rows.map((r) => Number(r.dataset.rv)); \
            return rows.some(r => r.innerText.includes('PoolCreated') && r.innerText.includes('machineconfigpool/gpu')) \
              && rv.every((v, i) => i === 0 || v < rv[i - 1])").await;

        // Away past the retained history: meanwhile another server on the same data dir
        // creates a pool and compacts the log past what the page saw. The resumed watch is
        // answered 410 Expired, and the page lists again.
        view(&b, "#/pools", "return document.querySelector('#pools tr[data-name=gpu]') && document.getElementById('conn').dataset.state === 'live'").await;
        server.stop().await;
        wait_js(&b, "the reconnecting state", "return document.getElementById('conn').dataset.state === 'reconnecting'").await;
        let elsewhere = mco::server::start(config("127.0.0.1:0".parse().unwrap())).await.unwrap();
        let client = elsewhere.admin_client("test");
        let mut edge = pool.clone();
        edge["metadata"]["name"] = json!("edge");
        client.create(mco::model::Kind::MachineConfigPool, &edge, None).await.expect("edge is created");
        let newest = elsewhere.hub.published_seq();
        let _: Value = client
            .post_path("/apis/history.mco.dev/v1/store/compactions", &json!({"before": format!("rv:{newest}")}))
            .await
            .expect("the log is compacted");
        elsewhere.stop().await;
        let server = restart(|| config(addr)).await;
        wait_js(&b, "the pool created while away, after a relist", "return document.querySelector('#pools tr[data-name=edge]') && document.getElementById('conn').dataset.state === 'live'").await;
        // After the compaction: the time slider's oldest moment says so (its event is gone, no
        // request for it), and the rollback page says no prior render remains.
        let stats: Value = server.admin_http().get(format!("http://{addr}/apis/history.mco.dev/v1/store/stats")).send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let oldest = stats["oldestResourceVersion"].as_u64().unwrap();
        assert!(oldest > 0, "{stats}");
        view(&b, &format!("#/at?rv={oldest}"), "const m = document.getElementById('past-moment'); return m && m.textContent.includes('the oldest readable moment')").await;
        // Once worker targets its render (the restarted controllers may render it anew), it has
        // no prior render: the compaction removed the older ones.
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let p: Value = server.admin_http().get(format!("http://{addr}/apis/{}/v1/machineconfigpools/worker", common::GROUP)).send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if p["spec"]["configuration"]["name"].as_str().is_some_and(|n| !n.is_empty()) {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "worker has no target: {p}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        view(&b, "#/rollback/worker", "const n = document.getElementById('rb-none'); return n && n.textContent.includes('No prior render') && document.getElementById('rb-preview').disabled").await;
        assert_eq!(errors(&b).await, Vec::<String>::new(), "console errors");
        server.stop().await;
    })
    .await;
    let _ = b.close().await;
    drop(driver);
}

/// A new token of `kind` (`reader`, `admin`), as `mco token create` asks for one.
async fn new_token(server: &mco::server::RunningServer, kind: &str) -> String {
    let t: Value = server
        .admin_client("test")
        .post_path("/apis/auth.mco.dev/v1/tokens", &json!({"spec": {"kind": kind}}))
        .await
        .expect("a token is created");
    t["status"]["token"].as_str().expect("the token").to_string()
}

/// Issue 23 item 4: no secret is ever rendered. A `#token=` link opened in a tab that already
/// shows the dashboard (a hash change, no reload) is taken, not drawn as a view's name: the new
/// token is used (the header names its user), and no token is left in the page's HTML, its
/// title, the address bar, the tab's history or its console. A refused token's sign-in form
/// takes a pasted one the same way; a mistyped link's token is not echoed by "Not found".
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_token_link_in_an_open_tab_is_taken_and_never_shown() {
    let Some((driver, b)) = browser("a_token_link_in_an_open_tab_is_taken_and_never_shown").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = common::start_server(dir.path()).await;
    let addr = server.addr;
    run("a_token_link_in_an_open_tab_is_taken_and_never_shown", &b, async {
        let admin = server.admin_token().expect("the admin token");
        let reader = new_token(&server, "reader").await;
        // Nothing of either token anywhere the page shows or records.
        let leaks = |tokens: &[&str]| {
            format!(
                "const t = {}; const places = {{ html: document.documentElement.outerHTML, title: document.title, \
                   href: location.href, console: (window.__errors || []).join('\\n') }}; \
                 return Object.entries(places).filter(([, v]) => t.some((x) => v.includes(x))).map(([k]) => k)",
                json!(tokens)
            )
        };
        b.goto(&format!("http://{addr}/ui/#token={admin}&/nodes")).await.unwrap();
        wait_js(&b, "the nodes view as admin", "return location.hash === '#/nodes' && document.getElementById('whoami').textContent === 'as admin' \
            && document.querySelector('main h1') && document.querySelector('main h1').textContent === 'Nodes'").await;
        js(&b, "window.__noReload = 1; return true").await;
        let before = js(&b, "return history.length").await;

        // The reader's link, opened in this tab: a hash change.
        b.goto(&format!("http://{addr}/ui/#token={reader}&/pools")).await.unwrap();
        wait_js(&b, "the pools as reader", "return location.hash === '#/pools' && document.getElementById('whoami').textContent === 'as reader' \
            && document.querySelector('#pools tr[data-name=worker]') && document.getElementById('conn').dataset.state === 'live'").await;
        assert_eq!(js(&b, "return window.__noReload").await, json!(1), "the link reloaded the page: no hash change was tested");
        assert_eq!(js(&b, &format!("return sessionStorage.getItem('mco.token') === {}", json!(reader))).await, json!(true));
        assert_eq!(js(&b, &leaks(&[&admin, &reader])).await, json!([]), "where a token shows");
        assert!(!js(&b, "return document.getElementById('main').innerText").await.as_str().unwrap().contains("No view"));
        // The history: one new entry, holding no token, backwards and forwards.
        assert_eq!(js(&b, "return history.length").await, json!(before.as_u64().unwrap() + 1));
        js(&b, "history.back(); return true").await;
        wait_js(&b, "back at the nodes", "return location.hash === '#/nodes' && document.querySelector('main h1').textContent === 'Nodes'").await;
        assert_eq!(js(&b, &leaks(&[&admin, &reader])).await, json!([]), "where a token shows, one entry back");
        js(&b, "history.forward(); return true").await;
        wait_js(&b, "forward at the pools", "return location.hash === '#/pools' && document.querySelector('#pools tr[data-name=worker]')").await;
        assert_eq!(js(&b, &leaks(&[&admin, &reader])).await, json!([]), "where a token shows, forward again");
        // Issue 29 item 4: a reader is offered no Pause and no Roll back (a
        // SelfSubjectAccessReview each), and the rollback page says it may not, with no Preview.
        view(&b, "#/pool/worker", "const a = document.getElementById('pool-actions'); return a && a.dataset.perms === 'ready' && document.getElementById('read-only')").await;
        assert_eq!(
            js(&b, "return !document.getElementById('pause') && ![...document.querySelectorAll('main a, main button')].some((a) => /Roll back|Pause|Resume/.test(a.textContent))").await,
            json!(true),
            "a reader is offered an action"
        );
        view(&b, "#/rollback/worker", "return document.getElementById('rb-forbidden')").await;
        assert_eq!(js(&b, "return !document.getElementById('rb-preview')").await, json!(true), "a reader is offered Preview");
        view(&b, "#/pools", "return document.querySelector('#pools tr[data-name=worker]') && document.getElementById('conn').dataset.state === 'live'").await;

        // A link whose token the server refuses: the sign-in form, which takes a pasted token.
        let wrong = "mco_not-a-token-of-this-server";
        // Opened in this tab (no reload): the header says the token was refused and drops the
        // reader's identity; nothing claims to be reconnecting (a 401 is not a dropped stream).
        js(&b, &format!("location.hash = '#token={wrong}&/pools'; return true")).await;
        let refused = wait_js(&b, "the refused token said so", "const c = document.getElementById('conn'); \
            return document.querySelector('#signin input[type=password]') && c.dataset.state === 'refused' \
              && document.getElementById('whoami').textContent === 'not signed in' \
              && { conn: c.textContent, note: document.getElementById('stale-note').textContent, text: document.body.innerText }").await;
        assert!(refused["conn"].as_str().unwrap().contains("token refused"), "{refused}");
        assert!(!refused["text"].as_str().unwrap().contains("reconnecting"), "a refused token is called reconnecting: {refused}");
        let note = refused["note"].as_str().unwrap();
        assert!(note.is_empty() || note.contains("refused the token"), "{refused}");
        b.goto(&format!("http://{addr}/ui/#token={wrong}&/pools")).await.unwrap();
        wait_js(&b, "the sign-in form", "return document.querySelector('#signin input[type=password]')").await;
        assert_eq!(js(&b, &leaks(&[wrong, &admin, &reader])).await, json!([]), "where a token shows at the sign-in");
        let input = b.find(Locator::Css("#signin input[type=password]")).await.unwrap();
        input.send_keys(&admin).await.unwrap();
        input.send_keys(ENTER).await.unwrap();
        wait_js(&b, "the pools as admin again", "return !document.getElementById('signin') && document.getElementById('whoami').textContent === 'as admin' \
            && document.querySelector('#pools tr[data-name=worker]') && document.getElementById('conn').dataset.state === 'live'").await;
        assert_eq!(js(&b, &leaks(&[wrong, &admin, &reader])).await, json!([]), "where a token shows after the sign-in");

        // A mistyped link (the token after a path): "Not found" without the secret.
        js(&b, &format!("location.hash = '#/x/token=' + {}; return true", json!(reader))).await;
        wait_js(&b, "not found", "return document.title === 'Not found · mco' && document.getElementById('main').innerText.includes('token=…')").await;
        assert_eq!(js(&b, "return document.title").await, json!("Not found · mco"));
        let html = js(&b, "return document.documentElement.outerHTML + document.title").await;
        assert!(!html.as_str().unwrap().contains(&reader), "the mistyped link's token is drawn");
        assert_eq!(js(&b, "return window.__noReload").await, json!(1), "the page was reloaded");
        assert_eq!(errors(&b).await, Vec::<String>::new(), "console errors");
    })
    .await;
    let _ = b.close().await;
    drop(driver);
    server.stop().await;
}

/// Issue 29 items 3 and 4: a view whose watch is down is dimmed and labelled with the time it
/// was last confirmed, within a few seconds of the server going away, and is live again after
/// the restart; the error of a failed action (a Pause confirmed while the server is away) is
/// kept through the live events that follow until it is dismissed; the confirmation dialog
/// puts the focus in its Reason field.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stale_views_are_dimmed_and_action_errors_stay() {
    let Some((driver, b)) = browser("stale_views_are_dimmed_and_action_errors_stay").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = |listen| mco::server::ServerConfig {
        data_dir: dir.path().to_path_buf(),
        listen,
        group: common::GROUP.into(),
        drain_hook: None,
        ..Default::default()
    };
    let server = mco::server::start(config("127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    let addr = server.addr;
    let live =
        "const m = document.getElementById('main'); return document.getElementById('conn').dataset.state === 'live' \
        && !m.classList.contains('stale') && document.getElementById('stale-note').hidden \
        && (() => { let o = 1; for (let e = m.querySelector('.view h1'); e; e = e.parentElement) o *= Number(getComputedStyle(e).opacity); return o; })() === 1";
    let stale = "const m = document.getElementById('main'); const n = document.getElementById('stale-note'); \
        return m.classList.contains('stale') && !n.hidden && n.textContent.includes('last confirmed at') \
          && (() => { let o = 1; for (let e = m.querySelector('.view h1'); e; e = e.parentElement) o *= Number(getComputedStyle(e).opacity); return o; })() < 1 \
          && n.dataset.confirmedAt";
    run("stale_views_are_dimmed_and_action_errors_stay", &b, async {
        let token = server.admin_token().expect("the admin token");
        b.goto(&format!("http://{addr}/ui/#token={token}&/pools")).await.unwrap();
        wait_js(&b, "the pools, live", &format!("return document.querySelector('#pools tr[data-name=worker]') && (() => {{ {live} }})()")).await;
        let before = js(&b, "return Date.now()").await.as_f64().unwrap();
        server.stop().await;
        let stopped = std::time::Instant::now();
        let confirmed = wait_js(&b, "the pools dimmed and labelled", stale).await;
        assert!(stopped.elapsed() < Duration::from_secs(5), "dimmed after {:?}", stopped.elapsed());
        // The note and the "reconnecting" indicator meet AA contrast in both themes (the
        // dimmed view itself is meant to recede).
        for scheme in ["light", "dark"] {
            b.issue_cmd(Cdp("Emulation.setEmulatedMedia", json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]})))
                .await
                .expect("the colour scheme is emulated");
            wait_js(&b, scheme, &format!("return matchMedia('(prefers-color-scheme: {scheme})').matches \
                && document.getElementById('conn').dataset.state === 'reconnecting'")).await;
            assert_eq!(js(&b, LOW_CONTRAST).await, json!([]), "text below AA contrast while stale, {scheme}");
        }
        b.issue_cmd(Cdp("Emulation.setEmulatedMedia", json!({"features": []}))).await.expect("the colour scheme is back");
        // Last confirmed: when the watch went down, after the page was last seen live.
        let at = js(&b, "return Date.parse(document.getElementById('stale-note').dataset.confirmedAt)").await.as_f64().unwrap();
        let now = js(&b, "return Date.now()").await.as_f64().unwrap();
        assert!(before <= at && at <= now, "confirmed at {at}, seen live at {before}, now {now}: {confirmed}");
        let server = restart(|| config(addr)).await;
        wait_js(&b, "the pools live again, not dimmed", live).await;

        // A Pause confirmed while the server is away fails; its error stays through live events.
        view(&b, "#/pool/worker", "const p = document.getElementById('pause'); return p && p.textContent === 'Pause…' \
            && document.getElementById('conn').dataset.state === 'live'").await;
        b.find(Locator::Id("pause")).await.unwrap().send_keys(ENTER).await.unwrap();
        wait_js(&b, "the dialog, the focus in its Reason field", "return document.querySelector('dialog[open]') && document.activeElement === document.getElementById('pause-reason')").await;
        server.stop().await;
        wait_js(&b, "the pool dimmed", stale).await;
        let reason = b.find(Locator::Id("pause-reason")).await.unwrap();
        reason.send_keys("maintenance").await.unwrap();
        reason.send_keys(ENTER).await.unwrap();
        wait_js(&b, "the pause's error", "const e = document.querySelector('#alerts .action-error'); \
            return e && e.textContent.includes('Pause of pool worker failed') && e.textContent.includes('could not be reached')").await;
        // The trial's defect 4: while the view is stale the error stays fully readable (not
        // dimmed with the data: no opacity or filter on it or around it), the rest dimmed.
        let dim = js(&b, r#"const e = document.querySelector('#alerts .action-error'); let opacity = 1; const filters = [];
            for (let x = e; x; x = x.parentElement) { const st = getComputedStyle(x); opacity *= Number(st.opacity); if (st.filter !== 'none') filters.push(x.tagName + '.' + x.className); }
            return { stale: document.getElementById('main').classList.contains('stale'), opacity, filters,
              heading: (() => { let o = 1; for (let h = document.querySelector('.view h1'); h; h = h.parentElement) o *= Number(getComputedStyle(h).opacity); return o; })(), dismiss: Number(getComputedStyle(e.querySelector('button.dismiss')).opacity) }"#).await;
        assert_eq!(dim["stale"], json!(true), "{dim}");
        assert_eq!(dim["opacity"].as_f64(), Some(1.0), "the error of the refused pause is dimmed: {dim}");
        assert_eq!(dim["dismiss"].as_f64(), Some(1.0), "its Dismiss button is dimmed: {dim}");
        assert_eq!(dim["filters"], json!([]), "the error of the refused pause is greyed: {dim}");
        assert!(dim["heading"].as_f64().unwrap() < 1.0, "the stale pool is not dimmed: {dim}");
        let server = restart(|| config(addr)).await;
        wait_js(&b, "the pool live again", live).await;
        // A live event redraws the pool: its maxUnavailable shows; the error is still there.
        server
            .admin_client("test")
            .merge_patch(mco::model::Kind::MachineConfigPool, "worker", &json!({"spec": {"maxUnavailable": 2}}), false)
            .await
            .expect("worker is patched");
        wait_js(&b, "the live event drawn", "return document.getElementById('main').innerText.includes('maxUnavailable 2')").await;
        assert_eq!(
            js(&b, "const e = document.querySelector('#alerts .action-error'); return !!e && e.textContent.includes('Pause of pool worker failed')").await,
            json!(true),
            "the error is gone after a live event"
        );
        b.find(Locator::Css("#alerts .action-error button.dismiss")).await.unwrap().click().await.unwrap();
        wait_js(&b, "the error dismissed", "return !document.querySelector('#alerts .action-error')").await;
        let p: Value = server
            .admin_client("test")
            .get_path(&format!("/apis/{}/v1/machineconfigpools/worker", common::GROUP))
            .await
            .unwrap();
        assert_ne!(p["spec"]["paused"], json!(true), "the failed pause paused the pool: {p}");
        assert_eq!(errors(&b).await, Vec::<String>::new(), "console errors");
        server.stop().await;
    })
    .await;
    let _ = b.close().await;
    drop(driver);
}

/// Issue 29 items 2 and 7: the time slider keeps the keyboard focus while it moves (each
/// arrow press one event: two presses, two events; Page Down an hour), the moment shown follows it (its URL
/// replaced, no history entry per step), marks where a render and an apply happened, and a
/// moment still loading says so; so do one MachineConfig, a rollback and a history page.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn time_slider_keeps_focus_one_event_per_arrow() {
    let Some((driver, b)) = browser("time_slider_keeps_focus_one_event_per_arrow").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = common::start_server(dir.path()).await;
    let addr = server.addr;
    run("time_slider_keeps_focus_one_event_per_arrow", &b, async {
        let client = server.admin_client("test");
        for name in ["a", "b", "c"] {
            let pool = json!({
                "apiVersion": format!("{}/v1", common::GROUP), "kind": "MachineConfigPool",
                "metadata": {"name": name},
                "spec": {"nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}}},
            });
            client.create(mco::model::Kind::MachineConfigPool, &pool, None).await.expect("the pool is created");
        }
        // An applied MachineConfig: a mark on the slider, with the renders.
        let mc = json!({
            "apiVersion": format!("{}/v1", common::GROUP), "kind": "MachineConfig",
            "metadata": {"name": "99-worker-motd", "labels": {format!("{}/role", common::GROUP): "worker"}},
            "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": [{"path": "/etc/motd", "mode": 420, "contents": {"source": "data:,hello"}}]}}},
        });
        let created = client.create(mco::model::Kind::MachineConfig, &mc, None).await.expect("the MachineConfig is created");
        let applied_rv = created["metadata"]["resourceVersion"].as_str().unwrap().to_string();
        let renders: Value = client
            .get_path("/apis/history.mco.dev/v1/events?fieldSelector=type=RenderedConfigGenerated&order=newest&limit=1")
            .await
            .unwrap();
        let render_rv = renders["items"][0]["seq"].as_u64().unwrap();
        let head = server.hub.published_seq();
        assert!(head >= 3, "{head}");
        let token = server.admin_token().expect("the admin token");
        b.goto(&format!("http://{addr}/ui/#token={token}&/at?rv={head}")).await.unwrap();
        wait_js(&b, "the fleet as of the head", &format!("return document.querySelector('#past-configs li') \
            && document.getElementById('past-when').textContent.includes('As of resourceVersion {head}')")).await;
        wait_js(&b, "the marks of the apply and a render", &format!(
            "const m = (rv, what) => document.querySelector(`#slider-marks option[value='${{rv}}'][data-what=${{what}}]`); \
             const s = (rv, what) => document.querySelector(`#slider-strip .mark[data-rv='${{rv}}'][data-what=${{what}}]`); \
             return m({}, 'apply') && m({render_rv}, 'render') && document.querySelector('#slider-events a') \
               && s({}, 'apply') && s({render_rv}, 'render') \
               && [...document.querySelectorAll('#slider-axis span')].filter((s) => /\\d\\d:\\d\\d:\\d\\d/.test(s.textContent)).length === 5",
            json!(applied_rv),
            json!(applied_rv)
        )).await;
        // Each mark stands where the slider's thumb stands at its rv: its centre within 3 px of
        // the thumb's, moved there (the thumb is 16 px: its centre runs 8 px inside each end).
        let off = js(&b, &format!(
            "const sl = document.getElementById('slider'); const r = sl.getBoundingClientRect(); \
             const f = ({applied_rv} - Number(sl.min)) / (Number(sl.max) - Number(sl.min)); \
             const m = document.querySelector(`#slider-strip .mark[data-rv='{applied_rv}'][data-what=apply]`).getBoundingClientRect(); \
             return Math.abs((m.left + m.right) / 2 - (r.left + 8 + (r.width - 16) * f))"
        )).await;
        assert!(off.as_f64().unwrap() <= 3.0, "the apply's mark is {off} px from its place on the slider");
        js(&b, "document.getElementById('slider').focus(); return true").await;
        let entries = js(&b, "return history.length").await;
        const LEFT: &str = "\u{E012}";
        for step in 1..=2 {
            let rv = head - step;
            b.active_element().await.unwrap().send_keys(LEFT).await.unwrap();
            wait_js(&b, &format!("rv {rv} after {step} arrow press(es)"), &format!(
                "return document.getElementById('past-when').textContent.includes('As of resourceVersion {rv}') \
                   && document.getElementById('slider').value === '{rv}' && location.hash === '#/at?rv={rv}' \
                   && document.getElementById('past-loading').hidden"
            )).await;
            assert_eq!(js(&b, "return document.activeElement && document.activeElement.id").await, json!("slider"), "the focus after step {step}");
        }
        assert_eq!(js(&b, "return history.length").await, entries, "each step added a history entry");
        // While a moment loads (its requests held), the page says so; the focus stays.
        js(&b, "window.__held = []; window.__fetch = window.fetch; \
            window.fetch = (...a) => new Promise((resolve, reject) => window.__held.push(() => window.__fetch(...a).then(resolve, reject))); return true").await;
        b.active_element().await.unwrap().send_keys(LEFT).await.unwrap();
        let rv = head - 3;
        wait_js(&b, "the loading state", &format!(
            "const l = document.getElementById('past-loading'); return !l.hidden && l.textContent.includes('Loading the fleet as of rv {rv}') \
               && window.__held.length > 0 && document.activeElement.id === 'slider'"
        )).await;
        js(&b, "window.fetch = window.__fetch; window.__held.forEach((f) => f()); return true").await;
        wait_js(&b, "the held moment drawn", &format!(
            "return document.getElementById('past-when').textContent.includes('As of resourceVersion {rv}') && document.getElementById('past-loading').hidden"
        )).await;
        // Page Up: an hour later than the moment shown is past the newest event (the log is
        // seconds old): the slider stops at its end, the newest resourceVersion, and the URL
        // names that rv, never a time still to come (the fix of 20dd52e, which had no test).
        b.active_element().await.unwrap().send_keys("\u{E00E}").await.unwrap();
        let end = wait_js(&b, "Page Up stopped at the newest event", "const s = document.getElementById('slider'); \
            return s.value === s.max && location.hash === `#/at?rv=${s.max}` && document.activeElement === s \
              && document.getElementById('past-loading').hidden \
              && document.getElementById('past-when').textContent.includes(`As of resourceVersion ${s.max}`) && s.max").await;
        assert!(end.as_str().unwrap().parse::<u64>().unwrap() >= head, "the slider's end {end} is before the head {head}");
        // Page Down: an hour earlier than the moment shown, here before the first event (the
        // log is seconds old); the focus stays.
        b.active_element().await.unwrap().send_keys("\u{E00F}").await.unwrap();
        wait_js(&b, "an hour earlier", "const m = document.getElementById('past-moment'); \
            return m && m.textContent.includes('before the first event') && document.activeElement.id === 'slider' \
              && document.getElementById('slider').value === '0' && location.hash === '#/at?rv=0'").await;
        // resourceVersion 0 named in the URL: the empty fleet before the first event, drawn as
        // an empty state, not an error (the API refuses resourceVersionMatch=Exact at 0, as
        // kube-apiserver does, so the page must not ask; the fix of 20dd52e, untested till now).
        view(&b, "#/at?rv=0", "return document.getElementById('past-moment') || document.querySelector('main .error')").await;
        let empty = js(&b, "const m = document.getElementById('past-moment'); return { moment: m && m.textContent, \
            error: [...document.querySelectorAll('main .error')].map((e) => e.textContent).join(' | '), \
            pools: document.querySelectorAll('#pools tbody tr').length, nodes: document.querySelectorAll('.paged tbody tr').length, \
            shown: (document.querySelector('.paged') || { dataset: {} }).dataset.shown, slider: document.getElementById('slider').value }").await;
        assert_eq!(empty["error"], json!(""), "rv 0: {empty}");
        assert!(empty["moment"].as_str().is_some_and(|m| m.contains("before the first event")), "rv 0: {empty}");
        assert_eq!((empty["pools"].as_u64(), empty["nodes"].as_u64(), empty["shown"].as_str(), empty["slider"].as_str()),
            (Some(0), Some(0), Some("0"), Some("0")), "rv 0: {empty}");
        // Page Up from rv 0 is an hour after the first event: past the newest (the log is
        // seconds old), so the newest rv; not a second after the first event.
        js(&b, "document.getElementById('slider').focus(); return true").await;
        b.active_element().await.unwrap().send_keys("\u{E00E}").await.unwrap();
        wait_js(&b, "Page Up from rv 0", "const s = document.getElementById('slider'); \
            return s.value === s.max && location.hash === `#/at?rv=${s.max}` && document.getElementById('past-loading').hidden").await;
        // From a time before the first event: Page Up one hour later (still before it), then
        // Page Down, an hour earlier, is before the first event: rv 0, not a time.
        view(&b, "#/at?asOf=2000-01-01T00:00:00Z", "return document.getElementById('past-moment')").await;
        js(&b, "document.getElementById('slider').focus(); return true").await;
        let as_of = "new URLSearchParams(location.hash.split('?')[1]).get('asOf')";
        b.active_element().await.unwrap().send_keys("\u{E00E}").await.unwrap();
        wait_js(&b, "Page Up from an early time", &format!("return {as_of} === '2000-01-01T01:00:00.000Z' && document.getElementById('past-loading').hidden")).await;
        b.active_element().await.unwrap().send_keys("\u{E00F}").await.unwrap();
        wait_js(&b, "Page Down to before the first event", "return location.hash === '#/at?rv=0' && document.getElementById('past-loading').hidden \
            && document.getElementById('past-moment').textContent.includes('before the first event')").await;
        // A burst of applies (each with its render) in a second: their marks on the strip
        // stand side by side, none over another, each inside the strip.
        for k in 0..16 {
            let mut burst = mc.clone();
            burst["metadata"]["name"] = json!(format!("99-worker-burst-{k:02}"));
            client.create(mco::model::Kind::MachineConfig, &burst, None).await.expect("a burst MachineConfig is created");
        }
        view(&b, "#/at", "return document.querySelectorAll('#slider-strip .mark[data-what=apply]').length >= 17").await;
        let strip = js(&b, "const st = document.getElementById('slider-strip').getBoundingClientRect(); \
            const ms = [...document.querySelectorAll('#slider-strip .mark')].map((m) => [m.dataset.rv + m.dataset.what, m.getBoundingClientRect()]); \
            const bad = []; ms.forEach(([s, r], i) => { \
              if (r.left < st.left - 0.5 || r.right > st.right + 0.5) bad.push(`${s} outside the strip`); \
              for (const [t, q] of ms.slice(i + 1)) if (r.left < q.right - 0.5 && q.left < r.right - 0.5) bad.push(`${s} over ${t}`); }); \
            return { marks: ms.length, bad }").await;
        assert!(strip["marks"].as_u64().unwrap() >= 20, "{strip}");
        assert_eq!(strip["bad"], json!([]), "overlapping marks on the slider's strip: {strip}");
        // One MachineConfig, a rollback, a history page: each says it is loading while its
        // requests are held, and draws once they are answered.
        let render = server.hub.state().pools["worker"].spec.configuration.name.clone();
        assert!(!render.is_empty());
        for (hash, ready) in [
            (format!("#/mc/{render}"), "return document.querySelector('#sources') || document.getElementById('main').innerText.includes('Rendered config')"),
            ("#/rollback/worker".to_string(), "return document.getElementById('rb-preview')"),
            ("#/history".to_string(), "return document.querySelector('#history tbody tr')"),
        ] {
            js(&b, "window.__held = []; window.fetch = (...a) => new Promise((resolve, reject) => window.__held.push(() => window.__fetch(...a).then(resolve, reject))); return true").await;
            js(&b, &format!("location.hash = {}; return true", json!(hash))).await;
            wait_js(&b, &format!("{hash} loading"), "const l = document.getElementById('view-loading'); return l && l.textContent.includes('Loading') && window.__held.length > 0").await;
            // Released one request at a time (a view may ask again after an answer).
            js(&b, "window.fetch = window.__fetch; window.__held.forEach((f) => f()); return true").await;
            wait_js(&b, &format!("{hash} drawn"), &format!("return !document.getElementById('view-loading') && (() => {{ {ready} }})()")).await;
        }
        assert_eq!(errors(&b).await, Vec::<String>::new(), "console errors");
    })
    .await;
    let _ = b.close().await;
    drop(driver);
    server.stop().await;
}

/// Issue 29 items 1 and 8 at a fleet's scale. 10,000 nodes registered with a real server through
/// its API (a role no pool selects and no lease: no controller writes to them), listed and
/// watched by the nodes view, filtered by state and sorted by a column there; the list and each
/// draw of the table (filter, sort, one page of rows) are timed by the page itself, and a live
/// event at that size is drawn in place. Then a node with more than a page of events: its
/// timeline opens at the newest, live at its head, and its older page (the history's own
/// continue token) goes on right below the last row shown. Last, the pools view sorted by a
/// column and filtered by state, both kept in its URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_thousand_nodes_sorted_and_filtered() {
    use futures_util::StreamExt;
    let Some((driver, b)) = browser("ten_thousand_nodes_sorted_and_filtered").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = common::start_server(dir.path()).await;
    let addr = server.addr;
    let group = server.hub.group().to_string();
    let client = server.admin_client("test");
    // node-00000 … node-09999: every tenth Degraded, every seventh other Working, else Done.
    let t0 = std::time::Instant::now();
    let created: Vec<()> = futures_util::stream::iter(0..10_000u32)
        .map(|i| {
            let (client, group) = (client.clone(), group.clone());
            async move {
                let state = if i % 10 == 0 { "Degraded" } else if i % 7 == 0 { "Working" } else { "Done" };
                let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {
                    "name": format!("node-{i:05}"), "labels": {"node-role.kubernetes.io/edge": ""},
                    "annotations": {format!("{group}/state"): state, format!("{group}/currentConfig"): "rendered-edge-x",
                        format!("{group}/desiredConfig"): "rendered-edge-x"}}});
                client.create(mco::model::Kind::Node, &node, None).await.expect("the node is created");
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    assert_eq!(created.len(), 10_000);
    eprintln!("10,000 nodes created through the API in {:?}", t0.elapsed());
    run("ten_thousand_nodes_sorted_and_filtered", &b, async {
        let token = server.admin_token().expect("the admin token");
        b.goto(&format!("http://{addr}/ui/#token={token}&/nodes")).await.unwrap();
        let listed = wait_js(&b, "10,000 nodes listed, live", "const p = document.querySelector('.paged'); const t = document.getElementById('timing'); \
            return p && p.dataset.shown === '10000' && document.getElementById('conn').dataset.state === 'live' && t.dataset.listMs && t.textContent").await;
        eprintln!("{}", listed.as_str().unwrap());
        b.find(Locator::Css(".paged .state-filter")).await.unwrap().select_by_value("Degraded").await.unwrap();
        wait_js(&b, "1,000 degraded", "return document.querySelector('.paged').dataset.shown === '1000'").await;
        let name = b.find(Locator::Css(".paged button.sort[data-col=NAME]")).await.unwrap();
        name.click().await.unwrap();
        wait_js(&b, "sorted by name, ascending", "return document.querySelector('.paged th[aria-sort=ascending]')").await;
        b.find(Locator::Css(".paged button.sort[data-col=NAME]")).await.unwrap().click().await.unwrap();
        let rows = "const p = document.querySelector('.paged'); const rows = [...p.querySelectorAll('tbody tr')]; \
             return { names: rows.map((r) => r.dataset.name), states: rows.map((r) => r.cells[4].textContent), ms: Number(p.dataset.renderMs), info: p.querySelector('.toolbar').innerText }";
        let page = wait_js(&b, "sorted by name, descending", &format!(
            "if (!document.querySelector('.paged th[aria-sort=descending]')) return null; {rows}"
        )).await;
        let names: Vec<String> = serde_json::from_value(page["names"].clone()).unwrap();
        let want: Vec<String> = (0..100).map(|k| format!("node-{:05}", 9990 - 10 * k)).collect();
        assert_eq!(names, want, "{page}");
        assert!(page["states"].as_array().unwrap().iter().all(|s| s.as_str().unwrap().contains("Degraded")), "{page}");
        assert!(page["info"].as_str().unwrap().contains("1000 of 10000"), "{page}");
        // A live event at this size: node-09999 turns Degraded; the filtered, sorted page has it
        // first without a reload, and the redraw is timed.
        client
            .merge_patch(mco::model::Kind::Node, "node-09999", &json!({"metadata": {"annotations": {format!("{group}/state"): "Degraded"}}}), false)
            .await
            .expect("node-09999 is patched");
        let live = wait_js(&b, "node-09999 degraded, live",
            "const p = document.querySelector('.paged'); if (p.dataset.shown !== '1001' || p.querySelector('tbody tr').dataset.name !== 'node-09999') return null; \
             return Number(document.getElementById('timing').dataset.updateMs) + 0.001"
        ).await;
        // Sorted by state over all 10,000 (the filter back to any): Degraded first, ties in name order.
        b.find(Locator::Css(".paged .state-filter")).await.unwrap().select_by_value("").await.unwrap();
        b.find(Locator::Css(".paged button.sort[data-col=STATE]")).await.unwrap().click().await.unwrap();
        let ms = wait_js(&b, "sorted by state", "const p = document.querySelector('.paged'); const r = p.querySelector('tbody tr'); \
             return p.dataset.shown === '10000' && p.querySelector('th[aria-sort=ascending] button[data-col=STATE]') && r.cells[4].textContent.includes('Degraded') \
               && r.dataset.name === 'node-00000' && Number(p.dataset.renderMs) + 0.001").await;
        eprintln!("10,000 nodes: filtered and sorted by name in {} ms, a live event drawn in {live} ms, sorted by state in {ms} ms", page["ms"]);
        for t in [&page["ms"], &live, &ms] {
            assert!(t.as_f64().unwrap() < 1000.0, "slow: {page} {live} {ms}");
        }

        // A node with 120 events of its own (label changes) beside its registration.
        let node = "node-00001";
        for k in 0..120 {
            client.merge_patch(mco::model::Kind::Node, node, &json!({"metadata": {"labels": {"step": k.to_string()}}}), false)
                .await.expect("the node's label is patched");
        }
        let of_node = |limit: u32| format!("/apis/history.mco.dev/v1/events?fieldSelector=object.kind=Node,object.name={node}&order=newest&limit={limit}");
        let newest: Value = client.get_path(&of_node(1)).await.unwrap();
        let head = newest["items"][0]["seq"].as_u64().unwrap();
        view(&b, &format!("#/node/{node}"), &format!(
            "const rows = [...document.querySelectorAll('#timeline tbody tr')].map((r) => Number(r.dataset.rv)); \
             return rows.length === 100 && rows[0] === {head} && rows.every((rv, i) => i === 0 || rv < rows[i - 1]) \
               && document.getElementById('timeline-older') && document.getElementById('conn').dataset.state === 'live'"
        )).await;
        // Live at its head: a new event is its first row.
        let patched = client.merge_patch(mco::model::Kind::Node, node, &json!({"metadata": {"labels": {"step": "last"}}}), false)
            .await.expect("the node's label is patched");
        let rv: u64 = patched["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
        wait_js(&b, "the new event on top", &format!(
            "const r = document.querySelector('#timeline tbody tr'); return r && Number(r.dataset.rv) === {rv} \
               && document.querySelectorAll('#timeline tbody tr').length === 101"
        )).await;
        let shown: Vec<u64> = serde_json::from_value(js(&b, "return [...document.querySelectorAll('#timeline tbody tr')].map((r) => Number(r.dataset.rv))").await).unwrap();
        b.find(Locator::Id("timeline-older")).await.unwrap().click().await.unwrap();
        let older = wait_js(&b, "the timeline's older page", "const rows = [...document.querySelectorAll('#history tbody tr')].map((r) => Number(r.dataset.rv)); \
             return location.hash.startsWith('#/history?') && location.hash.includes('continue=') && rows.length ? rows : null").await;
        let older: Vec<u64> = serde_json::from_value(older).unwrap();
        // Together, the timeline and its older page are the node's newest events, each once,
        // newest first: the older page starts right below the timeline's last row.
        let all: Value = client.get_path(&of_node(500)).await.unwrap();
        let want: Vec<u64> = all["items"].as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
        let got: Vec<u64> = shown.iter().chain(older.iter()).copied().collect();
        assert_eq!(got, want, "the timeline and its older page against the node's events");

        // The pools view sorts by any column and filters by state too, both kept in its URL.
        for (name, paused) in [("a", false), ("b", true), ("c", false)] {
            let pool = json!({
                "apiVersion": format!("{group}/v1"), "kind": "MachineConfigPool", "metadata": {"name": name},
                "spec": {"paused": paused, "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}},
                    // The worker's MachineConfigs, as MCO's custom pools take them: a pool
                    // selecting none has no render and is degraded.
                    "machineConfigSelector": {"matchLabels": {format!("{group}/role"): "worker"}}},
            });
            client.create(mco::model::Kind::MachineConfigPool, &pool, None).await.expect("the pool is created");
        }
        let order = "return [...document.querySelectorAll('#pools tbody tr')].map((r) => r.dataset.name).join(' ')";
        view(&b, "#/pools", &format!("return document.querySelector('#pools th[aria-sort=ascending] button[data-col=NAME]') && (() => {{ {order} }})() === 'a b c master worker'")).await;
        // Clicked in the page (live events replace the table: a found element may be gone by
        // the time WebDriver clicks it), the focus on it as a click gives it.
        js(&b, "const n = document.querySelector('#pools button.sort[data-col=NAME]'); n.focus(); n.click(); return true").await;
        wait_js(&b, "the pools by name, descending, the focus kept", &format!(
            "return (() => {{ {order} }})() === 'worker master c b a' && document.querySelector('#pools th[aria-sort=descending] button[data-col=NAME]') \
               && document.activeElement.dataset.col === 'NAME' && location.hash === '#/pools?order=desc'"
        )).await;
        b.find(Locator::Id("pools-state")).await.unwrap().select_by_value("Paused").await.unwrap();
        wait_js(&b, "the paused pool alone", &format!(
            "return (() => {{ {order} }})() === 'b' && location.hash === '#/pools?order=desc&state=Paused' \
               && document.getElementById('pools-shown').textContent === '1 of 5 pools'"
        )).await;
        // The URL opens the same view.
        view(&b, "#/nodes", "return document.querySelector('.paged')").await;
        view(&b, "#/pools?sort=AGE&state=Updated", &format!(
            "return document.querySelector('#pools th[aria-sort=ascending] button[data-col=AGE]') && !(() => {{ {order} }})().includes('b') \
               && document.getElementById('pools-state').value === 'Updated'"
        )).await;
        assert_eq!(errors(&b).await, Vec::<String>::new(), "console errors");
    })
    .await;
    let _ = b.close().await;
    drop(driver);
    server.stop().await;
}

/// Starts the server again on its data dir and port. `RunningServer::stop` waits for the
/// previous server to release its store lock and socket, but a browser's connection may still be
/// closing on a loaded machine (stop gives up waiting after `STOP_GRACE`), so this retries until
/// a deadline of 20 s, printing each refusal.
async fn restart(config: impl Fn() -> mco::server::ServerConfig) -> mco::server::RunningServer {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match mco::server::start(config()).await {
            Ok(s) => return s,
            Err(e) => {
                eprintln!("restart refused, retrying: {e:#}");
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the server restarts on the same port and data dir: {e:#}"
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What the server answers for the dashboard's files, without a browser.
#[tokio::test]
async fn dashboard_files_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let server = mco::server::start(mco::server::ServerConfig {
        data_dir: dir.path().to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        group: common::GROUP.into(),
        drain_hook: None,
        ..Default::default()
    })
    .await
    .unwrap();
    let url = server.url();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let get = |path: &str, accept: &str| http.get(format!("{url}{path}")).header("accept", accept).send();
    // A browser at / is sent to the dashboard; an API client keeps the 404 Status.
    let r = get("/", "text/html,application/xhtml+xml,*/*;q=0.8").await.unwrap();
    assert!(r.status().is_redirection(), "{}", r.status());
    assert_eq!(r.headers()["location"], "/ui/");
    let r = get("/", "application/json").await.unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.json::<Value>().await.unwrap()["kind"], "Status");
    for (path, ctype) in [
        ("/ui/", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/style.css", "text/css"),
        // A view URL reloads the page (the views are hash routes; a path is answered too).
        ("/ui/pool/worker", "text/html"),
    ] {
        let r = get(path, "*/*").await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let ct = r.headers()["content-type"].to_str().unwrap().to_string();
        assert!(ct.starts_with(ctype), "{path}: {ct}");
        let csp = r.headers()["content-security-policy"].to_str().unwrap();
        assert!(csp.starts_with("default-src 'self'"), "{path}: {csp}");
        let etag = r.headers()["etag"].clone();
        let again = http
            .get(format!("{url}{path}"))
            .header("if-none-match", etag)
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 304, "{path}");
    }
    assert_eq!(get("/ui/missing.js", "*/*").await.unwrap().status(), 404);
    assert!(get("/ui", "text/html").await.unwrap().status().is_redirection());
    server.stop().await;
}

async fn checks(b: &Browser, c: &Cluster) {
    let url = c.server.url();
    let shots = std::env::var_os("MCO_UI_SCREENSHOTS").map(PathBuf::from);

    // Without a token the page asks for one (every API call answers 401).
    b.goto(&format!("{url}/ui/#/pools")).await.unwrap();
    wait_js(
        b,
        "the sign-in prompt",
        "const s = document.getElementById('signin'); return s && s.innerText.includes('Sign in')",
    )
    .await;
    // Its help says where the admin token is as `mco up` says it (src/up/mod.rs
    // print_locations: "dashboard: URL (sign in with the token in DATA_DIR/admin.token …)",
    // the data dir being the server's --data-dir), and how the CLI is pointed at that file
    // for a reader token (MCO_TOKEN_FILE, README "Client commands … find their token"); not a
    // fixed `mco-data/admin.token`, which is only the default's place.
    let help = js(b, "return document.querySelector('#signin p').textContent").await;
    let help = help.as_str().unwrap();
    let file = mco::credentials::ADMIN_TOKEN_FILE;
    for want in [
        format!("DATA_DIR/{file}"),
        "--data-dir".to_string(),
        "\"dashboard:\"".to_string(),
        format!("MCO_TOKEN_FILE=DATA_DIR/{file} mco token create --kind reader"),
    ] {
        assert!(help.contains(&want), "the sign-in help lacks {want:?}: {help}");
    }
    assert!(!help.contains(&format!("is in mco-data/{file}")), "{help}");
    // The token rides in the fragment (never sent to the server), is kept for the tab and
    // dropped from the address bar.
    let token = c.server.admin_token().expect("the admin token");
    b.goto(&format!("{url}/ui/?signin#token={token}&/pools")).await.unwrap();
    wait_js(
        b,
        "the token taken from the fragment",
        &format!(
            "return sessionStorage.getItem('mco.token') === {} && location.hash === '#/pools' && !location.href.includes('token')",
            json!(token)
        ),
    )
    .await;

    // `/` sends a browser to the dashboard, which shows the pools.
    b.goto(&format!("{url}/")).await.unwrap();
    assert_eq!(b.current_url().await.unwrap().path(), "/ui/");
    wait_js(
        b,
        "the pools table",
        "return document.querySelector('#pools tr[data-name=worker]')",
    )
    .await;
    let text = js(b, "return document.querySelector('#pools').innerText").await;
    for col in [
        "MACHINECOUNT",
        "UPDATEDMACHINECOUNT",
        "DEGRADEDMACHINECOUNT",
        "master",
        "worker",
    ] {
        assert!(text.as_str().unwrap().contains(col), "{col} in {text}");
    }
    wait_js(
        b,
        "the live indicator",
        "return document.getElementById('conn').dataset.state === 'live'",
    )
    .await;

    // The first load leaves the focus at the top: "Skip to content" is the first Tab stop.
    assert_eq!(
        js(b, "return document.activeElement === document.body").await,
        json!(true),
        "the first load moved the focus"
    );

    // URLs: the query parsed from the raw hash (a `+` offset and `&` in values survive), path
    // segments decoded alone, links built encoded; conditions drawn by their meaning (a
    // failure condition True is ✖, Updating True ⟳, Updated True ✔); CONFIG is MCO's printer
    // column `.status.configuration.name`, the target shown apart, labelled.
    let units = b
        .execute_async(
            r#"const done = arguments[arguments.length - 1];
            Promise.all([import('/ui/app.js'), import('/ui/dom.js'), import('/ui/tables.js')]).then(([app, d, tables]) => {
              const t = (el) => el.textContent;
              const pool = { metadata: { name: 'p', creationTimestamp: '2026-01-01T00:00:00Z' },
                spec: { configuration: { name: 'rendered-p-target' } },
                status: { configuration: { name: 'rendered-p-status' }, conditions: [] } };
              const row = tables.poolsTable([pool]).querySelector('tbody tr').children;
              const back = (href) => app.parseHash(href).q.get('v');
              let malformed = [];
              for (const u of ['#/history?name=100%', '#/node/%E0%A4%A']) {
                try { app.parseHash(u); malformed.push('parsed'); } catch (e) { malformed.push(e.name); }
              }
              done({
                asOf: app.parseHash('#/at?asOf=2026-12-01T05:28:00%2B01:00').q.get('asOf'),
                amp: app.parseHash('#/history?name=a%26b&kind=Node').q.get('name'),
                trailing: app.parseHash('#/nodes/').path,
                roundTrip: ['a&b', 'a+b', '2026-12-01T05:30:00+01:00', 'x y%z'].map((v) => back(d.view('history', { v }))),
                segment: d.view('pool', 'a+b/c'),
                malformed,
                degradedTrue: t(d.condBadge('Degraded', 'True')),
                nodeDegradedTrue: t(d.condBadge('NodeDegraded', 'True')),
                renderDegradedFalse: t(d.condBadge('RenderDegraded', 'False')),
                updatingTrue: t(d.condBadge('Updating', 'True')),
                updatedTrue: t(d.condBadge('Updated', 'True')),
                config: row[5].querySelector('[title]').title,
                configColumn: tables.poolsTable([pool]).querySelectorAll('th')[5].textContent,
                progress: t(row[1]),
              });
            });"#,
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(units["asOf"], "2026-12-01T05:28:00+01:00");
    assert_eq!(units["amp"], "a&b");
    assert_eq!(units["trailing"], "/nodes");
    assert_eq!(
        units["roundTrip"],
        json!(["a&b", "a+b", "2026-12-01T05:30:00+01:00", "x y%z"])
    );
    assert_eq!(units["segment"], "#/pool/a%2Bb%2Fc");
    assert_eq!(units["malformed"], json!(["URIError", "URIError"]));
    for (k, want) in [
        ("degradedTrue", "✖ True"),
        ("nodeDegradedTrue", "✖ True"),
        ("updatingTrue", "⟳ True"),
        ("updatedTrue", "✔ True"),
    ] {
        assert_eq!(units[k], want, "{k}: {units}");
    }
    assert!(!units["renderDegradedFalse"].as_str().unwrap().contains('✖'), "{units}");
    assert_eq!(units["config"], "rendered-p-status", "{units}");
    assert_eq!(units["configColumn"], "CONFIG", "{units}");
    assert!(units["progress"].as_str().unwrap().contains("target"), "{units}");

    // The page's own rules (web/fleet.js), run in the page, against MCO's (mco-facts
    // "Node-to-pool resolution", sortNodeList).
    let rules = b
        .execute_async(
            r#"const done = arguments[arguments.length - 1];
            import('/ui/fleet.js').then((f) => {
              const sel = (l) => ({ metadata: { name: l }, spec: { nodeSelector: { matchLabels: { [`node-role.kubernetes.io/${l}`]: '' } } } });
              const pools = ['master', 'worker', 'infra', 'gpu'].map(sel);
              const node = (labels, name = 'n', t = '') => ({ metadata: { name, labels, creationTimestamp: t } });
              const r = (l) => Object.fromEntries(l.map((x) => [`node-role.kubernetes.io/${x}`, '']));
              const zone = (z, name, t) => node(z ? { 'topology.kubernetes.io/zone': z } : {}, name, t);
              done({
                emptySelector: f.selects({}, { a: 'b' }),
                expressions: f.selects({ matchExpressions: [{ key: 'a', operator: 'In', values: ['b'] }, { key: 'c', operator: 'DoesNotExist' }] }, { a: 'b' }),
                notIn: f.selects({ matchExpressions: [{ key: 'a', operator: 'NotIn', values: ['b'] }] }, { a: 'b' }),
                pools: [r(['worker']), r(['worker', 'infra']), r(['master', 'worker']), r(['master', 'infra']), r(['worker', 'infra', 'gpu']), { ...r(['worker']), 'kubernetes.io/os': 'windows' }]
                  .map((l) => f.poolOf(node(l), pools)),
                order: [zone('', 'late', '2026-01-02T00:00:00Z'), zone('b', 'b1', '2026-01-01T00:00:00Z'), zone('a', 'a2', '2026-01-03T00:00:00Z'),
                        zone('', 'early', '2026-01-01T00:00:00Z'), zone('a', 'a1', '2026-01-02T00:00:00Z')].sort(f.rolloutOrder).map((n) => n.metadata.name),
                paths: f.offendingPaths('content mismatch for file "/etc/chrony.conf"'),
              });
            });"#,
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        rules,
        json!({
            "emptySelector": false, "expressions": true, "notIn": false,
            "pools": ["worker", "infra", "master", "master", "", ""],
            "order": ["a1", "a2", "b1", "early", "late"],
            "paths": ["/etc/chrony.conf"],
        })
    );

    // Every view loads without console errors.
    let old = c.pool("worker").spec.configuration.name.clone();
    let rv_before = c.server.hub.published_seq();
    let h1 = |t: &str| {
        format!(
            "return [...document.querySelectorAll('main h1')].some(e => e.textContent.includes({}))",
            json!(t)
        )
    };
    nodes_sort_and_filter_survive_a_reload(b, c).await;
    for (hash, ready) in [
        (
            "#/nodes",
            "return document.querySelectorAll('.paged tbody tr').length === 3".to_string(),
        ),
        (
            "#/mcs",
            "return document.querySelector('tr[data-name=\"00-worker\"]')".to_string(),
        ),
        (
            "#/mc/00-worker",
            "return document.getElementById('main').innerText.includes('Units (')".to_string(),
        ),
        (
            &format!("#/mc/{old}"),
            "return document.querySelector('#sources li')".to_string(),
        ),
        (
            "#/history",
            "return document.querySelectorAll('#history tbody tr').length > 0".to_string(),
        ),
        (
            "#/history?kind=Node&name=worker-0",
            "return document.querySelectorAll('#history tbody tr').length > 0".to_string(),
        ),
        ("#/diff", h1("Diff")),
        // Refusals show the server's Status message in place.
        (
            "#/mc/no-such-config",
            "const e = document.querySelector('main .error'); return e && e.textContent.includes('no-such-config')".to_string(),
        ),
        (
            "#/diff?from=rendered-worker-nope&to=rendered-worker-nope2",
            "const e = document.querySelector('main .error'); return e && e.textContent.includes('rendered-worker-nope')".to_string(),
        ),
        ("#/at", "return document.querySelector('#past-configs li')".to_string()),
        (
            "#/node/worker-0",
            "return document.querySelector('#node-state') && document.querySelectorAll('main table tr').length > 2"
                .to_string(),
        ),
        // A trailing slash is the same view.
        (
            "#/nodes/",
            "return document.querySelectorAll('.paged tbody tr').length === 3".to_string(),
        ),
        // A malformed percent-encoding says so (no uncaught URIError, no blank page).
        ("#/history?name=100%", h1("Malformed URL")),
        ("#/node/%E0%A4%A", h1("Malformed URL")),
        (
            "#/no-such-view",
            "return document.title === 'Not found · mco'".to_string(),
        ),
        // Unknown objects: not found, and no action offered.
        (
            "#/pool/nope",
            "return document.querySelector('#not-found') && !document.getElementById('pause') \
               && ![...document.querySelectorAll('main a, main button')].some(a => /Roll back|Pause|Resume/.test(a.textContent))"
                .to_string(),
        ),
        ("#/node/nope", "return document.querySelector('#not-found')".to_string()),
        (
            "#/rollback/nope",
            "return document.querySelector('#not-found') && !document.getElementById('rb-preview')".to_string(),
        ),
        // A filter value with `&` and `+` reaches the form whole; a comma is refused by name.
        (
            "#/history?name=a%26b%2Bc&actor=x",
            "return document.getElementById('f-name').value === 'a&b+c' && document.querySelector('#history')".to_string(),
        ),
        (
            "#/history?name=a,type%3DNodeDrained",
            "const e = document.getElementById('filter-error'); return e && e.textContent.includes('Name') && !document.querySelector('#history')".to_string(),
        ),
        // The indicator reflects the view's own watches: none on a closed range, or the past.
        (
            "#/history?until=rv:3",
            "const c = document.getElementById('conn'); return document.querySelector('#history tbody tr') \
               && c.dataset.state === 'static' && c.textContent.includes('not live')"
                .to_string(),
        ),
        (
            "#/pool/worker",
            "return document.querySelector('#waiting') && document.querySelectorAll('.paged tbody tr').length === 2 \
               && document.getElementById('conn').dataset.state === 'live'"
                .to_string(),
        ),
    ] {
        view(b, hash, &ready).await;
        assert_eq!(errors(b).await, Vec::<String>::new(), "console errors on {hash}");
    }
    // Navigation moves the focus to the view's heading.
    assert_eq!(
        js(b, "return document.activeElement === document.querySelector('main h1')").await,
        json!(true),
        "the focus after a navigation"
    );
    // Times with a `+` offset, typed and from a URL: an hour ahead of UTC, the wall time now.
    js(
        b,
        "const t = new Date().toISOString().slice(0, 19) + '+01:00'; \
         location.hash = '#/history?since=' + encodeURIComponent(t); return true",
    )
    .await;
    wait_js(
        b,
        "the history since a +01:00 time",
        "return document.getElementById('f-since').value.endsWith('+01:00') \
           && document.querySelector('#history tbody tr') && !document.querySelector('main .error')",
    )
    .await;
    js(
        b,
        "const t = new Date(Date.now() + 7200e3).toISOString().slice(0, 19) + '+01:00'; \
         location.hash = '#/at?asOf=' + encodeURIComponent(t); return true",
    )
    .await;
    wait_js(
        b,
        "the fleet as of a +01:00 time",
        "const c = document.getElementById('conn'); \
         return document.querySelector('#past-configs li') && !document.querySelector('main .error') \
           && c.dataset.state === 'static' && c.textContent.includes('not live: the past')",
    )
    .await;
    assert_eq!(errors(b).await, Vec::<String>::new(), "console errors on +01:00 times");
    view(
        b,
        "#/pool/worker",
        "return document.querySelector('#waiting') && document.querySelectorAll('.paged tbody tr').length === 2",
    )
    .await;
    if let Some(dir) = &shots {
        save_screenshot(b, dir, "pool").await;
    }

    // "Skip to content" moves the focus to the view, without leaving it.
    b.find(Locator::Css("a.skip"))
        .await
        .unwrap()
        .send_keys(ENTER)
        .await
        .unwrap();
    wait_js(
        b,
        "the focus on the view",
        "return document.activeElement === document.getElementById('main') && location.hash === '#/pool/worker'",
    )
    .await;

    // Pause and resume, each after a confirmation, recorded with the dashboard user's identity
    // (its token's: admin) and reason.
    for (button, paused) in [("Pause…", true), ("Resume…", false)] {
        wait_js(
            b,
            button,
            &format!(
                "return document.getElementById('pause').textContent === {}",
                json!(button)
            ),
        )
        .await;
        // With the keyboard: Enter on the button, the reason typed, Enter to confirm.
        b.find(Locator::Id("pause"))
            .await
            .unwrap()
            .send_keys(ENTER)
            .await
            .unwrap();
        wait_js(
            b,
            "the confirmation dialog",
            "return document.querySelector('dialog[open] #pause-reason')",
        )
        .await;
        assert_eq!(c.pool("worker").spec.paused, !paused, "changed before the confirmation");
        let reason = b.find(Locator::Id("pause-reason")).await.unwrap();
        reason.send_keys("maintenance window").await.unwrap();
        reason.send_keys(ENTER).await.unwrap();
        c.wait_for("the pause applied", TIMEOUT, |s| {
            s.pools["worker"].spec.paused == paused
        })
        .await;
        // Paused is drawn with a CSS icon and the word (no ⏸ glyph, missing from common fonts);
        // the ages are live elements the page's clock redraws.
        wait_js(
            b,
            "the pool's paused state shown",
            &format!(
                "const r = document.querySelector('#pools tr[data-name=worker]'); \
                 return r && !!r.querySelector('.i-pause') === {paused} && r.innerText.includes('Paused') === {paused} \
                   && !r.innerText.includes('⏸') && r.querySelector('[data-since]')"
            ),
        )
        .await;
    }
    let paused_by = c
        .client
        .get_path::<Value>("/apis/history.mco.dev/v1/events?fieldSelector=actor=admin,type=PoolUpdated")
        .await
        .unwrap();
    let reasons: Vec<&str> = paused_by["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["reason"].as_str())
        .filter(|r| !r.is_empty())
        .collect();
    assert_eq!(reasons, ["maintenance window", "maintenance window"], "{paused_by}");

    // Applying a MachineConfig moves the pool's progress bar to done, without a reload.
    js(b, "window.__noReload = 1; return true").await;
    c.apply(&[
        common::examples().join("chrony.yaml"),
        common::examples().join("gzip-motd.yaml"),
    ])
    .await;
    let new = c
        .wait_rolled_out_with("worker", &old, &["99-worker-chrony", "99-worker-motd"], TIMEOUT)
        .await;
    let rv_applied = c.server.hub.published_seq();
    wait_js(
        b,
        "worker's progress bar at 2/2 done on the new render",
        &format!(
            "const r = document.querySelector('#pools tr[data-name=worker]'); \
             return r && r.innerText.includes('2/2 done') && r.querySelector('[title={}]') \
               && r.querySelector('progress').value === 2",
            json!(new)
        ),
    )
    .await;
    assert_eq!(
        js(b, "return window.__noReload").await,
        json!(1),
        "the page was reloaded"
    );

    // A MachineConfig's gzip file shows decompressed; the render says where each file came from.
    view(
        b,
        "#/mc/99-worker-motd",
        "return document.querySelector('details.file[data-path=\"/etc/motd\"] pre')",
    )
    .await;
    let motd = js(
        b,
        "return document.querySelector('details.file[data-path=\"/etc/motd\"]').textContent",
    )
    .await;
    assert!(
        motd.as_str()
            .unwrap()
            .contains("Authorized use only. This node is managed by mco"),
        "{motd}"
    );
    assert!(motd.as_str().unwrap().contains("(gzip)"), "{motd}");
    // Issue 29 item 8: the object as the API serves it, as YAML and as JSON, each parsing back
    // to what the API answers; its metadata listed.
    let served: Value = c
        .client
        .get_path(&format!("/apis/{}/v1/machineconfigs/99-worker-motd", common::GROUP))
        .await
        .unwrap();
    let text = |id: &'static str| async move {
        js(b, "document.getElementById('object-raw').open = true; return true").await;
        b.find(Locator::Id(id)).await.unwrap().click().await.unwrap();
        let fmt = id.trim_start_matches("as-");
        wait_js(b, fmt, &format!("return document.getElementById('object-text').dataset.format === '{fmt}' && document.getElementById('object-text').textContent")).await
    };
    let yaml = text("as-yaml").await;
    let parsed: Value = serde_saphyr::from_str(yaml.as_str().unwrap())
        .unwrap_or_else(|e| panic!("the YAML view does not parse: {e}\n{yaml}"));
    assert_eq!(parsed, served, "the YAML view:\n{}", yaml.as_str().unwrap());
    let json_text = text("as-json").await;
    let parsed: Value = serde_json::from_str(json_text.as_str().unwrap()).unwrap();
    assert_eq!(parsed, served, "the JSON view");
    // The scalars YAML would read as another type or another string stay strings.
    let tricky = json!({
        "words": ["true", "no", "Yes", "null", "~", "", " lead", "trail ", "1.0", "0x1f", "1e3", ".inf", "-", "a: b", "a #b", "#c",
                  "- d", "[e]", "{f}", "*g", "&h", "!i", "%j", "@k", "`l", "'m'", "\"n\"", "o\np\n", "tab\tq", "ünï", "r,s", "? t", "| u", "> v"],
        "numbers": [0, -1, 420, 1.5, 1e21], "bools": [true, false], "none": null,
        "empty": {"map": {}, "list": [], "nested": [[], {}, [[]], [{"a": []}]]},
        "keys": {"true": 1, "1": 2, "a b": 3, "": 4, "node-role.kubernetes.io/worker": ""},
    });
    let yaml = b
        .execute_async(
            "const done = arguments[arguments.length - 1]; const v = arguments[0]; import('/ui/object.js').then((o) => done(o.toYaml(v)));",
            vec![tricky.clone()],
        )
        .await
        .unwrap();
    let parsed: Value = serde_saphyr::from_str(yaml.as_str().unwrap()).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    assert_eq!(parsed, tricky, "{}", yaml.as_str().unwrap());
    let meta = js(b, "return document.getElementById('object-meta').innerText").await;
    for want in [
        served["metadata"]["resourceVersion"].as_str().unwrap(),
        served["metadata"]["uid"].as_str().unwrap(),
        "labels (1)",
    ] {
        assert!(meta.as_str().unwrap().contains(want), "{want} in {meta}");
    }
    if let Some(dir) = &shots {
        js(
            b,
            "document.querySelectorAll('details.file').forEach((d) => { d.open = true; }); return true",
        )
        .await;
        save_screenshot(b, dir, "machineconfig").await;
    }
    view(
        b,
        &format!("#/mc/{new}"),
        "return document.querySelector('#sources li')",
    )
    .await;
    let render = js(b, "return document.getElementById('main').innerText").await;
    let render = render.as_str().unwrap();
    assert!(render.contains("Rendered config of pool worker"), "{render}");
    for (path, source) in [
        ("/etc/motd", "99-worker-motd"),
        ("/etc/chrony.conf", "99-worker-chrony"),
    ] {
        let line = render
            .lines()
            .find(|l| l.contains(path))
            .unwrap_or_else(|| panic!("{path} in {render}"));
        assert!(line.contains(&format!("from {source}")), "{line}");
    }

    // A drifted file turns the node red, with the path.
    let conf = c.root("worker-0").join("etc/chrony.conf");
    let good = std::fs::read(&conf).unwrap();
    // The timeline listed before the drift, so its Degraded row can only come from the watch.
    view(
        b,
        "#/node/worker-0",
        "return document.querySelector('#node-state') && document.querySelector('#timeline')",
    )
    .await;
    // The node's MachineConfigNode phases (MCO's conditions), live from its watch.
    wait_js(
        b,
        "the MachineConfigNode section of worker-0",
        "const t = document.querySelector('#mcn-phases'); \
         return t && t.innerText.includes('UpdatePrepared') && t.innerText.includes('Node worker-0 Updated')",
    )
    .await;
    std::fs::write(&conf, b"server pool.ntp.org\n").unwrap();
    wait_js(
        b,
        "the drift panel naming /etc/chrony.conf",
        "const d = document.getElementById('drift'); \
         return d && d.innerText.includes('/etc/chrony.conf') && document.getElementById('node-state').classList.contains('row-bad') \
           && document.getElementById('node-state').innerText.includes('Degraded')",
    )
    .await;
    // The node's timeline follows the log: the newest row is the change to Degraded.
    wait_js(
        b,
        "the timeline's newest event",
        "const r = document.querySelector('#timeline tbody tr'); \
         return r && r.innerText.includes('NodeStateChanged') && r.innerText.includes('Degraded')",
    )
    .await;
    if let Some(dir) = &shots {
        save_screenshot(b, dir, "node-drift").await;
    }
    // The pool lists the drifted node (desired == current, Degraded) as degraded, not as
    // updating (MCO's isNodeUpdating: desired != current or Working); its NodeDegraded and
    // Degraded conditions True show ✖, never ✔.
    view(
        b,
        "#/pool/worker",
        "const d = document.getElementById('degraded'); return d && d.innerText.includes('worker-0') \
           && [...document.querySelectorAll('main table tr')].some(r => r.cells[0] && r.cells[0].textContent === 'NodeDegraded' && r.innerText.includes('True'))",
    )
    .await;
    // A pool that is only degraded (no node moving) is not "rolling" (issue 29 item 8).
    wait_js(
        b,
        "worker's progress saying degraded",
        "const t = document.querySelector('#pools tr[data-name=worker] .progress-text'); return t && t.textContent.includes('degraded')",
    )
    .await;
    assert!(
        !js(
            b,
            "return document.querySelector('#pools tr[data-name=worker] .progress-text').textContent"
        )
        .await
        .as_str()
        .unwrap()
        .contains("rolling"),
        "a degraded pool shown rolling"
    );
    let pool_page = js(
        b,
        "return { updating: document.getElementById('updating').innerText, \
           conds: [...document.querySelectorAll('main table tr')].filter(r => r.cells[0] && /Degraded$/.test(r.cells[0].textContent)) \
             .map(r => r.cells[0].textContent + ' ' + r.cells[1].textContent) }",
    )
    .await;
    assert!(
        !pool_page["updating"].as_str().unwrap().contains("worker-0"),
        "{pool_page}"
    );
    for c in pool_page["conds"].as_array().unwrap() {
        let c = c.as_str().unwrap();
        assert!(!c.contains('✔') || c.ends_with("False"), "{pool_page}");
        if c.ends_with("True") {
            assert!(c.contains('✖'), "{pool_page}");
        }
    }
    std::fs::write(&conf, good).unwrap();
    c.wait_for("worker-0 Done again", TIMEOUT, |_| node_state(c, "worker-0") == "Done")
        .await;
    wait_js(b, "the drift panel gone", "return !document.getElementById('drift')").await;

    // The diff view shows the change, attributed to its MachineConfig and its author.
    view(
        b,
        &format!("#/diff?from={old}&to={new}"),
        "return document.querySelector('#diff .diff-item')",
    )
    .await;
    let diff = js(b, "return document.getElementById('diff').innerText").await;
    let diff = diff.as_str().unwrap();
    assert!(diff.contains("file /etc/chrony.conf: added"), "{diff}");
    assert!(diff.contains("99-worker-chrony"), "{diff}");
    assert!(diff.contains("last changed by admin"), "{diff}");
    assert!(diff.contains("+ server ntp1.example.net iburst"), "{diff}");
    if let Some(dir) = &shots {
        save_screenshot(b, dir, "diff").await;
    }
    // Issue 29 item 8: the Machine Config Server as a new node sees it: per pool the render
    // served and each Ignition version asked for, as GET /config/worker answers it.
    view(
        b,
        "#/mcs-server",
        "return document.querySelector('#mcs-server tr[data-name=worker] [data-version]')",
    )
    .await;
    let mcs = js(
        b,
        "const r = document.querySelector('#mcs-server tr[data-name=worker]'); \
         return { serves: r.cells[2].querySelector('[title]').title, versions: [...r.querySelectorAll('[data-version]')].map((e) => e.dataset.version) }",
    )
    .await;
    assert_eq!(mcs["serves"], json!(new), "{mcs}");
    for v in ["3.5.0", "3.4.0", "3.2.0", "3.0.0", "2.2.0"] {
        assert!(mcs["versions"].as_array().unwrap().contains(&json!(v)), "{v}: {mcs}");
    }
    let served: Value = c
        .http()
        .get(format!("{url}/config/worker"))
        .header("accept", "application/vnd.coreos.ignition+json;version=3.4.0")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let files = served["storage"]["files"].as_array().map_or(0, Vec::len);
    let cell = js(b, "return [...document.querySelectorAll('#mcs-server tr[data-name=worker] [data-version]')].find((e) => e.dataset.version === '3.4.0').textContent").await;
    assert!(
        cell.as_str().unwrap().contains(&format!("{files} file(s)")),
        "{cell}: {files} files served"
    );

    // The pool page's Diff link: the pool's last change (its two newest renders), not an empty
    // form (issue 29 item 8).
    view(
        b,
        "#/diff?pool=worker",
        "return document.getElementById('diff-last') && document.querySelector('#diff .diff-item')",
    )
    .await;
    let last = js(b, "return document.getElementById('diff').innerText").await;
    // Its newest render is the one the rollout reached (the render before it may be an
    // intermediate one, of the first MachineConfig alone).
    let to = js(
        b,
        "return document.querySelectorAll('#diff > p:first-child [title]')[1].title",
    )
    .await;
    assert_eq!(to, json!(new), "{last}");
    assert!(last.as_str().unwrap().contains(": added"), "{last}");

    // Before the first event: rv 0, said so, without asking for an event 0.
    view(
        b,
        "#/at?asOf=2020-01-01T00:00:00Z",
        "const m = document.getElementById('past-moment'); return m && m.textContent.includes('before the first event')",
    )
    .await;
    assert_eq!(
        errors(b).await,
        Vec::<String>::new(),
        "console errors before the first event"
    );

    // A rollback to the current render changes nothing: said so, and not offered.
    view(
        b,
        &format!("#/rollback/worker?to={new}"),
        "return document.getElementById('rb-preview')",
    )
    .await;
    b.find(Locator::Id("rb-preview")).await.unwrap().click().await.unwrap();
    wait_js(
        b,
        "nothing would change",
        "const n = document.getElementById('rb-nothing'); return n && n.textContent.includes('Nothing would change') && !document.getElementById('rb-apply')",
    )
    .await;

    // A second pool fed by worker's MachineConfigs (no node): rolling worker back changes it
    // too, which needs "also change other pools" (the server refuses without `force`).
    let infra = json!({
        "apiVersion": format!("{}/v1", common::GROUP), "kind": "MachineConfigPool",
        "metadata": {"name": "infra"},
        "spec": {
            "machineConfigSelector": {"matchExpressions": [{"key": format!("{}/role", common::GROUP), "operator": "In", "values": ["worker", "infra"]}]},
            "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/infra": ""}},
        },
    });
    c.client
        .create(mco::model::Kind::MachineConfigPool, &infra, None)
        .await
        .expect("infra is created");
    c.wait_for("infra rendered", TIMEOUT, |s| {
        s.pools
            .get("infra")
            .is_some_and(|p| !p.spec.configuration.name.is_empty())
    })
    .await;

    // A RolloutPolicy with a canary wave: the preview shows the canary first and its bake time.
    let policy = json!({"apiVersion": "policy.mco.dev/v1", "kind": "RolloutPolicy", "metadata": {"name": "canary"},
        "spec": {"poolSelector": {"matchLabels": {"pools.operator.machineconfiguration.openshift.io/worker": ""}},
                 "canary": {"size": 1, "bakeTime": "0s"}}});
    c.client
        .create(mco::model::Kind::RolloutPolicy, &policy, None)
        .await
        .expect("the policy is created");

    // Rollback: preview (a dry run appends nothing), explicit confirmation, then live.
    view(
        b,
        &format!("#/rollback/worker?to={old}"),
        "return document.getElementById('rb-preview')",
    )
    .await;
    let selected = js(b, "return document.getElementById('rb-to').value").await;
    assert_eq!(selected, json!(old));
    let seq = c.server.hub.published_seq();
    b.find(Locator::Id("rb-preview")).await.unwrap().click().await.unwrap();
    // Without the option, the preview says it is needed before Roll back… can be used.
    wait_js(
        b,
        "the rollback preview, needing the option",
        "const a = document.getElementById('rb-apply'); return a && a.disabled && document.getElementById('rb-needs-force')",
    )
    .await;
    let preview = js(b, "return document.getElementById('preview').innerText").await;
    let preview = preview.as_str().unwrap();
    assert!(preview.contains("delete machineconfig/99-worker-chrony"), "{preview}");
    assert!(preview.contains("delete machineconfig/99-worker-motd"), "{preview}");
    assert!(preview.contains("wave 1 (canary, maxUnavailable 1): "), "{preview}");
    assert!(
        preview.contains("then the canaries bake 0s before the rest"),
        "{preview}"
    );
    assert_eq!(
        writes_after(c, seq),
        Vec::<String>::new(),
        "the preview wrote to the log"
    );
    // Any change to the form drops the preview: a new one is needed before rolling back.
    b.find(Locator::Id("rb-force")).await.unwrap().click().await.unwrap();
    wait_js(
        b,
        "the preview dropped",
        "return document.getElementById('rb-stale') && !document.getElementById('rb-apply')",
    )
    .await;
    b.find(Locator::Id("rb-preview")).await.unwrap().click().await.unwrap();
    wait_js(
        b,
        "the rollback preview again, with the option",
        "const a = document.getElementById('rb-apply'); return a && !a.disabled && !document.getElementById('rb-needs-force')",
    )
    .await;
    let page = js(b, "return document.getElementById('main').innerText").await;
    assert!(!page.as_str().unwrap().contains("null"), "{page}");
    if let Some(dir) = &shots {
        save_screenshot(b, dir, "rollback-preview").await;
    }
    b.find(Locator::Id("rb-apply")).await.unwrap().click().await.unwrap();
    wait_js(
        b,
        "the confirmation dialog",
        "return document.querySelector('dialog[open]')",
    )
    .await;
    assert_eq!(
        writes_after(c, seq),
        Vec::<String>::new(),
        "wrote before the confirmation"
    );
    b.find(Locator::Css("dialog button[value=ok]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_js(
        b,
        "the rollback applied",
        "return document.getElementById('rb-applied')",
    )
    .await;
    c.wait_for("worker back on the earlier render", TIMEOUT, |s| {
        let p = &s.pools["worker"];
        p.spec.configuration.name == old
            && p.status.configuration.name == old
            && p.condition_status("Updated") == "True"
    })
    .await;
    wait_js(
        b,
        "the followed rollout at 2/2 done on the earlier render",
        &format!(
            "const r = document.querySelector('#follow #pools tr[data-name=worker]'); \
             return r && r.innerText.includes('2/2 done') && r.querySelector('[title={}]')",
            json!(old)
        ),
    )
    .await;

    // Issue 29 item 8: the rollout timeline of a finished, past rollout (to `new`, before the
    // rollback): every node of the pool, in the order they were targeted (the log's
    // NodeDesiredConfigSet events), each done.
    let targeted: Value = c
        .client
        .get_path(
            "/apis/history.mco.dev/v1/events?fieldSelector=type=NodeDesiredConfigSet&includeObject=Object&limit=10000",
        )
        .await
        .unwrap();
    let desired_key = format!("{}/desiredConfig", common::GROUP);
    let mut order: Vec<String> = Vec::new();
    for e in targeted["items"].as_array().unwrap() {
        let name = e["object"]["name"].as_str().unwrap().to_string();
        if e["object"]["body"]["metadata"]["annotations"][&desired_key] == json!(new) && !order.contains(&name) {
            order.push(name);
        }
    }
    let mut members = common::workers(c);
    members.sort();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(sorted, members, "the nodes targeted at {new}: {targeted}");
    view(
        b,
        &format!("#/rollout/worker?to={new}"),
        "return document.querySelector('#rollout tbody tr')",
    )
    .await;
    let rows = js(
        b,
        "return [...document.querySelectorAll('#rollout tbody tr')].map((r) => ({ name: r.dataset.name, outcome: r.cells[3].textContent, \
           steps: [...r.querySelectorAll('.mark')].map((m) => m.dataset.step) }))",
    )
    .await;
    let names: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, order, "{rows}");
    for r in rows.as_array().unwrap() {
        assert!(r["outcome"].as_str().unwrap().contains("done"), "{rows}");
        let steps = strs(&r["steps"]);
        assert_eq!(steps.first(), Some(&"targeted"), "{rows}");
        assert!(steps.contains(&"done"), "{rows}");
    }
    // Its time axis: the start and the last mark, as times of day.
    let axis = js(
        b,
        "return [...document.querySelectorAll('#rollout-axis span')].map((s) => s.textContent)",
    )
    .await;
    let axis: Vec<String> = serde_json::from_value(axis).unwrap();
    assert!(
        axis.len() == 3 && axis[0].len() == 8 && axis[2].len() == 8 && axis[1].ends_with(" s"),
        "{axis:?}"
    );
    rollout_cordons_drawn(c, &new, &rows).await;
    assert_eq!(
        lanes_overlapping(b).await,
        Vec::<String>::new(),
        "the rollout timeline at 1400 px"
    );
    if let Some(dir) = &shots {
        save_screenshot(b, dir, "rollout-timeline").await;
    }

    // The time slider shows the fleet as it was before the change, marked as the past.
    view(
        b,
        &format!("#/at?rv={rv_before}"),
        "return document.querySelector('#past-configs li')",
    )
    .await;
    // Its marks include, at their resourceVersions, the rollback's MachineConfig writes (their
    // detail names the rollback, src/api/rollbacks.rs) and the drift's turn to Degraded.
    let log: Value = c
        .client
        .get_path("/apis/history.mco.dev/v1/events?fieldSelector=object.kind=MachineConfig&limit=10000")
        .await
        .unwrap();
    let rollbacks: Vec<u64> = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["detail"]
                .as_str()
                .is_some_and(|d| d.starts_with("rollback of pool worker"))
        })
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    let states: Value = c
        .client
        .get_path(
            "/apis/history.mco.dev/v1/events?fieldSelector=type=NodeStateChanged&includeObject=Object&limit=10000",
        )
        .await
        .unwrap();
    let state_key = format!("{}/state", common::GROUP);
    let degraded: Vec<u64> = states["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["object"]["body"]["metadata"]["annotations"][&state_key] == json!("Degraded"))
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert!(
        !rollbacks.is_empty() && !degraded.is_empty(),
        "rollback writes {rollbacks:?}, degradations {degraded:?}"
    );
    wait_js(
        b,
        "the slider's marks of the rollback and the degradation",
        &format!(
            "const has = (rvs, what) => rvs.every((rv) => document.querySelector(`#slider-strip .mark[data-rv='${{rv}}'][data-what=${{what}}]`)); \
             return has({}, 'rollback') && has({}, 'degraded')",
            json!(rollbacks),
            json!(degraded)
        ),
    )
    .await;
    let past = js(b, "return document.getElementById('main').innerText").await;
    let past = past.as_str().unwrap();
    assert!(past.contains(&format!("pool worker targeted {old}")), "{past}");
    assert!(past.contains("The past — read-only"), "{past}");
    assert!(past.contains(&format!("As of resourceVersion {rv_before}")), "{past}");
    if let Some(dir) = &shots {
        save_screenshot(b, dir, "time-slider").await;
        view(
            b,
            "#/history?pool=worker",
            "return document.querySelector('#history tbody tr')",
        )
        .await;
        save_screenshot(b, dir, "history").await;
        view(b, "#/pools", "return document.querySelector('#pools')").await;
        save_screenshot(b, dir, "pools").await;
    }
    // A MachineConfig the rollback deleted, as it was while applied: read from the past.
    view(
        b,
        &format!("#/mc/99-worker-chrony?rv={rv_applied}"),
        "return document.querySelector('details.file[data-path=\"/etc/chrony.conf\"] pre')",
    )
    .await;
    let then = js(b, "return document.getElementById('main').textContent").await;
    assert!(
        then.as_str().unwrap().contains("server ntp1.example.net iburst"),
        "{then}"
    );
    assert!(
        then.as_str()
            .unwrap()
            .contains(&format!("as of resourceVersion {rv_applied}")),
        "{then}"
    );
    assert_eq!(
        c.client
            .get_path::<Value>(&format!("/apis/{}/v1/machineconfigs/99-worker-chrony", common::GROUP))
            .await
            .map(|_| ())
            .map_err(|e| e.is_not_found()),
        Err(true),
        "the rollback deleted 99-worker-chrony"
    );
    // A deleted MachineConfig now: not found, with its history and its last version.
    view(
        b,
        "#/mc/99-worker-chrony",
        "return document.getElementById('last-version')",
    )
    .await;
    b.find(Locator::Id("last-version"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_js(
        b,
        "the last version of 99-worker-chrony",
        "return document.querySelector('details.file[data-path=\"/etc/chrony.conf\"] pre')",
    )
    .await;
    // The render that used it links the deleted source to its version then.
    view(
        b,
        &format!("#/mc/{new}"),
        "const a = [...document.querySelectorAll('#sources a')].find(a => a.textContent === '99-worker-chrony'); \
         return a && a.getAttribute('href').startsWith('#/mc/99-worker-chrony?rv=')",
    )
    .await;
    // Issue 29 item 1: the history opens at its newest event (live at its head), older pages
    // behind it.
    let head = c.server.hub.published_seq();
    view(
        b,
        "#/history?limit=20",
        &format!(
            "const rows = [...document.querySelectorAll('#history tbody tr')].map((r) => Number(r.dataset.rv)); \
             return rows.length >= 20 && document.getElementById('history-next') && rows[0] >= {head} \
               && rows.every((rv, i) => i === 0 || rv < rows[i - 1]) \
               && document.getElementById('conn').dataset.state === 'live'"
        ),
    )
    .await;
    // History pages are URLs: the older page's link carries the continue token (and the page
    // size); a page past the head watches nothing.
    let last_rv = js(
        b,
        "return Number(document.querySelector('#history tbody tr:last-child').dataset.rv)",
    )
    .await;
    b.find(Locator::Id("history-next"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_js(
        b,
        "the second history page, its own URL",
        &format!(
            "const c = document.getElementById('conn'); const r = document.querySelector('#history tbody tr'); \
             return location.hash.includes('continue=') && location.hash.includes('limit=20') \
               && r && Number(r.dataset.rv) < {last_rv} \
               && [...document.querySelectorAll('main a')].some(a => a.textContent.includes('Newest')) \
               && c.dataset.state === 'static' && c.textContent.includes('not live: past page')"
        ),
    )
    .await;
    assert_eq!(errors(b).await, Vec::<String>::new(), "console errors");
    narrow(b, &old, &new, shots.as_deref()).await;
    contrast(b, &old, &new).await;
}

/// A Chrome DevTools command through chromedriver (`POST /session/ID/goog/cdp/execute`).
#[derive(Debug)]
struct Cdp(&'static str, Value);

impl fantoccini::wd::WebDriverCompatibleCommand for Cdp {
    fn endpoint(
        &self,
        base: &reqwest::Url,
        session: Option<&str>,
    ) -> Result<reqwest::Url, <reqwest::Url as std::str::FromStr>::Err> {
        base.join(&format!("session/{}/goog/cdp/execute", session.unwrap_or_default()))
    }
    fn method_and_body(&self, _: &reqwest::Url) -> (axum::http::Method, Option<String>) {
        (
            axum::http::Method::POST,
            Some(json!({"cmd": self.0, "params": self.1}).to_string()),
        )
    }
}

/// The text of the page whose contrast with its background is below WCAG 2's AA minimum
/// (1.4.3: 4.5:1, 3:1 for large text, 24 px or 18.66 px bold; disabled controls are exempt):
/// each element's computed `color` against the first opaque `background-color` behind it
/// (translucent layers composited over it), both through the opacity of their ancestors.
const LOW_CONTRAST: &str = r#"
const parse = (c) => { const m = /rgba?\(([^)]+)\)/.exec(c); if (!m) return null;
  const p = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
const over = (top, under) => { const a = top[3]; return [0, 1, 2].map((i) => top[i] * a + under[i] * (1 - a)).concat(1); };
const lum = (c) => { const [r, g, b] = c.slice(0, 3).map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
function background(el) {
  const layers = [];
  for (let e = el; e; e = e.parentElement) {
    const bg = parse(getComputedStyle(e).backgroundColor);
    if (bg && bg[3] > 0) { layers.push(bg); if (bg[3] >= 1) break; }
  }
  let c = [255, 255, 255, 1];
  for (const l of layers.reverse()) c = over(l, c);
  return c;
}
const bad = [];
for (const el of document.querySelectorAll('body *')) {
  if (![...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
  if (el.closest(':disabled, [hidden], .skip, main.stale, datalist, option, script, style')) continue;
  const r = el.getBoundingClientRect();
  if (!r.width || !r.height) continue;
  const st = getComputedStyle(el);
  if (st.visibility === 'hidden') continue;
  const bg = background(el);
  const fg = over(parse(st.color), bg);
  const size = parseFloat(st.fontSize); const bold = Number(st.fontWeight) >= 700;
  const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
  const got = ratio(fg, bg);
  if (got < need) bad.push(`${got.toFixed(2)} < ${need}: ${el.tagName.toLowerCase()}.${el.className} "${el.textContent.trim().slice(0, 30)}" ${st.color} on rgb(${bg.slice(0, 3).map(Math.round)})`);
}
return [...new Set(bad)];
"#;

/// Issue 29 item 6: every text of every view, and a specimen of each state the page draws
/// (badges, errors, the Degraded panel, an action's error, the past), meets WCAG AA contrast in
/// the light and the dark theme (`prefers-color-scheme`, emulated through DevTools).
async fn contrast(b: &Browser, old: &str, new: &str) {
    let mut failures = Vec::new();
    for scheme in ["light", "dark"] {
        b.issue_cmd(Cdp(
            "Emulation.setEmulatedMedia",
            json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]}),
        ))
        .await
        .expect("the colour scheme is emulated");
        wait_js(
            b,
            scheme,
            &format!("return matchMedia('(prefers-color-scheme: {scheme})').matches"),
        )
        .await;
        // Away from the pools first, so that the first view is drawn anew (no specimen left).
        view(b, "#/mcs", "return document.querySelector('main h1')").await;
        for (hash, ready) in every_view(old, new) {
            view(b, &hash, &ready).await;
            for f in js(b, LOW_CONTRAST).await.as_array().unwrap() {
                failures.push(format!("{scheme} {hash}: {}", f.as_str().unwrap()));
            }
        }
        // A specimen of every state, drawn by the page's own helpers into the pools view.
        view(
            b,
            "#/pools",
            "return document.querySelector('#pools tr[data-name=worker]')",
        )
        .await;
        let drawn = b
            .execute_async(
                r#"const done = arguments[arguments.length - 1];
                import('/ui/dom.js').then((d) => {
                  const v = document.querySelector('main .view');
                  const states = ['Done', 'Working', 'Degraded', 'Unreconcilable', 'Paused', 'Unknown'].map((s) => d.badge(s));
                  // Every badge kind (ok, bad, busy, warn, none) on every row background a
                  // badge sits on: a plain row and a degraded one (`row-bad`).
                  const badges = () => [...['Done', 'Working', 'Degraded', 'Unreconcilable', 'Paused', 'Unknown'].map((s) => d.badge(s)), d.badge('Cordoned', 'warn'),
                      d.condBadge('Degraded', 'True'), d.condBadge('Degraded', 'False'), d.condBadge('Updated', 'True'), d.condBadge('Updating', 'True'),
                      d.condBadge('Updating', 'False'), d.condBadge('Updated', 'False'), d.condBadge('Updated', 'Maybe')];
                  v.append(d.h('p', { id: 'specimen' }, states, d.badge('Cordoned', 'warn'),
                      d.condBadge('Degraded', 'True'), d.condBadge('Updated', 'True'), d.condBadge('Updating', 'True'), d.condBadge('Updated', 'False')),
                    d.h('table', { id: 'specimen-rows' }, d.h('tbody', {}, d.h('tr', {}, d.h('td', {}, badges())),
                      d.h('tr', { class: 'row-bad' }, d.h('td', {}, badges())))),
                    d.errorBox(new Error('refused: the server said no')),
                    d.h('section', { class: 'drift' }, d.h('h2', {}, '✖ Degraded'), d.h('p', {}, 'content mismatch')),
                    d.actionError('Pause of pool worker', new Error('forbidden')),
                    d.h('p', { class: 'row-bad' }, 'a bad row'), d.h('p', { class: 'ok' }, '✔ applied'),
                    d.h('div', { class: 'past-banner' }, 'The past'), d.h('p', { class: 'muted' }, 'muted text'),
                    d.h('button', { type: 'button' }, 'A button'), d.h('button', { type: 'button', class: 'danger' }, 'Roll back…'));
                  done(true);
                });"#,
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(drawn, json!(true));
        for f in js(b, LOW_CONTRAST).await.as_array().unwrap() {
            failures.push(format!("{scheme} specimen: {}", f.as_str().unwrap()));
        }
    }
    b.issue_cmd(Cdp("Emulation.setEmulatedMedia", json!({"features": []})))
        .await
        .expect("the colour scheme is back");
    assert!(failures.is_empty(), "text below AA contrast:\n{}", failures.join("\n"));
}

/// The views the narrow-screen and contrast checks visit, each with its ready condition.
fn every_view(old: &str, new: &str) -> Vec<(String, String)> {
    let has = |sel: &str| format!("return document.querySelector({})", json!(sel));
    vec![
        ("#/pools".into(), has("#pools tr[data-name=worker]")),
        (
            "#/pool/worker".into(),
            "return document.querySelector('#waiting') && document.querySelector('.paged tbody tr')".into(),
        ),
        ("#/nodes".into(), has(".paged tbody tr")),
        ("#/node/worker-0".into(), has("#timeline tbody tr")),
        ("#/mcs".into(), has("tr[data-name=\"00-worker\"]")),
        ("#/mc/99-worker-motd?rv=1000000".into(), has("main .error, main h1")),
        (format!("#/mc/{old}"), has("#sources li")),
        ("#/history".into(), has("#history tbody tr")),
        (format!("#/diff?from={old}&to={new}"), has("#diff .diff-item")),
        ("#/rollback/worker".into(), has("#rb-preview")),
        (format!("#/rollout/worker?to={new}"), has("#rollout tbody tr")),
        ("#/mcs-server".into(), has("#mcs-server [data-version]")),
        ("#/at".into(), has("#past-configs li")),
    ]
}

/// Issue 29 item 5: at a phone's width (390×844) no view scrolls the page sideways (tables
/// scroll inside their own box), the rollout timeline's lanes are whole on screen with their
/// marks apart (`lanes_overlapping`), and the pools table shows its key columns (UPDATED,
/// DEGRADED) on screen.
async fn narrow(b: &Browser, old: &str, new: &str, shots: Option<&Path>) {
    b.set_window_size(390, 844).await.expect("the window is resized");
    wait_js(b, "a 390 px viewport", "return window.innerWidth <= 390").await;
    let mut overflowing = Vec::new();
    for (hash, ready) in every_view(old, new) {
        view(b, &hash, &ready).await;
        let w = js(
            b,
            "const d = document.documentElement; return d.scrollWidth > d.clientWidth \
               ? [d.scrollWidth, [...document.querySelectorAll('main *')].filter((e) => e.getBoundingClientRect().right > d.clientWidth + 1 \
                   && !e.closest('table')).slice(0, 3).map((e) => e.tagName + '.' + e.className + ' ' + e.textContent.slice(0, 40))] : null",
        )
        .await;
        if !w.is_null() {
            overflowing.push(format!("{hash}: {w}"));
        }
        // The rollout timeline reflows: each lane whole on screen (not cut off inside the
        // table's own scroll box), its marks inside it and apart.
        if hash.starts_with("#/rollout/") {
            overflowing.extend(lanes_overlapping(b).await.into_iter().map(|w| format!("{hash}: {w}")));
            if let Some(dir) = shots {
                save_screenshot(b, dir, "rollout-timeline-390").await;
            }
        }
    }
    view(
        b,
        "#/pools",
        "return document.querySelector('#pools tr[data-name=worker]')",
    )
    .await;
    if let Some(dir) = shots {
        save_screenshot(b, dir, "pools-390").await;
    }
    let cols = js(
        b,
        "return [...document.querySelectorAll('#pools th')].filter((th) => th.getBoundingClientRect().right <= document.documentElement.clientWidth) \
           .map((th) => th.textContent)",
    )
    .await;
    assert!(overflowing.is_empty(), "views wider than 390 px: {overflowing:#?}");
    let slack = js(b, "const d = document.documentElement; return d.clientWidth - [...document.querySelectorAll('#pools th')].find((th) => th.textContent === 'DEGRADED').getBoundingClientRect().right").await;
    eprintln!("at 390 px the DEGRADED column ends {slack} px inside the viewport");
    for col in ["NAME", "UPDATED", "UPDATING", "DEGRADED"] {
        assert!(
            cols.as_array().unwrap().contains(&json!(col)),
            "{col} off-screen at 390 px: on screen {cols}"
        );
    }
    b.set_window_size(1400, 1000).await.expect("the window is resized back");
}

/// The events appended after `seq`, but the daemons' node lease renewals (their heartbeat,
/// every 10 s whatever the page does): what the dashboard itself wrote.
fn writes_after(c: &Cluster, seq: u64) -> Vec<String> {
    let hub = &c.server.hub;
    hub.store()
        .read_range(seq, hub.published_seq())
        .map(|e| e.expect("the log reads"))
        // What the dashboard's requests wrote: not the controllers' own passes (a pool's status
        // after its render may land meanwhile), nor the daemons' (node leases, reports).
        .filter(|e| e.object_kind != "Lease")
        .filter(|e| {
            !["controller:", "system:node:", "daemon:"]
                .iter()
                .any(|p| e.actor.starts_with(p))
        })
        .map(|e| format!("{} {} {} by {}", e.seq, e.event_type, e.name, e.actor))
        .collect()
}

/// The trial's defect 1: the nodes view's sort and filters are in its URL, as the pools view's
/// are, so a reload (or the link shared) opens the same rows: the workers (name filter) in
/// state Done (state filter), by name descending (NAME's header pressed twice).
async fn nodes_sort_and_filter_survive_a_reload(b: &Browser, c: &Cluster) {
    view(
        b,
        "#/nodes",
        "return document.querySelectorAll('.paged tbody tr').length === 3",
    )
    .await;
    let search = b.find(Locator::Css(".paged input[type=search]")).await.unwrap();
    search.send_keys("worker").await.unwrap();
    b.find(Locator::Css(".paged select.state-filter"))
        .await
        .unwrap()
        .select_by_value("Done")
        .await
        .unwrap();
    js(
        b,
        "const n = document.querySelector('.paged button.sort[data-col=NAME]'); n.click(); n.click(); return true",
    )
    .await;
    let want = "#/nodes?sort=NAME&order=desc&state=Done&name=worker";
    // What the rules say the rows are: the workers in state Done, by name (code points, as
    // kubectl sorts), descending.
    let mut rows: Vec<String> = common::workers(c)
        .into_iter()
        .filter(|n| node_state(c, n) == "Done")
        .collect();
    rows.sort();
    rows.reverse();
    assert!(!rows.is_empty(), "no worker is Done");
    let drawn = format!(
        "return [...document.querySelectorAll('.paged tbody tr')].map((r) => r.dataset.name).join(' ') === {} \
           && document.querySelector('.paged th[aria-sort=descending] button[data-col=NAME]') \
           && document.querySelector('.paged select.state-filter').value === 'Done' \
           && document.querySelector('.paged input[type=search]').value === 'worker' && location.hash === {}",
        json!(rows.join(" ")),
        json!(want)
    );
    wait_js(b, "the nodes sorted and filtered, in the URL", &drawn).await;
    let entries = js(b, "return history.length").await;
    b.refresh().await.unwrap();
    wait_js(b, "the same rows, sort and filters after a reload", &drawn).await;
    assert_eq!(
        js(b, "return history.length").await,
        entries,
        "a choice added a history entry"
    );
}

/// The trial's defect 2: the rollout timeline draws the cordon of every node the history says
/// was cordoned in the rollout (between the pool's PoolConfigurationSet to `target` and its
/// next one): a `NodeDrained` or `NodeCordoned` event whose node is `spec.unschedulable`
/// (the drain controller cordons in the write that answers the drain, src/controller/drain.rs),
/// one cordoned mark per such event, before that node's drained mark. `rows` are the table's
/// rows (`name`, `steps`).
async fn rollout_cordons_drawn(c: &Cluster, target: &str, rows: &Value) {
    let get = |path: String| async move { c.client.get_path(&path).await.unwrap() };
    let sets: Value = get("/apis/history.mco.dev/v1/events?fieldSelector=object.kind=MachineConfigPool,object.name=worker,type=PoolConfigurationSet&includeObject=Object&limit=10000".into()).await;
    let sets = sets["items"].as_array().unwrap();
    let i = sets
        .iter()
        .rposition(|e| e["object"]["body"]["spec"]["configuration"]["name"] == json!(target))
        .expect("the rollout's start");
    let start = sets[i]["seq"].as_u64().unwrap();
    let end = sets.get(i + 1).map_or(u64::MAX, |e| e["seq"].as_u64().unwrap());
    let events: Value =
        get("/apis/history.mco.dev/v1/events?fieldSelector=object.kind=Node&includeObject=Object&limit=10000".into())
            .await;
    let mut cordons: std::collections::BTreeMap<String, usize> = Default::default();
    for e in events["items"].as_array().unwrap() {
        let seq = e["seq"].as_u64().unwrap();
        let kind = e["type"].as_str().unwrap();
        if (start..end).contains(&seq)
            && ["NodeDrained", "NodeCordoned"].contains(&kind)
            && e["object"]["body"]["spec"]["unschedulable"] == json!(true)
        {
            *cordons
                .entry(e["object"]["name"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
    }
    assert!(
        !cordons.is_empty(),
        "the history has no cordon in the rollout to {target}"
    );
    for (node, n) in &cordons {
        let row = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == json!(node))
            .unwrap_or_else(|| panic!("no row for {node}: {rows}"));
        let steps = strs(&row["steps"]);
        assert_eq!(
            steps.iter().filter(|s| **s == "cordoned").count(),
            *n,
            "{node}'s cordons: {steps:?}"
        );
        let (cordoned, drained) = (
            steps.iter().position(|s| *s == "cordoned"),
            steps.iter().position(|s| *s == "drained"),
        );
        assert!(
            drained.is_none() || cordoned < drained,
            "{node}: cordoned after drained: {steps:?}"
        );
    }
}

/// The rollout timeline's lanes (once the page has laid them out) that stick out of the
/// viewport, and marks outside their lane or over another (their boxes intersect by more
/// than half a pixel): a line each, none when the timeline is legible.
async fn lanes_overlapping(b: &Browser) -> Vec<String> {
    let v = b
        .execute_async(
            r#"const done = arguments[arguments.length - 1];
            requestAnimationFrame(() => requestAnimationFrame(() => {
              const d = document.documentElement.clientWidth; const bad = [];
              for (const lane of document.querySelectorAll('#rollout .lane')) {
                const l = lane.getBoundingClientRect(); const name = lane.closest('tr').dataset.name;
                if (l.left < -0.5 || l.right > d + 0.5) bad.push(`${name}: lane ${l.left.toFixed(1)}-${l.right.toFixed(1)} px, the viewport 0-${d}`);
                const ms = [...lane.querySelectorAll('.mark')].map((m) => [m.dataset.step, m.getBoundingClientRect()]);
                ms.forEach(([s, r], i) => {
                  if (r.left < l.left - 0.5 || r.right > l.right + 0.5) bad.push(`${name}: ${s} outside its lane`);
                  for (const [t, q] of ms.slice(i + 1)) if (r.left < q.right - 0.5 && q.left < r.right - 0.5) bad.push(`${name}: ${s} over ${t}`);
                });
              }
              done(bad);
            }));"#,
            vec![],
        )
        .await
        .expect("script runs");
    serde_json::from_value(v).unwrap()
}

/// The strings of a JSON array (a rollout row's steps).
fn strs(v: &Value) -> Vec<&str> {
    v.as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect()
}
