//! Rollout: which nodes belong to which pool, which nodes to move to the pool's rendered config
//! next, and the pool status that results.
//!
//! Owns MCO's node-controller decisions (`pkg/controller/node/node_controller.go`,
//! `pkg/controller/node/status.go`, `pkg/helpers/helpers.go` GetPoolsForNode, mco-facts sections
//! 2 and 3): maxUnavailable, primary-pool resolution, the node predicates, candidate selection
//! and the pool's counts and conditions.
//!
//! Pure: no IO, no clock (time is a parameter), no store. It must not write node annotations or
//! pool objects: the rollout and pool-status controllers turn its answers into commands.

use crate::model::{
    label, node_is_ready, IntOrString, Keys, MachineConfigPool, MachineConfigPoolStatus, Node, NodeAnnotations,
    NodeState, PoolCondition, Time,
};
use std::collections::BTreeMap;

pub mod index;
pub mod policy;
pub mod window;
pub use index::{DesiredTally, FleetIndex, NodeFacts, PoolTally};

/// Node label naming the node's zone, used to order candidates (MCO `sortNodeList`).
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// Node label naming the node's OS; `windows` nodes are never managed.
pub const OS_LABEL: &str = "kubernetes.io/os";

/// Pool condition types (`vendor/github.com/openshift/api/machineconfiguration/v1/types.go`).
pub mod condition {
    /// All nodes run the pool's rendered config.
    pub const UPDATED: &str = "Updated";
    /// The pool is moving nodes to its rendered config.
    pub const UPDATING: &str = "Updating";
    /// Some node of the pool reports Degraded or Unreconcilable.
    pub const NODE_DEGRADED: &str = "NodeDegraded";
    /// The render controller failed to render the pool (owned by it, kept here).
    pub const RENDER_DEGRADED: &str = "RenderDegraded";
    /// NodeDegraded or RenderDegraded.
    pub const DEGRADED: &str = "Degraded";
}

/// Resolves the pool's `maxUnavailable` for a pool of `node_count` nodes (MCO
/// `pkg/controller/node/node_controller.go` maxUnavailable, mco-facts 3.4).
///
/// `None` -> 1; an integer as is; `"N%"` -> N percent of `node_count` rounded down; a result of 0
/// becomes 1. Errors (as text) for strings not of the form `N%` (`"60"`, `"50 percent"`,
/// `"40 %"`) and for negative values.
pub fn max_unavailable(value: Option<&IntOrString>, node_count: usize) -> Result<usize, String> {
    let n: i64 = match value {
        None => 1,
        Some(IntOrString::Int(i)) => i64::from(*i),
        Some(IntOrString::String(s)) => {
            let Some(number) = s.strip_suffix('%') else {
                return Err(format!("invalid maxUnavailable {s:?}: string is not a percentage"));
            };
            let percent: i64 = number
                .parse()
                .map_err(|_| format!("invalid maxUnavailable {s:?}: {number:?} is not an integer"))?;
            percent.saturating_mul(node_count as i64).div_euclid(100)
        }
    };
    if n < 0 {
        return Err(format!("invalid maxUnavailable {n}: must not be negative"));
    }
    Ok((n as usize).max(1))
}

/// The nodes of each pool and the nodes that could not be placed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolMembership {
    /// Pool name -> names of the nodes whose primary pool it is, in input order. Every input
    /// pool has an entry (possibly empty).
    pub nodes: BTreeMap<String, Vec<String>>,
    /// Node name -> its primary pool.
    pub primary: BTreeMap<String, String>,
    /// Per-node errors (the node is in no pool), e.g. `node n belongs to 2 custom roles, cannot
    /// proceed with this Node`.
    pub errors: Vec<String>,
}

impl PoolMembership {
    /// Names of the nodes of `pool` (empty for an unknown pool).
    pub fn nodes_of(&self, pool: &str) -> &[String] {
        self.nodes.get(pool).map(Vec::as_slice).unwrap_or(&[])
    }
}

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or("")
}

