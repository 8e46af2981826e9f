//! kubectl's everyday write verbs on mco's kinds: `cordon`, `uncordon`, `drain` (nodes),
//! `patch` (any kind, `--type merge|json|strategic`) and `rollout pause|resume` (a pool's
//! `spec.paused`), with kubectl's output lines and exit codes.
//!
//! Owns each verb's decision and message; writes go through [`Client`] patches. Sources:
//! k8s.io/kubectl pkg/cmd/drain/drain.go (`RunCordonOrUncordon`, `RunDrain`), pkg/drain/cordon.go
//! (the `spec.unschedulable` patch), pkg/cmd/patch/patch.go (`patchOperation`, the patch types),
//! pkg/cmd/rollout/rollout_pause.go and rollout_resume.go (`paused`, `already paused`).

use super::{describe_error, resource_name};
use crate::client::{Client, Selectors};
use crate::model::Kind;
use serde_json::{json, Value};

/// What a verb printed: stdout, stderr, and whether every object succeeded (exit 0).
#[derive(Debug, Default)]
pub struct Outcome {
    pub out: String,
    pub err: String,
    pub ok: bool,
}

impl Outcome {
    fn new() -> Outcome {
        Outcome {
            ok: true,
            ..Default::default()
        }
    }

    fn fail(&mut self, line: String) {
        self.ok = false;
        self.err.push_str(&line);
        self.err.push('\n');
    }
}

/// kubectl's `--dry-run` values: `none` (the default), `client`, `server`; the suffix its
/// printers add (`node/x cordoned (dry run)`, `(server dry run)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DryRun {
    #[default]
    None,
    Client,
    Server,
}

impl DryRun {
    /// kubectl's spellings (`GetDryRunStrategy`: `none`, `client`, `server`; `true` is
    /// `client`, `false` `none`) and its message for any other.
    pub fn parse(s: &str) -> Result<DryRun, String> {
        match s {
            "none" | "false" => Ok(DryRun::None),
            "client" | "true" => Ok(DryRun::Client),
            "server" => Ok(DryRun::Server),
            _ => Err(format!(
                "Invalid dry-run value ({s}). Must be \"none\", \"server\", or \"client\"."
            )),
        }
    }

    /// The suffix kubectl's printers add to an object's line for this mode.
    pub fn suffix(self) -> &'static str {
        match self {
            DryRun::None => "",
            DryRun::Client => " (dry run)",
            DryRun::Server => " (server dry run)",
        }
    }
}

/// The nodes a `cordon`/`uncordon`/`drain` names: `NODE` or those `-l` selects.
async fn nodes(client: &Client, name: Option<&str>, selectors: &Selectors, o: &mut Outcome) -> Vec<Value> {
    match name {
        Some(n) => match client.get::<Value>(Kind::Node, n).await {
            Ok(v) => vec![v],
            Err(e) => {
                o.fail(describe_error(&e));
                Vec::new()
            }
        },
        None => match client.list_selected(Kind::Node, selectors, None).await {
            Ok(list) => list["items"].as_array().cloned().unwrap_or_default(),
            Err(e) => {
                o.fail(describe_error(&e));
                Vec::new()
            }
        },
    }
}

