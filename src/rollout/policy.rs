//! RolloutPolicy decisions for one pool: which of its nodes may be newly targeted now
//! (maintenance windows, canary waves, bake times), when the policy pauses the pool itself (a
//! failed canary) or resumes it (the failed target abandoned), which stuck nodes it heals, and
//! the condition the pool shows.
//!
//! Owns the policy's rules and its admission ([`validate`]). The decision is a function of the
//! pool, its nodes, the policy's own record of what it decided before ([`PoolProgress`]) and
//! `now`: level-triggered, it reaches the same answer from the same inputs at any pass, and it
//! says when time alone would change it ([`PoolDecision::wake`]). Pure: no IO, no clock.
//!
//! Canary size: a count, or a percentage of the pool's nodes rounded up, as Kubernetes scales
//! the maxUnavailable of a DaemonSet and of a PodDisruptionBudget
//! (`intstr.GetScaledValueFromIntOrPercent(.., roundUp=true)`,
//! `k8s.io/apimachinery/pkg/util/intstr/intstr.go`; `pkg/controller/daemon/util`): a canary
//! wave exists to be non-empty, so `10%` of 3 nodes is 1 node, not 0. (MCO's own
//! maxUnavailable rounds down, then raises 0 to 1: [`super::max_unavailable`].)

use super::window::{self, Window, WindowState};
use super::{is_degraded_state, sort_nodes};
use crate::model::{
    invalid, selector_matches, validate_label_selector, validate_object_meta, IntOrString, Keys, MachineConfigPool,
    Node, NodeAnnotations, NodeHeals, NodeState, PoolProgress, RolloutPolicy,
};
use crate::validation::FieldError;
use jiff::{SignedDuration, Timestamp};
use std::collections::BTreeSet;

/// Heals of one node per period when `maxHealsPerNode` is absent.
pub const DEFAULT_MAX_HEALS: u32 = 3;
/// The heal cap's period when `period` is absent.
pub const DEFAULT_HEAL_PERIOD: SignedDuration = SignedDuration::from_hours(1);

/// A policy's spec, parsed.
#[derive(Clone, Debug, Default)]
pub struct Parsed {
    pub windows: Vec<Window>,
    /// The canary size and bake time.
    pub canary: Option<(IntOrString, SignedDuration)>,
    /// At most this many heals per node per period.
    pub heal: Option<(u32, SignedDuration)>,
}

