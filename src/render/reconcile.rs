//! Day-2 reconcilability: which changes between two rendered configs a running node can apply
//! in place. Reproduces `isConfigReconcilable` of MCO `pkg/controller/common/reconcile.go`
//! (mco-facts 1.8). Used by the render controller (RenderDegraded) and by the node daemon
//! (state `Unreconcilable`). It must not look at the node itself (the daemon's FIPS check
//! against the running kernel is its own).

use super::parse_stored;
use crate::ignition::{Config, User};
use crate::model::MachineConfigSpec;
use serde_json::Value;

/// The only user whose SSH keys and password hash mco manages (MCO `constants.CoreUserName`).
const CORE_USER: &str = "core";
/// The force file the daemon honours; an Ignition config must not create it.
const FORCE_FILE: &str = "/run/machine-config-daemon-force";

/// Checks that `new` can be applied in place on a node running `old`.
///
/// Refused, in MCO's order and with MCO's messages: `passwd.groups` changes, `passwd.users`
/// changes other than the `core` user's `sshAuthorizedKeys`/`passwordHash` (an empty users list
/// is fine), Ignition `kernelArguments` changes, `storage.disks`/`filesystems`/`raid`/
/// `directories` changes (mco has no `IrreconcilableValidationOverrides`), `storage.links`
/// changes other than removing all links, any file with `append`, a file at
/// `/run/machine-config-daemon-force`, and a `fips` change. Everything else (files, units,
/// `spec.kernelArguments`, extensions, kernelType, osImageURL, `ignition.*`, LUKS) is allowed.
///
/// Absent, `null` and empty sections compare equal. Errors: the reason as text, e.g.
/// `ignition kargs section contains changes`; a stored config that does not parse gives
/// `parsing old|new Ignition config failed: <detail>`.
pub fn check_reconcilable(old: &MachineConfigSpec, new: &MachineConfigSpec) -> Result<(), String> {
    let parse = |which: &str, spec: &MachineConfigSpec| {
        parse_stored(which, spec.config.as_ref())
            .map(Option::unwrap_or_default)
            .map_err(|e| match e {
                super::RenderError::Parse { message, .. } => {
                    format!("parsing {which} Ignition config failed: {message}")
                }
                other => other.to_string(),
            })
    };
    let old_ign = parse("old", old)?;
    let new_ign = parse("new", new)?;
    check_configs(&old_ign, &new_ign)?;
    if old.fips != new.fips {
        return Err("detected change to FIPS flag; refusing to modify FIPS on a running cluster".to_string());
    }
    Ok(())
}

fn check_configs(old: &Config, new: &Config) -> Result<(), String> {
    check_passwd(old, new).map_err(|e| format!("invalid passwd change(s): {e}"))?;

    if kernel_args(&old.kernel_arguments) != kernel_args(&new.kernel_arguments) {
        return Err("ignition kargs section contains changes".to_string());
    }

    let (os, ns) = (&old.storage, &new.storage);
    let sections = [
        ("disks", &os.disks, &ns.disks),
        ("filesystems", &os.filesystems, &ns.filesystems),
        ("raid", &os.raid, &ns.raid),
        ("directories", &os.directories, &ns.directories),
    ];
    for (name, o, n) in sections {
        if list(o) != list(n) {
            return Err(format!("ignition {name} section contains changes"));
        }
    }
    // Only removing every link is allowed (MCO kept this for an old upgrade path).
    if list(&os.links) != list(&ns.links) && !list(&ns.links).is_empty() {
        return Err("ignition links section contains changes".to_string());
    }

    for f in &ns.files {
        let has_append = match &f.append {
            None | Some(Value::Null) => false,
            Some(Value::Array(a)) => !a.is_empty(),
            Some(_) => true,
        };
        if has_append {
            return Err(format!("ignition file {} includes append", f.path));
        }
        if f.path == FORCE_FILE {
            return Err(format!("cannot create {} via Ignition", f.path));
        }
    }
    Ok(())
}

