//! The daemon's phase machine: where the node is in its life cycle, and the only ways it moves.
//!
//! Owns the machine's values ([`Held`], [`Phase`], [`UpdateKind`], [`Cause`], [`Failure`],
//! [`Step`], [`Exit`]) and one transition method per edge of the machine, each asserting (in
//! debug builds) the phases that edge may leave, zincati's `transition not allowed` guard. Which
//! edge to take is the policy of [`super::agent`]; this file must not talk to the server or
//! the host.

use super::apply::WriteMode;
use crate::client::ClientError;
use crate::disruption::Plan;
use crate::model::{MachineConfig, ON_DISK_PREFIX, RECOVERY_HINT};
use std::sync::Arc;

/// Why [`super::run`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// The shutdown token was cancelled (never in the middle of an update).
    Shutdown,
    /// A reboot was requested from the host; the process should exit with
    /// [`super::REBOOT_EXIT_CODE`].
    Reboot,
}

/// A rendered config as the agent holds it between passes: its name and the MachineConfig as
/// compact JSON, decoded again for each use (a validation, a plan, a write). Held decoded, the
/// config's Ignition section would stay an order-preserving `serde_json::Value` tree for as long
/// as the node is on it, about ten times the JSON's size (1,000 files: ~2 MiB against ~120 KiB;
/// issue 13, DESIGN.md section 8's ≤ 15 MiB daemon). Cloning shares the bytes.
#[derive(Clone)]
pub(super) struct Held {
    name: Arc<str>,
    json: Arc<[u8]>,
}

impl Held {
    pub(super) fn new(mc: &MachineConfig) -> Held {
        Held {
            name: mc.name().into(),
            // A MachineConfig decoded from JSON always encodes again.
            json: serde_json::to_vec(mc).expect("a MachineConfig encodes as JSON").into(),
        }
    }

    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// The MachineConfig again. Errors (as a Degraded reason): only if the bytes this agent
    /// encoded no longer decode, which would be a bug.
    pub(super) fn load(&self) -> Result<MachineConfig, String> {
        serde_json::from_slice(&self.json).map_err(|e| format!("decoding the held config {}: {e}", self.name))
    }
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Held({}, {} bytes)", self.name, self.json.len())
    }
}

/// Where the node is in its life cycle. One guarded handler per phase in `Agent::reconcile`
/// ([`super::agent`]); the phase changes only through the transition methods below.
#[derive(Clone, Debug)]
pub(super) enum Phase {
    /// Just started; `on_disk` is `/etc/machine-config-daemon/currentconfig` when present, or
    /// the refusal to read it (read again at each pass until it succeeds).
    Starting { on_disk: Result<Option<Held>, String> },
    /// Nothing applied yet: waiting for the controller's `desiredConfig` (first boot).
    FirstBoot,
    /// Started on `current`: the boot check (validation, uncordon, Done) is pending.
    Booting { current: Held },
    /// On `current`, nothing in flight; the drift monitor runs.
    Idle { current: Held },
    /// Update to `desired` waits for the drain controller (`lastAppliedDrain == drain-<desired>`).
    Draining {
        current: Held,
        desired: Held,
        kind: UpdateKind,
        plan: Plan,
    },
    /// `config` is written; waiting for `lastAppliedDrain == uncordon-<config>` before Done.
    Uncordoning { config: Held },
}

/// Why an update runs, which decides how much it writes ([`UpdateKind::write_mode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum UpdateKind {
    /// desiredConfig differs from the config the node is on: changed units only.
    Diff,
    /// The force file was found (and consumed): every unit and dropin too.
    ForceFile,
}

impl UpdateKind {
    pub(super) fn write_mode(self, old: &MachineConfig) -> WriteMode<'_> {
        match self {
            UpdateKind::Diff => WriteMode::Update { old },
            UpdateKind::ForceFile => WriteMode::Forced { old },
        }
    }
}

/// MCO's `unexpected on-disk state validating against <config>: <detail>`, followed by
/// [`RECOVERY_HINT`]: the reason of a failed boot-time, pre-flight or recovery check, written
/// with MCO's Warning Event reason for that check (`event`: [`crate::model::ON_DISK_VALIDATION_FAILED`] or
/// [`crate::model::PREFLIGHT_CHECK_FAILED`]).
pub(super) fn on_disk_failure(config: &str, detail: &str, event: &'static str) -> Failure {
    Failure::OnDisk(format!("{ON_DISK_PREFIX}{config}: {detail}{RECOVERY_HINT}"), event)
}

