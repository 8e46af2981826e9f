//! Drain controller (MCO `pkg/controller/drain/drain_controller.go`): answers a node's
//! `desiredDrain` request.
//!
//! `drain-<config>`: cordon (`spec.unschedulable = true`), evict workloads through the
//! configured [`Evictor`], then `lastAppliedDrain = desiredDrain`. `uncordon-<config>`:
//! `spec.unschedulable = false`, then `lastAppliedDrain`. A failed eviction leaves the request
//! pending; the next pass retries.

use super::log_failure;
use crate::command::{Actor, Hub, Scope};
use crate::model::{set_annotation, Kind, Node, NodeAnnotations, NodeSpec};
use std::time::Duration;

/// Evicts the workloads of a node being drained. mco runs no workloads itself, so the default
/// is [`NoEviction`]; [`CommandEvictor`] runs a user command (e.g. a `kubectl drain` wrapper).
pub trait Evictor: Send + Sync {
    /// Evicts the node's workloads; the error text is logged and the drain retried.
    fn evict(&self, node: &str) -> Result<(), String>;
}

/// The default: nothing to evict.
pub struct NoEviction;

impl Evictor for NoEviction {
    fn evict(&self, _node: &str) -> Result<(), String> {
        Ok(())
    }
}

/// Runs `program <node>` (with `MCO_NODE=<node>` in its environment) and waits for it, at most
/// 90 s (MCO's per-call drain timeout); a non-zero exit fails the drain.
pub struct CommandEvictor {
    pub program: String,
}

impl Evictor for CommandEvictor {
    fn evict(&self, node: &str) -> Result<(), String> {
        let mut child = std::process::Command::new(&self.program)
            .arg(node)
            .env("MCO_NODE", node)
            .spawn()
            .map_err(|e| format!("cannot run drain hook {}: {e}", self.program))?;
        let deadline = std::time::Instant::now() + Duration::from_secs(90);
        loop {
            match child.try_wait() {
                Ok(Some(s)) if s.success() => return Ok(()),
                Ok(Some(s)) => return Err(format!("drain hook {} exited with {s}", self.program)),
                Ok(None) if std::time::Instant::now() > deadline => {
                    let _ = child.kill();
                    return Err(format!("drain hook {} timed out after 90s", self.program));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}

/// Runs the drain controller once; returns the number of writes.
pub async fn reconcile(hub: &Hub, evictor: &dyn Evictor) -> usize {
    let keys = hub.keys().clone();
    let requests: Vec<(String, String)> = {
        let st = hub.state();
        st.nodes
            .values()
            .filter_map(|n| {
                let a = NodeAnnotations::read(n, &keys);
                (!a.desired_drain.is_empty() && a.desired_drain != a.last_applied_drain)
                    .then(|| (n.metadata.name.clone().unwrap_or_default(), a.desired_drain))
            })
            .collect()
    };
    let actor = Actor::new("controller:drain");
    let mut writes = 0;
    for (node, request) in requests {
        let cordon = !request.starts_with("uncordon");
        if cordon {
            let name = node.clone();
            let hook = tokio::task::block_in_place(|| evictor.evict(&name));
            if let Err(e) = hook {
                tracing::warn!(node, error = %e, "drain failed; will retry");
                continue;
            }
        }
        let r = hub
            .update(Kind::Node, &node, Scope::Main, None, &actor, |cur| {
                let mut n: Node = serde_json::from_value(cur.clone())
                    .map_err(|e| crate::command::CommandError::BadRequest(e.to_string()))?;
                n.spec.get_or_insert_with(NodeSpec::default).unschedulable = if cordon { Some(true) } else { None };
                set_annotation(&mut n.metadata, &keys.last_applied_drain(), Some(&request));
                Ok(serde_json::to_value(n).expect("serializes"))
            })
            .await;
        writes += log_failure("drain", &node, r);
    }
    writes
}
