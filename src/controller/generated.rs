//! The generated-config controllers (MCO's kubelet-config and container-runtime-config
//! controllers): KubeletConfig → `99-<pool>-generated-kubelet[-n]`, ContainerRuntimeConfig →
//! `99-<pool>-generated-containerruntime[-n]`, mirror sets and the Image config →
//! `99-<pool>-generated-registries`, each with its owner reference, and the status conditions
//! of the source object as MCO writes them ([`next_conditions`]).
//!
//! Level-triggered: the plan is computed from the projection by the pure functions of
//! [`crate::generate`]; only differences are written, so a settled pass writes nothing.
//! A generated MachineConfig whose owner is deleted is removed by the garbage collector.

use super::log_failure;
use crate::command::{Actor, Hub, Propagation, Scope};
use crate::generate::{crio, kubelet, naming, registries, templates::TemplateSettings};
use crate::model::{
    ContainerRuntimeConfig, ControllerCondition, Kind, KubeletConfig, LabelSelector, MachineConfig, MachineConfigPool,
    ObjectMeta, OwnerReference,
};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// One generated-config source kind (KubeletConfig or ContainerRuntimeConfig) reduced to what
/// the naming and status logic needs.
struct Source {
    kind: Kind,
    meta: ObjectMeta,
    selector: Option<LabelSelector>,
    generation: i64,
    observed_generation: i64,
    status: Vec<ControllerCondition>,
}

/// The generated files of source `i` for a pool (`(path, contents)`), or the rule it breaks.
type FilesOf<'a> = dyn Fn(usize, &MachineConfigPool) -> Result<Vec<(String, String)>, kubelet::RuleError> + 'a;

/// What a pass decided for one source object.
struct Plan {
    suffix_to_set: Option<String>,
    /// Accepted, or the condition message of the refusal.
    outcome: Result<(), String>,
    configs: Vec<MachineConfig>,
}

fn cond(type_: &str, status: &str, message: &str, now: &crate::model::Time) -> ControllerCondition {
    ControllerCondition {
        type_: type_.into(),
        status: status.into(),
        message: message.into(),
        last_transition_time: Some(now.clone()),
        ..Default::default()
    }
}

/// The conditions a sync leaves on a source object, as MCO's `syncStatusOnly` writes them:
///
/// - KubeletConfig (`pkg/controller/kubelet-config/kubelet_config_controller.go`,
///   `helpers.go` `wrapErrorWithCondition`, `legacyConditionFromAccepted`): the legacy
///   `Success`/`Failure` entries are stripped, an `Accepted` condition (status `True` with
///   message `Success`, or `False` with the error) is appended unless the last one has the same
///   message (then only its time moves), at most the 3 newest `Accepted` are kept, and the
///   legacy condition is appended last: `Success` or `Failure`, both with status `True`.
/// - ContainerRuntimeConfig (`container_runtime_config_controller.go`, `helpers.go`): a
///   `Success` or `Failure` condition, status `True` for both, appended unless the last one has
///   the same message (then it replaces it).
pub fn next_conditions(
    kind: Kind,
    current: &[ControllerCondition],
    outcome: &Result<(), String>,
    now: &crate::model::Time,
) -> Vec<ControllerCondition> {
    let message = match outcome {
        Ok(()) => "Success",
        Err(m) => m.as_str(),
    };
    let mut out: Vec<ControllerCondition> = current.to_vec();
    if kind == Kind::KubeletConfig {
        out.retain(|c| c.type_ != "Success" && c.type_ != "Failure");
        let accepted = cond("Accepted", if outcome.is_ok() { "True" } else { "False" }, message, now);
        match out.last_mut() {
            Some(last) if last.message == message => last.last_transition_time = Some(now.clone()),
            _ => out.push(accepted),
        }
        let keep = out.len().saturating_sub(3);
        out.drain(..keep);
        let legacy = if outcome.is_ok() { "Success" } else { "Failure" };
        out.push(cond(legacy, "True", message, now));
    } else {
        let c = cond(
            if outcome.is_ok() { "Success" } else { "Failure" },
            "True",
            message,
            now,
        );
        match out.last_mut() {
            Some(last) if last.message == message => *last = c,
            _ => out.push(c),
        }
    }
    out
}

