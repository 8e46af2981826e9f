//! Rollback planning: the writes that restore a pool's source MachineConfigs to what they were
//! when a given render was produced.
//!
//! Owns [`plan`]: from the state at the render's creation and the state now, the MachineConfigs
//! to recreate, revert and delete (and the pool selector to restore, when it changed), the
//! rendered name those writes will produce (content addressing makes it the target's name), and
//! the other pools the restored MachineConfigs also feed. Pure: states in, a plan out; the API
//! applies it as one atomic batch and the normal rollout takes the nodes back.

use crate::command::Mutation;
use crate::model::{Kind, MachineConfig, MachineConfigPool};
use crate::preview::{propose, render_in};
use crate::render::{is_rendered_config, render_pool};
use crate::state::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a rollback does to one object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// `recreate`, `revert`, `delete` or `restore selector`.
    pub action: String,
    pub kind: String,
    pub name: String,
}

/// A rollback, ready to apply.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub pool: String,
    /// The render rolled back to.
    pub target: String,
    /// The seq at which `target` was produced (the state restored from).
    pub produced_at: u64,
    /// The pool's target now.
    pub current: String,
    pub steps: Vec<Step>,
    /// The rendered name the restored sources produce; equal to `target` unless something the
    /// rollback does not restore changed (then the API refuses).
    pub predicted: String,
    /// Other pools whose rendered config the writes would change (custom pools inherit worker
    /// MachineConfigs), with the name they would get.
    pub other_pools: Vec<(String, String)>,
    /// The writes, in order.
    #[serde(skip)]
    pub mutations: Vec<Mutation>,
}

/// Why a rollback cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RollbackError {
    #[error("pool {0:?} does not exist")]
    NoPool(String),
    #[error("pool {pool:?} did not exist when {target} was produced (resourceVersion {at})")]
    NoPoolThen { pool: String, target: String, at: u64 },
    #[error("{target} is not a render of pool {pool:?}: at resourceVersion {at} its sources rendered {got}")]
    NotThisPool {
        pool: String,
        target: String,
        at: u64,
        got: String,
    },
    #[error("restoring the sources of {target} would render {predicted}, not {target}: {why}")]
    Mismatch {
        target: String,
        predicted: String,
        why: String,
    },
}

/// A stored object as a client would send it back: the server-set metadata dropped.
fn as_applied(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v["metadata"].as_object_mut() {
        for k in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "managedFields",
        ] {
            m.remove(k);
        }
    }
    v
}

fn same_source(a: &MachineConfig, b: &MachineConfig) -> bool {
    a.spec == b.spec && a.metadata.labels == b.metadata.labels
}

/// Plans the rollback of `pool` to `target`, produced at seq `produced_at`; `then` is the
/// state at that seq, `now` the current one. See the module for what the plan holds.
pub fn plan(then: &State, now: &State, pool: &str, target: &str, produced_at: u64) -> Result<Plan, RollbackError> {
    let pool_now = now.pools.get(pool).ok_or_else(|| RollbackError::NoPool(pool.into()))?;
    let pool_then = then.pools.get(pool).ok_or_else(|| RollbackError::NoPoolThen {
        pool: pool.into(),
        target: target.into(),
        at: produced_at,
    })?;
    let all_then: Vec<&MachineConfig> = then.machine_configs.values().map(|o| &**o).collect();
    let rendered_then = render_pool(pool_then, &all_then).map_err(|e| RollbackError::NotThisPool {
        pool: pool.into(),
        target: target.into(),
        at: produced_at,
        got: e.to_string(),
    })?;
    if rendered_then.name != target {
        return Err(RollbackError::NotThisPool {
            pool: pool.into(),
            target: target.into(),
            at: produced_at,
            got: rendered_then.name,
        });
    }
    let mut steps = Vec::new();
    let mut mutations = Vec::new();
    let mc_kind = Kind::MachineConfig.as_str().to_string();
    for source in &rendered_then.sources {
        let old = &then.machine_configs[source];
        let obj = as_applied(&serde_json::to_value(old).expect("serializes"));
        match now.machine_configs.get(source) {
            None => {
                steps.push(Step {
                    action: "recreate".into(),
                    kind: mc_kind.clone(),
                    name: source.clone(),
                });
                mutations.push(Mutation::Create {
                    kind: Kind::MachineConfig,
                    object: obj,
                });
            }
            Some(cur) if !same_source(cur, old) => {
                steps.push(Step {
                    action: "revert".into(),
                    kind: mc_kind.clone(),
                    name: source.clone(),
                });
                mutations.push(Mutation::Replace {
                    kind: Kind::MachineConfig,
                    name: source.clone(),
                    object: obj,
                });
            }
            Some(_) => {}
        }
    }
    let selector = pool_now.spec.machine_config_selector.as_ref();
    for mc in now.machine_configs.values() {
        let name = mc.name();
        if is_rendered_config(mc) || rendered_then.sources.iter().any(|s| s == name) {
            continue;
        }
        let selected_now = crate::model::selector_matches(selector, &mc.metadata);
        let selected_then =
            crate::model::selector_matches(pool_then.spec.machine_config_selector.as_ref(), &mc.metadata);
        if selected_now || selected_then {
            steps.push(Step {
                action: "delete".into(),
                kind: mc_kind.clone(),
                name: name.to_string(),
            });
            mutations.push(Mutation::Delete {
                kind: Kind::MachineConfig,
                name: name.to_string(),
            });
        }
    }
    if pool_now.spec.machine_config_selector != pool_then.spec.machine_config_selector {
        let mut p: MachineConfigPool = (**pool_now).clone();
        p.spec.machine_config_selector = pool_then.spec.machine_config_selector.clone();
        steps.push(Step {
            action: "restore selector".into(),
            kind: Kind::MachineConfigPool.as_str().into(),
            name: pool.into(),
        });
        mutations.push(Mutation::Replace {
            kind: Kind::MachineConfigPool,
            name: pool.into(),
            object: as_applied(&serde_json::to_value(&p).expect("serializes")),
        });
    }
    let after = propose(now, &mutations).map_err(|why| RollbackError::Mismatch {
        target: target.into(),
        predicted: String::new(),
        why,
    })?;
    let predicted = match render_in(&after, &after.pools[pool]) {
        Ok((name, _)) => name,
        Err(why) => {
            return Err(RollbackError::Mismatch {
                target: target.into(),
                predicted: String::new(),
                why,
            })
        }
    };
    if predicted != target {
        return Err(RollbackError::Mismatch {
            target: target.into(),
            predicted,
            why: "an input the rollback does not restore differs (a template MachineConfig?)".into(),
        });
    }
    let mut other_pools = Vec::new();
    for (name, p) in &now.pools {
        if name == pool {
            continue;
        }
        let before = render_in(now, p).map(|(n, _)| n).unwrap_or_default();
        let after_name = after
            .pools
            .get(name)
            .map(|p| {
                render_in(&after, p)
                    .map(|(n, _)| n)
                    .unwrap_or_else(|e| format!("(would not render: {e})"))
            })
            .unwrap_or_default();
        if before != after_name {
            other_pools.push((name.clone(), after_name));
        }
    }
    Ok(Plan {
        pool: pool.into(),
        target: target.into(),
        produced_at,
        current: pool_now.spec.configuration.name.clone(),
        steps,
        predicted,
        other_pools,
        mutations,
    })
}
