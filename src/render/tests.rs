//! Render tests mirroring MCO `pkg/controller/common/helpers_test.go` (mco-facts 13 items 1-5).

use super::*;
use crate::ignition::Config;
use serde_json::json;

/// An MC with the role label (`None` = no labels at all) and a spec given as JSON.
fn mc(name: &str, role: Option<&str>, spec: Value) -> MachineConfig {
    let mut v = json!({"metadata": {"name": name}, "spec": spec});
    if let Some(role) = role {
        v["metadata"]["labels"] = json!({ ROLE_LABEL: role });
    }
    serde_json::from_value(v).unwrap()
}

fn ign(extra: Value) -> Value {
    let mut v = json!({"ignition": {"version": "3.4.0"}});
    v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    v
}

fn merged(mcs: &[MachineConfig]) -> MachineConfigSpec {
    let refs: Vec<&MachineConfig> = mcs.iter().collect();
    merge_machine_configs(&refs).unwrap()
}

fn config_of(spec: &MachineConfigSpec) -> Config {
    serde_json::from_value(spec.config.clone().unwrap()).unwrap()
}

/// One merge case: inputs, then the expected JSON at each pointer of the merged spec.
fn check(name: &str, mcs: &[MachineConfig], expected: &[(&str, Value)]) {
    let spec = serde_json::to_value(merged(mcs)).unwrap();
    for (pointer, want) in expected {
        let got = spec.pointer(pointer).cloned().unwrap_or(Value::Null);
        assert_eq!(&got, want, "{name}: {pointer} in {spec:#}");
    }
}

#[test]
fn fips_only_gives_empty_config_and_defaults() {
    let spec = merged(&[mc("00-worker", Some("worker"), json!({"fips": true}))]);
    assert_eq!(spec.config, Some(json!({"ignition": {"version": "3.4.0"}})));
    assert_eq!(spec.kernel_arguments, Vec::<String>::new());
    assert_eq!(spec.extensions, Vec::<String>::new());
    assert_eq!(spec.kernel_type, "default");
    assert!(spec.fips);
    assert_eq!(spec.os_image_url, "");
    let as_json = serde_json::to_value(&spec).unwrap();
    assert_eq!(as_json["kernelArguments"], json!([]));
    assert_eq!(as_json["extensions"], json!([]));
}

#[test]
fn spec_fields() {
    let w = Some("worker");
    let ssh = |keys: Value| ign(json!({"passwd": {"users": [{"name": "core", "sshAuthorizedKeys": keys}]}}));
    let nine = [
        mc("osimageurl", w, json!({"osImageURL": "quay.io/os@sha256:1"})),
        mc("kargs", w, json!({"kernelArguments": ["a=1", "b=2"]})),
        mc("kerneltype", w, json!({"kernelType": "realtime"})),
        mc("extension", w, json!({"extensions": ["usbguard"]})),
        mc("ssh-1", w, json!({"config": ssh(json!(["5678"]))})),
        mc("ssh-2", w, json!({"config": ssh(json!(["1234", "5678"]))})),
        mc("fips", w, json!({"fips": true})),
        mc(
            "passwd",
            w,
            json!({"config": ign(json!({"passwd": {"users": [{"name": "core", "passwordHash": "$6$h"}]}}))}),
        ),
        mc("empty", w, json!({"config": {}})),
    ];
    check(
        "nine worker MCs",
        &nine,
        &[
            ("/osImageURL", json!("quay.io/os@sha256:1")),
            ("/kernelArguments", json!(["a=1", "b=2"])),
            ("/kernelType", json!("realtime")),
            ("/extensions", json!(["usbguard"])),
            ("/fips", json!(true)),
            (
                "/config/passwd/users",
                json!([{"name": "core", "sshAuthorizedKeys": ["5678", "1234"], "passwordHash": "$6$h"}]),
            ),
            ("/config/ignition/version", json!("3.4.0")),
        ],
    );
    check(
        "kargs and extensions concatenated without dedup",
        &[
            mc(
                "00-a",
                w,
                json!({"kernelArguments": ["y=0", "z=4"], "extensions": ["usbguard"]}),
            ),
            mc(
                "01-b",
                w,
                json!({"kernelArguments": ["y=1", "z=4"], "extensions": ["usbguard", "ipsec"]}),
            ),
        ],
        &[
            ("/kernelArguments", json!(["y=0", "z=4", "y=1", "z=4"])),
            ("/extensions", json!(["usbguard", "usbguard", "ipsec"])),
        ],
    );
    check(
        "fips OR",
        &[mc("a", w, json!({"fips": true})), mc("b", w, json!({"fips": false}))],
        &[("/fips", json!(true))],
    );
    check(
        "last non-default kernelType wins",
        &[
            mc("a", w, json!({"kernelType": "64k-pages"})),
            mc("b", w, json!({"kernelType": "realtime"})),
            mc("c", w, json!({"kernelType": "default"})),
            mc("d", w, json!({"kernelType": ""})),
        ],
        &[("/kernelType", json!("realtime"))],
    );
    let generated = {
        let mut m = mc(
            "00-generated",
            w,
            json!({"osImageURL": "generated", "baseOSExtensionsContainerImage": "gen-ext"}),
        );
        set_annotation_for_test(
            &mut m,
            "machineconfiguration.openshift.io/generated-by-controller-version",
            "abc",
        );
        m
    };
    check(
        "osImageURL: last user MC wins, generated MCs skipped",
        &[
            mc(
                "00-test-cluster-master",
                w,
                json!({"osImageURL": "dummy-test-1", "baseOSExtensionsContainerImage": "ext-1"}),
            ),
            mc("00-test-cluster-master-0", w, json!({"osImageURL": "dummy-change"})),
            mc("00-test-cluster-master-1", w, json!({"osImageURL": ""})),
            generated,
        ],
        &[
            ("/osImageURL", json!("dummy-change")),
            ("/baseOSExtensionsContainerImage", json!("ext-1")),
        ],
    );
}