/// `mco cordon|uncordon NODE` (or `-l SELECTOR`): sets or clears `spec.unschedulable`, printing
/// `node/NAME cordoned` or `node/NAME already cordoned` (uncordoned likewise), as kubectl's
/// `RunCordonOrUncordon`. `None` name without a selector is kubectl's usage error.
pub async fn cordon(client: &Client, name: Option<&str>, selectors: &Selectors, desired: bool, dry: DryRun) -> Outcome {
    let mut o = Outcome::new();
    let verb = if desired { "cordon" } else { "uncordon" };
    if name.is_none() && selectors.label.is_none() {
        o.fail(format!("error: USAGE: {verb} NODE [flags]"));
        return o;
    }
    for node in nodes(client, name, selectors, &mut o).await {
        let n = node["metadata"]["name"].as_str().unwrap_or("").to_string();
        let unschedulable = node["spec"]["unschedulable"].as_bool().unwrap_or(false);
        if unschedulable == desired {
            o.out.push_str(&format!("node/{n} already {verb}ed{}\n", dry.suffix()));
            continue;
        }
        if dry != DryRun::Client {
            // kubectl's cordon helper patches `{"spec":{"unschedulable":true}}`; false is
            // omitted from a Node (`omitempty`), so uncordoning removes the field.
            let value = if desired { json!(true) } else { Value::Null };
            let body = json!({"spec": {"unschedulable": value}}).to_string();
            let c = match dry {
                DryRun::Server => client.clone().with_dry_run(),
                _ => client.clone(),
            };
            if let Err(e) = c
                .patch(Kind::Node, &n, false, "application/strategic-merge-patch+json", body)
                .await
            {
                o.fail(format!("error: unable to {verb} node {n:?}: {}", describe_error(&e)));
                continue;
            }
        }
        o.out.push_str(&format!("node/{n} {verb}ed{}\n", dry.suffix()));
    }
    o
}

/// `mco drain NODE`: kubectl's drain, cordon first, then the node's pods evicted. mco runs no
/// pods (its nodes hold none: `/api/v1/pods` is always empty), so once cordoned the node is
/// drained: `node/NAME cordoned`, then `node/NAME drained`.
pub async fn drain(client: &Client, name: Option<&str>, selectors: &Selectors, dry: DryRun) -> Outcome {
    let mut o = cordon(client, name, selectors, true, dry).await;
    if !o.ok {
        return o;
    }
    for node in nodes(client, name, selectors, &mut o).await {
        let n = node["metadata"]["name"].as_str().unwrap_or("");
        o.out.push_str(&format!("node/{n} drained{}\n", dry.suffix()));
    }
    o
}

/// kubectl's `--type` values and their content types.
pub fn patch_content_type(t: &str) -> Result<&'static str, String> {
    match t {
        "json" => Ok("application/json-patch+json"),
        "merge" => Ok("application/merge-patch+json"),
        "strategic" => Ok("application/strategic-merge-patch+json"),
        _ => Err(format!("--type must be one of [json merge strategic], not {t:?}")),
    }
}

/// `mco patch KIND NAME -p PATCH [--type T]`: the patch (JSON, or YAML as kubectl accepts it)
/// sent as is; `KIND/NAME patched`, or `patched (no change)` when the answer equals the object
/// read before (kubectl's `didPatch`, `reflect.DeepEqual`). Either `--dry-run` is a server-side
/// dry run here (kubectl applies a client one locally; the answer is the same object).
pub async fn patch(client: &Client, kind: Kind, name: &str, patch: &str, patch_type: &str, dry: DryRun) -> Outcome {
    let mut o = Outcome::new();
    let content_type = match patch_content_type(patch_type) {
        Ok(c) => c,
        Err(e) => {
            o.fail(format!("error: {e}"));
            return o;
        }
    };
    let body: Value = match serde_json::from_str(patch).or_else(|_| serde_saphyr::from_str::<Value>(patch)) {
        Ok(v) => v,
        Err(e) => {
            o.fail(format!("error: unable to parse {patch:?}: {e}"));
            return o;
        }
    };
    let before: Value = match client.get(kind, name).await {
        Ok(v) => v,
        Err(e) => {
            o.fail(describe_error(&e));
            return o;
        }
    };
    let c = match dry {
        DryRun::None => client.clone(),
        _ => client.clone().with_dry_run(),
    };
    match c.patch(kind, name, false, content_type, body.to_string()).await {
        Ok(after) => {
            let what = format!("{}/{name}", resource_name(kind, client.group()));
            let op = if after == before {
                "patched (no change)"
            } else {
                "patched"
            };
            // kubectl's patch printer adds no dry-run suffix (pkg/cmd/patch/patch.go `ToPrinter`).
            o.out.push_str(&format!("{what} {op}\n"));
        }
        // kubectl wraps a refused patch type with the type and the object's GroupVersionKind.
        Err(crate::client::ClientError::Status(st)) if st.code == 415 => o.fail(format!(
            "error: {content_type} is not supported by {}/{}, Kind={}: {}",
            kind.group(client.group()),
            kind.info().version,
            kind.as_str(),
            st.message
        )),
        Err(e) => o.fail(describe_error(&e)),
    }
    o
}