/// Why the node's state is not Done, as far as the daemon caused it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cause {
    /// The drift monitor found a mismatch; cleared by a Clean report.
    Drift,
    /// An update or check failed; retried with backoff.
    Failure,
    /// The reconcilability check failed; retried with backoff.
    Unreconcilable,
}

/// A failed pass: what goes into the `state` and `reason` annotations.
#[derive(Debug)]
pub(super) enum Failure {
    Degraded(String),
    Unreconcilable(String),
    /// Degraded by a failed on-disk check: the reason, and MCO's Event reason for it.
    OnDisk(String, &'static str),
}

impl Failure {
    /// The reason text, whatever the kind of failure.
    pub(super) fn into_reason(self) -> String {
        match self {
            Failure::Degraded(r) | Failure::Unreconcilable(r) | Failure::OnDisk(r, _) => r,
        }
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Failure {
        Failure::Degraded(e.to_string())
    }
}

/// Whether a pass should continue with the new phase or wait for the next observation.
pub(super) enum Step {
    Continue,
    Wait,
    Exit(Exit),
}

/// The transitions, one per edge. Each asserts the phases it leaves (debug builds only, so a
/// release build moves exactly as before): the edges below are all the agent takes.
impl Phase {
    /// Starting -> Booting: the on-disk `currentconfig` (or, without one, the `currentConfig`
    /// annotation) names the config the node booted into.
    pub(super) fn booted(&mut self, current: Held) {
        debug_assert!(
            matches!(self, Phase::Starting { .. }),
            "transition not allowed: {self:?} to Booting"
        );
        *self = Phase::Booting { current };
    }

    /// Starting -> FirstBoot: no config on disk nor in the annotations.
    pub(super) fn first_boot(&mut self) {
        debug_assert!(
            matches!(self, Phase::Starting { .. }),
            "transition not allowed: {self:?} to FirstBoot"
        );
        *self = Phase::FirstBoot;
    }

    /// FirstBoot -> Idle: the first config is written and the node is Done on it.
    pub(super) fn first_boot_done(&mut self, current: Held) {
        debug_assert!(
            matches!(self, Phase::FirstBoot),
            "transition not allowed: {self:?} to Idle"
        );
        *self = Phase::Idle { current };
    }

    /// Booting -> Uncordoning: the boot check passed and the node stays on `config`.
    pub(super) fn boot_checked(&mut self, config: Held) {
        debug_assert!(
            matches!(self, Phase::Booting { .. }),
            "transition not allowed: {self:?} to Uncordoning"
        );
        *self = Phase::Uncordoning { config };
    }

    /// Booting -> Idle: the boot check passed and another config is desired (boot resync).
    pub(super) fn boot_resync(&mut self, current: Held) {
        debug_assert!(
            matches!(self, Phase::Booting { .. }),
            "transition not allowed: {self:?} to Idle"
        );
        *self = Phase::Idle { current };
    }

    /// Idle -> Uncordoning: an update abandoned after its drain (desiredConfig set back on a
    /// Degraded node) uncordons before Done.
    pub(super) fn abandoned(&mut self, config: Held) {
        debug_assert!(
            matches!(self, Phase::Idle { .. }),
            "transition not allowed: {self:?} to Uncordoning"
        );
        *self = Phase::Uncordoning { config };
    }

    /// Idle -> Draining: an update planned with a drain waits for the drain controller.
    pub(super) fn draining(&mut self, current: Held, desired: Held, plan: Plan) {
        debug_assert!(
            matches!(self, Phase::Idle { .. }),
            "transition not allowed: {self:?} to Draining"
        );
        *self = Phase::Draining {
            current,
            desired,
            kind: UpdateKind::Diff,
            plan,
        };
    }

    /// Booting, Idle, Draining or Uncordoning -> Draining: the force file's update (or the
    /// resumption of an interrupted write), which drains and reboots.
    pub(super) fn forced(&mut self, current: Held, desired: Held) {
        debug_assert!(
            self.config().is_some(),
            "transition not allowed: {self:?} to a forced Draining"
        );
        *self = Phase::Draining {
            current,
            desired,
            kind: UpdateKind::ForceFile,
            plan: Plan::reboot(),
        };
    }

    /// Draining -> Draining: a forced update (its force file consumed) follows a changed
    /// desiredConfig.
    pub(super) fn retargeted(&mut self, current: Held, desired: Held, plan: Plan) {
        debug_assert!(
            matches!(
                self,
                Phase::Draining {
                    kind: UpdateKind::ForceFile,
                    ..
                }
            ),
            "transition not allowed: {self:?} to a retargeted Draining"
        );
        *self = Phase::Draining {
            current,
            desired,
            kind: UpdateKind::ForceFile,
            plan,
        };
    }

