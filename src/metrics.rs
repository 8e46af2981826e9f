//! Prometheus metrics of one server (no global registry: each [`crate::command::Hub`] owns a
//! [`Metrics`], handed to whoever records into it).
//!
//! Owns the metric families and the text exposition ([`Metrics::encode`]). Two kinds:
//! - recorded as things happen: events appended by type, append and flush latency, render
//!   duration, watch connections, API request latency, and what daemons report through the API
//!   (drift detections, failed reboots, the time of the last drift);
//! - computed from the projection at each scrape (level, never stale): MCO's `mcd_state`,
//!   `mcd_update_state`, `mco_state`, the pool machine counts and `mcc_pool_alert`.
//!
//! MCO's names, types, labels and values (pkg/daemon/metrics.go, pkg/controller/common/metrics.go)
//! are kept: `mcd_state` and `mcd_update_state` hold the time their labels were set (MCO's
//! `UpdateStateMetric`: `Reset`, then `SetToCurrentTime`, one series per node), here the time of
//! the event that set the node's state ([`Metrics::node_observed`]). The server covers the
//! whole fleet, so daemon metrics carry a `node` label where MCO relies on each daemon's own
//! scrape target. It must not write anything: metrics are not state.

use crate::model::{Keys, NodeAnnotations};
use crate::state::State;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;
use std::time::Duration;

/// A label set: `(name, value)` pairs.
pub type Labels = Vec<(String, String)>;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn latency() -> Histogram {
    // 50 µs .. ~3.3 s
    Histogram::new(exponential_buckets(0.00005, 4.0, 9))
}

