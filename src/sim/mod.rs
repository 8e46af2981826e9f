//! `mco sim`: a fleet simulator. N protocol-level simulated daemons in one process drive a real
//! server (a child `mco server` process, or one given by `--server`) through one rollout, and
//! report what it cost.
//!
//! Owns the simulated node ([`sim_node`]): the same REST calls, watch and annotation transitions
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

use crate::model::{Keys, MachineConfig, NodeState};
use crate::protocol::DrainRequest;
use anyhow::{anyhow, bail, Context};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

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
struct Latencies(Mutex<BTreeMap<&'static str, Vec<u32>>>);

impl Latencies {
    fn record(&self, verb: &'static str, since: Instant) {
        let us = since.elapsed().as_micros().min(u32::MAX as u128) as u32;
        self.0.lock().expect("latency lock").entry(verb).or_default().push(us);
    }

    fn summary(&self) -> Vec<Latency> {
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

/// Who makes a call: a bearer token and the HTTP client (its own connections) it is sent
/// with. Each simulated node has its own, as each real daemon has its own process and
/// connection: over TLS the client speaks HTTP/2, and one connection shared by a fleet
/// allows only the server's 200 concurrent streams, so a fleet of watches beyond that
/// starved every other call (issue 24, item 11). The admin has its own too, so its polls of
/// the pool are never queued behind the nodes' watches.
#[derive(Clone)]
struct Caller {
    token: String,
    http: reqwest::Client,
}

/// What a run has done so far: kept outside the run's future, so that a run cut short by
/// `--timeout` still reports it ([`TimedOut`]).
#[derive(Default)]
struct Progress {
    lat: Latencies,
    failures: std::sync::atomic::AtomicU64,
    phase: Mutex<Phase>,
}

/// The run's phase and the figures of the phases it finished.
#[derive(Default)]
struct Phase {
    /// What the run waits for now (`issuing 1000 node tokens`, `the rollout`).
    doing: String,
    token_issue_secs: f64,
    registration_secs: f64,
    old_config: String,
    /// When the rollout started (the MachineConfig was created).
    rollout_start: Option<Instant>,
    /// The worker pool's status as last seen.
    pool_status: Value,
    /// The simulator's CPU at the rollout's start (`cpu_secs("self")`).
    sim_cpu0: f64,
}

impl Progress {
    fn set(&self, f: impl FnOnce(&mut Phase)) {
        f(&mut self.phase.lock().unwrap_or_else(|e| e.into_inner()));
    }
}

/// What every simulated node shares.
struct Ctx {
    base: String,
    group: String,
    keys: Keys,
    /// The TLS settings each [`Caller`]'s client is built with.
    tls: rustls::ClientConfig,
    progress: Arc<Progress>,
    cfg: SimConfig,
}

impl Ctx {
    /// A caller with `token` and an HTTP client of its own (its own connection pool).
    fn caller(&self, token: String) -> anyhow::Result<Caller> {
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(self.tls.clone())
            .pool_idle_timeout(crate::client::CLIENT_IDLE_TIMEOUT)
            .connect_timeout(Duration::from_secs(10))
            .build()?;
        Ok(Caller { token, http })
    }

    /// One timed request; the answer's JSON, or an error naming the status and body.
    async fn call(
        &self,
        verb: &'static str,
        method: reqwest::Method,
        path: &str,
        who: &Caller,
        body: Option<(&str, &Value)>,
    ) -> anyhow::Result<(u16, Value)> {
        let mut req = who
            .http
            .request(method, format!("{}{}", self.base, path))
            .bearer_auth(&who.token);
        if let Some((content_type, b)) = body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, content_type)
                .body(serde_json::to_vec(b)?);
        }
        let start = Instant::now();
        let resp = req.send().await.with_context(|| format!("{verb} {path}"))?;
        let code = resp.status().as_u16();
        let bytes = resp.bytes().await.with_context(|| format!("{verb} {path}"))?;
        self.progress.lat.record(verb, start);
        let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok((code, v))
    }

    async fn ok(
        &self,
        verb: &'static str,
        method: reqwest::Method,
        path: &str,
        who: &Caller,
        body: Option<(&str, &Value)>,
    ) -> anyhow::Result<Value> {
        let (code, v) = self.call(verb, method, path, who, body).await?;
        if !(200..300).contains(&code) {
            bail!("{verb} {path}: {code} {}", v["message"].as_str().unwrap_or(""));
        }
        Ok(v)
    }

    fn node_path(&self, name: &str) -> String {
        format!("/api/v1/nodes/{name}")
    }

    fn mc_path(&self, name: &str) -> String {
        format!("/apis/{}/v1/machineconfigs/{name}", self.group)
    }

    fn pool_path(&self, name: &str) -> String {
        format!("/apis/{}/v1/machineconfigpools/{name}", self.group)
    }

    /// `d` with the configured jitter, from the node's generator.
    fn jittered(&self, d: Duration, rng: &mut Rng) -> Duration {
        let j = self.cfg.jitter.clamp(0.0, 1.0);
        d.mul_f64(1.0 - j + 2.0 * j * rng.next_f64())
    }
}

/// xorshift64*: per-node jitter and failures without a dependency (not for secrets).
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

const MERGE: &str = "application/merge-patch+json";
const JSON: &str = "application/json";

/// One simulated node's mutable view: the latest Node seen (from the watch or a PATCH answer).
struct SimNode {
    ctx: Arc<Ctx>,
    name: String,
    token: Caller,
    rx: watch::Receiver<Value>,
    tx: Arc<watch::Sender<Value>>,
}

fn rv(node: &Value) -> u64 {
    node["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl SimNode {
    fn ann(&self, key: &str) -> String {
        self.rx.borrow()["metadata"]["annotations"][key]
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    fn observe(&self, node: Value) {
        self.tx.send_if_modified(|have| {
            if rv(&node) >= rv(have) {
                *have = node;
                true
            } else {
                false
            }
        });
    }

    /// Merge-patches the annotations that differ from the observed Node, as the agent does.
    async fn annotate(&self, changes: &[(String, Option<&str>)]) -> anyhow::Result<()> {
        let mut patch = serde_json::Map::new();
        {
            let node = self.rx.borrow();
            for (k, v) in changes {
                if node["metadata"]["annotations"][k].as_str() != *v {
                    patch.insert(k.clone(), v.map_or(Value::Null, |v| Value::String(v.into())));
                }
            }
        }
        if patch.is_empty() {
            return Ok(());
        }
        let body = json!({"metadata": {"annotations": patch}});
        let path = self.ctx.node_path(&self.name);
        let node = self
            .ctx
            .ok(
                "PATCH node",
                reqwest::Method::PATCH,
                &path,
                &self.token,
                Some((MERGE, &body)),
            )
            .await?;
        self.observe(node);
        Ok(())
    }

    async fn set_done(&self, config: &str) -> anyhow::Result<()> {
        let k = &self.ctx.keys;
        self.annotate(&[
            (k.current_config(), Some(config)),
            (k.state(), Some(NodeState::Done.as_str())),
            (k.reason(), Some("")),
            (k.post_config_action(), None),
        ])
        .await
    }

    /// Waits until the observed Node satisfies `f`.
    async fn until(&mut self, f: impl Fn(&Value) -> bool) -> anyhow::Result<()> {
        self.rx
            .wait_for(|n| f(n))
            .await
            .map(drop)
            .map_err(|_| anyhow!("node watch ended"))
    }

    async fn fetch(&self, name: &str) -> anyhow::Result<MachineConfig> {
        let path = self.ctx.mc_path(name);
        let v = self
            .ctx
            .ok("GET machineconfig", reqwest::Method::GET, &path, &self.token, None)
            .await?;
        Ok(serde_json::from_value(v)?)
    }
}

/// Registers (create, or patch labels and status of the existing Node) as the agent's `register`.
async fn register(ctx: &Ctx, name: &str, token: &Caller, boot_id: &str, current: Option<&str>) -> anyhow::Result<()> {
    let status = json!({
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                        "message": "mco sim node is posting ready status"}],
        "nodeInfo": {"bootID": boot_id, "kernelVersion": "sim", "kubeletVersion": "sim",
                     "osImage": "mco sim node", "operatingSystem": "linux", "architecture": "amd64",
                     "containerRuntimeVersion": "none", "kubeProxyVersion": "", "machineID": "",
                     "systemUUID": ""}
    });
    let mut node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "node-role.kubernetes.io/worker": "", "kubernetes.io/hostname": name}},
        "status": status,
    });
    // A node that runs a config says so when it creates its Node, as the agent does (MCO's
    // node-annotations seed).
    if let Some(c) = current {
        let k = &ctx.keys;
        node["metadata"]["annotations"] = json!({k.current_config(): c, k.desired_config(): c});
    }
    let (code, v) = ctx
        .call(
            "POST node",
            reqwest::Method::POST,
            "/api/v1/nodes",
            token,
            Some((JSON, &node)),
        )
        .await?;
    match code {
        200..=299 => {}
        409 => {
            let labels = json!({"metadata": {"labels": {"kubernetes.io/hostname": name}}});
            ctx.ok(
                "PATCH node",
                reqwest::Method::PATCH,
                &ctx.node_path(name),
                token,
                Some((MERGE, &labels)),
            )
            .await?;
        }
        _ => bail!("registering {name}: {code} {}", v["message"].as_str().unwrap_or("")),
    }
    let path = format!("{}/status", ctx.node_path(name));
    ctx.ok(
        "PATCH node/status",
        reqwest::Method::PATCH,
        &path,
        token,
        Some((MERGE, &json!({"status": status}))),
    )
    .await?;
    Ok(())
}