/// Resolves every node's primary pool (MCO `GetPoolsForNode` / `GetNodesForPool`,
/// `pkg/helpers/helpers.go`, mco-facts section 2).
///
/// A node matches a pool when the pool's `spec.nodeSelector` matches its labels (an empty
/// selector matches nothing; nodes labelled `kubernetes.io/os=windows` are never managed).
/// Pools named `master` and `worker` are built in; any other is custom. Then: more than one
/// custom pool -> the node is in no pool and an error is recorded; one custom pool -> `master`
/// if it also matches (the custom config is ignored), else the custom pool; else `master`, else
/// `worker`. A node matching no pool is simply unmanaged.
pub fn pools_for_nodes(pools: &[&MachineConfigPool], nodes: &[&Node]) -> PoolMembership {
    let mut out = PoolMembership {
        nodes: pools.iter().map(|p| (p.name().to_string(), Vec::new())).collect(),
        ..Default::default()
    };
    for node in nodes {
        match primary_pool(pools, node) {
            Err(e) => out.errors.push(e),
            Ok(None) => {}
            Ok(Some(primary)) => {
                out.nodes
                    .entry(primary.to_string())
                    .or_default()
                    .push(node_name(node).to_string());
                out.primary.insert(node_name(node).to_string(), primary.to_string());
            }
        }
    }
    out
}

/// One node's primary pool among `pools` by the rules of [`pools_for_nodes`]: `Ok(None)` when
/// unmanaged, `Err` (MCO's message) when it matches more than one custom pool.
pub fn primary_pool<'p>(pools: &[&'p MachineConfigPool], node: &Node) -> Result<Option<&'p str>, String> {
    if label(&node.metadata, OS_LABEL) == Some("windows") {
        return Ok(None);
    }
    let matching: Vec<&str> = pools
        .iter()
        .filter(|p| crate::model::selector_matches(p.spec.node_selector.as_ref(), &node.metadata))
        .map(|p| p.name())
        .collect();
    let custom: Vec<&str> = matching
        .iter()
        .copied()
        .filter(|n| *n != "master" && *n != "worker")
        .collect();
    if custom.len() > 1 {
        return Err(format!(
            "node {} belongs to {} custom roles, cannot proceed with this Node",
            node_name(node),
            custom.len()
        ));
    }
    let named = |n: &str| matching.iter().copied().find(|m| *m == n);
    Ok(named("master").or(custom.first().copied()).or_else(|| named("worker")))
}

/// MCO NodeDone (`pkg/controller/common/layered_node_state.go`): currentConfig and desiredConfig
/// both set and equal, and state `Done`.
pub fn is_node_done(node: &Node, keys: &Keys) -> bool {
    done(&NodeAnnotations::view(node, keys))
}

/// MCO IsDone ("updated"): [`is_node_done`] and desiredConfig == the pool's target rendered config.
pub fn is_node_updated(node: &Node, keys: &Keys, target: &str) -> bool {
    let a = NodeAnnotations::view(node, keys);
    done(&a) && a.desired_config == target
}

/// MCO IsNodeMCDFailing: currentConfig != desiredConfig and state `Degraded` or `Unreconcilable`.
pub fn is_node_mcd_failing(node: &Node, keys: &Keys) -> bool {
    mcd_failing(&NodeAnnotations::view(node, keys))
}

/// MCO IsUnavailableForUpdate: not Ready ([`node_is_ready`]: a cordoned node is not ready) ->
/// unavailable; done -> available; otherwise unavailable unless the MCD is failing (a Ready node
/// stuck Degraded on a new config does not count here, it reduces capacity instead).
pub fn is_node_unavailable(node: &Node, keys: &Keys) -> bool {
    unavailable(&NodeAnnotations::view(node, keys), node_is_ready(node))
}

fn done(a: &NodeAnnotations<&str>) -> bool {
    !a.current_config.is_empty() && a.current_config == a.desired_config && a.state == NodeState::Done.as_str()
}

fn mcd_failing(a: &NodeAnnotations<&str>) -> bool {
    a.current_config != a.desired_config && is_degraded_state(a.state)
}

