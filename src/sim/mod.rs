//! `mco sim`: a fleet simulator. N protocol-level simulated daemons in one process drive a real
//! server (a child `mco server` process, or one given by `--server`) through one rollout, and
//! report what it cost.
//!
//! The simulated node ([`node::sim_node`], `node.rs`) makes the same REST calls, watch and annotation transitions
//! as [`crate::daemon::agent`] (registration `POST /api/v1/nodes` + `PATCH .../status`, `GET` and
//! watch of its own Node, `GET` of the rendered MachineConfig and of the MachineConfiguration
//! `cluster`, `state` Working → Done, the `desiredDrain`/`lastAppliedDrain` handshake,
//! `post-config-action=Rebooting`, reboot as a delay plus a new boot id and a re-registration,
//! `Degraded` with a reason on a simulated failure), without files, inotify or a `Host`: applying
//! a config is a delay. Each node authenticates with its own node token issued through the API.
//! It also owns the measurement: rollout wall time beside the ideal bound
//! `ceil(N / maxUnavailable) × (apply + reboot)`, the server process's CPU and memory (from
//! `/proc/<pid>`, separate from the simulator's own), events per second, per-verb API latency
//! percentiles as the simulated daemons see them, and store growth (`history.mco.dev/v1/store/stats`).
//! It must not reach into the server's state: everything goes over HTTP.
//!
//! This file owns the settings ([`SimConfig`], `check`) and the run ([`run`]: server, pool,
//! tokens, nodes, rollout, measurements); `http.rs` the timed HTTP calls, `node.rs` one
//! simulated node, `child.rs` the child server and `/proc` sampling, `report.rs` the figures
//! and their table.

use crate::model::{Keys, MachineConfig};
use anyhow::{anyhow, bail, Context};
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

mod child;
mod http;
mod node;
mod report;

use child::{cpu_secs, rss, start_child, Child};
use http::{Caller, Ctx, JSON, MERGE};
use node::sim_node;
use report::{load_average, partial_report, Progress};
pub use report::{render, Latency, Report};

/// Settings of one simulation.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Simulated worker nodes.
    pub nodes: usize,
    /// The worker pool's `spec.maxUnavailable` during the rollout (`"10%"` or `"3"`).
    pub max_unavailable: String,
    /// Simulated time to apply a config (write files), per node.
    pub apply: Duration,
    /// Simulated reboot time, per node.
    pub reboot: Duration,
    /// Each delay is drawn uniformly from `[d × (1 − jitter), d × (1 + jitter)]` (0 ..= 1).
    pub jitter: f64,
    /// Probability (0 ..= 1) that one apply fails: the node reports `Degraded` with a reason and
    /// retries after the daemon's 1 s backoff.
    pub failure_rate: f64,
    /// An existing server to drive (with `token`, an admin token); `None` starts a child
    /// `mco server` in `data_dir`.
    pub server: Option<String>,
    /// Admin bearer token for `server`.
    pub token: Option<String>,
    /// The CA an `https://` `server` must be signed by (`--certificate-authority`).
    pub trust: Option<crate::tls::Trust>,
    /// Data dir of the child server (a temporary one when `None`; it must be new or empty).
    pub data_dir: Option<PathBuf>,
    /// The `mco` binary started as the child server (the running executable when `None`).
    pub server_bin: Option<PathBuf>,
    /// Give up when registration or the rollout takes longer than this.
    pub timeout: Duration,
    /// Concurrent token issues and registrations.
    pub concurrency: usize,
    /// Nodes register without a config and get their first one from the rollout controller
    /// (first boot); by default they register already running the pool's render.
    pub new_nodes: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            nodes: 100,
            max_unavailable: "10%".into(),
            apply: Duration::from_millis(200),
            reboot: Duration::from_millis(1000),
            jitter: 0.0,
            failure_rate: 0.0,
            server: None,
            token: None,
            trust: None,
            data_dir: None,
            server_bin: None,
            timeout: Duration::from_secs(1800),
            concurrency: 64,
            new_nodes: false,
        }
    }
}

/// `maxUnavailable` as the rollout controller resolves it for `n` nodes
/// ([`crate::rollout::max_unavailable`]: a percentage rounds down, at least 1; mco-facts 3.4).
pub fn max_unavailable_count(value: &str, n: usize) -> usize {
    crate::rollout::max_unavailable(Some(&int_or_string(value)), n).unwrap_or(1)
}

