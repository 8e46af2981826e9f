//! Impact previews: what a change would do to the fleet, computed before it is made.
//!
//! Owns applying proposed writes to a copy of the state ([`propose`]) and comparing the fleet
//! before and after ([`impact`]): for each pool, the rendered config it would get (or why it
//! could not render), and for each of its nodes the files, units, dropins and SSH keys that would
//! change, whether the node would drain and reboot (MCO's post-config action for the diff,
//! [`crate::disruption::plan`] under the cluster's node disruption policy), and the order and waves the rollout would take
//! within `maxUnavailable` (nothing while the pool is paused), under the pool's RolloutPolicy
//! when one governs it (its canary wave first and its bake time, and whether the rollout waits
//! for a maintenance window at the preview's time). Pure: states and the time in, a report out.

use crate::command::Mutation;
use crate::model::{Keys, Kind, MachineConfig, MachineConfigPool, Node, NodeAnnotations, RolloutPolicy};
use crate::render::render_pool;
use crate::rollout::{max_unavailable, policy, pools_for_nodes};
use crate::state::State;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// What a change would do.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Impact {
    /// Every pool whose target would change or could not render.
    pub pools: Vec<PoolImpact>,
}

/// One pool's part of an [`Impact`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolImpact {
    pub pool: String,
    /// The rendered config the pool targets now.
    pub current: String,
    /// The rendered config it would target (empty when it could not render).
    pub rendered: String,
    /// Why it could not render (the RenderDegraded message), if so.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub render_error: String,
    pub paused: bool,
    /// `maxUnavailable` resolved against the pool's node count.
    pub max_unavailable: usize,
    pub nodes: Vec<NodeImpact>,
    /// Nodes in the order MCO's node controller would take them (zone, then oldest), grouped
    /// by `maxUnavailable`; empty when paused. An estimate: unavailable nodes shrink a wave.
    /// Under a RolloutPolicy with a canary wave, its canaries come first (the leading
    /// [`PolicyImpact::canary_waves`] waves), then the rest.
    pub waves: Vec<Vec<String>>,
    /// The RolloutPolicy governing the pool, as it would hold this rollout at the preview's
    /// time; absent when none selects the pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyImpact>,
}

/// What a pool's RolloutPolicy does to a rollout ([`crate::rollout::policy`]), at the time of
/// the preview.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyImpact {
    /// The policy's name.
    pub name: String,
    /// Its maintenance windows now, in the pool condition's words (`inside a maintenance window
    /// until …`, `outside every maintenance window; the next opens at …`); empty without windows.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub window: String,
    /// Outside every window: no node would be targeted until the next one opens.
    pub waits_for_window: bool,
    /// How many of the pool's leading waves are the canary wave (0 without one).
    pub canary_waves: usize,
    /// The bake time after the canaries are healthy (`30m`); empty without a canary wave.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub bake_time: String,
    /// The policy paused the pool for the failed canary of `paused_for` and resumes it, since
    /// the change moves the target away from that render: the pool's `paused` and waves are
    /// the rollout's after the resume.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resumes_pool: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub paused_for: String,
    /// Nodes Degraded on a render that is not the new target, which the policy's
    /// self-healing returns to it (those under its heal cap at the preview's time).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub heals: Vec<String>,
}

/// One node's part of a [`PoolImpact`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeImpact {
    pub node: String,
    /// The rendered config the node is on.
    pub current_config: String,
    /// Changed items, `<section> <name>` (`file /etc/chrony.conf`, `unit chronyd.service`),
    /// with ` (removed)` after an item the new config no longer has.
    pub changes: Vec<String>,
    /// Whether the node is cordoned and drained first.
    pub drain: bool,
    /// Whether it reboots.
    pub reboot: bool,
}