fn unavailable(a: &NodeAnnotations<&str>, ready: bool) -> bool {
    !ready || (!done(a) && !mcd_failing(a))
}

fn is_degraded_state(state: &str) -> bool {
    matches!(
        NodeState::parse(state),
        Some(NodeState::Degraded | NodeState::Unreconcilable)
    )
}

/// Names of the nodes to target next with the pool's rendered config `target` (MCO
/// `getAllCandidateMachines` and `sortNodeList`, `pkg/controller/node/node_controller.go`,
/// mco-facts 3.3 steps 6 and 8). `nodes` are the pool's nodes, `max_unavailable` from
/// [`max_unavailable`].
///
/// capacity = max_unavailable - unavailable nodes (none when <= 0); nodes already targeting
/// `target` whose MCD is failing use up capacity too. Candidates are Ready nodes whose
/// desiredConfig != `target`. When there are more candidates than capacity they are sorted by
/// zone label ascending, oldest creationTimestamp first within a zone, zone-less nodes last
/// (oldest first), and the first `capacity` taken; otherwise all are returned in input order.
pub fn select_candidates(target: &str, nodes: &[&Node], keys: &Keys, max_unavailable: usize) -> Vec<String> {
    let unavailable = nodes.iter().filter(|n| is_node_unavailable(n, keys)).count();
    if unavailable >= max_unavailable {
        return Vec::new();
    }
    let mut capacity = max_unavailable - unavailable;
    let mut candidates: Vec<&Node> = Vec::new();
    let mut failing_this_config = 0;
    for node in nodes {
        if NodeAnnotations::view(node, keys).desired_config == target {
            if is_node_mcd_failing(node, keys) {
                failing_this_config += 1;
            }
            continue;
        }
        if node_is_ready(node) {
            candidates.push(node);
        }
    }
    if failing_this_config >= capacity {
        return Vec::new();
    }
    capacity -= failing_this_config;
    if candidates.len() > capacity {
        sort_nodes(&mut candidates);
        candidates.truncate(capacity);
    }
    candidates.into_iter().map(|n| node_name(n).to_string()).collect()
}

/// [`select_candidates`] from a pool's tally: the same answer for the pool's nodes other than
/// its fresh ones (no config yet, which the node controller seeds apart), given in name order.
/// `node` looks a node up (for the zone and age order, read only for the candidates when there
/// are more than the capacity). O(pools' desired configs + candidates).
pub fn select_from_tally<'n>(
    target: &str,
    tally: &PoolTally,
    max_unavailable: usize,
    node: impl Fn(&str) -> Option<&'n Node>,
) -> Vec<String> {
    select_allowed(target, tally, max_unavailable, node, None)
}

/// [`select_from_tally`] with the candidates restricted to `allowed` when it is given (a
/// RolloutPolicy's gate, [`policy::PoolDecision::allowed`]): capacity is spent on allowed
/// candidates only, so a held node never takes the place of one the policy lets through.
pub fn select_allowed<'n>(
    target: &str,
    tally: &PoolTally,
    max_unavailable: usize,
    node: impl Fn(&str) -> Option<&'n Node>,
    allowed: Option<&std::collections::BTreeSet<String>>,
) -> Vec<String> {
    if allowed.is_some_and(|a| a.is_empty()) {
        return Vec::new();
    }
    // A fresh node (currentConfig == desiredConfig == "") is neither done nor failing: it is
    // always counted unavailable, so the running nodes' count is the rest.
    let unavailable = tally.unavailable - tally.fresh.len();
    if unavailable >= max_unavailable {
        return Vec::new();
    }
    let capacity = max_unavailable - unavailable;
    let failing_this_config = tally.desiring(target).failing;
    if failing_this_config >= capacity {
        return Vec::new();
    }
    let capacity = capacity - failing_this_config;
    let mut names: Vec<&str> = tally
        .by_desired
        .iter()
        .filter(|(desired, _)| desired.as_str() != target)
        .flat_map(|(_, d)| d.ready.iter())
        .filter(|n| !tally.fresh.contains(*n))
        .filter(|n| allowed.is_none_or(|a| a.contains(*n)))
        .map(String::as_str)
        .collect();
    names.sort_unstable();
    if names.len() <= capacity {
        return names.into_iter().map(str::to_string).collect();
    }
    // MCO's order (zone, zone-less last, then oldest) with the name order breaking ties, as
    // the stable sort of the scan does: a total order, so the first `capacity` are selected
    // in O(candidates) and only they are sorted, each key read once.
    let mut keyed: Vec<_> = names
        .into_iter()
        .enumerate()
        .filter_map(|(i, name)| Some(((candidate_key(node(name)?), i), name)))
        .collect();
    if keyed.len() > capacity {
        keyed.select_nth_unstable_by(capacity, |a, b| a.0.cmp(&b.0));
        keyed.truncate(capacity);
    }
    keyed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    keyed.into_iter().map(|(_, name)| name.to_string()).collect()
}

