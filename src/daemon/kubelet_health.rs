//! The kubelet health monitor (MCO's `runKubeletHealthzMonitor` and `getHealth`,
//! `pkg/daemon/daemon.go`, as of MCO commit 7ff337a): polls the kubelet's `healthz` endpoint and
//! keeps the count of consecutive failed checks, the value of MCO's `mcd_kubelet_state` gauge
//! (`pkg/daemon/metrics.go`: "state of kubelet health monitor"), which MCO's `KubeletHealthState`
//! alert (`mcd_kubelet_state > 2`) reads.
//!
//! MCO's semantics, kept: the count is set to 0 when the monitor starts; a check runs one
//! interval after the previous one ended (30 s in MCO, `kubeletHealthzPollingInterval`), with a
//! 30 s timeout (`kubeletHealthzTimeout`); a check fails only when the request or the reading of
//! its body fails (the kubelet down, not listening, not answering in time): an answer whose
//! body is not `ok` is logged as a warning and counts as a success, as MCO's `getHealth` returns
//! nil then; a success resets the count to 0. Where MCO's daemon sets its own gauge, this one
//! reports the count to the server (`ReportKind::KubeletHealth`, [`crate::metrics`]), at the
//! start and whenever it changes, one report after the other in check order.
//!
//! Opt-in (`mco daemon --kubelet-healthz-endpoint URL`): MCO enables it by default on
//! `http://localhost:10248/healthz` because every OpenShift node runs a kubelet; an mco node need
//! not (a sandbox node never does), and a default endpoint nobody listens on would fire
//! `KubeletHealthState` on every such node.

use crate::client::Client;
use crate::metrics::{Report, ReportKind};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// MCO's `kubeletHealthzTimeout`: one check's bound.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(30);

/// MCO's `kubeletHealthzPollingInterval`: the default time between checks.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);

/// What the monitor polls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeletHealthz {
    /// The kubelet's healthz URL (`--kubelet-healthz-endpoint`; MCO's default
    /// `http://localhost:10248/healthz`, the kubelet's `healthzBindAddress`:`healthzPort`).
    pub endpoint: String,
    /// Time from the end of one check to the start of the next (`--kubelet-healthz-interval`).
    pub interval: Duration,
}

/// Starts the monitor of `cfg` for `node` in its own task, until `stop` is cancelled.
pub fn start(client: Client, node: String, cfg: KubeletHealthz, stop: CancellationToken) {
    tokio::spawn(async move {
        let http = match reqwest::Client::builder().timeout(CHECK_TIMEOUT).build() {
            Ok(h) => h,
            Err(e) => {
                tracing::error!(error = %e, "cannot start the kubelet health monitor");
                return;
            }
        };
        tracing::info!(endpoint = %cfg.endpoint, "Enabling Kubelet Healthz Monitor");
        let mut failures: u32 = 0;
        send(&client, &node, failures).await;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(cfg.interval) => {}
            }
            let before = failures;
            match check(&http, &cfg.endpoint).await {
                Ok(()) => failures = 0,
                Err(e) => {
                    failures += 1;
                    tracing::warn!(failures, "kubelet health check has failed {failures} times: {e}");
                }
            }
            if failures != before {
                send(&client, &node, failures).await;
            }
        }
    });
}

/// One check (MCO's `getHealth`): `Err` when the request or its body fails; a body other than
/// `ok` is only logged.
async fn check(http: &reqwest::Client, endpoint: &str) -> Result<(), reqwest::Error> {
    let body = http.get(endpoint).send().await?.text().await?;
    if body != "ok" {
        tracing::warn!("Kubelet Healthz Endpoint returned: {body}");
    }
    Ok(())
}

/// Reports the count, waiting for the answer so that reports arrive in check order; a failure
/// is only logged (metrics never hold the daemon up).
async fn send(client: &Client, node: &str, failures: u32) {
    let report = Report {
        node: node.to_string(),
        kind: ReportKind::KubeletHealth,
        reason: String::new(),
        failures,
        drift: None,
    };
    let body = serde_json::to_value(&report).unwrap_or_default();
    if let Err(e) = client
        .post_path::<serde_json::Value>(crate::protocol::REPORTS_PATH, &body)
        .await
    {
        tracing::debug!(error = %e, "could not report the kubelet health to the server");
    }
}