/// The state after `mutations`, each applied to a copy of `now` as the hub would (objects are
/// the admitted forms; a deleted object is removed). Errors: a Replace or Delete of an object
/// that does not exist, a Create of one that does.
pub fn propose(now: &State, mutations: &[Mutation]) -> Result<State, String> {
    let mut after = now.clone();
    // The objects change below without a fold: the copy must not serve the kept JSON or index.
    after.forget_encoded();
    after.forget_index();
    for m in mutations {
        match m {
            Mutation::Create { kind, object } | Mutation::Replace { kind, object, .. } => {
                let name = object["metadata"]["name"].as_str().unwrap_or("").to_string();
                let exists = after.get_json(*kind, &name).is_some();
                if matches!(m, Mutation::Create { .. }) && exists {
                    return Err(format!("{kind} {name:?} already exists"));
                }
                if matches!(m, Mutation::Replace { .. }) && !exists {
                    return Err(format!("{kind} {name:?} not found"));
                }
                insert(&mut after, *kind, &name, object)?;
            }
            Mutation::Delete { kind, name } => {
                let gone = match kind {
                    Kind::MachineConfig => after.machine_configs.remove(name).is_some(),
                    Kind::MachineConfigPool => after.pools.remove(name).is_some(),
                    Kind::Node => after.nodes.remove(name).is_some(),
                    Kind::MachineConfiguration => after.machine_configurations.remove(name).is_some(),
                    k => after.objects.entry(*k).or_default().remove(name).is_some(),
                };
                if !gone {
                    return Err(format!("{kind} {name:?} not found"));
                }
            }
        }
    }
    Ok(after)
}

fn insert(state: &mut State, kind: Kind, name: &str, object: &serde_json::Value) -> Result<(), String> {
    let bad = |e: serde_json::Error| format!("{kind} {name:?}: {e}");
    match kind {
        Kind::MachineConfig => {
            state
                .machine_configs
                .insert(name.into(), serde_json::from_value(object.clone()).map_err(bad)?);
        }
        Kind::MachineConfigPool => {
            state
                .pools
                .insert(name.into(), serde_json::from_value(object.clone()).map_err(bad)?);
        }
        Kind::Node => {
            state
                .nodes
                .insert(name.into(), serde_json::from_value(object.clone()).map_err(bad)?);
        }
        Kind::MachineConfiguration => {
            state
                .machine_configurations
                .insert(name.into(), serde_json::from_value(object.clone()).map_err(bad)?);
        }
        k => {
            state
                .objects
                .entry(k)
                .or_default()
                .insert(name.into(), object.clone().into());
        }
    }
    Ok(())
}

/// The rendered config `pool` would target in `state`, as the render controller would make it.
pub fn render_in(state: &State, pool: &MachineConfigPool) -> Result<(String, MachineConfig), String> {
    let all: Vec<&MachineConfig> = state.machine_configs.values().map(|o| &**o).collect();
    let r = render_pool(pool, &all).map_err(|e| crate::render::render_degraded_message(pool.name(), &e))?;
    let mut mc = MachineConfig {
        spec: r.spec,
        ..Default::default()
    };
    mc.metadata.name = Some(r.name.clone());
    mc.metadata.annotations = Some(
        [(
            crate::render::ATTRIBUTION_ANNOTATION.to_string(),
            r.attribution.to_annotation(),
        )]
        .into(),
    );
    Ok((r.name, mc))
}