fn set_annotation_for_test(m: &mut MachineConfig, key: &str, value: &str) {
    crate::model::set_annotation(&mut m.metadata, key, Some(value));
}

#[test]
fn merge_order_worker_first_then_custom() {
    let file = |path: &str, src: &str, extra: Value| {
        let mut f = json!({"path": path, "contents": {"source": src}});
        f.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        json!({"config": ign(json!({"storage": {"files": [f]}}))})
    };
    let mcs = [
        mc(
            "ddd",
            Some("worker"),
            file(
                "/etc/test2",
                "data:;base64,H4sI",
                json!({"contents": {"source": "data:;base64,H4sI", "compression": "gzip"}}),
            ),
        ),
        mc("bbb", Some("worker"), file("/etc/test1", "data:,new", json!({}))),
        mc("ccc", Some("infra"), file("/etc/test2", "data:,plain", json!({}))),
        mc(
            "aaa",
            Some("worker"),
            file(
                "/etc/test1",
                "data:,old",
                json!({"user": {"name": "root"}, "mode": 420}),
            ),
        ),
    ];
    let refs: Vec<&MachineConfig> = mcs.iter().collect();
    let order: Vec<&str> = merge_order(&refs).unwrap().iter().map(|m| m.name()).collect();
    assert_eq!(order, ["aaa", "bbb", "ddd", "ccc"]);
    check(
        "custom beats worker, later worker beats earlier, no stale gzip",
        &mcs,
        &[(
            "/config/storage/files",
            json!([
                {"path": "/etc/test1", "overwrite": true, "mode": 420, "user": {"name": "root"}, "contents": {"source": "data:,new"}},
                {"path": "/etc/test2", "overwrite": true, "contents": {"source": "data:,plain"}},
            ]),
        )],
    );
}

