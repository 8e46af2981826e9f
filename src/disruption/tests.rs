//! Rules of mco-facts section 6, inputs and expectations written from the facts and MCO's
//! `pkg/daemon/update_test.go`, `pkg/daemon/drain_test.go` and `pkg/apihelpers/apihelpers.go`.

use super::*;
use crate::ignition::Config;
use crate::validation::Invalid;

fn changes(files: &[&str], units: &[&str], passwd: bool) -> Changes {
    Changes {
        os: false,
        files: files.iter().map(|s| s.to_string()).collect(),
        units: units.iter().map(|s| s.to_string()).collect(),
        passwd,
    }
}

fn names(actions: &[Action]) -> Vec<String> {
    actions.iter().map(|a| a.to_string()).collect()
}

fn policy(path: &str, actions: Vec<Action>) -> FilePolicy {
    FilePolicy {
        path: path.into(),
        actions,
    }
}

#[test]
fn closest_match_is_the_longest_parent_directory_or_the_exact_path() {
    // TestFindClosestFilePolicyPathMatch (mco-facts 13.14)
    let ps = vec![
        policy("/etc/mco", vec![Action::of(ActionType::None)]),
        policy("/etc/mco/f1", vec![Action::of(ActionType::Drain)]),
        policy("/etc/mco/f1/test", vec![Action::of(ActionType::DaemonReload)]),
    ];
    let m = |p: &str| closest_file_policy(p, &ps).map(|p| p.path.clone());
    assert_eq!(m("/etc/mco/f1/f2/f3").as_deref(), Some("/etc/mco/f1"));
    assert_eq!(m("/etc/mco/f1/test").as_deref(), Some("/etc/mco/f1/test"));
    assert_eq!(m("/etc/mco/f1/t").as_deref(), Some("/etc/mco/f1"));
    assert_eq!(m("/etc/mco/f1/testing").as_deref(), Some("/etc/mco/f1"));
    assert_eq!(m("/etc/mcoother"), None);
    assert_eq!(m("/etc/other"), None);
}

#[test]
fn defaults_ssh_key_and_pull_secret_need_nothing_other_files_reboot() {
    let d = default_cluster_policies();
    assert_eq!(names(&calculate_actions(&changes(&[], &[], true), &d)), ["None"]);
    assert_eq!(
        names(&calculate_actions(
            &changes(&["/var/lib/kubelet/config.json"], &[], false),
            &d
        )),
        ["None"]
    );
    assert_eq!(
        names(&calculate_actions(&changes(&["/etc/chrony.conf"], &[], false), &d)),
        ["Reboot"]
    );
    // policy.json and anything under registries.d reload crio
    assert_eq!(
        names(&calculate_actions(
            &changes(&["/etc/containers/policy.json"], &[], false),
            &d
        )),
        ["Reload crio.service"]
    );
    assert_eq!(
        names(&calculate_actions(
            &changes(&["/etc/containers/registries.d/a.yaml"], &[], true),
            &d
        )),
        ["Reload crio.service"],
        "None beside another action is dropped"
    );
    assert_eq!(
        names(&calculate_actions(&changes(&[super::REGISTRIES_CONF], &[], false), &d)),
        ["Special"]
    );
    // the user CA bundle: two restarts in order
    assert_eq!(
        names(&calculate_actions(
            &changes(
                &["/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt"],
                &[],
                false
            ),
            &d
        )),
        ["Restart coreos-update-ca-trust.service", "Restart crio.service"]
    );
    // nothing changed
    assert_eq!(names(&calculate_actions(&changes(&[], &[], false), &d)), ["None"]);
}

