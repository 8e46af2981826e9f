//! The daemon's policy: one node, one server, level-triggered.
//!
//! Owns the decisions of the update protocol with the server (MCO `pkg/daemon/daemon.go`,
//! `update.go`; mco-facts 4.2, 4.3): the event loop ([`run`]) and one handler per phase, which
//! decide when to register, which node annotations to write (`state`, `reason`,
//! `currentConfig`, `desiredDrain`, `post-config-action`), the drain handshake with the drain
//! controller (`desiredDrain` / `lastAppliedDrain`), applying configs through [`super::apply`],
//! validation through [`super::validate`], drift through [`super::drift`], and the reboot exit.
//! The phases and their edges are [`super::phase`]; the wire side (registration, the node watch,
//! annotation patches, GETs) is [`super::node_api`]. It must not write node files itself, nor
//! decide rollout (which node gets which config).
//!
//! # Protocol
//! - Node lease: renew `kube-node-lease/<node>` once, then every
//!   [`DaemonConfig::lease_renew_interval`] while the daemon runs ([`super::lease`]).
//! - Register: `POST /api/v1/nodes` (labels from [`DaemonConfig::labels`], Ready condition,
//!   `status.nodeInfo.bootID`); when the Node exists, merge-patch its labels; then merge-patch the
//!   `status` subresource (Ready, bootID).
//! - Watch the own Node (listed by name, then watched from the list's resourceVersion; after a
//!   cut the watch resumes from the last resourceVersion seen, and only a `410 Expired` re-lists,
//!   as client-go's reflector); each observation, drift report or retry tick runs one
//!   level-triggered pass of the phase machine (`Phase`): the phase and the observed annotations
//!   decide what to do.
//! - Update (`desiredConfig != currentConfig`, no drain in flight): pre-flight validation against
//!   the current config, `state=Working`, reconcilability, then for a reboot `desiredDrain=drain-<desired>`
//!   and wait for `lastAppliedDrain`, write, `post-config-action=Rebooting`, `Host::reboot`, return
//!   [`Exit::Reboot`]; for a rebootless update write, then `currentConfig`, `state=Done`, `reason=""`.
//! - After a reboot (on-disk `currentconfig` present): validate, clear `post-config-action`,
//!   `desiredDrain=uncordon-<config>` and wait, then `currentConfig`, `state=Done`, `reason=""`.
//! - Abandoned update (`desiredConfig` set back to `currentConfig` on a Degraded node): once the
//!   node validates, uncordon if a drain was requested or done, then Done; the post-config
//!   actions chosen for the abandoned config are removed (no annotation of a Done node names a
//!   config it never reached).
//! - Force file (`/run/machine-config-daemon-force`, checked every second and at every pass in
//!   any phase with a config): consumed, then drain, rewrite every file, unit and dropin of
//!   desiredConfig without validating, reboot.
//! - Failures: `state=Degraded` (or `Unreconcilable`), `reason` truncated to 2000 characters,
//!   retried with backoff 1 s .. 60 s. A failed on-disk check says how to recover
//!   ([`RECOVERY_HINT`]). Drift: `Degraded` with the validation message, back to
//!   `Done` as soon as the paths match again (DESIGN.md section 5); drifted files are never
//!   rewritten, unless the pool's DriftPolicy says `Revert` for the path (or `Report`: recorded,
//!   the node stays Done; [`super::respond`]).
//!
//! # Reboot and the supervisor
//! [`run`] returns [`Exit::Reboot`] after asking the host to reboot. On a sandbox node the binary
//! exits with [`REBOOT_EXIT_CODE`]; its supervisor empties `<root>/run` (a new boot id) and starts
//! the daemon again, which finds the on-disk `currentconfig` and completes the boot.

use super::apply::{self, WriteMode};
use super::drift::{DriftReport, DriftWatch};

mod drift_response;
use super::node_api::{connect, is_drain, register, spawn_node_watch, NodeApi};
pub use super::node_api::{DaemonConfig, MAX_REASON_CHARS};
use super::paths::{lock_root, read_on_disk_config};
pub use super::paths::{FORCE_FILE, LOCK_PATH, PENDING_CONFIG_PATH};
pub use super::phase::Exit;
use super::phase::{on_disk_failure, Cause, Failure, Held, Phase, Step, UpdateKind};
use super::validate;
use crate::client::backoff::Backoff;
use crate::client::ClientError;
use crate::disruption::Plan;
use crate::host::Host;
use crate::model::machine_config_node::Step as McnStep;
use crate::model::{Keys, NodeAnnotations, NodeState};
use crate::protocol::DrainRequest;
use anyhow::Context as _;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// Exit status of the `mco daemon` process after [`Exit::Reboot`] (`EX_TEMPFAIL`): the supervisor
/// empties `<root>/run` and starts the daemon again, simulating a reboot.
pub const REBOOT_EXIT_CODE: i32 = 75;

/// How often the daemon looks for the force file.
const FORCE_CHECK_INTERVAL: Duration = Duration::from_secs(1);

pub use crate::model::RECOVERY_HINT;
use crate::model::{ON_DISK_VALIDATION_FAILED, PREFLIGHT_CHECK_FAILED};

use crate::render::check_reconcilable;

