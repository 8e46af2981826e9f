//! The node's side of the protocol with the server: what the daemon says and asks over REST.
//!
//! Owns the Node's registration ([`register`], [`node_status`]), the connection ([`connect`]),
//! the node watch ([`spawn_node_watch`]), the annotations the daemon writes ([`NodeApi`]:
//! diff-patched, `state`/`reason` truncated, the Done set), the drain handshake's values, the
//! MachineConfig and MachineConfiguration GETs, and the daemon's reports. It decides nothing:
//! when to say what is the policy of [`super::agent`]; of the host it reads only the boot id,
//! and it must not touch the node's files.

use super::phase::Failure;
use crate::client::backoff::Backoff;
use crate::client::watcher::{Event, Watcher};
use crate::client::{Client, ClientError};
use crate::disruption::{MachineConfiguration, Plan};
use crate::host::Host;
use crate::model::{self, Keys, Kind, MachineConfig, Node, NodeAnnotations, NodeState, CONFIG_DRIFT_DETECTED};
use crate::protocol::DrainRequest;
use anyhow::Context as _;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Longest `reason` annotation, in characters (MCO truncates the same way).
pub const MAX_REASON_CHARS: usize = 2000;

/// What the daemon needs to know to start.
#[derive(Clone, Debug)]
pub struct DaemonConfig {
    /// Base URL of the mco server, e.g. `http://127.0.0.1:6443`.
    pub server: String,
    /// Node name (`metadata.name` of the Node object), e.g. `worker-1`.
    pub node: String,
    /// Labels the Node is registered with, e.g. `node-role.kubernetes.io/worker: ""`,
    /// `topology.kubernetes.io/zone: zone-a`.
    pub labels: BTreeMap<String, String>,
    /// The node's bearer token (`--token-file`, `MCO_TOKEN_FILE`): a node token
    /// (`system:node:<name>`, [`crate::auth`]).
    pub token: Option<String>,
    /// The CA an `https://` server must be signed by (`--ca-file`, MCO_CA_FILE).
    pub trust: Option<crate::tls::Trust>,
    /// How often the node lease is renewed (`--lease-renew-interval`; the kubelet's 10 s,
    /// [`crate::model::NODE_LEASE_RENEW_INTERVAL`]); [`super::lease`].
    pub lease_renew_interval: std::time::Duration,
    /// The kubelet health monitor (`--kubelet-healthz-endpoint`), off when `None`;
    /// [`super::kubelet_health`].
    pub kubelet_healthz: Option<super::kubelet_health::KubeletHealthz>,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            server: String::new(),
            node: String::new(),
            labels: BTreeMap::new(),
            token: None,
            trust: None,
            lease_renew_interval: model::NODE_LEASE_RENEW_INTERVAL,
            kubelet_healthz: None,
        }
    }
}

/// The daemon's conversation about its own Node: the latest observation of it and the
/// annotation writes, each patching only what differs from that observation.
pub(super) struct NodeApi {
    pub(super) client: Client,
    pub(super) keys: Keys,
    /// The Node's name (`metadata.name`).
    pub(super) name: String,
    /// The latest observation of the Node (`None` before the first, and once it was deleted).
    pub(super) node: Option<Node>,
}

impl NodeApi {
    /// The daemon's annotations on the observed Node (empty before the first observation).
    pub(super) fn annotations(&self) -> NodeAnnotations {
        self.node
            .as_ref()
            .map(|n| NodeAnnotations::read(n, &self.keys))
            .unwrap_or_default()
    }

    /// The annotations whose change asks the daemon for something new: desiredConfig and the
    /// drain handshake.
    pub(super) fn triggers(&self) -> (String, String, String) {
        let a = self.annotations();
        (a.desired_config, a.desired_drain, a.last_applied_drain)
    }

