//! Reconcilers of the control plane: garbage collector, template (built-ins), render, node
//! lifecycle (node health from leases), rollout (node controller), MachineConfigNodes (`mcn`),
//! drain, pool status and the operator (node disruption policy status); `leader` records which
//! server runs them.
//!
//! Owns the reconcile loop. Each controller is a plan function over the projection (pure, run
//! on a snapshot of it) returning the writes to make, executed through the hub with the
//! controller's actor. Level-triggered and idempotent: a pass over an unchanged state plans
//! nothing. Phases run in order (render, rollout, drain, status), each planning on the state
//! the previous one left. It never asks why it was woken: any change, a retry tick (1 s) or the
//! resync tick (10 s) triggers a pass. A pass over objects unchanged since a pass that found
//! nothing to do is skipped ([`Memory`]): the plans are pure functions of the objects, so it
//! would find nothing again; the exceptions are time itself, a node lease expiring
//! (`lifecycle`) and a RolloutPolicy's window or bake time (`policy`, on the [`Clock`]), so
//! the loop also wakes then and runs that pass.

mod clock;
mod drain;
mod gc;
mod generated;
pub mod leader;
pub mod lifecycle;
mod mcn;
mod operator;
mod policy;
mod render;
mod rollout;
mod status;
pub mod template;

pub use clock::Clock;
pub use drain::{CommandEvictor, Evictor, NoEviction};

use crate::command::Hub;
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Settings of the controllers.
#[derive(Clone)]
pub struct ControllerConfig {
    /// Evicts a node's workloads during a drain (a no-op by default).
    pub evictor: Arc<dyn Evictor>,
    /// How long the render inputs (MachineConfigs, pools, and the objects of every generated
    /// kind: `render::inputs_fingerprint`) must stay unchanged before a pool is rendered:
    /// applying a directory of manifests then costs one rollout, not one per file. MCO waits
    /// 5 s (`renderDelay`, `pkg/controller/render/render_controller.go`).
    pub render_delay: Duration,
    /// The cluster values the template configs are rendered with (cluster DNS, domain).
    pub templates: crate::generate::templates::TemplateSettings,
    /// How long a node lease may go unrenewed before its node's Ready condition becomes
    /// `Unknown` (kube-controller-manager's `--node-monitor-grace-period`, 40 s:
    /// [`NODE_MONITOR_GRACE_PERIOD`]; `lifecycle`).
    pub node_monitor_grace_period: Duration,
    /// The time RolloutPolicy decisions read (windows, bake times, heal caps): the system's,
    /// or a manual [`Clock`] a test sets.
    pub clock: Clock,
}

/// Kubernetes' default node-monitor grace period: a node lease not renewed for 40 s (four
/// missed renewals) makes the node NotReady.
pub const NODE_MONITOR_GRACE_PERIOD: Duration = Duration::from_secs(40);

/// mco's render delay: long enough to coalesce a `kubectl apply -f dir/`, short enough to feel
/// immediate.
pub const RENDER_DELAY: Duration = Duration::from_millis(500);

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            evictor: Arc::new(NoEviction),
            render_delay: RENDER_DELAY,
            templates: Default::default(),
            node_monitor_grace_period: NODE_MONITOR_GRACE_PERIOD,
            clock: Clock::system(),
        }
    }
}

/// How often the controllers resync when nothing changed and nothing failed. Every change
/// wakes them at once; this only bounds how long a missed wake-up could go unnoticed.
pub const RESYNC: Duration = Duration::from_secs(10);

/// How soon a pass is retried while something it must do keeps failing outside the log (a
/// drain's eviction, a store that refuses writes): MCO's controllers requeue such work.
pub const RETRY: Duration = Duration::from_secs(1);