/// Parses and checks a RolloutPolicy's spec; every error names its field.
pub fn parse(p: &RolloutPolicy) -> Result<Parsed, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut out = Parsed::default();
    for (i, w) in p.spec.maintenance_windows.iter().enumerate() {
        match Window::parse(w, &format!("spec.maintenanceWindows[{i}]")) {
            Ok(w) => out.windows.push(w),
            Err(e) => errors.extend(e),
        }
    }
    if let Some(c) = &p.spec.canary {
        let size = c.size.clone().unwrap_or(IntOrString::Int(1));
        let shown = match &size {
            IntOrString::Int(i) => i.to_string(),
            IntOrString::String(s) => s.clone(),
        };
        // A wave exists to be non-empty and a part of the pool: a count of at least 1, a
        // percentage from 1% to 100% (Kubernetes' `IsNotMoreThan100Percent` wording).
        let rule = match (&size, canary_count(&size, 100)) {
            (_, Err(e)) => Some(e),
            (IntOrString::Int(i), _) if *i < 1 => Some("must be greater than or equal to 1".to_string()),
            (IntOrString::String(_), Ok(0)) => Some("must be greater than or equal to 1%".to_string()),
            (IntOrString::String(_), Ok(p)) if p > 100 => Some("must not be greater than 100%".to_string()),
            _ => None,
        };
        if let Some(rule) = rule {
            errors.push(invalid("spec.canary.size", &shown, &rule));
        }
        let bake = optional_duration(c.bake_time.as_deref(), "spec.canary.bakeTime", true, &mut errors);
        out.canary = Some((size, bake.unwrap_or(SignedDuration::ZERO)));
    }
    if let Some(h) = p.spec.self_healing.as_ref().filter(|h| h.enabled) {
        let max = h.max_heals_per_node.unwrap_or(DEFAULT_MAX_HEALS as i32);
        if max < 1 {
            errors.push(invalid(
                "spec.selfHealing.maxHealsPerNode",
                &max.to_string(),
                "must be greater than or equal to 1",
            ));
        }
        let period = optional_duration(h.period.as_deref(), "spec.selfHealing.period", false, &mut errors);
        out.heal = Some((max.max(1) as u32, period.unwrap_or(DEFAULT_HEAL_PERIOD)));
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

fn optional_duration(
    s: Option<&str>,
    field: &str,
    zero_ok: bool,
    errors: &mut Vec<FieldError>,
) -> Option<SignedDuration> {
    let s = s?;
    match window::parse_go_duration(s) {
        Ok(d) if d.is_negative() || (!zero_ok && d.is_zero()) => {
            let rule = if zero_ok {
                "must be greater than or equal to 0"
            } else {
                "must be greater than 0"
            };
            errors.push(invalid(field, s, rule));
            None
        }
        Ok(d) => Some(d),
        Err(e) => {
            errors.push(invalid(field, s, &e));
            None
        }
    }
}

/// Admission of a RolloutPolicy: Kubernetes' metadata rules, `spec.poolSelector` as a label
/// selector, and every rule of [`parse`].
pub fn validate(p: &RolloutPolicy) -> Vec<FieldError> {
    let mut errors = validate_object_meta(&p.metadata);
    errors.extend(validate_label_selector(
        p.spec.pool_selector.as_ref(),
        "spec.poolSelector",
    ));
    if let Err(e) = parse(p) {
        errors.extend(e);
    }
    errors
}

/// The canary count for a pool of `total` nodes: an integer as is; `"N%"` as N percent of
/// `total` rounded up (Kubernetes' `GetScaledValueFromIntOrPercent` with `roundUp`); intstr's
/// errors for other strings.
pub fn canary_count(size: &IntOrString, total: usize) -> Result<usize, String> {
    match size {
        IntOrString::Int(i) => Ok((*i).max(0) as usize),
        IntOrString::String(s) => {
            let Some(n) = s.strip_suffix('%') else {
                return Err("invalid type: string is not a percentage".into());
            };
            let v: i64 = n
                .parse()
                .map_err(|_| format!("invalid value for IntOrString: invalid value {s:?}"))?;
            if v < 0 {
                return Err("must be greater than or equal to 0%".into());
            }
            Ok(((v as u128 * total as u128).div_ceil(100)) as usize)
        }
    }
}

/// The phases a [`PoolProgress`] records.
pub mod phase {
    /// Every node is on the target.
    pub const DONE: &str = "Done";
    /// Outside every maintenance window before the canaries started: nothing is targeted
    /// until the next window.
    pub const WAITING: &str = "Waiting";
    /// The canaries are updating.
    pub const CANARY: &str = "Canary";
    /// Every canary is healthy; the bake time runs.
    pub const BAKING: &str = "Baking";
    /// The canaries passed (or there are none): the rest of the pool is targeted.
    pub const PROCEEDING: &str = "Proceeding";
    /// A canary failed; the policy paused the pool.
    pub const CANARY_FAILED: &str = "CanaryFailed";
}

/// What one pool's governing policy decides at `now`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PoolDecision {
    /// `None`: targeting is not restricted; `Some(set)`: only these nodes may be newly targeted
    /// (empty: none).
    pub allowed: Option<BTreeSet<String>>,
    /// The record to keep for the next pass.
    pub progress: PoolProgress,
    /// Pause the pool, for this reason.
    pub pause: Option<String>,
    /// Resume the pool the policy paused, for this reason.
    pub resume: Option<String>,
    /// Nodes to return to the pool's target, each with the reason.
    pub heals: Vec<(String, String)>,
    /// The pool condition: held, reason, message.
    pub condition: (bool, &'static str, String),
    /// The next time at which time alone changes this decision.
    pub wake: Option<Timestamp>,
}

/// One pool as the policy sees it.
pub struct PoolInput<'a> {
    pub pool: &'a str,
    /// `spec.configuration.name`.
    pub target: &'a str,
    /// `status.configuration.name`: the render the pool was last Updated on, the one a
    /// rollback returns to.
    pub previous: &'a str,
    pub paused: bool,
    /// The pool's nodes that have a config (fresh nodes are seeded apart, never held).
    pub nodes: Vec<&'a Node>,
}

/// Whether the kubelet reports the node Ready (condition `Ready` is `True`), cordoned or not.
pub fn kubelet_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn name(n: &Node) -> &str {
    n.metadata.name.as_deref().unwrap_or("")
}

