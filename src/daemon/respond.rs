//! The daemon's response to a drift under its pool's DriftPolicies ([`crate::drift`]): which
//! action each drifted path takes, the record the log keeps of it, and a Revert's write.
//!
//! How the daemon learns its policy: it lists the DriftPolicies and the pools itself, with its
//! node token (the node authorizer lets a node read `driftpolicies`, as it reads the pools and
//! the MachineConfiguration `cluster` for the node disruption policy), at each drift report.
//! Nothing is resolved onto MCO's kinds: a rendered MachineConfig, a pool and a Node stay
//! exactly MCO's, so MCO's own tools read them unchanged. A policy that cannot be read (an
//! older server, a network error) leaves MCO's behaviour: every path Degrades.
//!
//! A Revert writes the one path again through the update's own writers ([`apply`]'s file,
//! unit and SSH key writes: atomic, the config's mode and owner) while the monitor keeps
//! running: the atomic replace is never seen half done, and the monitor's next report (the
//! path matching again) is the proof the revert took. The node disruption policy then decides
//! what else happens, by MCO's lookup for the path ([`disruption_actions`]): no policy for the
//! path, nothing (the bytes written are the ones the node already ran with before the drift, so
//! an update's default Reboot would restart the node for no change of config); rebootless
//! actions (Restart, Reload, DaemonReload, Special, None) are carried out; a Reboot or a Drain
//! is done as the force file does it (drain, rewrite every file, reboot), since a reboot is only
//! ever taken after a drain.

use super::apply;
use super::validate::{Expected, ManagedSet};
use crate::disruption::{Action as NdpAction, NodeDisruptionPolicyConfig};
use crate::drift::{Decision, DriftRecord, Rules};
use crate::host::Host;
use crate::model::{DriftPolicy, Kind, MachineConfig, MachineConfigPool, Node};

/// The DriftPolicy rules for `node`'s primary pool, read through `client`; no rules (MCO's
/// behaviour) when the node is in no pool or the policies cannot be read (logged).
pub(super) async fn rules(client: &crate::client::Client, node: Option<&Node>) -> Rules {
    let Some(node) = node else {
        return Rules::default();
    };
    let items = |v: serde_json::Value| -> Vec<serde_json::Value> { v["items"].as_array().cloned().unwrap_or_default() };
    let policies = match client.list(Kind::DriftPolicy).await {
        Ok(v) => items(v),
        Err(e) => {
            tracing::warn!(error = %e, "could not read the DriftPolicies; every drift degrades the node");
            return Rules::default();
        }
    };
    if policies.is_empty() {
        return Rules::default();
    }
    let policies: Vec<DriftPolicy> = policies
        .into_iter()
        .filter_map(|p| serde_json::from_value(p).ok())
        .collect();
    let pools: Vec<MachineConfigPool> = match client.list(Kind::MachineConfigPool).await {
        Ok(v) => items(v)
            .into_iter()
            .filter_map(|p| serde_json::from_value(p).ok())
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "could not read the pools; every drift degrades the node");
            return Rules::default();
        }
    };
    let refs: Vec<&MachineConfigPool> = pools.iter().collect();
    let pool = crate::rollout::primary_pool(&refs, node).ok().flatten();
    crate::drift::resolve(&policies, pools.iter().find(|p| Some(p.name()) == pool))
}

/// The log's record of one drifted path: its mismatch, the action decided and the diff from
/// what is on disk to what `set` expects (text, bounded; binary said as such).
pub(super) fn record(
    host: &dyn Host,
    set: Option<&ManagedSet>,
    path: &str,
    message: &str,
    d: &Decision,
) -> DriftRecord {
    let diff = match set.and_then(|s| s.expected(path)) {
        Some(Expected::File { contents, .. }) => match host.read(path) {
            Ok(on_disk) => crate::drift::contents_diff(path, &on_disk, contents),
            Err(_) => String::new(),
        },
        _ => String::new(),
    };
    DriftRecord {
        path: path.to_string(),
        mismatch: crate::drift::mismatch(message).to_string(),
        action: d.action.as_str().to_string(),
        rule: d.rule.clone().unwrap_or_default(),
        message: message.to_string(),
        diff,
        reverted: String::new(),
    }
}

/// Writes managed path `path` of `mc` again, through the update's writers: a file of
/// `storage.files` ([`apply::write_files`]: its mode and owner), a unit file or dropin (the
/// unit through [`apply::write_units`], enablement included), the `core` SSH keys. Returns what
/// was written (`12 bytes, mode 0644`). Errors: `path` is none of those in `mc`, or the write's.
pub(super) fn rewrite(host: &dyn Host, mc: &MachineConfig, path: &str) -> Result<String, String> {
    let cfg = apply::ignition_config(mc)?;
    let managed = crate::daemon::managed::managed_paths(&cfg);
    let wrote = |host: &dyn Host| -> String {
        match host.metadata(path) {
            Ok(m) => format!(
                "{} bytes, mode {:04o}",
                host.read(path).map(|b| b.len()).unwrap_or(0),
                m.mode & 0o7777
            ),
            Err(_) => "written".to_string(),
        }
    };
    if let Some(f) = cfg.storage.files.iter().find(|f| f.path == path) {
        apply::write_files(host, std::slice::from_ref(f), &managed)?;
        return Ok(wrote(host));
    }
    let unit = cfg.systemd.units.iter().find(|u| {
        apply::unit_path(&u.name) == path || u.dropins.iter().any(|d| apply::dropin_path(&u.name, &d.name) == path)
    });
    if let Some(u) = unit {
        apply::write_units(host, &[u], &managed)?;
        return Ok(wrote(host));
    }
    if path == apply::SSH_KEYS_PATH {
        apply::write_ssh_keys(host, Some(&cfg), &cfg)?;
        return Ok(wrote(host));
    }
    Err(format!("{path} is not a file, unit or dropin of {}", mc.name()))
}

/// The node disruption policy's actions for a change of `path` alone in `mc`, by MCO's lookup
/// (`calculatePostConfigChangeNodeDisruptionActionFromMCDiffs`, mco-facts 6.3): a file's
/// closest file policy, a unit file's or dropin's unit policy by unit name, the SSH keys' sshkey
/// policy; `None` when no policy names the path.
pub(super) fn disruption_actions(
    mc: &MachineConfig,
    policies: &NodeDisruptionPolicyConfig,
    path: &str,
) -> Option<Vec<NdpAction>> {
    if path == apply::SSH_KEYS_PATH {
        return Some(policies.sshkey.actions.clone()).filter(|a| !a.is_empty());
    }
    let cfg = apply::ignition_config(mc).ok()?;
    let unit = cfg.systemd.units.iter().find(|u| {
        apply::unit_path(&u.name) == path || u.dropins.iter().any(|d| apply::dropin_path(&u.name, &d.name) == path)
    });
    if let Some(u) = unit {
        return policies
            .units
            .iter()
            .find(|p| p.name == u.name)
            .map(|p| p.actions.clone());
    }
    crate::disruption::closest_file_policy(path, &policies.files).map(|p| p.actions.clone())
}

/// `Restart chronyd.service, DaemonReload`: the actions as the history names them.
pub(super) fn describe(actions: &[NdpAction]) -> String {
    actions
        .iter()
        .map(|a| {
            let svc = a
                .restart
                .as_ref()
                .or(a.reload.as_ref())
                .map(|s| s.service_name.as_str());
            match svc {
                Some(s) => format!("{} {s}", a.kind.as_str()),
                None => a.kind.as_str().to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}
