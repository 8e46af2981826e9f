//! The figures of a run: what it measured ([`Report`], per-verb [`Latency`]), the progress kept
//! outside the run so a timed-out run still reports, and the report's table ([`render`]).

use super::child::{cpu_secs, rss, Child};
use super::{ideal_secs, max_unavailable_count, SimConfig};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Latency percentiles of one verb, in milliseconds.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Latency {
    pub verb: String,
    pub count: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// What a simulation measured. Durations in seconds, sizes in bytes, CPU in seconds of user+sys.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub nodes: usize,
    pub max_unavailable: String,
    /// `maxUnavailable` resolved against the node count (MCO rounds a percentage down, at least 1).
    pub max_unavailable_count: usize,
    pub apply_ms: u64,
    pub reboot_ms: u64,
    /// Each delay varied uniformly by this fraction.
    pub jitter: f64,
    pub failure_rate: f64,
    /// Issuing one node token per node through the API.
    pub token_issue_secs: f64,
    /// From the first registration until the pool counts every node Updated.
    pub registration_secs: f64,
    pub old_config: String,
    pub new_config: String,
    /// From creating the MachineConfig until the pool is Updated at the new rendered config.
    pub rollout_secs: f64,
    /// `ceil(N / maxUnavailable_count) × (apply + reboot)`: the rollout if mco cost nothing.
    pub ideal_secs: f64,
    /// `rollout_secs / ideal_secs`.
    pub ratio: f64,
    /// Server process CPU (user+sys) during the rollout, and its share of one core; `None`
    /// for `--server` (another process, perhaps on another host).
    pub server_cpu_secs: Option<f64>,
    pub server_cpu_core_share: Option<f64>,
    /// Server resident memory at the end and its peak (`VmHWM`); `None` for `--server`.
    pub server_rss_bytes: Option<u64>,
    pub server_peak_rss_bytes: Option<u64>,
    /// The simulator's own CPU during the rollout.
    pub sim_cpu_secs: f64,
    /// Events appended during the rollout, and per second of it.
    pub events: u64,
    pub events_per_sec: f64,
    pub store_bytes_before: u64,
    pub store_bytes_after: u64,
    pub store_body_bytes_after: u64,
    /// Simulated apply failures (each reported Degraded, then retried).
    pub failures: u64,
    /// Nodes at the new rendered config (`currentConfig`) and Done at the end.
    pub nodes_at_new_config: usize,
    /// `LIST /api/v1/nodes` at the end, as the simulator saw it.
    pub list_nodes_ms: f64,
    pub latency: Vec<Latency>,
    /// `uptime`'s load averages when the rollout ended (the machine is shared).
    pub load_average: String,
    /// Set when `--timeout` ended the run: after how long and what it waited for; the
    /// figures of the phases it did not finish are then 0 ([`TimedOut`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timed_out: Option<String>,
}

/// Per-verb latencies in microseconds, as the simulated daemons see them.
#[derive(Default)]
pub(super) struct Latencies(Mutex<BTreeMap<&'static str, Vec<u32>>>);

impl Latencies {
    pub(super) fn record(&self, verb: &'static str, since: Instant) {
        let us = since.elapsed().as_micros().min(u32::MAX as u128) as u32;
        self.0.lock().expect("latency lock").entry(verb).or_default().push(us);
    }

    pub(super) fn summary(&self) -> Vec<Latency> {
        let map = self.0.lock().expect("latency lock");
        map.iter()
            .map(|(verb, v)| {
                let mut v = v.clone();
                v.sort_unstable();
                let at = |q: f64| v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1] as f64 / 1000.0;
                Latency {
                    verb: verb.to_string(),
                    count: v.len(),
                    p50_ms: at(0.5),
                    p99_ms: at(0.99),
                    max_ms: *v.last().unwrap_or(&0) as f64 / 1000.0,
                }
            })
            .collect()
    }
}

