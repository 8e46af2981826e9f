//! `mco rollout status mcp POOL` and `mco apply --wait`: follow a pool through the watch API
//! until its nodes are on its target config, as `kubectl rollout status` follows a Deployment.
//!
//! Owns judging a pool's progress from its status (pure, [`evaluate`]) and showing it: an
//! indicatif bar on a terminal, one plain line per change otherwise. Fails on Degraded (naming
//! the degraded nodes and their reasons), on a paused pool, and on timeout. The pool's changes
//! come from a [`Watcher`] started at the version first judged (resumed after a cut, re-read
//! on 410 Expired).

use super::describe_error;
use crate::client::watcher::{Event, WatchError, Watcher};
use crate::client::Client;
use crate::model::{Keys, Kind, MachineConfigPool, Node, NodeAnnotations};
use anyhow::{anyhow, bail};
use serde_json::Value;
use std::time::Duration;

/// Where a pool's rollout stands, judged from the pool alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Still updating: the line to show and the `updated`/`total` node counts.
    Waiting { line: String, updated: u64, total: u64 },
    /// Every node is on the target: the closing line.
    Done(String),
    /// The pool reports Degraded (or NodeDegraded / RenderDegraded): the condition's message.
    Degraded(String),
    /// The pool is paused with nodes still to update: they will not move.
    Paused(String),
}

/// Judges `pool` (MCO's pool conditions, mco-facts "pool status"): done when `Updated` is True,
/// `status.configuration` is the target and every machine is updated; degraded when any of
/// `Degraded`, `NodeDegraded`, `RenderDegraded` is True. `expect` is the rendered config the
/// pool must target first (`mco apply --wait` knows it from the preview).
///
/// As `kubectl rollout status` (k8s.io/kubectl pkg/polymorphichelpers/rollout_status.go: a
/// Deployment is judged only when `status.observedGeneration >= metadata.generation`), a
/// pool's status is judged only once the status controller has observed its current spec;
/// before that the stale counts and conditions describe the previous target and are not shown.
pub fn evaluate(pool: &MachineConfigPool, expect: Option<&str>) -> Step {
    let name = pool.name();
    let s = &pool.status;
    let (updated, total) = (s.updated_machine_count.max(0) as u64, s.machine_count.max(0) as u64);
    if let Some(e) = expect {
        if pool.spec.configuration.name != e {
            return Step::Waiting {
                line: format!("Waiting for pool {name:?} to target {e}..."),
                updated: 0,
                total,
            };
        }
    }
    if s.observed_generation < pool.metadata.generation.unwrap_or(0) {
        return Step::Waiting {
            line: format!("Waiting for pool {name:?} spec update to be observed..."),
            updated: 0,
            total,
        };
    }
    for c in ["RenderDegraded", "NodeDegraded", "Degraded"] {
        if pool.condition_status(c) == "True" {
            let msg = pool
                .status
                .conditions
                .iter()
                .find(|x| x.type_ == c)
                .map(|x| x.message.clone())
                .unwrap_or_default();
            // A Degraded pool shows its policy's word even when it holds nothing: it names a
            // node left Degraded at its self-healing cap, and when it is healed next.
            let policy = policy_held(pool).or_else(|| {
                pool.condition(crate::model::POLICY_CONDITION)
                    .filter(|c| !c.message.is_empty())
                    .map(|c| format!("its rollout policy: {}", c.message))
            });
            return Step::Degraded(match policy {
                Some(held) => format!("pool {name:?} is {c}: {msg}\n{held}"),
                None => format!("pool {name:?} is {c}: {msg}"),
            });
        }
    }
    let target = &pool.spec.configuration.name;
    if pool.condition_status("Updated") == "True" && s.configuration.name == *target && updated == total {
        return Step::Done(format!(
            "pool {name:?} successfully rolled out ({target} on {total} of {total} nodes)"
        ));
    }
    if pool.spec.paused {
        let mut line = format!(
            "pool {name:?} is paused with {updated} of {total} nodes updated: its nodes will not update until spec.paused is false"
        );
        if let Some(held) = policy_held(pool) {
            line = format!("{line}\n{held}");
        }
        return Step::Paused(line);
    }
    let line = match policy_held(pool) {
        Some(held) => format!("Waiting for pool {name:?}: {updated} of {total} nodes updated; {held}"),
        None => format!("Waiting for pool {name:?}: {updated} of {total} nodes updated..."),
    };
    Step::Waiting { line, updated, total }
}

