//! Template controller: the built-in pools `master` and `worker` and their base MachineConfigs
//! `00-master` / `00-worker`, from the files in `config/`.
//!
//! MCO's operator re-applies the built-in pools (`manifests/{master,worker}.machineconfigpool.yaml`)
//! and its template controller renders `00-<role>` from platform templates
//! (`pkg/controller/template/render.go`); mco has no platform to template for, so the base
//! configs are empty Ignition 3.4.0 configs. Whenever one of them is missing (first start, or
//! deleted by a user) it is created again; existing ones are left as they are.

use super::log_failure;
use crate::command::{Actor, CommandError, Hub};
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
                };
                out.push((kind, name, obj.expect("model objects serialize")));
            }
        }
        out
    })
}

/// Creates the built-in objects that do not exist; returns the number of writes.
pub async fn reconcile(hub: &Hub) -> usize {
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
    writes
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_built_ins_parse() {
        let names: Vec<&str> = super::builtins().iter().map(|(_, n, _)| n.as_str()).collect();
        assert_eq!(names, ["master", "worker", "00-master", "00-worker"]);
    }
}
