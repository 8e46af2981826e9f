//! Render controller: one rendered config per pool, the pool pointed at it, RenderDegraded.
//!
//! MCO `pkg/controller/render/render_controller.go`: renders every pool (paused ones too),
//! creates `rendered-<pool>-<hash>` owned by the pool when it does not exist, sets the pool's
//! `spec.configuration` (name and sources), and on failure sets `RenderDegraded=True` with
//! `Failed to render configuration for pool <pool>: <error>` keeping the previous target.
//! Reconcilability (mco-facts 1.8) is checked against the pool's current target, with MCO's
//! attribution to the first source MachineConfig that explains the failure.

use super::log_failure;
use crate::command::{Actor, Hub, Scope};
use crate::model::{self, Kind, MachineConfig, MachineConfigPool, ObjectMeta, OwnerReference};
use crate::render::{check_reconcilable, render_degraded_message, render_pool};
use crate::rollout::{condition, set_condition, ConditionStatus};
use serde_json::json;

enum Plan {
    CreateRendered(Box<MachineConfig>),
    /// The rendered config exists without an ownerReference to the pool (orphaned, or owned by
    /// an earlier pool of the same name): add the pool's, as MCO's re-apply
    /// (`lib/resourceapply`, `resourcemerge.EnsureObjectMeta`) merges owner references.
    Adopt {
        rendered: String,
        owner: OwnerReference,
    },
    SetTarget {
        pool: String,
        name: String,
        sources: Vec<String>,
    },
    RenderDegraded {
        pool: String,
        message: Option<String>,
    },
}

fn plan(hub: &Hub) -> Vec<Plan> {
    let st = hub.state();
    let all: Vec<&MachineConfig> = st.machine_configs.values().map(|o| &**o).collect();
    let mut plans = Vec::new();
    for pool in st.pools.values() {
        // Log lines of this pool's render carry the pool and the rendered config's name.
        let span = tracing::info_span!("render", pool = %pool.name(), rendered = tracing::field::Empty);
        let _entered = span.enter();
        let started = std::time::Instant::now();
        let rendered = render_pool(pool, &all);
        hub.metrics().render_seconds.observe(started.elapsed().as_secs_f64());
        if let Ok(r) = &rendered {
            span.record("rendered", r.name.as_str());
        }
        let result = rendered
            .map_err(|e| render_degraded_message(pool.name(), &e))
            .and_then(|r| {
                let mut rendered = rendered_object(hub, pool, &r.name, r.spec.clone());
                rendered
                    .metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(
                        crate::render::ATTRIBUTION_ANNOTATION.to_string(),
                        r.attribution.to_annotation(),
                    );
                admissible(hub, pool, &rendered, &r.sources, &st.machine_configs).map(|()| (r, rendered))
            })
            .and_then(|(r, rendered)| {
                let current = &pool.spec.configuration.name;
                match st.machine_configs.get(current) {
                    Some(old) if *current != r.name => {
                        reconcilable(pool, old, &r.spec, &r.sources, &st.machine_configs).map(|_| (r, rendered))
                    }
                    _ => Ok((r, rendered)),
                }
            });
        match result {
            Ok((r, rendered)) => {
                match st.machine_configs.get(&r.name) {
                    None => plans.push(Plan::CreateRendered(Box::new(rendered))),
                    Some(existing) => {
                        let uid = pool.metadata.uid.as_deref().unwrap_or("");
                        let owned = existing
                            .metadata
                            .owner_references
                            .iter()
                            .flatten()
                            .any(|o| o.uid == uid);
                        if !owned && !uid.is_empty() {
                            let owner = rendered.metadata.owner_references.iter().flatten().next().cloned();
                            plans.extend(owner.map(|owner| Plan::Adopt {
                                rendered: r.name.clone(),
                                owner,
                            }));
                        }
                    }
                }
                let sources_now: Vec<&str> = pool.spec.configuration.source.iter().map(|s| s.name.as_str()).collect();
                if pool.spec.configuration.name != r.name
                    || sources_now != r.sources.iter().map(String::as_str).collect::<Vec<_>>()
                {
                    plans.push(Plan::SetTarget {
                        pool: pool.name().to_string(),
                        name: r.name,
                        sources: r.sources,
                    });
                }
                if pool.condition_status(condition::RENDER_DEGRADED) != "False" {
                    plans.push(Plan::RenderDegraded {
                        pool: pool.name().to_string(),
                        message: None,
                    });
                }
            }
            Err(message) => {
                let cond = pool.condition(condition::RENDER_DEGRADED);
                if cond.is_none_or(|c| c.status != "True" || c.message != message) {
                    plans.push(Plan::RenderDegraded {
                        pool: pool.name().to_string(),
                        message: Some(message),
                    });
                }
            }
        }
    }
    plans
}