/// What the pool's RolloutPolicy holds back, from its condition
/// ([`crate::model::POLICY_CONDITION`], True while it holds nodes): `held by its rollout
/// policy (<reason>): <message>`, the message naming the next window or the rollback command.
fn policy_held(pool: &MachineConfigPool) -> Option<String> {
    let c = pool.condition(crate::model::POLICY_CONDITION)?;
    (c.status == "True").then(|| format!("held by its rollout policy ({}): {}", c.reason, c.message))
}

/// The progress bar of `rollout status` and `apply --wait` (indicatif's template syntax).
pub const BAR_TEMPLATE: &str = "{spinner} {msg} [{bar:30}] {pos}/{len} nodes ({elapsed})";

/// How progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Display {
    /// An indicatif bar (stdout is a terminal).
    Bar,
    /// One line per change.
    Lines,
}

impl Display {
    /// A bar when stdout is a terminal, lines otherwise.
    pub fn detect() -> Display {
        use std::io::IsTerminal;
        if std::io::stdout().is_terminal() {
            Display::Bar
        } else {
            Display::Lines
        }
    }
}

/// The degraded nodes of `pool` with their reasons, one `  node: reason` line each.
async fn degraded_nodes(client: &Client, pool: &str) -> String {
    let keys = Keys::new(client.group());
    let (Ok(pools), Ok(nodes)) = (
        client.list(Kind::MachineConfigPool).await,
        client.list(Kind::Node).await,
    ) else {
        return String::new();
    };
    let pools: Vec<MachineConfigPool> = serde_json::from_value(pools["items"].clone()).unwrap_or_default();
    let nodes: Vec<Node> = serde_json::from_value(nodes["items"].clone()).unwrap_or_default();
    let membership =
        crate::rollout::pools_for_nodes(&pools.iter().collect::<Vec<_>>(), &nodes.iter().collect::<Vec<_>>());
    let mut out = String::new();
    for n in &nodes {
        let name = n.metadata.name.as_deref().unwrap_or("");
        if membership.primary.get(name).map(String::as_str) != Some(pool) {
            continue;
        }
        let a = NodeAnnotations::read(n, &keys);
        if a.state == "Degraded" || a.state == "Unreconcilable" {
            out.push_str(&format!("  {name} ({}): {}\n", a.state, a.reason));
        }
    }
    out
}

/// A time limit: what is left of it now, and what the user gave (the figure errors report).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline {
    pub left: Duration,
    pub given: Duration,
}

impl Deadline {
    /// kubectl rollout status: `--timeout 0s` means no timeout (`None`).
    pub fn from_flag(t: Option<Duration>) -> Option<Deadline> {
        t.filter(|d| !d.is_zero()).map(|d| Deadline { left: d, given: d })
    }
}

/// Follows `pool` until its rollout finishes (returns the closing line), fails on Degraded,
/// paused, or when `timeout` passes (kubectl: `timed out waiting for the condition`). The pool
/// is judged once before the timeout starts, so a finished rollout returns even with no time
/// left. With `watch` false, returns the current line at once (kubectl `--watch=false`).
pub async fn status(
    client: &Client,
    pool: &str,
    expect: Option<&str>,
    timeout: Option<Deadline>,
    watch: bool,
    display: Display,
) -> anyhow::Result<String> {
    let current: Value = client
        .get(Kind::MachineConfigPool, pool)
        .await
        .map_err(|e| anyhow!(describe_error(&e)))?;
    let p: MachineConfigPool = serde_json::from_value(current.clone())?;
    let (first, updated, total) = match evaluate(&p, expect) {
        Step::Waiting { line, .. } if !watch => return Ok(line),
        Step::Waiting { line, updated, total } => (line, updated, total),
        step => return finish(client, pool, step).await,
    };
    let bar = (display == Display::Bar).then(|| {
        let b = indicatif::ProgressBar::new(total);
        b.set_position(updated);
        b.set_message(first.trim_end_matches("...").to_string());
        b.set_style(
            indicatif::ProgressStyle::with_template(BAR_TEMPLATE)
                .expect("template parses")
                .progress_chars("=> "),
        );
        b.enable_steady_tick(Duration::from_millis(120));
        b
    });
    let follow = follow(client, pool, expect, current, bar.as_ref());
    let result = match timeout {
        Some(t) => match tokio::time::timeout(t.left, follow).await {
            Ok(r) => r,
            Err(_) => Err(anyhow!(
                "error: timed out waiting for the condition: pool {pool:?} did not finish its rollout within {}",
                humantime(t.given)
            )),
        },
        None => follow.await,
    };
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    result
}