/// `mco rollout pause|resume POOL`: sets a pool's `spec.paused` (MCO's rollout pause: the node
/// controller stops moving its nodes); `KIND/POOL paused`, or `already paused` when it is
/// (kubectl's rollout pause and resume texts).
pub async fn pause(client: &Client, pool: &str, paused: bool) -> Outcome {
    let mut o = Outcome::new();
    let current: Value = match client.get(Kind::MachineConfigPool, pool).await {
        Ok(v) => v,
        Err(e) => {
            o.fail(describe_error(&e));
            return o;
        }
    };
    let what = format!("{}/{pool}", resource_name(Kind::MachineConfigPool, client.group()));
    let word = if paused { "paused" } else { "resumed" };
    if current["spec"]["paused"].as_bool().unwrap_or(false) == paused {
        o.out.push_str(&format!("{what} already {word}\n"));
        return o;
    }
    match client
        .merge_patch(
            Kind::MachineConfigPool,
            pool,
            &json!({"spec": {"paused": paused}}),
            false,
        )
        .await
    {
        Ok(_) => o.out.push_str(&format!("{what} {word}\n")),
        Err(e) => o.fail(describe_error(&e)),
    }
    o
}

/// `POOL`, `mcp POOL` or `mcp/POOL` of `rollout pause|resume`: the pool's name.
fn pool_arg(kind: String, pool: Option<String>) -> anyhow::Result<String> {
    let (kind, pool) = match (kind.split_once('/'), pool) {
        (None, None) => return Ok(kind),
        (Some((k, n)), None) => (k.to_string(), n.to_string()),
        (None, Some(n)) => (kind, n),
        (Some(_), Some(_)) => anyhow::bail!("{}", super::MIXED_RESOURCE_ARGS),
    };
    anyhow::ensure!(
        super::parse_kind(&kind)? == Kind::MachineConfigPool,
        "rollout pause and resume act on pools: mco rollout pause POOL"
    );
    Ok(pool)
}

/// The node and flags of `cordon`, `uncordon` and `drain`.
#[derive(clap::Args, Clone)]
pub struct NodeArgs {
    #[command(flatten)]
    pub conn: super::conn::Conn,
    /// The node (or `-l SELECTOR`).
    pub node: Option<String>,
    /// Label selector of the nodes.
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// none, client or server.
    #[arg(long, default_value = "none", num_args = 0..=1, require_equals = true,
          default_missing_value = "client", value_parser = DryRun::parse)]
    pub dry_run: DryRun,
}

/// `drain`'s arguments: the node, and kubectl drain's flags about pods, accepted (mco nodes
/// hold no pods for them to act on).
#[derive(clap::Args, Clone)]
pub struct DrainArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    /// Ignore DaemonSet-managed pods (kubectl's flag; there are none).
    #[arg(long)]
    pub ignore_daemonsets: bool,
    /// Delete pods using emptyDir volumes (kubectl's flag; there are none).
    #[arg(long)]
    pub delete_emptydir_data: bool,
    /// Delete pods no controller manages (kubectl's flag; there are none).
    #[arg(long)]
    pub force: bool,
    /// Seconds each pod has to terminate (kubectl's flag; there are no pods).
    #[arg(long, value_name = "SECONDS", allow_hyphen_values = true)]
    pub grace_period: Option<i64>,
    /// How long to wait for the evictions (kubectl's flag; there are none).
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
}