/// Compares the fleet in `before` and `after` (see the module); `now` is the time the
/// RolloutPolicies' windows are read at.
pub fn impact(before: &State, after: &State, keys: &Keys, now: Timestamp) -> Impact {
    let policies: Vec<RolloutPolicy> = after.typed(Kind::RolloutPolicy);
    let pools: Vec<&MachineConfigPool> = after.pools.values().map(|o| &**o).collect();
    let nodes: Vec<&Node> = after.nodes.values().map(|o| &**o).collect();
    let membership = pools_for_nodes(&pools, &nodes);
    let mut out = Impact::default();
    for pool in pools {
        let current = before
            .pools
            .get(pool.name())
            .map(|p| p.spec.configuration.name.clone())
            .unwrap_or_default();
        let was = before
            .pools
            .get(pool.name())
            .map(|p| render_in(before, p).map(|(n, _)| n));
        let rendered = render_in(after, pool);
        let (name, render_error, new_mc) = match &rendered {
            Ok((n, mc)) => (n.clone(), String::new(), Some(mc)),
            Err(e) => (String::new(), e.clone(), None),
        };
        let unchanged = match (&was, &rendered) {
            (Some(Ok(w)), Ok((n, _))) => *w == *n && *n == current,
            (Some(Err(w)), Err(e)) => w == e,
            _ => false,
        };
        if unchanged {
            continue;
        }
        let members: Vec<&Node> = membership
            .nodes_of(pool.name())
            .iter()
            .filter_map(|n| after.nodes.get(n).map(|n| &**n))
            .collect();
        let max = max_unavailable(pool.spec.max_unavailable.as_ref(), members.len()).unwrap_or(1);
        let mut node_impacts = Vec::new();
        for n in &members {
            let a = NodeAnnotations::read(n, keys);
            let Some(new_mc) = new_mc else { continue };
            if a.current_config == name {
                continue;
            }
            let on = before
                .machine_configs
                .get(&a.current_config)
                .or_else(|| after.machine_configs.get(&a.current_config));
            let (changes, action) = match on {
                Some(old) => {
                    let none = |_: &str| None;
                    let items = crate::diff::diff(
                        crate::diff::Input {
                            config: old,
                            provenance: &none,
                        },
                        crate::diff::Input {
                            config: new_mc,
                            provenance: &none,
                        },
                    )
                    .map(|d| {
                        d.items
                            .iter()
                            .map(|i| {
                                let section = serde_json::to_value(i.section)
                                    .ok()
                                    .and_then(|v| v.as_str().map(str::to_string))
                                    .unwrap_or_default();
                                let gone = if i.change == crate::diff::Change::Removed {
                                    " (removed)"
                                } else {
                                    ""
                                };
                                format!("{}{gone}", format!("{section} {}", i.name).trim_end())
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                    let policies = crate::disruption::policies_for(
                        after
                            .machine_configurations
                            .get(crate::disruption::CLUSTER)
                            .map(|m| &**m),
                    );
                    let plan = crate::disruption::plan(old, new_mc, &policies)
                        .unwrap_or_else(|_| crate::disruption::Plan::reboot());
                    (items, plan)
                }
                // A node on a config the log no longer has: the daemon rewrites everything.
                None => (
                    vec!["every file and unit (the current config is unknown)".into()],
                    crate::disruption::Plan::reboot(),
                ),
            };
            node_impacts.push(NodeImpact {
                node: n.metadata.name.clone().unwrap_or_default(),
                current_config: a.current_config.clone(),
                changes,
                drain: action.drain,
                reboot: action.reboots(),
            });
        }
        let moving: Vec<&Node> = members
            .iter()
            .copied()
            .filter(|n| node_impacts.iter().any(|i| Some(&i.node) == n.metadata.name.as_ref()))
            .collect();
        let plan = Waves {
            members: &members,
            moving: &moving,
            keys,
            target: &name,
            max,
        };
        let (waves, policy) = match policy::governing(&policies, pool) {
            Some((p, spec)) => {
                let (waves, mut policy) = plan.under_policy(p, &spec, now);
                let record = p.status.pools.iter().find(|r| r.pool == pool.name());
                let failed = record.and_then(|r| policy::resumed_from(r, pool.spec.paused, &name));
                if let Some(failed) = failed.filter(|_| !name.is_empty()) {
                    policy.resumes_pool = true;
                    policy.paused_for = failed.to_string();
                }
                (waves, Some(policy))
            }
            None => (crate::rollout::waves(&moving, max), None),
        };
        // A pool the policy paused for a failed canary is resumed by it once the target moves
        // away from the failed render (a rollback, the bad MachineConfig deleted).
        let paused = pool.spec.paused && !policy.as_ref().is_some_and(|p| p.resumes_pool);
        let waves = if paused { Vec::new() } else { waves };
        out.pools.push(PoolImpact {
            pool: pool.name().to_string(),
            current,
            rendered: name,
            render_error,
            paused,
            max_unavailable: max,
            nodes: node_impacts,
            waves,
            policy,
        });
    }
    out
}

/// The nodes of one pool's rollout, for its waves.
struct Waves<'a> {
    /// The pool's nodes (a percentage canary size counts them all).
    members: &'a [&'a Node],
    /// Those the change moves.
    moving: &'a [&'a Node],
    keys: &'a Keys,
    target: &'a str,
    max: usize,
}

impl Waves<'_> {
    /// The waves under RolloutPolicy `p` (parsed: `spec`): its canaries first, each group in
    /// waves of `max` (the node controller still holds the canaries to maxUnavailable), as the
    /// policy would choose them now ([`policy::choose_canaries`]); and the windows at `now`.
    fn under_policy(
        &self,
        p: &RolloutPolicy,
        spec: &policy::Parsed,
        now: Timestamp,
    ) -> (Vec<Vec<String>>, PolicyImpact) {
        let windows = crate::rollout::window::state(&spec.windows, now);
        let mut out = PolicyImpact {
            name: p.metadata.name.clone().unwrap_or_default(),
            window: policy::window_text(&windows),
            waits_for_window: matches!(windows, crate::rollout::window::WindowState::Closed { .. }),
            ..Default::default()
        };
        if let Some((max, period)) = spec.heal {
            // Only those under the heal cap: a node at it stays Degraded (the pool's condition
            // names it with its next heal).
            out.heals = self
                .members
                .iter()
                .filter(|n| policy::is_stuck(n, self.keys, self.target))
                .map(|n| n.metadata.name.clone().unwrap_or_default())
                .filter(|n| policy::recent_heals(&p.status.heals, n, period, now).len() < max as usize)
                .collect();
        }
        let Some((size, bake)) = &spec.canary else {
            return (crate::rollout::waves(self.moving, self.max), out);
        };
        let k = policy::canary_count(size, self.members.len()).unwrap_or(1);
        let canaries = policy::choose_canaries(self.moving, self.keys, self.target, k);
        let (first, rest): (Vec<&Node>, Vec<&Node>) = self
            .moving
            .iter()
            .partition(|n| canaries.iter().any(|c| Some(c) == n.metadata.name.as_ref()));
        let mut waves = crate::rollout::waves(&first, self.max);
        out.canary_waves = waves.len();
        out.bake_time = format!("{bake:#}");
        waves.extend(crate::rollout::waves(&rest, self.max));
        (waves, out)
    }
}

