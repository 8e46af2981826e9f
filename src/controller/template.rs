//! Template controller: the built-in pools `master` and `worker` and their base MachineConfigs
//! `00-master` / `00-worker`, from the files in `config/`.
//!
//! MCO's operator re-applies the built-in pools (`manifests/{master,worker}.machineconfigpool.yaml`)
//! and its template controller renders `00-<role>` from platform templates
//! (`pkg/controller/template/render.go`); mco has no platform to template for, so the base
//! configs are empty Ignition 3.4.0 configs. Whenever one of them is missing (first start, or
//! deleted by a user) it is created again; existing ones are left as they are. The template
//! configs `01-<role>-kubelet` and `01-<role>-container-runtime` come from
//! [`crate::generate::templates`] and are kept as rendered (user edits are overwritten).

use super::log_failure;
use crate::command::{Actor, CommandError, Hub, Scope};
use crate::generate::templates::{template_configs, TemplateSettings};
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

/// Creates the built-in objects that do not exist, and keeps the template configs
/// (`01-<role>-kubelet`, `01-<role>-container-runtime` for master and worker) as the templates
/// render them: a user's edit of one is overwritten, as MCO's template controller re-applies
/// its MachineConfigs. Returns the number of writes.
pub async fn reconcile(hub: &Hub, settings: &TemplateSettings) -> usize {
    let missing: Vec<&(Kind, String, Value)> = {
        builtins()
            .iter()
            .filter(|(k, n, _)| hub.state().get_json(*k, n).is_none())
            .collect()
    };
    let actor = Actor::new("controller:template");
    let mut writes = 0;
    for (kind, name, obj) in missing {
        let mut obj = obj.clone();
        if *kind == Kind::MachineConfig {
            // Template MachineConfigs carry the controller version, as MCO's do.
            obj["metadata"]["annotations"][hub.keys().generated_by()] =
                Value::String(crate::model::CONTROLLER_VERSION.into());
        }
        let r = match hub.create(*kind, obj, &actor).await {
            Err(CommandError::AlreadyExists { .. }) => continue,
            other => other,
        };
        writes += log_failure("template", name, r);
    }
    for (name, want) in rendered_templates(settings, &hub.keys().generated_by()) {
        let current = hub.state().get_json(Kind::MachineConfig, &name);
        let r = match current {
            None => hub.create(Kind::MachineConfig, want, &actor).await,
            Some(cur)
                if cur["spec"] == want["spec"]
                    && cur["metadata"]["labels"] == want["metadata"]["labels"]
                    && cur["metadata"]["annotations"] == want["metadata"]["annotations"] =>
            {
                continue
            }
            Some(_) => {
                hub.update(Kind::MachineConfig, &name, Scope::Main, None, &actor, |cur| {
                    let mut next = cur.clone();
                    next["spec"] = want["spec"].clone();
                    next["metadata"]["labels"] = want["metadata"]["labels"].clone();
                    next["metadata"]["annotations"] = want["metadata"]["annotations"].clone();
                    Ok(next)
                })
                .await
            }
        };
        writes += log_failure("template", &name, r);
    }
    writes
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
    #[test]
    fn the_built_ins_parse() {
        let names: Vec<&str> = super::builtins().iter().map(|(_, n, _)| n.as_str()).collect();
        assert_eq!(names, ["master", "worker", "00-master", "00-worker"]);
    }
}
