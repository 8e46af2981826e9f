//! Admission of a MachineConfiguration (mco-facts 6.1): its name, the policy lists' bounds and
//! uniqueness, each action list's rules, service names, and the spec fields mco refuses.

use super::{Action, ActionType, MachineConfiguration, NodeDisruptionPolicyConfig, CLUSTER};
use crate::validation::{FieldError, Invalid};
use serde_json::{Map, Value};

/// Spec lists (`files`, `units`) hold at most this many entries (6.1).
const MAX_SPEC_ENTRIES: usize = 50;
/// Each `actions` list holds at most this many entries (6.1).
const MAX_ACTIONS: usize = 10;
/// A service name is at most this long (`NodeDisruptionPolicyServiceName`).
const MAX_SERVICE_NAME: usize = 255;
/// systemd unit suffixes a service name may end with.
const SERVICE_TYPES: [&str; 12] = [
    ".service",
    ".socket",
    ".device",
    ".mount",
    ".automount",
    ".swap",
    ".target",
    ".path",
    ".timer",
    ".snapshot",
    ".slice",
    ".scope",
];

/// Spec fields MCO acts on that mco has nothing to act on, refused naming the field so that a
/// MachineConfiguration is never accepted and silently ignored:
///
/// - `irreconcilableValidationOverrides` (openshift/api operator/v1, MCO 4.20, feature gate
///   `IrreconcilableMachineConfig`): MCO's render controller and daemon skip the day-2 check of
///   the listed `storage.disks`, `storage.filesystems`, `storage.raid` sections
///   (`pkg/controller/common/reconcile.go` `isConfigReconcilable`); mco refuses those sections in
///   every MachineConfig at admission (it does not manage them), so there is nothing to relax;
/// - `managedBootImages.machineManagers` non-empty: mco manages no machine sets;
/// - `bootImageSkewEnforcement.mode` other than `None`: mco has no boot images.
///
/// `managementState`, `logLevel`, `unsupportedConfigOverrides`, `observedConfig` and the
/// revision fields are ignored by MCO too and are kept as given; `operatorLogLevel` sets MCO's
/// own verbosity and is kept as given (mco's is `RUST_LOG`).
fn validate_unsupported(other: &Map<String, Value>) -> Vec<FieldError> {
    let mut out = Vec::new();
    if other
        .get("irreconcilableValidationOverrides")
        .is_some_and(|v| !v.is_null())
    {
        out.push(FieldError::new(
            "spec.irreconcilableValidationOverrides",
            "Forbidden: mco refuses storage.disks, storage.filesystems and storage.raid in every MachineConfig (it does not manage them), so there are no irreconcilable changes to allow",
        ));
    }
    if other
        .get("managedBootImages")
        .and_then(|m| m.get("machineManagers"))
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
    {
        out.push(FieldError::new(
            "spec.managedBootImages.machineManagers",
            "Forbidden: mco manages no machine sets, so it cannot update their boot images",
        ));
    }
    if let Some(mode) = other
        .get("bootImageSkewEnforcement")
        .and_then(|b| b.get("mode"))
        .and_then(Value::as_str)
        .filter(|m| *m != "None")
    {
        out.push(FieldError::new(
            "spec.bootImageSkewEnforcement.mode",
            format!(
                "Forbidden: mco has no boot images to enforce a skew on (mode {})",
                crate::gofmt::quote(mode)
            ),
        ));
    }
    out
}

