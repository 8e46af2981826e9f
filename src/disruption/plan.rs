//! The plan of one update (mco-facts 6.3, 6.4): what changed between two rendered configs, the
//! actions the policies give for it, and whether the node drains first.

use super::registries::registries_change_is_safe;
use super::{Action, ActionType, FilePolicy, NodeDisruptionPolicyConfig, REGISTRIES_CONF};
use crate::ignition::Config;
use serde_json::Value;

/// What changed between two rendered configs, as the planner needs it (MCO's
/// `machineConfigDiff` and `CalculateConfigFileDiffs` / unit diffs, `pkg/daemon/update.go`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// osImageURL, kernelArguments, fips, kernelType or extensions changed (always Reboot).
    pub os: bool,
    /// File paths added, removed or changed in any field, in new-then-removed order.
    pub files: Vec<String>,
    /// Unit names added, removed or changed (dropins included).
    pub units: Vec<String>,
    /// `passwd.users` changed (SSH keys, password hash).
    pub passwd: bool,
}

impl Changes {
    /// The file paths and unit names that differ between `old` and `new`; `os` is passed in
    /// (the caller compares the MachineConfig fields outside Ignition).
    pub fn between(old: &Config, new: &Config, os: bool) -> Changes {
        let mut files = Vec::new();
        for f in &new.storage.files {
            if old.storage.files.iter().find(|o| o.path == f.path) != Some(f) {
                files.push(f.path.clone());
            }
        }
        for f in &old.storage.files {
            if !new.storage.files.iter().any(|n| n.path == f.path) {
                files.push(f.path.clone());
            }
        }
        let mut units = Vec::new();
        for u in &new.systemd.units {
            if old.systemd.units.iter().find(|o| o.name == u.name) != Some(u) {
                units.push(u.name.clone());
            }
        }
        for u in &old.systemd.units {
            if !new.systemd.units.iter().any(|n| n.name == u.name) {
                units.push(u.name.clone());
            }
        }
        Changes {
            os,
            files,
            units,
            passwd: old.passwd.users != new.passwd.users,
        }
    }
}

/// The policy whose path is the longest equal to `path` or a parent directory of it (a prefix
/// ending at a path separator), MCO's `FindClosestFilePolicyPathMatch`.
pub fn closest_file_policy<'a>(path: &str, policies: &'a [FilePolicy]) -> Option<&'a FilePolicy> {
    policies
        .iter()
        .filter(|p| {
            let dir = p.path.trim_end_matches('/');
            path == p.path || path.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/'))
        })
        .max_by_key(|p| p.path.trim_end_matches('/').len())
}

/// MCO's `calculatePostConfigChangeNodeDisruptionActionFromMCDiffs` (mco-facts 6.3, steps 2-7;
/// the force file's Reboot is the caller's): `[Reboot]` for OS-level changes; `[None]` without
/// file, unit or passwd changes; else each changed file's closest policy (none -> `[Reboot]`),
/// each changed unit's exact policy (none -> `[Reboot]`), then the sshkey actions; any Reboot
/// collapses the list to `[Reboot]`, None is dropped beside other actions.
pub fn calculate_actions(changes: &Changes, policies: &NodeDisruptionPolicyConfig) -> Vec<Action> {
    let reboot = || vec![Action::of(ActionType::Reboot)];
    if changes.os {
        return reboot();
    }
    if changes.files.is_empty() && changes.units.is_empty() && !changes.passwd {
        return vec![Action::of(ActionType::None)];
    }
    let mut out = Vec::new();
    for path in &changes.files {
        match closest_file_policy(path, &policies.files) {
            Some(p) => out.extend(p.actions.iter().cloned()),
            None => return reboot(),
        }
    }
    for unit in &changes.units {
        match policies.units.iter().find(|p| &p.name == unit) {
            Some(p) => out.extend(p.actions.iter().cloned()),
            None => return reboot(),
        }
    }
    if changes.passwd {
        out.extend(policies.sshkey.actions.iter().cloned());
    }
    if out.iter().any(|a| a.kind == ActionType::Reboot) {
        return reboot();
    }
    if out.iter().any(|a| a.kind != ActionType::None) {
        out.retain(|a| a.kind != ActionType::None);
    } else {
        out = vec![Action::of(ActionType::None)];
    }
    out
}

/// What a node does for one update: the actions (6.3) and whether it drains first (6.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The actions after the writes, in order (`[Reboot]` alone when the node reboots).
    pub actions: Vec<Action>,
    /// Whether the node drains before the writes.
    pub drain: bool,
}

impl Plan {
    /// `[Reboot]` with a drain: the force file's plan, and the plan when a config cannot be read.
    pub fn reboot() -> Plan {
        Plan {
            actions: vec![Action::of(ActionType::Reboot)],
            drain: true,
        }
    }

    /// Whether the plan reboots.
    pub fn reboots(&self) -> bool {
        reboots(&self.actions)
    }

    /// The actions as one line: `Restart chronyd.service, DaemonReload`.
    pub fn summary(&self) -> String {
        self.actions
            .iter()
            .map(Action::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The plan for moving a node from `old` to `new` under `policies` (the cluster policies, or
/// [`default_cluster_policies`] when there is no MachineConfiguration `cluster`). OS-level
/// changes are MCO's `machineConfigDiff` fields (osImageURL, kernelArguments, fips, kernelType
/// with `""` = `default`, extensions). Errors: an Ignition config that does not parse.
pub fn plan(
    old: &crate::model::MachineConfig,
    new: &crate::model::MachineConfig,
    policies: &NodeDisruptionPolicyConfig,
) -> Result<Plan, String> {
    let parse = |mc: &crate::model::MachineConfig| -> Result<Config, String> {
        match &mc.spec.config {
            None | Some(Value::Null) => Ok(Config::default()),
            Some(v) => serde_json::from_value(v.clone()).map_err(|e| e.to_string()),
        }
    };
    let (oc, nc) = (parse(old)?, parse(new)?);
    let (o, n) = (&old.spec, &new.spec);
    let kernel = |k: &str| if k.is_empty() { "default" } else { k }.to_string();
    let os = o.os_image_url != n.os_image_url
        || o.kernel_arguments != n.kernel_arguments
        || o.fips != n.fips
        || kernel(&o.kernel_type) != kernel(&n.kernel_type)
        || o.extensions != n.extensions;
    let actions = calculate_actions(&Changes::between(&oc, &nc, os), policies);
    let registries = |c: &Config| {
        c.storage
            .files
            .iter()
            .find(|f| f.path == REGISTRIES_CONF)
            .map(|f| crate::ignition::file_contents(f).unwrap_or_default())
    };
    let drain = drain_required(&actions, registries(&oc).as_deref(), registries(&nc).as_deref());
    Ok(Plan { actions, drain })
}

/// Whether the plan reboots.
pub fn reboots(actions: &[Action]) -> bool {
    actions.iter().any(|a| a.kind == ActionType::Reboot)
}

/// MCO's drain decision on the NDP path (mco-facts 6.4): drain for Reboot or Drain; for
/// Special, drain unless the `registries.conf` change is safe (`old`/`new` are the file's
/// contents, `None` when absent).
pub fn drain_required(actions: &[Action], old_registries: Option<&[u8]>, new_registries: Option<&[u8]>) -> bool {
    if actions
        .iter()
        .any(|a| matches!(a.kind, ActionType::Reboot | ActionType::Drain))
    {
        return true;
    }
    if actions.iter().any(|a| a.kind == ActionType::Special) {
        return !registries_change_is_safe(old_registries, new_registries);
    }
    false
}
