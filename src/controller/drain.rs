//! Drain controller (MCO `pkg/controller/drain/drain_controller.go`): answers a node's
//! `desiredDrain` request.
//!
//! `drain-<config>`: cordon (`spec.unschedulable = true`), evict workloads through the
//! configured [`Evictor`], then `lastAppliedDrain = desiredDrain`. `uncordon-<config>`:
//! `spec.unschedulable = false`, then `lastAppliedDrain`. Each phase is written on the node's
//! MachineConfigNode as MCO's drain controller writes it. The verb is the text before the first `-`
//! ([`DrainRequest`]); a request with another verb is left unanswered, as MCO's controller
//! refuses it. A failed eviction leaves the request
//! pending; the next pass retries. The pending requests are read from the fleet index
//! ([`crate::rollout::FleetIndex`]), not found by visiting every node.

use super::log_batch;
use crate::command::{Actor, Hub, Scope, Update};
use crate::model::machine_config_node::Step;
use crate::model::{set_annotation, Kind, Node, NodeSpec};
use crate::protocol::DrainRequest;
use futures_util::future::BoxFuture;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Evicts the workloads of a node being drained. mco runs no workloads itself, so the default
/// is [`NoEviction`]; [`CommandEvictor`] runs a user command (e.g. a `kubectl drain` wrapper).
pub trait Evictor: Send + Sync {
    /// Evicts the node's workloads; the error text is logged and the drain retried.
    fn evict<'a>(&'a self, node: &'a str) -> BoxFuture<'a, Result<(), String>>;

    /// Whether [`Evictor::evict`] does anything. Without eviction the drain requests of a pass
    /// are one decision, answered in one atomic append and one flush; with it each node's answer
    /// is written as soon as its own eviction is done (one node never waits for another's).
    fn evicts(&self) -> bool {
        true
    }
}

/// The default: nothing to evict.
pub struct NoEviction;

impl Evictor for NoEviction {
    fn evict<'a>(&'a self, _node: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(std::future::ready(Ok(())))
    }

    fn evicts(&self) -> bool {
        false
    }
}

/// MCO's per-call drain timeout (`pkg/controller/drain/drain_controller.go`).
pub const DRAIN_HOOK_TIMEOUT: Duration = Duration::from_secs(90);

/// Runs `program <node>` (with `MCO_NODE=<node>` in its environment) and waits for it, at most
/// [`DRAIN_HOOK_TIMEOUT`]; a non-zero exit or the timeout (the hook is then killed) fails the
/// drain. The hook dies with the server ([`crate::process::spawn_tied`]).
pub struct CommandEvictor {
    pub program: String,
}

impl Evictor for CommandEvictor {
    fn evict<'a>(&'a self, node: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let mut cmd = tokio::process::Command::new(&self.program);
            cmd.arg(node).env("MCO_NODE", node).kill_on_drop(true);
            let mut child = crate::process::spawn_tied(cmd, nix::sys::signal::Signal::SIGKILL)
                .await
                .map_err(|e| format!("cannot run drain hook {}: {e}", self.program))?;
            match tokio::time::timeout(DRAIN_HOOK_TIMEOUT, child.wait()).await {
                Ok(Ok(s)) if s.success() => Ok(()),
                Ok(Ok(s)) => Err(format!("drain hook {} exited with {s}", self.program)),
                Ok(Err(e)) => Err(format!("drain hook {}: {e}", self.program)),
                Err(_) => {
                    let _ = child.kill().await;
                    Err(format!(
                        "drain hook {} timed out after {}s",
                        self.program,
                        DRAIN_HOOK_TIMEOUT.as_secs()
                    ))
                }
            }
        })
    }
}

/// The evictions of a drain hook, run off the controller pass: one task per node being
/// drained, started by a pass and answered by the first pass after it ends. A hook may take
/// [`DRAIN_HOOK_TIMEOUT`] per node; awaited inside the pass, it held back every controller
/// after the drain controller (the pool status, hence `mco_degraded_machine_count`, of a node
/// gone Degraded meanwhile) until it ended. MCO's drain controller runs on its own work queue
/// too (`pkg/controller/drain/drain_controller.go`), apart from the node controller's status
/// sync (`pkg/controller/node/status.go`).
#[derive(Debug, Default)]
pub struct Evictions {
    /// By node: the drain request the eviction answers, and its task.
    running: HashMap<String, (String, tokio::task::JoinHandle<Result<(), String>>)>,
    /// Notified when an eviction ends, so that the controller loop runs the pass that answers it.
    pub done: Arc<tokio::sync::Notify>,
}