#[test]
fn file_rules() {
    let w = Some("worker");
    let files = |f: Value| json!({"config": ign(json!({"storage": {"files": f}}))});
    check(
        "overwrite defaulting keeps explicit false",
        &[mc(
            "a",
            w,
            files(
                json!([{"path": "/etc/a", "contents": {"source": "data:,a"}}, {"path": "/etc/b", "overwrite": false, "contents": {"source": "data:,b"}}]),
            ),
        )],
        &[
            ("/config/storage/files/0/overwrite", json!(true)),
            ("/config/storage/files/1/overwrite", json!(false)),
        ],
    );
    check(
        "child without mode or user keeps parent's; explicit child fields replace",
        &[
            mc(
                "a",
                w,
                files(
                    json!([{"path": "/etc/a", "mode": 384, "user": {"id": 0}, "overwrite": false, "contents": {"source": "data:,a"}}]),
                ),
            ),
            mc(
                "b",
                w,
                files(json!([{"path": "/etc/a", "group": {"name": "wheel"}, "contents": {"source": "data:,b"}}])),
            ),
        ],
        &[(
            "/config/storage/files/0",
            json!({"path": "/etc/a", "overwrite": false, "mode": 384, "user": {"id": 0}, "group": {"name": "wheel"}, "contents": {"source": "data:,b"}}),
        )],
    );
    check(
        "a plain file after a gzip one: no compression left (TestIgnitionMergeCompressed)",
        &[
            mc(
                "a",
                w,
                files(json!([{"path": "/etc/c", "contents": {"source": "data:;base64,H4sI", "compression": "gzip"}}])),
            ),
            mc(
                "b",
                w,
                files(json!([{"path": "/etc/c", "contents": {"source": "data:,hello%20world"}}])),
            ),
        ],
        &[(
            "/config/storage/files/0/contents",
            json!({"source": "data:,hello%20world"}),
        )],
    );
    check(
        "a directory at a file's path replaces it",
        &[
            mc(
                "a",
                w,
                files(
                    json!([{"path": "/etc/x", "contents": {"source": "data:,a"}}, {"path": "/etc/y", "contents": {"source": "data:,y"}}]),
                ),
            ),
            mc(
                "b",
                w,
                json!({"config": ign(json!({"storage": {"directories": [{"path": "/etc/x"}]}}))}),
            ),
        ],
        &[
            (
                "/config/storage/files",
                json!([{"path": "/etc/y", "overwrite": true, "contents": {"source": "data:,y"}}]),
            ),
            ("/config/storage/directories", json!([{"path": "/etc/x"}])),
        ],
    );
}

#[test]
fn unit_rules() {
    let w = Some("worker");
    let units = |u: Value| json!({"config": ign(json!({"systemd": {"units": u}}))});
    check(
        "units merged field by field, dropins keyed by name",
        &[
            mc(
                "a",
                w,
                units(json!([
                    {"name": "k.service", "enabled": true, "contents": "[Unit]\nA", "dropins": [{"name": "10-a.conf", "contents": "a"}, {"name": "20-b.conf", "contents": "b"}]},
                    {"name": "other.service", "mask": true},
                ])),
            ),
            mc(
                "b",
                w,
                units(json!([
                    {"name": "k.service", "contents": "[Unit]\nB", "dropins": [{"name": "20-b.conf", "contents": "B"}, {"name": "05-c.conf", "contents": "c"}]},
                ])),
            ),
        ],
        &[(
            "/config/systemd/units",
            json!([
                {"name": "k.service", "enabled": true, "contents": "[Unit]\nB", "dropins": [
                    {"name": "10-a.conf", "contents": "a"}, {"name": "20-b.conf", "contents": "B"}, {"name": "05-c.conf", "contents": "c"}]},
                {"name": "other.service", "mask": true},
            ]),
        )],
    );
}

#[test]
fn merge_errors() {
    let refs = |mcs: &[MachineConfig]| -> Result<MachineConfigSpec, RenderError> {
        merge_machine_configs(&mcs.iter().collect::<Vec<_>>())
    };
    let err = refs(&[mc("a", Some("worker"), json!({})), mc("nolabels", None, json!({}))]).unwrap_err();
    assert_eq!(err.to_string(), "cannot find label in MachineConfig nolabels");
    let err = refs(&[
        mc("a", Some("worker"), json!({"extensions": ["kernel-devel"]})),
        mc("b", Some("worker"), json!({"kernelType": "realtime"})),
    ])
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "installing kernel-devel extension is not supported with kernelType: realtime"
    );
    assert!(refs(&[mc("a", Some("worker"), json!({"extensions": ["kernel-devel"]}))]).is_ok());
}

fn pool(name: &str, selector: Value) -> MachineConfigPool {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"machineConfigSelector": selector}})).unwrap()
}

fn infra_pool() -> MachineConfigPool {
    pool(
        "infra",
        json!({"matchExpressions": [{"key": ROLE_LABEL, "operator": "In", "values": ["worker", "infra"]}]}),
    )
}

fn fixture() -> Vec<MachineConfig> {
    let w = Some("worker");
    vec![
        mc(
            "00-worker",
            w,
            json!({"config": ign(json!({"storage": {"files": [{"path": "/etc/a", "contents": {"source": "data:,a"}}]}}))}),
        ),
        mc(
            "99-worker-ssh",
            w,
            json!({"config": ign(json!({"passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k1"]}]}}))}),
        ),
        mc("50-infra", Some("infra"), json!({"kernelArguments": ["x=1"]})),
        mc("10-master", Some("master"), json!({"fips": true})),
    ]
}

