//! Garbage collector (Kubernetes' `garbagecollector` for ownerReferences): deletes objects
//! whose owners are all gone, such as the rendered configs of a pool deleted before mco honoured
//! propagation policies. A delete through the API handles dependents itself
//! ([`crate::command::Hub::delete`]); this pass catches what is left over, level-triggered.
//!
//! Nodes are never collected, whatever their owner references say (nor deleted with an owner,
//! [`crate::command::Hub::delete`]): nothing in MCO or mco owns a Node (OpenShift's Machine API
//! links a Machine to its Node by annotation, not by owner reference), a Node is the record of a
//! machine that its daemon creates again at once, and an owner reference is the one way a
//! node's own write could have its Node deleted and re-registered into another pool (issue 23).
//! NodeRestriction keeps a node from setting one ([`crate::auth::node_restriction`]); this rule
//! also covers references written before it, or by an admin by mistake. Mco differs from
//! Kubernetes here, whose collector treats Nodes like any other object.

use super::log_failure;
use crate::command::{Actor, Hub, Propagation};

/// Runs the garbage collector once; returns the number of writes.
pub async fn reconcile(hub: &Hub) -> usize {
    let garbage: Vec<_> = {
        let st = hub.state();
        st.orphaned_dependents()
            .into_iter()
            .filter(|(kind, _)| *kind != crate::model::Kind::Node)
            .map(|(kind, name)| {
                let rv = st.resource_version(kind, &name);
                (kind, name, rv)
            })
            .collect()
    };
    let actor = Actor {
        name: "controller:garbage-collector".into(),
        reason: "every owner is gone".into(),
        dry_run: false,
    };
    let mut writes = 0;
    for (kind, name, rv) in garbage {
        let r = hub.delete(kind, &name, rv, Propagation::Background, &actor).await;
        writes += log_failure("garbage-collector", &name, r);
    }
    writes
}
