//! Rules of mco-facts 8.1, one check per rule; expected values from the facts.

use super::*;
use serde_json::json;

fn kc(spec: Value) -> KubeletConfig {
    serde_json::from_value(json!({"metadata": {"name": "k"}, "spec": spec})).unwrap()
}

fn pool(name: &str) -> MachineConfigPool {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {format!("pools.operator.machineconfiguration.openshift.io/{name}"): ""}}}))
        .unwrap()
}

fn refused(spec: Value, pool_name: &str) -> RuleError {
    validate(&kc(spec), &pool(pool_name)).unwrap_err()
}

fn conf(files: &[(String, String)]) -> Value {
    serde_saphyr::from_str(&files[0].1).unwrap()
}

#[test]
fn forbidden_fields_are_refused_naming_the_field() {
    for (key, value) in [
        ("cgroupDriver", json!("cgroupfs")),
        ("clusterDNS", json!(["1.1.1.1"])),
        ("clusterDomain", json!("x.local")),
        ("featureGates", json!({"A": true})),
        ("failSwapOn", json!(false)),
    ] {
        let e = refused(json!({"kubeletConfig": {key: value}}), "worker");
        assert_eq!(e.field, format!("spec.kubeletConfig.{key}"));
        // Values as Go prints them (MCO's fmt.Errorf with %s / %v).
        let shown = match key {
            "clusterDNS" => "[1.1.1.1]",
            "featureGates" => "map[A:true]",
            "failSwapOn" => "false",
            "cgroupDriver" => "cgroupfs",
            _ => "x.local",
        };
        assert!(e.message.ends_with(&format!("but contains: {shown}")), "{}", e.message);
        assert!(
            e.message
                .starts_with(&format!("KubeletConfiguration: {key} is not allowed to be set")),
            "{}",
            e.message
        );
    }
    let e = refused(
        json!({"kubeletConfig": {"memorySwap": {"swapBehavior": "LimitedSwap"}}}),
        "worker",
    );
    assert_eq!(e.field, "spec.kubeletConfig.memorySwap.swapBehavior");
}

#[test]
fn log_level_is_one_to_ten() {
    let e = refused(json!({"logLevel": 0}), "worker");
    assert_eq!(
        (e.field.as_str(), e.message.as_str()),
        ("spec.logLevel", "KubeletConfig's LogLevel is not valid [1,10]: 0")
    );
    validate(&kc(json!({"logLevel": 10})), &pool("worker")).unwrap();
}

#[test]
fn combinations_and_static_pod_path() {
    let e = refused(
        json!({"autoSizingReserved": true, "kubeletConfig": {"systemReserved": {"cpu": "1"}}}),
        "worker",
    );
    assert_eq!(e.field, "spec.kubeletConfig.systemReserved");
    assert!(e
        .message
        .contains("autoSizingReserved and systemdReserved cannot be set together"));
    let e = refused(
        json!({"kubeletConfig": {"systemReservedCgroup": "/a.slice", "systemCgroups": "/b.slice"}}),
        "worker",
    );
    assert_eq!(e.field, "spec.kubeletConfig.systemReservedCgroup");
    // staticPodPath: set at all on a control-plane pool, non-empty elsewhere.
    assert_eq!(
        refused(json!({"kubeletConfig": {"staticPodPath": ""}}), "master").field,
        "spec.kubeletConfig.staticPodPath"
    );
    assert_eq!(
        refused(json!({"kubeletConfig": {"staticPodPath": "/x"}}), "worker").field,
        "spec.kubeletConfig.staticPodPath"
    );
    validate(&kc(json!({"kubeletConfig": {"staticPodPath": ""}})), &pool("worker")).unwrap();
    validate(
        &kc(json!({"kubeletConfig": {"systemReservedCgroup": "/a.slice", "systemCgroups": "/a.slice"}})),
        &pool("worker"),
    )
    .unwrap();
}

