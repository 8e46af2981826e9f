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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Kind;
    use crate::store::Store;
    use serde_json::json;

    /// The attack of issue 23: a Node whose owner reference names an owner that does not exist
    /// (or one that is deleted) is never deleted for it, while a MachineConfig with the same
    /// reference is. Judged on one pass run here, not on the controller loop's timing.
    #[tokio::test]
    async fn nodes_are_never_collected_nor_deleted_with_an_owner() {
        let hub = Hub::open(Store::temporary().unwrap(), crate::model::DEFAULT_GROUP).unwrap();
        let admin = Actor::new("admin");
        let refs = |name: &str, uid: &str| {
            json!([{"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
                    "name": name, "uid": uid}])
        };
        let mc = |name: &str, refs: serde_json::Value| {
            json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
                   "metadata": {"name": name, "ownerReferences": refs},
                   "spec": {"config": {"ignition": {"version": "3.4.0"}}}})
        };
        let node = |name: &str, refs: serde_json::Value| json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "ownerReferences": refs}});
        let gone = refs("gone", "00000000-0000-0000-0000-000000000000");
        hub.create(Kind::MachineConfig, mc("99-orphan", gone.clone()), &admin)
            .await
            .unwrap();
        hub.create(Kind::Node, node("w0", gone), &admin).await.unwrap();
        assert_eq!(reconcile(&hub).await, 1);
        let st = hub.state();
        assert!(!st.machine_configs.contains_key("99-orphan"));
        assert!(st.nodes.contains_key("w0"));
        assert_eq!(reconcile(&hub).await, 0);

        let pool = hub
            .create(
                Kind::MachineConfigPool,
                json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
                       "metadata": {"name": "infra"},
                       "spec": {"machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": "worker"}}}}),
                &admin,
            )
            .await
            .unwrap();
        let owned = refs("infra", pool["metadata"]["uid"].as_str().unwrap());
        hub.create(Kind::MachineConfig, mc("99-owned", owned.clone()), &admin)
            .await
            .unwrap();
        hub.create(Kind::Node, node("w1", owned), &admin).await.unwrap();
        hub.delete(Kind::MachineConfigPool, "infra", None, Propagation::Foreground, &admin)
            .await
            .unwrap();
        let st = hub.state();
        assert!(!st.machine_configs.contains_key("99-owned"));
        assert!(st.nodes.contains_key("w1"));
        assert_eq!(reconcile(&hub).await, 0);
        assert!(hub.state().nodes.contains_key("w1"));
    }
}
