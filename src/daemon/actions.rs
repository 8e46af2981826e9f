//! Carrying out a node disruption plan's post-config actions on the host (MCO
//! `performPostConfigChangeNodeDisruptionAction`, `pkg/daemon/update.go`, mco-facts 6.3).
//!
//! Owns the mapping from [`Action`]s to [`Host::service`] calls and MCO's failure texts. The
//! plan itself is pure ([`crate::disruption::plan`]); Reboot is the agent's (it exits).

use crate::disruption::{Action, ActionType};
use crate::host::{Host, ServiceAction};

/// crio, reloaded for the `Special` action (`constants.CRIOServiceName`).
const CRIO: &str = "crio.service";

/// Runs the rebootless actions in list order: Reload -> `systemctl reload X`, Restart ->
/// `systemctl restart X`, DaemonReload -> `systemctl daemon-reload`, Special -> `systemctl
/// reload crio.service`, None -> MCO's `SkipReboot` (logged), Drain -> nothing (done before the
/// writes). On a sandbox host the service calls are lines in its journal file.
///
/// Errors (the node's Degraded reason, MCO's texts): `could not apply update: restarting X
/// service failed. Error: ...`, `could not apply update: reloading X configuration failed.
/// Error: ...`. A Reboot in the list is refused: the caller reboots instead.
pub fn perform(host: &dyn Host, actions: &[Action], config: &str) -> Result<(), String> {
    for a in actions {
        if a.kind == ActionType::Drain {
            continue;
        }
        tracing::info!(
            "Performing post config change action: {} for config {config}",
            a.kind.as_str()
        );
        let service =
            |s: &Option<crate::disruption::ServiceRef>| s.as_ref().map(|s| s.service_name.clone()).unwrap_or_default();
        let reload = |name: String| {
            host.service(&ServiceAction::Reload(name.clone()))
                .map_err(|e| format!("could not apply update: reloading {name} configuration failed. Error: {e}"))
        };
        match a.kind {
            ActionType::Reboot => return Err("a Reboot action cannot be performed rebootless".into()),
            ActionType::None => tracing::info!("SkipReboot: Node has Desired Config {config}, skipping reboot"),
            ActionType::Restart => {
                let name = service(&a.restart);
                host.service(&ServiceAction::Restart(name.clone()))
                    .map_err(|e| format!("could not apply update: restarting {name} service failed. Error: {e}"))?;
                tracing::info!("{name} service restarted successfully!");
            }
            ActionType::Reload => reload(service(&a.reload))?,
            ActionType::Special => reload(CRIO.to_string())?,
            ActionType::DaemonReload => host.service(&ServiceAction::DaemonReload).map_err(|e| {
                format!("could not apply update: reloading daemon-reload configuration failed. Error: {e}")
            })?,
            ActionType::Drain => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::test_support::sandbox;

    #[test]
    fn actions_are_journal_lines_in_order_on_a_sandbox() {
        let (_d, host) = sandbox();
        let actions = [
            Action::of(ActionType::Drain),
            Action::of(ActionType::DaemonReload),
            Action::restart("chronyd.service"),
            Action::reload("a.service"),
            Action::of(ActionType::Special),
            Action::of(ActionType::None),
        ];
        perform(&host, &actions, "rendered-worker-1").unwrap();
        let lines: Vec<String> = host
            .journal_lines()
            .unwrap()
            .iter()
            .map(|l| l.split_once(' ').unwrap().1.to_string())
            .collect();
        assert_eq!(
            lines,
            [
                "systemctl daemon-reload",
                "systemctl restart chronyd.service",
                "systemctl reload a.service",
                "systemctl reload crio.service"
            ]
        );
        assert!(perform(&host, &[Action::of(ActionType::Reboot)], "x").is_err());
    }
}