#[test]
fn os_changes_and_unmatched_units_reboot_and_reboot_collapses_the_list() {
    let d = default_cluster_policies();
    let mut os = changes(&["/var/lib/kubelet/config.json"], &[], true);
    os.os = true;
    assert_eq!(names(&calculate_actions(&os, &d)), ["Reboot"]);
    assert_eq!(
        names(&calculate_actions(&changes(&[], &["chronyd.service"], false), &d)),
        ["Reboot"]
    );
    assert_eq!(
        names(&calculate_actions(&changes(&[], &["iri-registry.service"], false), &d)),
        ["DaemonReload", "Restart iri-registry.service"]
    );
    // a reload policy beside an unmatched file: the whole result is Reboot
    assert_eq!(
        names(&calculate_actions(
            &changes(&["/etc/containers/policy.json", "/etc/motd"], &[], false),
            &d
        )),
        ["Reboot"]
    );
    // a user policy with Reboot beside reloads
    let user = NodeDisruptionPolicyConfig {
        files: vec![policy("/etc/motd", vec![Action::of(ActionType::Reboot)])],
        ..Default::default()
    };
    let merged = merge_cluster_policies(Some(&user));
    assert_eq!(
        names(&calculate_actions(
            &changes(&["/etc/containers/policy.json", "/etc/motd"], &[], false),
            &merged
        )),
        ["Reboot"]
    );
}

#[test]
fn no_deduplication_order_is_files_units_sshkey() {
    let user = NodeDisruptionPolicyConfig {
        files: vec![
            policy("/etc/chrony.conf", vec![Action::restart("chronyd.service")]),
            policy("/etc/a", vec![Action::restart("chronyd.service")]),
        ],
        units: vec![UnitPolicy {
            name: "chronyd.service".into(),
            actions: vec![Action::of(ActionType::DaemonReload)],
        }],
        sshkey: SshKeyPolicy {
            actions: vec![Action::of(ActionType::Drain)],
        },
    };
    let p = merge_cluster_policies(Some(&user));
    assert_eq!(
        names(&calculate_actions(
            &changes(&["/etc/chrony.conf", "/etc/a"], &["chronyd.service"], true),
            &p
        )),
        [
            "Restart chronyd.service",
            "Restart chronyd.service",
            "DaemonReload",
            "Drain"
        ]
    );
}

#[test]
fn merge_replaces_in_place_appends_new_and_overrides_sshkey() {
    let user = NodeDisruptionPolicyConfig {
        files: vec![
            policy("/etc/containers/policy.json", vec![Action::of(ActionType::Reboot)]),
            policy("/etc/chrony.conf", vec![Action::restart("chronyd.service")]),
        ],
        units: vec![UnitPolicy {
            name: "iri-registry.service".into(),
            actions: vec![Action::of(ActionType::None)],
        }],
        sshkey: SshKeyPolicy {
            actions: vec![Action::of(ActionType::Drain)],
        },
    };
    let d = default_cluster_policies();
    let m = merge_cluster_policies(Some(&user));
    assert_eq!(m.files.len(), d.files.len() + 1);
    assert_eq!(m.files[2].path, "/etc/containers/policy.json");
    assert_eq!(names(&m.files[2].actions), ["Reboot"]);
    assert_eq!(m.files.last().unwrap().path, "/etc/chrony.conf");
    assert_eq!(names(&m.units[0].actions), ["None"]);
    assert_eq!(names(&m.sshkey.actions), ["Drain"]);
    // empty user sshkey keeps the default None
    let m = merge_cluster_policies(Some(&NodeDisruptionPolicyConfig::default()));
    assert_eq!(names(&m.sshkey.actions), ["None"]);
    assert_eq!(m, d);
}

#[test]
fn defaults_have_mcos_thirteen_files_in_order() {
    let d = default_cluster_policies();
    let paths: Vec<&str> = d.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths.len(), 13);
    assert_eq!(paths[0], "/var/lib/kubelet/config.json");
    assert_eq!(paths[3], "/etc/containers/registries.conf");
    assert_eq!(paths[12], "/etc/pki/ca-trust/source/anchors/iri-root-ca.crt");
    assert!(!paths.contains(&"/etc/kubernetes/kubelet-ca.crt"));
}

fn mc(spec: serde_json::Value) -> MachineConfiguration {
    serde_json::from_value(serde_json::json!({
        "apiVersion": API_VERSION, "kind": "MachineConfiguration",
        "metadata": {"name": "cluster"}, "spec": spec,
    }))
    .unwrap()
}

fn fields(r: Result<(), Invalid>) -> Vec<String> {
    r.err()
        .map(|e| e.causes.iter().map(|c| c.to_string()).collect())
        .unwrap_or_default()
}