/// What the controllers remember between passes. Not state: a restart forgets it, which at
/// worst repeats a warning once.
#[derive(Debug, Default)]
pub struct Memory {
    /// Pools warned about `SelectingAll`, with their uid.
    selecting_all: std::collections::HashMap<String, String>,
    /// Set by a pass that left work to retry without a write to wake it (a failed eviction).
    retry: bool,
    /// The projection of the last pass that found nothing to do, and whether that pass ran
    /// the render controller: a pass over the same objects is skipped.
    settled: Option<(Arc<crate::state::State>, bool)>,
    /// The template settings of the template controller's last complete sync (`None` until
    /// its first: a start syncs, as MCO's controller does).
    templates_synced: Option<crate::generate::templates::TemplateSettings>,
    /// The registries error last logged by the generated-config controller (logged once until
    /// it changes or goes).
    registries_warned: Option<String>,
    /// The node leases' renewals as the lifecycle controller saw them, and the next expiry.
    leases: lifecycle::Observations,
    /// When time alone next changes a RolloutPolicy decision (a window opening or closing, a
    /// bake time ending, a heal leaving its cap's period): a pass then runs even over
    /// unchanged objects.
    policy_wake: Option<jiff::Timestamp>,
    /// The drain hook's evictions under way (`drain`): run off the pass, so that no
    /// controller after the drain controller (the pool status) waits for a hook.
    evictions: drain::Evictions,
}

/// Runs the controllers until `shutdown`.
pub async fn run(hub: Arc<Hub>, cfg: ControllerConfig, shutdown: CancellationToken) {
    let mut changes = hub.changes();
    let mut clock_changes = cfg.clock.watch();
    let mut memory = Memory::default();
    let mut inputs = None;
    let mut settled_at = tokio::time::Instant::now();
    loop {
        changes.borrow_and_update();
        if let Some(rx) = clock_changes.as_mut() {
            rx.borrow_and_update();
        }
        let fingerprint = render::inputs_fingerprint(&hub);
        if inputs != Some(fingerprint) {
            inputs = Some(fingerprint);
            settled_at = tokio::time::Instant::now() + cfg.render_delay;
        }
        let render_now = tokio::time::Instant::now() >= settled_at;
        let writes = reconcile_once(&hub, &cfg, render_now, &mut memory).await;
        // Another pass at once after writes, unless the store refuses them: a write that fails
        // without waiting (a deposed etcd writer's fence, the disk reserve) would otherwise
        // make this loop spin without yielding and starve the API on its worker.
        if writes > 0 && hub.store_fault().is_none() {
            tokio::task::yield_now().await;
            continue;
        }
        let retry = memory.retry || hub.store_fault().is_some();
        let wake = if !render_now {
            settled_at
        } else if retry {
            tokio::time::Instant::now() + RETRY
        } else {
            tokio::time::Instant::now() + RESYNC
        };
        // A node lease expiring is a change of time, not of objects: wake for it.
        let wake = memory.leases.next_expiry().map_or(wake, |t| wake.min(t));
        // So is a policy's window opening or its bake time ending.
        let wake = match memory.policy_wake.and_then(|t| cfg.clock.until(t)) {
            Some(d) => wake.min(tokio::time::Instant::now() + d),
            None => wake,
        };
        let clock_set = async {
            match clock_changes.as_mut() {
                Some(rx) => {
                    let _ = rx.changed().await;
                }
                None => std::future::pending().await,
            }
        };
        let evicted = memory.evictions.done.clone();
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = changes.changed() => {}
            _ = clock_set => {}
            _ = evicted.notified() => {}
            _ = tokio::time::sleep_until(wake) => {}
        }
    }
}

