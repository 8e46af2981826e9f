//! [`RealHost`]: the node the process runs on (root `/`).

use super::boot::BootEnv;
use super::kargs::KargsUpdate;
use super::os::OsState;
use super::{is_enabled, run_command, Host, HostError, ServiceAction, UnitVerb};
use std::path::Path;

/// The machine itself: paths are used as they are, users via NSS (`getpwnam`/`getgrnam`),
/// `systemctl` without `--root`, boot id from `/proc/sys/kernel/random/boot_id`, reboot through
/// `systemd-run` as MCO (`pkg/daemon/update.go` `reboot()`): see [`reboot_command`]; kernel
/// arguments through the boot setup [`super::boot::detect`] finds.
#[derive(Clone, Debug)]
pub struct RealHost {
    boot: BootEnv,
}

impl Default for RealHost {
    fn default() -> Self {
        RealHost::new()
    }
}

impl RealHost {
    pub fn new() -> RealHost {
        RealHost { boot: BootEnv::host() }
    }

    /// A real host whose boot setup is looked for in `boot` (a sandbox root holding boot
    /// files, commands on a path the caller controls) instead of `/` and `PATH`: the tests of
    /// the kernel-argument backends. Everything else is the machine's.
    pub fn with_boot_env(boot: BootEnv) -> RealHost {
        RealHost { boot }
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

    fn reboot(&self, reason: &str) -> Result<(), HostError> {
        let (command, args) = reboot_command(reason);
        let shown = format!("{command} {}", args.join(" "));
        let call = match std::process::Command::new(command).args(&args).output() {
            Err(e) => RebootCall::NotStarted(e.to_string()),
            // No exit code: a signal ended it.
            Ok(out) => match out.status.code() {
                Some(code) => RebootCall::Exited(code, String::from_utf8_lossy(&out.stderr).into_owned()),
                None => RebootCall::Killed,
            },
        };
        reboot_requested(&shown, call)
    }

    /// Through the boot setup of the host ([`super::boot::detect`]: rpm-ostree, grubby,
    /// BootLoaderSpec entries, GRUB's `/etc/default/grub`, kernel-install), named in the log.
    /// A host with none of them is an error that says what is missing and how to recover.
    fn update_kernel_arguments(&self, update: &KargsUpdate) -> Result<(), HostError> {
        if update.is_empty() {
            return Ok(());
        }
        let backend = super::boot::detect(&self.boot)?;
        tracing::info!(backend = backend.name(), "kernel arguments through {}", backend.name());
        backend.apply(&self.boot, update)
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

/// The transient unit that runs the reboot: MCO's is `machine-config-daemon-reboot`.
pub const REBOOT_UNIT: &str = "mco-daemon-reboot";

/// The command line of a reboot request: `systemd-run --no-block --collect
/// --unit=mco-daemon-reboot --description=... systemctl reboot`. MCO's `rebootCommand`
/// (`pkg/daemon/update.go`) is `systemd-run --unit machine-config-daemon-reboot ... systemctl
/// reboot`: the reboot runs in a transient unit of its own, so the shutdown it starts cannot
/// kill it as a child of the daemon's cgroup. mco adds `--no-block` (return once the job is
/// queued, so the call has nothing left to lose to the shutdown) and `--collect` (a failed
/// reboot unit is unloaded, so "already exists" at a later try means a reboot really is queued). Measured on real
/// hosts (`../shared/reference/realhost.md`): `systemctl reboot` as a child failed in 3 of 120
/// reboots, through `systemd-run` in none of 60.
pub fn reboot_command(reason: &str) -> (&'static str, Vec<String>) {
    let description = format!("mco daemon: {reason}");
    (
        "systemd-run",
        vec![
            "--no-block".into(),
            "--collect".into(),
            format!("--unit={REBOOT_UNIT}"),
            format!("--description={description}"),
            "systemctl".into(),
            "reboot".into(),
        ],
    )
}

/// How a reboot call ended, as [`reboot_requested`] reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RebootCall {
    /// The command could not be started (`systemd-run` missing, permission): the io error.
    NotStarted(String),
    /// It exited with this status and stderr.
    Exited(i32, String),
    /// A signal ended it (the shutdown it started stops it).
    Killed,
}

/// Whether a reboot was requested, from how the call ended: exit 0, a call killed by a signal
/// (the shutdown it started stopped it), a transient unit that already exists (a reboot is
/// already queued) or a bus connection the shutdown dropped all mean the machine is going down;
/// MCO does not treat them as a failure either (`pkg/daemon/update.go` `reboot()` logs the
/// error and waits to be stopped). A command that cannot start or that systemd refuses is an
/// error, and the daemon rolls the update back.
pub fn reboot_requested(command: &str, call: RebootCall) -> Result<(), HostError> {
    let failed = |detail: String, exit: Option<i32>| HostError::Command {
        command: command.to_string(),
        detail,
        exit,
    };
    match call {
        RebootCall::NotStarted(e) => Err(failed(e, None)),
        RebootCall::Exited(0, _) => Ok(()),
        RebootCall::Killed => {
            tracing::warn!(
                "{command} was ended by a signal (the shutdown it started, or the daemon's own stop): \
                 taken as requested; a start on this boot asks again if no reboot follows"
            );
            Ok(())
        }
        RebootCall::Exited(_, stderr)
            if [
                "already exists",
                "Connection reset by peer",
                "Transport endpoint is not connected",
            ]
            .iter()
            .any(|m| stderr.contains(m)) =>
        {
            tracing::warn!("reboot already under way: {}", stderr.trim());
            Ok(())
        }
        RebootCall::Exited(code, stderr) => Err(failed(stderr.trim().to_string(), Some(code))),
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

    #[test]
    fn a_reboot_runs_in_a_transient_unit_as_mco_does() {
        let (command, args) = reboot_command("Node will reboot into config rendered-worker-1");
        assert_eq!(command, "systemd-run");
        assert_eq!(
            args,
            [
                "--no-block",
                "--collect",
                "--unit=mco-daemon-reboot",
                "--description=mco daemon: Node will reboot into config rendered-worker-1",
                "systemctl",
                "reboot"
            ]
        );
    }

    #[test]
    fn a_reboot_the_shutdown_interrupts_is_not_a_failure() {
        let ok = |call| reboot_requested("systemd-run", call).is_ok();
        assert!(ok(RebootCall::Exited(0, String::new())));
        assert!(ok(RebootCall::Killed), "SIGTERM from the shutdown it started");
        assert!(ok(RebootCall::Exited(
            1,
            "Failed to start transient service unit: Unit mco-daemon-reboot.service already exists.".into()
        )));
        assert!(ok(RebootCall::Exited(
            1,
            "Call to Reboot failed: Connection reset by peer".into()
        )));
        // What cannot request a reboot stays a failure, and names the command.
        let e = reboot_requested(
            "systemd-run",
            RebootCall::NotStarted("No such file or directory (os error 2)".into()),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "systemd-run failed: No such file or directory (os error 2)"
        );
        let e = reboot_requested("systemd-run", RebootCall::Exited(1, "Access denied\n".into())).unwrap_err();
        assert!(matches!(e, HostError::Command { exit: Some(1), .. }), "{e}");
    }
}
