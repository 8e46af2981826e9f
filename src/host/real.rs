//! [`RealHost`]: the node the process runs on (root `/`).

use super::kargs::KargsUpdate;
use super::os::OsState;
use super::{is_enabled, run_command, Host, HostError, ServiceAction, UnitVerb};
use std::path::Path;

/// The machine itself: paths are used as they are, users via NSS (`getpwnam`/`getgrnam`),
/// `systemctl` without `--root`, boot id from `/proc/sys/kernel/random/boot_id`, reboot via
/// `systemctl reboot` (MCO runs it through `systemd-run`, `pkg/daemon/update.go`).
#[derive(Clone, Debug, Default)]
pub struct RealHost;

impl RealHost {
    pub fn new() -> RealHost {
        RealHost
    }
}

impl Host for RealHost {
    fn root(&self) -> &Path {
        Path::new("/")
    }

    fn lookup_user(&self, name: &str) -> Result<Option<u32>, HostError> {
        nix::unistd::User::from_name(name)
            .map(|u| u.map(|u| u.uid.as_raw()))
            .map_err(|e| HostError::Invalid(format!("getpwnam {name}: {e}")))
    }

    fn lookup_group(&self, name: &str) -> Result<Option<u32>, HostError> {
        nix::unistd::Group::from_name(name)
            .map(|g| g.map(|g| g.gid.as_raw()))
            .map_err(|e| HostError::Invalid(format!("getgrnam {name}: {e}")))
    }

    fn systemctl(&self, verb: UnitVerb, units: &[&str]) -> Result<(), HostError> {
        let mut args = vec![verb.as_str().to_string()];
        args.extend(units.iter().map(|u| u.to_string()));
        run_command("systemctl", &args).map(drop)
    }

    fn unit_state(&self, unit: &str) -> Result<String, HostError> {
        is_enabled(&[], unit)
    }

    fn service(&self, action: &ServiceAction) -> Result<(), HostError> {
        let args: Vec<String> = match action {
            ServiceAction::Reload(u) => vec!["reload".into(), u.clone()],
            ServiceAction::Restart(u) => vec!["restart".into(), u.clone()],
            ServiceAction::DaemonReload => vec!["daemon-reload".into()],
        };
        run_command("systemctl", &args).map(drop)
    }

    fn reboot(&self, _reason: &str) -> Result<(), HostError> {
        run_command("systemctl", &["reboot".to_string()]).map(drop)
    }

    /// rpm-ostree hosts (`/run/ostree-booted` exists): `rpm-ostree kargs --delete-if-present=...
    /// --append=...` as MCO; other hosts: `grubby --update-kernel=ALL --remove-args=...
    /// --args=...`. The backend chosen is logged.
    fn update_kernel_arguments(&self, update: &KargsUpdate) -> Result<(), HostError> {
        if update.is_empty() {
            return Ok(());
        }
        let (command, args) = if Path::new("/run/ostree-booted").exists() {
            ("rpm-ostree", update.rpm_ostree_args())
        } else {
            ("grubby", update.grubby_args())
        };
        tracing::info!(backend = command, "Running {command} {}", args.join(" "));
        run_command(command, &args).map(drop)
    }

    /// On an rpm-ostree host the commands of [`OsState::rpm_ostree_commands`]; elsewhere the
    /// change is logged and ignored, as MCO does on non-CoreOS nodes.
    fn update_os(&self, from: &OsState, to: &OsState) -> Result<(), HostError> {
        if from == to {
            return Ok(());
        }
        if !Path::new("/run/ostree-booted").exists() {
            tracing::warn!("not an rpm-ostree host: osImageURL, kernelType and extensions are not applied");
            return Ok(());
        }
        for cmd in from.rpm_ostree_commands(to) {
            tracing::info!(backend = "rpm-ostree", "Running rpm-ostree {}", cmd.join(" "));
            run_command("rpm-ostree", &cmd)?;
        }
        Ok(())
    }

    /// On an rpm-ostree host, from `rpm-ostree status --json` and the running kernel's release
    /// ([`super::os::booted_from_rpm_ostree`]); elsewhere `None` (the check is skipped, as MCO
    /// skips it on non-CoreOS nodes).
    fn booted_os(&self) -> Result<Option<OsState>, HostError> {
        if !Path::new("/run/ostree-booted").exists() {
            return Ok(None);
        }
        let out = run_command("rpm-ostree", &["status".into(), "--json".into()])?;
        let status: serde_json::Value =
            serde_json::from_str(&out).map_err(|e| HostError::Invalid(format!("rpm-ostree status --json: {e}")))?;
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        Ok(super::os::booted_from_rpm_ostree(&status, release.trim()))
    }

    fn kernel_cmdline(&self) -> Result<String, HostError> {
        std::fs::read_to_string("/proc/cmdline")
            .map(|s| s.trim().to_string())
            .map_err(|e| HostError::io("read", "/proc/cmdline", e))
    }

    fn boot_id(&self) -> Result<String, HostError> {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_string())
            .map_err(|e| HostError::io("read", "/proc/sys/kernel/random/boot_id", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_host_resolves_paths_as_they_are() {
        let h = RealHost::new();
        assert_eq!(h.resolve("/etc/hostname").unwrap(), Path::new("/etc/hostname"));
    }
}
