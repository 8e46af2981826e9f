//! Garbage collector (Kubernetes' `garbagecollector` for ownerReferences): deletes objects
//! whose owners are all gone, such as the rendered configs of a pool deleted before mco honoured
//! propagation policies. A delete through the API handles dependents itself
//! ([`crate::command::Hub::delete`]); this pass catches what is left over, level-triggered.

use super::log_failure;
use crate::command::{Actor, Hub, Propagation};

/// Runs the garbage collector once; returns the number of writes.
pub async fn reconcile(hub: &Hub) -> usize {
    let garbage: Vec<_> = {
        let st = hub.state();
        st.orphaned_dependents()
            .into_iter()
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