/// Runs the daemon for node `cfg.node` against `cfg.server` on `host` until `shutdown` is
/// cancelled or a reboot is requested. Connection and registration are retried with backoff
/// (1 s .. 60 s) until the server answers.
///
/// Errors: registration refused by the server (other than AlreadyExists), an unreadable on-disk
/// `currentconfig`, or the host's boot id cannot be read.
pub async fn run(cfg: DaemonConfig, host: Arc<dyn Host>, shutdown: CancellationToken) -> anyhow::Result<Exit> {
    let span = tracing::info_span!("daemon", node = %cfg.node);
    let _lock = lock_root(&*host)?;
    async move {
        let Some(client) = connect(&cfg, &shutdown).await else {
            return Ok(Exit::Shutdown);
        };
        // A refused read (the path leads outside the node root, or is not a regular file) is
        // reported on the Node as Degraded once registered, and retried, rather than crash-looping.
        let on_disk = match read_on_disk_config(&*host) {
            Ok(c) => Ok(c.as_ref().map(Held::new)),
            Err(e)
                if e.downcast_ref::<crate::host::HostError>()
                    .is_some_and(|h| h.is_refused()) =>
            {
                Err(format!("{e:#}"))
            }
            Err(e) => return Err(e),
        };
        let on_disk_name = on_disk
            .as_ref()
            .ok()
            .and_then(|c| c.as_ref().map(|m| m.name().to_string()));
        // The node lease, renewed while this daemon runs (not while its node reboots).
        let lease_stop = shutdown.child_token();
        let _stop_lease = lease_stop.clone().drop_guard();
        super::lease::start(client.clone(), cfg.node.clone(), cfg.lease_renew_interval, lease_stop.clone()).await;
        if !register(&client, &cfg, &*host, on_disk_name.as_deref(), &shutdown).await? {
            return Ok(Exit::Shutdown);
        }
        // MCO starts its kubelet health monitor with the daemon; here once the Node exists.
        if let Some(healthz) = cfg.kubelet_healthz.clone() {
            super::kubelet_health::start(client.clone(), cfg.node.clone(), healthz, lease_stop.clone());
        }
        let watch_cancel = shutdown.child_token();
        let _stop_watch = watch_cancel.clone().drop_guard();
        let mut node_rx = spawn_node_watch(client.clone(), cfg.node.clone(), watch_cancel);
        let (drift_tx, mut drift_rx) = mpsc::unbounded_channel();
        let mut agent = Agent {
            api: NodeApi {
                keys: Keys::new(client.group()),
                client,
                name: cfg.node.clone(),
                node: None,
            },
            host,
            phase: Phase::Starting { on_disk },
            cause: None,
            drift: DriftWatch::new(drift_tx),
            retry_at: None,
            backoff: Backoff::default(),
            mcn: super::mcn::McnReporter::new(),
        };
        let mut force_check = tokio::time::interval(FORCE_CHECK_INTERVAL);
        force_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let retry_at = agent.retry_at;
            let mut backing_off = false;
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => {
                    agent.drift.stop().await;
                    return Ok(Exit::Shutdown);
                }
                Some(report) = drift_rx.recv() => {
                    agent.on_drift(report).await;
                    // a drift report never cuts a failure's backoff short
                    backing_off = agent.retry_at.is_some();
                }
                changed = node_rx.changed() => {
                    changed.context("node watch ended")?;
                    let seen = node_rx.borrow_and_update().clone();
                    if seen.is_none() && agent.api.node.is_some() {
                        // Deleted behind the daemon's back: register again, as a kubelet does,
                        // carrying the config the node is on.
                        let current = agent.phase.settled().map(|c| c.name().to_string());
                        agent.api.node = None;
                        register(&agent.api.client, &cfg, &*agent.host, current.as_deref(), &shutdown).await?;
                        continue;
                    }
                    let before = agent.api.triggers();
                    agent.api.observe(seen);
                    // after a failure, only a change of what was asked for skips the backoff
                    backing_off = agent.retry_at.is_some() && agent.api.triggers() == before;
                }
                _ = tokio::time::sleep_until(retry_at.unwrap_or_else(Instant::now)), if retry_at.is_some() => agent.retry_at = None,
                _ = force_check.tick() => {
                    // MCO's force file: acted on at once, whatever the backoff.
                    if !agent.force_requested() {
                        continue;
                    }
                    agent.retry_at = None;
                }
            }
            if agent.api.node.is_none() || backing_off {
                continue;
            }
            match agent.reconcile().await {
                Ok(Some(exit)) => return Ok(exit),
                Ok(None) => {}
                Err(failure) => agent.on_failure(failure).await,
            }
            agent.drift.sync(&agent.host, agent.phase.settled()).await;
        }
    }
    .instrument(span)
    .await
}

/// The policy's state across passes: the phase, why the node is not Done, the drift monitor and
/// a failure's backoff, with the Node as last observed.
struct Agent {
    /// The Node as last observed, and the annotation writes.
    api: NodeApi,
    host: Arc<dyn Host>,
    phase: Phase,
    cause: Option<Cause>,
    /// The drift monitor of the settled config and its latest message.
    drift: DriftWatch,
    retry_at: Option<Instant>,
    backoff: Backoff,
    /// The writes of the node's MachineConfigNode phases ([`super::mcn`]).
    mcn: super::mcn::McnReporter,
}

impl Agent {
    /// Writes one phase on the node's MachineConfigNode.
    async fn mcn(&mut self, step: McnStep) {
        self.mcn.report(&self.api, step).await;
    }

    /// [`NodeApi::set_done`], then the in-flight marker removed and the failure's backoff reset.
    async fn set_done(&mut self, config: &str) -> Result<(), ClientError> {
        self.api.set_done(config).await?;
        self.clear_pending().await;
        tracing::info!(config, "node is Done");
        self.cause = None;
        self.backoff.reset();
        self.retry_at = None;
        Ok(())
    }

    /// Removes the in-flight update marker ([`PENDING_CONFIG_PATH`]) and a reboot owed for it
    /// ([`super::reboot::REBOOT_REQUESTED_PATH`]), if any: the node is Done, or rolled back.
    async fn clear_pending(&self) {
        for path in [PENDING_CONFIG_PATH, super::reboot::REBOOT_REQUESTED_PATH] {
            if let Err(e) = self.blocking(move |h| h.remove(path)).await {
                tracing::warn!(error = %e, "could not remove {path}");
            }
        }
    }

    /// The Node's capacity and allocatable resources computed again from the kubelet
    /// configuration now on the node, and posted when they changed ([`NodeApi::post_resources`]);
    /// a failure is logged (the next start posts them).
    async fn post_resources(&self) {
        let (capacity, allocatable) = self.blocking(super::node_api::resources).await;
        if let Err(e) = self.api.post_resources(capacity, allocatable).await {
            tracing::warn!(error = %e, "could not post the node's resources");
        }
    }