/// One full pass of every controller (the render controller only when `render` is set: its
/// inputs have settled); returns how many writes it made.
///
/// A pass is skipped (0 writes, O(number of kinds)) when no object changed since a pass that
/// wrote nothing, failed no write, left nothing to retry and met no store fault, with the
/// render controller run then if it is to run now: every plan is a pure function of the
/// objects (and of settings fixed at start), so that pass's answer stands. Anything that fails outside the
/// log (an eviction, a store refusing writes) keeps passes running until it succeeds.
pub async fn reconcile_once(hub: &Hub, cfg: &ControllerConfig, render: bool, memory: &mut Memory) -> usize {
    let before = hub.state();
    if let Some((then, rendered)) = &memory.settled {
        let lease_expired = memory.leases.due(tokio::time::Instant::now());
        let policy_due = memory.policy_wake.is_some_and(|t| cfg.clock.now() >= t);
        if (*rendered || !render) && before.same_objects(then) && !lease_expired && !policy_due {
            return 0;
        }
    }
    memory.settled = None;
    memory.retry = false;
    let pass = async {
        let inputs = render.then(|| render::inputs_fingerprint(hub));
        let mut writes = gc::reconcile(hub).await;
        writes += template::reconcile(hub, &cfg.templates, &mut memory.templates_synced).await;
        writes += generated::reconcile(hub, &cfg.templates, &mut memory.registries_warned).await;
        // A render input that changed during this pass (a generated MachineConfig just
        // written) waits for the render delay like any other change: the next pass starts it.
        if render && inputs == Some(render::inputs_fingerprint(hub)) {
            writes += render::reconcile(hub).await;
        }
        // Before the node controller: a node whose lease expired counts unavailable now.
        writes += lifecycle::reconcile(hub, cfg.node_monitor_grace_period, &mut memory.leases).await;
        // Before the node controller: the policies gate what it may target.
        let now = cfg.clock.now();
        let (policy_writes, gates) = policy::reconcile(hub, now).await;
        writes += policy_writes;
        memory.policy_wake = gates.wake;
        writes += rollout::reconcile(hub, &mut memory.selecting_all, &gates).await;
        // After the node controller (the desired config it just set), before the drain
        // controller (which writes the drain phases on the MCNs).
        writes += mcn::reconcile(hub).await;
        writes += drain::reconcile(hub, &cfg.evictor, &mut memory.retry, &mut memory.evictions).await;
        writes += status::reconcile(hub, &gates, now).await;
        writes += operator::reconcile(hub).await;
        (writes, PASS_WRITE_FAILURES.with(Cell::get) > 0)
    };
    let (writes, failed) = PASS_WRITE_FAILURES.scope(Cell::new(0), pass).await;
    if writes == 0 && !failed && !memory.retry && hub.store_fault().is_none() {
        // Planned nothing on `before` (or on a state with the same objects): it stands.
        memory.settled = Some((before, render));
    }
    writes
}

tokio::task_local! {
    /// Controller writes that failed during the current pass ([`reconcile_once`] scopes it; the
    /// controllers run inline in its task): a pass during which one failed does not settle, so
    /// the failed work is retried. Counted per pass, not per process: another hub's failures
    /// (tests run several at once) must not keep this one's passes from settling.
    static PASS_WRITE_FAILURES: Cell<u64>;
}

fn count_failure() {
    // Outside a pass (a controller driven on its own) there is nothing to keep from settling.
    let _ = PASS_WRITE_FAILURES.try_with(|c| c.set(c.get() + 1));
}

/// Logs a failed controller write; the next pass retries (level-triggered).
fn log_failure<T>(controller: &str, object: &str, r: Result<T, crate::command::CommandError>) -> usize {
    match r {
        Ok(_) => 1,
        Err(e) => {
            count_failure();
            tracing::warn!(controller, object, error = %e, "write failed; will retry");
            0
        }
    }
}