/// The server's recorded metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// `mco_store_events_appended_total{type}`: events appended to the log, by event type.
    pub events_appended: Family<Labels, Counter>,
    /// `mco_store_append_duration_seconds`: one batch written to the log (before the flush).
    pub append_seconds: Histogram,
    /// `mco_store_flush_duration_seconds`: one writer's wait until its batch is durable
    /// (queueing behind an fsync in progress included).
    pub flush_seconds: Histogram,
    /// `mco_store_fsync_duration_seconds`: one sled flush (or, on the etcd backend, one commit
    /// of the records appended since the last: its etcd round trips), the durable write that the
    /// writers waiting at that moment share (group commit); etcd's
    /// `etcd_disk_wal_fsync_duration_seconds`.
    pub fsync_seconds: Histogram,
    /// `mco_store_etcd_writer`: 1 while this server holds the etcd writer lease of the log (it
    /// runs the controllers and takes writes), 0 otherwise and on the sled backend.
    pub store_writer: Gauge,
    /// `mco_render_duration_seconds`: rendering one pool's MachineConfigs.
    pub render_seconds: Histogram,
    /// `mco_api_watch_connections`: watches open now.
    pub watch_connections: Gauge,
    /// `mco_api_request_duration_seconds{verb,resource}`: time to the response head
    /// (Kubernetes verbs: get, list, create, update, patch, delete; watches are not timed).
    pub request_seconds: Family<Labels, Histogram>,
    /// `mco_drift_detections_total{node,mismatch}`: drifts the daemons reported, by the kind
    /// of mismatch ([`crate::drift::mismatch`], the drift record's: a bounded set, never the
    /// path, which as a label value would make one series per drifted path).
    pub drift_detections: Family<Labels, Counter>,
    /// `mcd_pivot_errors_total{node}`: errors while switching the OS image or kernel type
    /// (MCO's is a gauge, incremented, with this name: pkg/daemon/metrics.go).
    pub pivot_errors: Family<Labels, Gauge>,
    /// `mcc_boot_image_skew_enforcement_none`: always 0 (mco has no boot images to skew).
    pub boot_image_skew_none: Gauge,
    /// `mcd_kubelet_state{node}`: the consecutive failed checks of the node's kubelet health
    /// monitor (MCO's gauge, pkg/daemon/metrics.go; the daemon's `kubelet_health`), 0 until
    /// the daemon reports.
    pub kubelet_state: Family<Labels, Gauge>,
    /// What [`Metrics::node_observed`] last saw of each node, with the times it changed.
    node_times: Mutex<HashMap<String, NodeTimes>>,
    /// `mcd_config_drift{node}`: Unix time of the node's last drift detection (MCO: "timestamp
    /// for config drift"), 0 once the node's files match again (MCO clears it when the drift
    /// monitor starts on a node that is not Degraded by drift, `initConfigDriftMetric`).
    pub config_drift: Family<Labels, Gauge<f64, AtomicU64>>,
    /// `mcd_reboots_failed_total{node}`: reboots the daemon asked for that failed.
    pub reboots_failed: Family<Labels, Counter>,
    /// `mcc_drain_err{node}`: 1 while the node's drain (eviction) fails, 0 once it succeeds
    /// (MCO's drain controller, pkg/controller/drain).
    pub drain_err: Family<Labels, Gauge>,
    /// `mco_api_handler_panics_total`: API requests whose handler (or middleware, blocking
    /// task or watch stream) panicked; each was answered 500 `InternalError` (or its stream
    /// ended). Any count is a bug: the test suite fails on one.
    pub handler_panics: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let events_appended = Family::<Labels, Counter>::default();
        let append_seconds = latency();
        let flush_seconds = latency();
        let fsync_seconds = latency();
        let store_writer = Gauge::default();
        let render_seconds = latency();
        let watch_connections = Gauge::default();
        let request_seconds = Family::<Labels, Histogram>::new_with_constructor(latency as fn() -> Histogram);
        let drift_detections = Family::<Labels, Counter>::default();
        let config_drift = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        let reboots_failed = Family::<Labels, Counter>::default();
        let drain_err = Family::<Labels, Gauge>::default();
        let handler_panics = Counter::default();
        let pivot_errors = Family::<Labels, Gauge>::default();
        let boot_image_skew_none = Gauge::default();
        let kubelet_state = Family::<Labels, Gauge>::default();
        // As MCO, the vector exists before any drain.
        drain_err.get_or_create(&labels(&[("node", "initialize")])).set(0);
        registry.register("mcc_drain_err", "logs failed drain", drain_err.clone());
        registry.register(
            "mco_store_events_appended",
            "Events appended to the event log, by event type",
            events_appended.clone(),
        );
        registry.register(
            "mco_store_append_duration_seconds",
            "Time to write one batch of events to the log (before the flush)",
            append_seconds.clone(),
        );
        registry.register(
            "mco_store_flush_duration_seconds",
            "Time a writer waits until its appended events are durable (queueing included)",
            flush_seconds.clone(),
        );
        registry.register(
            "mco_store_fsync_duration_seconds",
            "Time of one sled flush or etcd commit, the durable write shared by the writers waiting for it",
            fsync_seconds.clone(),
        );
        registry.register(
            "mco_store_etcd_writer",
            "1 while this server holds the etcd writer lease of the event log",
            store_writer.clone(),
        );
        registry.register(
            "mco_render_duration_seconds",
            "Time to render one pool's MachineConfigs into its rendered config",
            render_seconds.clone(),
        );
        registry.register(
            "mco_api_watch_connections",
            "Watch streams open now",
            watch_connections.clone(),
        );
        registry.register(
            "mco_api_request_duration_seconds",
            "API request latency to the response head, by Kubernetes verb and resource",
            request_seconds.clone(),
        );
        registry.register(
            "mco_drift_detections",
            "Config drifts detected by node daemons, by node and kind of mismatch",
            drift_detections.clone(),
        );
        registry.register(
            "mcd_config_drift",
            "timestamp for config drift (Unix seconds of the node's last drift detection)",
            config_drift.clone(),
        );
        registry.register(
            "mcd_reboots_failed",
            "Total number of reboots that failed.",
            reboots_failed.clone(),
        );
        registry.register(
            "mcd_pivot_errors_total",
            "Total number of errors encountered during pivot.",
            pivot_errors.clone(),
        );
        registry.register(
            "mcc_boot_image_skew_enforcement_none",
            "Set to 1 when boot image skew enforcement mode is None, indicating scaling may not be successful as bootimages are out of date",
            boot_image_skew_none.clone(),
        );
        registry.register(
            "mcd_kubelet_state",
            "state of kubelet health monitor",
            kubelet_state.clone(),
        );
        registry.register(
            "mco_api_handler_panics",
            "API requests whose handler panicked (answered 500 InternalError); any is a bug",
            handler_panics.clone(),
        );
        Metrics {
            registry,
            events_appended,
            append_seconds,
            flush_seconds,
            fsync_seconds,
            store_writer,
            render_seconds,
            watch_connections,
            request_seconds,
            drift_detections,
            config_drift,
            reboots_failed,
            drain_err,
            handler_panics,
            pivot_errors,
            boot_image_skew_none,
            kubelet_state,
            node_times: Mutex::new(HashMap::new()),
        }
    }

    /// Notes a node's state, reason and current config as of `at` (Unix seconds: the time of
    /// the event that set them): the times `mcd_state` and `mcd_update_state` report move only
    /// when their labels change, as MCO's daemon sets them when it sets the state
    /// (`UpdateStateMetric` in `getStateAndConfigs` and `updateConfigAndState`).
    pub fn node_observed(&self, node: &str, a: &NodeAnnotations<&str>, at: f64) {
        let (state, reason) = mcd_state_labels(a);
        let update = mcd_update_labels(a);
        let mut times = self.node_times.lock().expect("node times lock");
        let t = times.entry(node.to_string()).or_insert_with(|| NodeTimes {
            state: (state.clone(), reason.clone()),
            state_since: at,
            update: update.clone(),
            update_since: at,
        });
        if t.state != (state.clone(), reason.clone()) {
            t.state = (state, reason);
            t.state_since = at;
        }
        if t.update != update {
            t.update = update;
            t.update_since = at;
        }
    }

    /// Records one API request whose handler panicked.
    pub fn handler_panicked(&self) {
        self.handler_panics.inc();
    }

    /// The API requests whose handler panicked since the server started.
    pub fn handler_panic_count(&self) -> u64 {
        self.handler_panics.get()
    }

    /// Records a drain's outcome for `node` (`failed`: its eviction failed).
    pub fn drain_failed(&self, node: &str, failed: bool) {
        self.drain_err
            .get_or_create(&labels(&[("node", node)]))
            .set(i64::from(failed));
    }

    /// Records one appended event of type `event_type`.
    pub fn appended(&self, event_type: &str) {
        self.events_appended
            .get_or_create(&labels(&[("type", event_type)]))
            .inc();
    }

    /// Records an API request.
    pub fn request(&self, verb: &str, resource: &str, took: Duration) {
        self.request_seconds
            .get_or_create(&labels(&[("verb", verb), ("resource", resource)]))
            .observe(took.as_secs_f64());
    }

    /// Records what a daemon reported (see [`Report`]).
    pub fn report(&self, r: &Report) {
        let node = [("node", r.node.as_str())];
        match r.kind {
            ReportKind::Drift => {
                self.drift_detections
                    .get_or_create(&labels(&[
                        ("node", &r.node),
                        ("mismatch", crate::drift::mismatch(&r.reason)),
                    ]))
                    .inc();
                self.config_drift
                    .get_or_create(&labels(&node))
                    .set(jiff::Timestamp::now().as_millisecond() as f64 / 1000.0);
            }
            ReportKind::DriftResolved => {
                self.config_drift.get_or_create(&labels(&node)).set(0.0);
            }
            ReportKind::DriftReverted => {}
            ReportKind::RebootFailed => {
                self.reboots_failed.get_or_create(&labels(&node)).inc();
            }
            ReportKind::PivotFailed => {
                self.pivot_errors.get_or_create(&labels(&node)).inc();
            }
            ReportKind::KubeletHealth => {
                self.kubelet_state
                    .get_or_create(&labels(&node))
                    .set(i64::from(r.failures));
            }
        }
    }

    /// The exposition (OpenMetrics text, which Prometheus scrapes): the recorded families, then
    /// the level families computed from `state`.
    pub fn encode(&self, state: &State, keys: &Keys) -> String {
        // Every known node has its daemon counters, at 0 until it reports (MCO's are always
        // present on each daemon's own endpoint).
        let now = jiff::Timestamp::now().as_millisecond() as f64 / 1000.0;
        for (name, n) in state.nodes.iter() {
            let node = labels(&[("node", name)]);
            let _ = self.reboots_failed.get_or_create(&node);
            let _ = self.config_drift.get_or_create(&node);
            let _ = self.pivot_errors.get_or_create(&node);
            let _ = self.kubelet_state.get_or_create(&node);
            // A node no event was folded for since this server started (read from a snapshot):
            // its times start now, as MCO's daemon sets them again when it starts.
            self.node_observed(name, &NodeAnnotations::view(n, keys), now);
        }
        let times = {
            let mut t = self.node_times.lock().expect("node times lock");
            t.retain(|name, _| state.nodes.contains_key(name));
            t.clone()
        };
        let mut out = String::new();
        let _ = encode(&mut out, &self.registry);
        let level = level_registry(state, &times);
        let mut more = String::new();
        let _ = encode(&mut more, &level);
        let recorded = out.strip_suffix("# EOF\n").unwrap_or(&out).to_string();
        without_added_full_stops(&(recorded + &more))
    }

    /// [`Metrics::encode`] in the exposition format a scrape asked for.
    pub fn encode_as(&self, state: &State, keys: &Keys, format: Format) -> String {
        let text = self.encode(state, keys);
        match format {
            Format::OpenMetrics => text,
            Format::Text => openmetrics_to_text(&text),
        }
    }
}