/// The result of a final step: the closing line, or the error naming degraded nodes.
async fn finish(client: &Client, pool: &str, step: Step) -> anyhow::Result<String> {
    match step {
        Step::Done(line) => Ok(line),
        Step::Degraded(msg) => {
            let nodes = degraded_nodes(client, pool).await;
            bail!("error: {msg}\n{}", nodes.trim_end())
        }
        Step::Paused(msg) => bail!("error: {msg}"),
        Step::Waiting { line, .. } => Ok(line),
    }
}

fn humantime(d: Duration) -> String {
    crate::gofmt::human_duration(d.as_secs() as i64)
}

async fn follow(
    client: &Client,
    pool: &str,
    expect: Option<&str>,
    current: Value,
    bar: Option<&indicatif::ProgressBar>,
) -> anyhow::Result<String> {
    let mut last_line = String::new();
    let mut show = |step: &Step| {
        if let Step::Waiting { line, updated, total } = step {
            match bar {
                Some(b) => {
                    b.set_length(*total);
                    b.set_position(*updated);
                    b.set_message(line.trim_end_matches("...").to_string());
                }
                None if *line != last_line => {
                    println!("{line}");
                    last_line = line.clone();
                }
                None => {}
            }
        }
    };
    // The pool's changes from the version judged first; a watch that ends or is cut (the
    // server stopped, or the writer failed over to a standby) is resumed from the last version,
    // on the next server of a `--server` list when this one is gone, and a 410 Expired reads
    // the pool again (the watcher's list).
    let rv = current["metadata"]["resourceVersion"].as_str().unwrap_or("");
    let mut watcher = Watcher::named(client.clone(), Kind::MachineConfigPool, pool).from_version(rv);
    let mut obj = current;
    loop {
        let p: MachineConfigPool = serde_json::from_value(obj)?;
        let step = evaluate(&p, expect);
        match step {
            Step::Waiting { .. } => show(&step),
            step => return finish(client, pool, step).await,
        }
        obj = match watcher.next().await {
            Ok(Event::Applied { object, .. }) => object,
            Ok(Event::Listed { objects, .. }) => match objects.into_iter().next() {
                Some(o) => o,
                None => bail!("error: pool {pool:?} was deleted"),
            },
            Ok(Event::Deleted { .. }) => bail!("error: pool {pool:?} was deleted"),
            Err(WatchError::Request(e)) => return Err(anyhow!(describe_error(&e))),
            Err(e @ WatchError::Ended(_)) => bail!("error: {e}"),
        };
    }
}

/// The pools whose target a set of manifests changes, and the rendered config each will
/// target: the server's preview of applying them (what `mco apply --wait` then follows).
pub async fn expected_targets(client: &Client, raws: Vec<Value>) -> anyhow::Result<Vec<(String, String)>> {
    let answer: Value = client
        .post_path(
            &format!("/apis/{}/previews", crate::history::API_VERSION),
            &serde_json::json!({"apply": raws}),
        )
        .await
        .map_err(|e| anyhow!(describe_error(&e)))?;
    let _ = client.take_warnings();
    let impact: crate::preview::Impact = serde_json::from_value(answer)?;
    Ok(impact
        .pools
        .into_iter()
        .filter(|p| !p.rendered.is_empty() && p.rendered != p.current)
        .map(|p| (p.pool, p.rendered))
        .collect())
}

/// The rendered config `pool` is about to target, when the render controller has not caught
/// up with the MachineConfigs yet (a `mco rollout status` right after `mco apply`): the
/// server's preview of applying nothing lists the pool with the render its sources give now.
/// `None` when the pool already targets it, or when the preview is not allowed (a reader's
/// token) or fails: the pool is then judged as it is.
pub async fn pending_target(client: &Client, pool: &str) -> Option<String> {
    let targets = expected_targets(client, Vec::new()).await.ok()?;
    targets
        .into_iter()
        .find(|(p, _)| p == pool)
        .map(|(_, rendered)| rendered)
}