/// Logs the failed writes of a [`Hub::update_many`] (or the whole batch's failure); the next
/// pass retries (level-triggered). Returns the number of updates that succeeded.
fn log_batch(
    controller: &str,
    updates: &[crate::command::Update<'_>],
    r: Result<Vec<Result<serde_json::Value, crate::command::CommandError>>, crate::command::CommandError>,
) -> usize {
    match r {
        Ok(results) => updates
            .iter()
            .zip(results)
            .map(|(u, r)| log_failure(controller, &u.name, r))
            .sum(),
        Err(e) => {
            count_failure();
            tracing::warn!(controller, objects = updates.len(), error = %e, "batch write failed; will retry");
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Actor;
    use crate::model::Kind;
    use serde_json::json;

    fn worker_mc() -> serde_json::Value {
        json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
            "metadata": {"name": "99-worker-test", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
            "spec": {"kernelArguments": ["a=1"]}})
    }

    /// A settled fleet: every controller has done its work on a fresh hub.
    async fn settled() -> (Arc<Hub>, ControllerConfig, Memory) {
        let hub = Hub::open(crate::store::Store::temporary().unwrap(), crate::model::DEFAULT_GROUP).unwrap();
        let cfg = ControllerConfig::default();
        let mut memory = Memory::default();
        while reconcile_once(&hub, &cfg, true, &mut memory).await > 0 {}
        (hub, cfg, memory)
    }

    /// The skip is what it says: with the objects of a settled pass, a pass does not run even
    /// where it would write (here the settled mark is put on a state with work pending), an
    /// event that changes no object keeps it skipped, and a changed object runs it.
    #[tokio::test]
    async fn a_pass_over_the_objects_of_a_settled_pass_does_not_run() {
        let (hub, cfg, mut memory) = settled().await;
        let settled = memory.settled.clone().expect("a pass that wrote nothing settles");
        assert!(hub.state().same_objects(&settled.0));
        let worker = hub.state().pools["worker"].spec.configuration.name.clone();

        hub.create(Kind::MachineConfig, worker_mc(), &Actor::new("test"))
            .await
            .unwrap();
        memory.settled = Some((hub.state(), true));
        assert_eq!(reconcile_once(&hub, &cfg, true, &mut memory).await, 0, "skipped");
        assert_eq!(
            hub.state().pools["worker"].spec.configuration.name,
            worker,
            "nothing rendered"
        );
        let note = crate::event::EventType::PoolSelectingAll;
        hub.note(Kind::MachineConfigPool, "worker", note, "a note", &Actor::new("test"))
            .await
            .unwrap();
        assert_eq!(
            reconcile_once(&hub, &cfg, true, &mut memory).await,
            0,
            "a note changes no object"
        );
        // A pass that did not render may not stand for one that renders.
        memory.settled = Some((hub.state(), false));
        assert!(
            reconcile_once(&hub, &cfg, true, &mut memory).await > 0,
            "the new MachineConfig is rendered"
        );
        assert_ne!(hub.state().pools["worker"].spec.configuration.name, worker);
    }

    /// Write failures are counted per pass: another hub's failing pass, run at the same time in
    /// the same task, does not keep this hub's pass with nothing to do from settling (a
    /// process-wide count made these tests flaky when they ran together).
    #[tokio::test]
    async fn another_hubs_failing_writes_do_not_unsettle_a_pass() {
        let (a, cfg, mut ma) = settled().await;
        let (b, _, mut mb) = settled().await;
        b.create(Kind::MachineConfig, worker_mc(), &Actor::new("test"))
            .await
            .unwrap();
        b.set_space_reserve(std::path::Path::new("/"), u64::MAX);
        ma.settled = None;
        let (wb, wa) = tokio::join!(
            reconcile_once(&b, &cfg, true, &mut mb),
            reconcile_once(&a, &cfg, true, &mut ma)
        );
        assert_eq!((wa, wb), (0, 0), "b refused, a idle");
        assert!(mb.settled.is_none(), "b's writes failed");
        assert!(ma.settled.is_some(), "a had nothing to do and failed nothing");
    }

    /// The mechanism itself, deterministically: a failure counted by another pass while this
    /// one runs (its scope polled inside this one's) is that pass's, not this one's; a failure
    /// of this pass is its own. (The `join!` test above cannot force the interleaving.)
    #[tokio::test]
    async fn a_write_failure_counts_in_its_own_pass_only() {
        let (mine, other) = PASS_WRITE_FAILURES
            .scope(Cell::new(0), async {
                let other = PASS_WRITE_FAILURES
                    .scope(Cell::new(0), async {
                        count_failure();
                        PASS_WRITE_FAILURES.with(Cell::get)
                    })
                    .await;
                (PASS_WRITE_FAILURES.with(Cell::get), other)
            })
            .await;
        assert_eq!((mine, other), (0, 1));
        let mine = PASS_WRITE_FAILURES
            .scope(Cell::new(0), async {
                count_failure();
                PASS_WRITE_FAILURES.with(Cell::get)
            })
            .await;
        assert_eq!(mine, 1);
        count_failure(); // outside any pass: nothing to count, no panic
    }

    /// A pass whose writes fail (the store refusing them) does not settle, so the work is
    /// done once the store takes writes again, with no object changed meanwhile.
    #[tokio::test]
    async fn a_pass_whose_writes_fail_does_not_settle() {
        let (hub, cfg, mut memory) = settled().await;
        let worker = hub.state().pools["worker"].spec.configuration.name.clone();
        hub.create(Kind::MachineConfig, worker_mc(), &Actor::new("test"))
            .await
            .unwrap();
        hub.set_space_reserve(std::path::Path::new("/"), u64::MAX);
        assert_eq!(
            reconcile_once(&hub, &cfg, true, &mut memory).await,
            0,
            "every write refused"
        );
        assert!(memory.settled.is_none(), "a pass with failed writes does not settle");
        hub.set_space_reserve(std::path::Path::new("/"), 0);
        assert!(reconcile_once(&hub, &cfg, true, &mut memory).await > 0, "retried");
        assert_ne!(hub.state().pools["worker"].spec.configuration.name, worker);
    }
}
