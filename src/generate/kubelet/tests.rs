//! Rules of mco-facts 8.1, one check per rule. The tables named after MCO's tests are ported
//! from `pkg/controller/kubelet-config/helpers_test.go` and `kubelet_config_controller_test.go`
//! (inputs and expected values as MCO's tests state them).

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

/// The kubelet.conf of a generated MachineConfig's files.
fn conf(files: &[(String, String)]) -> Value {
    let (_, text) = files
        .iter()
        .find(|(p, _)| p == templates::KUBELET_CONF)
        .expect("kubelet.conf is generated");
    serde_saphyr::from_str(text).unwrap()
}

/// MCO's tests call `generateKubeletIgnFiles` with a base configuration of their own: this is
/// that call ([`kubelet_files`] over `base`), returning the decoded kubelet.conf.
fn generate(base: Value, spec: Value) -> Result<Value, RuleError> {
    kubelet_files(&kc(spec), base).map(|f| conf(&f))
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

/// MCO TestKubeletConfigLogLevel: 0, 2, 10 and unset are valid; -1 and 11 are refused with
/// "KubeletConfig's LogLevel is not valid [0,10]: N".
#[test]
fn log_level_is_zero_to_ten() {
    for ok in [
        json!({"logLevel": 0}),
        json!({"logLevel": 2}),
        json!({"logLevel": 10}),
        json!({}),
    ] {
        validate_spec(&kc(ok.clone())).unwrap_or_else(|e| panic!("{ok}: {e:?}"));
    }
    for bad in [-1, 11] {
        let e = validate_spec(&kc(json!({"logLevel": bad}))).unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.message),
            (
                "spec.logLevel",
                format!("KubeletConfig's LogLevel is not valid [0,10]: {bad}")
            )
        );
    }
    // Level 0 is written as such (MCO `createNewKubeletLogLevelIgnition`).
    let files = generated_files(
        &kc(json!({"logLevel": 0})),
        &pool("worker"),
        &TemplateSettings::default(),
    )
    .unwrap();
    let drop = files.iter().find(|(p, _)| p == LOGGING_DROPIN).unwrap();
    assert_eq!(drop.1, "[Service]\nEnvironment=\"KUBELET_LOG_LEVEL=0\"\n");
}

/// MCO TestKubeletConfigDenylistedOptions: each denylisted option refused, maxPods accepted.
#[test]
fn mco_denylisted_options() {
    for user in [
        json!({"cgroupDriver": "some_value"}),
        json!({"clusterDNS": ["1.1.1.1"]}),
        json!({"clusterDomain": "some_value"}),
        json!({"featureGates": {"SomeFeatureGate": true}}),
        json!({"failSwapOn": true}),
        json!({"memorySwap": {"swapBehavior": "NoSwap"}}),
    ] {
        assert!(
            validate_spec(&kc(json!({"kubeletConfig": user.clone()}))).is_err(),
            "{user}"
        );
    }
    validate_spec(&kc(json!({"kubeletConfig": {"maxPods": 100}}))).unwrap();
}

fn pool_with(name: &str, node_selector: Value) -> MachineConfigPool {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"nodeSelector": node_selector}})).unwrap()
}

/// MCO TestIsControlPlanePool.
#[test]
fn mco_is_control_plane_pool() {
    let worker_sel = json!({"matchLabels": {"node-role.kubernetes.io/worker": ""}});
    let master_sel = json!({"matchLabels": {"node-role.kubernetes.io/master": ""}});
    for (pool, want) in [
        (pool_with("master", master_sel.clone()), true),
        (pool_with("arbiter", master_sel.clone()), true),
        (pool_with("worker", worker_sel.clone()), false),
        (pool_with("custom-pool", worker_sel.clone()), false),
        (pool_with("infra-master", master_sel.clone()), true),
        (
            pool_with(
                "infra-master-expr",
                json!({"matchExpressions": [{"key": "node-role.kubernetes.io/master", "operator": "Exists"}]}),
            ),
            true,
        ),
        (
            pool_with(
                "infra-master-in",
                json!({"matchExpressions": [{"key": "node-role.kubernetes.io/master", "operator": "In", "values": [""]}]}),
            ),
            true,
        ),
        (
            pool_with(
                "not-master",
                json!({"matchExpressions": [{"key": "node-role.kubernetes.io/master", "operator": "DoesNotExist"}]}),
            ),
            false,
        ),
        (pool_with("custom-nil", Value::Null), false),
    ] {
        assert_eq!(is_control_plane(&pool), want, "{}", pool.name());
    }
}