/// Checks a rendered config before anything is written: it must fit
/// [`crate::limits::Limits::max_rendered_bytes`] (MCO's `MaxMachineConfigSize` by default, `pkg/controller/render/render_controller.go`, [`crate::limits::DEFAULT_MAX_RENDERED_BYTES`]) and pass the admission a user's MachineConfig passes (Ignition
/// validation included), so that a pool never points at a rendered config that does not exist
/// and a node or `/config/<pool>` never gets one Ignition would refuse. Two MachineConfigs that
/// are each valid can merge into an invalid config (a file owned by `user.id` in one and
/// `user.name` in the other); the error then names the merged field and the source
/// MachineConfigs that set the offending entry.
///
/// Errors: the RenderDegraded message, `Failed to render configuration for pool <pool>: could
/// not generate rendered MachineConfig: ...`.
fn admissible(
    hub: &Hub,
    pool: &MachineConfigPool,
    rendered: &MachineConfig,
    sources: &[String],
    mcs: &crate::model::Objects<MachineConfig>,
) -> Result<(), String> {
    let fail = |detail: String| {
        format!(
            "Failed to render configuration for pool {}: could not generate rendered MachineConfig: {detail}",
            pool.name()
        )
    };
    let obj = serde_json::to_value(rendered).expect("a rendered config serializes");
    let size = serde_json::to_vec(&obj).map(|v| v.len()).unwrap_or(0);
    let limits = hub.limits();
    if size > limits.max_rendered_bytes {
        return Err(fail(format!(
            "rendered MachineConfig {} is too large: {size} bytes, the limit is {} bytes (--max-rendered-bytes)",
            rendered.name(),
            limits.max_rendered_bytes
        )));
    }
    match crate::command::normalize_with(Kind::MachineConfig, obj, hub.group(), limits.rendered_contents()) {
        Ok(_) => Ok(()),
        Err(crate::command::CommandError::Invalid(invalid)) => {
            let config = ignition_of(rendered).unwrap_or_default();
            let causes: Vec<String> = invalid
                .causes
                .iter()
                .map(|c| match written_by(&config, &c.field, sources, mcs) {
                    Some(writers) => format!("{c} (set by {})", writers.join(", ")),
                    None => c.to_string(),
                })
                .collect();
            Err(fail(format!(
                "the merged config of {} is invalid: {}",
                sources.join(", "),
                causes.join("; ")
            )))
        }
        Err(e) => Err(fail(e.to_string())),
    }
}

/// The Ignition config of a MachineConfig, when it has one that decodes.
fn ignition_of(mc: &MachineConfig) -> Option<crate::ignition::Config> {
    serde_json::from_value(mc.spec.config.clone()?).ok()
}