    /// Runs `f` on the host in a blocking thread.
    async fn blocking<T: Send + 'static>(&self, f: impl FnOnce(&dyn Host) -> T + Send + 'static) -> T {
        let host = self.host.clone();
        tokio::task::spawn_blocking(move || f(&*host))
            .await
            .expect("host task panicked")
    }

    /// One level-triggered pass: runs phase handlers until one waits.
    async fn reconcile(&mut self) -> Result<Option<Exit>, Failure> {
        loop {
            // MCO checks the force file before anything else (mco-facts 4.3.6).
            if let Some(current) = self.phase.config().filter(|_| self.force_requested()) {
                let ann = self.api.annotations();
                self.begin_forced_update(current, ann, true).await?;
                continue;
            }
            let step = match self.phase.clone() {
                Phase::Starting { on_disk } => self.on_starting(on_disk).await?,
                Phase::FirstBoot => self.on_first_boot().await?,
                Phase::Booting { current } => self.on_booting(current).await?,
                Phase::Idle { current } => self.on_idle(current).await?,
                Phase::Draining {
                    current,
                    desired,
                    kind,
                    plan,
                } => self.on_draining(current, desired, kind, plan).await?,
                Phase::Uncordoning { config } => self.on_uncordoning(config).await?,
            };
            match step {
                Step::Continue => continue,
                Step::Wait => return Ok(None),
                Step::Exit(e) => return Ok(Some(e)),
            }
        }
    }

    /// MCO `checkStateOnFirstRun` step 5: the on-disk config beats the annotation; without
    /// either, this is a first boot.
    async fn on_starting(&mut self, on_disk: Result<Option<Held>, String>) -> Result<Step, Failure> {
        let on_disk = match on_disk {
            Ok(c) => c,
            Err(_) => match self.blocking(read_on_disk_config).await {
                Ok(c) => c.as_ref().map(Held::new),
                Err(e) => return Err(Failure::Degraded(format!("failed to read the on-disk config: {e:#}"))),
            },
        };
        let current = match on_disk {
            Some(mc) => Some(mc),
            None => match self.api.annotations().current_config {
                name if name.is_empty() => None,
                name => Some(Held::new(&*self.api.fetch(&name).await?)),
            },
        };
        match current {
            Some(current) => self.phase.booted(current),
            None => self.phase.first_boot(),
        }
        Ok(Step::Continue)
    }

    /// First boot: apply `desiredConfig` as the node's initial config (no drain, no reboot).
    async fn on_first_boot(&mut self) -> Result<Step, Failure> {
        let desired = self.api.annotations().desired_config;
        if desired.is_empty() {
            tracing::info!("waiting for the controller to set desiredConfig");
            return Ok(Step::Wait);
        }
        let mc = self.api.fetch(&desired).await?;
        let span = tracing::info_span!("first-boot", node = %self.api.name, desired = %desired);
        async {
            tracing::info!("writing the first boot config");
            let new = mc.clone();
            self.blocking(move |h| apply::write_config(h, WriteMode::FirstBoot, &new))
                .await
                .map_err(Failure::Degraded)?;
            // MCO's machine-config-daemon-firstboot applies kernel arguments and OS changes,
            // then reboots.
            let (first, reason) = (mc.clone(), format!("Node will reboot into config {desired}"));
            let rebooted = self
                .blocking(move |h| super::actions::first_boot_os_changes(h, &first, &reason))
                .await
                .map_err(Failure::Degraded)?;
            if rebooted {
                return Ok(Step::Exit(Exit::Reboot));
            }
            // MCO's first boot runs before the kubelet starts, so the kubelet's first status
            // carries the configuration just written.
            self.post_resources().await;
            self.set_done(&desired).await?;
            self.phase.first_boot_done(Held::new(&mc));
            Ok(Step::Continue)
        }
        .instrument(span)
        .await
    }

    /// MCO 4.3: validate against the config booted into (never re-applied), then complete the
    /// boot (uncordon, Done) or, when another config is desired, start that update.
    async fn on_booting(&mut self, current: Held) -> Result<Step, Failure> {
        let pending = self
            .blocking(|h| h.read(PENDING_CONFIG_PATH))
            .await
            .ok()
            .map(|b| String::from_utf8_lossy(&b).trim().to_string())
            .filter(|p| !p.is_empty() && p != current.name());
        if let Some(pending) = pending {
            // The daemon died while writing `pending` over `current`: the files may be part old,
            // part new, so validating either would fail. Resume: rewrite all of the desired
            // config without validation, then reboot, as the force file does.
            tracing::warn!(current = current.name(), %pending, "an update was interrupted while writing; resuming it");
            let ann = self.api.annotations();
            self.begin_forced_update(current, ann, false).await?;
            return Ok(Step::Continue);
        }
        // A reboot asked for on this very boot that has not happened is asked for again.
        if self
            .blocking(super::reboot::resume)
            .await
            .map_err(Failure::Degraded)?
            .is_some()
        {
            return Ok(Step::Exit(Exit::Reboot));
        }
        let held = current.clone();
        if let Err(detail) = self.blocking(move |h| validate::validate_held(h, &held)).await {
            return Err(on_disk_failure(current.name(), &detail, ON_DISK_VALIDATION_FAILED));
        }
        let desired = self.api.annotations().desired_config;
        self.mcn.booted(&self.api).await;
        self.api.annotate(&[(self.api.keys.post_config_action(), None)]).await?;
        if desired.is_empty() || desired == current.name() {
            self.mcn(McnStep::resumed_applying(current.name())).await;
            self.phase.boot_checked(current);
        } else {
            tracing::info!(current = current.name(), %desired, "boot resync: starting update");
            self.phase.boot_resync(current);
        }
        Ok(Step::Continue)
    }

    /// Idle on `current`: start an update when another config is desired and no drain is in
    /// flight; otherwise recover a non-Done state once the node validates (MCO's
    /// desired == current recovery path, without rewriting files).
    async fn on_idle(&mut self, current: Held) -> Result<Step, Failure> {
        let ann = self.api.annotations();
        if ann.desired_config.is_empty() || ann.desired_config == current.name() {
            if ann.state != NodeState::Done.as_str() && self.drift.message.is_none() {
                let held = current.clone();
                match self.blocking(move |h| validate::validate_held(h, &held)).await {
                    // Drained (or a drain requested) for an update that failed and was
                    // abandoned by setting desiredConfig back: uncordon before Done, as MCO's
                    // rebootless finish does, so `desiredDrain` no longer asks for a drain for
                    // the config the node never reached.
                    Ok(()) if is_drain(&ann.last_applied_drain) || is_drain(&ann.desired_drain) => {
                        self.phase.abandoned(current);
                        return Ok(Step::Continue);
                    }
                    Ok(()) => self.set_done(current.name()).await?,
                    Err(detail) => return Err(on_disk_failure(current.name(), &detail, PREFLIGHT_CHECK_FAILED)),
                }
            }
            self.mcn.idle(&self.api).await;
            return Ok(Step::Wait);
        }
        if !ann.desired_drain.is_empty() && ann.desired_drain != ann.last_applied_drain {
            tracing::info!(desired_drain = %ann.desired_drain, "waiting for an in-flight drain request");
            return Ok(Step::Wait);
        }
        let span = tracing::info_span!("update", node = %self.api.name, current = %current.name(), desired = %ann.desired_config);
        self.begin_update(current, ann).instrument(span).await
    }

    /// Whether the force file exists on a node that has a config (MCO checks it on every sync
    /// and at boot before validating, mco-facts 4.2.4, 4.3.6).
    fn force_requested(&self) -> bool {
        self.phase.config().is_some() && self.host.exists(FORCE_FILE)
    }

    /// The force file's update, from any phase with a config: consume the file, skip every
    /// validation, drain, rewrite all of `desiredConfig` (or the current config) over `current`
    /// ([`WriteMode::Forced`]) and reboot.
    /// Also resumes an update interrupted while writing (`force_file` false: nothing to consume).
    async fn begin_forced_update(
        &mut self,
        current: Held,
        ann: NodeAnnotations,
        force_file: bool,
    ) -> Result<(), Failure> {
        let target = if ann.desired_config.is_empty() {
            current.name().to_string()
        } else {
            ann.desired_config.clone()
        };
        let desired = Held::new(&*self.api.fetch(&target).await?);
        if force_file {
            self.blocking(|h| h.remove(FORCE_FILE)).await.map_err(|e| {
                Failure::Degraded(format!(
                    "failed to remove force validation file: {}",
                    crate::host::path_error("remove", &e)
                ))
            })?;
            tracing::warn!(
                desired = %target,
                "{FORCE_FILE} present: skipping validation, rewriting every file and unit and rebooting"
            );
        }
        self.drift.stop().await;
        self.cause = None;
        self.phase.forced(current, desired);
        self.api.set_state(NodeState::Working, "").await?;
        Ok(())
    }

    /// MCO `triggerUpdate` up to the drain: stop the drift monitor, pre-flight validation,
    /// `state=Working`, reconcilability, the post-config action.
    async fn begin_update(&mut self, current: Held, ann: NodeAnnotations) -> Result<Step, Failure> {
        self.mcn(McnStep::needs_update(&self.api.name)).await;
        self.drift.stop().await;
        let desired = self.api.fetch(&ann.desired_config).await?;
        if let Err(detail) = self.preflight(&current).await {
            return Err(on_disk_failure(current.name(), &detail, PREFLIGHT_CHECK_FAILED));
        }
        let degraded = [NodeState::Degraded.as_str(), NodeState::Unreconcilable.as_str()];
        if !degraded.contains(&ann.state.as_str()) {
            self.api.set_state(NodeState::Working, "").await?;
        }
        let current_mc = current.load().map_err(Failure::Degraded)?;
        if let Err(e) = check_reconcilable(&current_mc.spec, &desired.spec) {
            let (from, to) = (current.name(), desired.metadata.name.as_deref().unwrap_or(""));
            self.mcn(McnStep::not_compatible(from, to, &e.to_string())).await;
            return Err(Failure::Unreconcilable(format!(
                "can't reconcile config {from} with {to}: {e}"
            )));
        }
        let plan = self.api.plan(&current_mc, &desired).await?;
        drop(current_mc);
        let desired = Held::new(&desired);
        tracing::info!(actions = %plan.summary(), drain = plan.drain, "update planned");
        self.mcn.planned(&self.api, plan.drain).await;
        let actions = format!("{} for {}", plan.summary(), desired.name());
        self.api
            .annotate(&[(crate::disruption::ACTIONS_ANNOTATION.to_string(), Some(&actions))])
            .await?;
        if plan.drain {
            self.phase.draining(current, desired, plan);
            Ok(Step::Continue)
        } else {
            self.write_and_finish(current, desired, &plan, UpdateKind::Diff, false)
                .await
        }
    }

    /// Waits for the drain controller, then writes. A changed desiredConfig re-plans: a normal
    /// update from Idle, a forced one (its force file already consumed) by retargeting.
    async fn on_draining(
        &mut self,
        current: Held,
        desired: Held,
        kind: UpdateKind,
        plan: Plan,
    ) -> Result<Step, Failure> {
        let ann = self.api.annotations();
        if !ann.desired_config.is_empty() && ann.desired_config != desired.name() {
            tracing::info!(from = desired.name(), to = %ann.desired_config, "desiredConfig changed while draining");
            if kind == UpdateKind::ForceFile {
                let desired = Held::new(&*self.api.fetch(&ann.desired_config).await?);
                self.phase.retargeted(current, desired, plan);
                return Ok(Step::Continue);
            }
            self.phase.drain_abandoned(current);
            return Ok(Step::Wait);
        }
        let want = DrainRequest::Drain(desired.name()).to_string();
        if ann.last_applied_drain == want {
            let span = tracing::info_span!("update", node = %self.api.name, current = %current.name(), desired = %desired.name());
            return self
                .write_and_finish(current, desired, &plan, kind, true)
                .instrument(span)
                .await;
        }
        if ann.desired_drain != want {
            tracing::info!(%want, "requesting drain");
            self.api
                .annotate(&[(self.api.keys.desired_drain(), Some(&want))])
                .await?;
        }
        Ok(Step::Wait)
    }

    /// Waits for the uncordon, then reports Done on `config`.
    async fn on_uncordoning(&mut self, config: Held) -> Result<Step, Failure> {
        let ann = self.api.annotations();
        let want = DrainRequest::Uncordon(config.name()).to_string();
        if ann.last_applied_drain != want {
            if ann.desired_drain != want {
                tracing::info!(%want, "requesting uncordon");
                self.api
                    .annotate(&[(self.api.keys.desired_drain(), Some(&want))])
                    .await?;
            }
            return Ok(Step::Wait);
        }
        self.set_done(config.name()).await?;
        self.mcn.done(&self.api, config.name()).await;
        self.phase.uncordoned(config);
        Ok(Step::Continue)
    }

    /// Writes `desired` over `current` as `kind` says (rolling back to `current` on failure),
    /// then reboots or finishes rebootless.
    async fn write_and_finish(
        &mut self,
        current: Held,
        desired: Held,
        plan: &Plan,
        kind: UpdateKind,
        drained: bool,
    ) -> Result<Step, Failure> {
        let (old, new) = (current.clone(), desired.clone());
        let (pending, reboots) = (desired.name().to_string(), plan.reboots());
        self.blocking(move |h| {
            h.write_atomic(PENDING_CONFIG_PATH, pending.as_bytes(), 0o644, crate::host::Owner::ROOT)?;
            // From the first write on, this boot owes the reboot (super::reboot).
            reboots.then(|| super::reboot::owe(h, &pending)).transpose()
        })
        .await
        .map_err(|e| Failure::Degraded(crate::host::path_error("open", &e)))?;
        self.mcn.files(&self.api, &current, &desired, false).await;
        if let Err(e) = self
            .blocking(move |h| {
                let (old, new) = (old.load()?, new.load()?);
                apply::write_config(h, kind.write_mode(&old), &new)
            })
            .await
        {
            self.rollback(&current, &desired).await;
            return Err(Failure::Degraded(e));
        }
        self.mcn.files(&self.api, &current, &desired, true).await;
        if !plan.reboots() {
            let (actions, name) = (plan.actions.clone(), desired.name().to_string());
            if let Err(e) = self
                .blocking(move |h| super::actions::perform(h, &actions, &name))
                .await
            {
                self.rollback(&current, &desired).await;
                return Err(Failure::Degraded(e));
            }
            self.mcn.post_actions(&self.api, &plan.actions).await;
            self.mcn(McnStep::resumed_applying(desired.name())).await;
            if super::actions::restarts_kubelet(&plan.actions) {
                self.post_resources().await;
            }
        }
        match plan.reboots() {
            true => {
                let (from, to) = (current.clone(), desired.clone());
                if let Err((e, pivot)) = self
                    .blocking(move |h| {
                        let (from, to) = (from.load().map_err(|e| (e, false))?, to.load().map_err(|e| (e, false))?);
                        super::actions::stage_os_changes(h, &from, &to).map_err(|e| {
                            let pivot = super::actions::is_pivot_error(&from, &to, &e);
                            (e, pivot)
                        })
                    })
                    .await
                {
                    if pivot {
                        self.api.report(crate::metrics::ReportKind::PivotFailed, "");
                    }
                    self.rollback(&current, &desired).await;
                    return Err(Failure::Degraded(e));
                }
                self.mcn.post_actions(&self.api, &plan.actions).await;
                self.api
                    .annotate(&[(self.api.keys.post_config_action(), Some("Rebooting"))])
                    .await?;
                let reason = format!("Node will reboot into config {}", desired.name());
                tracing::info!("{reason}");
                fail::fail_point!("daemon::reboot::before", |_| crate::host::sigkill_self());
                let name = desired.name().to_string();
                if let Err(e) = self.blocking(move |h| super::reboot::request(h, &name, &reason)).await {
                    let (from, to) = (desired.clone(), current.clone());
                    let _ = self
                        .blocking(move |h| super::actions::stage_os_changes(h, &from.load()?, &to.load()?))
                        .await;
                    self.api.report(crate::metrics::ReportKind::RebootFailed, "");
                    self.rollback(&current, &desired).await;
                    return Err(Failure::Degraded(format!("failed to reboot: {e}")));
                }
                Ok(Step::Exit(Exit::Reboot))
            }
            false if drained => {
                self.phase.written(desired);
                Ok(Step::Continue)
            }
            false => {
                tracing::info!("rebootless update, skipping reboot");
                self.set_done(desired.name()).await?;
                self.phase.written_rebootless(desired);
                Ok(Step::Continue)
            }
        }
    }

    /// MCO's rollback: write the old config back over the partial update.
    async fn rollback(&mut self, current: &Held, desired: &Held) {
        let (old, new) = (current.clone(), desired.clone());
        match self
            .blocking(move |h| {
                let (old, new) = (old.load()?, new.load()?);
                apply::write_config(h, WriteMode::Update { old: &new }, &old)
            })
            .await
        {
            Ok(()) => self.clear_pending().await,
            Err(e) => tracing::error!(error = %e, "rollback to {} failed", current.name()),
        }
        self.phase.rolled_back(current.clone());
    }

    async fn on_failure(&mut self, failure: Failure) {
        let (state, reason, cause, event) = match failure {
            Failure::Degraded(r) => (NodeState::Degraded, r, Cause::Failure, None),
            Failure::Unreconcilable(r) => (NodeState::Unreconcilable, r, Cause::Unreconcilable, None),
            Failure::OnDisk(r, event) => (NodeState::Degraded, r, Cause::Failure, Some(event)),
        };
        tracing::error!(state = state.as_str(), %reason, retry_in = ?self.backoff.current(), "update failed");
        self.cause = Some(cause);
        if let Err(e) = self.api.set_state_as(state, &reason, event).await {
            tracing::warn!(error = %e, "could not report the failure on the node");
        }
        self.mcn(McnStep::degraded(&self.api.name, Some(&reason))).await;
        self.retry_at = Some(Instant::now() + self.backoff.failed());
    }

    /// Drift reports under the pool's DriftPolicies ([`super::respond`]): each newly drifted
    /// path is recorded (history note, metric) and, for `Revert`, written back; the paths whose
    /// action is `Degrade` (every path without a policy: MCO's behaviour) make the node Degraded
    /// with their message (unless a failure already owns the state); Done again when none is
    /// left (on Clean, or when only `Report` and reverted paths still differ).
    async fn on_drift(&mut self, report: DriftReport) {
        let degrading = match &report {
            DriftReport::Drift { newly, failing, .. } => self.respond(newly, failing).await,
            DriftReport::Clean => None,
        };
        let api = &self.api;
        self.drift
            .record(&report, degrading.clone(), |kind, detail| api.report(kind, detail));
        let idle = matches!(self.phase, Phase::Idle { .. });
        let result = match report {
            DriftReport::Drift { path, message, .. } => {
                tracing::warn!(%path, %message, "config drift");
                match (degrading, &self.phase) {
                    (Some(msg), Phase::Idle { .. }) if matches!(self.cause, None | Some(Cause::Drift)) => {
                        self.cause = Some(Cause::Drift);
                        self.api.set_drift_state(&msg).await
                    }
                    (None, Phase::Idle { current }) if matches!(self.cause, Some(Cause::Drift)) => {
                        let name = current.name().to_string();
                        self.set_done(&name).await
                    }
                    _ => Ok(()),
                }
            }
            DriftReport::Clean => match (&self.cause, &self.phase) {
                (Some(Cause::Drift), Phase::Idle { current }) => {
                    let name = current.name().to_string();
                    tracing::info!("config drift resolved");
                    self.set_done(&name).await
                }
                // The boot's on-disk check failed on what was drifted: check again now
                // rather than after the failure's backoff.
                (Some(Cause::Failure), Phase::Booting { .. }) => {
                    self.retry_at = None;
                    Ok(())
                }
                _ => Ok(()),
            },
        };
        if let Err(e) = result {
            tracing::warn!(error = %e, idle, "could not report drift on the node");
            self.retry_at = Some(Instant::now() + self.backoff.current());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use std::collections::BTreeMap;

    #[tokio::test]
    async fn a_second_daemon_on_the_same_root_refuses_to_start() {
        let (_dir, host) = crate::daemon::test_support::sandbox();
        let host: Arc<dyn Host> = Arc::new(host);
        let _first = lock_root(&*host).unwrap();
        let cfg = DaemonConfig {
            server: "http://127.0.0.1:9".into(),
            node: "w".into(),
            labels: BTreeMap::new(),
            token: None,
            trust: None,
            ..Default::default()
        };
        let err = run(cfg, host, CancellationToken::new()).await.unwrap_err();
        assert!(
            err.to_string().contains("another mco daemon is already running"),
            "{err}"
        );
    }

    /// A fake server speaking just what the daemon uses, with an instant drain controller.
    mod fake {
        use axum::extract::{Path, State};
        use axum::http::StatusCode;
        use axum::routing::{get, patch};
        use axum::{Json, Router};
        use serde_json::{json, Value};
        use std::collections::BTreeMap;
        use std::sync::{Arc, Mutex};
        use tokio::sync::watch;
        use tokio_stream::StreamExt as _;

        #[derive(Clone)]
        pub struct Fake {
            pub node: watch::Sender<Option<Value>>,
            pub mcs: Arc<Mutex<BTreeMap<String, Value>>>,
            rv: Arc<Mutex<u64>>,
            /// While set, drain and uncordon requests are left pending.
            pub hold_drains: Arc<std::sync::atomic::AtomicBool>,
        }

        pub const G: &str = "machineconfiguration.openshift.io";

        impl Fake {
            fn bump(&self, mut node: Value) -> Value {
                let mut rv = self.rv.lock().unwrap();
                *rv += 1;
                node["metadata"]["resourceVersion"] = json!(rv.to_string());
                // drain controller: complete any drain/uncordon request at once
                let ann = node["metadata"]["annotations"].clone();
                let desired = ann[format!("{G}/desiredDrain")].clone();
                let held = self.hold_drains.load(std::sync::atomic::Ordering::SeqCst);
                if !held && desired.is_string() && desired != ann[format!("{G}/lastAppliedDrain")] {
                    node["metadata"]["annotations"][format!("{G}/lastAppliedDrain")] = desired;
                }
                self.node.send_replace(Some(node.clone()));
                node
            }

            /// Patches the node as a controller would.
            pub fn patch_node(&self, patch: Value) {
                let mut node = self.node.borrow().clone().expect("node registered");
                json_patch::merge(&mut node, &patch);
                self.bump(node);
            }

            pub fn annotation(&self, key: &str) -> Option<String> {
                let node = self.node.borrow();
                node.as_ref()?["metadata"]["annotations"][format!("{G}/{key}")]
                    .as_str()
                    .map(str::to_string)
            }

            /// Waits (deadline 10 s) until `f` holds for the node.
            pub async fn wait(&self, what: &str, f: impl Fn(&Value) -> bool) {
                let mut rx = self.node.subscribe();
                let done = tokio::time::timeout(
                    std::time::Duration::from_secs(10),
                    rx.wait_for(|n| n.as_ref().is_some_and(&f)),
                )
                .await;
                assert!(
                    done.is_ok(),
                    "timed out waiting for {what}; node: {:#}",
                    self.node.borrow().clone().unwrap_or_default()
                );
            }
        }

        pub async fn start(mcs: BTreeMap<String, Value>) -> (String, Fake) {
            let fake = Fake {
                node: watch::channel(None).0,
                mcs: Arc::new(Mutex::new(mcs)),
                rv: Arc::new(Mutex::new(0)),
                hold_drains: Default::default(),
            };
            let app = Router::new()
                .route("/apis", get(|| async { Json(json!({"groups": [{"name": G}]})) }))
                .route("/api/v1/nodes", get(watch_nodes).post(create_node))
                .route("/api/v1/nodes/{name}", get(get_node).patch(patch_node))
                .route("/api/v1/nodes/{name}/status", patch(patch_node))
                .route(&format!("/apis/{G}/v1/machineconfigs/{{name}}"), get(get_mc))
                .route(
                    "/apis/operator.openshift.io/v1/machineconfigurations/{name}",
                    get(|| async { status(StatusCode::NOT_FOUND, "NotFound") }),
                )
                .with_state(fake.clone());
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}", listener.local_addr().unwrap());
            tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
            (url, fake)
        }

        fn status(code: StatusCode, reason: &str) -> (StatusCode, Json<Value>) {
            (
                code,
                Json(
                    json!({"kind": "Status", "status": "Failure", "reason": reason, "message": reason, "code": code.as_u16()}),
                ),
            )
        }

        async fn create_node(State(f): State<Fake>, Json(node): Json<Value>) -> (StatusCode, Json<Value>) {
            if f.node.borrow().is_some() {
                return status(StatusCode::CONFLICT, "AlreadyExists");
            }
            (StatusCode::CREATED, Json(f.bump(node)))
        }

        async fn get_node(State(f): State<Fake>) -> (StatusCode, Json<Value>) {
            match f.node.borrow().clone() {
                Some(n) => (StatusCode::OK, Json(n)),
                None => status(StatusCode::NOT_FOUND, "NotFound"),
            }
        }

        async fn patch_node(
            State(f): State<Fake>,
            Path(_name): Path<String>,
            body: String,
        ) -> (StatusCode, Json<Value>) {
            let patch: Value = serde_json::from_str(&body).unwrap();
            let Some(mut node) = f.node.borrow().clone() else {
                return status(StatusCode::NOT_FOUND, "NotFound");
            };
            json_patch::merge(&mut node, &patch);
            (StatusCode::OK, Json(f.bump(node)))
        }

        async fn get_mc(State(f): State<Fake>, Path(name): Path<String>) -> (StatusCode, Json<Value>) {
            match f.mcs.lock().unwrap().get(&name) {
                Some(mc) => (StatusCode::OK, Json(mc.clone())),
                None => status(StatusCode::NOT_FOUND, "NotFound"),
            }
        }

        /// A watch (`watch=true`), else the list the daemon (re-)lists its Node with.
        async fn watch_nodes(
            State(f): State<Fake>,
            axum::extract::RawQuery(q): axum::extract::RawQuery,
        ) -> axum::body::Body {
            if !q.unwrap_or_default().contains("watch=true") {
                let node = f.node.borrow().clone();
                let rv = node
                    .as_ref()
                    .map_or(json!("0"), |n| n["metadata"]["resourceVersion"].clone());
                let list = json!({"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": rv},
                    "items": node.into_iter().collect::<Vec<_>>()});
                return axum::body::Body::from(list.to_string());
            }
            let stream = tokio_stream::wrappers::WatchStream::new(f.node.subscribe()).filter_map(|n| {
                n.map(|n| {
                    let line = format!("{}\n", json!({"type": "MODIFIED", "object": n}));
                    Ok::<_, std::convert::Infallible>(bytes::Bytes::from(line))
                })
            });
            axum::body::Body::from_stream(stream)
        }
    }

    fn mc_json(name: &str, config: Value) -> Value {
        serde_json::to_value(crate::daemon::test_support::mc(name, config)).unwrap()
    }

    #[tokio::test]
    async fn first_boot_drift_rebootless_update_reboot_and_boot_completion() {
        use fake::G;
        let file = |c: &str| json!({"path": "/etc/app.conf", "contents": {"source": format!("data:,{c}")}});
        let user = |keys: &[&str]| json!({"name": "core", "sshAuthorizedKeys": keys});
        let mut mcs = BTreeMap::new();
        for (name, content, keys) in [
            ("rendered-1", "one", &["k1"][..]),
            ("rendered-2", "one", &["k1", "k2"]),
            ("rendered-3", "three", &["k1", "k2"]),
        ] {
            let cfg = json!({"ignition": {"version": "3.4.0"}, "storage": {"files": [file(content)]}, "passwd": {"users": [user(keys)]}});
            mcs.insert(name.to_string(), mc_json(name, cfg));
        }
        let (url, fake) = fake::start(mcs).await;
        let (_dir, host) = crate::daemon::test_support::sandbox();
        let sandbox = host.clone();
        let host: Arc<dyn Host> = Arc::new(host);
        let cfg = DaemonConfig {
            server: url,
            node: "worker-1".into(),
            labels: BTreeMap::from([("node-role.kubernetes.io/worker".to_string(), String::new())]),
            token: None,
            trust: None,
            ..Default::default()
        };
        let shutdown = CancellationToken::new();
        let daemon = tokio::spawn(run(cfg.clone(), host.clone(), shutdown.clone()));

        fake.wait("registration", |n| n["status"]["nodeInfo"]["bootID"].is_string())
            .await;
        let first_boot_id = fake.node.borrow().clone().unwrap()["status"]["nodeInfo"]["bootID"].clone();
        assert_eq!(
            fake.node.borrow().clone().unwrap()["metadata"]["labels"]["node-role.kubernetes.io/worker"],
            ""
        );

        // first boot: write, no drain, Done
        fake.patch_node(json!({"metadata": {"annotations": {format!("{G}/desiredConfig"): "rendered-1"}}}));
        let done_on = |cfg: &'static str| {
            move |n: &Value| {
                let a = &n["metadata"]["annotations"];
                a[format!("{G}/currentConfig")] == cfg && a[format!("{G}/state")] == "Done"
            }
        };
        fake.wait("first boot Done", done_on("rendered-1")).await;
        assert_eq!(host.read("/etc/app.conf").unwrap(), b"one");
        assert_eq!(fake.annotation("desiredDrain"), None);

        // drift: Degraded with MCO's message, back to Done once restored, never rewritten
        let real = host.resolve("/etc/app.conf").unwrap();
        std::fs::write(&real, "tampered").unwrap();
        fake.wait("drift Degraded", |n| {
            n["metadata"]["annotations"][format!("{G}/reason")] == r#"content mismatch for file "/etc/app.conf""#
                && n["metadata"]["annotations"][format!("{G}/state")] == "Degraded"
        })
        .await;
        assert_eq!(host.read("/etc/app.conf").unwrap(), b"tampered");
        std::fs::write(&real, "one").unwrap();
        fake.wait("drift resolved", |n| {
            n["metadata"]["annotations"][format!("{G}/state")] == "Done"
        })
        .await;
        assert_eq!(fake.annotation("reason").as_deref(), Some(""));

        // SSH-only change: rebootless, no drain
        fake.patch_node(json!({"metadata": {"annotations": {format!("{G}/desiredConfig"): "rendered-2"}}}));
        fake.wait("rebootless Done", done_on("rendered-2")).await;
        assert_eq!(host.read(apply::SSH_KEYS_PATH).unwrap(), b"k1\nk2\n");
        assert_eq!(fake.annotation("desiredDrain"), None);

        // file change: drain, write, reboot
        fake.patch_node(json!({"metadata": {"annotations": {format!("{G}/desiredConfig"): "rendered-3"}}}));
        let exit = tokio::time::timeout(Duration::from_secs(10), daemon)
            .await
            .expect("daemon exits for reboot");
        assert_eq!(exit.unwrap().unwrap(), Exit::Reboot);
        assert_eq!(fake.annotation("desiredDrain").as_deref(), Some("drain-rendered-3"));
        assert_eq!(fake.annotation("post-config-action").as_deref(), Some("Rebooting"));
        assert_eq!(fake.annotation("currentConfig").as_deref(), Some("rendered-2"));
        assert_eq!(host.read("/etc/app.conf").unwrap(), b"three");
        assert!(sandbox
            .journal_lines()
            .unwrap()
            .iter()
            .any(|l| l.ends_with("reboot Node will reboot into config rendered-3")));

        // started again on the boot that asked (systemd's Restart=always before the shutdown
        // began): the reboot is still owed, so it is asked for again, and the node is not
        // reported Done on a config it has not booted into
        let again = tokio::spawn(run(cfg.clone(), host.clone(), shutdown.clone()));
        let exit = tokio::time::timeout(Duration::from_secs(10), again)
            .await
            .expect("the restarted daemon asks for the reboot again");
        assert_eq!(exit.unwrap().unwrap(), Exit::Reboot);
        let reboots = |s: &crate::host::SandboxHost| {
            s.journal_lines()
                .unwrap()
                .iter()
                .filter(|l| l.ends_with("reboot Node will reboot into config rendered-3"))
                .count()
        };
        assert_eq!(reboots(&sandbox), 2);
        assert_eq!(fake.annotation("currentConfig").as_deref(), Some("rendered-2"));
        assert_eq!(fake.annotation("post-config-action").as_deref(), Some("Rebooting"));

        // the supervisor's reboot: empty <root>/run, start again
        std::fs::remove_dir_all(host.resolve("/run").unwrap()).unwrap();
        let daemon = tokio::spawn(run(cfg, host.clone(), shutdown.clone()));
        fake.wait("boot completion", done_on("rendered-3")).await;
        assert_eq!(fake.annotation("desiredDrain").as_deref(), Some("uncordon-rendered-3"));
        assert_eq!(fake.annotation("post-config-action"), None);
        assert_ne!(
            fake.node.borrow().clone().unwrap()["status"]["nodeInfo"]["bootID"],
            first_boot_id
        );
        assert_eq!(reboots(&sandbox), 2, "the new boot settled the reboot request");
        assert!(host
            .read(super::super::reboot::REBOOT_REQUESTED_PATH)
            .unwrap_err()
            .is_not_found());
        shutdown.cancel();
        let exit = tokio::time::timeout(Duration::from_secs(10), daemon)
            .await
            .expect("daemon stops");
        assert_eq!(exit.unwrap().unwrap(), Exit::Shutdown);
    }

    /// First boot with kernel arguments stages them and reboots (MCO's firstboot); an argument
    /// missing from the booted command line degrades the node at the boot check, naming it.
    #[tokio::test]
    async fn first_boot_kernel_arguments_reboot_and_a_missing_one_degrades() {
        use fake::G;
        let mut mc = mc_json("rendered-1", json!({"ignition": {"version": "3.4.0"}}));
        mc["spec"]["kernelArguments"] = json!(["nosmt", "a=1"]);
        let (url, fake) = fake::start(BTreeMap::from([("rendered-1".to_string(), mc)])).await;
        let (_dir, host) = crate::daemon::test_support::sandbox();
        let host: Arc<dyn Host> = Arc::new(host);
        let cfg = DaemonConfig {
            server: url,
            node: "worker-1".into(),
            labels: BTreeMap::new(),
            token: None,
            trust: None,
            ..Default::default()
        };
        let shutdown = CancellationToken::new();
        let daemon = tokio::spawn(run(cfg.clone(), host.clone(), shutdown.clone()));
        fake.wait("registration", |n| n["status"]["nodeInfo"]["bootID"].is_string())
            .await;
        fake.patch_node(json!({"metadata": {"annotations": {format!("{G}/desiredConfig"): "rendered-1"}}}));
        let exit = tokio::time::timeout(Duration::from_secs(10), daemon)
            .await
            .expect("daemon exits for the first-boot reboot");
        assert_eq!(exit.unwrap().unwrap(), Exit::Reboot);
        let pending = crate::host::PENDING_CMDLINE_PATH;
        assert_eq!(host.read(pending).unwrap(), b"nosmt a=1\n");
        // The boot loses `nosmt`.
        let real = host.resolve(pending).unwrap();
        std::fs::write(&real, "a=1\n").unwrap();
        std::fs::remove_dir_all(host.resolve("/run").unwrap()).unwrap();
        let daemon = tokio::spawn(run(cfg, host.clone(), shutdown.clone()));
        fake.wait("Degraded naming nosmt", |n| {
            let a = &n["metadata"]["annotations"];
            a[format!("{G}/state")] == "Degraded"
                && a[format!("{G}/reason")]
                    .as_str()
                    .is_some_and(|r| r.starts_with("unexpected on-disk state validating against rendered-1: missing expected kernel arguments: [nosmt]"))
        })
        .await;
        assert_eq!(host.kernel_cmdline().unwrap(), "a=1");
        shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), daemon).await;
    }

    #[tokio::test]
    async fn a_failed_apply_degrades_and_is_retried() {
        use fake::G;
        let bad = json!({"ignition": {"version": "3.4.0"}, "storage": {"files": [
            {"path": "/etc/owned", "contents": {"source": "data:,x"}, "user": {"name": "alice"}}]}});
        let mcs = BTreeMap::from([("rendered-1".to_string(), mc_json("rendered-1", bad))]);
        let (url, fake) = fake::start(mcs).await;
        let (_dir, host) = crate::daemon::test_support::sandbox();
        let cfg = DaemonConfig {
            server: url,
            node: "w".into(),
            labels: BTreeMap::new(),
            token: None,
            trust: None,
            ..Default::default()
        };
        let shutdown = CancellationToken::new();
        let daemon = tokio::spawn(run(cfg, Arc::new(host), shutdown.clone()));
        fake.wait("registration", |n| n["status"]["nodeInfo"]["bootID"].is_string())
            .await;
        fake.patch_node(json!({"metadata": {"annotations": {format!("{G}/desiredConfig"): "rendered-1"}}}));
        fake.wait("Degraded", |n| {
            let a = &n["metadata"]["annotations"];
            a[format!("{G}/state")] == "Degraded"
                && a[format!("{G}/reason")]
                    == r#"failed to retrieve file ownership for file "/etc/owned": failed to retrieve UserID for username: alice"#
        })
        .await;
        let good = json!({"ignition": {"version": "3.4.0"}, "storage": {"files": [{"path": "/etc/owned", "contents": {"source": "data:,x"}}]}});
        fake.mcs
            .lock()
            .unwrap()
            .insert("rendered-1".into(), mc_json("rendered-1", good));
        fake.wait("Done after retry", |n| {
            n["metadata"]["annotations"][format!("{G}/state")] == "Done"
        })
        .await;
        shutdown.cancel();
        assert_eq!(daemon.await.unwrap().unwrap(), Exit::Shutdown);
    }

    /// MCO 4.3 step 6: a node whose boot-time check fails (its root was emptied) reports how to
    /// recover, and the force file, honoured while booting and backing off, rewrites the config,
    /// reboots, and the next boot completes.
    #[tokio::test]
    async fn the_force_file_recovers_a_node_that_fails_its_boot_check() {
        use fake::G;
        let cfg1 = json!({"ignition": {"version": "3.4.0"},
            "storage": {"files": [{"path": "/etc/app.conf", "contents": {"source": "data:,one"}}]},
            "systemd": {"units": [{"name": "app.service", "dropins": [{"name": "10-x.conf", "contents": "[Service]\n"}]}]}});
        let mcs = BTreeMap::from([("rendered-1".to_string(), mc_json("rendered-1", cfg1))]);
        let (url, fake) = fake::start(mcs).await;
        let (dir, host) = crate::daemon::test_support::sandbox();
        let host: Arc<dyn Host> = Arc::new(host);
        let cfg = DaemonConfig {
            server: url,
            node: "w".into(),
            labels: BTreeMap::new(),
            token: None,
            trust: None,
            ..Default::default()
        };
        let shutdown = CancellationToken::new();
        let daemon = tokio::spawn(run(cfg.clone(), host.clone(), shutdown.clone()));
        fake.wait("registration", |n| n["status"]["nodeInfo"]["bootID"].is_string())
            .await;
        fake.patch_node(json!({"metadata": {"annotations": {format!("{G}/desiredConfig"): "rendered-1"}}}));
        let state_is = |want: &'static str| move |n: &Value| n["metadata"]["annotations"][format!("{G}/state")] == want;
        fake.wait("Done", state_is("Done")).await;

        // The root is emptied under the running daemon, which is then restarted.
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                std::fs::remove_dir_all(&path).unwrap();
            } else {
                std::fs::remove_file(&path).unwrap();
            }
        }
        shutdown.cancel();
        assert_eq!(daemon.await.unwrap().unwrap(), Exit::Shutdown);
        let shutdown = CancellationToken::new();
        let daemon = tokio::spawn(run(cfg.clone(), host.clone(), shutdown.clone()));
        fake.wait("boot check failed with a recovery hint", |n| {
            let a = &n["metadata"]["annotations"];
            a[format!("{G}/state")] == "Degraded"
                && a[format!("{G}/reason")]
                    == format!(
                        "unexpected on-disk state validating against rendered-1: could not stat file \
                         \"/etc/app.conf\": lstat /etc/app.conf: no such file or directory{RECOVERY_HINT}"
                    )
        })
        .await;

        host.write_atomic(FORCE_FILE, b"", 0o644, crate::host::Owner::ROOT)
            .unwrap();
        let exit = tokio::time::timeout(Duration::from_secs(10), daemon)
            .await
            .expect("the forced update reboots");
        assert_eq!(exit.unwrap().unwrap(), Exit::Reboot);
        assert!(!host.exists(FORCE_FILE), "consumed");
        assert_eq!(host.read("/etc/app.conf").unwrap(), b"one");
        assert_eq!(
            host.read("/etc/systemd/system/app.service.d/10-x.conf").unwrap(),
            b"[Service]\n"
        );
        assert_eq!(fake.annotation("desiredDrain").as_deref(), Some("drain-rendered-1"));

        std::fs::remove_dir_all(host.resolve("/run").unwrap()).unwrap();
        let daemon = tokio::spawn(run(cfg, host.clone(), shutdown.clone()));
        fake.wait("Done after the forced reboot", |n| {
            let a = &n["metadata"]["annotations"];
            a[format!("{G}/state")] == "Done" && a[format!("{G}/reason")] == ""
        })
        .await;
        shutdown.cancel();
        assert_eq!(daemon.await.unwrap().unwrap(), Exit::Shutdown);
    }

    /// The force file found while an update waits for its drain turns that update into a forced
    /// one: the drifted dropin of a unit the update does not change is rewritten too.
    #[tokio::test]
    async fn the_force_file_is_honoured_while_draining() {
        use fake::G;
        use std::sync::atomic::Ordering;
        let config = |c: &str| {
            json!({"ignition": {"version": "3.4.0"},
                "storage": {"files": [{"path": "/etc/app.conf", "contents": {"source": format!("data:,{c}")}}]},
                "systemd": {"units": [{"name": "app.service", "dropins": [{"name": "10-x.conf", "contents": "[Service]\n"}]}]}})
        };
        let mcs = BTreeMap::from([
            ("rendered-1".to_string(), mc_json("rendered-1", config("one"))),
            ("rendered-2".to_string(), mc_json("rendered-2", config("two"))),
        ]);
        let (url, fake) = fake::start(mcs).await;
        let (_dir, host) = crate::daemon::test_support::sandbox();
        let host: Arc<dyn Host> = Arc::new(host);
        let cfg = DaemonConfig {
            server: url,
            node: "w".into(),
            labels: BTreeMap::new(),
            token: None,
            trust: None,
            ..Default::default()
        };
        let shutdown = CancellationToken::new();
        let daemon = tokio::spawn(run(cfg, host.clone(), shutdown.clone()));
        fake.wait("registration", |n| n["status"]["nodeInfo"]["bootID"].is_string())
            .await;
        fake.patch_node(json!({"metadata": {"annotations": {format!("{G}/desiredConfig"): "rendered-1"}}}));
        fake.wait("Done", |n| n["metadata"]["annotations"][format!("{G}/state")] == "Done")
            .await;

        fake.hold_drains.store(true, Ordering::SeqCst);
        fake.patch_node(json!({"metadata": {"annotations": {format!("{G}/desiredConfig"): "rendered-2"}}}));
        fake.wait("drain requested", |n| {
            n["metadata"]["annotations"][format!("{G}/desiredDrain")] == "drain-rendered-2"
        })
        .await;
        let dropin = "/etc/systemd/system/app.service.d/10-x.conf";
        std::fs::write(host.resolve(dropin).unwrap(), "[Service]\nNice=19\n").unwrap();
        host.write_atomic(FORCE_FILE, b"", 0o644, crate::host::Owner::ROOT)
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while host.exists(FORCE_FILE) {
            assert!(Instant::now() < deadline, "the force file is consumed while draining");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        fake.hold_drains.store(false, Ordering::SeqCst);
        fake.patch_node(json!({"metadata": {"labels": {"poke": "1"}}}));
        let exit = tokio::time::timeout(Duration::from_secs(10), daemon)
            .await
            .expect("the forced update reboots");
        assert_eq!(exit.unwrap().unwrap(), Exit::Reboot);
        assert_eq!(host.read("/etc/app.conf").unwrap(), b"two");
        assert_eq!(
            host.read(dropin).unwrap(),
            b"[Service]\n",
            "the unchanged unit's dropin is rewritten"
        );
    }
}