    /// Draining -> Idle: desiredConfig changed while an update waited for its drain; the next
    /// pass plans again from `current`.
    pub(super) fn drain_abandoned(&mut self, current: Held) {
        debug_assert!(
            matches!(self, Phase::Draining { .. }),
            "transition not allowed: {self:?} to Idle"
        );
        *self = Phase::Idle { current };
    }

    /// Draining -> Uncordoning: a drained rebootless update wrote `config`.
    pub(super) fn written(&mut self, config: Held) {
        debug_assert!(
            matches!(self, Phase::Draining { .. }),
            "transition not allowed: {self:?} to Uncordoning"
        );
        *self = Phase::Uncordoning { config };
    }

    /// Idle -> Idle: an update without drain nor reboot wrote `current` and is Done on it.
    pub(super) fn written_rebootless(&mut self, current: Held) {
        debug_assert!(
            matches!(self, Phase::Idle { .. }),
            "transition not allowed: {self:?} to Idle"
        );
        *self = Phase::Idle { current };
    }

    /// Uncordoning -> Idle: the uncordon is done and the node is Done on `current`.
    pub(super) fn uncordoned(&mut self, current: Held) {
        debug_assert!(
            matches!(self, Phase::Uncordoning { .. }),
            "transition not allowed: {self:?} to Idle"
        );
        *self = Phase::Idle { current };
    }

    /// Idle or Draining -> Idle: a failed write was rolled back to `current`.
    pub(super) fn rolled_back(&mut self, current: Held) {
        debug_assert!(
            matches!(self, Phase::Idle { .. } | Phase::Draining { .. }),
            "transition not allowed: {self:?} to Idle"
        );
        *self = Phase::Idle { current };
    }

    /// The config the node is on (or has written, while uncordoning), in every phase that has
    /// one: the `old` side of a forced update.
    pub(super) fn config(&self) -> Option<Held> {
        match self {
            Phase::Booting { current } | Phase::Idle { current } | Phase::Draining { current, .. } => {
                Some(current.clone())
            }
            Phase::Uncordoning { config } => Some(config.clone()),
            Phase::Starting { .. } | Phase::FirstBoot => None,
        }
    }