/// The largest fleet `mco sim` simulates (each node holds a watch connection and a task).
pub const MAX_NODES: usize = 100_000;

/// The longest simulated apply or reboot (a real one takes minutes).
pub const MAX_NODE_STEP: Duration = Duration::from_secs(3600);

/// Refuses settings that cannot make a rollout, naming the flag, before anything starts.
fn check(cfg: &SimConfig) -> anyhow::Result<()> {
    if !(1..=MAX_NODES).contains(&cfg.nodes) {
        bail!("--nodes must be between 1 and {MAX_NODES} (got {})", cfg.nodes);
    }
    if !(0.0..=1.0).contains(&cfg.jitter) {
        bail!("--jitter must be between 0 and 1 (got {})", cfg.jitter);
    }
    if !(0.0..1.0).contains(&cfg.failure_rate) {
        bail!(
            "--failure-rate must be at least 0 and below 1 (got {}; at 1 no apply would ever succeed)",
            cfg.failure_rate
        );
    }
    for (flag, d) in [("--apply-ms", cfg.apply), ("--reboot-ms", cfg.reboot)] {
        if d > MAX_NODE_STEP {
            bail!(
                "{flag} must be at most {} ms (got {} ms)",
                MAX_NODE_STEP.as_millis(),
                d.as_millis()
            );
        }
    }
    if cfg.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    if cfg.timeout.is_zero() {
        bail!("--timeout must be more than 0 (the run gives up after it)");
    }
    if let Some(d) = &cfg.data_dir {
        if cfg.server.is_some() {
            bail!("--data-dir is the child server's: it does not go with --server");
        }
        if d.exists() && !d.is_dir() {
            bail!("--data-dir {}: not a directory", d.display());
        }
        if std::fs::read_dir(d).is_ok_and(|mut entries| entries.next().is_some()) {
            bail!(
                "--data-dir {}: not empty (the child server needs a new data dir)",
                d.display()
            );
        }
    }
    crate::rollout::max_unavailable(Some(&int_or_string(&cfg.max_unavailable)), cfg.nodes)
        .map_err(|e| anyhow!("--max-unavailable: {e}"))?;
    Ok(())
}

/// A simulated node's task that ended before the run did: its error, or its panic.
fn node_ended(r: Result<anyhow::Result<()>, tokio::task::JoinError>) -> anyhow::Error {
    match r {
        Ok(Err(e)) => e.context("a simulated node failed"),
        Ok(Ok(())) => anyhow!("a simulated node stopped before the run ended"),
        Err(e) => anyhow!("a simulated node panicked: {e}"),
    }
}

/// `maxUnavailable` as the pool's spec holds it: a number, or a string (`"10%"`).
fn int_or_string(value: &str) -> k8s_openapi::apimachinery::pkg::util::intstr::IntOrString {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    match value.parse::<i32>() {
        Ok(i) => IntOrString::Int(i),
        Err(_) => IntOrString::String(value.to_string()),
    }
}

/// The ideal rollout: `ceil(n / max) × (apply + reboot)`, in seconds.
pub fn ideal_secs(n: usize, max: usize, apply: Duration, reboot: Duration) -> f64 {
    n.div_ceil(max.max(1)) as f64 * (apply + reboot).as_secs_f64()
}

async fn store_stats(ctx: &Ctx, token: &Caller) -> anyhow::Result<Value> {
    let path = format!("/apis/{}/store/stats", crate::history::API_VERSION);
    ctx.ok("(admin) GET store/stats", reqwest::Method::GET, &path, token, None)
        .await
}