/// The source MachineConfigs that set the merged file or unit a field path points into
/// (`spec.config.storage.files[3].user` -> every source with a file at that path).
fn written_by(
    merged: &crate::ignition::Config,
    field: &str,
    sources: &[String],
    mcs: &crate::model::Objects<MachineConfig>,
) -> Option<Vec<String>> {
    let index = |prefix: &str| -> Option<usize> { field.strip_prefix(prefix)?.split(']').next()?.parse().ok() };
    let matches: Box<dyn Fn(&crate::ignition::Config) -> bool> = if let Some(i) = index("spec.config.storage.files[") {
        let path = merged.storage.files.get(i)?.path.clone();
        Box::new(move |c| c.storage.files.iter().any(|f| f.path == path))
    } else if let Some(i) = index("spec.config.systemd.units[") {
        let name = merged.systemd.units.get(i)?.name.clone();
        Box::new(move |c| c.systemd.units.iter().any(|u| u.name == name))
    } else {
        return None;
    };
    let writers: Vec<String> = sources
        .iter()
        .filter(|s| {
            mcs.get(s.as_str())
                .and_then(|mc| ignition_of(mc))
                .is_some_and(|c| matches(&c))
        })
        .cloned()
        .collect();
    (!writers.is_empty()).then_some(writers)
}

/// MCO's render-time reconcilability check with attribution to a source MachineConfig.
fn reconcilable(
    pool: &MachineConfigPool,
    old: &MachineConfig,
    new: &model::MachineConfigSpec,
    sources: &[String],
    mcs: &crate::model::Objects<MachineConfig>,
) -> Result<(), String> {
    let Err(full) = check_reconcilable(&old.spec, new) else {
        return Ok(());
    };
    let tail = full.split_once(": ").map(|(_, t)| t).unwrap_or(&full);
    for s in sources {
        if let Some(mc) = mcs.get(s) {
            if let Err(e) = check_reconcilable(&old.spec, &mc.spec) {
                let etail = e.split_once(": ").map(|(_, t)| t).unwrap_or(&e);
                if full.contains(etail) || etail.contains(tail) {
                    return Err(format!(
                        "Failed to render configuration for pool {}: could not generate rendered MachineConfig: reconciliation failed between current config {:?} and base config {:?}: {}",
                        pool.name(),
                        old.name(),
                        s,
                        e
                    ));
                }
            }
        }
    }
    Err(format!(
        "Failed to render configuration for pool {}: render reconciliation error: {full}",
        pool.name()
    ))
}