/// Why a canary failed on `target`, if it did: Degraded or Unreconcilable while targeting it
/// (a drift is a Degraded with the mismatch as its reason), or NotReady once Done on it. A
/// canary that is only updating (cordoned, rebooting) has not failed.
fn canary_failure(n: &Node, keys: &Keys, target: &str) -> Option<String> {
    let a = NodeAnnotations::view(n, keys);
    if a.desired_config != target {
        return None;
    }
    if is_degraded_state(a.state) {
        return Some(format!(
            "canary {} is {} on {target}: {}",
            name(n),
            a.state,
            crate::gofmt::quote(a.reason)
        ));
    }
    let done = a.current_config == target && a.state == NodeState::Done.as_str();
    (done && !kubelet_ready(n)).then(|| format!("canary {} is NotReady after updating to {target}", name(n)))
}

/// The render whose failed canary made the policy pause the pool (its record `prior`), when
/// the pool, still `paused`, now targets another `target` (a rollback, the bad MachineConfig
/// deleted): the policy resumes it. What [`decide`] does and a preview shows.
pub fn resumed_from<'a>(prior: &'a PoolProgress, paused: bool, target: &str) -> Option<&'a str> {
    prior.paused.as_deref().filter(|failed| paused && *failed != target)
}

/// The heals of `node` (from the policy's record `heals`) that still count against its cap at
/// `now`: those less than `period` ago.
pub fn recent_heals(heals: &[NodeHeals], node: &str, period: SignedDuration, now: Timestamp) -> Vec<Timestamp> {
    heals
        .iter()
        .filter(|h| h.node == node)
        .flat_map(|h| h.times.iter().filter_map(|t| t.parse::<Timestamp>().ok()))
        .filter(|t| t.checked_add(period).is_ok_and(|end| end > now))
        .collect()
}

/// A node self-healing returns to `target`: Degraded (or Unreconcilable) on a render that is
/// neither its current config nor `target` (its failed update's target was abandoned).
pub fn is_stuck(n: &Node, keys: &Keys, target: &str) -> bool {
    let a = NodeAnnotations::view(n, keys);
    is_degraded_state(a.state) && a.desired_config != a.current_config && a.desired_config != target
}

/// Done on `target`, Ready (not cordoned) and not Degraded.
fn canary_healthy(n: &Node, keys: &Keys, target: &str) -> bool {
    super::is_node_updated(n, keys, target) && crate::model::node_is_ready(n)
}

/// The pool condition's words for a window state: empty when the policy has no windows,
/// `inside a maintenance window until T`, `outside every maintenance window; the next opens at
/// Z` (Z in the window's time zone), or that no schedule matches again.
pub fn window_text(windows: &WindowState) -> String {
    match windows {
        WindowState::Always => String::new(),
        WindowState::Open { closes } => format!("inside a maintenance window until {closes}"),
        WindowState::Closed { opens: Some(z) } => {
            format!("outside every maintenance window; the next opens at {z}")
        }
        WindowState::Closed { opens: None } => {
            "outside every maintenance window; no schedule matches again".to_string()
        }
    }
}

/// The policy governing `pool` among `policies`, parsed: the first by name whose
/// `spec.poolSelector` selects the pool's labels, skipping any that do not parse (admission
/// refuses those; one stored before a rule existed governs nothing). What the RolloutPolicy
/// controller applies and what a preview shows.
pub fn governing<'a>(policies: &'a [RolloutPolicy], pool: &MachineConfigPool) -> Option<(&'a RolloutPolicy, Parsed)> {
    let mut sorted: Vec<&RolloutPolicy> = policies.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    sorted
        .into_iter()
        .filter(|p| selector_matches(p.spec.pool_selector.as_ref(), &pool.metadata))
        .find_map(|p| parse(p).ok().map(|spec| (p, spec)))
}

/// The `k` canaries of a rollout to `target`: only nodes the change still has to reach (a
/// node already Done on the target proves nothing) and that are not Degraded already (their
/// state is another change's failure, which would fail the canary before it ran; self-healing
/// returns such a node), those already targeting it first (they are on their way), then the
/// nodes MCO would take as candidates (Ready, not cordoned) in its candidate order, then the
/// rest in that order.
pub fn choose_canaries(nodes: &[&Node], keys: &Keys, target: &str, k: usize) -> Vec<String> {
    let mut order: Vec<&Node> = nodes
        .iter()
        .copied()
        .filter(|n| !super::is_node_updated(n, keys, target))
        .filter(|n| !is_degraded_state(NodeAnnotations::view(n, keys).state))
        .collect();
    sort_nodes(&mut order);
    order.sort_by_key(|n| {
        (
            NodeAnnotations::view(n, keys).desired_config != target,
            !crate::model::node_is_ready(n),
        )
    });
    order.iter().take(k).map(|n| name(n).to_string()).collect()
}

