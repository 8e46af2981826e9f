//! NodeRestriction, Kubernetes' admission of a node identity's writes: a node may change only
//! its own Node, its own node lease and its own MachineConfigNode, and nothing on its Node that decides what it is given ([`admit_node_write`], with
//! the rules of [`crate::auth::node_restriction`] and the label keys the pools select on,
//! [`pool_keys_for`]).

use crate::command::{CommandError, Hub, Scope};
use crate::model::Kind;
use serde_json::Value;

/// NodeRestriction on a write to a Node by a node identity (`plugin/pkg/admission/
/// noderestriction/admission.go`): only its own Node, and nothing that decides what it is
/// given ([`crate::auth::node_restriction`]: the labels Kubernetes reserves and those the pools
/// select on, taints, `ownerReferences`, finalizers, `configSource`). `cur` is the stored
/// object (`None` for a create). A write of the status subresource changes none of them (the
/// hub keeps everything but `status`), so only the name is checked there. A Lease (`name`: its
/// store key) only in `kube-node-lease` and named after the node
/// ([`crate::auth::node_lease_restriction`]); a MachineConfigNode (and its status) only its
/// own, as MCO's `mcn-guards` policy ([`crate::auth::node_mcn_restriction`]).
///
/// Errors: Forbidden, `nodes "worker-1" is forbidden: node "worker-0" is not allowed to modify
/// node "worker-1"` or `nodes "worker-0" is forbidden: is not allowed to modify labels:
/// node-role.kubernetes.io/infra`, `leases.coordination.k8s.io "worker-1" is forbidden: can only
/// access node lease with the same name as the requesting node`.
pub(crate) fn admit_node_write(
    user: &crate::auth::User,
    kind: Kind,
    name: &str,
    scope: Scope,
    cur: Option<&Value>,
    new: &Value,
    pool_keys: &std::collections::BTreeSet<String>,
) -> Result<(), CommandError> {
    if !matches!(kind, Kind::Node | Kind::Lease | Kind::MachineConfigNode) || user.node.is_none() {
        return Ok(());
    }
    let forbidden = |message: String| CommandError::Forbidden {
        kind,
        name: name.to_string(),
        message,
    };
    if kind == Kind::Lease {
        return crate::auth::node_lease_restriction(user, name).map_err(forbidden);
    }
    if kind == Kind::MachineConfigNode {
        return crate::auth::node_mcn_restriction(user, name).map_err(forbidden);
    }
    crate::auth::node_may_write(user, name).map_err(forbidden)?;
    if scope == Scope::Status {
        return Ok(());
    }
    crate::auth::node_restriction(user, cur, new, pool_keys).map_err(forbidden)
}

/// The label keys the pools select nodes on, when `user` is a node (NodeRestriction keeps a
/// node from changing them, [`crate::auth::node_restriction_labels`]); empty otherwise.
pub(super) fn pool_keys_for(user: &crate::auth::User, hub: &Hub) -> std::collections::BTreeSet<String> {
    if user.node.is_none() {
        return Default::default();
    }
    crate::auth::pool_selector_keys(hub.state().pools.values().map(|p| &**p))
}