/// The order and waves in which `nodes` (the pool's nodes that need the new config) would be
/// updated: MCO's candidate order ([`select_candidates`]: zone, then oldest) in groups of
/// `max_unavailable`. An estimate for previews: nodes that are unavailable at the time shrink
/// a real wave.
pub fn waves(nodes: &[&Node], max_unavailable: usize) -> Vec<Vec<String>> {
    let mut sorted = nodes.to_vec();
    sort_nodes(&mut sorted);
    sorted
        .chunks(max_unavailable.max(1))
        .map(|w| w.iter().map(|n| node_name(n).to_string()).collect())
        .collect()
}

/// MCO `sortNodeList`: zone ascending, then creationTimestamp oldest first; zone-less last.
/// Stable, so equal nodes keep their input order. A missing creationTimestamp sorts as oldest.
fn sort_nodes(nodes: &mut [&Node]) {
    nodes.sort_by(|a, b| candidate_key(a).cmp(&candidate_key(b)));
}

/// The key of MCO's candidate order (`sortNodeList`, `pkg/controller/node/node_controller.go`):
/// zone-less last, zone ascending, then creationTimestamp oldest first. The one definition
/// [`sort_nodes`] and [`select_allowed`] (and so [`waves`] and the RolloutPolicy's canary
/// choice) order by.
fn candidate_key(n: &Node) -> (bool, Option<&str>, Option<&crate::model::Time>) {
    let zone = label(&n.metadata, ZONE_LABEL);
    (zone.is_none(), zone, n.metadata.creation_timestamp.as_ref())
}

/// The status of a pool condition (`"True"` / `"False"` on the wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    True,
    False,
}

impl ConditionStatus {
    /// `"True"` or `"False"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
        }
    }
}

/// Sets a condition in a list the way MCO's `SetMachineConfigPoolCondition` does, but in place:
/// the condition of that type is replaced (or appended when absent); `lastTransitionTime` is
/// `now` only when the status changes (or the condition is new), else the old time is kept, so
/// setting the same condition again changes nothing.
pub fn set_condition(
    conditions: &mut Vec<PoolCondition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    now: &Time,
) {
    let status = status.as_str();
    let existing = conditions.iter_mut().find(|c| c.type_ == type_);
    let last_transition_time = match &existing {
        Some(c) if c.status == status => c.last_transition_time.clone().or_else(|| Some(now.clone())),
        _ => Some(now.clone()),
    };
    let new = PoolCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        last_transition_time,
        reason: reason.to_string(),
        message: message.to_string(),
    };
    match existing {
        Some(c) => *c = new,
        None => conditions.push(new),
    }
}