/// Admission of a MachineConfiguration (mco-facts 6.1): the name must be `cluster`; `files` and
/// `units` at most 50 entries, unique by path / name; each `actions` list 1..10 entries with
/// `Reboot` and `None` standing alone; `reload` required iff `Reload`, `restart` iff `Restart`;
/// service and unit names `${NAME}${SERVICETYPE}` (at most 255 characters); `Special` is not
/// user-settable; file paths absolute. Messages are the CRD's (CEL rules and enum) texts.
pub fn validate_machine_configuration(mc: &MachineConfiguration) -> Result<(), Invalid> {
    let mut causes = crate::model::validate_object_meta(&mc.metadata);
    let name = mc.metadata.name.clone().unwrap_or_default();
    if name != CLUSTER {
        causes.push(FieldError::new(
            "metadata.name",
            "Only a single object of MachineConfiguration is allowed and it must be named cluster.",
        ));
    }
    if let Some(p) = &mc.spec.node_disruption_policy {
        causes.extend(validate_policy_spec(p, "spec.nodeDisruptionPolicy"));
    }
    causes.extend(validate_unsupported(&mc.spec.other));
    if causes.is_empty() {
        Ok(())
    } else {
        Err(Invalid {
            kind: "MachineConfiguration".into(),
            name,
            causes,
        })
    }
}

