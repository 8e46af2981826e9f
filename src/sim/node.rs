//! One simulated node's protocol loop: registration, the watch of its own Node, and the
//! annotation walk of an update (Working, drain, apply delay, reboot, uncordon, Done).

use super::http::{Caller, Ctx, JSON, MERGE};
use crate::model::{MachineConfig, NodeState};
use crate::protocol::DrainRequest;
use anyhow::{anyhow, bail};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// xorshift64*: per-node jitter and failures without a dependency (not for secrets).
pub(super) struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The configured jitter (kept with [`Rng`], the node's generator).
impl Ctx {
    /// `d` with the configured jitter, from the node's generator.
    fn jittered(&self, d: Duration, rng: &mut Rng) -> Duration {
        let j = self.cfg.jitter.clamp(0.0, 1.0);
        d.mul_f64(1.0 - j + 2.0 * j * rng.next_f64())
    }
}

/// One simulated node's mutable view: the latest Node seen (from the watch or a PATCH answer).
pub(super) struct SimNode {
    ctx: Arc<Ctx>,
    name: String,
    token: Caller,
    rx: watch::Receiver<Value>,
    tx: Arc<watch::Sender<Value>>,
}

pub(super) fn rv(node: &Value) -> u64 {
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
pub(super) async fn register(
    ctx: &Ctx,
    name: &str,
    token: &Caller,
    boot_id: &str,
    current: Option<&str>,
) -> anyhow::Result<()> {
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
pub(super) async fn watch_node(
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
pub(super) async fn sim_node(
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