    /// Takes a newer observation of the Node (older resourceVersions are ignored).
    pub(super) fn observe(&mut self, seen: Option<Node>) {
        let Some(seen) = seen else { return };
        let rv = |n: &Node| {
            n.metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse::<u64>().ok())
        };
        if let (Some(have), Some(new)) = (self.node.as_ref().and_then(rv), rv(&seen)) {
            if new < have {
                return;
            }
        }
        self.node = Some(seen);
    }

    /// Merge-patches the annotations that differ from the observed Node (`None` removes).
    pub(super) async fn annotate(&mut self, changes: &[(String, Option<&str>)]) -> Result<(), ClientError> {
        let mut patch = serde_json::Map::new();
        for (key, value) in changes {
            let have = self
                .node
                .as_ref()
                .and_then(|n| n.metadata.annotations.as_ref())
                .and_then(|a| a.get(key));
            if have.map(String::as_str) != *value {
                patch.insert(key.clone(), value.map_or(Value::Null, |v| Value::String(v.to_string())));
            }
        }
        if patch.is_empty() {
            return Ok(());
        }
        tracing::debug!(patch = %serde_json::Value::Object(patch.clone()), "annotating node");
        let body = json!({"metadata": {"annotations": patch}});
        fail::fail_point!("daemon::annotate::before", |_| crate::host::sigkill_self());
        let updated = self.client.merge_patch(Kind::Node, &self.name, &body, false).await?;
        fail::fail_point!("daemon::annotate::after", |_| crate::host::sigkill_self());
        if let Ok(node) = serde_json::from_value::<Node>(updated) {
            self.observe(Some(node));
        }
        Ok(())
    }

    pub(super) async fn set_state(&mut self, state: NodeState, reason: &str) -> Result<(), ClientError> {
        let reason = truncate(reason);
        let changes = [
            (self.keys.state(), Some(state.as_str())),
            (self.keys.reason(), Some(reason.as_str())),
        ];
        self.annotate(&changes).await
    }

    /// `state=Degraded`, `reason=<message>` for a drift the monitor found, written with the
    /// reason `ConfigDriftDetected` (the `x-mco-reason` header): the server's Kubernetes Event
    /// for it is then MCO's Warning `ConfigDriftDetected` with the message as its text
    /// (`onConfigDrift`, `pkg/daemon/daemon.go`; [`crate::history::core_event`]).
    pub(super) async fn set_drift_state(&mut self, message: &str) -> Result<(), ClientError> {
        let event = Some(CONFIG_DRIFT_DETECTED);
        self.set_state_as(NodeState::Degraded, message, event).await
    }

    /// [`NodeApi::set_state`], written with `event` (MCO's Event reason for it) as the request's
    /// reason, when given.
    pub(super) async fn set_state_as(
        &mut self,
        state: NodeState,
        reason: &str,
        event: Option<&str>,
    ) -> Result<(), ClientError> {
        let Some(event) = event else {
            return self.set_state(state, reason).await;
        };
        let marked = self.client.clone().with_reason(Some(event.to_string()));
        let plain = std::mem::replace(&mut self.client, marked);
        let r = self.set_state(state, reason).await;
        self.client = plain;
        r
    }

    /// The annotations of a Done node: `state=Done`, `reason=""`, `currentConfig=<config>`,
    /// `post-config-action` removed, and
    /// the post-config actions ([`crate::disruption::ACTIONS_ANNOTATION`]) removed when they were
    /// chosen for another config: an update abandoned by setting `desiredConfig` back (the
    /// Degraded-node recovery, with or without the force file) never ran them, and no annotation
    /// of a Done node names a config it never reached.
    pub(super) async fn set_done(&mut self, config: &str) -> Result<(), ClientError> {
        let actions = crate::disruption::ACTIONS_ANNOTATION.to_string();
        let stale_actions = self
            .node
            .as_ref()
            .and_then(|n| n.metadata.annotations.as_ref())
            .and_then(|a| a.get(&actions))
            .is_some_and(|v| crate::disruption::actions_config(v) != Some(config));
        let mut changes = vec![
            (self.keys.current_config(), Some(config)),
            (self.keys.state(), Some(NodeState::Done.as_str())),
            (self.keys.reason(), Some("")),
            (self.keys.post_config_action(), None),
        ];
        if stale_actions {
            changes.push((actions, None));
        }
        self.annotate(&changes).await
    }

    pub(super) async fn fetch(&self, name: &str) -> Result<Arc<MachineConfig>, Failure> {
        self.client
            .get::<MachineConfig>(Kind::MachineConfig, name)
            .await
            .map(Arc::new)
            .map_err(|e| Failure::Degraded(format!("failed to get MachineConfig {name}: {e}")))
    }

    /// The node disruption plan (mco-facts 6.3, 6.4) under the MachineConfiguration `cluster`
    /// read through the API (the defaults when there is none).
    pub(super) async fn plan(&self, current: &MachineConfig, desired: &MachineConfig) -> Result<Plan, Failure> {
        let policies = self.disruption_policies().await?;
        crate::disruption::plan(current, desired, &policies).map_err(Failure::Degraded)
    }

    /// The node disruption policies in force: the MachineConfiguration `cluster`'s, read
    /// through the API (the defaults when there is none).
    pub(super) async fn disruption_policies(&self) -> Result<crate::disruption::NodeDisruptionPolicyConfig, Failure> {
        let cluster = match self
            .client
            .get::<MachineConfiguration>(Kind::MachineConfiguration, crate::disruption::CLUSTER)
            .await
        {
            Ok(m) => Some(m),
            Err(e) if e.is_not_found() => None,
            Err(e) => {
                return Err(Failure::Degraded(format!(
                    "could not get the node disruption policy (MachineConfiguration cluster): {e}"
                )))
            }
        };
        Ok(crate::disruption::policies_for(cluster.as_ref()))
    }

    /// Posts `status.capacity` and `status.allocatable` when they differ from the observed
    /// Node's, as a restarted kubelet does: it reads its configuration when it starts, so a
    /// rebootless update that restarts `kubelet.service` brings its new reservations and
    /// `maxPods` into the Node's status (the kubelet's `MachineInfo` setter, posted by its
    /// `syncNodeStatus`). Returns whether it posted.
    pub(super) async fn post_resources(&self, capacity: Value, allocatable: Value) -> Result<bool, ClientError> {
        let status = self.node.as_ref().and_then(|n| n.status.as_ref());
        let seen = |v: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>| {
            v.and_then(|m| serde_json::to_value(m).ok()).unwrap_or(Value::Null)
        };
        if status.is_some_and(|s| seen(s.capacity.as_ref()) == capacity && seen(s.allocatable.as_ref()) == allocatable)
        {
            return Ok(false);
        }
        let patch = json!({"status": {"capacity": capacity, "allocatable": allocatable}});
        self.client.merge_patch(Kind::Node, &self.name, &patch, true).await?;
        tracing::info!(%capacity, %allocatable, "node status posted: the kubelet's configuration changed its resources");
        Ok(true)
    }

    /// Posts a report to the server's metrics ([`super::report::send`]).
    pub(super) fn report(&self, kind: crate::metrics::ReportKind, detail: &str) {
        super::report::send(&self.client, &self.name, kind, detail);
    }

    /// Posts a drift report with its record and waits for the answer, so the log keeps a
    /// node's drift records in the order they happened ([`super::report::send_drift`]).
    pub(super) async fn report_drift(
        &self,
        kind: crate::metrics::ReportKind,
        reason: &str,
        record: crate::drift::DriftRecord,
    ) {
        super::report::send_drift(&self.client, &self.name, kind, reason, record).await;
    }
}

