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
