//! Node helpers: the MCO annotations a Node carries and its readiness.

use super::{annotation, Keys, Node};

/// The node's update state (annotation `<group>/state`), MCO `pkg/daemon/constants/constants.go`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeState {
    Done,
    Working,
    Degraded,
    Unreconcilable,
}

impl NodeState {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Done => "Done",
            NodeState::Working => "Working",
            NodeState::Degraded => "Degraded",
            NodeState::Unreconcilable => "Unreconcilable",
        }
    }
    pub fn parse(s: &str) -> Option<NodeState> {
        match s {
            "Done" => Some(NodeState::Done),
            "Working" => Some(NodeState::Working),
            "Degraded" => Some(NodeState::Degraded),
            "Unreconcilable" => Some(NodeState::Unreconcilable),
            _ => None,
        }
    }
}

/// The reason a daemon gives (`x-mco-reason`) for the Degraded it writes when its drift
/// monitor finds a mismatch, and the Kubernetes Event reason of that change: MCO's Warning
/// `ConfigDriftDetected` with the validation error as its message (`onConfigDrift`,
/// `pkg/daemon/daemon.go`).
pub const CONFIG_DRIFT_DETECTED: &str = "ConfigDriftDetected";

/// MCO's Warning Event reason when the boot-time on-disk check fails (`checkStateOnFirstRun`,
/// `pkg/daemon/daemon.go`); its message is the validation error.
pub const ON_DISK_VALIDATION_FAILED: &str = "OnDiskStateValidationFailed";

/// MCO's Warning Event reason when the check before an update (or before a Degraded node is
/// Done again on its own config) fails (`runPreflightConfigDriftCheck`, `pkg/daemon/daemon.go`).
pub const PREFLIGHT_CHECK_FAILED: &str = "PreflightConfigDriftCheckFailed";

/// The Warning Events MCO's daemon emits with a Degraded of its own making, by the reason the
/// daemon gives (`x-mco-reason`) for that write (the server's Kubernetes Events,
/// [`crate::history::core_event`]). Each one's message is the validation error alone
/// (`Eventf(Warning, reason, "%s", err.Error())`), without the [`ON_DISK_PREFIX`] and
/// [`RECOVERY_HINT`] the node's `reason` annotation wraps it in ([`validation_error`]).
pub const DAEMON_WARNINGS: [&str; 3] = [CONFIG_DRIFT_DETECTED, ON_DISK_VALIDATION_FAILED, PREFLIGHT_CHECK_FAILED];

/// The start of MCO's node reason for a failed on-disk check: `unexpected on-disk state
/// validating against <config>: <validation error>`.
pub const ON_DISK_PREFIX: &str = "unexpected on-disk state validating against ";

/// How to recover from a failed on-disk check; appended to MCO's reason (which stays first, so
/// searches for MCO's text still match).
pub const RECOVERY_HINT: &str = "; to recover, restore the content on the node, or create \
/run/machine-config-daemon-force on it: the daemon then skips this check, rewrites every file and \
unit of the desired config and reboots";

/// The validation error inside a node's Degraded `reason`: without [`ON_DISK_PREFIX`]`<config>: `
/// and [`RECOVERY_HINT`] when it has them (a drift's reason is the error itself).
pub fn validation_error(reason: &str) -> &str {
    let inner = reason
        .strip_prefix(ON_DISK_PREFIX)
        .and_then(|r| r.split_once(": ").map(|(_config, detail)| detail))
        .unwrap_or(reason);
    inner.strip_suffix(RECOVERY_HINT).unwrap_or(inner)
}

/// The MCO annotations of one node, read with the configured group: owned (`read`), or
/// borrowed from the node (`view`, no allocation: what the controllers use at every pass).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeAnnotations<S = String> {
    pub desired_config: S,
    pub current_config: S,
    pub state: S,
    pub reason: S,
    pub desired_drain: S,
    pub last_applied_drain: S,
}

impl NodeAnnotations {
    pub fn read(node: &Node, keys: &Keys) -> NodeAnnotations {
        let a = NodeAnnotations::view(node, keys);
        NodeAnnotations {
            desired_config: a.desired_config.to_string(),
            current_config: a.current_config.to_string(),
            state: a.state.to_string(),
            reason: a.reason.to_string(),
            desired_drain: a.desired_drain.to_string(),
            last_applied_drain: a.last_applied_drain.to_string(),
        }
    }
}

impl<'a> NodeAnnotations<&'a str> {
    /// The annotations as borrowed from `node` (absent ones empty).
    pub fn view(node: &'a Node, keys: &Keys) -> NodeAnnotations<&'a str> {
        let m = &node.metadata;
        let k = &keys.node;
        NodeAnnotations {
            desired_config: annotation(m, &k.desired_config),
            current_config: annotation(m, &k.current_config),
            state: annotation(m, &k.state),
            reason: annotation(m, &k.reason),
            desired_drain: annotation(m, &k.desired_drain),
            last_applied_drain: annotation(m, &k.last_applied_drain),
        }
    }
}

/// MCO `CheckNodeReady` (`pkg/controller/node/status.go`): condition Ready True, DiskPressure not
/// True, NetworkUnavailable not True, and not cordoned (`spec.unschedulable`).
pub fn node_is_ready(node: &Node) -> bool {
    if node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false) {
        return false;
    }
    let conds = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    let status_of = |t: &str| {
        conds
            .and_then(|c| c.iter().find(|c| c.type_ == t))
            .map(|c| c.status.as_str())
    };
    status_of("Ready") == Some("True")
        && status_of("DiskPressure") != Some("True")
        && status_of("NetworkUnavailable") != Some("True")
}

/// kubectl's node STATUS: `Ready`, `NotReady` or `Unknown` from the Ready condition, with
/// `,SchedulingDisabled` when the node is cordoned (`spec.unschedulable`), as kubectl's node
/// printer (k8s.io/kubernetes/pkg/printers/internalversion/printers.go printNode) shows it.
pub fn node_status(n: &Node) -> String {
    let ready = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.as_str());
    let mut st = match ready {
        Some("True") => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false) {
        st.push_str(",SchedulingDisabled");
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_validation_error_is_taken_out_of_the_node_reason() {
        let err = r#"content mismatch for file "/etc/a""#;
        // a drift's reason is the error itself (MCO's onConfigDrift)
        assert_eq!(validation_error(err), err);
        // a failed check's reason wraps it (MCO's "unexpected on-disk state ..."), with mco's hint
        let wrapped = format!("{ON_DISK_PREFIX}rendered-worker-1: {err}{RECOVERY_HINT}");
        assert_eq!(validation_error(&wrapped), err);
        // an error with ": " inside keeps it: only the config name is cut at the first one
        let stat = r#"could not stat file "/etc/a": lstat /etc/a: no such file or directory"#;
        assert_eq!(
            validation_error(&format!("{ON_DISK_PREFIX}r: {stat}{RECOVERY_HINT}")),
            stat
        );
    }
}