/// Computes a pool's status from its nodes (MCO `calculateStatus`, `pkg/controller/node/status.go`,
/// mco-facts 3.5 and 3.6). `nodes` are the pool's nodes (see [`pools_for_nodes`]); the target is
/// `spec.configuration.name`.
///
/// Counts: machine (all), updated ([`is_node_updated`]), ready (updated and Ready), unavailable
/// ([`is_node_unavailable`]), degraded (state `Degraded`/`Unreconcilable`); observedGeneration =
/// `metadata.generation`. All updated (updated == ready == machine count, none unavailable; an
/// empty pool included): `Updated=True` "All nodes are updated with MachineConfig X",
/// `Updating=False` and `status.configuration` := `spec.configuration`; else `Updated=False` and
/// `Updating=True` "All nodes are updating to MachineConfig X" (paused: `Updating=False` "Pool is
/// paused; will not update to MachineConfig X"), `status.configuration` kept. `NodeDegraded`
/// lists each degraded node's reason, by node name (`Node <name> is reporting: <reason as Go's %q>`); `RenderDegraded` is kept as found; `Degraded` is their OR
/// (message: NodeDegraded's). Condition times change only on a status change, so calling this
/// again with a later `now` returns the same status.
pub fn pool_status(pool: &MachineConfigPool, nodes: &[&Node], keys: &Keys, now: Time) -> MachineConfigPoolStatus {
    pool_status_of(pool, &PoolTally::of(nodes, keys), now)
}

/// [`pool_status`] from the pool's tally (degraded nodes listed by name): O(degraded nodes).
pub fn pool_status_of(pool: &MachineConfigPool, tally: &PoolTally, now: Time) -> MachineConfigPoolStatus {
    let target = pool.spec.configuration.name.as_str();
    let desiring = tally.desiring(target);
    let machine_count = tally.members.len() as i32;
    let updated = desiring.done as i32;
    let ready = desiring.done_ready as i32;
    let unavailable = tally.unavailable as i32;
    let degraded_nodes: Vec<(&str, &str)> = tally
        .degraded
        .iter()
        .map(|(name, reason)| (name.as_str(), reason.as_str()))
        .collect();

    let mut status = pool.status.clone();
    status.observed_generation = pool.metadata.generation.unwrap_or(0);
    status.machine_count = machine_count;
    status.updated_machine_count = updated;
    status.ready_machine_count = ready;
    status.unavailable_machine_count = unavailable;
    status.degraded_machine_count = degraded_nodes.len() as i32;

    let conditions = &mut status.conditions;
    let all_updated = updated == machine_count && ready == machine_count && unavailable == 0;
    if all_updated {
        let msg = format!("All nodes are updated with MachineConfig {target}");
        set_condition(conditions, condition::UPDATED, ConditionStatus::True, "", &msg, &now);
        set_condition(conditions, condition::UPDATING, ConditionStatus::False, "", "", &now);
        status.configuration = pool.spec.configuration.clone();
    } else {
        set_condition(conditions, condition::UPDATED, ConditionStatus::False, "", "", &now);
        if pool.spec.paused {
            let msg = format!("Pool is paused; will not update to MachineConfig {target}");
            set_condition(conditions, condition::UPDATING, ConditionStatus::False, "", &msg, &now);
        } else {
            let msg = format!("All nodes are updating to MachineConfig {target}");
            set_condition(conditions, condition::UPDATING, ConditionStatus::True, "", &msg, &now);
        }
    }

    let node_degraded = !degraded_nodes.is_empty();
    let node_degraded_message = degraded_nodes
        .iter()
        .map(|(name, reason)| format!("Node {name} is reporting: {}", crate::gofmt::quote(reason)))
        .collect::<Vec<_>>()
        .join(", ");
    if node_degraded {
        let reason = format!("{} nodes are reporting degraded status on sync", degraded_nodes.len());
        set_condition(
            conditions,
            condition::NODE_DEGRADED,
            ConditionStatus::True,
            &reason,
            &node_degraded_message,
            &now,
        );
    } else {
        set_condition(
            conditions,
            condition::NODE_DEGRADED,
            ConditionStatus::False,
            "",
            "",
            &now,
        );
    }
    let render_degraded = pool.condition_status(condition::RENDER_DEGRADED) == "True";
    if node_degraded || render_degraded {
        let msg = if node_degraded {
            node_degraded_message.as_str()
        } else {
            ""
        };
        set_condition(conditions, condition::DEGRADED, ConditionStatus::True, "", msg, &now);
    } else {
        set_condition(conditions, condition::DEGRADED, ConditionStatus::False, "", "", &now);
    }
    status
}

#[cfg(test)]
mod tests;