    /// The config the node runs on while nothing is in flight (Booting, Idle): the one the drift
    /// monitor watches and a re-registered Node carries.
    pub(super) fn settled(&self) -> Option<&Held> {
        match self {
            Phase::Idle { current } | Phase::Booting { current } => Some(current),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn held(name: &str) -> Held {
        Held::new(&crate::daemon::test_support::mc(
            name,
            json!({"ignition": {"version": "3.4.0"}}),
        ))
    }

    fn starting() -> Phase {
        Phase::Starting { on_disk: Ok(None) }
    }

    /// The phase's name and the configs it holds, for comparing phases.
    fn shape(p: &Phase) -> (&'static str, Vec<String>) {
        let names = |hs: &[&Held]| hs.iter().map(|h| h.name().to_string()).collect();
        match p {
            Phase::Starting { .. } => ("Starting", vec![]),
            Phase::FirstBoot => ("FirstBoot", vec![]),
            Phase::Booting { current } => ("Booting", names(&[current])),
            Phase::Idle { current } => ("Idle", names(&[current])),
            Phase::Draining {
                current,
                desired,
                kind: UpdateKind::Diff,
                ..
            } => ("Draining", names(&[current, desired])),
            Phase::Draining { current, desired, .. } => ("Draining(forced)", names(&[current, desired])),
            Phase::Uncordoning { config } => ("Uncordoning", names(&[config])),
        }
    }

    fn is(p: &Phase, name: &'static str, configs: &[&str]) {
        assert_eq!(shape(p), (name, configs.iter().map(|c| c.to_string()).collect()));
    }

    #[test]
    fn first_boot_then_a_drained_rebootless_update() {
        let mut p = starting();
        assert!(p.config().is_none() && p.settled().is_none());
        p.first_boot();
        is(&p, "FirstBoot", &[]);
        assert!(p.config().is_none());
        p.first_boot_done(held("r1"));
        is(&p, "Idle", &["r1"]);
        assert_eq!(p.settled().map(Held::name), Some("r1"));
        p.draining(held("r1"), held("r2"), Plan::reboot());
        is(&p, "Draining", &["r1", "r2"]);
        assert_eq!(p.config().as_ref().map(Held::name), Some("r1"));
        assert!(p.settled().is_none());
        p.written(held("r2"));
        is(&p, "Uncordoning", &["r2"]);
        assert_eq!(p.config().as_ref().map(Held::name), Some("r2"));
        p.uncordoned(held("r2"));
        is(&p, "Idle", &["r2"]);
    }

    #[test]
    fn a_boot_completes_or_resyncs_to_an_update() {
        let mut p = starting();
        p.booted(held("r1"));
        is(&p, "Booting", &["r1"]);
        assert_eq!(p.settled().map(Held::name), Some("r1"));
        p.boot_checked(held("r1"));
        is(&p, "Uncordoning", &["r1"]);
        p.uncordoned(held("r1"));
        is(&p, "Idle", &["r1"]);

        let mut p = starting();
        p.booted(held("r1"));
        p.boot_resync(held("r1"));
        is(&p, "Idle", &["r1"]);
        p.written_rebootless(held("r2"));
        is(&p, "Idle", &["r2"]);
    }

    #[test]
    fn aborts_return_to_idle_on_the_current_config() {
        // desiredConfig changed while draining
        let mut p = Phase::Idle { current: held("r1") };
        p.draining(held("r1"), held("r2"), Plan::reboot());
        p.drain_abandoned(held("r1"));
        is(&p, "Idle", &["r1"]);
        // a failed write, from Idle (no drain) and from Draining
        p.rolled_back(held("r1"));
        is(&p, "Idle", &["r1"]);
        p.draining(held("r1"), held("r2"), Plan::reboot());
        p.rolled_back(held("r1"));
        is(&p, "Idle", &["r1"]);
        // an update abandoned after its drain uncordons first
        p.abandoned(held("r1"));
        is(&p, "Uncordoning", &["r1"]);
        p.uncordoned(held("r1"));
        is(&p, "Idle", &["r1"]);
    }

    #[test]
    fn the_force_file_drains_from_every_phase_with_a_config() {
        let phases = [
            Phase::Booting { current: held("r1") },
            Phase::Idle { current: held("r1") },
            Phase::Draining {
                current: held("r1"),
                desired: held("r2"),
                kind: UpdateKind::Diff,
                plan: Plan::reboot(),
            },
            Phase::Uncordoning { config: held("r1") },
        ];
        for mut p in phases {
            p.forced(held("r1"), held("r3"));
            is(&p, "Draining(forced)", &["r1", "r3"]);
            let Phase::Draining { plan, .. } = &p else {
                unreachable!()
            };
            assert!(plan.reboots() && plan.drain);
            p.retargeted(held("r1"), held("r4"), Plan::reboot());
            is(&p, "Draining(forced)", &["r1", "r4"]);
            p.written(held("r4"));
            is(&p, "Uncordoning", &["r4"]);
        }
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "transition not allowed")]
    fn an_update_cannot_start_while_uncordoning() {
        let mut p = Phase::Uncordoning { config: held("r1") };
        p.draining(held("r1"), held("r2"), Plan::reboot());
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "transition not allowed")]
    fn the_force_file_needs_a_config() {
        let mut p = Phase::FirstBoot;
        p.forced(held("r1"), held("r1"));
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "transition not allowed")]
    fn only_a_forced_update_is_retargeted() {
        let mut p = Phase::Idle { current: held("r1") };
        p.draining(held("r1"), held("r2"), Plan::reboot());
        p.retargeted(held("r1"), held("r3"), Plan::reboot());
    }

    #[test]
    fn a_held_config_loads_as_the_machineconfig_it_holds() {
        let files: Vec<Value> = (0..50)
            .map(|i| json!({"path": format!("/etc/held/f{i}"), "mode": 420, "contents": {"source": format!("data:,{i}")}}))
            .collect();
        // Keys out of order: the held JSON keeps the Ignition section's order.
        let mut mc = crate::daemon::test_support::mc(
            "rendered-worker-1",
            json!({"storage": {"files": files}, "ignition": {"version": "3.4.0"}}),
        );
        mc.spec.kernel_arguments = vec!["nosmt".into()];
        let held = Held::new(&mc);
        assert_eq!(held.name(), "rendered-worker-1");
        let loaded = held.load().unwrap();
        assert_eq!(loaded, mc);
        assert_eq!(
            serde_json::to_string(&loaded.spec.config).unwrap(),
            serde_json::to_string(&mc.spec.config).unwrap()
        );
        // Clones share the bytes.
        assert!(Arc::ptr_eq(&held.json, &held.clone().json));
    }
}