/// MCO `validatePasswdChanges`.
fn check_passwd(old: &Config, new: &Config) -> Result<(), String> {
    if list(&old.passwd.groups) != list(&new.passwd.groups) {
        return Err("ignition Passwd Groups section contains changes".to_string());
    }
    if old.passwd.users == new.passwd.users {
        return Ok(());
    }
    if new.passwd.users.iter().any(|u| u.name != CORE_USER) {
        return Err("ignition passwd user section contains unsupported changes: non-core user".to_string());
    }
    // An empty list does not mean "remove the user": allowed. Otherwise MCO checks the last entry.
    match new.passwd.users.last() {
        None => Ok(()),
        Some(user) => verify_user_fields(user),
    }
}

/// MCO `verifyUserFields`: the user must be `core` with at least one key or a password hash,
/// and set nothing else.
fn verify_user_fields(user: &User) -> Result<(), String> {
    if user.name == CORE_USER && (user.password_hash.is_some() || !user.ssh_authorized_keys.is_empty()) {
        if user.other.values().any(|v| !v.is_null()) {
            return Err("SSH keys and password hash are not reconcilable".to_string());
        }
        Ok(())
    } else {
        Err(
            "ignition passwd user section contains unsupported changes: user must be core and have 1 or more sshKeys"
                .to_string(),
        )
    }
}

/// A raw list section, with absent / `null` / `[]` all read as empty.
fn list(value: &Option<Value>) -> &[Value] {
    match value {
        Some(Value::Array(a)) => a,
        _ => &[],
    }
}

