//! Template controller: the built-in pools `master` and `worker`, and the template configs of
//! each role: `00-<role>` (from `config/machineconfigs/`), `01-<role>-kubelet` and
//! `01-<role>-container-runtime` (from [`crate::generate::templates`]).
//!
//! MCO's operator re-applies the built-in pools (`manifests/{master,worker}.machineconfigpool.yaml`):
//! a missing one is created again on every pass. MCO's template controller
//! (`pkg/controller/template/template_controller.go`) renders every template config and
//! applies it (`lib/resourceapply` `ApplyMachineConfig`: the spec replaced, its labels and
//! annotations merged in) when it syncs, and it syncs only when its inputs change (the
//! ControllerConfig's spec, the pull secret, the APIServer, the feature gates) or it starts: it
//! does not watch MachineConfigs, so a user's edit of any template config stays (and reaches the
//! nodes) until the next sync, which puts every one of them back. mco does the same, its inputs
//! being the template settings (fixed while the server runs): a sync when the controllers
//! start, and when the settings differ from the last sync's. mco also syncs when a template
//! config is missing (MCO would render without it until its next sync), a deliberate difference.
//! mco has no platform to template for, so `00-<role>` are empty Ignition 3.4.0 configs.
//! The platform setting ([`Platform`], `mco server --platform`) says whether the nodes are
//! OpenShift nodes (the `01-<role>-*` configs above) or plain hosts (`none`: `00-<role>` only;
//! a sync deletes the `01-<role>-*` this controller made, keeping a user's of the same name).

use super::log_failure;
use crate::command::{Actor, CommandError, Hub, Propagation, Scope};
use crate::generate::templates::{template_configs, Platform, TemplateSettings};
use crate::manifest::{parse_documents, Manifest};
use crate::model::Kind;
use serde_json::Value;
use std::sync::OnceLock;

/// The built-in objects, as shipped in `config/`.
pub const BUILTINS: [(&str, &str); 4] = [
    (
        "config/pools/master.yaml",
        include_str!("../../config/pools/master.yaml"),
    ),
    (
        "config/pools/worker.yaml",
        include_str!("../../config/pools/worker.yaml"),
    ),
    (
        "config/machineconfigs/00-master.yaml",
        include_str!("../../config/machineconfigs/00-master.yaml"),
    ),
    (
        "config/machineconfigs/00-worker.yaml",
        include_str!("../../config/machineconfigs/00-worker.yaml"),
    ),
];

/// The built-ins parsed once: `(kind, name, object)`. The files are part of the binary and
/// covered by a test, so a parse failure is a build defect.
fn builtins() -> &'static [(Kind, String, Value)] {
    static PARSED: OnceLock<Vec<(Kind, String, Value)>> = OnceLock::new();
    PARSED.get_or_init(|| {
        let mut out = Vec::new();
        for (file, text) in BUILTINS {
            for doc in parse_documents(text) {
                let m = doc.unwrap_or_else(|e| panic!("built-in {file} does not parse: {e}"));
                let name = m.name().to_string();
                let (kind, obj) = match m {
                    Manifest::MachineConfig(mc) => (Kind::MachineConfig, serde_json::to_value(mc)),
                    Manifest::MachineConfigPool(p) => (Kind::MachineConfigPool, serde_json::to_value(p)),
                    Manifest::MachineConfiguration(m) => (Kind::MachineConfiguration, serde_json::to_value(m)),
                    Manifest::Other { kind, object } => (kind, Ok(object)),
                };
                out.push((kind, name, obj.expect("model objects serialize")));
            }
        }
        out
    })
}