/// Truncates a reason to [`MAX_REASON_CHARS`] characters.
fn truncate(reason: &str) -> String {
    reason.chars().take(MAX_REASON_CHARS).collect()
}

/// Connects (asking the server its API group), retrying with backoff; `None` on shutdown.
pub(super) async fn connect(cfg: &DaemonConfig, shutdown: &CancellationToken) -> Option<Client> {
    let mut backoff = Backoff::default();
    loop {
        match Client::connect_with(
            &cfg.server,
            &format!("daemon:{}", cfg.node),
            cfg.token.clone(),
            cfg.trust.as_ref(),
        )
        .await
        {
            Ok(c) => return Some(c),
            Err(e) => tracing::warn!(error = %e, retry_in = ?backoff.current(), "cannot reach the server"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            _ = tokio::time::sleep(backoff.failed()) => {}
        }
    }
}

/// The `status` the daemon reports: Ready=True, the node info with the boot id, and the
/// capacity, allocatable resources and addresses of [`super::resources`].
fn node_status(boot_id: &str, cfg: &DaemonConfig, host: &dyn Host) -> Value {
    let (capacity, allocatable) = resources(host);
    let now = serde_json::to_value(model::now()).unwrap_or(Value::Null);
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    json!({
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "mco daemon is posting ready status",
            "lastHeartbeatTime": now, "lastTransitionTime": now
        }],
        "nodeInfo": {
            "architecture": arch, "bootID": boot_id, "containerRuntimeVersion": "none",
            "kernelVersion": "mco", "kubeProxyVersion": "", "kubeletVersion": "mco",
            "machineID": "", "operatingSystem": std::env::consts::OS, "osImage": "mco node",
            "systemUUID": ""
        },
        "capacity": capacity,
        "allocatable": allocatable,
        "addresses": super::resources::addresses(&cfg.server, &cfg.node),
    })
}