/// Keeps `tx` at the latest Node: GET, then watch from its resourceVersion (re-GET on end).
async fn watch_node(
    ctx: Arc<Ctx>,
    name: String,
    token: Caller,
    tx: Arc<watch::Sender<Value>>,
    stop: CancellationToken,
) {
    use futures_util::StreamExt;
    while !stop.is_cancelled() {
        let got = ctx
            .ok("GET node", reqwest::Method::GET, &ctx.node_path(&name), &token, None)
            .await;
        let Ok(node) = got else {
            tokio::select! { _ = stop.cancelled() => return, _ = tokio::time::sleep(Duration::from_secs(1)) => continue }
        };
        let from = rv(&node);
        tx.send_if_modified(|have| (rv(&node) >= rv(have)).then(|| *have = node.clone()).is_some());
        let path = format!(
            "{}/api/v1/nodes?watch=true&fieldSelector=metadata.name%3D{name}&resourceVersion={from}",
            ctx.base
        );
        let start = Instant::now();
        let resp = tokio::select! {
            _ = stop.cancelled() => return,
            r = token.http.get(&path).bearer_auth(&token.token).send() => r,
        };
        ctx.progress.lat.record("WATCH node (open)", start);
        let Ok(resp) = resp.and_then(|r| r.error_for_status()) else {
            tokio::select! { _ = stop.cancelled() => return, _ = tokio::time::sleep(Duration::from_secs(1)) => continue }
        };
        let mut stream = resp.bytes_stream();
        let mut buf = Vec::new();
        loop {
            let chunk = tokio::select! {
                _ = stop.cancelled() => return,
                c = stream.next() => c,
            };
            let Some(Ok(chunk)) = chunk else { break };
            buf.extend_from_slice(&chunk);
            while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=pos).collect();
                let Ok(ev) = serde_json::from_slice::<Value>(&line) else {
                    continue;
                };
                if matches!(ev["type"].as_str(), Some("ADDED" | "MODIFIED")) {
                    let obj = ev["object"].clone();
                    tx.send_if_modified(|have| (rv(&obj) >= rv(have)).then(|| *have = obj.clone()).is_some());
                }
            }
        }
    }
}