/// Creates the built-in pools that do not exist and, when a template sync is due (`synced` is
/// not `settings`: the controllers just started or the settings changed; or a template config
/// is missing), applies every template config as MCO's template controller does: created when
/// missing, else its spec replaced and its labels and annotations merged in. `synced` records a
/// sync whose writes all succeeded. Returns the number of writes.
pub async fn reconcile(hub: &Hub, settings: &TemplateSettings, synced: &mut Option<TemplateSettings>) -> usize {
    let actor = Actor::new("controller:template");
    let generated_by = hub.keys().generated_by();
    let mut writes = 0;
    let pools: Vec<&(Kind, String, Value)> = builtins()
        .iter()
        .filter(|(k, n, _)| *k == Kind::MachineConfigPool && hub.state().get_json(*k, n).is_none())
        .collect();
    for (kind, name, obj) in pools {
        let r = match hub.create(*kind, obj.clone(), &actor).await {
            Err(CommandError::AlreadyExists { .. }) => continue,
            other => other,
        };
        writes += log_failure("template", name, r);
    }
    let mut configs: Vec<(String, Value)> = builtins()
        .iter()
        .filter(|(k, _, _)| *k == Kind::MachineConfig)
        .map(|(_, n, obj)| {
            let mut obj = obj.clone();
            // Template MachineConfigs carry the controller version, as MCO's do.
            obj["metadata"]["annotations"][generated_by.as_str()] =
                Value::String(crate::model::CONTROLLER_VERSION.into());
            (n.clone(), obj)
        })
        .collect();
    configs.extend(rendered_templates(settings, &generated_by));
    let missing = configs
        .iter()
        .any(|(n, _)| hub.state().get_json(Kind::MachineConfig, n).is_none());
    if synced.as_ref() == Some(settings) && !missing {
        return writes;
    }
    let mut failed = false;
    for (name, want) in configs {
        let r = match hub.state().get_json(Kind::MachineConfig, &name) {
            None => match hub.create(Kind::MachineConfig, want, &actor).await {
                Err(CommandError::AlreadyExists { .. }) => continue,
                other => other,
            },
            Some(cur) if applied(&cur, &want) == cur => continue,
            Some(_) => {
                hub.update(Kind::MachineConfig, &name, Scope::Main, None, &actor, |cur| {
                    Ok(applied(cur, &want))
                })
                .await
            }
        };
        failed |= r.is_err();
        writes += log_failure("template", &name, r);
    }
    for name in retired_templates(settings) {
        let Some(cur) = hub.state().get_json(Kind::MachineConfig, &name) else {
            continue;
        };
        // Only the template controller's own: a user's MachineConfig of that name stays.
        if cur["metadata"]["annotations"][generated_by.as_str()].is_null() {
            continue;
        }
        tracing::info!(
            machineconfig = name,
            platform = %settings.platform,
            "deleting a template config the platform does not have"
        );
        let r = hub
            .delete(Kind::MachineConfig, &name, None, Propagation::Background, &actor)
            .await;
        let r = match r {
            Err(CommandError::NotFound { .. }) => continue,
            other => other,
        };
        failed |= r.is_err();
        writes += log_failure("template", &name, r);
    }
    if !failed {
        *synced = Some(settings.clone());
    }
    writes
}

/// The template configs of the other platforms that `settings`' platform does not have
/// (`01-<role>-kubelet` and `01-<role>-container-runtime` on [`Platform::None`]): deleted at
/// a sync, so a server moved to `--platform none` stops enabling `kubelet.service`.
fn retired_templates(settings: &TemplateSettings) -> Vec<String> {
    let openshift = TemplateSettings {
        platform: Platform::Openshift,
        ..settings.clone()
    };
    let kept: Vec<String> = ["master", "worker"]
        .iter()
        .flat_map(|r| template_configs(r, settings))
        .map(|mc| mc.name().to_string())
        .collect();
    ["master", "worker"]
        .iter()
        .flat_map(|r| template_configs(r, &openshift))
        .map(|mc| mc.name().to_string())
        .filter(|n| !kept.contains(n))
        .collect()
}

/// `current` with `required` applied as MCO's `resourceapply.ApplyMachineConfig` applies it:
/// the spec replaced, the required labels and annotations set (others kept).
fn applied(current: &Value, required: &Value) -> Value {
    let mut next = current.clone();
    next["spec"] = required["spec"].clone();
    for k in ["labels", "annotations"] {
        for (key, v) in required["metadata"][k].as_object().into_iter().flatten() {
            next["metadata"][k][key] = v.clone();
        }
    }
    next
}