#[test]
fn render_pool_selects_and_names() {
    let mcs = fixture();
    let refs: Vec<&MachineConfig> = mcs.iter().collect();
    let r = render_pool(&infra_pool(), &refs).unwrap();
    assert_eq!(r.sources, ["00-worker", "99-worker-ssh", "50-infra"]);
    assert!(!r.spec.fips);
    assert_eq!(r.spec.kernel_arguments, ["x=1"]);
    assert!(r.name.starts_with("rendered-infra-"));
    assert_eq!(r.name.len(), "rendered-infra-".len() + 32);
    assert!(r.name["rendered-infra-".len()..]
        .chars()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    assert_eq!(r.name, rendered_name("infra", &r.spec));

    // Rendered configs are never inputs, even when a selector would match them.
    let mut rendered = mc(&r.name, Some("infra"), json!({"fips": true}));
    set_annotation_for_test(
        &mut rendered,
        "machineconfiguration.openshift.io/generated-by-controller-version",
        "v1",
    );
    let mut with_rendered = refs.clone();
    with_rendered.push(&rendered);
    assert_eq!(render_pool(&infra_pool(), &with_rendered).unwrap(), r);
}

#[test]
fn render_pool_errors() {
    let mcs = fixture();
    let refs: Vec<&MachineConfig> = mcs.iter().collect();
    let err = render_pool(&pool("gpu", json!({"matchLabels": {ROLE_LABEL: "gpu"}})), &refs).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no MachineConfigs found matching selector machineconfiguration.openshift.io/role=gpu"
    );
    assert_eq!(
        render_degraded_message("gpu", &err),
        "Failed to render configuration for pool gpu: no MachineConfigs found matching selector machineconfiguration.openshift.io/role=gpu"
    );
    // An empty selector matches nothing.
    let err = render_pool(&pool("all", json!({})), &refs).unwrap_err();
    assert_eq!(
        err,
        RenderError::NoMachineConfigs {
            selector: "<none>".into()
        }
    );
    let err = render_pool(&infra_pool(), &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no MachineConfigs found matching selector machineconfiguration.openshift.io/role in (infra,worker)"
    );
}

/// A change applied to one input MachineConfig.
type Change = Box<dyn Fn(&mut MachineConfig)>;

#[test]
fn rendered_name_is_a_pure_function_of_the_merged_spec() {
    let mcs = fixture();
    let refs: Vec<&MachineConfig> = mcs.iter().collect();
    let name = render_pool(&infra_pool(), &refs).unwrap().name;
    let mut shuffled = refs.clone();
    shuffled.reverse();
    shuffled.swap(0, 2);
    assert_eq!(render_pool(&infra_pool(), &shuffled).unwrap().name, name);

    // Changing any input changes the name.
    let changes: Vec<(&str, Change)> = vec![
        (
            "file source",
            Box::new(|m| {
                m.spec.config = Some(ign(
                    json!({"storage": {"files": [{"path": "/etc/a", "contents": {"source": "data:,b"}}]}}),
                ))
            }),
        ),
        ("karg", Box::new(|m| m.spec.kernel_arguments.push("y=2".into()))),
        ("extension", Box::new(|m| m.spec.extensions.push("usbguard".into()))),
        ("fips", Box::new(|m| m.spec.fips = true)),
        ("kernelType", Box::new(|m| m.spec.kernel_type = "realtime".into())),
        ("osImageURL", Box::new(|m| m.spec.os_image_url = "quay.io/x".into())),
    ];
    for (what, change) in changes {
        let mut changed = mcs.clone();
        change(&mut changed[0]);
        let refs: Vec<&MachineConfig> = changed.iter().collect();
        assert_ne!(render_pool(&infra_pool(), &refs).unwrap().name, name, "{what}");
    }
    // The pool name is part of the name, key order of the raw input is not.
    let spec = merged(&mcs[..1]);
    assert_ne!(rendered_name("a", &spec), rendered_name("b", &spec));
    let mut reordered = spec.clone();
    let cfg = config_of(&spec);
    let mut v = serde_json::to_value(&cfg).unwrap();
    let obj = v.as_object_mut().unwrap();
    let entries: Vec<(String, Value)> = obj.clone().into_iter().rev().collect();
    obj.clear();
    obj.extend(entries);
    reordered.config = Some(v);
    assert_eq!(rendered_name("a", &spec), rendered_name("a", &reordered));
}