#[test]
fn validation_follows_the_crd_rules() {
    let ok = mc(
        serde_json::json!({"managementState": "Managed", "nodeDisruptionPolicy": {
        "files": [{"path": "/etc/chrony.conf", "actions": [{"type": "Restart", "restart": {"serviceName": "chronyd.service"}}]}],
        "units": [{"name": "a-b.service", "actions": [{"type": "DaemonReload"}, {"type": "Reload", "reload": {"serviceName": "a.socket"}}]}],
        "sshkey": {"actions": [{"type": "None"}]}}}),
    );
    assert_eq!(fields(validate_machine_configuration(&ok)), Vec::<String>::new());
    assert_eq!(ok.spec.other["managementState"], "Managed");

    let mut other = ok.clone();
    other.metadata.name = Some("other".into());
    let f = fields(validate_machine_configuration(&other));
    assert_eq!(f.len(), 1);
    assert!(f[0].starts_with("metadata.name: Only a single object"), "{f:?}");

    let bad = mc(serde_json::json!({"nodeDisruptionPolicy": {
        "files": [
            {"path": "etc/x", "actions": [{"type": "Reboot"}, {"type": "Drain"}]},
            {"path": "/etc/y", "actions": [{"type": "Reload"}]},
            {"path": "/etc/y", "actions": [{"type": "Special"}]},
        ],
        "units": [{"name": "chronyd", "actions": [{"type": "Restart", "restart": {"serviceName": "crio"}}]}],
        "sshkey": {"actions": [{"type": "None"}, {"type": "Drain", "reload": {"serviceName": "crio.service"}}]}}}));
    let f = fields(validate_machine_configuration(&bad));
    let at = |p: &str| f.iter().filter(|c| c.starts_with(&format!("{p}: "))).count();
    let s = "spec.nodeDisruptionPolicy";
    assert_eq!(at(&format!("{s}.files[0].path")), 1, "{f:#?}");
    assert_eq!(at(&format!("{s}.files[0].actions")), 1, "Reboot standalone: {f:#?}");
    assert_eq!(at(&format!("{s}.files[1].actions[0]")), 1, "reload required: {f:#?}");
    assert_eq!(at(&format!("{s}.files[2]")), 1, "duplicate path: {f:#?}");
    assert_eq!(at(&format!("{s}.files[2].actions[0].type")), 1, "Special: {f:#?}");
    assert_eq!(at(&format!("{s}.units[0].name")), 1, "{f:#?}");
    assert_eq!(at(&format!("{s}.units[0].actions[0].restart.serviceName")), 1, "{f:#?}");
    assert_eq!(at(&format!("{s}.sshkey.actions")), 1, "None standalone: {f:#?}");
    assert_eq!(at(&format!("{s}.sshkey.actions[1]")), 1, "reload forbidden: {f:#?}");
    assert_eq!(f.len(), 9, "{f:#?}");
}

#[test]
fn service_names() {
    for ok in [
        "crio.service",
        "a.b.socket",
        "x:y\\z-1_2.timer",
        "systemd-udevd.service",
    ] {
        assert_eq!(check_service_name(ok), Ok(()), "{ok}");
    }
    for bad in [
        "crio",
        ".service",
        "a@b.service",
        "a b.service",
        "crio.serv",
        &format!("{}.service", "a".repeat(250)),
    ] {
        assert!(check_service_name(bad).is_err(), "{bad}");
    }
}

#[test]
fn status_carries_the_merge_and_the_generation() {
    let mut m = mc(serde_json::json!({}));
    m.metadata.generation = Some(3);
    let s = desired_status(&m);
    assert_eq!(s.observed_generation, Some(3));
    assert_eq!(
        s.node_disruption_policy_status.unwrap().cluster_policies,
        default_cluster_policies()
    );
}

#[test]
fn changes_between_configs_count_dropins_as_their_unit() {
    let cfg = |v: serde_json::Value| -> Config { serde_json::from_value(v).unwrap() };
    let old = cfg(serde_json::json!({"ignition": {"version": "3.4.0"},
        "storage": {"files": [{"path": "/etc/a", "mode": 420}, {"path": "/etc/b"}]},
        "systemd": {"units": [{"name": "a.service", "dropins": [{"name": "x.conf", "contents": "[Unit]"}]}, {"name": "b.service"}]}}));
    let new = cfg(serde_json::json!({"ignition": {"version": "3.4.0"},
        "storage": {"files": [{"path": "/etc/a", "mode": 384}, {"path": "/etc/c"}]},
        "systemd": {"units": [{"name": "a.service", "dropins": [{"name": "x.conf", "contents": "[Unit]\n"}]}, {"name": "b.service"}]},
        "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k"]}]}}));
    let c = Changes::between(&old, &new, false);
    assert_eq!(c.files, ["/etc/a", "/etc/c", "/etc/b"]);
    assert_eq!(c.units, ["a.service"]);
    assert!(c.passwd);
}