/// The CRD's enum check on every `actions[].type` of a raw MachineConfiguration, run before it
/// is decoded so that an unknown type gets the API server's message (`Unsupported value:
/// "Bounce": supported values: ...`) naming the field, not a decoder error. `Special` passes
/// here and is refused by [`validate_policy_spec`] with the same message.
pub fn check_action_types(raw: &Value) -> Result<(), Invalid> {
    let mut causes = Vec::new();
    let policy = &raw["spec"]["nodeDisruptionPolicy"];
    let mut lists: Vec<(String, &Value)> = vec![(
        "spec.nodeDisruptionPolicy.sshkey.actions".into(),
        &policy["sshkey"]["actions"],
    )];
    for key in ["files", "units"] {
        for (i, entry) in policy[key].as_array().into_iter().flatten().enumerate() {
            lists.push((
                format!("spec.nodeDisruptionPolicy.{key}[{i}].actions"),
                &entry["actions"],
            ));
        }
    }
    for (at, actions) in lists {
        for (j, a) in actions.as_array().into_iter().flatten().enumerate() {
            let t = &a["type"];
            let known = t.as_str().is_some_and(|t| {
                [
                    "Reboot",
                    "Drain",
                    "Reload",
                    "Restart",
                    "DaemonReload",
                    "None",
                    "Special",
                ]
                .contains(&t)
            });
            if !known {
                causes.push(FieldError::new(
                    format!("{at}[{j}].type"),
                    format!("Unsupported value: {}: supported values: \"Reboot\", \"Drain\", \"Reload\", \"Restart\", \"DaemonReload\", \"None\"", crate::gofmt::quote(&match t { Value::String(s) => s.clone(), other => other.to_string() })),
                ));
            }
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(Invalid {
            kind: "MachineConfiguration".into(),
            name: raw["metadata"]["name"].as_str().unwrap_or("").to_string(),
            causes,
        })
    }
}

/// The 6.1 rules for one `spec.nodeDisruptionPolicy` at field path `at`.
pub fn validate_policy_spec(p: &NodeDisruptionPolicyConfig, at: &str) -> Vec<FieldError> {
    let mut causes = Vec::new();
    for (list, len) in [("files", p.files.len()), ("units", p.units.len())] {
        if len > MAX_SPEC_ENTRIES {
            causes.push(FieldError::new(
                format!("{at}.{list}"),
                format!("Too many: {len}: must have at most {MAX_SPEC_ENTRIES} items"),
            ));
        }
    }
    for (i, f) in p.files.iter().enumerate() {
        let field = format!("{at}.files[{i}]");
        if !f.path.starts_with('/') {
            causes.push(FieldError::new(
                format!("{field}.path"),
                format!("Invalid value: {:?}: path must be an absolute path", f.path),
            ));
        }
        if p.files[..i].iter().any(|o| o.path == f.path) {
            causes.push(FieldError::new(
                field.clone(),
                format!("Duplicate value: {{\"path\":{:?}}}", f.path),
            ));
        }
        causes.extend(validate_actions(&f.actions, &format!("{field}.actions")));
    }
    for (i, u) in p.units.iter().enumerate() {
        let field = format!("{at}.units[{i}]");
        if let Err(m) = check_service_name(&u.name) {
            causes.push(FieldError::new(format!("{field}.name"), m));
        }
        if p.units[..i].iter().any(|o| o.name == u.name) {
            causes.push(FieldError::new(
                field.clone(),
                format!("Duplicate value: {{\"name\":{:?}}}", u.name),
            ));
        }
        causes.extend(validate_actions(&u.actions, &format!("{field}.actions")));
    }
    if !p.sshkey.actions.is_empty() {
        causes.extend(validate_actions(&p.sshkey.actions, &format!("{at}.sshkey.actions")));
    }
    causes
}

fn validate_actions(actions: &[Action], at: &str) -> Vec<FieldError> {
    let mut causes = Vec::new();
    if actions.is_empty() {
        causes.push(FieldError::new(at, "Required value"));
    }
    if actions.len() > MAX_ACTIONS {
        causes.push(FieldError::new(
            at,
            format!("Too many: {}: must have at most {MAX_ACTIONS} items", actions.len()),
        ));
    }
    for (t, word) in [(ActionType::Reboot, "Reboot"), (ActionType::None, "None")] {
        if actions.len() > 1 && actions.iter().any(|a| a.kind == t) {
            causes.push(FieldError::new(
                at,
                format!("Invalid value: \"array\": {word} action can only be specified standalone, as it will override any other actions"),
            ));
        }
    }
    for (i, a) in actions.iter().enumerate() {
        let field = format!("{at}[{i}]");
        if a.kind == ActionType::Special {
            causes.push(FieldError::new(
                format!("{field}.type"),
                "Unsupported value: \"Special\": supported values: \"Reboot\", \"Drain\", \"Reload\", \"Restart\", \"DaemonReload\", \"None\"",
            ));
        }
        for (t, svc, word, key) in [
            (ActionType::Reload, &a.reload, "Reload", "reload"),
            (ActionType::Restart, &a.restart, "Restart", "restart"),
        ] {
            if (a.kind == t) != svc.is_some() {
                causes.push(FieldError::new(
                    field.clone(),
                    format!(
                        "Invalid value: \"object\": {key} is required when type is {word}, and forbidden otherwise"
                    ),
                ));
            }
            if let Some(s) = svc {
                if let Err(m) = check_service_name(&s.service_name) {
                    causes.push(FieldError::new(format!("{field}.{key}.serviceName"), m));
                }
            }
        }
    }
    causes
}

/// `NodeDisruptionPolicyServiceName`: `^[a-zA-Z0-9:._\\-]+\..` and a systemd unit suffix, at most
/// 255 characters. Errors carry the CRD's messages.
pub fn check_service_name(name: &str) -> Result<(), String> {
    if name.len() > MAX_SERVICE_NAME {
        return Err(format!("Too long: may not be more than {MAX_SERVICE_NAME} bytes"));
    }
    if !SERVICE_TYPES.iter().any(|t| name.ends_with(t)) {
        return Err(format!("Invalid value: \"string\": Invalid ${{SERVICETYPE}} in service name. Expected format is ${{NAME}}${{SERVICETYPE}}, where ${{SERVICETYPE}} must be one of {}.", SERVICE_TYPES.iter().map(|t| format!("{t:?}")).collect::<Vec<_>>().join(", ")));
    }
    let ok_char = |c: char| c.is_ascii_alphanumeric() || ":._\\-".contains(c);
    let head_ok = name
        .find(|c: char| !ok_char(c))
        .map_or(name.len(), |i| i)
        .min(name.len());
    // The regex needs one or more allowed characters, then a '.', then any character.
    let prefix = &name[..head_ok];
    let valid = prefix
        .char_indices()
        .any(|(i, c)| i > 0 && c == '.' && i + 1 < name.len());
    if !valid {
        return Err("Invalid value: \"string\": Invalid ${NAME} in service name. Expected format is ${NAME}${SERVICETYPE}, where {NAME} must be atleast 1 character long and can only consist of alphabets, digits, \":\", \"-\", \"_\", \".\", and \"\\\"".into());
    }
    Ok(())
}
