//! The Machine Config Server (mco-facts section 7) over real HTTP, on the API listener and on
//! its own (`mcs_listen`, MCO's 22623/22624).

use mco::server::{self, ServerConfig};
use serde_json::Value;
use std::time::Duration;

const IGN: &str = "application/vnd.coreos.ignition+json";

fn decode(source: &str) -> Vec<u8> {
    mco::ignition::decode_data_url(source).unwrap()
}

fn file<'a>(cfg: &'a Value, path: &str) -> &'a Value {
    cfg["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == path)
        .unwrap_or_else(|| panic!("{path} not served"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_pool_serves_mcos_files_in_each_version() {
    let dir = tempfile::tempdir().unwrap();
    let s = server::start(ServerConfig {
        data_dir: dir.path().to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        mcs_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..Default::default()
    })
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let rendered = loop {
        let name = s
            .hub
            .state()
            .pools
            .get("worker")
            .map(|p| p.spec.configuration.name.clone());
        if let Some(n) = name.filter(|n| !n.is_empty()) {
            break n;
        }
        assert!(tokio::time::Instant::now() < deadline, "worker pool rendered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mcs = format!("http://{}", s.mcs_addr.unwrap());
    let http = s.admin_http();
    let get = |base: &str, path: &str, accept: Option<&str>| {
        let mut r = http.get(format!("{base}{path}"));
        if let Some(a) = accept {
            r = r.header("accept", a);
        }
        r.send()
    };

    for base in [s.url(), mcs.clone()] {
        // No Accept: mco's 3.4.0 (MCO: 2.2.0, a documented difference).
        let resp = get(&base, "/config/worker", None).await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "application/json");
        let len: usize = resp.headers()["content-length"].to_str().unwrap().parse().unwrap();
        let cfg: Value = resp.json().await.unwrap();
        assert_eq!(cfg["ignition"]["version"], "3.4.0");
        assert_eq!(serde_json::to_string(&cfg).unwrap().len(), len);
        let ann: Value = serde_json::from_slice(&decode(
            file(&cfg, "/etc/machine-config-daemon/node-annotations.json")["contents"]["source"]
                .as_str()
                .unwrap(),
        ))
        .unwrap();
        let g = mco::model::DEFAULT_GROUP;
        for k in ["currentConfig", "desiredConfig", "firstPivotConfig"] {
            assert_eq!(ann[format!("{g}/{k}")], rendered.as_str(), "{k}");
        }
        assert_eq!(ann[format!("{g}/state")], "Done");
        let content = file(&cfg, "/etc/mcs-machine-config-content.json");
        assert_eq!(content["mode"], 420);
        assert_eq!(content["overwrite"], true);
        let mc: Value = serde_json::from_slice(&decode(content["contents"]["source"].as_str().unwrap())).unwrap();
        assert_eq!(mc["metadata"]["name"], rendered.as_str());
        let enc = file(&cfg, "/etc/ignition-machine-config-encapsulated.json");
        let enc: Value = serde_json::from_slice(&decode(enc["contents"]["source"].as_str().unwrap())).unwrap();
        assert_eq!(
            enc["spec"]["config"],
            serde_json::json!({"ignition": {"version": "3.4.0"}})
        );
        mco::ignition::parse_config(&cfg, "config").expect("valid Ignition");

        // Each Accept of section 7.
        for (accept, want) in [
            (format!("{IGN};version=3.1.0"), "3.1.0"),
            (format!("{IGN};version=3.5.2"), "3.5.0"),
            (format!("{IGN};version=3.99.0"), "3.5.0"),
            (format!("{IGN};version=2.4.0, {IGN};version=1;q=0.5"), "2.2.0"),
        ] {
            let cfg: Value = get(&base, "/config/worker", Some(&accept))
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(cfg["ignition"]["version"], want, "{accept}");
            let enc = file(&cfg, "/etc/ignition-machine-config-encapsulated.json");
            let enc: Value = serde_json::from_slice(&decode(enc["contents"]["source"].as_str().unwrap())).unwrap();
            assert_eq!(enc["spec"]["config"]["ignition"]["version"], want);
        }
        let v2: Value = get(&base, "/config/worker", Some(&format!("{IGN};version=2.2.0")))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(file(&v2, "/etc/mcs-machine-config-content.json")["filesystem"], "root");
        // The spec 2.2 answer reads back through mco's own spec-2 input path.
        mco::ignition::parse_config(&v2, "config").expect("valid spec 2.2");

        // Errors: MCO's codes with empty bodies.
        let resp = get(&base, "/config/worker", Some(&format!("{IGN};version=4.0.0")))
            .await
            .unwrap();
        assert_eq!(resp.status(), 400);
        assert_eq!(resp.text().await.unwrap(), "");
        let resp = get(&base, "/config/nosuchpool", None).await.unwrap();
        assert_eq!(resp.status(), 500);
        assert_eq!(resp.text().await.unwrap(), "");
        let resp = http.post(format!("{base}/config/worker")).send().await.unwrap();
        assert_eq!(resp.status(), 405);
        let head = http.head(format!("{base}/config/worker")).send().await.unwrap();
        assert_eq!(head.status(), 200);
        assert_eq!(head.headers()["content-length"].to_str().unwrap(), len.to_string());
        assert_eq!(head.text().await.unwrap(), "");
    }
    // The separate listener serves nothing else.
    let resp = get(&mcs, "/apis", None).await.unwrap();
    assert_eq!(resp.status(), 404);
    assert_eq!(resp.text().await.unwrap(), "");
    assert_eq!(get(&mcs, "/healthz", None).await.unwrap().status(), 200);
    s.stop().await;
}

/// Item 9 of issue 24: HEAD goes wherever GET goes (MCO's `pkg/server/api.go` serves
/// `GET|HEAD /config/<pool>`; a bootstrap, node or reader token that may GET may HEAD), and a
/// method a route does not take is its 405 with `Allow` for every identity, as for the admin:
/// the method is checked before the role, so a refusal never hides which methods exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_goes_where_get_goes_and_methods_are_checked_before_roles() {
    let dir = tempfile::tempdir().unwrap();
    let s = server::start(ServerConfig {
        data_dir: dir.path().to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        mcs_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..Default::default()
    })
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while s
        .hub
        .state()
        .pools
        .get("worker")
        .is_none_or(|p| p.spec.configuration.name.is_empty())
    {
        assert!(tokio::time::Instant::now() < deadline, "worker pool rendered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let admin = s.admin_client("test");
    let mut tokens = vec![("admin", s.admin_token().unwrap())];
    for (who, spec) in [
        ("bootstrap", serde_json::json!({"kind": "bootstrap"})),
        ("reader", serde_json::json!({"kind": "reader"})),
        ("node", serde_json::json!({"kind": "node", "node": "worker-0"})),
    ] {
        let t: Value = admin
            .post_path("/apis/auth.mco.dev/v1/tokens", &serde_json::json!({"spec": spec}))
            .await
            .unwrap();
        tokens.push((who, t["status"]["token"].as_str().unwrap().to_string()));
    }
    let http = reqwest::Client::new();
    let mcs = format!("http://{}", s.mcs_addr.unwrap());
    for base in [s.url(), mcs] {
        let full = http
            .get(format!("{base}/config/worker"))
            .bearer_auth(&tokens[0].1)
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        for (who, token) in &tokens {
            let head = http
                .head(format!("{base}/config/worker"))
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            assert_eq!(head.status(), 200, "{who}: HEAD {base}/config/worker");
            assert_eq!(
                head.headers()["content-length"].to_str().unwrap(),
                full.len().to_string(),
                "{who}"
            );
            for method in ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
                let resp = http
                    .request(method.parse().unwrap(), format!("{base}/config/worker"))
                    .bearer_auth(token)
                    .body("{}")
                    .send()
                    .await
                    .unwrap();
                assert_eq!(resp.status(), 405, "{who}: {method} {base}/config/worker");
                assert_eq!(resp.headers()["allow"], "GET,HEAD", "{who}: {method}");
            }
        }
    }
    // Every route: a method it does not take is 405 with the same Allow for every identity.
    // GET-only routes refuse POST; the resource routes take GET, HEAD, POST, PUT, PATCH and
    // DELETE and refuse OPTIONS.
    let get_only = [
        "/config/worker",
        "/metrics",
        "/apis",
        "/api/v1",
        "/apis/machineconfiguration.openshift.io/v1",
        "/openapi/v3",
        "/version",
        "/healthz",
        "/ui",
    ];
    let resources = [
        "/api/v1/nodes",
        "/api/v1/nodes/worker-0/status",
        "/apis/machineconfiguration.openshift.io/v1/machineconfigs",
        "/apis/machineconfiguration.openshift.io/v1/machineconfigpools/worker",
    ];
    let cases = get_only.iter().map(|p| (*p, "POST", "GET,HEAD")).chain(
        resources
            .iter()
            .map(|p| (*p, "OPTIONS", "GET,HEAD,POST,PUT,PATCH,DELETE")),
    );
    for (path, method, allow) in cases {
        for (who, token) in &tokens {
            let resp = http
                .request(method.parse().unwrap(), format!("{}{path}", s.url()))
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 405, "{who}: {method} {path}");
            let got: Vec<&str> = resp.headers()["allow"].to_str().unwrap().split(',').collect();
            let mut got: Vec<&str> = got.into_iter().map(str::trim).collect();
            let mut want: Vec<&str> = allow.split(',').collect();
            got.sort_unstable();
            want.sort_unstable();
            assert_eq!(got, want, "{who}: {method} {path}");
        }
    }
    // A method the route takes is still the role's to refuse: a reader's POST is 403.
    let resp = http
        .post(format!(
            "{}/apis/machineconfiguration.openshift.io/v1/machineconfigs",
            s.url()
        ))
        .bearer_auth(&tokens[2].1)
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    // Without a token: the method is still checked first (MCO's server answers 405 to anyone),
    // and a method the route takes needs the token.
    let resp = http.post(format!("{}/config/worker", s.url())).send().await.unwrap();
    assert_eq!(resp.status(), 405);
    let resp = http.head(format!("{}/config/worker", s.url())).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    s.stop().await;
}