/// `status.capacity` and `status.allocatable` of this machine under the kubelet configuration
/// on `host` (`/etc/kubernetes/kubelet.conf`; the kubelet's defaults without one), as
/// [`super::resources`] computes them.
pub(super) fn resources(host: &dyn Host) -> (Value, Value) {
    let kubelet =
        super::resources::parse_kubelet_config(host.read(crate::generate::templates::KUBELET_CONF).ok().as_deref());
    let machine = super::resources::Machine::read(host.root());
    super::resources::capacity_and_allocatable(&machine, &kubelet)
}

/// Registers the Node (create, or patch labels when it exists) and posts its status. Transport
/// errors are retried with backoff; returns `false` on shutdown.
pub(super) async fn register(
    client: &Client,
    cfg: &DaemonConfig,
    host: &dyn Host,
    current: Option<&str>,
    shutdown: &CancellationToken,
) -> anyhow::Result<bool> {
    let boot_id = host.boot_id().context("cannot read the boot id")?;
    let status = node_status(&boot_id, cfg, host);
    let mut node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": cfg.node, "labels": cfg.labels},
        "status": status,
    });
    // A node that already runs a config says so when it (re-)creates its Node object, as MCO's
    // node-annotations seed does; the rollout then treats it as an existing node.
    if let Some(c) = current {
        let keys = Keys::new(client.group());
        node["metadata"]["annotations"] = json!({keys.current_config(): c, keys.desired_config(): c});
    }
    let mut backoff = Backoff::default();
    loop {
        let attempt = async {
            match client.create(Kind::Node, &node, Some("node registered")).await {
                Ok(_) => {}
                Err(e) if e.reason() == Some("AlreadyExists") => {
                    // Labels a node may not change on its existing Node (NodeRestriction:
                    // `node-role.kubernetes.io/*`, which decides its pool) are the admin's once
                    // it exists: only the others are set again.
                    let own: BTreeMap<&String, &String> = cfg
                        .labels
                        .iter()
                        .filter(|(k, _)| !crate::auth::is_forbidden_node_label(k))
                        .collect();
                    let labels = json!({"metadata": {"labels": own}});
                    client.merge_patch(Kind::Node, &cfg.node, &labels, false).await?;
                }
                Err(e) => return Err(e),
            }
            client
                .merge_patch(Kind::Node, &cfg.node, &json!({"status": status}), true)
                .await
                .map(drop)
        };
        match attempt.await {
            Ok(()) => {
                tracing::info!(boot_id, "node registered");
                return Ok(true);
            }
            Err(e @ ClientError::Status(_)) => return Err(e).context("node registration refused"),
            Err(e) => tracing::warn!(error = %e, retry_in = ?backoff.current(), "node registration failed"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(false),
            _ = tokio::time::sleep(backoff.failed()) => {}
        }
    }
}