/// The exposition formats `/metrics` serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0.0 (`application/openmetrics-text; version=1.0.0`): what Prometheus asks
    /// for first.
    OpenMetrics,
    /// Prometheus' text format 0.0.4 (`text/plain; version=0.0.4`): what kube-apiserver serves
    /// when the scrape does not ask for OpenMetrics, and what older scrapers and
    /// `promtool check metrics` read.
    Text,
}

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics when it names
    /// `application/openmetrics-text` (with a non-zero quality), else text 0.0.4, as
    /// Prometheus' client libraries negotiate (`expfmt.Negotiate`).
    pub fn negotiate(accept: Option<&str>) -> Format {
        let wants_openmetrics = accept.unwrap_or("").split(',').any(|part| {
            let mut params = part.split(';').map(str::trim);
            let media = params.next().unwrap_or("");
            let zero = params.any(|p| p.replace(' ', "") == "q=0" || p.replace(' ', "") == "q=0.0");
            media.eq_ignore_ascii_case("application/openmetrics-text") && !zero
        });
        if wants_openmetrics {
            Format::OpenMetrics
        } else {
            Format::Text
        }
    }

    /// The `Content-Type` of an answer in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// `prometheus_client` appends a full stop to every HELP text; MCO's texts have none of their
/// own (or one: `Total number of reboots that failed.`), so the added one is taken off again.
fn without_added_full_stops(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        match line.strip_prefix("# HELP ").and_then(|_| line.strip_suffix('.')) {
            Some(help) => out.push_str(help),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// OpenMetrics text as Prometheus' text format 0.0.4: a counter family is named with its
/// `_total` suffix in its HELP and TYPE lines (OpenMetrics names the family without it),
/// `info` and `stateset` families become gauges and `unknown` untyped, and what 0.0.4 has no
/// place for goes (`# UNIT`, `# EOF`, `_created` samples of counters, exemplars).
pub fn openmetrics_to_text(openmetrics: &str) -> String {
    let mut counters = std::collections::HashSet::new();
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let Some(name) = rest.strip_suffix(" counter") {
                counters.insert(name.to_string());
            }
        }
    }
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ").or_else(|| line.strip_prefix("# TYPE ")) {
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            let name = if counters.contains(name) {
                format!("{name}_total")
            } else {
                name.to_string()
            };
            let tail = if line.starts_with("# TYPE ") {
                match tail {
                    "info" | "stateset" => "gauge",
                    "unknown" => "untyped",
                    t => t,
                }
            } else {
                tail
            };
            out.push_str(&line[..7]);
            out.push_str(&name);
            out.push(' ');
            out.push_str(tail);
            out.push('\n');
            continue;
        }
        if line.starts_with('#') {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let sample_name = line.split(['{', ' ']).next().unwrap_or("");
        if sample_name
            .strip_suffix("_created")
            .is_some_and(|family| counters.contains(family))
        {
            continue;
        }
        // An exemplar follows ` # ` after the value (no label value holds ` # ` here: labels
        // are escaped, and mco's are node names, pools, verbs and event types).
        let sample = line.split(" # ").next().unwrap_or(line);
        out.push_str(sample);
        out.push('\n');
    }
    out
}