/// Waits until the worker pool satisfies `f`, polling every 200 ms, up to `timeout`.
async fn wait_pool(
    ctx: &Ctx,
    token: &Caller,
    timeout: Duration,
    what: &str,
    f: impl Fn(&Value) -> bool,
) -> anyhow::Result<Value> {
    let deadline = Instant::now() + timeout;
    ctx.progress.set(|ph| ph.doing = what.to_string());
    let path = ctx.pool_path("worker");
    let mut last = Value::Null;
    let (start, mut said) = (Instant::now(), Instant::now());
    while Instant::now() < deadline {
        if let Ok((200, p)) = ctx
            .call("(admin) GET pool", reqwest::Method::GET, &path, token, None)
            .await
        {
            if f(&p) {
                return Ok(p);
            }
            last = p["status"].clone();
            ctx.progress.set(|ph| ph.pool_status = last.clone());
            if said.elapsed() >= Duration::from_secs(10) {
                said = Instant::now();
                let c = |k: &str| last[k].as_u64().unwrap_or(0);
                // A closed stderr (`2>&1 | head`) must not end the run before it cleans up.
                let _ = writeln!(
                    std::io::stderr(),
                    "mco sim: {what}: {:.0} s, machines {} updated {} unavailable {} degraded {}",
                    start.elapsed().as_secs_f64(),
                    c("machineCount"),
                    c("updatedMachineCount"),
                    c("unavailableMachineCount"),
                    c("degradedMachineCount")
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let c = |k: &str| last[k].as_u64().unwrap_or(0);
    bail!(
        "timed out after {timeout:?} waiting for {what}: the worker pool has {} machines, {} updated, {} unavailable, {} degraded",
        c("machineCount"),
        c("updatedMachineCount"),
        c("unavailableMachineCount"),
        c("degradedMachineCount")
    )
}

fn pool_updated(p: &Value, n: usize, config: Option<&str>, not: Option<&str>) -> bool {
    let s = &p["status"];
    let name = s["configuration"]["name"].as_str().unwrap_or("");
    let updated = s["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Updated" && c["status"] == "True");
    updated
        && s["machineCount"].as_u64() == Some(n as u64)
        && s["updatedMachineCount"].as_u64() == Some(n as u64)
        && !name.is_empty()
        && config.is_none_or(|c| c == name)
        && not.is_none_or(|c| c != name)
}

/// Runs one simulation: server, tokens, N nodes registered and Updated, then one MachineConfig
/// change rolled out to all of them, measured.
///
/// Errors: the child server failing to start, a refused API call during setup, or a timeout
/// (with the pool's status in the message).
///
/// `cfg.timeout` bounds the whole run, however it is stuck (a server that stops answering,
/// calls queued behind others): when it passes the run ends with [`TimedOut`], which holds
/// the report of what was done until then.
pub async fn run(cfg: SimConfig) -> anyhow::Result<Report> {
    check(&cfg)?;
    let have = raise_open_files(files_needed(cfg.nodes));
    if have < files_needed(cfg.nodes) {
        tracing::warn!(
            nodes = cfg.nodes,
            open_files = have,
            needed = files_needed(cfg.nodes),
            "the open-file limit (ulimit -n, hard) is below what this many simulated nodes need; raise it or expect \"too many open files\""
        );
    }
    let started = Instant::now();
    let progress = Arc::new(Progress::default());
    let mut child = None;
    let run = tokio::time::timeout(cfg.timeout, run_until(&cfg, progress.clone(), &mut child)).await;
    match run {
        Ok(r) => r,
        Err(_) => {
            // The run's future is dropped: its nodes' tasks are aborted; `child` (dropped on
            // return) kills the child server and removes its data dir.
            let report = partial_report(&cfg, &progress, child.as_ref(), started.elapsed());
            let ph = progress.phase.lock().unwrap_or_else(|e| e.into_inner());
            let c = |k: &str| ph.pool_status[k].as_u64().unwrap_or(0);
            let message = format!(
                "timed out after {:?} waiting for {}: the worker pool has {} machines, {} updated, {} unavailable, {} degraded",
                cfg.timeout,
                if ph.doing.is_empty() { "the server" } else { &ph.doing },
                c("machineCount"),
                c("updatedMachineCount"),
                c("unavailableMachineCount"),
                c("degradedMachineCount")
            );
            Err(TimedOut {
                report: Box::new(report),
                message,
            }
            .into())
        }
    }
}

/// A run that `--timeout` ended: why (what it waited for, the worker pool's counts), and the
/// report of what it measured until then (`timed_out` set; the figures of unfinished phases
/// are 0). `mco sim` prints the report, then the error, and exits 1.
#[derive(Debug)]
pub struct TimedOut {
    pub report: Box<Report>,
    pub message: String,
}

impl std::fmt::Display for TimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TimedOut {}

/// Open files a run of `nodes` needs: a connection per simulated node (each has its own
/// client; over plain HTTP/1.1 its watch and its other calls take two), the admin's, and
/// room for the runtime, the child server's pipes and the TLS roots.
pub fn files_needed(nodes: usize) -> u64 {
    2 * nodes as u64 + 256
}

/// Raises this process's soft open-file limit (`RLIMIT_NOFILE`) to `want`, at most to the
/// hard limit (which an unprivileged process may not raise): the simulator holds a
/// connection per node, and a shell's usual soft limit (1,024) ends a 1,000-node run with
/// "too many open files". The child server inherits the raised limit. Returns the soft limit
/// in force afterwards.
pub fn raise_open_files(want: u64) -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed to them.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        if lim.rlim_cur < want {
            let raised = libc::rlimit {
                rlim_cur: want.min(lim.rlim_max),
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim = raised;
            }
        }
    }
    lim.rlim_cur
}

/// The run itself ([`run`] bounds it): puts the child server it starts in `child`.
async fn run_until(cfg: &SimConfig, progress: Arc<Progress>, child: &mut Option<Child>) -> anyhow::Result<Report> {
    let (base, admin) = match &cfg.server {
        Some(url) => (
            url.trim_end_matches('/').to_string(),
            cfg.token.clone().context("--server needs --token (an admin token)")?,
        ),
        None => {
            progress.set(|ph| ph.doing = "the child server to start".into());
            let (c, u, t) = start_child(cfg).await?;
            *child = Some(c);
            (u, t)
        }
    };
    progress.set(|ph| ph.doing = format!("the server at {base} to answer"));
    let tls = || crate::tls::client_config(cfg.trust.as_ref());
    let answer = reqwest::Client::builder()
        .tls_backend_preconfigured(tls()?)
        .build()?
        .get(format!("{base}/apis"))
        .bearer_auth(&admin)
        .send()
        .await
        .with_context(|| format!("cannot reach the server at {base}"))?;
    let status = answer.status();
    if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
        bail!("the server at {base} refused the token ({status}): mco sim needs an admin token (--token)");
    }
    let probe: Value = answer
        .error_for_status()?
        .json()
        .await
        .with_context(|| format!("{base} does not answer as an mco server"))?;
    let group = probe["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| g["name"].as_str())
        .find(|g| g.starts_with("machineconfiguration."))
        .context("the server lists no machineconfiguration.* group")?
        .to_string();
    let ctx = Arc::new(Ctx {
        base: base.clone(),
        keys: Keys::new(&group),
        group,
        tls: tls()?,
        progress: progress.clone(),
        cfg: cfg.clone(),
    });
    let admin = ctx.caller(admin)?;
    let n = cfg.nodes;
    let pool = wait_pool(
        &ctx,
        &admin,
        Duration::from_secs(60),
        "the worker pool's first render",
        |p| {
            p["status"]["configuration"]["name"]
                .as_str()
                .is_some_and(|c| !c.is_empty())
        },
    )
    .await?;
    if pool["spec"]["paused"].as_bool() == Some(true) {
        bail!("the worker pool is paused (spec.paused): nothing would roll out; unpause it first");
    }
    // The run counts the pool's machines to know that its simulated nodes are all in.
    let existing = pool["status"]["machineCount"].as_u64().unwrap_or(0);
    if existing > 0 {
        bail!(
            "the worker pool already has {existing} machines: mco sim needs a server whose worker pool \
             is empty (a fresh `mco server`, or no --server to let it start one)"
        );
    }
    let mu = json!({"spec": {"maxUnavailable": match cfg.max_unavailable.parse::<u64>() {
        Ok(v) => json!(v), Err(_) => json!(cfg.max_unavailable) }}});
    ctx.ok(
        "(admin) PATCH pool",
        reqwest::Method::PATCH,
        &ctx.pool_path("worker"),
        &admin,
        Some((MERGE, &mu)),
    )
    .await?;
    // The simulated fleet is installed: each node runs the pool's current render when it
    // registers (as a real node after its first boot), so the measured rollout is the change.
    let installed = match cfg.new_nodes {
        true => None,
        false => {
            let name = pool["status"]["configuration"]["name"].as_str().unwrap_or("");
            let v = ctx
                .ok(
                    "(admin) GET machineconfig",
                    reqwest::Method::GET,
                    &ctx.mc_path(name),
                    &admin,
                    None,
                )
                .await?;
            Some(Arc::new(serde_json::from_value::<MachineConfig>(v)?))
        }
    };
    let t_tokens = Instant::now();
    progress.set(|ph| ph.doing = format!("issuing {n} node tokens"));
    let names: Vec<String> = (0..n).map(|i| format!("sim-worker-{i:05}")).collect();
    let tokens: Vec<String> = {
        use futures_util::StreamExt;
        let futs = names.iter().map(|name| {
            let ctx = ctx.clone();
            let admin = admin.clone();
            async move {
                // The role label its simulated daemon registers with, the admin's decision.
                let body = json!({"apiVersion": crate::auth::API_VERSION, "kind": "Token",
                                  "spec": {"kind": "node", "node": name,
                                           "labels": {"node-role.kubernetes.io/worker": ""}}});
                let t = ctx
                    .ok(
                        "(admin) POST token",
                        reqwest::Method::POST,
                        "/apis/auth.mco.dev/v1/tokens",
                        &admin,
                        Some((JSON, &body)),
                    )
                    .await?;
                t["status"]["token"]
                    .as_str()
                    .map(str::to_string)
                    .context("no token in the answer")
            }
        });
        futures_util::stream::iter(futs)
            .buffered(cfg.concurrency.max(1))
            .collect::<Vec<anyhow::Result<String>>>()
            .await
            .into_iter()
            .collect::<anyhow::Result<_>>()?
    };
    let token_issue_secs = t_tokens.elapsed().as_secs_f64();
    progress.set(|ph| ph.token_issue_secs = token_issue_secs);
    // Nodes; registrations are staggered by a semaphore so that N connects do not all land at once.
    let stop = CancellationToken::new();
    let _stop = stop.clone().drop_guard();
    let gate = Arc::new(tokio::sync::Semaphore::new(cfg.concurrency.max(1)));
    let t_reg = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, (name, token)) in names.iter().zip(tokens).enumerate() {
        let (ctx, stop, gate, name, installed) =
            (ctx.clone(), stop.clone(), gate.clone(), name.clone(), installed.clone());
        let caller = ctx.caller(token)?;
        tasks.spawn(sim_node(ctx, i, name, caller, installed, gate, stop));
    }
    let failed = |tasks: &mut tokio::task::JoinSet<anyhow::Result<()>>| -> Option<anyhow::Error> {
        while let Some(r) = tasks.try_join_next() {
            match r {
                Ok(Err(e)) => return Some(e),
                Err(e) => return Some(anyhow!("a simulated node panicked: {e}")),
                Ok(Ok(())) => {}
            }
        }
        None
    };
    let pool = tokio::select! {
        p = wait_pool(&ctx, &admin, cfg.timeout, "every node registered and Updated", |p| pool_updated(p, n, None, None)) => p?,
        Some(r) = tasks.join_next() => return Err(node_ended(r)),
    };
    let registration_secs = t_reg.elapsed().as_secs_f64();
    let old_config = pool["status"]["configuration"]["name"]
        .as_str()
        .unwrap_or("")
        .to_string();
    progress.set(|ph| {
        ph.registration_secs = registration_secs;
        ph.old_config = old_config.clone();
    });
    // Baselines, then the change.
    let before = store_stats(&ctx, &admin).await?;
    let spid = child.as_ref().map(|c| c.pid.to_string());
    let server_cpu0 = spid.as_deref().map(cpu_secs).unwrap_or(0.0);
    let sim_cpu0 = cpu_secs("self");
    progress.set(|ph| ph.sim_cpu0 = sim_cpu0);
    let stamp = jiff::Timestamp::now().as_second();
    let mc = json!({
        "apiVersion": format!("{}/v1", ctx.group), "kind": "MachineConfig",
        "metadata": {"name": format!("99-sim-{stamp}"), "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": [{
            "path": format!("/etc/mco-sim/{stamp}"), "mode": 420, "overwrite": true,
            "contents": {"source": format!("data:,rollout%20{stamp}%0A")}}]}}}
    });
    let t0 = Instant::now();
    progress.set(|ph| ph.rollout_start = Some(t0));
    let mcs = format!("/apis/{}/v1/machineconfigs", ctx.group);
    ctx.ok(
        "(admin) POST machineconfig",
        reqwest::Method::POST,
        &mcs,
        &admin,
        Some((JSON, &mc)),
    )
    .await?;
    let pool = tokio::select! {
        p = wait_pool(&ctx, &admin, cfg.timeout, "the rollout", |p| pool_updated(p, n, None, Some(&old_config))) => p?,
        Some(r) = tasks.join_next() => return Err(node_ended(r)),
    };
    let rollout_secs = t0.elapsed().as_secs_f64();
    let server_cpu_secs = spid.as_deref().map(|p| cpu_secs(p) - server_cpu0);
    let sim_cpu_secs = cpu_secs("self") - sim_cpu0;
    if let Some(e) = failed(&mut tasks) {
        return Err(e.context("a simulated node failed"));
    }
    let new_config = pool["status"]["configuration"]["name"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let after = store_stats(&ctx, &admin).await?;
    let t_list = Instant::now();
    let list = ctx
        .ok("LIST nodes", reqwest::Method::GET, "/api/v1/nodes", &admin, None)
        .await?;
    let list_nodes_ms = t_list.elapsed().as_secs_f64() * 1000.0;
    let (cc, st) = (ctx.keys.current_config(), ctx.keys.state());
    let nodes_at_new_config = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|n| {
            let a = &n["metadata"]["annotations"];
            a[&cc].as_str() == Some(&new_config) && a[&st] == "Done"
        })
        .count();
    let (server_rss_bytes, server_peak_rss_bytes) = child.as_ref().map(|c| rss(c.pid)).unwrap_or((None, None));
    stop.cancel();
    tasks.shutdown().await;
    if let Some(mut c) = child.take() {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(c.pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        if tokio::time::timeout(Duration::from_secs(15), c.proc.wait())
            .await
            .is_err()
        {
            let _ = c.proc.kill().await;
        }
        // Dropping `c` removes the data dir it made.
    }
    let max = max_unavailable_count(&cfg.max_unavailable, n);
    let ideal = ideal_secs(n, max, cfg.apply, cfg.reboot);
    let events = after["newestResourceVersion"]
        .as_u64()
        .unwrap_or(0)
        .saturating_sub(before["newestResourceVersion"].as_u64().unwrap_or(0));
    Ok(Report {
        nodes: n,
        max_unavailable: cfg.max_unavailable.clone(),
        max_unavailable_count: max,
        apply_ms: cfg.apply.as_millis() as u64,
        reboot_ms: cfg.reboot.as_millis() as u64,
        jitter: cfg.jitter,
        failure_rate: cfg.failure_rate,
        token_issue_secs,
        registration_secs,
        old_config,
        new_config,
        rollout_secs,
        ideal_secs: ideal,
        ratio: if ideal > 0.0 {
            rollout_secs / ideal
        } else {
            f64::INFINITY
        },
        server_cpu_secs,
        server_cpu_core_share: server_cpu_secs.map(|c| c / rollout_secs.max(1e-9)),
        server_rss_bytes,
        server_peak_rss_bytes,
        sim_cpu_secs,
        events,
        events_per_sec: events as f64 / rollout_secs.max(1e-9),
        store_bytes_before: before["bytesOnDisk"].as_u64().unwrap_or(0),
        store_bytes_after: after["bytesOnDisk"].as_u64().unwrap_or(0),
        store_body_bytes_after: after["bodyBytes"].as_u64().unwrap_or(0),
        failures: ctx.progress.failures.load(std::sync::atomic::Ordering::Relaxed),
        nodes_at_new_config,
        list_nodes_ms,
        latency: ctx.progress.lat.summary(),
        load_average: load_average(),
        timed_out: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_unavailable_rounds_a_percentage_down_and_is_at_least_one() {
        // MCO getMaxUnavailable: intstr.GetScaledValueFromIntOrPercent(.., roundUp=false), min 1.
        assert_eq!(max_unavailable_count("10%", 10_000), 1000);
        assert_eq!(max_unavailable_count("10%", 15), 1);
        assert_eq!(max_unavailable_count("10%", 5), 1);
        assert_eq!(max_unavailable_count("3", 100), 3);
        assert_eq!(max_unavailable_count("0", 100), 1);
    }

    #[test]
    fn ideal_bound_is_waves_times_node_time() {
        let (a, r) = (Duration::from_millis(200), Duration::from_millis(800));
        assert_eq!(ideal_secs(10_000, 1000, a, r), 10.0);
        assert_eq!(ideal_secs(1001, 1000, a, r), 2.0);
    }
}
