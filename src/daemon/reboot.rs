//! A reboot request that is proven by the next boot, never assumed.
//!
//! Owns the reboot marker ([`REBOOT_REQUESTED_PATH`]): the config the node reboots into and the
//! boot id of the boot that asked, written right before [`Host::reboot`]. Read at the next start,
//! it says whether the reboot happened: a boot id other than the recorded one means it did; the
//! same boot id means the daemon was started again (its unit's `Restart=always`, a crash, an
//! operator's `systemctl restart`) on the very boot that asked, and the reboot is still owed.
//! Without this record a daemon restarted before the shutdown began found the new
//! `currentconfig` on disk and reported the node Done without rebooting.
//!
//! MCO keeps the same record (`pkg/daemon/daemon.go`: the pending state with the boot id, and
//! `checkStateOnFirstRun` refusing a pending config whose boot id matches the running boot,
//! "Failed to reboot?"); mco goes one step further and asks for the reboot again instead of
//! going Degraded, since the files are already written and the reboot is all that is missing.
//! A leaf of `daemon/` beside [`super::paths`]: it acts only through [`Host`].

use crate::host::{Host, HostError, Owner};
use serde::{Deserialize, Serialize};

/// Node path of the reboot marker: JSON `{"config": "<rendered config>", "bootID": "<id>"}`,
/// written atomically before each reboot request and removed once a later boot is seen.
pub const REBOOT_REQUESTED_PATH: &str = "/etc/machine-config-daemon/mco-reboot-requested";

/// What a reboot request recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RebootRequest {
    /// The config the node reboots into.
    pub config: String,
    /// `/proc/sys/kernel/random/boot_id` of the boot that asked.
    #[serde(rename = "bootID")]
    pub boot_id: String,
}

/// The state of the last reboot request, as found at start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owed {
    /// No request, or the reboot happened (the marker is removed).
    Nothing,
    /// The reboot into this config was asked for on the running boot and has not happened.
    Reboot(String),
}

/// Records that the running boot owes a reboot into `config` (before the files of an update
/// that reboots are written: a daemon killed between its last write and its reboot request is
/// then asked by its next start on the same boot to reboot, never to report Done).
///
/// Written once per boot and config (an unchanged marker is left as it is).
///
/// Errors: the boot id cannot be read or the marker cannot be written.
pub fn owe(host: &dyn Host, config: &str) -> Result<(), HostError> {
    let request = RebootRequest {
        config: config.to_string(),
        boot_id: host.boot_id()?,
    };
    let body = serde_json::to_vec(&request).expect("a reboot request serializes");
    if host.read(REBOOT_REQUESTED_PATH).is_ok_and(|have| have == body) {
        return Ok(());
    }
    // A daemon killed while writing the marker left its temp file beside it.
    if let Some(dir) = crate::host::parent_dir(REBOOT_REQUESTED_PATH) {
        host.remove_temp_files(dir)?;
    }
    host.write_atomic(REBOOT_REQUESTED_PATH, &body, 0o644, Owner::ROOT)
}

/// Records the request ([`owe`]), then asks the host to reboot.
///
/// Errors: the boot id cannot be read, the marker cannot be written, or the reboot command
/// failed ([`Host::reboot`]); on a failed reboot the marker is removed again, so a rolled-back
/// node is not taken to owe a reboot.
pub fn request(host: &dyn Host, config: &str, reason: &str) -> Result<(), HostError> {
    owe(host, config)?;
    if let Err(e) = host.reboot(reason) {
        let _ = host.remove(REBOOT_REQUESTED_PATH);
        return Err(e);
    }
    Ok(())
}

/// Reads the marker at start: on a later boot (or without one) it is removed and
/// [`Owed::Nothing`] returned; on the boot that asked, [`Owed::Reboot`].
///
/// Errors: the boot id cannot be read, or the marker cannot be read or removed. An unreadable
/// marker (not JSON: an older daemon's, or damaged) is treated as a reboot that happened and
/// removed, as the boot id it would hold cannot be compared.
pub fn owed(host: &dyn Host) -> Result<Owed, HostError> {
    let bytes = match host.read(REBOOT_REQUESTED_PATH) {
        Ok(b) => b,
        Err(e) if e.is_not_found() => return Ok(Owed::Nothing),
        Err(e) => return Err(e),
    };
    match serde_json::from_slice::<RebootRequest>(&bytes) {
        Ok(r) if r.boot_id == host.boot_id()? => Ok(Owed::Reboot(r.config)),
        Ok(_) => {
            host.remove(REBOOT_REQUESTED_PATH)?;
            Ok(Owed::Nothing)
        }
        Err(e) => {
            tracing::warn!(error = %e, "unreadable {REBOOT_REQUESTED_PATH}: taken as a reboot that happened");
            host.remove(REBOOT_REQUESTED_PATH)?;
            Ok(Owed::Nothing)
        }
    }
}

/// At start: when a reboot is [`Owed`] by the running boot, asks for it again and returns the
/// config it reboots into (the caller then exits for the reboot, never reporting the node Done
/// on a boot that did not happen); otherwise `None`.
///
/// Errors: the daemon's Degraded reason (the marker unreadable, or the reboot command failed).
pub fn resume(host: &dyn Host) -> Result<Option<String>, String> {
    let config = match owed(host).map_err(|e| format!("cannot read {REBOOT_REQUESTED_PATH}: {e}"))? {
        Owed::Nothing => return Ok(None),
        Owed::Reboot(config) => config,
    };
    tracing::warn!(
        config,
        "the reboot requested on this boot has not happened (the daemon was started again before the shutdown): requesting it again"
    );
    request(host, &config, &format!("Node will reboot into config {config}"))
        .map_err(|e| format!("failed to reboot: {e}"))?;
    Ok(Some(config))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::test_support::sandbox;

    #[test]
    fn a_request_is_owed_on_its_boot_and_settled_by_the_next() {
        let (dir, host) = sandbox();
        assert_eq!(owed(&host).unwrap(), Owed::Nothing);
        request(
            &host,
            "rendered-worker-2",
            "Node will reboot into config rendered-worker-2",
        )
        .unwrap();
        assert!(host
            .journal_lines()
            .unwrap()
            .iter()
            .any(|l| l.ends_with("reboot Node will reboot into config rendered-worker-2")));
        // started again on the same boot: the reboot is still owed, and stays owed
        assert_eq!(owed(&host).unwrap(), Owed::Reboot("rendered-worker-2".into()));
        assert_eq!(owed(&host).unwrap(), Owed::Reboot("rendered-worker-2".into()));
        // a new boot (the sandbox's: <root>/run emptied) settles it and removes the marker
        std::fs::remove_dir_all(dir.path().join("run")).unwrap();
        assert_eq!(owed(&host).unwrap(), Owed::Nothing);
        assert!(host.read(REBOOT_REQUESTED_PATH).unwrap_err().is_not_found());
    }

    #[test]
    fn a_damaged_marker_is_taken_as_a_reboot_that_happened() {
        let (_dir, host) = sandbox();
        host.write_atomic(REBOOT_REQUESTED_PATH, b"rendered-1", 0o644, Owner::ROOT)
            .unwrap();
        assert_eq!(owed(&host).unwrap(), Owed::Nothing);
        assert!(host.read(REBOOT_REQUESTED_PATH).unwrap_err().is_not_found());
    }
}