/// One simulated node's life: boot (register, watch), first-boot config, then updates with
/// drain, apply delay, reboot (new boot id, register again) and uncordon, until `stop`.
async fn sim_node(
    ctx: Arc<Ctx>,
    idx: usize,
    name: String,
    token: Caller,
    installed: Option<Arc<MachineConfig>>,
    gate: Arc<tokio::sync::Semaphore>,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((idx as u64 + 1) * 0x1000_0000_01B3));
    let k = ctx.keys.clone();
    // An installed node boots into its config (the agent's Booting phase); a new one waits for
    // desiredConfig (FirstBoot).
    let mut booting = installed.is_some();
    let mut current = installed;
    let mut first = true;
    loop {
        let boot_id = uuid::Uuid::now_v7().to_string();
        {
            let _permit = if first { Some(gate.acquire().await?) } else { None };
            first = false;
            register(&ctx, &name, &token, &boot_id, current.as_ref().map(|c| c.name())).await?;
        }
        let (tx, rx) = watch::channel(Value::Null);
        let tx = Arc::new(tx);
        let boot = stop.child_token();
        let _end_watch = boot.clone().drop_guard();
        tokio::spawn(watch_node(
            ctx.clone(),
            name.clone(),
            token.clone(),
            tx.clone(),
            boot.clone(),
        ));
        let mut node = SimNode {
            ctx: ctx.clone(),
            name: name.clone(),
            token: token.clone(),
            rx,
            tx,
        };
        node.until(|n| !n.is_null()).await?;
        if booting {
            // After the reboot: clear post-config-action, uncordon, then Done (agent on_booting).
            let cur = current.clone().expect("a node reboots into a config");
            node.annotate(&[(k.post_config_action(), None)]).await?;
            let want = DrainRequest::Uncordon(cur.name()).to_string();
            node.annotate(&[(k.desired_drain(), Some(&want))]).await?;
            let lad = k.last_applied_drain();
            node.until(|n| n["metadata"]["annotations"][&lad].as_str() == Some(&want))
                .await?;
            node.set_done(cur.name()).await?;
        }
        // Idle: react to desiredConfig.
        loop {
            let (dc, cc) = (k.desired_config(), k.current_config());
            let have = current.as_ref().map(|c| c.name().to_string());
            tokio::select! {
                _ = stop.cancelled() => return Ok(()),
                r = node.until(|n| {
                    let d = n["metadata"]["annotations"][&dc].as_str().unwrap_or("");
                    !d.is_empty() && Some(d) != have.as_deref()
                }) => r?,
            }
            let desired_name = node.ann(&dc);
            let desired = Arc::new(node.fetch(&desired_name).await?);
            let Some(cur) = current.clone() else {
                // First boot: the desired config is the node's initial one (no drain, no reboot).
                node.set_done(&desired_name).await?;
                current = Some(desired);
                continue;
            };
            let _ = cc;
            node.annotate(&[(k.state(), Some(NodeState::Working.as_str())), (k.reason(), Some(""))])
                .await?;
            let mcfg = format!(
                "/apis/operator.openshift.io/v1/machineconfigurations/{}",
                crate::disruption::CLUSTER
            );
            let (code, cluster) = ctx
                .call("GET machineconfiguration", reqwest::Method::GET, &mcfg, &token, None)
                .await?;
            let cluster = (code == 200).then(|| serde_json::from_value(cluster).ok()).flatten();
            let policies = crate::disruption::policies_for(cluster.as_ref());
            let plan = crate::disruption::plan(&cur, &desired, &policies).map_err(|e| anyhow!(e))?;
            let actions = format!("{} for {}", plan.summary(), desired.name());
            node.annotate(&[(crate::disruption::ACTIONS_ANNOTATION.to_string(), Some(&actions))])
                .await?;
            if plan.drain {
                let want = DrainRequest::Drain(&desired_name).to_string();
                node.annotate(&[(k.desired_drain(), Some(&want))]).await?;
                let lad = k.last_applied_drain();
                node.until(|n| n["metadata"]["annotations"][&lad].as_str() == Some(&want))
                    .await?;
            }
            // Apply, failing at the configured rate (Degraded, then the daemon's 1 s backoff).
            loop {
                tokio::time::sleep(ctx.jittered(ctx.cfg.apply, &mut rng)).await;
                if rng.next_f64() >= ctx.cfg.failure_rate {
                    break;
                }
                ctx.progress.failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let reason = format!("simulated failure writing config {desired_name} (mco sim --failure-rate)");
                node.annotate(&[
                    (k.state(), Some(NodeState::Degraded.as_str())),
                    (k.reason(), Some(&reason)),
                ])
                .await?;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            current = Some(desired.clone());
            if plan.reboots() {
                node.annotate(&[(k.post_config_action(), Some("Rebooting"))]).await?;
                tokio::time::sleep(ctx.jittered(ctx.cfg.reboot, &mut rng)).await;
                booting = true;
                break;
            }
            if plan.drain {
                let want = DrainRequest::Uncordon(&desired_name).to_string();
                node.annotate(&[(k.desired_drain(), Some(&want))]).await?;
                let lad = k.last_applied_drain();
                node.until(|n| n["metadata"]["annotations"][&lad].as_str() == Some(&want))
                    .await?;
            }
            node.set_done(&desired_name).await?;
        }
    }
}