/// What a run has done so far: kept outside the run's future, so that a run cut short by
/// `--timeout` still reports it ([`TimedOut`]).
#[derive(Default)]
pub(super) struct Progress {
    pub(super) lat: Latencies,
    pub(super) failures: std::sync::atomic::AtomicU64,
    pub(super) phase: Mutex<Phase>,
}

/// The run's phase and the figures of the phases it finished.
#[derive(Default)]
pub(super) struct Phase {
    /// What the run waits for now (`issuing 1000 node tokens`, `the rollout`).
    pub(super) doing: String,
    pub(super) token_issue_secs: f64,
    pub(super) registration_secs: f64,
    pub(super) old_config: String,
    /// When the rollout started (the MachineConfig was created).
    pub(super) rollout_start: Option<Instant>,
    /// The worker pool's status as last seen.
    pub(super) pool_status: Value,
    /// The simulator's CPU at the rollout's start (`cpu_secs("self")`).
    pub(super) sim_cpu0: f64,
}

impl Progress {
    pub(super) fn set(&self, f: impl FnOnce(&mut Phase)) {
        f(&mut self.phase.lock().unwrap_or_else(|e| e.into_inner()));
    }
}

/// The report of a run cut short after `elapsed`: the finished phases' figures, the
/// rollout's time so far, the pool's last counts, the latencies and failures seen.
pub(super) fn partial_report(cfg: &SimConfig, progress: &Progress, child: Option<&Child>, elapsed: Duration) -> Report {
    let ph = progress.phase.lock().unwrap_or_else(|e| e.into_inner());
    let n = cfg.nodes;
    let max = max_unavailable_count(&cfg.max_unavailable, n);
    let ideal = ideal_secs(n, max, cfg.apply, cfg.reboot);
    let rollout_secs = ph.rollout_start.map_or(0.0, |t| t.elapsed().as_secs_f64());
    let (server_rss_bytes, server_peak_rss_bytes) = child.map(|c| rss(c.pid)).unwrap_or((None, None));
    let (cc, updated) = (
        ph.pool_status["configuration"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        ph.pool_status["updatedMachineCount"].as_u64().unwrap_or(0) as usize,
    );
    let moved = ph.rollout_start.is_some() && !cc.is_empty() && cc != ph.old_config;
    Report {
        nodes: n,
        max_unavailable: cfg.max_unavailable.clone(),
        max_unavailable_count: max,
        apply_ms: cfg.apply.as_millis() as u64,
        reboot_ms: cfg.reboot.as_millis() as u64,
        jitter: cfg.jitter,
        failure_rate: cfg.failure_rate,
        token_issue_secs: ph.token_issue_secs,
        registration_secs: ph.registration_secs,
        old_config: ph.old_config.clone(),
        new_config: if moved { cc } else { String::new() },
        rollout_secs,
        ideal_secs: ideal,
        ratio: if ideal > 0.0 {
            rollout_secs / ideal
        } else {
            f64::INFINITY
        },
        server_cpu_secs: None,
        server_cpu_core_share: None,
        server_rss_bytes,
        server_peak_rss_bytes,
        sim_cpu_secs: if ph.rollout_start.is_some() {
            cpu_secs("self") - ph.sim_cpu0
        } else {
            0.0
        },
        events: 0,
        events_per_sec: 0.0,
        store_bytes_before: 0,
        store_bytes_after: 0,
        store_body_bytes_after: 0,
        failures: progress.failures.load(std::sync::atomic::Ordering::Relaxed),
        nodes_at_new_config: if moved { updated } else { 0 },
        list_nodes_ms: 0.0,
        latency: progress.lat.summary(),
        load_average: load_average(),
        timed_out: Some(format!(
            "after {:.1} s (--timeout {:?}), waiting for {}",
            elapsed.as_secs_f64(),
            cfg.timeout,
            if ph.doing.is_empty() { "the server" } else { &ph.doing }
        )),
    }
}

/// `uptime`'s three load averages.
pub(super) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The report as one table (metric, value) followed by the latency table.
pub fn render(r: &Report) -> String {
    let mb = |b: Option<u64>| {
        b.map_or("n/a (--server)".to_string(), |b| {
            format!("{:.1} MiB", b as f64 / 1048576.0)
        })
    };
    let mut rows: Vec<(&str, String)> = vec![
        ("nodes", r.nodes.to_string()),
        (
            "maxUnavailable",
            format!(
                "{} ({} node{})",
                r.max_unavailable,
                r.max_unavailable_count,
                if r.max_unavailable_count == 1 { "" } else { "s" }
            ),
        ),
        (
            "apply / reboot per node",
            if r.jitter > 0.0 {
                format!(
                    "{} ms / {} ms, each ± {:.0} %",
                    r.apply_ms,
                    r.reboot_ms,
                    r.jitter * 100.0
                )
            } else {
                format!("{} ms / {} ms", r.apply_ms, r.reboot_ms)
            },
        ),
        (
            "simulated apply failures",
            format!("{} (rate {})", r.failures, r.failure_rate),
        ),
        ("node tokens issued in", format!("{:.2} s", r.token_issue_secs)),
        ("registration until Updated", format!("{:.2} s", r.registration_secs)),
        ("rendered config", format!("{} -> {}", r.old_config, r.new_config)),
        ("rollout wall time", format!("{:.2} s", r.rollout_secs)),
        (
            "ideal bound ceil(N/max) x (apply+reboot)",
            format!("{:.2} s", r.ideal_secs),
        ),
        ("ratio wall / ideal", format!("{:.2}", r.ratio)),
        (
            "server CPU during rollout",
            match (r.server_cpu_secs, r.server_cpu_core_share) {
                (Some(c), Some(share)) => format!("{c:.2} s ({:.0} % of a core)", share * 100.0),
                _ => "n/a (a server given by --server)".to_string(),
            },
        ),
        ("simulator CPU during rollout", format!("{:.2} s", r.sim_cpu_secs)),
        (
            "server RSS end / peak",
            format!("{} / {}", mb(r.server_rss_bytes), mb(r.server_peak_rss_bytes)),
        ),
        (
            "events appended / per second",
            format!("{} / {:.0}", r.events, r.events_per_sec),
        ),
        (
            "store on disk before -> after",
            format!(
                "{:.1} MiB -> {:.1} MiB (bodies {:.1} MiB)",
                r.store_bytes_before as f64 / 1048576.0,
                r.store_bytes_after as f64 / 1048576.0,
                r.store_body_bytes_after as f64 / 1048576.0
            ),
        ),
        (
            "nodes Done at the new config",
            format!("{} / {}", r.nodes_at_new_config, r.nodes),
        ),
        ("LIST /api/v1/nodes at the end", format!("{:.1} ms", r.list_nodes_ms)),
        ("load average at the end", r.load_average.clone()),
    ];
    if let Some(why) = &r.timed_out {
        rows.insert(0, ("TIMED OUT (figures of unfinished phases are 0)", why.clone()));
    }
    let mut t = comfy_table::Table::new();
    t.load_style(comfy_table::presets::ASCII_MARKDOWN)
        .set_header(["metric", "value"]);
    for (k, v) in rows {
        t.add_row([k.to_string(), v]);
    }
    let mut l = comfy_table::Table::new();
    l.load_style(comfy_table::presets::ASCII_MARKDOWN).set_header([
        "API call (as the simulated daemons see it)",
        "count",
        "p50 ms",
        "p99 ms",
        "max ms",
    ]);
    for x in &r.latency {
        l.add_row([
            x.verb.clone(),
            x.count.to_string(),
            format!("{:.2}", x.p50_ms),
            format!("{:.2}", x.p99_ms),
            format!("{:.2}", x.max_ms),
        ]);
    }
    format!("{t}\n\n{l}\n")
}
