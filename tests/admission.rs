//! Admission against a real server on 127.0.0.1:0: what Ignition, systemd, Linux or Kubernetes
//! would refuse is refused at the API (HTTP 422 Invalid, the field named) and nothing is
//! appended to the log; and a gzip file whose verification hash is over the decompressed
//! contents is accepted and written as those contents on a node.

mod common;

use common::{assert_invalid, Cluster};
use mco::client::Client;
use mco::model::{Kind, DEFAULT_GROUP};
use mco::server::{self, RunningServer, ServerConfig};
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

async fn start(dir: &Path) -> (RunningServer, Client) {
    let s = server::start(ServerConfig {
        data_dir: dir.to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        group: DEFAULT_GROUP.into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let c = s.admin_client("test");
    (s, c)
}

/// Waits until the worker pool has a rendered config (the server has settled its first render).
async fn wait_rendered(s: &RunningServer) {
    let mut changes = s.hub.changes();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while s
        .hub
        .state()
        .pools
        .get("worker")
        .is_none_or(|p| p.spec.configuration.name.is_empty())
    {
        assert!(tokio::time::Instant::now() < deadline, "worker never rendered");
        let _ = tokio::time::timeout(Duration::from_millis(200), changes.changed()).await;
    }
}

fn mc(name: &str, config: Value) -> Value {
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": config}})
}

fn files(fs: Value) -> Value {
    json!({"ignition": {"version": "3.4.0"}, "storage": {"files": fs}})
}

fn units(us: Value) -> Value {
    json!({"ignition": {"version": "3.4.0"}, "systemd": {"units": us}})
}

fn pool(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": name}, "spec": spec})
}

fn node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// Standard padded base64 (test data only).
fn b64(data: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &b)| acc | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                A[(n >> (18 - 6 * i) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    out
}

fn sha512_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha512::digest(data))
}

#[tokio::test]
async fn what_can_never_apply_is_refused_naming_the_field_and_nothing_is_appended() {
    let dir = tempfile::tempdir().unwrap();
    let (s, c) = start(dir.path()).await;
    wait_rendered(&s).await;
    // Valid objects to update below.
    c.create(Kind::Node, &node("node-a"), None).await.unwrap();
    c.create(Kind::MachineConfig, &mc("99-worker-ok", files(json!([]))), None)
        .await
        .unwrap();
    let seq = s.hub.store().last_seq();

    let f0 = "spec.config.storage.files[0]";
    let u0 = "spec.config.systemd.units[0]";
    let subdomain = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    let gz = format!("data:;base64,{}", b64(&gzip(b"hello\n")));
    let cases: Vec<(&str, Kind, Value, String, String)> = vec![
        // Node paths.
        (
            "file at /",
            Kind::MachineConfig,
            mc("bad-root", files(json!([{"path": "/", "contents": {"source": "data:,x"}}]))),
            format!("{f0}.path"),
            "path \"/\" is the root directory".into(),
        ),
        (
            "component longer than NAME_MAX",
            Kind::MachineConfig,
            mc("bad-name-max", files(json!([{"path": format!("/etc/{}", "n".repeat(256))}]))),
            format!("{f0}.path"),
            "Linux file names are at most 255 bytes (NAME_MAX)".into(),
        ),
        (
            "path longer than PATH_MAX",
            Kind::MachineConfig,
            mc("bad-path-max", files(json!([{"path": format!("/{}", vec!["d".repeat(200); 21].join("/"))}]))),
            format!("{f0}.path"),
            "Linux paths are at most 4095 bytes".into(),
        ),
        // Units and dropins.
        (
            "unit named by an absolute path",
            Kind::MachineConfig,
            mc("bad-unit-abs", units(json!([{"name": "/root/example.service", "enabled": true, "contents": "[Unit]\n"}]))),
            format!("{u0}.name"),
            "invalid systemd unit name \"/root/example.service\": character '/' is not allowed".into(),
        ),
        (
            "unit name with ..",
            Kind::MachineConfig,
            mc("bad-unit-dots", units(json!([{"name": "a/../b.service", "contents": "[Unit]\n"}]))),
            format!("{u0}.name"),
            "character '/' is not allowed".into(),
        ),
        (
            "unit name without a prefix",
            Kind::MachineConfig,
            mc("bad-unit-empty", units(json!([{"name": ".service", "contents": "[Unit]\n"}]))),
            format!("{u0}.name"),
            "the name before the suffix is empty".into(),
        ),
        (
            "dropin named by a path",
            Kind::MachineConfig,
            mc("bad-dropin", units(json!([{"name": "a.service", "dropins": [{"name": "../x.conf", "contents": "[Service]\n"}]}]))),
            format!("{u0}.dropins[0].name"),
            "a file name, not a path".into(),
        ),
        (
            "file at a unit's path",
            Kind::MachineConfig,
            mc(
                "bad-conflict",
                json!({"ignition": {"version": "3.4.0"},
                    "storage": {"files": [{"path": "/etc/systemd/system/foo.service", "contents": {"source": "data:,x"}}]},
                    "systemd": {"units": [{"name": "foo.service", "contents": "[Unit]\n"}]}}),
            ),
            format!("{f0}.path"),
            "path conflicts with systemd unit or dropin".into(),
        ),
        // Contents.
        (
            "unpadded base64",
            Kind::MachineConfig,
            mc("bad-b64", files(json!([{"path": "/etc/a", "contents": {"source": "data:;base64,aGk"}}]))),
            format!("{f0}.contents.source"),
            "illegal base64 data at input byte 0".into(),
        ),
        (
            "hash of the compressed bytes",
            Kind::MachineConfig,
            mc(
                "bad-hash",
                files(json!([{"path": "/etc/a", "contents": {"source": gz.clone(), "compression": "gzip",
                    "verification": {"hash": format!("sha512-{}", sha512_hex(&gzip(b"hello\n")))}}}])),
            ),
            format!("{f0}.contents.verification.hash"),
            "hash verification failed".into(),
        ),
        // Owners.
        (
            "uid -1",
            Kind::MachineConfig,
            mc("bad-uid", files(json!([{"path": "/etc/a", "user": {"id": -1}}]))),
            format!("{f0}.user.id"),
            "invalid user id -1: Linux user ids are 0 to 4294967294".into(),
        ),
        (
            "gid 4294967295",
            Kind::MachineConfig,
            mc("bad-gid", files(json!([{"path": "/etc/a", "group": {"id": 4294967295u64}}]))),
            format!("{f0}.group.id"),
            "invalid group id 4294967295".into(),
        ),
        (
            "owner name",
            Kind::MachineConfig,
            mc("bad-owner", files(json!([{"path": "/etc/a", "user": {"name": "no such:user"}}]))),
            format!("{f0}.user.name"),
            "invalid user name".into(),
        ),
        // Versions.
        (
            "empty version",
            Kind::MachineConfig,
            mc("bad-version-empty", json!({"ignition": {"version": ""}, "storage": {}})),
            "spec.config.ignition.version".into(),
            "parsing Ignition config failed: invalid version. Supported spec versions: 2.2,3.0,3.1,3.2,3.3,3.4,3.5".into(),
        ),
        (
            "unknown version",
            Kind::MachineConfig,
            mc("bad-version-4", json!({"ignition": {"version": "4.0.0"}})),
            "spec.config.ignition.version".into(),
            "parsing Ignition config failed: unknown version. Supported spec versions: 2.2,3.0,3.1,3.2,3.3,3.4,3.5".into(),
        ),
        // Kubernetes metadata, every kind.
        (
            "node name",
            Kind::Node,
            node("Bad_Node NAME"),
            "metadata.name".into(),
            format!("Invalid value: \"Bad_Node NAME\": {subdomain}"),
        ),
        (
            "machine config name",
            Kind::MachineConfig,
            mc("99_Worker", files(json!([]))),
            "metadata.name".into(),
            format!("Invalid value: \"99_Worker\": {subdomain}"),
        ),
        (
            "label key",
            Kind::Node,
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-b", "labels": {"bad key": "x"}}}),
            "metadata.labels".into(),
            "Invalid value: \"bad key\": name part must consist of alphanumeric characters".into(),
        ),
        (
            "label value",
            Kind::MachineConfigPool,
            json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
                "metadata": {"name": "infra", "labels": {"a": "v".repeat(64)}}}),
            "metadata.labels".into(),
            "must be no more than 63 characters".into(),
        ),
        (
            "annotation key",
            Kind::MachineConfig,
            json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
                "metadata": {"name": "bad-annotation", "annotations": {"a/b/c": "x"}}}),
            "metadata.annotations".into(),
            "Invalid value: \"a/b/c\": a valid label key".into(),
        ),
        (
            "annotations too large",
            Kind::Node,
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-c", "annotations": {"a": "x".repeat(262144)}}}),
            "metadata.annotations".into(),
            "Too long: must have at most 262144 bytes".into(),
        ),
        // Pools.
        (
            "pool name too long for its rendered configs",
            Kind::MachineConfigPool,
            pool(&"p".repeat(212), json!({})),
            "metadata.name".into(),
            "must be no more than 211 characters: the pool's rendered configs are named rendered-<pool>-<32 hex digits>".into(),
        ),
        (
            "In without values",
            Kind::MachineConfigPool,
            pool("infra", json!({"machineConfigSelector": {"matchExpressions": [
                {"key": "machineconfiguration.openshift.io/role", "operator": "In", "values": ["worker", "infra"]},
                {"key": "team", "operator": "In"}]}})),
            "spec.machineConfigSelector.matchExpressions[1].values".into(),
            "Required value: must be specified when `operator` is 'In' or 'NotIn'".into(),
        ),
        (
            "Exists with values",
            Kind::MachineConfigPool,
            pool("infra", json!({"nodeSelector": {"matchExpressions": [{"key": "team", "operator": "Exists", "values": ["x"]}]}})),
            "spec.nodeSelector.matchExpressions[0].values".into(),
            "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'".into(),
        ),
        (
            "selector key and value",
            Kind::MachineConfigPool,
            pool("infra", json!({"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/infra": "not ok"}}})),
            "spec.nodeSelector.matchLabels".into(),
            "Invalid value: \"not ok\": a valid label must be an empty string".into(),
        ),
    ];
    for (what, kind, obj, field, rule) in &cases {
        assert_invalid(what, c.create(*kind, obj, None).await, field, rule);
    }
    // Updates are checked as creations are.
    assert_invalid(
        "label patch on a node",
        c.merge_patch(
            Kind::Node,
            "node-a",
            &json!({"metadata": {"labels": {"bad key!": ""}}}),
            false,
        )
        .await,
        "metadata.labels",
        "Invalid value: \"bad key!\"",
    );
    assert_invalid(
        "unit patch on a machine config",
        c.merge_patch(
            Kind::MachineConfig,
            "99-worker-ok",
            &json!({"spec": {"config": units(json!([{"name": "/root/example.service", "enabled": true}]))}}),
            false,
        )
        .await,
        "spec.config.systemd.units[0].name",
        "character '/' is not allowed",
    );

    let by_test: Vec<_> = s
        .hub
        .store()
        .read_after(seq)
        .map(|e| e.unwrap())
        .filter(|e| e.actor == "admin")
        .collect();
    assert!(by_test.is_empty(), "refused writes append nothing: {by_test:?}");
    {
        let st = s.hub.state();
        assert!(st
            .machine_configs
            .keys()
            .all(|k| !k.starts_with("bad-") && !k.contains('_')));
        assert!(!st.pools.contains_key("infra"));
        assert_eq!(st.nodes.keys().collect::<Vec<_>>(), ["node-a"]);
        assert!(st.nodes["node-a"].metadata.labels.as_ref().is_none_or(|l| l.is_empty()));
    }
    s.stop().await;
}

/// Ignition hashes what it writes: a gzip file whose hash is over the decompressed contents is
/// accepted, rendered, and written on a node as the decompressed contents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gzip_file_verified_over_its_decompressed_contents_is_written_on_the_node() {
    let c = Cluster::start(0, 1).await;
    let before = c.pool("worker").spec.configuration.name;
    let gz = format!("data:;base64,{}", b64(&gzip(b"hello\n")));
    let obj = mc(
        "99-worker-hello",
        files(
            json!([{"path": "/etc/hello", "mode": 0o644, "contents": {"source": gz, "compression": "gzip",
            "verification": {"hash": format!("sha512-{}", sha512_hex(b"hello\n"))}}}]),
        ),
    );
    c.client.create(Kind::MachineConfig, &obj, None).await.unwrap();
    c.wait_rolled_out("worker", &before, Duration::from_secs(60)).await;
    let written = std::fs::read(c.root("worker-0").join("etc/hello")).unwrap();
    assert_eq!(written, b"hello\n");
    c.stop().await;
}