/// Whether two condition lists say the same, times aside.
fn same_conditions(a: &[ControllerCondition], b: &[ControllerCondition]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.type_ == y.type_ && x.status == y.status && x.message == y.message)
}

fn owner(kind: Kind, meta: &ObjectMeta, group: &str) -> OwnerReference {
    OwnerReference {
        api_version: kind.api_version(group),
        kind: kind.as_str().into(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The pool-independent validation of source `i` (MCO validates before it looks for pools).
type CheckOf<'a> = dyn Fn(usize) -> Result<(), kubelet::RuleError> + 'a;

/// Plans every source of one kind as MCO's sync does, in creation order: validation first
/// (`check`), then the pool selection, then per pool the suffix (numbered among the objects
/// selecting that pool, kept for life in the annotation) and the files. A refused object gets
/// no suffix.
#[allow(clippy::too_many_arguments)]
fn plan_sources(
    sources: &[Source],
    pools: &[MachineConfigPool],
    what: &str,
    limit_message: &str,
    group: &str,
    generated_by: &str,
    check: &CheckOf,
    files: &FilesOf,
) -> Vec<Plan> {
    let mut held: Vec<Option<String>> = sources
        .iter()
        .map(|s| {
            s.meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(naming::SUFFIX_ANNOTATION))
                .cloned()
        })
        .collect();
    let mut out = Vec::new();
    let mut claimed: BTreeMap<String, String> = BTreeMap::new();
    for (i, s) in sources.iter().enumerate() {
        let name = s.meta.name.clone().unwrap_or_default();
        let mut suffix_to_set = None;
        let mut configs = Vec::new();
        let err = if let Err(e) = check(i) {
            Some(e.condition_message())
        } else {
            let matched = kubelet::matching_pools(s.selector.as_ref(), pools);
            if matched.is_empty() {
                // MCO's words: "KubeletConfig %v ..." and "containerRuntimeConfig %v ...".
                let what = match s.kind {
                    Kind::ContainerRuntimeConfig => "containerRuntimeConfig",
                    _ => "KubeletConfig",
                };
                Some(format!(
                    "Error: {what} {name} does not match any MachineConfigPools (spec.machineConfigPoolSelector)"
                ))
            } else {
                let mut err = None;
                for p in matched.iter().copied() {
                    let sfx = match held[i].clone() {
                        Some(x) => x,
                        None => {
                            // The others selecting this pool (MCO's per-pool list); for an object
                            // selecting several pools, those of all its pools, so that its one
                            // suffix names no other object's MachineConfig in any of them.
                            let others: Vec<Option<String>> = sources
                                .iter()
                                .enumerate()
                                .filter(|(j, o)| {
                                    *j != i
                                        && matched
                                            .iter()
                                            .any(|q| crate::model::selector_matches(o.selector.as_ref(), &q.metadata))
                                })
                                .map(|(j, _)| held[j].clone())
                                .collect();
                            let others: Vec<Option<&str>> = others.iter().map(|o| o.as_deref()).collect();
                            match naming::next_suffix(&others, limit_message) {
                                Ok(x) => {
                                    held[i] = Some(x.clone());
                                    suffix_to_set = Some(x.clone());
                                    x
                                }
                                Err(m) => {
                                    err = Some(m);
                                    break;
                                }
                            }
                        }
                    };
                    let mc_name = naming::generated_name(p.name(), what, &sfx);
                    if let Some(other) = claimed.get(&mc_name) {
                        // Two objects would write one MachineConfig (suffixes kept for life
                        // while selectors changed): the older keeps it.
                        err = Some(format!(
                            "Error: MachineConfig {mc_name} is already generated from {} {other}",
                            s.kind
                        ));
                        break;
                    }
                    match files(i, p) {
                        Ok(f) => configs.push(kubelet::machine_config(
                            &mc_name,
                            p.name(),
                            &f,
                            owner(s.kind, &s.meta, group),
                            generated_by,
                        )),
                        Err(e) => {
                            err = Some(e.condition_message());
                            break;
                        }
                    }
                }
                err
            }
        };
        if err.is_some() {
            // Nothing is written for a refused object, not even a suffix it was just given.
            configs.clear();
            if suffix_to_set.take().is_some() {
                held[i] = None;
            }
        }
        for mc in &configs {
            claimed.insert(mc.name().to_string(), name.clone());
        }
        out.push(Plan {
            suffix_to_set,
            outcome: err.map_or(Ok(()), Err),
            configs,
        });
    }
    out
}

/// Creates or replaces a generated MachineConfig when it differs from `desired` (spec, labels,
/// owner references, annotations); returns the number of writes.
async fn ensure(hub: &Hub, actor: &Actor, desired: &MachineConfig) -> usize {
    let name = desired.name().to_string();
    let want = serde_json::to_value(desired).expect("model objects serialize");
    let current = hub.state().get_json(Kind::MachineConfig, &name);
    let Some(cur) = current else {
        return log_failure("generated", &name, hub.create(Kind::MachineConfig, want, actor).await);
    };
    let same = |k: &str| cur["metadata"][k] == want["metadata"][k];
    if cur["spec"] == want["spec"] && same("labels") && same("ownerReferences") && same("annotations") {
        return 0;
    }
    let r = hub
        .update(Kind::MachineConfig, &name, Scope::Main, None, actor, |cur| {
            let mut next = cur.clone();
            next["spec"] = want["spec"].clone();
            for k in ["labels", "ownerReferences", "annotations"] {
                next["metadata"][k] = want["metadata"][k].clone();
            }
            Ok(next)
        })
        .await;
    log_failure("generated", &name, r)
}

/// Runs the kubelet, container-runtime and registries controllers once; returns the writes.
/// `warned` is the registries error last logged (the controllers' [`super::Memory`]), so that a
/// conflict is logged once, not on every pass.
pub async fn reconcile(hub: &Hub, settings: &TemplateSettings, warned: &mut Option<String>) -> usize {
    let group = hub.group().to_string();
    let generated_by = hub.keys().generated_by();
    let (kcs, crcs, pools, inputs, owned) = {
        let st = hub.state();
        let mut kcs: Vec<KubeletConfig> = st.typed(Kind::KubeletConfig);
        let mut crcs: Vec<ContainerRuntimeConfig> = st.typed(Kind::ContainerRuntimeConfig);
        // Creation order (MCO hands out suffixes in the order the objects were synced).
        kcs.sort_by(|a, b| {
            (&a.metadata.creation_timestamp, &a.metadata.name).cmp(&(&b.metadata.creation_timestamp, &b.metadata.name))
        });
        crcs.sort_by(|a, b| {
            (&a.metadata.creation_timestamp, &a.metadata.name).cmp(&(&b.metadata.creation_timestamp, &b.metadata.name))
        });
        let pools: Vec<MachineConfigPool> = st.pools.values().map(|p| (**p).clone()).collect();
        let inputs = registries::Inputs {
            idms: st.typed(Kind::ImageDigestMirrorSet),
            itms: st.typed(Kind::ImageTagMirrorSet),
            icsp: st.typed(Kind::ImageContentSourcePolicy),
            image: st
                .typed::<crate::model::Image>(Kind::Image)
                .into_iter()
                .find(|i| i.metadata.name.as_deref() == Some("cluster")),
        };
        // Generated MachineConfigs by owner kind: name -> owner uid.
        let mut owned: BTreeMap<String, (String, String)> = BTreeMap::new();
        for (n, mc) in &st.machine_configs {
            for r in mc.metadata.owner_references.iter().flatten() {
                if r.kind == "KubeletConfig" || r.kind == "ContainerRuntimeConfig" {
                    owned.insert(n.clone(), (r.kind.clone(), r.uid.clone()));
                }
            }
        }
        (kcs, crcs, pools, inputs, owned)
    };
    let kc_sources: Vec<Source> = kcs
        .iter()
        .map(|k| Source {
            kind: Kind::KubeletConfig,
            meta: k.metadata.clone(),
            selector: k.spec.machine_config_pool_selector.clone(),
            generation: k.metadata.generation.unwrap_or(0),
            observed_generation: k.status.observed_generation,
            status: k.status.conditions.clone(),
        })
        .collect();
    let crc_sources: Vec<Source> = crcs
        .iter()
        .map(|c| Source {
            kind: Kind::ContainerRuntimeConfig,
            meta: c.metadata.clone(),
            selector: c.spec.machine_config_pool_selector.clone(),
            generation: c.metadata.generation.unwrap_or(0),
            observed_generation: c.status.observed_generation,
            status: c.status.conditions.clone(),
        })
        .collect();
    let kc_files = |i: usize, p: &MachineConfigPool| kubelet::generated_files(&kcs[i], p, settings);
    let crc_files = |i: usize, _: &MachineConfigPool| crio::generated_files(&crcs[i]);
    let kc_check = |i: usize| kubelet::validate_spec(&kcs[i]);
    let crc_check = |i: usize| crio::validate(&crcs[i]);
    let kc_plans = plan_sources(
        &kc_sources,
        &pools,
        "kubelet",
        naming::KUBELET_LIMIT,
        &group,
        &generated_by,
        &kc_check,
        &kc_files,
    );
    let crc_plans = plan_sources(
        &crc_sources,
        &pools,
        "containerruntime",
        naming::CTRCFG_LIMIT,
        &group,
        &generated_by,
        &crc_check,
        &crc_files,
    );

    let mut writes = 0;
    for (sources, plans, actor_name) in [
        (&kc_sources, &kc_plans, "controller:kubelet-config"),
        (&crc_sources, &crc_plans, "controller:container-runtime-config"),
    ] {
        let actor = Actor::new(actor_name);
        let mut desired_names = BTreeSet::new();
        for (s, p) in sources.iter().zip(plans) {
            let name = s.meta.name.clone().unwrap_or_default();
            if let Some(sfx) = &p.suffix_to_set {
                let key = naming::SUFFIX_ANNOTATION.to_string();
                let sfx = sfx.clone();
                let r = hub
                    .update(s.kind, &name, Scope::Main, None, &actor, |cur| {
                        let mut next = cur.clone();
                        next["metadata"]["annotations"][&key] = json!(sfx);
                        Ok(next)
                    })
                    .await;
                writes += log_failure(actor_name, &name, r);
            }
            // The generated MachineConfig's events name the object that caused them.
            let because = Actor {
                reason: format!("generated from {} {name}", s.kind),
                ..actor.clone()
            };
            for mc in &p.configs {
                desired_names.insert(mc.name().to_string());
                writes += ensure(hub, &because, mc).await;
            }
            // MCO's syncStatusOnly brings observedGeneration up to the generation on every sync,
            // even when the condition is unchanged; it also moves the last condition's time on
            // every sync, which mco does not (a settled pass writes nothing).
            let conditions = next_conditions(s.kind, &s.status, &p.outcome, &crate::model::now());
            let same = same_conditions(&conditions, &s.status) && s.observed_generation == s.generation;
            if !same {
                let generation = s.generation;
                let r = hub
                    .update(s.kind, &name, Scope::Status, None, &actor, |cur| {
                        let mut next = cur.clone();
                        next["status"] = json!({"observedGeneration": generation, "conditions": conditions.clone()});
                        Ok(next)
                    })
                    .await;
                writes += log_failure(actor_name, &name, r);
            }
        }
        // Configs of a source that now generates elsewhere (selector or pool changed) go; a
        // failing source keeps what it generated before, as MCO does.
        let kind = sources.first().map(|s| s.kind.as_str()).unwrap_or("");
        for (mc, (owner_kind, uid)) in &owned {
            let src = sources
                .iter()
                .zip(plans)
                .find(|(s, _)| s.meta.uid.as_deref() == Some(uid.as_str()));
            let Some((_, plan)) = src else { continue };
            if owner_kind == kind && plan.outcome.is_ok() && !desired_names.contains(mc) {
                let r = hub
                    .delete(Kind::MachineConfig, mc, None, Propagation::Background, &actor)
                    .await;
                writes += log_failure(actor_name, mc, r);
            }
        }
    }
    writes + reconcile_registries(hub, &pools, &inputs, &generated_by, warned).await
}

/// `99-<pool>-generated-registries` for the built-in pools (labelled
/// `machineconfiguration.openshift.io/mco-built-in`); removed when no input is left. A
/// conflict between objects is logged and the previous config kept (MCO's controller errors
/// and retries the same way).
async fn reconcile_registries(
    hub: &Hub,
    pools: &[MachineConfigPool],
    inputs: &registries::Inputs,
    generated_by: &str,
    warned: &mut Option<String>,
) -> usize {
    let actor = Actor::new("controller:container-runtime-config");
    let built_in = pools
        .iter()
        .filter(|p| crate::model::label(&p.metadata, "machineconfiguration.openshift.io/mco-built-in").is_some());
    let mut writes = 0;
    for p in built_in {
        let name = naming::generated_name(p.name(), "registries", "");
        if inputs.is_empty() {
            if hub.state().machine_configs.contains_key(&name) {
                let r = hub
                    .delete(Kind::MachineConfig, &name, None, Propagation::Background, &actor)
                    .await;
                writes += log_failure("registries", &name, r);
            }
            continue;
        }
        match registries::generated_files(crate::generate::templates::base_registries_conf(), inputs) {
            Ok(files) => {
                let ign: Vec<Value> = files
                    .iter()
                    .map(|(p, c)| crate::generate::templates::ign_file(p, c))
                    .collect();
                let mut mc = crate::generate::templates::machine_config(&name, p.name(), ign, vec![]);
                mc.metadata.annotations =
                    Some([(generated_by.to_string(), crate::model::CONTROLLER_VERSION.to_string())].into());
                let because = Actor {
                    reason: format!("generated from {}", registries_sources(inputs)),
                    ..actor.clone()
                };
                writes += ensure(hub, &because, &mc).await;
            }
            Err(e) => {
                if warn_once(warned, &e) {
                    tracing::warn!(pool = p.name(), error = %e, "registries config not generated; the previous one is kept");
                }
            }
        }
    }
    if !inputs.is_empty() && registries::generated_files("", inputs).is_ok() {
        *warned = None;
    }
    writes
}

/// The objects a registries config is generated from, by kind and name
/// (`ImageDigestMirrorSet a, ImageTagMirrorSet b, Image cluster`).
fn registries_sources(inputs: &registries::Inputs) -> String {
    let name = |m: &ObjectMeta| m.name.clone().unwrap_or_default();
    let mut parts: Vec<String> = Vec::new();
    parts.extend(
        inputs
            .idms
            .iter()
            .map(|o| format!("ImageDigestMirrorSet {}", name(&o.metadata))),
    );
    parts.extend(
        inputs
            .itms
            .iter()
            .map(|o| format!("ImageTagMirrorSet {}", name(&o.metadata))),
    );
    parts.extend(
        inputs
            .icsp
            .iter()
            .map(|o| format!("ImageContentSourcePolicy {}", name(&o.metadata))),
    );
    parts.extend(inputs.image.iter().map(|o| format!("Image {}", name(&o.metadata))));
    parts.join(", ")
}

/// Whether `error` is new since the last one logged (`warned`, then set to it): a conflict is
/// logged once, not on every pass (MCO's controller logs it on each retry with backoff). Kept in
/// the controllers' memory, not in the state: a restart logs it once more.
fn warn_once(warned: &mut Option<String>, error: &str) -> bool {
    if warned.as_deref() == Some(error) {
        return false;
    }
    *warned = Some(error.to_string());
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn a_registries_error_is_logged_once_until_it_changes() {
        let mut warned = None;
        assert!(warn_once(&mut warned, "conflict A"));
        assert!(!warn_once(&mut warned, "conflict A"));
        assert!(warn_once(&mut warned, "conflict B"));
        warned = None;
        assert!(warn_once(&mut warned, "conflict B"));
    }

    fn kc(name: &str, max_pods: i64) -> Value {
        json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "KubeletConfig", "metadata": {"name": name},
            "spec": {"machineConfigPoolSelector": {"matchLabels": {"pools.operator.machineconfiguration.openshift.io/worker": ""}},
                "kubeletConfig": {"maxPods": max_pods}}})
    }

    /// Runs every controller until a pass writes nothing; returns the passes it took.
    async fn settle(hub: &Hub) -> usize {
        let cfg = super::super::ControllerConfig::default();
        let mut memory = super::super::Memory::default();
        for pass in 1..50 {
            if super::super::reconcile_once(hub, &cfg, true, &mut memory).await == 0 {
                return pass;
            }
        }
        panic!("the controllers never settle");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn suffixes_in_creation_order_at_most_ten_and_a_settled_pass_writes_nothing() {
        let hub = Hub::open(Store::temporary().unwrap(), crate::model::DEFAULT_GROUP).unwrap();
        settle(&hub).await;
        let actor = Actor::new("test");
        for i in 0..11 {
            hub.create(Kind::KubeletConfig, kc(&format!("k{i:02}"), 100 + i), &actor)
                .await
                .unwrap();
            settle(&hub).await;
        }
        assert_eq!(settle(&hub).await, 1, "a settled pass writes nothing");
        let st = hub.state();
        let kcs = &st.objects[&Kind::KubeletConfig];
        let suffix = |n: &str| {
            kcs[n]["metadata"]["annotations"][naming::SUFFIX_ANNOTATION]
                .as_str()
                .map(str::to_string)
        };
        assert_eq!(suffix("k00").as_deref(), Some(""));
        assert_eq!(suffix("k01").as_deref(), Some("1"));
        assert_eq!(suffix("k09").as_deref(), Some("9"));
        assert_eq!(suffix("k10"), None, "the eleventh gets no suffix");
        let conds = kcs["k10"]["status"]["conditions"].as_array().unwrap();
        assert_eq!(
            (&conds[0]["type"], &conds[0]["status"]),
            (&json!("Accepted"), &json!("False"))
        );
        let cond = &conds[1];
        assert_eq!((&cond["type"], &cond["status"]), (&json!("Failure"), &json!("True")));
        assert!(cond["message"].as_str().unwrap() == naming::KUBELET_LIMIT, "{cond}");
        let generated: Vec<&String> = st
            .machine_configs
            .keys()
            .filter(|n| n.starts_with("99-worker-generated-kubelet"))
            .collect();
        assert_eq!(generated.len(), 10);
        let mc = &st.machine_configs["99-worker-generated-kubelet-9"];
        let owner = &mc.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.controller),
            ("KubeletConfig", "k09", Some(true))
        );
        assert_eq!(
            crate::model::label(&mc.metadata, crate::model::ROLE_LABEL),
            Some("worker")
        );
    }

    fn kc_for(name: &str, pool: &str, kubelet_config: Value) -> Value {
        json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "KubeletConfig", "metadata": {"name": name},
            "spec": {"machineConfigPoolSelector": {"matchLabels": {format!("pools.operator.machineconfiguration.openshift.io/{pool}"): ""}},
                "kubeletConfig": kubelet_config}})
    }

    /// MCO `getManagedKubeletConfigKey`: validation comes first (a refused object gets no
    /// suffix), suffixes are numbered among the objects selecting the same pool, and once a
    /// pool has ten an invalid object still gets its own error, not the limit message.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn suffixes_are_per_pool_and_given_after_validation() {
        let hub = Hub::open(Store::temporary().unwrap(), crate::model::DEFAULT_GROUP).unwrap();
        settle(&hub).await;
        let actor = Actor::new("test");
        let suffix = |hub: &Hub, n: &str| {
            hub.state().objects[&Kind::KubeletConfig][n]["metadata"]["annotations"][naming::SUFFIX_ANNOTATION]
                .as_str()
                .map(str::to_string)
        };
        let message = |hub: &Hub, n: &str| {
            hub.state().objects[&Kind::KubeletConfig][n]["status"]["conditions"][0]["message"]
                .as_str()
                .unwrap_or("")
                .to_string()
        };
        hub.create(
            Kind::KubeletConfig,
            kc_for("bad", "worker", json!({"maxPods": "abc"})),
            &actor,
        )
        .await
        .unwrap();
        settle(&hub).await;
        assert_eq!(suffix(&hub, "bad"), None, "a refused object holds no suffix");
        assert!(message(&hub, "bad").contains("could not be unmarshalled"));
        hub.create(
            Kind::KubeletConfig,
            kc_for("nopool", "nosuch", json!({"maxPods": 1})),
            &actor,
        )
        .await
        .unwrap();
        for i in 0..10 {
            hub.create(
                Kind::KubeletConfig,
                kc_for(&format!("w{i}"), "worker", json!({"maxPods": 100 + i})),
                &actor,
            )
            .await
            .unwrap();
            settle(&hub).await;
        }
        assert_eq!(suffix(&hub, "nopool"), None);
        // "bad" selects worker without a suffix: MCO's list has two objects, so w0 gets 1.
        assert_eq!(suffix(&hub, "w0").as_deref(), Some("1"));
        assert_eq!(suffix(&hub, "w8").as_deref(), Some("9"));
        assert_eq!(message(&hub, "w9"), naming::KUBELET_LIMIT);
        // The master pool counts its own objects: its first one is the bare name.
        hub.create(
            Kind::KubeletConfig,
            kc_for("m0", "master", json!({"maxPods": 7})),
            &actor,
        )
        .await
        .unwrap();
        settle(&hub).await;
        assert_eq!(suffix(&hub, "m0").as_deref(), Some(""));
        assert!(hub.state().machine_configs.contains_key("99-master-generated-kubelet"));
        // With worker full, an invalid object still reports its own error.
        hub.create(
            Kind::KubeletConfig,
            kc_for("bad2", "worker", json!({"cgroupDriver": "cgroupfs"})),
            &actor,
        )
        .await
        .unwrap();
        settle(&hub).await;
        assert!(
            message(&hub, "bad2").contains("cgroupDriver is not allowed"),
            "{}",
            message(&hub, "bad2")
        );
    }

    /// An object selecting several pools holds one suffix for all of them: it is numbered
    /// above the objects of every pool it selects, so it never names another object's
    /// MachineConfig (no two owners writing one MachineConfig).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_multi_pool_suffix_names_no_other_objects_machine_config() {
        let hub = Hub::open(Store::temporary().unwrap(), crate::model::DEFAULT_GROUP).unwrap();
        settle(&hub).await;
        let actor = Actor::new("test");
        for n in ["m0", "m1"] {
            hub.create(Kind::KubeletConfig, kc_for(n, "master", json!({"maxPods": 5})), &actor)
                .await
                .unwrap();
            settle(&hub).await;
        }
        let mut both = kc_for("both", "master", json!({"maxPods": 6}));
        both["spec"]["machineConfigPoolSelector"] =
            json!({"matchLabels": {"machineconfiguration.openshift.io/mco-built-in": ""}});
        hub.create(Kind::KubeletConfig, both, &actor).await.unwrap();
        assert!(settle(&hub).await < 50);
        let st = hub.state();
        let kcs = &st.objects[&Kind::KubeletConfig];
        assert_eq!(kcs["both"]["metadata"]["annotations"][naming::SUFFIX_ANNOTATION], "2");
        assert_eq!(kcs["both"]["status"]["conditions"][0]["type"], "Accepted");
        assert_eq!(kcs["both"]["status"]["conditions"][1]["type"], "Success");
        for (mc, owner) in [
            ("99-master-generated-kubelet", "m0"),
            ("99-master-generated-kubelet-1", "m1"),
            ("99-master-generated-kubelet-2", "both"),
            ("99-worker-generated-kubelet-2", "both"),
        ] {
            assert_eq!(
                st.machine_configs[mc].metadata.owner_references.as_ref().unwrap()[0].name,
                owner,
                "{mc}"
            );
        }
    }

    /// MCO's `syncStatusOnly` brings `observedGeneration` to the generation on every sync, also
    /// when the condition stays the same.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn observed_generation_follows_a_spec_change_with_the_same_outcome() {
        let hub = Hub::open(Store::temporary().unwrap(), crate::model::DEFAULT_GROUP).unwrap();
        settle(&hub).await;
        let actor = Actor::new("test");
        hub.create(Kind::KubeletConfig, kc("k", 100), &actor).await.unwrap();
        settle(&hub).await;
        hub.update(Kind::KubeletConfig, "k", Scope::Main, None, &actor, |cur| {
            let mut next = cur.clone();
            next["spec"]["kubeletConfig"]["maxPods"] = json!(101);
            Ok(next)
        })
        .await
        .unwrap();
        settle(&hub).await;
        let st = hub.state();
        let o = &st.objects[&Kind::KubeletConfig]["k"];
        assert_eq!(o["metadata"]["generation"], 2);
        assert_eq!(o["status"]["observedGeneration"], 2);
        assert_eq!(o["status"]["conditions"][0]["type"], "Accepted");
        assert_eq!(o["status"]["conditions"][1]["type"], "Success");
    }

    fn c(type_: &str, status: &str, message: &str) -> ControllerCondition {
        ControllerCondition {
            type_: type_.into(),
            status: status.into(),
            message: message.into(),
            ..Default::default()
        }
    }

    fn shape(cs: &[ControllerCondition]) -> Vec<(String, String, String)> {
        cs.iter()
            .map(|c| (c.type_.clone(), c.status.clone(), c.message.clone()))
            .collect()
    }

    fn owned(v: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
        v.iter()
            .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
            .collect()
    }

    /// MCO TestWrapErrorWithCondition and TestLegacyConditionFromAccepted (KubeletConfig:
    /// `Accepted` True "Success" / False "Error: ...", legacy `Success`/`Failure` always True),
    /// TestCleanUpStatusConditions (the same message moves only the time, at most 3 Accepted)
    /// and TestRemoveLegacyConditions (legacy entries stripped before the window); the
    /// ContainerRuntimeConfig's `Failure` is True as well (its `wrapErrorWithCondition`).
    #[test]
    fn conditions_as_mco_writes_them() {
        let now = crate::model::now();
        let err = Err(
            "Error: KubeletConfiguration: swapBehavior is not allowed to be set, but contains: LimitedSwap".to_string(),
        );
        let kc = next_conditions(Kind::KubeletConfig, &[], &err, &now);
        assert_eq!(
            shape(&kc),
            owned(&[
                (
                    "Accepted",
                    "False",
                    "Error: KubeletConfiguration: swapBehavior is not allowed to be set, but contains: LimitedSwap"
                ),
                (
                    "Failure",
                    "True",
                    "Error: KubeletConfiguration: swapBehavior is not allowed to be set, but contains: LimitedSwap"
                ),
            ])
        );
        let ok = next_conditions(Kind::KubeletConfig, &kc, &Ok(()), &now);
        assert_eq!(
            shape(&ok),
            owned(&[
                (
                    "Accepted",
                    "False",
                    "Error: KubeletConfiguration: swapBehavior is not allowed to be set, but contains: LimitedSwap"
                ),
                ("Accepted", "True", "Success"),
                ("Success", "True", "Success"),
            ])
        );
        assert!(same_conditions(
            &ok,
            &next_conditions(Kind::KubeletConfig, &ok, &Ok(()), &now)
        ));
        // At most three Accepted entries, the newest kept; a legacy list is replaced.
        let old = vec![
            c("Failure", "False", "Error: a"),
            c("Accepted", "False", "Error: b"),
            c("Accepted", "False", "Error: c"),
            c("Accepted", "False", "Error: d"),
        ];
        let next = next_conditions(Kind::KubeletConfig, &old, &Ok(()), &now);
        assert_eq!(
            shape(&next),
            owned(&[
                ("Accepted", "False", "Error: c"),
                ("Accepted", "False", "Error: d"),
                ("Accepted", "True", "Success"),
                ("Success", "True", "Success"),
            ])
        );
        let crc = next_conditions(
            Kind::ContainerRuntimeConfig,
            &[],
            &Err("Error: invalid PidsLimit 5".into()),
            &now,
        );
        assert_eq!(shape(&crc), owned(&[("Failure", "True", "Error: invalid PidsLimit 5")]));
        let crc = next_conditions(Kind::ContainerRuntimeConfig, &crc, &Ok(()), &now);
        assert_eq!(
            shape(&crc),
            owned(&[
                ("Failure", "True", "Error: invalid PidsLimit 5"),
                ("Success", "True", "Success")
            ])
        );
        assert_eq!(
            next_conditions(Kind::ContainerRuntimeConfig, &crc, &Ok(()), &now).len(),
            2
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn registries_config_comes_and_goes_with_its_inputs() {
        let hub = Hub::open(Store::temporary().unwrap(), crate::model::DEFAULT_GROUP).unwrap();
        settle(&hub).await;
        assert!(!hub
            .state()
            .machine_configs
            .contains_key("99-worker-generated-registries"));
        let actor = Actor::new("test");
        let idms = json!({"apiVersion": "config.openshift.io/v1", "kind": "ImageDigestMirrorSet", "metadata": {"name": "d"},
            "spec": {"imageDigestMirrors": [{"source": "quay.io/a", "mirrors": ["m.example/a"]}]}});
        hub.create(Kind::ImageDigestMirrorSet, idms, &actor).await.unwrap();
        settle(&hub).await;
        for pool in ["master", "worker"] {
            assert!(
                hub.state()
                    .machine_configs
                    .contains_key(&format!("99-{pool}-generated-registries")),
                "{pool}"
            );
        }
        hub.delete(Kind::ImageDigestMirrorSet, "d", None, Propagation::Background, &actor)
            .await
            .unwrap();
        settle(&hub).await;
        assert!(!hub
            .state()
            .machine_configs
            .keys()
            .any(|n| n.ends_with("-generated-registries")));
    }
}