/// The template configs of master and worker as stored objects, rendered once per settings
/// (every controller pass compares against them).
fn rendered_templates(settings: &TemplateSettings, generated_by: &str) -> Vec<(String, Value)> {
    type Cache = std::sync::Mutex<Option<(TemplateSettings, String, Vec<(String, Value)>)>>;
    static CACHE: Cache = std::sync::Mutex::new(None);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((s, g, v)) = cache.as_ref() {
        if s == settings && g == generated_by {
            return v.clone();
        }
    }
    let mut out = Vec::new();
    for role in ["master", "worker"] {
        for mc in template_configs(role, settings) {
            let mut want = serde_json::to_value(&mc).expect("model objects serialize");
            want["metadata"]["annotations"] = serde_json::json!({generated_by: crate::model::CONTROLLER_VERSION});
            out.push((mc.name().to_string(), want));
        }
    }
    *cache = Some((settings.clone(), generated_by.to_string(), out.clone()));
    out
}

#[cfg(test)]
mod tests {
    use crate::command::{Actor, Hub, Propagation, Scope};
    use crate::model::Kind;
    use serde_json::json;

    async fn settle(hub: &Hub, memory: &mut super::super::Memory) {
        settle_with(hub, &super::super::ControllerConfig::default(), memory).await
    }

    async fn settle_with(hub: &Hub, cfg: &super::super::ControllerConfig, memory: &mut super::super::Memory) {
        for _ in 0..50 {
            if super::super::reconcile_once(hub, cfg, true, memory).await == 0 {
                return;
            }
        }
        panic!("the controllers never settle");
    }

    async fn edit(hub: &Hub, name: &str) {
        hub.update(
            Kind::MachineConfig,
            name,
            Scope::Main,
            None,
            &Actor::new("test"),
            |cur| {
                let mut next = cur.clone();
                next["spec"]["kernelArguments"] = json!(["edited=1"]);
                next["metadata"]["labels"]["example.com/mine"] = json!("yes");
                Ok(next)
            },
        )
        .await
        .unwrap();
    }

