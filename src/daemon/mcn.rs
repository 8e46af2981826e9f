//! The daemon's writes of its own node's MachineConfigNode status (MCO's daemon calls
//! `upgrademonitor.GenerateAndApplyMachineConfigNodes` at each phase of `pkg/daemon`): each
//! [`Step`] applied by [`crate::model::machine_config_node::apply_step`] to the MCN as read,
//! written back to its status subresource with its resourceVersion (retried on a conflict with
//! the controllers' writes). As in MCO, a failed write is logged and never fails the update;
//! an MCN not created yet by the controller is skipped.

use super::node_api::NodeApi;
use super::phase::Held;
use crate::model::machine_config_node::{apply_step, MachineConfigNode, Step};
use crate::model::Kind;

/// Creates the node's MCN when the controller has not yet (MCO's daemon does the same,
/// `createOrGetMachineConfigNode`, then `Create`): its primary pool read from the pools, owned
/// by the Node. `false` when the node is in no pool (no MCN then, as in MCO); an MCN created
/// meanwhile by the controller counts as created.
async fn create(api: &NodeApi) -> Result<bool, crate::client::ClientError> {
    let Some(node) = &api.node else {
        return Ok(false);
    };
    let list = api.client.list(Kind::MachineConfigPool).await?;
    let pools: Vec<crate::model::MachineConfigPool> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| serde_json::from_value(p.clone()).ok())
        .collect();
    let refs: Vec<&crate::model::MachineConfigPool> = pools.iter().collect();
    let Ok(Some(pool)) = crate::rollout::primary_pool(&refs, node) else {
        return Ok(false);
    };
    let uid = node.metadata.uid.as_deref().unwrap_or("");
    let api_version = Kind::MachineConfigNode.api_version(api.client.group());
    let desired = api.annotations().desired_config;
    let mcn = crate::model::machine_config_node::for_node(&api.name, uid, pool, &desired, &api_version);
    let body = serde_json::to_value(mcn).expect("serializes");
    match api
        .client
        .create(Kind::MachineConfigNode, &body, Some("MachineConfigNode created"))
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if e.is_conflict() || e.reason() == Some("AlreadyExists") => Ok(true),
        Err(e) => Err(e),
    }
}

/// How many times a write that met a conflicting write is tried again, after a backoff
/// doubling from [`CONFLICT_BACKOFF`] (client-go's `RetryOnConflict` backs off too): a
/// controller's write of the same MCN may be appended but not yet readable for the length of
/// a group-commit flush, and a re-read at once would meet the same conflict.
const CONFLICT_RETRIES: u32 = 8;
const CONFLICT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(10);

/// The MCN writes of one daemon, with the one thing it remembers: the config it last reported
/// `Updated` True on, so an idle node's every pass does not read its MCN again.
pub(super) struct McnReporter {
    updated_on: Option<String>,
    /// Whether this run of the daemon has not finished its first sync (MCO's `dn.booting`):
    /// the first Done after the start is reported as Resumed.
    booting: bool,
}

impl McnReporter {
    pub(super) fn new() -> McnReporter {
        McnReporter {
            updated_on: None,
            booting: true,
        }
    }

    /// At the boot check (`syncNode` before `checkStateOnFirstRun`): RebootedNode True when the
    /// node comes back from the update's reboot (the `Rebooting` post-config action).
    pub(super) async fn booted(&mut self, api: &NodeApi) {
        let node = api
            .node
            .as_ref()
            .map(|n| crate::model::annotation(&n.metadata, &api.keys.post_config_action()));
        if node == Some("Rebooting") {
            self.report(api, Step::rebooted()).await;
        }
    }

    /// Done on `config` after an uncordon: Resumed once per run (`syncNode`'s first sync).
    pub(super) async fn done(&mut self, api: &NodeApi, config: &str) {
        if std::mem::take(&mut self.booting) {
            self.report(api, Step::resumed(config)).await;
        }
    }

    /// Idle with nothing to update: Updated True once the node is Done.
    pub(super) async fn idle(&mut self, api: &NodeApi) {
        if api.annotations().state == crate::model::NodeState::Done.as_str() {
            self.report(api, Step::updated(&api.name)).await;
        }
    }

