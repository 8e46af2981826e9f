//! The node lease: the daemon's heartbeat, renewed as the kubelet renews its own
//! (`pkg/kubelet/nodelease`, `k8s.io/component-helpers/apimachinery/lease/controller.go`).
//!
//! Owns the renewal loop of Lease `kube-node-lease/<node>` (holder the node, duration
//! [`crate::model::NODE_LEASE_DURATION_SECONDS`], `renewTime` now), created on the first
//! renewal and owned by the Node once it exists, so that the garbage collector deletes it with
//! the Node as Kubernetes' does. It decides nothing about the node's health: the server's
//! node-lifecycle controller reads the lease (README "Node liveness"). It talks to the server
//! only through the REST API and never touches the node's files.

use crate::client::{Client, ClientError};
use crate::model::{self, Kind};
use serde_json::{json, Value};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Renews the node lease once now, then every `interval` in a task of its own until `stop`
/// is cancelled (the daemon ends: a shutdown, a reboot). The first renewal is awaited, so that
/// a daemon that starts again renews its lease before it registers its Node Ready: the
/// lifecycle controller never sees a Ready node behind a stale lease.
pub(super) async fn start(client: Client, node: String, interval: Duration, stop: CancellationToken) {
    let mut owned = false;
    renew_logged(&client, &node, &mut owned).await;
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => renew_logged(&client, &node, &mut owned).await,
            }
        }
    });
}

/// [`renew`], a failure logged (the next tick retries; a lease not renewed for the grace
/// period makes the node NotReady, which is what a node that cannot reach the server is).
async fn renew_logged(client: &Client, node: &str, owned: &mut bool) {
    match renew(client, node, owned).await {
        Ok(()) => tracing::debug!(node, "node lease renewed"),
        Err(e) => tracing::warn!(node, error = %e, "cannot renew the node lease"),
    }
}

/// One renewal: a merge patch of `spec.renewTime` (with the holder and duration), or the
/// lease created when there is none; then, until it has one, the Node set as the lease's
/// owner (`owned`: already done).
///
/// Errors: the server's answer (transport, 403 NodeRestriction, ...).
async fn renew(client: &Client, node: &str, owned: &mut bool) -> Result<(), ClientError> {
    let key = model::node_lease_key(node);
    let now = jiff::Timestamp::now();
    let fresh = model::node_lease(node, now, None);
    let spec = serde_json::to_value(&fresh.spec).expect("a lease serializes");
    let patch = json!({"spec": {"holderIdentity": spec["holderIdentity"], "leaseDurationSeconds": spec["leaseDurationSeconds"],
        "renewTime": spec["renewTime"]}});
    let lease = match client.merge_patch(Kind::Lease, &key, &patch, false).await {
        Ok(l) => l,
        Err(e) if e.is_not_found() => {
            let mut obj = serde_json::to_value(&fresh).expect("a lease serializes");
            obj["apiVersion"] = json!(Kind::Lease.api_version(client.group()));
            obj["kind"] = json!("Lease");
            match client.create(Kind::Lease, &obj, Some("node lease created")).await {
                Ok(l) => {
                    // A new lease (the first, or one collected with a deleted Node) has no owner.
                    *owned = false;
                    l
                }
                // Another start of this daemon created it meanwhile: renewed next tick.
                Err(e) if e.reason() == Some("AlreadyExists") => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Err(e) => return Err(e),
    };
    if !*owned {
        *owned = set_owner(client, node, &key, &lease).await?;
    }
    Ok(())
}

/// Makes the Node the lease's owner (the kubelet's `setNodeOwnerFunc`) when it has no owner
/// yet; `false` while the Node does not exist (the daemon registers it after the first
/// renewal).
async fn set_owner(client: &Client, node: &str, key: &str, lease: &Value) -> Result<bool, ClientError> {
    if lease["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|r| !r.is_empty())
    {
        return Ok(true);
    }
    let n: Value = match client.get(Kind::Node, node).await {
        Ok(n) => n,
        Err(e) if e.is_not_found() => return Ok(false),
        Err(e) => return Err(e),
    };
    let Some(uid) = n["metadata"]["uid"].as_str() else {
        return Ok(false);
    };
    let owner =
        json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}]}});
    client.merge_patch(Kind::Lease, key, &owner, false).await?;
    Ok(true)
}