    /// MCO's template controller applies its MachineConfigs only when it syncs (its start, a
    /// change of its inputs), not on a MachineConfig event: a user's edit of `00-worker` and of
    /// `01-worker-kubelet` both stay until then, and both are put back at the next sync, the
    /// spec replaced and the user's extra label kept (`resourceapply.ApplyMachineConfig`).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_template_config_keeps_an_edit_until_the_next_sync() {
        let hub = Hub::open(crate::store::Store::temporary().unwrap(), crate::model::DEFAULT_GROUP).unwrap();
        let mut memory = super::super::Memory::default();
        settle(&hub, &mut memory).await;
        let templates = [
            "00-worker",
            "01-worker-kubelet",
            "01-worker-container-runtime",
            "00-master",
        ];
        let original: Vec<_> = templates
            .iter()
            .map(|n| hub.state().machine_configs[*n].spec.clone())
            .collect();
        for n in templates {
            edit(&hub, n).await;
        }
        settle(&hub, &mut memory).await;
        let st = hub.state();
        for n in templates {
            assert_eq!(
                st.machine_configs[n].spec.kernel_arguments,
                vec!["edited=1".to_string()],
                "{n} keeps the edit"
            );
        }
        let worker = st.pools["worker"].spec.configuration.name.clone();
        let rendered = &st.machine_configs[&worker];
        assert!(
            rendered.spec.kernel_arguments.contains(&"edited=1".to_string()),
            "the edit is rendered"
        );
        // The controllers restart: the template controller syncs and puts every one back.
        let mut restarted = super::super::Memory::default();
        settle(&hub, &mut restarted).await;
        let st = hub.state();
        for (n, spec) in templates.iter().zip(&original) {
            assert_eq!(&st.machine_configs[*n].spec, spec, "{n} re-applied");
            assert_eq!(
                crate::model::label(&st.machine_configs[*n].metadata, "example.com/mine"),
                Some("yes"),
                "{n}: labels are merged, not replaced"
            );
        }
        // A missing template config is a reason to sync: recreated, the others re-applied.
        edit(&hub, "00-worker").await;
        hub.delete(
            Kind::MachineConfig,
            "01-worker-kubelet",
            None,
            Propagation::Background,
            &Actor::new("test"),
        )
        .await
        .unwrap();
        settle(&hub, &mut restarted).await;
        let st = hub.state();
        assert_eq!(st.machine_configs["01-worker-kubelet"].spec, original[1]);
        assert_eq!(st.machine_configs["00-worker"].spec, original[0]);
    }

    fn with_platform(platform: crate::generate::templates::Platform) -> super::super::ControllerConfig {
        let mut cfg = super::super::ControllerConfig::default();
        cfg.templates.platform = platform;
        cfg
    }

    fn units_of_rendered(hub: &Hub, pool: &str) -> Vec<String> {
        let st = hub.state();
        let rendered = &st.machine_configs[&st.pools[pool].spec.configuration.name];
        rendered.spec.config.as_ref().unwrap()["systemd"]["units"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|u| u["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// `--platform none`: only `00-<role>`, no kubelet or CRI-O configs, so no rendered config
    /// enables `kubelet.service`; `openshift` (the default) has them all; a server moved back
    /// to `none` deletes the ones the template controller made and keeps a user's.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_platform_says_which_template_configs_there_are() {
        use crate::generate::templates::Platform;
        let hub = Hub::open(crate::store::Store::temporary().unwrap(), crate::model::DEFAULT_GROUP).unwrap();
        let mut memory = super::super::Memory::default();
        let templates = |hub: &Hub| -> Vec<String> {
            let st = hub.state();
            let mut v: Vec<String> = st
                .machine_configs
                .keys()
                .filter(|n| !n.starts_with("rendered-"))
                .cloned()
                .collect();
            v.sort();
            v
        };
        settle_with(&hub, &with_platform(Platform::None), &mut memory).await;
        assert_eq!(templates(&hub), ["00-master", "00-worker"]);
        assert!(units_of_rendered(&hub, "worker").is_empty());
        assert!(units_of_rendered(&hub, "master").is_empty());

        // A server restarted with another platform (the setting is fixed while it runs).
        let mut memory = super::super::Memory::default();
        settle_with(&hub, &with_platform(Platform::Openshift), &mut memory).await;
        assert_eq!(
            templates(&hub),
            [
                "00-master",
                "00-worker",
                "01-master-container-runtime",
                "01-master-kubelet",
                "01-worker-container-runtime",
                "01-worker-kubelet"
            ]
        );
        assert_eq!(units_of_rendered(&hub, "worker"), ["kubelet.service"]);

        let mut memory = super::super::Memory::default();
        settle_with(&hub, &with_platform(Platform::None), &mut memory).await;
        assert_eq!(templates(&hub), ["00-master", "00-worker"]);
        assert!(units_of_rendered(&hub, "worker").is_empty());
        // A user's MachineConfig of a template's name is not the controller's to delete.
        let mine = json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
            "metadata": {"name": "01-worker-kubelet", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
            "spec": {"config": {"ignition": {"version": "3.4.0"}}}});
        hub.create(Kind::MachineConfig, mine, &Actor::new("test"))
            .await
            .unwrap();
        let mut restarted = super::super::Memory::default();
        settle_with(&hub, &with_platform(Platform::None), &mut restarted).await;
        assert!(hub.state().machine_configs.contains_key("01-worker-kubelet"));
    }

    #[test]
    fn the_built_ins_parse() {
        let names: Vec<&str> = super::builtins().iter().map(|(_, n, _)| n.as_str()).collect();
        assert_eq!(names, ["master", "worker", "00-master", "00-worker"]);
    }
}
