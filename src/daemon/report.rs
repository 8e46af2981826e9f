//! The daemon's side of fleet metrics: drift detections and failed reboots, posted to the
//! server (`POST /apis/metrics.mco.dev/v1/reports`, [`crate::protocol::REPORTS_PATH`]) so that the
//! server's `/metrics` covers every node, as MCO's per-daemon endpoints do.
//!
//! Fire and forget: a report is sent in the background and a failure is only logged, so the
//! daemon's work never waits on metrics.

use crate::client::Client;
use crate::metrics::{Report, ReportKind};

/// Sends `kind` (with `reason`, for a drift) for `node` in the background.
pub fn send(client: &Client, node: &str, kind: ReportKind, reason: &str) {
    let client = client.clone();
    let report = Report {
        node: node.to_string(),
        kind,
        reason: reason.to_string(),
        failures: 0,
        drift: None,
    };
    tokio::spawn(async move {
        let body = serde_json::to_value(&report).unwrap_or_default();
        if let Err(e) = client
            .post_path::<serde_json::Value>(crate::protocol::REPORTS_PATH, &body)
            .await
        {
            tracing::debug!(error = %e, "could not report metrics to the server");
        }
    });
}

/// Sends `kind` with a drift `record` for `node` and waits for the answer (the server writes
/// the record to the log); a failure is only logged, as for every report.
pub async fn send_drift(
    client: &Client,
    node: &str,
    kind: ReportKind,
    reason: &str,
    record: crate::drift::DriftRecord,
) {
    let report = Report {
        node: node.to_string(),
        kind,
        reason: reason.to_string(),
        failures: 0,
        drift: Some(record),
    };
    let body = serde_json::to_value(&report).unwrap_or_default();
    if let Err(e) = client
        .post_path::<serde_json::Value>(crate::protocol::REPORTS_PATH, &body)
        .await
    {
        tracing::warn!(error = %e, "could not report a drift to the server");
    }
}