/// MCO TestStaticPodPathPoolValidation: a non-empty staticPodPath is refused on every pool;
/// `""` is allowed on worker and custom pools but refused on control-plane pools (the key is
/// looked for in the raw JSON).
#[test]
fn mco_static_pod_path_pool_validation() {
    let master_sel = json!({"matchLabels": {"node-role.kubernetes.io/master": ""}});
    let worker_sel = json!({"matchLabels": {"node-role.kubernetes.io/worker": ""}});
    let non_empty = kc(json!({"kubeletConfig": {"staticPodPath": "/some/path"}}));
    for p in [
        pool_with("master", master_sel.clone()),
        pool_with("arbiter", master_sel.clone()),
        pool_with("infra-master", master_sel.clone()),
        pool_with("worker", worker_sel.clone()),
        pool_with("custom-pool", worker_sel.clone()),
    ] {
        let e = validate(&non_empty, &p).unwrap_err();
        assert_eq!(e.field, "spec.kubeletConfig.staticPodPath", "{}", p.name());
    }
    let e = validate(&non_empty, &pool_with("worker", worker_sel.clone())).unwrap_err();
    assert_eq!(
        e.message,
        "KubeletConfiguration: staticPodPath must be empty for pool \"worker\", but contains: /some/path"
    );
    let explicit_empty = kc(json!({"kubeletConfig": {"staticPodPath": ""}}));
    validate(&explicit_empty, &pool_with("worker", worker_sel.clone())).unwrap();
    validate(&explicit_empty, &pool_with("custom-pool", worker_sel)).unwrap();
    for name in ["master", "arbiter"] {
        let e = validate(&explicit_empty, &pool_with(name, master_sel.clone())).unwrap_err();
        assert_eq!(
            e.message,
            format!("KubeletConfiguration: staticPodPath is not allowed to be set for control plane pool \"{name}\"")
        );
    }
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
    assert_eq!(
        e.message,
        "KubeletConfiguration: systemReservedCgroup (/a.slice) must match systemCgroups (/b.slice)"
    );
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
    merge_user(&mut base, &json!({"a": {"c": 0, "e": null}, "d": [3]}));
    assert_eq!(base, json!({"a": {"b": 1, "c": 0}, "d": [3]}));
}

/// mergo never copies a Go zero value over the template (`""`, empty list/map, zero
/// duration); the kubelet refuses `containerRuntimeEndpoint: ""` and
/// `nodeStatusUpdateFrequency: 0` and defaults the rest, so the template's values stay
/// (the corpus NTO files write these).
#[test]
fn zero_values_keep_the_templates_as_mergo() {
    let mut base = json!({"staticPodPath": "/etc/kubernetes/manifests", "containerRuntimeEndpoint": "unix:///var/run/crio/crio.sock",
        "nodeStatusUpdateFrequency": "10s", "authentication": {"webhook": {"cacheTTL": "2m0s", "enabled": true}},
        "tlsCipherSuites": ["A"], "evictionHard": {"memory.available": "100Mi"}});
    let want = base.clone();
    merge_user(
        &mut base,
        &json!({"staticPodPath": "", "containerRuntimeEndpoint": "", "nodeStatusUpdateFrequency": "0s",
            "authentication": {"webhook": {"cacheTTL": "0s"}}, "tlsCipherSuites": [], "evictionHard": {}}),
    );
    assert_eq!(base, want);
}

/// `DecodeKubeletConfig` refuses values of the wrong Go type: "KubeletConfig could not be
/// unmarshalled", checked before anything else but `logLevel` (MCO `validateUserKubeletConfig`).
#[test]
fn values_of_the_wrong_type_are_refused_as_mcos_decode() {
    let e = refused(json!({"kubeletConfig": {"maxPods": "abc"}}), "worker");
    assert_eq!(e.field, "spec.kubeletConfig.maxPods");
    assert_eq!(
        e.message,
        "KubeletConfig could not be unmarshalled, err: json: cannot unmarshal string into Go struct field KubeletConfiguration.maxPods of type int32"
    );
    let e = validate_spec(&kc(json!({"kubeletConfig": {"evictionHard": "x"}}))).unwrap_err();
    assert_eq!(e.field, "spec.kubeletConfig.evictionHard");
    assert!(e.message.starts_with("KubeletConfig could not be unmarshalled, err: "));
    // A type error wins over a forbidden field the decode never reaches.
    let e = refused(
        json!({"kubeletConfig": {"maxPods": true, "cgroupDriver": "x"}}),
        "worker",
    );
    assert_eq!(e.field, "spec.kubeletConfig.maxPods");
    assert!(generated_files(
        &kc(json!({"kubeletConfig": {"maxPods": "abc"}})),
        &pool("worker"),
        &TemplateSettings::default()
    )
    .is_err());
}