    /// The update planned (`update`): UpdatePrepared True, and without a drain the Drained
    /// False of MCO's "not required".
    pub(super) async fn planned(&mut self, api: &NodeApi, drain: bool) {
        self.report(api, Step::prepared(drain)).await;
        if !drain {
            self.report(api, Step::drain_not_required()).await;
        }
    }

    /// Before (`done` false) and after the writes: AppliedFilesAndOS, with MCO's "OS will
    /// [not] need an update" (osImageURL, extensions or kernelType differ) and "SSH Keys"
    /// (`passwd` differs).
    pub(super) async fn files(&mut self, api: &NodeApi, old: &Held, new: &Held, done: bool) {
        let (Ok(o), Ok(n)) = (old.load(), new.load()) else {
            return;
        };
        let (o, n) = (&o.spec, &n.spec);
        let os = o.os_image_url != n.os_image_url || o.extensions != n.extensions || o.kernel_type != n.kernel_type;
        let passwd = |c: &Option<serde_json::Value>| c.as_ref().map(|c| c["passwd"].clone());
        let ssh = passwd(&o.config) != passwd(&n.config);
        let step = if done {
            Step::applied(os, ssh)
        } else {
            Step::applying(os, ssh)
        };
        self.report(api, step).await;
    }

    /// The post-config actions (`performPostConfigChangeNodeDisruptionAction`): RebootedNode
    /// Unknown for a reboot, UpdatePostActionComplete for None and each reload (Special is
    /// CRI-O's, DaemonReload `daemon-reload`; a Restart sets none), then NodeDegraded False:
    /// the update succeeded (MCO's deferred `reportMachineNodeDegradeStatus`).
    pub(super) async fn post_actions(&mut self, api: &NodeApi, actions: &[crate::model::Action]) {
        use crate::model::ActionType;
        for a in actions {
            let step = match a.kind {
                ActionType::Reboot => Step::reboot_required(),
                ActionType::None => Step::no_reboot(),
                ActionType::Reload => Step::reloaded(a.reload.as_ref().map_or("", |s| s.service_name.as_str())),
                ActionType::Special => Step::reloaded("crio"),
                ActionType::DaemonReload => Step::reloaded("daemon-reload"),
                ActionType::Restart | ActionType::Drain => continue,
            };
            self.report(api, step).await;
        }
        self.report(api, Step::degraded(&api.name, None)).await;
    }

    /// Writes `step` on the node's MCN (nothing when it would change nothing).
    pub(super) async fn report(&mut self, api: &NodeApi, step: Step) {
        let ann = api.annotations();
        let updated = step.parent.type_ == crate::model::machine_config_node::UPDATED && step.parent.status == "True";
        if updated && self.updated_on.as_deref() == Some(ann.current_config.as_str()) {
            return;
        }
        self.updated_on = None;
        for attempt in 0..CONFLICT_RETRIES {
            if attempt > 0 {
                tokio::time::sleep(CONFLICT_BACKOFF * 2u32.pow(attempt - 1)).await;
            }
            let cur: MachineConfigNode = match api.client.get(Kind::MachineConfigNode, &api.name).await {
                Ok(m) => m,
                Err(e) if e.is_not_found() => match create(api).await {
                    Ok(true) => continue,
                    Ok(false) => return,
                    Err(e) => {
                        tracing::warn!(error = %e, "could not create the MachineConfigNode");
                        return;
                    }
                },
                Err(e) => {
                    tracing::warn!(error = %e, "could not read the MachineConfigNode");
                    return;
                }
            };
            let mut new = cur.clone();
            let now = crate::model::now();
            if apply_step(&mut new, &step, &ann.desired_config, &ann.current_config, &now) {
                let body = serde_json::to_value(&new).expect("serializes");
                match api
                    .client
                    .replace_status(Kind::MachineConfigNode, &api.name, &body)
                    .await
                {
                    Ok(_) => {}
                    Err(e) if e.is_conflict() => {
                        tracing::debug!(error = %e, "MachineConfigNode write conflicted; reading it again");
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, condition = step.parent.type_, "could not write the MachineConfigNode");
                        return;
                    }
                }
            }
            if updated {
                self.updated_on = Some(ann.current_config.clone());
            }
            return;
        }
        tracing::warn!(
            condition = step.parent.type_,
            "MachineConfigNode write kept conflicting; not reported"
        );
    }
}