/// What a daemon reports (`POST /apis/metrics.mco.dev/v1/reports`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Report {
    pub node: String,
    pub kind: ReportKind,
    /// For a drift: the validation message of the first drifted path.
    #[serde(default)]
    pub reason: String,
    /// For a kubelet health report: the consecutive failed checks (`mcd_kubelet_state`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failures: u32,
    /// For a drift detection or a revert: what the log records about it (the history's
    /// `NodeConfigDrifted` / `NodeConfigReverted` notes on the Node); absent from older daemons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<crate::drift::DriftRecord>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The kinds of [`Report`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ReportKind {
    /// The drift monitor found a mismatch.
    Drift,
    /// The drift monitor found every managed path matching again (or at its start): the
    /// node's `mcd_config_drift` returns to 0.
    DriftResolved,
    /// The daemon rewrote a drifted path from the rendered config (a DriftPolicy's Revert):
    /// recorded in the log, no metric of its own.
    DriftReverted,
    /// A reboot the daemon asked for failed.
    RebootFailed,
    /// Switching the OS image or the kernel type failed (MCO's pivot error).
    PivotFailed,
    /// The kubelet health monitor's count of consecutive failed checks changed (or the
    /// monitor started, at 0): [`Report::failures`].
    KubeletHealth,
}