/// What `mco apply --wait` records before applying, to tell afterwards which generated
/// MachineConfigs and pool targets the apply changed: every MachineConfig's resourceVersion
/// and every pool's target.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    machine_configs: std::collections::BTreeMap<String, String>,
    targets: std::collections::BTreeMap<String, String>,
}

/// Reads the [`Snapshot`] (call it before applying).
pub async fn snapshot(client: &Client) -> anyhow::Result<Snapshot> {
    let mut snap = Snapshot::default();
    for mc in items(client, Kind::MachineConfig).await? {
        snap.machine_configs.insert(
            mc["metadata"]["name"].as_str().unwrap_or("").to_string(),
            mc["metadata"]["resourceVersion"].as_str().unwrap_or("").to_string(),
        );
    }
    for p in items(client, Kind::MachineConfigPool).await? {
        snap.targets.insert(
            p["metadata"]["name"].as_str().unwrap_or("").to_string(),
            p["spec"]["configuration"]["name"].as_str().unwrap_or("").to_string(),
        );
    }
    Ok(snap)
}

async fn items(client: &Client, kind: Kind) -> anyhow::Result<Vec<Value>> {
    let l = client.list(kind).await.map_err(|e| anyhow!(describe_error(&e)))?;
    Ok(l["items"].as_array().cloned().unwrap_or_default())
}

/// How often [`generated_targets`] re-reads the cluster while it waits for the controllers.
const POLL: Duration = Duration::from_millis(200);

/// The rollouts an apply of generated-config kinds causes, which the server's preview cannot
/// know (the generated MachineConfigs do not exist yet): waits for the generated-config
/// controllers, then for the render controller, and returns `(pool, rendered)` for every pool
/// whose target moved because a generated MachineConfig it selects changed.
///
/// - KubeletConfig / ContainerRuntimeConfig: until `status.observedGeneration` reaches the
///   object's generation; a `Failure` condition is the error.
/// - Mirror sets, ICSP, Image: the registries files are computed here from every input (pure
///   [`crate::generate::registries`]); a conflict is the error; otherwise until each
///   `99-<pool>-generated-registries` holds them.
/// - Then every pool selecting a changed generated MachineConfig until its target differs
///   from the one in `before` and lists that MachineConfig among its sources.
///
/// Errors: the controllers' refusal, or `timeout` passing first.
pub async fn generated_targets(
    client: &Client,
    before: &Snapshot,
    raws: &[Value],
    timeout: Option<Duration>,
) -> anyhow::Result<Vec<(String, String)>> {
    let work = generated_targets_inner(client, before, raws);
    match timeout {
        Some(t) => tokio::time::timeout(t, work).await.map_err(|_| {
            anyhow!(
                "error: timed out waiting for the condition: the generated MachineConfigs were not rendered within {}",
                humantime(t)
            )
        })?,
        None => work.await,
    }
}

