use super::*;
use crate::model::{DriftPolicySpec, DriftRule, LabelSelector, ObjectMeta};
use std::collections::BTreeMap;

fn policy(name: &str, rules: &[(&[&str], &str)]) -> DriftPolicy {
    DriftPolicy {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: DriftPolicySpec {
            pool_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    "pools.operator.machineconfiguration.openshift.io/worker".into(),
                    "".into(),
                )])),
                ..Default::default()
            }),
            rules: rules
                .iter()
                .map(|(paths, action)| DriftRule {
                    paths: paths.iter().map(|p| p.to_string()).collect(),
                    action: action.to_string(),
                })
                .collect(),
        },
        ..Default::default()
    }
}

fn worker() -> MachineConfigPool {
    let mut p = MachineConfigPool::default();
    p.metadata.name = Some("worker".into());
    p.metadata.labels = Some(BTreeMap::from([(
        "pools.operator.machineconfiguration.openshift.io/worker".into(),
        "".into(),
    )]));
    p
}

#[test]
fn globs_match_by_segment() {
    let yes = [
        ("/etc/chrony.conf", "/etc/chrony.conf"),
        ("/etc/*.conf", "/etc/chrony.conf"),
        ("/etc/chrony.???f", "/etc/chrony.conf"),
        ("/etc/**", "/etc/a/b/c"),
        ("/etc/**/x.conf", "/etc/x.conf"),
        ("/etc/**/x.conf", "/etc/a/b/x.conf"),
        ("/etc/[a-c]x", "/etc/bx"),
        ("/etc/[!a]x", "/etc/bx"),
        ("/**", "/etc/x"),
    ];
    for (g, p) in yes {
        assert!(glob_match(g, p), "{g} should match {p}");
    }
    let no = [
        ("/etc/*.conf", "/etc/sub/chrony.conf"),
        ("/etc/*", "/etc"),
        ("/etc/[!a]x", "/etc/ax"),
        ("/etc/chrony.conf", "/etc/chrony.conf.d"),
        ("etc/x", "/etc/x"),
        ("/etc/[ab", "/etc/a"),
    ];
    for (g, p) in no {
        assert!(!glob_match(g, p), "{g} should not match {p}");
    }
}

#[test]
fn bad_globs_and_actions_are_refused_with_the_field() {
    let p = policy(
        "p",
        &[(&["/etc/x"], "Degrade"), (&["etc/x", "/etc/[ab"], "Fix"), (&[], "")],
    );
    let errors: Vec<String> = validate(&p).iter().map(|e| e.to_string()).collect();
    assert_eq!(
        errors,
        [
            r#"spec.rules[1].paths[0]: Invalid value: "etc/x": must be an absolute path glob (start with "/")"#,
            r#"spec.rules[1].paths[1]: Invalid value: "/etc/[ab": unterminated character class "[""#,
            r#"spec.rules[1].action: Unsupported value: "Fix": supported values: "Degrade", "Report", "Revert""#,
            "spec.rules[2].paths: Required value",
            "spec.rules[2].action: Required value",
        ]
    );
    let empty = policy("p", &[]);
    assert_eq!(validate(&empty)[0].to_string(), "spec.rules: Required value");
    for g in ["/etc//x", "/etc/a**", "/etc/x/", "/etc/x]"] {
        assert!(check_glob(g).is_err(), "{g}");
    }
}

/// Several policies select the pool: policies by name, rules in order, first match wins; a path
/// no rule matches is MCO's Degrade.
#[test]
fn overlapping_policies_decide_by_name_then_rule_order() {
    let b = policy("b-report", &[(&["/etc/**"], "Report")]);
    let a = policy(
        "a-revert",
        &[(&["/etc/chrony.conf"], "Revert"), (&["/etc/ssh/**"], "Degrade")],
    );
    let rules = resolve(&[b.clone(), a.clone()], Some(&worker()));
    assert_eq!(
        rules.decide("/etc/chrony.conf"),
        Decision {
            action: Action::Revert,
            rule: Some("a-revert: spec.rules[0]".into())
        }
    );
    assert_eq!(rules.decide("/etc/ssh/sshd_config").action, Action::Degrade);
    assert_eq!(
        rules.decide("/etc/motd").rule.as_deref(),
        Some("b-report: spec.rules[0]")
    );
    assert_eq!(
        rules.decide("/usr/local/bin/x"),
        Decision {
            action: Action::Degrade,
            rule: None
        }
    );
    // the same answer whatever order the policies are listed in
    assert_eq!(resolve(&[a, b], Some(&worker())), rules);
    // a pool the selector does not match, or no pool: MCO's behaviour
    let mut infra = worker();
    infra.metadata.labels = None;
    assert!(resolve(&[policy("x", &[(&["/**"], "Report")])], Some(&infra)).is_empty());
    assert!(resolve(&[policy("x", &[(&["/**"], "Report")])], None).is_empty());
}

#[test]
fn mismatch_kinds_from_the_monitor_messages() {
    assert_eq!(mismatch(r#"content mismatch for file "/etc/a""#), "contents");
    assert_eq!(
        mismatch(r#"mode mismatch for file: "/etc/a"; expected: -rw-r--r--/420/0644; received: -rw-------/384/0600"#),
        "mode"
    );
    assert_eq!(
        mismatch(r#"could not stat file "/etc/a": lstat /etc/a: no such file or directory"#),
        "missing"
    );
    assert_eq!(
        mismatch(
            r#"state validation: invalid unit masked setting. path: "/etc/systemd/system/a.service"; expected: /dev/null; received: /x"#
        ),
        "unit"
    );
}

#[test]
fn diffs_are_unified_bounded_and_say_binary() {
    let d = contents_diff("/etc/a", b"server evil\n", b"server good\n");
    assert_eq!(
        d,
        "--- /etc/a (on disk)\n+++ /etc/a (rendered)\n@@ -1 +1 @@\n-server evil\n+server good\n"
    );
    assert_eq!(contents_diff("/etc/a", b"x", b"x"), "");
    assert_eq!(
        contents_diff("/etc/a", b"\0\x01", b"abc"),
        "binary contents differ: 2 bytes on disk, 3 bytes in the rendered config\n"
    );
    let big: String = (0..5000).map(|i| format!("line {i}\n")).collect();
    let d = contents_diff("/etc/a", big.as_bytes(), b"");
    assert!(d.len() <= MAX_DIFF_BYTES + 64, "{}", d.len());
    assert!(d.ends_with(" more bytes of diff\n"), "{}", &d[d.len() - 80..]);
}