/// A node's `mcd_state` labels and `mcd_update_state` labels as last seen, with the Unix
/// times they were set.
#[derive(Clone, Debug)]
struct NodeTimes {
    state: (String, String),
    state_since: f64,
    update: (String, String),
    update_since: f64,
}

/// `mcd_state`'s `state` and `reason`: MCO fills the reason only for a Degraded node
/// (pkg/daemon/daemon.go `getStateAndConfigs`).
fn mcd_state_labels(a: &NodeAnnotations<&str>) -> (String, String) {
    let reason = if a.state == "Degraded" { a.reason } else { "" };
    (a.state.to_string(), reason.to_string())
}

/// `mcd_update_state`'s `config` and `err`: MCO sets `("", error)` when an update fails and
/// `(current config, "")` when it completes (pkg/daemon/daemon.go `updateConfigAndState`); a
/// Degraded or Unreconcilable node here is the former.
fn mcd_update_labels(a: &NodeAnnotations<&str>) -> (String, String) {
    if a.state == "Degraded" || a.state == "Unreconcilable" {
        (String::new(), a.reason.to_string())
    } else {
        (a.current_config.to_string(), String::new())
    }
}

/// The families computed from the projection at each scrape; `times`: when each node's
/// `mcd_state` and `mcd_update_state` labels were set ([`Metrics::node_observed`]).
fn level_registry(state: &State, times: &HashMap<String, NodeTimes>) -> Registry {
    let mut r = Registry::default();
    let mcd_state = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    let mcd_update_state = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    let mco_state = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    let machine = Family::<Labels, Gauge>::default();
    let updated = Family::<Labels, Gauge>::default();
    let degraded = Family::<Labels, Gauge>::default();
    let unavailable = Family::<Labels, Gauge>::default();
    let pool_alert = Family::<Labels, Gauge>::default();
    let pools: Vec<&crate::model::MachineConfigPool> = state.pools.values().map(|o| &**o).collect();
    let nodes: Vec<&crate::model::Node> = state.nodes.values().map(|o| &**o).collect();
    let membership = crate::rollout::pools_for_nodes(&pools, &nodes);
    for n in &nodes {
        let name = n.metadata.name.as_deref().unwrap_or("");
        let Some(t) = times.get(name) else { continue };
        let (st, reason) = &t.state;
        mcd_state
            .get_or_create(&labels(&[("node", name), ("state", st), ("reason", reason)]))
            .set(t.state_since);
        let (config, err) = &t.update;
        mcd_update_state
            .get_or_create(&labels(&[("node", name), ("config", config), ("err", err)]))
            .set(t.update_since);
    }
    for p in &pools {
        let l = labels(&[("pool", p.name())]);
        let s = &p.status;
        machine.get_or_create(&l).set(s.machine_count as i64);
        updated.get_or_create(&l).set(s.updated_machine_count as i64);
        degraded.get_or_create(&l).set(s.degraded_machine_count as i64);
        unavailable.get_or_create(&l).set(s.unavailable_machine_count as i64);
        // MCO's node controller (pkg/controller/node/node_controller.go `syncMetrics`): for each
        // node of the pool, the pool's latest True condition (by lastTransitionTime), its type
        // as `state` and its reason; the value here is that lastTransitionTime (MCO's is the
        // time of the controller's last sync that saw it, `SetToCurrentTime`).
        let latest = s
            .conditions
            .iter()
            .filter(|c| c.status == "True")
            .filter_map(|c| c.last_transition_time.as_ref().map(|t| (t.0, c)))
            .max_by_key(|(t, _)| *t);
        let Some((at, cond)) = latest else { continue };
        for n in &nodes {
            let name = n.metadata.name.as_deref().unwrap_or("");
            if membership.primary.get(name).map(String::as_str) == Some(p.name()) {
                mco_state
                    .get_or_create(&labels(&[
                        ("node", name),
                        ("pool", p.name()),
                        ("state", &cond.type_),
                        ("reason", &cond.reason),
                    ]))
                    .set(at.as_millisecond() as f64 / 1000.0);
            }
        }
    }
    // As MCO, the vector exists even when nothing alerts.
    pool_alert.get_or_create(&labels(&[("node", "initialize")])).set(0);
    for e in &membership.errors {
        if let Some(node) = e.strip_prefix("node ").and_then(|r| r.split(' ').next()) {
            pool_alert.get_or_create(&labels(&[("node", node)])).set(1);
        }
    }
    r.register("mcd_state", "state of daemon on specified node", mcd_state);
    r.register("mcd_update_state", "completed update config or error", mcd_update_state);
    r.register("mco_state", "state of a specified pool", mco_state);
    r.register(
        "mco_machine_count",
        "total number of machines in a specified pool",
        machine,
    );
    r.register(
        "mco_updated_machine_count",
        "total number of updated machines in specified pool",
        updated,
    );
    r.register(
        "mco_degraded_machine_count",
        "total number of degraded machines in specified pool",
        degraded,
    );
    r.register(
        "mco_unavailable_machine_count",
        "total number of unavailable machines in specified pool",
        unavailable,
    );
    r.register("mcc_pool_alert", "pool status alert", pool_alert);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_pick_the_format() {
        for (accept, want) in [
            (None, Format::Text),
            (Some("text/plain;version=0.0.4"), Format::Text),
            (Some("*/*"), Format::Text),
            (
                Some("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
                Format::OpenMetrics,
            ),
            (Some("application/openmetrics-text; q=0"), Format::Text),
        ] {
            assert_eq!(Format::negotiate(accept), want, "{accept:?}");
        }
    }

    #[test]
    fn text_format_names_counters_with_total_and_has_no_eof() {
        let om = "# HELP a_events Events\n# TYPE a_events counter\na_events_total{type=\"x\"} 1\na_events_created 17\n# HELP g A gauge\n# TYPE g gauge\n# UNIT g seconds\ng 2\nh_bucket{le=\"1\"} 1 # {id=\"e\"} 0.5\n# EOF\n";
        assert_eq!(
            openmetrics_to_text(om),
            "# HELP a_events_total Events\n# TYPE a_events_total counter\na_events_total{type=\"x\"} 1\n# HELP g A gauge\n# TYPE g gauge\ng 2\nh_bucket{le=\"1\"} 1\n"
        );
    }

    #[test]
    fn help_texts_are_mcos_without_an_added_full_stop() {
        let m = Metrics::new();
        m.report(&Report {
            node: "worker-1".into(),
            kind: ReportKind::RebootFailed,
            reason: String::new(),
            failures: 0,
            drift: None,
        });
        let text = m.encode(&State::default(), &Keys::default());
        // MCO's texts (pkg/daemon/metrics.go, pkg/controller/common/metrics.go), as they are.
        assert!(
            text.contains("# HELP mcd_reboots_failed Total number of reboots that failed.\n"),
            "{text}"
        );
        assert!(text.contains("# HELP mcc_drain_err logs failed drain\n"), "{text}");
        assert!(!text.contains("..\n"), "{text}");
    }

    #[test]
    fn exposition_has_every_family_once_and_one_eof() {
        let m = Metrics::new();
        m.appended("MachineConfigCreated");
        m.request("get", "machineconfigpools", Duration::from_millis(2));
        m.report(&Report {
            node: "worker-0".into(),
            kind: ReportKind::Drift,
            reason: "content mismatch for file \"/etc/a\"".into(),
            failures: 0,
            drift: None,
        });
        m.report(&Report {
            node: "worker-1".into(),
            kind: ReportKind::RebootFailed,
            reason: String::new(),
            failures: 0,
            drift: None,
        });
        m.drain_failed("worker-2", true);
        let text = m.encode(&State::default(), &Keys::default());
        assert!(text.contains("mcc_drain_err{node=\"worker-2\"} 1\n"), "{text}");
        assert_eq!(text.matches("# EOF").count(), 1, "{text}");
        assert!(text.ends_with("# EOF\n"));
        for family in [
            "mco_store_events_appended",
            "mco_store_append_duration_seconds",
            "mco_api_request_duration_seconds",
            "mco_drift_detections",
            "mcd_config_drift",
            "mcd_reboots_failed",
            "mcc_pool_alert",
        ] {
            assert_eq!(
                text.matches(&format!("# TYPE {family} ")).count(),
                1,
                "{family}\n{text}"
            );
        }
        assert!(
            text.contains(r#"mco_store_events_appended_total{type="MachineConfigCreated"} 1"#),
            "{text}"
        );
    }
}
