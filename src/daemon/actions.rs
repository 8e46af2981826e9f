//! Carrying out a node disruption plan's post-config actions on the host (MCO
//! `performPostConfigChangeNodeDisruptionAction`, `pkg/daemon/update.go`, mco-facts 6.3).
//!
//! Owns the mapping from [`Action`]s to [`Host::service`] calls and MCO's failure texts, and
//! the OS changes staged before a reboot ([`stage_os_changes`]). The plan itself is pure
//! ([`crate::disruption::plan`]); Reboot is the agent's (it exits).

use crate::disruption::{Action, ActionType};
use crate::host::kargs::KargsUpdate;
use crate::host::os::OsState;
use crate::host::{Host, ServiceAction};
use crate::model::MachineConfig;

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

/// The kubelet's unit (`kubelet.service`, enabled by MCO's `01-<role>-kubelet` template).
pub const KUBELET: &str = "kubelet.service";

/// Whether `actions` restart the kubelet (a `Restart` of [`KUBELET`]): the kubelet then reads
/// its configuration again, as at a boot.
pub fn restarts_kubelet(actions: &[Action]) -> bool {
    actions
        .iter()
        .any(|a| a.kind == ActionType::Restart && a.restart.as_ref().is_some_and(|s| s.service_name == KUBELET))
}

/// MCO's OS changes of an update (mco-facts 4.2.j): the kernel-argument update (old arguments
/// deleted, new ones appended) and the OS image, kernel type and extensions, staged for the
/// reboot that follows. Errors: the node's Degraded reason.
pub fn stage_os_changes(host: &dyn Host, current: &MachineConfig, desired: &MachineConfig) -> Result<(), String> {
    if crate::host::os::canonical_kernel(&desired.spec.kernel_type) == "64k-pages"
        && std::env::consts::ARCH != "aarch64"
    {
        return Err("64k-pages is only supported for aarch64 architecture".into());
    }
    let kargs = KargsUpdate::between(&current.spec.kernel_arguments, &desired.spec.kernel_arguments);
    host.update_kernel_arguments(&kargs)
        .map_err(|e| format!("failed to update kernel arguments: {e}"))?;
    host.update_os(&OsState::of(&current.spec), &OsState::of(&desired.spec))
        .map_err(|e| format!("failed to update the OS: {e}"))
}

/// Whether [`stage_os_changes`]' error `err` for this update is MCO's pivot error (counted in
/// `mcd_pivot_errors_total`): the update changes the OS image or the kernel type (MCO's
/// `mcDiff.osUpdate || mcDiff.kernelType`, pkg/daemon/update.go) and the failure is not the
/// kernel-argument step's.
pub fn is_pivot_error(current: &MachineConfig, desired: &MachineConfig, err: &str) -> bool {
    let (from, to) = (OsState::of(&current.spec), OsState::of(&desired.spec));
    let pivots =
        (!to.os_image_url.is_empty() && to.os_image_url != from.os_image_url) || to.kernel_type != from.kernel_type;
    pivots && !err.starts_with("failed to update kernel arguments")
}

/// First boot (MCO's `machine-config-daemon-firstboot`): when `mc` has kernel arguments or an
/// OS state other than the booted one, stage them and request the reboot; returns whether it
/// did.
pub fn first_boot_os_changes(host: &dyn Host, mc: &MachineConfig, reason: &str) -> Result<bool, String> {
    let want = OsState::of(&mc.spec);
    let booted = host.booted_os().map_err(|e| e.to_string())?;
    let os_differs = booted.as_ref().is_some_and(|b| *b != want);
    if mc.spec.kernel_arguments.is_empty() && !os_differs {
        return Ok(false);
    }
    host.update_kernel_arguments(&KargsUpdate::between(&[], &mc.spec.kernel_arguments))
        .map_err(|e| format!("failed to update kernel arguments: {e}"))?;
    host.update_os(&booted.unwrap_or_default(), &want)
        .map_err(|e| format!("failed to update the OS: {e}"))?;
    super::reboot::request(host, mc.metadata.name.as_deref().unwrap_or_default(), reason)
        .map_err(|e| format!("failed to reboot: {e}"))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::test_support::sandbox;

    /// A real host with no boot setup mco can use: the update fails at once (no hang, nothing
    /// staged) with the node's Degraded reason saying what is missing and how to recover.
    #[test]
    fn kernel_arguments_on_a_host_without_a_boot_setup_degrade_with_the_way_out() {
        let dir = tempfile::tempdir().unwrap();
        let (root, bin) = (dir.path().join("root"), dir.path().join("bin"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&bin).unwrap();
        let host = crate::host::RealHost::with_boot_env(crate::host::boot::BootEnv {
            root,
            path: vec![bin.clone()],
        });
        let current = crate::daemon::test_support::mc(
            "rendered-worker-1",
            serde_json::json!({"ignition": {"version": "3.4.0"}}),
        );
        let mut desired = current.clone();
        desired.spec.kernel_arguments = vec!["nosmt".into()];
        let reason = stage_os_changes(&host, &current, &desired).unwrap_err();
        assert_eq!(
            reason,
            format!(
                "failed to update kernel arguments: no boot loader configuration to set kernel arguments in: \
                 no /run/ostree-booted (rpm-ostree), no grubby on PATH ({}), no BootLoaderSpec entries \
                 (/boot/loader/entries/*.conf), no /etc/default/grub, no /etc/kernel/cmdline. Install grubby, \
                 or GRUB with /etc/default/grub and update-grub or grub2-mkconfig, or add BootLoaderSpec entries \
                 or /etc/kernel/cmdline with kernel-install (systemd-boot), and the daemon's next retry \
                 uses it; or remove spec.kernelArguments from the pool's MachineConfigs and set the node's \
                 desiredConfig back to its currentConfig",
                bin.display()
            )
        );
        // Nothing to change: no boot setup needed.
        stage_os_changes(&host, &current, &current).unwrap();
    }

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
