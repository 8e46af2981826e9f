//! `mco store stats` and `mco store compact --before rv:N|TIME`: the event log's size and
//! retention, through `history.mco.dev/v1/store`; `mco store verify` and `mco store truncate`,
//! offline on a stopped server's data dir (the store's integrity, [`crate::store::verify`]).

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

/// `mco store verify --data-dir DIR [--drop-snapshot N] [-o json]`: the offline check of the
/// event log in `DIR/store` (the server must be stopped: one process per store). Returns the
/// report to print and whether the store is intact (the exit status).
pub fn verify(
    data_dir: &std::path::Path,
    drop_snapshot: Option<u64>,
    json_output: bool,
) -> anyhow::Result<(String, bool)> {
    let dir = data_dir.join("store");
    let store = crate::store::Store::open_for_repair(&dir).map_err(|e| {
        anyhow!(
            "cannot verify the event log in {}: {e}{}",
            dir.display(),
            in_use_hint(&dir, &e)
        )
    })?;
    let mut out = String::new();
    if let Some(seq) = drop_snapshot {
        if store.drop_snapshot(seq)? {
            out.push_str(&format!("removed the snapshot at resourceVersion {seq}\n"));
        } else {
            out.push_str(&format!("no snapshot at resourceVersion {seq}\n"));
        }
    }
    let report = store.verify()?;
    if json_output {
        return Ok((
            serde_json::to_string_pretty(&report).expect("report serializes") + "\n",
            report.ok(),
        ));
    }
    out.push_str(&format!(
        "store:            {}\nschema:           {}\nevents:           {} (resourceVersions {}..{})\nacknowledged:     {}\nsnapshots:        {}\nindex entries:    {} (indexed through {})\n",
        dir.display(),
        report.schema_version,
        report.events,
        report.first_resource_version,
        report.last_resource_version,
        match report.acknowledged_through {
            Some(m) => format!("through resourceVersion {m} (the high-water mark)"),
            None => "no high-water mark (a server records one at its next start)".into(),
        },
        report.snapshots,
        report.index_entries,
        report.indexed_through,
    ));
    match report.first_problem() {
        None => out.push_str(
            "result:           ok (every checksum matches, seqs continuous, every acknowledged event present, snapshots decode, index consistent)\n",
        ),
        Some(first) => {
            out.push_str(&format!(
                "result:           CORRUPT, {} problem(s)\n",
                report.problems.len()
            ));
            for p in &report.problems {
                out.push_str(&format!("  {} at resourceVersion {}: {}\n", p.tree, p.seq, p.what));
            }
            out.push_str(&format!("{}\n", first.clone().into_error()));
        }
    }
    Ok((out, report.ok()))
}

/// `mco store truncate --data-dir DIR --after N`: removes every event after resourceVersion `N`
/// (the repair `mco store verify` suggests for a log damaged from `N + 1` on).
pub fn truncate(data_dir: &std::path::Path, after: u64) -> anyhow::Result<String> {
    let dir = data_dir.join("store");
    let store = crate::store::Store::open_for_repair(&dir).map_err(|e| {
        anyhow!(
            "cannot open the event log in {}: {e}{}",
            dir.display(),
            in_use_hint(&dir, &e)
        )
    })?;
    let removed = store.truncate_after(after)?;
    Ok(format!(
        "removed {removed} events after resourceVersion {after}; the log now ends at resourceVersion {}\n",
        store.last_seq()
    ))
}

/// For a store whose lock another process holds: which one, and that it must be stopped first.
fn in_use_hint(dir: &std::path::Path, e: &crate::store::StoreError) -> String {
    let text = e.to_string();
    if !(text.contains("could not acquire lock") || text.contains("WouldBlock")) {
        return String::new();
    }
    let holder = crate::up::lock_holder(dir)
        .map(|(pid, cmd)| format!(" (held by pid {pid}: {cmd})"))
        .unwrap_or_default();
    format!("; the store is in use{holder}: stop the server first (one process per store)")
}