/// The impact as text, one pool after another (for `--dry-run` of the CLI).
pub fn render_text(impact: &Impact) -> String {
    if impact.pools.is_empty() {
        return "no pool would change\n".into();
    }
    let short = crate::history::short;
    let mut out = String::new();
    for p in &impact.pools {
        if !p.render_error.is_empty() {
            out.push_str(&format!("pool {}: would not render: {}\n", p.pool, p.render_error));
            continue;
        }
        out.push_str(&format!("pool {}: {} -> {}\n", p.pool, short(&p.current), p.rendered));
        if p.nodes.is_empty() {
            out.push_str("  no node changes\n");
        }
        for n in &p.nodes {
            let what = match (n.drain, n.reboot) {
                (true, true) => "drain and reboot",
                (true, false) => "drain, no reboot",
                (false, true) => "reboot",
                (false, false) => "no drain, no reboot",
            };
            out.push_str(&format!("  node {} ({what}): {}\n", n.node, n.changes.join(", ")));
        }
        if p.paused {
            out.push_str("  paused: nothing rolls out until the pool is resumed\n");
            continue;
        }
        let policy = p.policy.as_ref();
        if let Some(pol) = policy.filter(|pol| pol.resumes_pool) {
            out.push_str(&format!(
                "  rolloutpolicy/{} resumes the pool it paused for {}'s failed canary\n",
                pol.name, pol.paused_for
            ));
        }
        for node in policy.iter().flat_map(|pol| pol.heals.iter().map(move |n| (pol, n))) {
            out.push_str(&format!(
                "  node {} (Degraded on another render): returned to {} by the self-healing of rolloutpolicy/{}\n",
                node.1, p.rendered, node.0.name
            ));
        }
        if let Some(pol) = policy.filter(|pol| !pol.window.is_empty()) {
            let then = if pol.waits_for_window {
                "; nothing rolls out until then"
            } else {
                ""
            };
            out.push_str(&format!("  rolloutpolicy/{}: {}{then}\n", pol.name, pol.window));
        }
        let canary_waves = policy.map_or(0, |pol| pol.canary_waves);
        for (i, w) in p.waves.iter().enumerate() {
            let canary = if i < canary_waves { "canary, " } else { "" };
            out.push_str(&format!(
                "  wave {} ({canary}maxUnavailable {}): {}\n",
                i + 1,
                p.max_unavailable,
                w.join(", ")
            ));
            if let Some(pol) = policy.filter(|_| i + 1 == canary_waves && canary_waves < p.waves.len()) {
                out.push_str(&format!(
                    "  then the canaries bake {} (Done, Ready, not Degraded) before the rest (rolloutpolicy/{})\n",
                    pol.bake_time, pol.name
                ));
            }
        }
    }
    out
}