/// MCO TestReserveSystemCPUs: with `reservedSystemCPUs` set, `systemReservedCgroup` is cleared
/// and only the `system-reserved*` entries leave `enforceNodeAllocatable` (no `kubeletConfig`
/// written; the values come from the base).
#[test]
fn mco_reserve_system_cpus() {
    for (cpus, cgroup, enforce, want_cgroup, want_enforce) in [
        (
            "0-1",
            "/system.slice",
            json!(["pods", "system-reserved-compressible"]),
            "",
            json!(["pods"]),
        ),
        (
            "",
            "/system.slice",
            json!(["pods", "system-reserved-compressible"]),
            "/system.slice",
            json!(["pods", "system-reserved-compressible"]),
        ),
        ("0-3", "", json!(["pods"]), "", json!(["pods"])),
    ] {
        let base =
            json!({"reservedSystemCPUs": cpus, "systemReservedCgroup": cgroup, "enforceNodeAllocatable": enforce});
        let c = kubelet_files(&kc(json!({})), base.clone()).map(|f| conf(&f)).unwrap();
        assert_eq!(c["systemReservedCgroup"].as_str().unwrap_or(""), want_cgroup, "{base}");
        assert_eq!(c["enforceNodeAllocatable"], want_enforce, "{base}");
        assert_eq!(c["reservedSystemCPUs"].as_str().unwrap_or(""), cpus);
    }
    // MCO's fourth case, "should preserve kube-reserved": the fix-up keeps it ...
    let base = json!({"reservedSystemCPUs": "0-1", "systemReservedCgroup": "/system.slice", "enforceNodeAllocatable": ["pods", "kube-reserved"]});
    let mut c = base.clone();
    reserved_fixups(&mut c, None);
    assert_eq!(c["enforceNodeAllocatable"], json!(["pods", "kube-reserved"]));
    assert!(c.get("systemReservedCgroup").is_none());
    // ... but the kubelet refuses kube-reserved enforcement without kubeReservedCgroup, which
    // reservedSystemCPUs excludes: mco refuses what MCO would write.
    let e = kubelet_files(&kc(json!({})), base).unwrap_err();
    assert_eq!(e.field, "spec.kubeletConfig.enforceNodeAllocatable");
    // `pods` is put first when it is missing.
    let mut c = json!({"reservedSystemCPUs": "0", "enforceNodeAllocatable": ["system-reserved"]});
    reserved_fixups(&mut c, None);
    assert_eq!(c["enforceNodeAllocatable"], json!(["pods"]));
}

/// MCO TestCGroupKubeletConfigSpec: the user's maxPods and reservedSystemCPUs are merged, the
/// cgroup cleared, enforcement `[pods]`.
#[test]
fn mco_cgroup_kubelet_config_spec() {
    let base = json!({"maxPods": 110, "reservedSystemCPUs": "0-1", "systemReservedCgroup": "/system.slice",
        "enforceNodeAllocatable": ["pods", "system-reserved-compressible"]});
    let c = generate(
        base,
        json!({"kubeletConfig": {"maxPods": 250, "reservedSystemCPUs": "0-3"}}),
    )
    .unwrap();
    assert_eq!(c["maxPods"], 250);
    assert_eq!(c["reservedSystemCPUs"], "0-3");
    assert_eq!(c["systemReservedCgroup"].as_str().unwrap_or(""), "");
    assert_eq!(c["enforceNodeAllocatable"], json!(["pods"]));
}

/// MCO TestEmptyStringOverride: `enforceNodeAllocatable: [pods]` without system-reserved
/// clears the base's `systemReservedCgroup`.
#[test]
fn mco_empty_string_override() {
    let base = json!({"maxPods": 110, "systemReservedCgroup": "/system.slice",
        "enforceNodeAllocatable": ["pods", "system-reserved-compressible"]});
    let c = generate(
        base,
        json!({"kubeletConfig": {"maxPods": 100, "systemReservedCgroup": "", "enforceNodeAllocatable": ["pods"]}}),
    )
    .unwrap();
    assert_eq!(c["maxPods"], 100);
    assert_eq!(c["systemReservedCgroup"].as_str().unwrap_or(""), "");
    assert_eq!(c["enforceNodeAllocatable"], json!(["pods"]));
}

