//! `mco rollback mcp POOL --to RENDERED | --at TIME|rv:N` and `mco rollout undo mcp POOL`:
//! restore a pool's source MachineConfigs to what they were when a render was produced, through
//! `POST /apis/history.mco.dev/v1/rollbacks`, then check that the pool targets that render
//! again (content addressing: the same sources render the same name).

use super::{describe_error, parse_kind};
use crate::client::Client;
use crate::model::{Kind, MachineConfigPool};
use crate::preview::Impact;
use anyhow::{anyhow, bail};
use serde_json::{json, Value};
use std::time::Duration;

/// What to roll back to.
#[derive(Clone, Debug)]
pub enum Target {
    /// A rendered config of the pool.
    Render(String),
    /// The render the pool targeted at a point (RFC 3339 time or `rv:N`).
    At(String),
    /// The render before the current one.
    Previous,
}

/// How a rollback runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Show the plan and its impact; change nothing.
    pub dry_run: bool,
    /// Proceed even when other pools' rendered configs change.
    pub force: bool,
}

/// How long the command waits for the render controller to point the pool at the target.
const RENDER_WAIT: Duration = Duration::from_secs(30);

/// Runs a rollback (or its dry run) and describes it.
pub async fn rollback(
    client: &Client,
    kind: &str,
    pool: &str,
    target: Target,
    options: Options,
) -> anyhow::Result<String> {
    let Options { dry_run, force } = options;
    if parse_kind(kind)? != Kind::MachineConfigPool {
        bail!("rollback works on pools: mco rollback mcp <pool> --to <rendered config>");
    }
    let mut body = json!({"pool": pool, "dryRun": dry_run, "force": force});
    match &target {
        Target::Render(r) => body["to"] = json!(r),
        Target::At(at) => body["at"] = json!(at),
        Target::Previous => body["undo"] = json!(true),
    }
    let answer: Value = client
        .post_path(&format!("/apis/{}/rollbacks", crate::history::API_VERSION), &body)
        .await
        .map_err(|e| anyhow!(describe_error(&e)))?;
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    let target = s(&answer["target"]);
    let mut out = format!(
        "rollback of pool {pool}: {} -> {target} (produced at resourceVersion {})\n",
        s(&answer["current"]),
        answer["producedAt"]
    );
    let steps = answer["steps"].as_array().cloned().unwrap_or_default();
    if steps.is_empty() {
        out.push_str("  the sources are already as they were\n");
    }
    for st in &steps {
        out.push_str(&format!(
            "  {} {}/{}\n",
            s(&st["action"]),
            s(&st["kind"]).to_lowercase(),
            s(&st["name"])
        ));
    }
    out.push_str(&format!("  the restored sources render {}\n", s(&answer["predicted"])));
    for other in answer["otherPools"].as_array().into_iter().flatten() {
        out.push_str(&format!("  also changes pool {} -> {}\n", s(&other[0]), s(&other[1])));
    }
    if let Some(w) = answer["warning"].as_str() {
        out.push_str(&format!("warning: {w}\n"));
    }
    let impact: Impact = serde_json::from_value(answer["impact"].clone())?;
    out.push_str("impact:\n");
    for line in crate::preview::render_text(&impact).lines() {
        out.push_str(&format!("  {line}\n"));
    }
    if dry_run {
        out.push_str("dry run: nothing was changed\n");
        return Ok(out);
    }
    out.push_str(&format!(
        "applied at resourceVersion {}\n",
        s(&answer["resourceVersion"])
    ));
    let deadline = tokio::time::Instant::now() + RENDER_WAIT;
    loop {
        let p: MachineConfigPool = client
            .get(Kind::MachineConfigPool, pool)
            .await
            .map_err(|e| anyhow!(describe_error(&e)))?;
        if p.spec.configuration.name == target {
            out.push_str(&format!(
                "pool {pool} targets {target} again: the restored sources rendered the same name\n"
            ));
            return Ok(out);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "{out}pool {pool} targets {} after {}s, not {target}",
                p.spec.configuration.name,
                RENDER_WAIT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