/// A child `mco server` and what to read about it.
///
/// Dropping it, on any path out of the run (success, a failed node, a timeout, Ctrl-C),
/// kills the server and removes the data dir the simulator made: a 10,000-node run leaves
/// nearly a gigabyte there.
struct Child {
    proc: tokio::process::Child,
    pid: u32,
    /// A data dir the simulator made (removed at the end).
    made: Option<PathBuf>,
}

impl Drop for Child {
    fn drop(&mut self) {
        let Some(dir) = self.made.take() else { return };
        // SIGKILL, then wait (bounded) until the process no longer runs, so that no write of
        // its lands in the directory after it is removed.
        let _ = self.proc.start_kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while process_running(self.pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Whether `pid` exists and is not a zombie (`/proc/<pid>/stat`'s state field).
fn process_running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('Z')))
        .is_some_and(|zombie| !zombie)
}

async fn start_child(cfg: &SimConfig) -> anyhow::Result<(Child, String, String)> {
    use tokio::io::AsyncBufReadExt;
    let (dir, made) = match &cfg.data_dir {
        Some(d) => (d.clone(), None),
        None => {
            let d = std::env::temp_dir().join(format!("mco-sim-{}", uuid::Uuid::now_v7()));
            (d.clone(), Some(d))
        }
    };
    let bin = match &cfg.server_bin {
        Some(b) => b.clone(),
        None => std::env::current_exe()?,
    };
    let mut command = tokio::process::Command::new(&bin);
    command
        .arg("server")
        .arg("--data-dir")
        .arg(&dir)
        .arg("--listen")
        .arg("127.0.0.1:0")
        // Every simulated daemon holds its watch open on its own connection, as real nodes
        // do: a server for N nodes needs N connections and room for the requests beside them
        // (the default cap, 1,024, is for fleets up to about a thousand nodes).
        .arg("--max-connections")
        .arg(
            files_needed(cfg.nodes)
                .max(crate::api::listen::DEFAULT_MAX_CONNECTIONS as u64)
                .to_string(),
        )
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    // Tied to this process: a simulator killed outright (SIGKILL) takes its server with it.
    let proc = crate::process::spawn_tied(command, nix::sys::signal::Signal::SIGTERM)
        .await
        .with_context(|| format!("starting {} server", bin.display()))?;
    let pid = proc.id().context("child server pid")?;
    let mut child = Child { proc, pid, made };
    let stdout = child.proc.stdout.take().context("child stdout")?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let url = loop {
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .context("the child server did not say where it listens within 60 s")??
            .context("the child server exited before listening")?;
        if let Some(u) = line.strip_prefix("mco server listening on ") {
            break u.trim().to_string();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let token = std::fs::read_to_string(dir.join(crate::credentials::ADMIN_TOKEN_FILE))
        .context("reading the child server's admin.token")?
        .trim()
        .to_string();
    Ok((child, url, token))
}

/// user+sys CPU seconds of `pid` (`/proc/<pid>/stat` fields 14, 15).
fn cpu_secs(pid: &str) -> f64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    let rest = s.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // After ")": state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    (ticks(11) + ticks(12)) / hz
}

/// `VmRSS` and `VmHWM` of `pid`, in bytes.
fn rss(pid: u32) -> (Option<u64>, Option<u64>) {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return (None, None);
    };
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
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

/// The report of a run cut short after `elapsed`: the finished phases' figures, the
/// rollout's time so far, the pool's last counts, the latencies and failures seen.
fn partial_report(cfg: &SimConfig, progress: &Progress, child: Option<&Child>, elapsed: Duration) -> Report {
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
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

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