async fn generated_targets_inner(
    client: &Client,
    before: &Snapshot,
    raws: &[Value],
) -> anyhow::Result<Vec<(String, String)>> {
    let kind_of = |r: &Value| r["kind"].as_str().and_then(Kind::parse);
    let mut owners: Vec<(Kind, String)> = Vec::new();
    let mut registries = false;
    for r in raws {
        match kind_of(r) {
            Some(k @ (Kind::KubeletConfig | Kind::ContainerRuntimeConfig)) => {
                owners.push((k, r["metadata"]["name"].as_str().unwrap_or("").to_string()))
            }
            Some(
                Kind::ImageDigestMirrorSet | Kind::ImageTagMirrorSet | Kind::ImageContentSourcePolicy | Kind::Image,
            ) => registries = true,
            _ => {}
        }
    }
    if owners.is_empty() && !registries {
        return Ok(Vec::new());
    }
    // 1. The generated-config controllers.
    for (kind, name) in &owners {
        loop {
            let o: Value = client.get(*kind, name).await.map_err(|e| anyhow!(describe_error(&e)))?;
            let generation = o["metadata"]["generation"].as_i64().unwrap_or(0);
            let observed = o["status"]["observedGeneration"].as_i64().unwrap_or(0);
            let last = o["status"]["conditions"].as_array().and_then(|c| c.last()).cloned();
            if let Some(c) = last.filter(|_| observed >= generation) {
                if c["type"] == "Failure" {
                    bail!(
                        "error: {kind} {name:?} was not applied: {}",
                        c["message"].as_str().unwrap_or("")
                    );
                }
                break;
            }
            tokio::time::sleep(POLL).await;
        }
    }
    let (all_mcs, changed): (Vec<Value>, Vec<Value>) = loop {
        let mcs = items(client, Kind::MachineConfig).await?;
        if registries && !registries_current(client, &mcs).await? {
            tokio::time::sleep(POLL).await;
            continue;
        }
        let changed = mcs
            .iter()
            .filter(|mc| {
                let name = mc["metadata"]["name"].as_str().unwrap_or("");
                let owned = mc["metadata"]["ownerReferences"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|r| {
                        owners
                            .iter()
                            .any(|(k, n)| r["kind"] == k.as_str() && r["name"] == n.as_str())
                    });
                let generated = owned || (registries && name.ends_with("-generated-registries"));
                generated
                    && before.machine_configs.get(name).map(String::as_str)
                        != mc["metadata"]["resourceVersion"].as_str()
            })
            .cloned()
            .collect();
        break (mcs, changed);
    };
    let all_mcs: Vec<crate::model::MachineConfig> = all_mcs
        .into_iter()
        .filter_map(|mc| serde_json::from_value(mc).ok())
        .collect();
    let all_refs: Vec<&crate::model::MachineConfig> = all_mcs.iter().collect();
    // 2. The render controller: every pool selecting a changed generated MachineConfig.
    let mut out = Vec::new();
    let pools: Vec<MachineConfigPool> =
        serde_json::from_value(Value::Array(items(client, Kind::MachineConfigPool).await?))?;
    for p in pools {
        let mine: Vec<String> = changed
            .iter()
            .filter_map(|mc| serde_json::from_value::<crate::model::MachineConfig>(mc.clone()).ok())
            .filter(|mc| crate::model::selector_matches(p.spec.machine_config_selector.as_ref(), &mc.metadata))
            .map(|mc| mc.name().to_string())
            .collect();
        if mine.is_empty() {
            continue;
        }
        let old = before.targets.get(p.name()).cloned().unwrap_or_default();
        // The render the controller will produce from these MachineConfigs (the same pure
        // render): a generated MachineConfig that changes nothing in the merge (another one
        // wins, as the alphabetically last does for kubelet.conf) leaves the pool's render as it
        // was, and there is no rollout to wait for.
        let expected = match crate::render::render_pool(&p, &all_refs) {
            Ok(r) => r.name,
            Err(e) => bail!("error: {}", crate::render::render_degraded_message(p.name(), &e)),
        };
        if expected == old {
            continue;
        }
        loop {
            let now: MachineConfigPool = serde_json::from_value(
                client
                    .get(Kind::MachineConfigPool, p.name())
                    .await
                    .map_err(|e| anyhow!(describe_error(&e)))?,
            )?;
            let target = now.spec.configuration.name.clone();
            let sources: Vec<&str> = now.spec.configuration.source.iter().map(|r| r.name.as_str()).collect();
            if target == expected && mine.iter().all(|m| sources.contains(&m.as_str())) {
                out.push((p.name().to_string(), target));
                break;
            }
            if let Step::Degraded(msg) = evaluate(&now, None) {
                bail!("error: {msg}");
            }
            tokio::time::sleep(POLL).await;
        }
    }
    Ok(out)
}