/// Ignition `kernelArguments` as (shouldExist, shouldNotExist), absent lists read as empty.
fn kernel_args(value: &Option<Value>) -> (&[Value], &[Value]) {
    let get = |name: &str| match value.as_ref().and_then(|v| v.get(name)) {
        Some(Value::Array(a)) => a.as_slice(),
        _ => &[],
    };
    (get("shouldExist"), get("shouldNotExist"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(config: Value, fips: bool) -> MachineConfigSpec {
        MachineConfigSpec {
            config: Some(config),
            fips,
            ..Default::default()
        }
    }

    /// One case: old config, new config, expected error substring (`None` = reconcilable).
    fn check(name: &str, old: Value, new: Value, expected: Option<&str>) {
        let got = check_reconcilable(&spec(old, false), &spec(new, false));
        match (expected, got) {
            (None, Ok(())) => {}
            (Some(want), Err(e)) => assert!(e.contains(want), "{name}: error {e:?} does not contain {want:?}"),
            (want, got) => panic!("{name}: expected {want:?}, got {got:?}"),
        }
    }

    fn ign(extra: Value) -> Value {
        let mut v = json!({"ignition": {"version": "3.4.0"}});
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        v
    }

    #[test]
    fn storage_and_kargs() {
        let base = ign(json!({}));
        let cases: Vec<(&str, Value, Option<&str>)> = vec![
            ("no change", ign(json!({})), None),
            (
                "files change",
                ign(json!({"storage": {"files": [{"path": "/etc/a", "contents": {"source": "data:,x"}}]}})),
                None,
            ),
            (
                "units change",
                ign(json!({"systemd": {"units": [{"name": "a.service", "enabled": true}]}})),
                None,
            ),
            (
                "disks",
                ign(json!({"storage": {"disks": [{"device": "/dev/sdb"}]}})),
                Some("ignition disks section contains changes"),
            ),
            (
                "filesystems",
                ign(json!({"storage": {"filesystems": [{"device": "/dev/sdb1", "format": "xfs"}]}})),
                Some("ignition filesystems section contains changes"),
            ),
            (
                "raid",
                ign(json!({"storage": {"raid": [{"name": "md0", "level": "raid1"}]}})),
                Some("ignition raid section contains changes"),
            ),
            (
                "directories",
                ign(json!({"storage": {"directories": [{"path": "/etc/d"}]}})),
                Some("ignition directories section contains changes"),
            ),
            (
                "links added",
                ign(json!({"storage": {"links": [{"path": "/etc/l", "target": "/x"}]}})),
                Some("ignition links section contains changes"),
            ),
            (
                "empty lists equal absent",
                ign(json!({"storage": {"disks": [], "links": []}})),
                None,
            ),
            (
                "luks not compared",
                ign(json!({"storage": {"luks": [{"name": "root", "device": "/dev/sda"}]}})),
                None,
            ),
            (
                "ignition kargs",
                ign(json!({"kernelArguments": {"shouldExist": ["foo=bar"]}})),
                Some("ignition kargs section contains changes"),
            ),
            (
                "append",
                ign(json!({"storage": {"files": [{"path": "/etc/a", "append": [{"source": "data:,x"}]}]}})),
                Some("ignition file /etc/a includes append"),
            ),
            (
                "force file",
                ign(
                    json!({"storage": {"files": [{"path": "/run/machine-config-daemon-force", "contents": {"source": "data:,"}}]}}),
                ),
                Some("cannot create /run/machine-config-daemon-force via Ignition"),
            ),
            (
                "groups",
                ign(json!({"passwd": {"groups": [{"name": "g"}]}})),
                Some("invalid passwd change(s): ignition Passwd Groups section contains changes"),
            ),
        ];
        for (name, new, expected) in cases {
            check(name, base.clone(), new, expected);
        }
        // Removing every link is allowed.
        check(
            "links removed",
            ign(json!({"storage": {"links": [{"path": "/etc/l", "target": "/x"}]}})),
            ign(json!({})),
            None,
        );
        // Removing a LUKS entry is allowed.
        check(
            "luks removed",
            ign(json!({"storage": {"luks": [{"name": "root"}]}})),
            ign(json!({})),
            None,
        );
    }

    #[test]
    fn ssh_and_users() {
        let users = |u: Value| ign(json!({"passwd": {"users": u}}));
        let old = users(json!([{"name": "core", "sshAuthorizedKeys": ["1234"]}]));
        let cases: Vec<(&str, Value, Option<&str>)> = vec![
            (
                "core keys change",
                users(json!([{"name": "core", "sshAuthorizedKeys": ["5678"]}])),
                None,
            ),
            (
                "core password hash",
                users(json!([{"name": "core", "passwordHash": "$6$x"}])),
                None,
            ),
            (
                "non-core user",
                users(
                    json!([{"name": "core", "sshAuthorizedKeys": ["1"]}, {"name": "bob", "sshAuthorizedKeys": ["1"]}]),
                ),
                Some("ignition passwd user section contains unsupported changes: non-core user"),
            ),
            (
                "core with homeDir",
                users(json!([{"name": "core", "sshAuthorizedKeys": ["5678"], "homeDir": "/home/x"}])),
                Some("SSH keys and password hash are not reconcilable"),
            ),
            (
                "core with no keys",
                users(json!([{"name": "core", "sshAuthorizedKeys": []}])),
                Some("user must be core and have 1 or more sshKeys"),
            ),
            ("users removed", users(json!(null)), None),
            ("users empty", users(json!([])), None),
        ];
        for (name, new, expected) in cases {
            check(name, old.clone(), new, expected);
        }
    }

    #[test]
    fn fips_and_absent_configs() {
        let empty = MachineConfigSpec::default();
        assert_eq!(check_reconcilable(&empty, &spec(json!({}), false)), Ok(()));
        assert_eq!(
            check_reconcilable(
                &empty,
                &MachineConfigSpec {
                    fips: true,
                    ..Default::default()
                }
            ),
            Err("detected change to FIPS flag; refusing to modify FIPS on a running cluster".to_string())
        );
        // Other spec fields are not compared.
        let other = MachineConfigSpec {
            kernel_arguments: vec!["a=b".into()],
            extensions: vec!["usbguard".into()],
            kernel_type: "realtime".into(),
            os_image_url: "quay.io/x@sha256:1".into(),
            ..Default::default()
        };
        assert_eq!(check_reconcilable(&empty, &other), Ok(()));
        let bad = spec(
            json!({"ignition": {"version": "3.4.0"}, "storage": {"files": 3}}),
            false,
        );
        assert!(check_reconcilable(&empty, &bad)
            .unwrap_err()
            .starts_with("parsing new Ignition config failed"));
    }
}
