//! RolloutPolicy controller: applies [`crate::rollout::policy::decide`] to every pool a policy
//! selects, level-triggered, before the node controller targets anything.
//!
//! For each pool (the first policy by name whose `spec.poolSelector` matches the pool's
//! labels governs it): the decision's gate goes to the node controller ([`Gates`]: only the
//! allowed nodes may be newly targeted), its condition to the pool status controller; the
//! controller itself writes the pause or resume of the pool (`spec.paused`, actor
//! `rolloutpolicy/<name>`, the reason in the history), each heal (the node's `desiredConfig`
//! set to the pool's target, the reason saying why) and the policy's status (its record of
//! canaries, bake start, pause and heals). Time is the controllers' [`super::Clock`].

use super::log_failure;
use crate::command::{Actor, Hub, Scope, Update};
use crate::model::{Kind, NodeHeals, PoolProgress, RolloutPolicy, RolloutPolicyStatus};
use crate::rollout::policy::{decide, governing, parse, PoolInput};
use jiff::Timestamp;
use std::collections::{BTreeMap, BTreeSet};

/// What the policies decided for this pass: per governed pool, the nodes the node controller
/// may newly target (absent: no restriction) and the pool condition
/// ([`crate::model::POLICY_CONDITION`]); the next time at which
/// time alone changes a decision.
#[derive(Clone, Debug, Default)]
pub struct Gates {
    pub allowed: BTreeMap<String, BTreeSet<String>>,
    /// Pool -> (held, reason, message) of the pool condition.
    pub conditions: BTreeMap<String, (bool, &'static str, String)>,
    pub wake: Option<Timestamp>,
}

/// The actor of a policy's writes, with the reason the history records.
fn actor(policy: &str, reason: &str) -> Actor {
    Actor {
        reason: reason.to_string(),
        ..Actor::new(format!("rolloutpolicy/{policy}"))
    }
}

/// Runs the policies once at `now`; returns the writes made and the gates for the node and
/// status controllers.
pub async fn reconcile(hub: &Hub, now: Timestamp) -> (usize, Gates) {
    let st = hub.state();
    let keys = hub.keys().clone();
    let fleet = st.fleet(&keys);
    let mut policies: Vec<RolloutPolicy> = st.typed(Kind::RolloutPolicy);
    policies.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut gates = Gates::default();
    let mut writes = 0;
    let mut statuses: Vec<(String, RolloutPolicyStatus, Option<String>)> = Vec::new();
    // Each pool's governing policy, by the one rule a preview uses too.
    let governor: BTreeMap<&str, &str> = st
        .pools
        .values()
        .filter_map(|pool| {
            let (p, _) = governing(&policies, pool)?;
            Some((pool.name(), p.metadata.name.as_deref().unwrap_or("")))
        })
        .collect();
    for policy in &policies {
        let name = policy.metadata.name.clone().unwrap_or_default();
        let spec = match parse(policy) {
            Ok(s) => s,
            Err(e) => {
                // Admission refuses these; a policy stored before a rule existed is skipped.
                tracing::warn!(policy = name, errors = ?e, "invalid RolloutPolicy; not applied");
                continue;
            }
        };
        let mut status = RolloutPolicyStatus {
            observed_generation: policy.metadata.generation,
            ..Default::default()
        };
        let mut heals: Vec<NodeHeals> = policy.status.heals.clone();
        for pool in st.pools.values() {
            let target = pool.spec.configuration.name.as_str();
            if target.is_empty() || governor.get(pool.name()) != Some(&name.as_str()) {
                continue;
            }
            let Some(tally) = fleet.tally(pool.name()) else {
                continue;
            };
            let nodes = tally
                .members
                .iter()
                .filter(|n| !tally.fresh.contains(*n))
                .filter_map(|n| st.nodes.get(n).map(|n| &**n))
                .collect();
            let input = PoolInput {
                pool: pool.name(),
                target,
                previous: pool.status.configuration.name.as_str(),
                paused: pool.spec.paused,
                nodes,
            };
            let prior = policy.status.pools.iter().find(|p| p.pool == pool.name());
            let d = decide(&name, &spec, &input, &keys, prior, &heals, now);
            if let Some(a) = &d.allowed {
                gates.allowed.insert(pool.name().to_string(), a.clone());
            }
            gates.conditions.insert(pool.name().to_string(), d.condition.clone());
            gates.wake = [gates.wake, d.wake].into_iter().flatten().min();
            if let Some(why) = d.pause.as_deref().or(d.resume.as_deref()) {
                let pause = d.pause.is_some();
                tracing::info!(pool = pool.name(), policy = name, pause, reason = why, "rollout policy");
                let r = hub
                    .update(
                        Kind::MachineConfigPool,
                        pool.name(),
                        Scope::Main,
                        None,
                        &actor(&name, why),
                        |cur| {
                            let mut next = cur.clone();
                            next["spec"]["paused"] = serde_json::json!(pause);
                            Ok(next)
                        },
                    )
                    .await;
                writes += log_failure("rolloutpolicy", pool.name(), r);
            }
            for (node, why) in &d.heals {
                tracing::info!(node, policy = name, reason = why, "self-healing");
                let key = keys.desired_config();
                let target = target.to_string();
                let r = hub
                    .update(Kind::Node, node, Scope::Main, None, &actor(&name, why), move |cur| {
                        let mut next = cur.clone();
                        next["metadata"]["annotations"][key.as_str()] = serde_json::json!(target);
                        Ok(next)
                    })
                    .await;
                if r.is_ok() {
                    match heals.iter_mut().find(|h| h.node == *node) {
                        Some(h) => h.times.push(now.to_string()),
                        None => heals.push(NodeHeals {
                            node: node.clone(),
                            times: vec![now.to_string()],
                        }),
                    }
                }
                writes += log_failure("rolloutpolicy", node, r);
            }
            status.pools.push(d.progress);
        }
        // Heals older than the cap's period are forgotten.
        if let Some((_, period)) = spec.heal {
            for h in &mut heals {
                h.times.retain(|t| {
                    t.parse::<Timestamp>()
                        .is_ok_and(|t| t.checked_add(period).is_ok_and(|e| e > now))
                });
            }
            heals.retain(|h| !h.times.is_empty());
        } else {
            heals.clear();
        }
        status.heals = heals;
        status.conditions = policy.status.conditions.clone();
        let pools: Vec<&str> = status.pools.iter().map(|p: &PoolProgress| p.pool.as_str()).collect();
        let msg = format!(
            "governs pools: {}",
            if pools.is_empty() {
                "none".to_string()
            } else {
                pools.join(", ")
            }
        );
        crate::rollout::set_condition(
            &mut status.conditions,
            "Ready",
            crate::rollout::ConditionStatus::True,
            // A condition's reason is a CamelCase word (metav1.Condition requires one).
            "Applied",
            &msg,
            &crate::model::Time(now),
        );
        if status != policy.status {
            statuses.push((name, status, policy.metadata.resource_version.clone()));
        }
    }
    // The policies' records: one decision, one append.
    let updates: Vec<Update> = statuses
        .into_iter()
        .map(|(name, status, rv)| {
            let mut obj = st.get_json(Kind::RolloutPolicy, &name).unwrap_or_default();
            obj["status"] = serde_json::to_value(&status).expect("serializes");
            Update::status_of(Kind::RolloutPolicy, name, &obj, rv.as_deref())
        })
        .collect();
    if !updates.is_empty() {
        let r = hub.update_many(&updates, &Actor::new("controller:rolloutpolicy")).await;
        writes += super::log_batch("rolloutpolicy", &updates, r);
    }
    (writes, gates)
}
