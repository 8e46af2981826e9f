//! Every node path the daemon owns, and the two acts on them that several daemon files share.
//!
//! Owns the locations of the daemon's own state on the node (MCO's
//! `/etc/machine-config-daemon/*`, the force file, the SSH key file, mco's lock and in-flight
//! marker), the `.mcdorig`/`.mcdnoorig` backup names, the daemon lock ([`lock_root`]) and the
//! read of the on-disk config ([`read_on_disk_config`]). A leaf of `daemon/`: it must not
//! import the other daemon files.

use crate::host::Host;
use crate::model::MachineConfig;
use anyhow::Context as _;

/// Node path of the JSON of the whole MachineConfig the node is (about to be) on (mco-facts 4.1).
pub const CURRENT_CONFIG_PATH: &str = "/etc/machine-config-daemon/currentconfig";
/// Directory of `.mcdorig` backups of originals an MC overwrote (mco-facts 4.1).
pub const ORIG_DIR: &str = "/etc/machine-config-daemon/orig";
/// Directory of `.mcdnoorig` stamps meaning "there was no original" (mco-facts 4.1).
pub const NOORIG_DIR: &str = "/etc/machine-config-daemon/noorig";
/// Where the `core` user's SSH keys are written (MCO `constants.RHCOS9SSHKeyPath`).
pub const SSH_KEYS_PATH: &str = crate::ignition::CORE_SSH_KEYS_PATH;

/// MCO's force file (`constants.MachineConfigDaemonForceFile`): when present, the daemon skips
/// on-disk validation, rewrites every file, unit and dropin of the desired config, reboots, and
/// deletes the file (mco-facts 4.3.6, 4.5 and 5(b)). Honoured in every phase in which the node
/// has a config (booting, idle, draining, uncordoning, and while a failure backs off), so it also
/// recovers a node whose boot-time check fails.
pub const FORCE_FILE: &str = crate::ignition::DAEMON_FORCE_FILE;

/// Node path of the marker of an update in flight: the name of the config being written,
/// written (atomically) before the first file of an update and removed once the node is Done
/// on a config or rolled back. Found at start with an on-disk `currentconfig` naming another
/// config, it means the daemon died in the middle of writing: the update is resumed (see
/// `Agent::on_booting` in [`super::agent`]). MCO has no such marker (a crash there leaves its
/// node Degraded until the force file is used); mco's deliberate difference, for crash safety
/// under SIGKILL.
pub const PENDING_CONFIG_PATH: &str = "/etc/machine-config-daemon/mco-pending-config";

/// Where the daemon's lock lives on the node.
pub const LOCK_PATH: &str = "/var/lib/mco/daemon.lock";

/// `/etc/machine-config-daemon/orig/<path>.mcdorig`.
pub fn orig_path(path: &str) -> String {
    format!("{ORIG_DIR}{path}.mcdorig")
}

/// `/etc/machine-config-daemon/noorig/<path>.mcdnoorig`.
pub fn noorig_path(path: &str) -> String {
    format!("{NOORIG_DIR}{path}.mcdnoorig")
}

/// Takes the node's daemon lock (an exclusive advisory lock held for the daemon's lifetime):
/// two daemons acting on one node root would apply every update twice.
pub(crate) fn lock_root(host: &dyn Host) -> anyhow::Result<std::fs::File> {
    let file = host
        .open_file(LOCK_PATH, false)
        .with_context(|| format!("opening the daemon lock {LOCK_PATH}"))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {
            anyhow::bail!("another mco daemon is already running on this node (lock {LOCK_PATH} is held)")
        }
        Err(std::fs::TryLockError::Error(e)) => Err(e).with_context(|| format!("locking {LOCK_PATH}")),
    }
}

/// `/etc/machine-config-daemon/currentconfig`, when present.
pub(crate) fn read_on_disk_config(host: &dyn Host) -> anyhow::Result<Option<MachineConfig>> {
    match host.read(CURRENT_CONFIG_PATH) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .with_context(|| format!("invalid on-disk config {CURRENT_CONFIG_PATH}")),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e.into()),
    }
}