const REG: &str = r#"
unqualified-search-registries = ["registry.access.redhat.com", "docker.io"]
[[registry]]
prefix = ""
location = "example.com/a"
[[registry.mirror]]
location = "mirror.example.com/a"
pull-from-mirror = "digest-only"
"#;

fn safe(old: &str, new: &str) -> bool {
    registries_change_is_safe(Some(old.as_bytes()), Some(new.as_bytes()))
}

#[test]
fn registries_safe_changes() {
    // TestIsDrainRequired (mco-facts 13.16)
    let add_digest_mirror =
        format!("{REG}[[registry.mirror]]\nlocation = \"m2.example.com/a\"\npull-from-mirror = \"digest-only\"\n");
    assert!(safe(REG, &add_digest_mirror), "a digest-only mirror added");
    let add_plain_mirror = format!("{REG}[[registry.mirror]]\nlocation = \"m2.example.com/a\"\n");
    assert!(!safe(REG, &add_plain_mirror), "a mirror without digest-only");
    let with_mbdo = REG.replace(
        "location = \"example.com/a\"",
        "location = \"example.com/a\"\nmirror-by-digest-only = true",
    );
    let add_plain_mbdo = format!("{with_mbdo}[[registry.mirror]]\nlocation = \"m2.example.com/a\"\n");
    assert!(
        safe(&with_mbdo, &add_plain_mbdo),
        "the registry is mirror-by-digest-only"
    );
    let appended = REG.replace("\"docker.io\"]", "\"docker.io\", \"quay.io\"]");
    assert!(safe(REG, &appended), "search registry appended");
    let reordered = REG.replace(
        "[\"registry.access.redhat.com\", \"docker.io\"]",
        "[\"docker.io\", \"registry.access.redhat.com\"]",
    );
    assert!(!safe(REG, &reordered), "search registries reordered");
    let no_mirror = REG.replace(
        "[[registry.mirror]]\nlocation = \"mirror.example.com/a\"\npull-from-mirror = \"digest-only\"\n",
        "",
    );
    assert!(!safe(REG, &no_mirror), "mirror removed");
    let no_registry = "unqualified-search-registries = [\"registry.access.redhat.com\", \"docker.io\"]\n";
    assert!(!safe(REG, no_registry), "registry removed");
    let blocked = REG.replace(
        "location = \"example.com/a\"",
        "location = \"example.com/a\"\nblocked = true",
    );
    assert!(!safe(REG, &blocked), "blocked changed");
    let new_reg = format!("{REG}[[registry]]\nlocation = \"b.example.com\"\n[[registry.mirror]]\nlocation = \"mb.example.com\"\npull-from-mirror = \"digest-only\"\n");
    assert!(safe(REG, &new_reg), "new registry, all mirrors digest-only");
    let new_reg_plain = format!("{REG}[[registry]]\nlocation = \"b.example.com\"\nmirror-by-digest-only = true\n[[registry.mirror]]\nlocation = \"mb.example.com\"\n");
    assert!(!safe(REG, &new_reg_plain), "new registry's mirror not digest-only");
    let new_reg_none = format!("{REG}[[registry]]\nlocation = \"b.example.com\"\nmirror-by-digest-only = true\n");
    assert!(
        safe(REG, &new_reg_none),
        "new registry without mirrors, mirror-by-digest-only"
    );
    assert!(!safe(REG, "not toml ["), "unparsable");
    // registries.conf newly written: its registries are all new
    assert!(registries_change_is_safe(None, Some(new_reg.as_bytes())));
    assert!(!registries_change_is_safe(None, Some(add_plain_mirror.as_bytes())));
}

