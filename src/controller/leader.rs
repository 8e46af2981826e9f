//! The leadership of the controllers, shown the Kubernetes way: when a server takes the etcd
//! writer lease of the event log (it then runs every controller), it records itself as the
//! holder of the `coordination.k8s.io/v1` Lease `kube-system/mco-controllers`, as
//! kube-controller-manager's leader election records its holder in
//! `kube-system/kube-controller-manager` (`k8s.io/client-go/tools/leaderelection`,
//! `LeaderElectionRecord`: holderIdentity, leaseDurationSeconds, acquireTime, renewTime,
//! leaseTransitions, the last incremented when the holder changes).
//!
//! Where mco differs: the election itself is the etcd lease (renewed without a log event), so
//! `renewTime` is the time of the takeover, not of the last renewal: a reader judges the holder
//! by `holderIdentity`, and the server's `mco_store_etcd_writer` says who is live.

use crate::command::{Actor, CommandError, Hub, Scope};
use crate::model::Kind;
use serde_json::{json, Value};

/// Namespace of the controllers' Lease (kube-controller-manager's).
pub const LEASE_NAMESPACE: &str = "kube-system";

/// Name of the controllers' Lease.
pub const LEASE_NAME: &str = "mco-controllers";

/// Records `holder` as the controllers' leader in `kube-system/mco-controllers` (created when
/// absent; `leaseTransitions` and `acquireTime` changed when the holder changes, `renewTime`
/// at every takeover), with `duration_secs` as
/// `leaseDurationSeconds`. Errors: the hub's (the write is the new leader's first).
pub async fn record_leader(hub: &Hub, holder: &str, duration_secs: i64) -> Result<Value, CommandError> {
    let actor = Actor::new("controller:leader-election");
    let key = crate::model::namespaced_key(LEASE_NAMESPACE, LEASE_NAME);
    let now = jiff::Timestamp::now();
    let micro = serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(now))
        .expect("a time serializes");
    if hub.state().get_json(Kind::Lease, &key).is_none() {
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": LEASE_NAME, "namespace": LEASE_NAMESPACE},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration_secs,
                     "acquireTime": micro, "renewTime": micro, "leaseTransitions": 0},
        });
        match hub.create(Kind::Lease, lease, &actor).await {
            Err(CommandError::AlreadyExists { .. }) => {}
            other => return other,
        }
    }
    hub.update(Kind::Lease, &key, Scope::Main, None, &actor, |cur| {
        let mut next = cur.clone();
        let spec = &mut next["spec"];
        let transitions = spec["leaseTransitions"].as_i64().unwrap_or(0);
        if spec["holderIdentity"].as_str() != Some(holder) {
            spec["leaseTransitions"] = json!(transitions + 1);
            spec["holderIdentity"] = json!(holder);
            spec["acquireTime"] = micro.clone();
        }
        // Every takeover renews, also one by the same name (a restarted process taking the
        // lease back), as client-go's tryAcquireOrRenew keeps acquireTime and the transitions
        // for a holder that did not change and sets renewTime.
        spec["renewTime"] = micro.clone();
        spec["leaseDurationSeconds"] = json!(duration_secs);
        Ok(next)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(hub: &Hub) -> Value {
        let key = crate::model::namespaced_key(LEASE_NAMESPACE, LEASE_NAME);
        hub.state().get_json(Kind::Lease, &key).expect("the Lease exists")["spec"].clone()
    }

    /// client-go's leader election record: a new holder counts a transition and a new
    /// acquireTime; the same holder taking the lease again (a restarted process) renews only.
    #[tokio::test]
    async fn a_takeover_renews_and_a_new_holder_is_a_transition() {
        let hub = Hub::open(crate::store::Store::temporary().unwrap(), crate::model::DEFAULT_GROUP).unwrap();
        record_leader(&hub, "mco-0", 5).await.unwrap();
        let first = spec(&hub);
        assert_eq!(
            (first["holderIdentity"].as_str(), first["leaseTransitions"].as_i64()),
            (Some("mco-0"), Some(0))
        );
        tokio::time::sleep(std::time::Duration::from_millis(2)).await; // a later MicroTime
        record_leader(&hub, "mco-0", 5).await.unwrap();
        let again = spec(&hub);
        assert_eq!(again["acquireTime"], first["acquireTime"]);
        assert_eq!(again["leaseTransitions"], 0);
        assert_ne!(
            again["renewTime"], first["renewTime"],
            "the same holder's takeover renews"
        );
        record_leader(&hub, "mco-1", 5).await.unwrap();
        let other = spec(&hub);
        assert_eq!(
            (other["holderIdentity"].as_str(), other["leaseTransitions"].as_i64()),
            (Some("mco-1"), Some(1))
        );
        assert_ne!(other["acquireTime"], first["acquireTime"]);
        assert_eq!(other["acquireTime"], other["renewTime"]);
    }
}