/// Whether every `99-<pool>-generated-registries` holds the registries files computed from the
/// current inputs. Errors: the inputs conflict (the controller keeps the previous config).
async fn registries_current(client: &Client, mcs: &[Value]) -> anyhow::Result<bool> {
    use crate::generate::registries;
    fn typed<T: serde::de::DeserializeOwned>(v: Vec<Value>) -> serde_json::Result<Vec<T>> {
        serde_json::from_value(Value::Array(v))
    }
    let inputs = registries::Inputs {
        idms: typed(items(client, Kind::ImageDigestMirrorSet).await?)?,
        itms: typed(items(client, Kind::ImageTagMirrorSet).await?)?,
        icsp: typed(items(client, Kind::ImageContentSourcePolicy).await?)?,
        image: typed::<crate::model::Image>(items(client, Kind::Image).await?)?
            .into_iter()
            .find(|i| i.metadata.name.as_deref() == Some("cluster")),
    };
    let generated: Vec<&Value> = mcs
        .iter()
        .filter(|mc| {
            mc["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("-generated-registries"))
        })
        .collect();
    if inputs.is_empty() {
        return Ok(generated.is_empty());
    }
    let files = registries::generated_files(crate::generate::templates::base_registries_conf(), &inputs)
        .map_err(|e| anyhow!("error: the registries config was not regenerated (the previous one is kept): {e}"))?;
    let want: Vec<Value> = files
        .iter()
        .map(|(p, c)| crate::generate::templates::ign_file(p, c))
        .collect();
    Ok(!generated.is_empty()
        && generated
            .iter()
            .all(|mc| mc["spec"]["config"]["storage"]["files"] == Value::Array(want.clone())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PoolCondition as Condition;

    fn pool(updated: i32, total: i32, conds: &[(&str, &str)], target: &str, current: &str) -> MachineConfigPool {
        let mut p = MachineConfigPool::default();
        p.metadata.name = Some("worker".into());
        p.spec.configuration.name = target.into();
        p.status.configuration.name = current.into();
        p.status.machine_count = total;
        p.status.updated_machine_count = updated;
        p.status.conditions = conds
            .iter()
            .map(|(t, s)| Condition {
                type_: t.to_string(),
                status: s.to_string(),
                message: format!("{t} message"),
                ..Default::default()
            })
            .collect();
        p
    }

    #[test]
    fn stale_status_is_not_judged() {
        // kubectl rollout_status.go: status counts only once observedGeneration >= generation.
        let mut p = pool(2, 2, &[("Updated", "True")], "r2", "r2");
        p.metadata.generation = Some(4);
        p.status.observed_generation = 3;
        p.spec.paused = true;
        let want = Step::Waiting {
            line: "Waiting for pool \"worker\" spec update to be observed...".into(),
            updated: 0,
            total: 2,
        };
        assert_eq!(evaluate(&p, None), want);
        assert_eq!(evaluate(&p, Some("r2")), want);
        p.status.observed_generation = 4;
        assert!(matches!(evaluate(&p, Some("r2")), Step::Done(_)));
    }

    #[test]
    fn timeouts_as_kubectl() {
        // kubectl rollout status: --timeout 0s waits forever; errors report the timeout given.
        assert_eq!(Deadline::from_flag(Some(Duration::ZERO)), None);
        assert_eq!(Deadline::from_flag(None), None);
        let d = Deadline::from_flag(Some(Duration::from_secs(3))).unwrap();
        assert_eq!((d.left, d.given), (Duration::from_secs(3), Duration::from_secs(3)));
    }

    #[test]
    fn bar_templates_parse() {
        indicatif::ProgressStyle::with_template(BAR_TEMPLATE).unwrap();
        indicatif::ProgressStyle::with_template(crate::up::BAR_TEMPLATE).unwrap();
    }

    #[test]
    fn progress_is_judged_from_the_pool() {
        let p = pool(1, 3, &[("Updated", "False"), ("Updating", "True")], "r2", "r1");
        assert_eq!(
            evaluate(&p, None),
            Step::Waiting {
                line: "Waiting for pool \"worker\": 1 of 3 nodes updated...".into(),
                updated: 1,
                total: 3
            }
        );
        let p = pool(3, 3, &[("Updated", "True")], "r2", "r2");
        assert!(matches!(evaluate(&p, None), Step::Done(_)));
        assert!(matches!(evaluate(&p, Some("r3")), Step::Waiting { .. }));
        let p = pool(1, 3, &[("Updated", "False"), ("NodeDegraded", "True")], "r2", "r1");
        assert_eq!(
            evaluate(&p, None),
            Step::Degraded("pool \"worker\" is NodeDegraded: NodeDegraded message".into())
        );
        let mut p = pool(1, 3, &[("Updated", "False")], "r2", "r1");
        p.spec.paused = true;
        assert!(matches!(evaluate(&p, None), Step::Paused(_)));
    }
}