/// Keeps the latest observation of Node `name` in a watch channel, from a
/// [`crate::client::watcher::Watcher`] of it (field selector `metadata.name`, as the kubelet
/// lists and watches its own Node): the list's Node, then each change. A cut or ended watch
/// resumes from the newest resourceVersion seen without getting the Node again, as client-go's
/// reflector does; only `410 Expired` lists it again. A deleted Node (none in a list, or a
/// DELETED event) is sent as `None`, so the agent registers it again and the watch sees it come
/// back. Retries back off 1 s .. 60 s while the server cannot be reached, reset by every watch
/// it accepts.
pub(super) fn spawn_node_watch(
    client: Client,
    name: String,
    cancel: CancellationToken,
) -> watch::Receiver<Option<Node>> {
    let (tx, rx) = watch::channel(None);
    tokio::spawn(async move {
        let mut watcher = Watcher::named(client, Kind::Node, &name);
        loop {
            let ev = tokio::select! {
                _ = cancel.cancelled() => return,
                ev = watcher.next() => ev,
            };
            let seen = match ev {
                Ok(Event::Listed { objects, .. }) => objects.into_iter().next(),
                Ok(Event::Applied { object, .. }) => Some(object),
                Ok(Event::Deleted { .. }) => None,
                Err(e) => {
                    tracing::warn!(error = %e, resource_version = ?watcher.resource_version(), "cannot watch the node");
                    continue;
                }
            };
            match seen.map(serde_json::from_value::<Node>) {
                Some(Ok(node)) => {
                    tx.send_replace(Some(node));
                }
                Some(Err(e)) => tracing::warn!(error = %e, "undecodable Node in the watch"),
                None => {
                    tracing::warn!("the node was deleted; registering it again");
                    tx.send_replace(None);
                }
            }
        }
    });
    rx
}

/// True for a `drain-<config>` request (of `desiredDrain` or `lastAppliedDrain`).
pub(super) fn is_drain(value: &str) -> bool {
    matches!(DrainRequest::parse(value), Some(DrainRequest::Drain(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_truncated_to_2000_chars() {
        let long = "é".repeat(2500);
        assert_eq!(truncate(&long).chars().count(), MAX_REASON_CHARS);
        assert_eq!(truncate("short"), "short");
    }

    #[test]
    fn node_status_carries_ready_and_boot_id() {
        let dir = tempfile::tempdir().unwrap();
        let host = crate::host::SandboxHost::new(dir.path());
        let cfg = DaemonConfig {
            server: "https://127.0.0.1:6443".into(),
            node: "worker-0".into(),
            ..Default::default()
        };
        let s = node_status("b-1", &cfg, &host);
        assert_eq!(s["addresses"][0], json!({"type": "InternalIP", "address": "127.0.0.1"}));
        assert_eq!(s["addresses"][1], json!({"type": "Hostname", "address": "worker-0"}));
        assert_eq!(s["capacity"]["pods"], "110");
        assert_eq!(s["conditions"][0]["type"], "Ready");
        assert_eq!(s["conditions"][0]["status"], "True");
        assert_eq!(s["nodeInfo"]["bootID"], "b-1");
        let status: model::NodeStatus = serde_json::from_value(s).unwrap();
        assert_eq!(status.node_info.unwrap().boot_id, "b-1");
    }
}