/// The arguments of `patch`.
#[derive(clap::Args, Clone)]
pub struct PatchArgs {
    #[command(flatten)]
    pub conn: super::conn::Conn,
    /// `KIND NAME` or `KIND/NAME`.
    #[arg(required = true, num_args = 1..=2, value_name = "KIND[/NAME]")]
    pub target: Vec<String>,
    /// The patch (JSON or YAML).
    #[arg(short = 'p', long = "patch", value_name = "PATCH")]
    pub patch: Option<String>,
    /// A file holding the patch.
    #[arg(long, value_name = "FILE", conflicts_with = "patch")]
    pub patch_file: Option<std::path::PathBuf>,
    /// The patch type: json, merge or strategic (kubectl's default).
    #[arg(long = "type", default_value = "strategic", value_name = "TYPE")]
    pub patch_type: String,
    /// none, client or server.
    #[arg(long, default_value = "none", num_args = 0..=1, require_equals = true,
          default_missing_value = "client", value_parser = DryRun::parse)]
    pub dry_run: DryRun,
}

/// The pool of `rollout pause|resume`: `POOL`, `mcp POOL` or `mcp/POOL`.
#[derive(clap::Args, Clone)]
pub struct PoolArgs {
    #[command(flatten)]
    pub conn: super::conn::Conn,
    /// `POOL`, `mcp` (then POOL) or `mcp/POOL`.
    pub kind: String,
    /// The pool, after `mcp`.
    pub pool: Option<String>,
}

/// Which node verb [`run_node`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeVerb {
    Cordon,
    Uncordon,
    Drain,
}

/// Prints a verb's outcome; its exit code.
fn finish(o: Outcome) -> std::process::ExitCode {
    print!("{}", o.out);
    eprint!("{}", o.err);
    if o.ok {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}

/// `mco cordon|uncordon|drain`.
pub async fn run_node(a: NodeArgs, verb: NodeVerb) -> anyhow::Result<std::process::ExitCode> {
    let client = super::connect(&a.conn.url()).await?;
    let selectors = Selectors {
        label: a.selector.clone(),
        field: None,
    };
    let name = a.node.as_deref();
    Ok(finish(match verb {
        NodeVerb::Cordon => cordon(&client, name, &selectors, true, a.dry_run).await,
        NodeVerb::Uncordon => cordon(&client, name, &selectors, false, a.dry_run).await,
        NodeVerb::Drain => drain(&client, name, &selectors, a.dry_run).await,
    }))
}

/// `mco patch`.
pub async fn run_patch(a: PatchArgs) -> anyhow::Result<std::process::ExitCode> {
    let (kind, name) = match a.target.as_slice() {
        [one] => super::split_resource_name(one)?,
        [kind, name] => (kind.clone(), name.clone()),
        _ => anyhow::bail!("give KIND NAME or KIND/NAME"),
    };
    let kind = super::parse_kind(&kind)?;
    let text = match (a.patch, a.patch_file) {
        (Some(t), _) => t,
        (None, Some(f)) => std::fs::read_to_string(&f)
            .map_err(|e| anyhow::anyhow!("unable to read patch file: {}: {e}", f.display()))?,
        (None, None) => anyhow::bail!("must specify --patch or --patch-file containing the contents of the patch"),
    };
    let client = super::connect(&a.conn.url()).await?;
    Ok(finish(
        patch(&client, kind, &name, &text, &a.patch_type, a.dry_run).await,
    ))
}

/// `mco rollout pause|resume` (`paused`: which).
pub async fn run_pause(a: PoolArgs, paused: bool) -> anyhow::Result<std::process::ExitCode> {
    let pool = pool_arg(a.kind, a.pool)?;
    Ok(finish(
        pause(&super::connect(&a.conn.url()).await?, &pool, paused).await,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectls_flag_values() {
        assert_eq!(patch_content_type("merge"), Ok("application/merge-patch+json"));
        assert_eq!(
            patch_content_type("x").unwrap_err(),
            "--type must be one of [json merge strategic], not \"x\""
        );
        assert_eq!(DryRun::parse("server"), Ok(DryRun::Server));
        assert!(DryRun::parse("maybe").is_err());
    }
}