#[test]
fn key_presence_merge_keeps_explicit_false_and_zero() {
    let files = generated_files(
        &kc(json!({"kubeletConfig": {"maxPods": 300, "protectKernelDefaults": false, "podPidsLimit": 0, "evictionHard": {"memory.available": "500Mi"}}})),
        &pool("worker"),
        &TemplateSettings::default(),
    )
    .unwrap();
    let c = conf(&files);
    assert_eq!(c["maxPods"], 300);
    assert_eq!(c["protectKernelDefaults"], false);
    assert_eq!(c["podPidsLimit"], 0);
    assert_eq!(c["evictionHard"]["memory.available"], "500Mi");
    // Untouched template values stay.
    assert_eq!(c["clusterDomain"], "cluster.local");
    assert_eq!(c["cgroupDriver"], "systemd");
    let mut base = json!({"a": {"b": 1, "c": 2}, "d": [1, 2]});
    merge_present(&mut base, &json!({"a": {"c": 0, "e": null}, "d": []}));
    assert_eq!(base, json!({"a": {"b": 1, "c": 0}, "d": []}));
}

#[test]
fn system_reserved_goes_to_the_node_sizing_env_with_mcos_defaults() {
    let files = generated_files(
        &kc(json!({"kubeletConfig": {"systemReserved": {"memory": "3Gi", "pid": "1000"}}})),
        &pool("worker"),
        &TemplateSettings::default(),
    )
    .unwrap();
    let c = conf(&files);
    assert_eq!(c["systemReserved"], json!({"pid": "1000"}));
    let env = files.iter().find(|(p, _)| p == NODE_SIZING_ENV).unwrap();
    assert_eq!(
        env.1,
        "NODE_SIZING_ENABLED=false\nSYSTEM_RESERVED_MEMORY=3Gi\nSYSTEM_RESERVED_CPU=500m\nSYSTEM_RESERVED_ES=1Gi\n"
    );
    let files = generated_files(
        &kc(json!({"autoSizingReserved": true})),
        &pool("worker"),
        &TemplateSettings::default(),
    )
    .unwrap();
    let env = files.iter().find(|(p, _)| p == NODE_SIZING_ENV).unwrap();
    assert!(env.1.starts_with("NODE_SIZING_ENABLED=true\n"));
    let files = generated_files(
        &kc(json!({"kubeletConfig": {"maxPods": 1}})),
        &pool("worker"),
        &TemplateSettings::default(),
    )
    .unwrap();
    assert_eq!(
        files.len(),
        1,
        "no env file without systemReserved or autoSizingReserved"
    );
}

#[test]
fn log_level_dropin_and_tls_profile() {
    let files = generated_files(
        &kc(json!({"logLevel": 4, "tlsSecurityProfile": {"type": "Modern"}})),
        &pool("worker"),
        &TemplateSettings::default(),
    )
    .unwrap();
    let drop = files.iter().find(|(p, _)| p == LOGGING_DROPIN).unwrap();
    assert_eq!(drop.1, "[Service]\nEnvironment=\"KUBELET_LOG_LEVEL=4\"\n");
    let c = conf(&files);
    assert_eq!(c["tlsMinVersion"], "VersionTLS13");
    assert!(c.get("tlsCipherSuites").is_none());
    let (min, ciphers) = tls_settings(&json!({"type": "Custom", "custom": {"minTLSVersion": "VersionTLS11", "ciphers": ["ECDHE-RSA-AES128-GCM-SHA256"]}})).unwrap();
    assert_eq!(
        (min.as_str(), ciphers),
        (
            "VersionTLS11",
            vec!["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".to_string()]
        )
    );
}

#[test]
fn selector_matches_pool_labels_and_empty_matches_nothing() {
    let pools = [pool("master"), pool("worker")];
    let sel: LabelSelector =
        serde_json::from_value(json!({"matchLabels": {"pools.operator.machineconfiguration.openshift.io/worker": ""}}))
            .unwrap();
    let m = matching_pools(Some(&sel), &pools);
    assert_eq!(m.iter().map(|p| p.name()).collect::<Vec<_>>(), ["worker"]);
    assert!(matching_pools(None, &pools).is_empty());
}