#[test]
fn selector_strings() {
    let sel: LabelSelector = serde_json::from_value(json!({
        "matchLabels": {"b": "1"},
        "matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["y", "x"]}, {"key": "c", "operator": "Exists"}, {"key": "d", "operator": "DoesNotExist"}],
    }))
    .unwrap();
    assert_eq!(selector_string(Some(&sel)), "a notin (x,y),b=1,c,!d");
}

#[test]
fn files_without_a_source_render_as_the_empty_file_and_stay_valid_ignition() {
    let w = Some("worker");
    let spec = merged(&[mc(
        "50-empty",
        w,
        json!({"config": ign(json!({"storage": {"files": [
            {"path": "/etc/none"},
            {"path": "/etc/gz-none", "contents": {"compression": "gzip"}},
            {"path": "/etc/kept", "overwrite": false},
            {"path": "/etc/data", "contents": {"source": "data:,x"}}
        ]}}))}),
    )]);
    let cfg = config_of(&spec);
    let get = |p: &str| {
        cfg.storage
            .files
            .iter()
            .find(|f| f.path == p)
            .unwrap_or_else(|| panic!("{p} in {cfg:?}"))
            .clone()
    };
    for p in ["/etc/none", "/etc/gz-none"] {
        let f = get(p);
        assert_eq!(f.overwrite, Some(true), "{p}");
        let contents = f.contents.unwrap();
        assert_eq!(contents.source.as_deref(), Some("data:,"), "{p}");
        assert_eq!(contents.compression, None, "{p}");
    }
    // overwrite: false without a source is valid Ignition (create if absent) and stays as is.
    assert_eq!(get("/etc/kept").overwrite, Some(false));
    assert_eq!(get("/etc/kept").contents, None);
    assert_eq!(get("/etc/data").contents.unwrap().source.as_deref(), Some("data:,x"));
    let errors = crate::ignition::validate_config(&cfg, "spec.config");
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn attribution_names_the_last_writer_of_each_item() {
    let w = Some("worker");
    let pool = pool("worker", json!({"matchLabels": {ROLE_LABEL: "worker"}}));
    let mcs = [
        mc(
            "00-worker",
            w,
            json!({"config": ign(json!({
            "storage": {"files": [{"path": "/etc/a", "contents": {"source": "data:,a"}}, {"path": "/etc/b", "contents": {"source": "data:,b"}}]},
            "systemd": {"units": [{"name": "x.service", "enabled": true, "contents": "[Service]\nExecStart=/bin/true\n"}]},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k1"]}]}})),
            "kernelArguments": ["a=1"]}),
        ),
        mc(
            "99-worker-b",
            w,
            json!({"config": ign(json!({
            "storage": {"files": [{"path": "/etc/b", "mode": 384}]},
            "systemd": {"units": [{"name": "x.service", "dropins": [{"name": "10-x.conf", "contents": "[Service]\nNice=1\n"}]}]},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k2"]}]}})),
            "kernelArguments": ["b=2"], "kernelType": "realtime", "extensions": ["usbguard"]}),
        ),
    ];
    let refs: Vec<&MachineConfig> = mcs.iter().collect();
    let r = render_pool(&pool, &refs).unwrap();
    let a = &r.attribution;
    assert_eq!(a.sources, ["00-worker", "99-worker-b"]);
    assert_eq!(a.files["/etc/a"], "00-worker");
    assert_eq!(
        a.files["/etc/b"], "99-worker-b",
        "the last writer, even of the mode only"
    );
    assert_eq!(
        a.units["x.service"], "00-worker",
        "a dropin alone does not write the unit"
    );
    assert_eq!(a.dropins["x.service/10-x.conf"], "99-worker-b");
    assert_eq!(
        (a.ssh_keys["k1"].as_str(), a.ssh_keys["k2"].as_str()),
        ("00-worker", "99-worker-b")
    );
    let kargs: Vec<(&str, &str)> = a
        .kernel_arguments
        .iter()
        .map(|s| (s.value.as_str(), s.source.as_str()))
        .collect();
    assert_eq!(kargs, [("a=1", "00-worker"), ("b=2", "99-worker-b")]);
    assert_eq!(a.kernel_type.as_deref(), Some("99-worker-b"));
    assert_eq!(a.extensions[0].source, "99-worker-b");
    let back: Attribution = serde_json::from_str(&a.to_annotation()).unwrap();
    assert_eq!(&back, a);
}
