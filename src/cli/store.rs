//! `mco store stats` and `mco store compact --before rv:N|TIME`: the event log's size and
//! retention, through `history.mco.dev/v1/store`.

use super::describe_error;
use crate::client::Client;
use anyhow::anyhow;
use serde_json::{json, Value};

/// `mco store stats`.
pub async fn stats(client: &Client) -> anyhow::Result<String> {
    let v: Value = client
        .get_path(&format!("/apis/{}/store/stats", crate::history::API_VERSION))
        .await
        .map_err(|e| anyhow!(describe_error(&e)))?;
    let mut out = format!(
        "events:              {}\nsnapshots:           {} (one every {} events)\nbytes on disk:       {}\nevent body bytes:    {}\noldest readable rv:  {}\nnewest rv:           {}\nevents per kind:\n",
        v["events"], v["snapshots"], v["snapshotEvery"], v["bytesOnDisk"], v["bodyBytes"], v["oldestResourceVersion"], v["newestResourceVersion"]
    );
    for (k, n) in v["eventsPerKind"].as_object().into_iter().flatten() {
        out.push_str(&format!("  {k}: {n}\n"));
    }
    Ok(out)
}

/// `mco store compact --before rv:N|TIME`.
pub async fn compact(client: &Client, before: &str) -> anyhow::Result<String> {
    let v: Value = client
        .post_path(
            &format!("/apis/{}/store/compactions", crate::history::API_VERSION),
            &json!({"before": before}),
        )
        .await
        .map_err(|e| anyhow!(describe_error(&e)))?;
    Ok(format!(
        "removed {} events and {} snapshots; reads before resourceVersion {} now answer 410 Expired\n",
        v["eventsRemoved"], v["snapshotsRemoved"], v["oldestResourceVersion"]
    ))
}
