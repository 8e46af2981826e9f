//! The generated-config controllers (MCO's kubelet-config and container-runtime-config
//! controllers): KubeletConfig → `99-<pool>-generated-kubelet[-n]`, ContainerRuntimeConfig →
//! `99-<pool>-generated-containerruntime[-n]`, mirror sets and the Image config →
//! `99-<pool>-generated-registries`, each with its owner reference, and the `Success` /
//! `Failure` condition on the source object.
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
    status: Vec<ControllerCondition>,
}

/// The generated files of source `i` for a pool (`(path, contents)`), or the rule it breaks.
type FilesOf<'a> = dyn Fn(usize, &MachineConfigPool) -> Result<Vec<(String, String)>, kubelet::RuleError> + 'a;

/// What a pass decided for one source object.
struct Plan {
    suffix_to_set: Option<String>,
    condition: ControllerCondition,
    configs: Vec<MachineConfig>,
}

fn condition(err: Option<String>) -> ControllerCondition {
    match err {
        None => ControllerCondition {
            type_: "Success".into(),
            status: "True".into(),
            message: "Success".into(),
            ..Default::default()
        },
        Some(m) => ControllerCondition {
            type_: "Failure".into(),
            status: "False".into(),
            message: m,
            ..Default::default()
        },
    }
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

/// Plans every source of one kind: suffixes (kept for life), conditions and generated configs.
fn plan_sources(
    sources: &[Source],
    pools: &[MachineConfigPool],
    what: &str,
    noun: &str,
    group: &str,
    generated_by: &str,
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
    for (i, s) in sources.iter().enumerate() {
        let name = s.meta.name.clone().unwrap_or_default();
        let matched = kubelet::matching_pools(s.selector.as_ref(), pools);
        let mut suffix_to_set = None;
        let suffix = match &held[i] {
            Some(x) => Ok(x.clone()),
            None => {
                let others: Vec<&str> = held.iter().flatten().map(String::as_str).collect();
                naming::next_suffix(others, noun).inspect(|x| {
                    suffix_to_set = Some(x.clone());
                })
            }
        };
        if let Some(x) = &suffix_to_set {
            held[i] = Some(x.clone());
        }
        let mut configs = Vec::new();
        let err = match (suffix, matched.is_empty()) {
            (Err(e), _) => Some(format!("Error: {e}")),
            (_, true) => Some(format!(
                "Error: {} {name} does not match any MachineConfigPools (spec.machineConfigPoolSelector)",
                s.kind
            )),
            (Ok(sfx), false) => {
                let mut err = None;
                for p in matched {
                    match files(i, p) {
                        Ok(f) => configs.push(kubelet::machine_config(
                            &naming::generated_name(p.name(), what, &sfx),
                            p.name(),
                            &f,
                            owner(s.kind, &s.meta, group),
                            generated_by,
                        )),
                        Err(e) => {
                            err = Some(e.condition_message());
                            configs.clear();
                            break;
                        }
                    }
                }
                err
            }
        };
        out.push(Plan {
            suffix_to_set,
            condition: condition(err),
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
pub async fn reconcile(hub: &Hub, settings: &TemplateSettings) -> usize {
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
        let pools: Vec<MachineConfigPool> = st.pools.values().cloned().collect();
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
            status: c.status.conditions.clone(),
        })
        .collect();
    let kc_files = |i: usize, p: &MachineConfigPool| kubelet::generated_files(&kcs[i], p, settings);
    let crc_files = |i: usize, _: &MachineConfigPool| crio::generated_files(&crcs[i]);
    let kc_plans = plan_sources(
        &kc_sources,
        &pools,
        "kubelet",
        "kubelet config",
        &group,
        &generated_by,
        &kc_files,
    );
    let crc_plans = plan_sources(
        &crc_sources,
        &pools,
        "containerruntime",
        "container runtime config",
        &group,
        &generated_by,
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
            let current = s.status.last();
            let same = current.is_some_and(|c| c.type_ == p.condition.type_ && c.message == p.condition.message);
            if !same {
                let mut c = p.condition.clone();
                c.last_transition_time = Some(crate::model::now());
                let generation = s.generation;
                let r = hub
                    .update(s.kind, &name, Scope::Status, None, &actor, |cur| {
                        let mut next = cur.clone();
                        next["status"] = json!({"observedGeneration": generation, "conditions": [c.clone()]});
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
            if owner_kind == kind && plan.condition.type_ == "Success" && !desired_names.contains(mc) {
                let r = hub
                    .delete(Kind::MachineConfig, mc, None, Propagation::Background, &actor)
                    .await;
                writes += log_failure(actor_name, mc, r);
            }
        }
    }
    writes + reconcile_registries(hub, &pools, &inputs, &generated_by).await
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
                    reason: "generated from the image mirror sets and the Image config".into(),
                    ..actor.clone()
                };
                writes += ensure(hub, &because, &mc).await;
            }
            Err(e) => tracing::warn!(pool = p.name(), error = %e, "registries config not generated"),
        }
    }
    writes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

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
        let cond = &kcs["k10"]["status"]["conditions"][0];
        assert_eq!(cond["type"], "Failure");
        assert!(
            cond["message"]
                .as_str()
                .unwrap()
                .starts_with("Error: max number of supported kubelet config (10) has been reached"),
            "{cond}"
        );
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