impl Evictions {
    /// The outcome of node's eviction for `request` once it ended (taken: a failed one starts
    /// again at the next pass); `None` while it runs, after starting it if none runs.
    async fn outcome(&mut self, evictor: &Arc<dyn Evictor>, node: &str, request: &str) -> Option<Result<(), String>> {
        match self.running.get(node) {
            Some((_, task)) if task.is_finished() => {
                let (_, task) = self.running.remove(node).expect("present");
                Some(task.await.unwrap_or_else(|e| Err(format!("drain hook task: {e}"))))
            }
            Some(_) => None,
            None => {
                let (evictor, done, name) = (evictor.clone(), self.done.clone(), node.to_string());
                let task = tokio::spawn(async move {
                    let r = evictor.evict(&name).await;
                    done.notify_one();
                    r
                });
                self.running.insert(node.to_string(), (request.to_string(), task));
                None
            }
        }
    }

    /// Stops the evictions no pending drain request (node, request) asks for any more.
    fn keep_only(&mut self, requests: &[(String, String)]) {
        self.running.retain(|node, (request, task)| {
            let wanted = requests.iter().any(|(n, r)| n == node && r == request);
            if !wanted {
                task.abort();
            }
            wanted
        });
    }
}

impl Drop for Evictions {
    fn drop(&mut self) {
        for (_, task) in self.running.values() {
            task.abort();
        }
    }
}

/// Runs the drain controller once; returns the number of writes. Sets `retry` while an
/// eviction runs or after one failed (its request stays unanswered and is tried again at the
/// next pass); `evictions` holds the drain hook's runs between passes.
pub async fn reconcile(hub: &Hub, evictor: &Arc<dyn Evictor>, retry: &mut bool, evictions: &mut Evictions) -> usize {
    let keys = hub.keys().clone();
    let requests: Vec<(String, String)> = {
        let st = hub.state();
        let fleet = st.fleet(&keys);
        fleet
            .drain_requests()
            .filter(|(node, request)| {
                // MCO reads the verb before the first `-` and refuses any other verb, leaving the
                // request unanswered ("non-recognized drain verb detected").
                let known = DrainRequest::parse(request).is_some();
                if !known {
                    tracing::warn!(
                        node,
                        request,
                        "non-recognized drain verb; the request is left unanswered"
                    );
                }
                known
            })
            .map(|(node, request)| (node.to_string(), request.to_string()))
            .collect()
    };
    let is_uncordon = |request: &str| matches!(DrainRequest::parse(request), Some(DrainRequest::Uncordon(_)));
    let actor = Actor::new("controller:drain");
    let answer = |node: &str, request: &str| -> Update<'static> {
        let cordon = !is_uncordon(request);
        let request = request.to_string();
        let key = keys.last_applied_drain();
        Update {
            kind: Kind::Node,
            name: node.to_string(),
            scope: Scope::Main,
            precondition: None,
            f: Box::new(move |cur| {
                let mut n: Node = serde_json::from_value(cur.clone())
                    .map_err(|e| crate::command::CommandError::BadRequest(e.to_string()))?;
                n.spec.get_or_insert_with(NodeSpec::default).unschedulable = if cordon { Some(true) } else { None };
                set_annotation(&mut n.metadata, &key, Some(&request));
                Ok(serde_json::to_value(n).expect("serializes"))
            }),
        }
    };
    // MCO's drain controller writes the node's MachineConfigNode around its steps: Cordoned
    // and Draining before the eviction, Drained after it, UpdateComplete/Uncordoned after the
    // uncordon. mco cordons in the same write that answers the request, so Drained is
    // appended with that answer, before it (one atomic append): the daemon, which waits for
    // the answer, never writes its next phase before the drain's.
    let drains: Vec<&str> = requests
        .iter()
        .filter(|(_, r)| !is_uncordon(r))
        .map(|(n, _)| n.as_str())
        .collect();
    let mut writes = mcn_steps(hub, &drains, |_| Step::cordoned(true)).await;
    let pending = |node: &str| {
        let st = hub.state();
        let ann = st
            .nodes
            .get(node)
            .map(|n| crate::model::NodeAnnotations::read(n, &keys));
        ann.map(|a| (a.desired_drain, a.last_applied_drain)).unwrap_or_default()
    };
    writes += mcn_steps(hub, &drains, |n| {
        let (want, last) = pending(n);
        Step::draining(&want, &last)
    })
    .await;
    // The writes of one node's answer: its MCN's phase, then the Node.
    let answer_with_phase = |node: &str, request: &str| -> Vec<Update<'static>> {
        let step = if is_uncordon(request) {
            None
        } else {
            Some(Step::drained(request))
        };
        let st = hub.state();
        let mut v: Vec<Update<'static>> = step
            .and_then(|s| super::mcn::step_update(&st, &keys, node, s))
            .into_iter()
            .collect();
        v.push(answer(node, request));
        v
    };
    if !evictor.evicts() {
        for node in &drains {
            hub.metrics().drain_failed(node, false);
        }
        let updates: Vec<Update> = requests
            .iter()
            .flat_map(|(node, request)| answer_with_phase(node, request))
            .collect();
        writes += log_batch("drain", &updates, hub.update_many(&updates, &actor).await);
    } else {
        evictions.keep_only(&requests);
        for (node, request) in &requests {
            if !is_uncordon(request) {
                let Some(outcome) = evictions.outcome(evictor, node, request).await else {
                    // Under way: answered by the pass after it ends (`done` wakes the loop).
                    *retry = true;
                    continue;
                };
                if let Err(e) = outcome {
                    tracing::warn!(node, error = %e, "drain failed; will retry");
                    hub.metrics().drain_failed(node, true);
                    *retry = true;
                    let (want, last) = pending(node);
                    writes += mcn_steps(hub, &[node.as_str()], |_| Step::drain_failed(&e, &want, &last)).await;
                    continue;
                }
                hub.metrics().drain_failed(node, false);
            }
            let updates = answer_with_phase(node, request);
            writes += log_batch("drain", &updates, hub.update_many(&updates, &actor).await);
        }
    }
    let uncordoned: Vec<&str> = requests
        .iter()
        .filter(|(_, r)| is_uncordon(r))
        .map(|(n, _)| n.as_str())
        .collect();
    writes += mcn_steps(hub, &uncordoned, |n| {
        let st = hub.state();
        let cordoned = st
            .nodes
            .get(n)
            .and_then(|n| n.spec.as_ref()?.unschedulable)
            .unwrap_or(false);
        Step::uncordoned(cordoned)
    })
    .await;
    writes
}