fn rendered_object(hub: &Hub, pool: &MachineConfigPool, name: &str, spec: model::MachineConfigSpec) -> MachineConfig {
    MachineConfig {
        api_version: Kind::MachineConfig.api_version(hub.group()),
        kind: Kind::MachineConfig.as_str().to_string(),
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            owner_references: Some(vec![OwnerReference {
                api_version: Kind::MachineConfigPool.api_version(hub.group()),
                kind: Kind::MachineConfigPool.as_str().to_string(),
                name: pool.name().to_string(),
                uid: pool.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            annotations: Some([(hub.keys().generated_by(), model::CONTROLLER_VERSION.to_string())].into()),
            ..Default::default()
        },
        spec,
    }
}

/// A digest of everything a render depends on, directly or through the controllers that
/// generate MachineConfigs: every input MachineConfig (name and resourceVersion; rendered
/// configs excluded), every pool's name, labels (KubeletConfig and ContainerRuntimeConfig
/// selectors match them) and selector, and the spec, labels and annotations of every object of
/// a generated kind (KubeletConfig, ContainerRuntimeConfig, the mirror sets, ICSP, the Image
/// config; their status is the controllers' own). It changes whenever a render could change,
/// so every such change starts the render delay: MCO delays each render 5 s after an event of
/// any kind that reaches the pool (its generated-config controllers write MachineConfigs, which
/// enqueue the pool with `renderDelay`), and one `mco apply` of a mirror set with the Image
/// config is one render, not two.
pub fn inputs_fingerprint(hub: &Hub) -> u64 {
    use std::hash::{Hash, Hasher};
    let st = hub.state();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for mc in st
        .machine_configs
        .values()
        .filter(|mc| !crate::render::is_rendered_config(mc))
    {
        (mc.name(), mc.metadata.resource_version.as_deref()).hash(&mut h);
    }
    for p in st.pools.values() {
        p.name().hash(&mut h);
        serde_json::to_string(&p.metadata.labels)
            .unwrap_or_default()
            .hash(&mut h);
        serde_json::to_string(&p.spec.machine_config_selector)
            .unwrap_or_default()
            .hash(&mut h);
    }
    for kind in GENERATED_FROM {
        for (name, o) in st.objects.get(&kind).into_iter().flatten() {
            (kind.as_str(), name.as_str()).hash(&mut h);
            for part in [&o["spec"], &o["metadata"]["labels"], &o["metadata"]["annotations"]] {
                part.to_string().hash(&mut h);
            }
        }
    }
    h.finish()
}

/// The kinds the generated-config controllers turn into MachineConfigs.
const GENERATED_FROM: [Kind; 6] = [
    Kind::KubeletConfig,
    Kind::ContainerRuntimeConfig,
    Kind::ImageDigestMirrorSet,
    Kind::ImageTagMirrorSet,
    Kind::ImageContentSourcePolicy,
    Kind::Image,
];

/// Runs the render controller once; returns the number of writes.
pub async fn reconcile(hub: &Hub) -> usize {
    let actor = Actor::new("controller:render");
    let mut writes = 0;
    for p in plan(hub) {
        writes += match p {
            Plan::CreateRendered(mc) => {
                let name = mc.name().to_string();
                let obj = serde_json::to_value(*mc).expect("serializes");
                log_failure("render", &name, hub.create(Kind::MachineConfig, obj, &actor).await)
            }
            Plan::Adopt { rendered, owner } => {
                let owner = serde_json::to_value(owner).expect("serializes");
                let r = hub
                    .update(Kind::MachineConfig, &rendered, Scope::Main, None, &actor, |cur| {
                        let mut v = cur.clone();
                        let refs = v["metadata"]["ownerReferences"].as_array().cloned().unwrap_or_default();
                        let mut refs: Vec<_> = refs
                            .into_iter()
                            .filter(|r| r["kind"] != "MachineConfigPool" || r["name"] != owner["name"])
                            .collect();
                        refs.push(owner.clone());
                        v["metadata"]["ownerReferences"] = json!(refs);
                        Ok(v)
                    })
                    .await;
                log_failure("render", &rendered, r)
            }
            Plan::SetTarget { pool, name, sources } => {
                let group = hub.group().to_string();
                let r = hub
                    .update(Kind::MachineConfigPool, &pool, Scope::Main, None, &actor, |cur| {
                        let mut v = cur.clone();
                        let source: Vec<_> = sources
                            .iter()
                            .map(|s| json!({"apiVersion": format!("{group}/v1"), "kind": "MachineConfig", "name": s}))
                            .collect();
                        v["spec"]["configuration"] = json!({"name": name, "source": source});
                        Ok(v)
                    })
                    .await;
                log_failure("render", &pool, r)
            }
            Plan::RenderDegraded { pool, message } => {
                let r = hub
                    .update(Kind::MachineConfigPool, &pool, Scope::Status, None, &actor, |cur| {
                        let mut p: MachineConfigPool = serde_json::from_value(cur.clone())
                            .map_err(|e| crate::command::CommandError::BadRequest(e.to_string()))?;
                        let (status, msg) = match &message {
                            Some(m) => (ConditionStatus::True, m.as_str()),
                            None => (ConditionStatus::False, ""),
                        };
                        set_condition(
                            &mut p.status.conditions,
                            condition::RENDER_DEGRADED,
                            status,
                            "",
                            msg,
                            &model::now(),
                        );
                        Ok(serde_json::to_value(p).expect("serializes"))
                    })
                    .await;
                log_failure("render", &pool, r)
            }
        };
    }
    writes
}
