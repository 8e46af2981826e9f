//! The MachineConfigNode controller (MCO `pkg/operator/sync.go` `syncMachineConfigNodes` and
//! `pkg/upgrademonitor` `GenerateAndApplyMachineConfigNodeSpec`): one MachineConfigNode per node
//! in a pool, named after the node and owned by it, its spec following the node's pool and
//! `desiredConfig`. An MCN whose Node is gone is deleted by the garbage collector (its owner
//! reference), as MCO's operator deletes it.
//!
//! Also the controllers' status writes of an MCN ([`step_update`]): the drain controller's
//! Cordoned, Drained and Uncordoned phases, as MCO's drain controller writes them.

use super::log_failure;
use crate::command::{Actor, CommandError, Hub, Mutation, Scope, Update};
use crate::model::machine_config_node::{self as mcn, MachineConfigNode, Step};
use crate::model::{Kind, Time};
use crate::state::State;

/// The actor of the MCN writes (MCO's field manager `machine-config-operator`).
const ACTOR: &str = "controller:machine-config-node";

/// Creates the missing MCNs and brings each one's spec (node, pool, desired config) up to
/// date; returns the number of writes. A node in no pool (or in several custom pools) has
/// none, as MCO's `GetPrimaryPoolNameForMCN` gives it no pool.
pub async fn reconcile(hub: &Hub) -> usize {
    let keys = hub.keys().clone();
    let (creates, updates) = {
        let st = hub.state();
        let fleet = st.fleet(&keys);
        let existing = st.objects.get(&Kind::MachineConfigNode);
        let (mut creates, mut updates) = (Vec::new(), Vec::new());
        for (name, node) in st.nodes.iter() {
            let Some(pool) = fleet.facts(name).and_then(|f| f.pool.clone().map(|p| (p, f))) else {
                continue;
            };
            let (pool, facts) = pool;
            let desired = mcn::desired_or_placeholder(&facts.annotations.desired_config);
            match existing.and_then(|m| m.get(name)) {
                None => {
                    let uid = node.metadata.uid.clone().unwrap_or_default();
                    let api_version = Kind::MachineConfigNode.api_version(hub.group());
                    creates.push(mcn::for_node(
                        name,
                        &uid,
                        &pool,
                        &facts.annotations.desired_config,
                        &api_version,
                    ));
                }
                Some(m) => {
                    let spec = &m["spec"];
                    let same = spec["pool"]["name"] == pool.as_str()
                        && spec["node"]["name"] == name.as_str()
                        && spec["configVersion"]["desired"] == desired.as_str();
                    if !same {
                        updates.push((name.clone(), pool, desired));
                    }
                }
            }
        }
        (creates, updates)
    };
    let actor = Actor::new(ACTOR);
    let mut writes = 0;
    // The missing MCNs of a pass as one append (a fleet's first pass creates one per node);
    // refused as a whole (one created meanwhile by its daemon), the next pass tries the rest.
    if !creates.is_empty() {
        let mutations: Vec<Mutation> = creates
            .into_iter()
            .map(|m| Mutation::Create {
                kind: Kind::MachineConfigNode,
                object: serde_json::to_value(m).expect("serializes"),
            })
            .collect();
        let n = mutations.len();
        let r = hub.batch(mutations, "", &actor).await.map(|_| ());
        writes += log_failure("machine-config-node", &format!("{n} MachineConfigNodes"), r) * n;
    }
    let updates: Vec<Update> = updates
        .into_iter()
        .map(|(name, pool, desired)| Update {
            kind: Kind::MachineConfigNode,
            name: name.clone(),
            scope: Scope::Main,
            precondition: None,
            f: Box::new(move |cur| {
                let mut m = parse(cur)?;
                m.spec.node.name = name.clone();
                m.spec.pool.name = pool.clone();
                m.spec.config_version.desired = desired.clone();
                Ok(serde_json::to_value(m).expect("serializes"))
            }),
        })
        .collect();
    if !updates.is_empty() {
        writes += super::log_batch("machine-config-node", &updates, hub.update_many(&updates, &actor).await);
    }
    writes
}

fn parse(cur: &serde_json::Value) -> Result<MachineConfigNode, CommandError> {
    serde_json::from_value(cur.clone()).map_err(|e| CommandError::BadRequest(e.to_string()))
}

/// The status write of `step` on `node`'s MCN, with the node's `desiredConfig` and
/// `currentConfig` as the projection has them; `None` when the node has no MCN or the step
/// would change nothing (MCO's writer returns without writing then), so a pass that only
/// repeats a phase writes nothing.
pub(super) fn step_update(st: &State, keys: &crate::model::Keys, node: &str, step: Step) -> Option<Update<'static>> {
    let cur = st.objects.get(&Kind::MachineConfigNode)?.get(node)?;
    let facts = st
        .nodes
        .get(node)
        .map(|n| crate::model::NodeAnnotations::read(n, keys))?;
    let (desired, current) = (facts.desired_config, facts.current_config);
    let mut probe: MachineConfigNode = serde_json::from_value((**cur).clone()).ok()?;
    if !mcn::apply_step(&mut probe, &step, &desired, &current, &crate::model::now()) {
        return None;
    }
    Some(Update {
        kind: Kind::MachineConfigNode,
        name: node.to_string(),
        scope: Scope::Status,
        precondition: None,
        f: Box::new(move |cur| {
            let mut m = parse(cur)?;
            let now: Time = crate::model::now();
            mcn::apply_step(&mut m, &step, &desired, &current, &now);
            Ok(serde_json::to_value(m).expect("serializes"))
        }),
    })
}