/// One MCN status write per node of `nodes` (those with an MCN, whose phase it changes), as
/// one append.
async fn mcn_steps(hub: &Hub, nodes: &[&str], step: impl Fn(&str) -> Step) -> usize {
    let updates: Vec<Update> = {
        let st = hub.state();
        nodes
            .iter()
            .filter_map(|n| super::mcn::step_update(&st, hub.keys(), n, step(n)))
            .collect()
    };
    if updates.is_empty() {
        return 0;
    }
    // The drain controller's writes, as MCO's drain controller writes these phases.
    let actor = Actor::new("controller:drain");
    log_batch("drain", &updates, hub.update_many(&updates, &actor).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only `drain-` and `uncordon-` requests are answered; any other verb (MCO reads the text
    /// before the first `-`) leaves the node as it is, not cordoned.
    #[tokio::test]
    async fn a_request_with_an_unknown_verb_is_not_answered() {
        let hub = Hub::open(crate::store::Store::temporary().unwrap(), crate::model::DEFAULT_GROUP).unwrap();
        let keys = hub.keys().clone();
        let actor = Actor::new("test");
        for (name, request) in [
            ("n1", "bogus-rendered-1"),
            ("n2", "uncordoned-rendered-1"),
            ("n3", "drain-rendered-1"),
        ] {
            let node = serde_json::json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "annotations": {keys.desired_drain(): request}}});
            hub.create(Kind::Node, node, &actor).await.unwrap();
        }
        let mut retry = false;
        let none: Arc<dyn Evictor> = Arc::new(NoEviction);
        reconcile(&hub, &none, &mut retry, &mut Evictions::default()).await;
        let st = hub.state();
        let answered = |name: &str| {
            let n = &st.nodes[name];
            let ann = crate::model::annotation(&n.metadata, &keys.last_applied_drain()).to_string();
            let cordoned = n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
            (ann, cordoned)
        };
        assert_eq!(answered("n1"), (String::new(), false));
        assert_eq!(answered("n2"), (String::new(), false));
        assert_eq!(answered("n3"), ("drain-rendered-1".to_string(), true));
    }
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &std::path::Path, body: &str) -> String {
        let path = dir.join("hook.sh");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    }

    #[tokio::test]
    async fn the_drain_hook_gets_the_node_and_its_exit_status_decides() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let ok = CommandEvictor {
            program: script(dir.path(), &format!("echo \"$1 $MCO_NODE\" > {}", out.display())),
        };
        ok.evict("worker-1").await.unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "worker-1 worker-1\n");
        let failing = CommandEvictor {
            program: script(dir.path(), "exit 3"),
        };
        let err = failing.evict("worker-1").await.unwrap_err();
        assert!(err.ends_with("exited with exit status: 3"), "{err}");
        let missing = CommandEvictor {
            program: dir.path().join("absent").display().to_string(),
        };
        assert!(missing
            .evict("w")
            .await
            .unwrap_err()
            .starts_with("cannot run drain hook"));
    }
}
