//! Reconcilers of the control plane: template (built-ins), render, rollout (node controller), drain and
//! pool status.
//!
//! Owns the reconcile loop. Each controller is a plan function over the projection (pure,
//! run under a short read lock) returning the writes to make, executed through the hub with the
//! controller's actor. Level-triggered and idempotent: a pass over an unchanged state plans
//! nothing. Phases run in order (render, rollout, drain, status), each planning on the state
//! the previous one left. It never asks why it was woken: any change, or a 1 s resync tick for
//! retries, triggers a full pass.

mod drain;
mod render;
mod rollout;
mod status;
pub mod template;

pub use drain::{CommandEvictor, Evictor, NoEviction};

use crate::command::Hub;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Settings of the controllers.
#[derive(Clone)]
pub struct ControllerConfig {
    /// Evicts a node's workloads during a drain (a no-op by default).
    pub evictor: Arc<dyn Evictor>,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            evictor: Arc::new(NoEviction),
        }
    }
}

/// Runs the controllers until `shutdown`.
pub async fn run(hub: Arc<Hub>, cfg: ControllerConfig, shutdown: CancellationToken) {
    let mut changes = hub.changes();
    loop {
        changes.borrow_and_update();
        let writes = reconcile_once(&hub, &cfg).await;
        if writes > 0 {
            continue;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = changes.changed() => {}
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// One full pass of every controller; returns how many writes it made.
pub async fn reconcile_once(hub: &Hub, cfg: &ControllerConfig) -> usize {
    let mut writes = template::reconcile(hub).await;
    writes += render::reconcile(hub).await;
    writes += rollout::reconcile(hub).await;
    writes += drain::reconcile(hub, cfg.evictor.as_ref()).await;
    writes += status::reconcile(hub).await;
    writes
}

/// Logs a failed controller write; the next pass retries (level-triggered).
fn log_failure<T>(controller: &str, object: &str, r: Result<T, crate::command::CommandError>) -> usize {
    match r {
        Ok(_) => 1,
        Err(e) => {
            tracing::warn!(controller, object, error = %e, "write failed; will retry");
            0
        }
    }
}