/// MCO TestPartialUserConfig: a KubeletConfig that mentions neither `systemReservedCgroup` nor
/// `enforceNodeAllocatable` keeps both from the base.
#[test]
fn mco_partial_user_config() {
    let base = json!({"maxPods": 110, "systemReservedCgroup": "/system.slice",
        "enforceNodeAllocatable": ["pods", "system-reserved-compressible"]});
    let c = generate(base, json!({"kubeletConfig": {"maxPods": 200}})).unwrap();
    assert_eq!(c["maxPods"], 200);
    assert_eq!(c["systemReservedCgroup"], "/system.slice");
    assert_eq!(
        c["enforceNodeAllocatable"],
        json!(["pods", "system-reserved-compressible"])
    );
}

/// MCO TestSystemCgroupsMismatch: the merged cgroups must match.
#[test]
fn mco_system_cgroups_mismatch() {
    let base = json!({"maxPods": 110, "systemReservedCgroup": "/system.slice",
        "enforceNodeAllocatable": ["pods", "system-reserved-compressible"]});
    let e = generate(base, json!({"kubeletConfig": {"systemCgroups": "/foo.slice"}})).unwrap_err();
    assert!(
        e.message
            .contains("systemReservedCgroup (/system.slice) must match systemCgroups (/foo.slice)"),
        "{}",
        e.message
    );
    assert_eq!(e.field, "spec.kubeletConfig.systemCgroups");
}

/// The same rules over the real worker template: a maxPods-only KubeletConfig (the
/// managed-cluster-config `03-kubelet-config.yaml` kind) keeps the template's cgroup and
/// enforcement; `enforceNodeAllocatable: [pods, system-reserved]` keeps the cgroup, so the
/// kubelet accepts the result; `[pods, kube-reserved]` without `kubeReservedCgroup` is
/// refused, naming the kubelet's rule.
#[test]
fn the_worker_template_keeps_its_cgroup_and_the_kubelet_accepts_the_result() {
    let s = TemplateSettings::default();
    let gen = |user: Value| generated_files(&kc(json!({"kubeletConfig": user})), &pool("worker"), &s);
    let c = conf(&gen(json!({"maxPods": 500})).unwrap());
    assert_eq!(c["systemReservedCgroup"], "/system.slice");
    assert_eq!(
        c["enforceNodeAllocatable"],
        json!(["pods", "system-reserved-compressible"])
    );
    let c = conf(&gen(json!({"enforceNodeAllocatable": ["pods", "system-reserved"]})).unwrap());
    assert_eq!(c["systemReservedCgroup"], "/system.slice");
    assert_eq!(c["enforceNodeAllocatable"], json!(["pods", "system-reserved"]));
    accept::check(&c).unwrap();
    let c = conf(&gen(json!({"reservedSystemCPUs": "0-1"})).unwrap());
    assert!(c.get("systemReservedCgroup").is_none());
    assert_eq!(c["enforceNodeAllocatable"], json!(["pods"]));
    let e = gen(json!({"enforceNodeAllocatable": ["pods", "kube-reserved"]})).unwrap_err();
    assert_eq!(e.field, "spec.kubeletConfig.enforceNodeAllocatable");
    assert!(
        e.message.starts_with("the kubelet would refuse the merged kubelet.conf: invalid configuration: kubeReservedCgroup (--kube-reserved-cgroup) must be specified"),
        "{}",
        e.message
    );
    // The master template has neither key: nothing to keep or clear.
    let c = conf(&generated_files(&kc(json!({"kubeletConfig": {"maxPods": 100}})), &pool("master"), &s).unwrap());
    assert!(c.get("systemReservedCgroup").is_none() && c.get("enforceNodeAllocatable").is_none());
    assert_eq!(c["failSwapOn"], true);
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
        files.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
        [templates::KUBELET_CONF],
        "no env file without systemReserved or autoSizingReserved"
    );
    // MCO's file order: env file, logging dropin, kubelet.conf.
    let files = generated_files(
        &kc(json!({"logLevel": 3, "autoSizingReserved": false})),
        &pool("worker"),
        &TemplateSettings::default(),
    )
    .unwrap();
    assert_eq!(
        files.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
        [NODE_SIZING_ENV, LOGGING_DROPIN, templates::KUBELET_CONF]
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