fn parse_time(s: Option<&str>) -> Option<Timestamp> {
    s?.parse().ok()
}

/// The decision of policy `policy` (its parsed spec `spec`) for one pool at `now`. `prior` is
/// the policy's record for this pool from its last pass, `heals` its recent heals.
pub fn decide(
    policy: &str,
    spec: &Parsed,
    input: &PoolInput,
    keys: &Keys,
    prior: Option<&PoolProgress>,
    heals: &[NodeHeals],
    now: Timestamp,
) -> PoolDecision {
    let target = input.target;
    let pool = input.pool;
    let mut d = PoolDecision::default();
    let mut progress = match prior {
        Some(p) if p.target == target => p.clone(),
        _ => PoolProgress {
            pool: pool.to_string(),
            target: target.to_string(),
            ..Default::default()
        },
    };
    if let Some(failed) = prior.and_then(|p| resumed_from(p, input.paused, target)) {
        d.resume = Some(format!(
            "pool {pool} now targets {target}: resuming it, paused by rolloutpolicy/{policy} for {failed}'s failed canary"
        ));
    }
    let paused = input.paused && d.resume.is_none();
    let mut wake: Vec<Timestamp> = Vec::new();

    // Windows.
    let windows = window::state(&spec.windows, now);
    let window_text = window_text(&windows);
    match &windows {
        WindowState::Open { closes } => wake.push(*closes),
        WindowState::Closed { opens: Some(z) } => wake.push(z.timestamp()),
        _ => {}
    }
    let open = !matches!(windows, WindowState::Closed { .. });
    progress.next_window = match &windows {
        WindowState::Closed { opens: Some(z) } => Some(z.to_string()),
        _ => None,
    };

    let needing: Vec<&Node> = input
        .nodes
        .iter()
        .copied()
        .filter(|n| NodeAnnotations::view(n, keys).desired_config != target)
        .collect();
    let all_done = input.nodes.iter().all(|n| super::is_node_updated(n, keys, target));

    // Canaries.
    let mut held_by: Option<(&'static str, String)> = None;
    let mut allowed: Option<BTreeSet<String>> = None;
    match &spec.canary {
        Some((size, bake)) if progress.phase != phase::PROCEEDING && progress.phase != phase::DONE => {
            if progress.canaries.is_empty() && !needing.is_empty() {
                progress.canaries = choose_canaries(
                    &input.nodes,
                    keys,
                    target,
                    canary_count(size, input.nodes.len()).unwrap_or(1),
                );
            }
            let canaries: Vec<&Node> = input
                .nodes
                .iter()
                .copied()
                .filter(|n| progress.canaries.iter().any(|c| c == name(n)))
                .collect();
            let failure = canaries.iter().find_map(|n| canary_failure(n, keys, target));
            if progress.paused.is_some() && !input.paused {
                // A user resumed the pool after the policy paused it: theirs is the last word,
                // and a later pause is theirs too, which the policy never lifts.
                progress.phase = phase::PROCEEDING.into();
                progress.paused = None;
            } else if let Some(why) = failure.or_else(|| {
                progress.paused.as_ref().map(|_| {
                    format!(
                        "a canary failed on {target} (the reason is in the history: mco history --actor rolloutpolicy/{policy}); the pool stays paused until it is resumed (mco rollout resume mcp {pool})"
                    )
                })
            }) {
                if progress.paused.is_none() {
                    progress.paused = Some(target.to_string());
                    d.pause = Some(format!(
                        "{why}; rolloutpolicy/{policy} paused pool {pool}, nothing else is targeted; to roll back: mco rollback mcp {pool} --to {}",
                        input.previous
                    ));
                }
                progress.phase = phase::CANARY_FAILED.into();
                allowed = Some(BTreeSet::new());
                let msg = format!(
                    "{why}; pool paused by rolloutpolicy/{policy}; to roll back: mco rollback mcp {pool} --to {}",
                    input.previous
                );
                held_by = Some(("CanaryFailed", msg));
            } else if !canaries.is_empty() && canaries.iter().all(|n| canary_healthy(n, keys, target)) {
                let since = parse_time(progress.canaries_healthy_since.as_deref()).unwrap_or(now);
                progress.canaries_healthy_since = Some(since.to_string());
                let until = since.checked_add(*bake).unwrap_or(since);
                if now >= until {
                    progress.phase = phase::PROCEEDING.into();
                } else {
                    progress.phase = phase::BAKING.into();
                    wake.push(until);
                    allowed = Some(BTreeSet::new());
                    let names = progress.canaries.join(", ");
                    held_by = Some((
                        "CanaryBaking",
                        format!("canaries {names} healthy on {target} since {since}; the rest of the pool follows at {until}"),
                    ));
                }
            } else if canaries.is_empty() {
                progress.phase = phase::PROCEEDING.into();
            } else {
                progress.canaries_healthy_since = None;
                progress.phase = phase::CANARY.into();
                allowed = Some(progress.canaries.iter().cloned().collect());
                let names = progress.canaries.join(", ");
                held_by = Some((
                    "CanaryUpdating",
                    format!("waiting for canaries {names} to be Done, Ready and not Degraded on {target}"),
                ));
            }
        }
        Some(_) => {}
        None => progress.phase = phase::PROCEEDING.into(),
    }
    if all_done && progress.phase != phase::CANARY_FAILED {
        progress.phase = phase::DONE.into();
        allowed = None;
        held_by = None;
    }
    if !open {
        allowed = Some(BTreeSet::new());
        if held_by.as_ref().is_none_or(|(r, _)| *r != "CanaryFailed") {
            held_by = Some(("OutsideMaintenanceWindow", window_text.clone()));
        }
        // Nothing of this rollout started yet: it waits for the window, whatever comes next.
        let started = input.nodes.iter().any(|n| {
            let a = NodeAnnotations::view(n, keys);
            a.desired_config == target && a.current_config != target
        });
        if !started && matches!(progress.phase.as_str(), "" | phase::CANARY) {
            progress.phase = phase::WAITING.into();
        }
    }

    // Self-healing: through the normal rollout, so not while paused or outside a window.
    let mut capped: Vec<String> = Vec::new();
    if let Some((max, period)) = spec.heal {
        let recent = |node: &str| recent_heals(heals, node, period, now);
        for n in &input.nodes {
            if !is_stuck(n, keys, target) {
                continue;
            }
            let a = NodeAnnotations::view(n, keys);
            let times = recent(name(n));
            let next = times.iter().min().and_then(|oldest| oldest.checked_add(period).ok());
            wake.extend(next);
            if paused || !open {
                continue;
            }
            if times.len() >= max as usize {
                // Said in the condition, so a node left Degraded is not left unexplained.
                capped.push(format!(
                    "node {} stays {} on {}: its self-healing is at its cap ({} of at most {max} per {period:#}){}",
                    name(n),
                    a.state,
                    a.desired_config,
                    times.len(),
                    next.map(|t| format!(", the next heal at {t}")).unwrap_or_default()
                ));
                continue;
            }
            d.heals.push((
                name(n).to_string(),
                format!(
                    "self-healing by rolloutpolicy/{policy}: node {} is {} on {}, which is no longer pool {pool}'s target; returning it to {target} (heal {} of at most {max} per {period:#})",
                    name(n),
                    a.state,
                    a.desired_config,
                    times.len() + 1
                ),
            ));
        }
    }

    let held = !needing.is_empty()
        && match &allowed {
            None => false,
            Some(a) => needing.iter().any(|n| !a.contains(name(n))),
        };
    let with_capped = |msg: String| {
        if capped.is_empty() {
            msg
        } else {
            format!("{msg}; {}", capped.join("; "))
        }
    };
    d.condition = match held_by.filter(|_| held || progress.phase == phase::CANARY_FAILED) {
        Some((reason, msg)) => {
            let msg = if open || reason == "OutsideMaintenanceWindow" || window_text.is_empty() {
                msg
            } else {
                format!("{msg}; {window_text}")
            };
            (true, reason, with_capped(msg))
        }
        None => {
            let mut msg = format!("rolloutpolicy/{policy}: {} on {target}", progress.phase);
            if !window_text.is_empty() {
                msg = format!("{msg}; {window_text}");
            }
            (false, "NotHeld", with_capped(msg))
        }
    };
    d.allowed = allowed;
    d.progress = progress;
    d.wake = wake.into_iter().filter(|t| *t > now).min();
    d
}

#[cfg(test)]
mod tests;