#[test]
fn drain_decision() {
    let s = [Action::of(ActionType::Special)];
    assert!(drain_required(&[Action::of(ActionType::Reboot)], None, None));
    assert!(drain_required(
        &[Action::reload("crio.service"), Action::of(ActionType::Drain)],
        None,
        None
    ));
    assert!(!drain_required(&[Action::reload("crio.service")], None, None));
    assert!(!drain_required(&[Action::of(ActionType::None)], None, None));
    let add =
        format!("{REG}[[registry.mirror]]\nlocation = \"m2.example.com/a\"\npull-from-mirror = \"digest-only\"\n");
    assert!(!drain_required(&s, Some(REG.as_bytes()), Some(add.as_bytes())));
    assert!(drain_required(&s, Some(add.as_bytes()), Some(REG.as_bytes())));
}

/// An unknown action type is refused before decoding with the CRD's enum message, naming the
/// field; `Special` passes this check (6.1 refuses it separately).
#[test]
fn unknown_action_types_get_the_crd_enum_message() {
    let raw = serde_json::json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
        "metadata": {"name": "cluster"},
        "spec": {"nodeDisruptionPolicy": {
            "files": [{"path": "/etc/a", "actions": [{"type": "Restart", "restart": {"serviceName": "a.service"}}]},
                      {"path": "/etc/b", "actions": [{"type": "Bounce"}]}],
            "sshkey": {"actions": [{"type": 3}, {"type": "Special"}]}
        }}
    });
    let e = check_action_types(&raw).unwrap_err();
    let got: Vec<(String, String)> = e.causes.into_iter().map(|c| (c.field, c.message)).collect();
    let supported = "supported values: \"Reboot\", \"Drain\", \"Reload\", \"Restart\", \"DaemonReload\", \"None\"";
    assert_eq!(
        got,
        vec![
            (
                "spec.nodeDisruptionPolicy.sshkey.actions[0].type".to_string(),
                format!("Unsupported value: \"3\": {supported}")
            ),
            (
                "spec.nodeDisruptionPolicy.files[1].actions[0].type".to_string(),
                format!("Unsupported value: \"Bounce\": {supported}")
            ),
        ]
    );
}

fn cluster_with(spec: serde_json::Value) -> MachineConfiguration {
    serde_json::from_value(serde_json::json!({"metadata": {"name": "cluster"}, "spec": spec})).unwrap()
}

fn refused_fields(spec: serde_json::Value) -> Vec<(String, String)> {
    match validate_machine_configuration(&cluster_with(spec)) {
        Ok(()) => Vec::new(),
        Err(e) => e.causes.into_iter().map(|c| (c.field, c.message)).collect(),
    }
}

/// Spec fields mco cannot act on are refused naming the field, never accepted and ignored:
/// `irreconcilableValidationOverrides` (MCO relaxes the day-2 check of storage.disks,
/// filesystems and raid; mco refuses those sections in every MachineConfig), a non-empty
/// `managedBootImages.machineManagers`, a `bootImageSkewEnforcement.mode` other than None.
/// The fields MCO ignores too stay accepted.
#[test]
fn fields_mco_cannot_act_on_are_refused() {
    let f = refused_fields(serde_json::json!({"irreconcilableValidationOverrides": {"storage": ["Disks"]}}));
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].0, "spec.irreconcilableValidationOverrides");
    assert!(f[0].1.starts_with("Forbidden: mco refuses storage.disks"), "{}", f[0].1);
    assert_eq!(
        refused_fields(serde_json::json!({"managedBootImages": {"machineManagers": [{"resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}}]}}))[0].0,
        "spec.managedBootImages.machineManagers"
    );
    assert_eq!(
        refused_fields(serde_json::json!({"bootImageSkewEnforcement": {"mode": "Automatic"}}))[0].0,
        "spec.bootImageSkewEnforcement.mode"
    );
    assert!(refused_fields(
        serde_json::json!({"managedBootImages": {"machineManagers": []}, "bootImageSkewEnforcement": {"mode": "None"},
        "managementState": "Managed", "logLevel": "Normal", "operatorLogLevel": "Normal"})
    )
    .is_empty());
}

#[test]
fn actions_name_the_config_they_were_chosen_for() {
    assert_eq!(
        actions_config("Restart chronyd.service for rendered-worker-1"),
        Some("rendered-worker-1")
    );
    assert_eq!(actions_config("Reboot"), None);
}
