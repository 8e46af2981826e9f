//! Template controller: the built-in pools `master` and `worker` and their empty base
//! MachineConfigs `00-master` / `00-worker`, from the files in `config/`.
//!
//! MCO renders `00-<role>` from platform templates (`pkg/controller/template/render.go`); mco has
//! no platform to template for, so the base configs are empty Ignition 3.4.0 configs. They are
//! created once, on a store's first start: a user who deletes one keeps it deleted.

use crate::command::{Actor, CommandError, Hub};
use crate::manifest::{parse_documents, Manifest};
use crate::model::Kind;

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

/// Creates the built-in objects when the log is empty (first start).
pub async fn ensure_builtins(hub: &Hub) -> Result<(), CommandError> {
    if hub.store().last_seq() > 0 {
        return Ok(());
    }
    let actor = Actor::new("controller:template");
    for (file, text) in BUILTINS {
        for doc in parse_documents(text) {
            let m = doc.map_err(|e| CommandError::BadRequest(format!("{file}: {e}")))?;
            let (kind, obj) = match m {
                Manifest::MachineConfig(mc) => (Kind::MachineConfig, serde_json::to_value(mc)),
                Manifest::MachineConfigPool(p) => (Kind::MachineConfigPool, serde_json::to_value(p)),
            };
            let obj = obj.expect("model objects serialize");
            match hub.create(kind, obj, &actor).await {
                Ok(_) | Err(CommandError::AlreadyExists { .. }) => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}
