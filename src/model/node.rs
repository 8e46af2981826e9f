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

/// The MCO annotations of one node, read with the configured group.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeAnnotations {
    pub desired_config: String,
    pub current_config: String,
    pub state: String,
    pub reason: String,
    pub desired_drain: String,
    pub last_applied_drain: String,
}

impl NodeAnnotations {
    pub fn read(node: &Node, keys: &Keys) -> NodeAnnotations {
        let m = &node.metadata;
        NodeAnnotations {
            desired_config: annotation(m, &keys.desired_config()).to_string(),
            current_config: annotation(m, &keys.current_config()).to_string(),
            state: annotation(m, &keys.state()).to_string(),
            reason: annotation(m, &keys.reason()).to_string(),
            desired_drain: annotation(m, &keys.desired_drain()).to_string(),
            last_applied_drain: annotation(m, &keys.last_applied_drain()).to_string(),
        }
    }
}

/// MCO `CheckNodeReady` (`pkg/controller/node/status.go`): condition Ready True, DiskPressure not
/// True, NetworkUnavailable not True, and not cordoned (`spec.unschedulable`).
pub fn node_is_ready(node: &Node) -> bool {
    if node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
    {
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
