//! `mco store stats` and `mco store compact --before rv:N|TIME`: the event log's size and
//! retention, through `history.mco.dev/v1/store`; `mco store verify` and `mco store truncate`,
//! offline on a stopped server's data dir (the store's integrity, [`crate::store::verify`]);
//! `mco store export` and `mco store import`, moving a log between backends
//! ([`crate::store::export`]).

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

/// The etcd backend's settings for the store commands (their name in the writer key).
fn etcd_config(store: &super::args::StoreArgs) -> anyhow::Result<Option<crate::store::etcd::EtcdConfig>> {
    let mut args = store.clone();
    args.name
        .get_or_insert_with(|| format!("mco-store-tool-{}", std::process::id()));
    args.etcd(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
}

/// `mco store export`: the log of a stopped server's data dir, or of etcd (read as of its head,
/// without taking the writer lease), to `file`. Returns the summary (for standard error).
pub async fn export(
    data_dir: &std::path::Path,
    store: &super::args::StoreArgs,
    file: &std::path::Path,
) -> anyhow::Result<String> {
    use crate::store::export::{check_entries, write_entry, MAGIC};
    let (entries, from) = match etcd_config(store)? {
        Some(cfg) => {
            let from = format!("etcd at {} (prefix {})", cfg.endpoints.join(","), cfg.prefix);
            let log = crate::store::etcd::EtcdLog::connect(cfg).await?;
            (crate::store::etcd_export_entries(&log).await?, from)
        }
        None => {
            let dir = data_dir.join("store");
            if !dir.join("db").exists() {
                anyhow::bail!("no event log in {}", dir.display());
            }
            let s = crate::store::Store::open(&dir).map_err(|e| {
                anyhow!(
                    "cannot open the event log in {}: {e}{}",
                    dir.display(),
                    in_use_hint(&dir, &e)
                )
            })?;
            (s.export_entries()?, dir.display().to_string())
        }
    };
    let moved = check_entries(&entries)?;
    let mut out: Box<dyn std::io::Write> = if file.as_os_str() == "-" {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(std::io::BufWriter::new(
            std::fs::File::create(file).map_err(|e| anyhow!("{}: {e}", file.display()))?,
        ))
    };
    out.write_all(MAGIC)?;
    for e in &entries {
        write_entry(&mut out, e)?;
    }
    out.flush()?;
    Ok(format!(
        "exported {} events (resourceVersions {}..={}) and {} snapshots from {from}\n",
        moved.events,
        moved.compacted_before.max(1),
        moved.last,
        moved.snapshots
    ))
}

/// `mco store import`: an export file into a new data dir's log, or into an etcd prefix no
/// server writes (this command holds the writer lease while it imports).
pub async fn import(
    data_dir: &std::path::Path,
    store: &super::args::StoreArgs,
    file: &std::path::Path,
) -> anyhow::Result<String> {
    let entries = if file.as_os_str() == "-" {
        crate::store::export::read_entries(&mut std::io::stdin().lock())?
    } else {
        let mut f = std::io::BufReader::new(std::fs::File::open(file).map_err(|e| anyhow!("{}: {e}", file.display()))?);
        crate::store::export::read_entries(&mut f)?
    };
    crate::store::export::check_entries(&entries)?;
    let (target, into) = match etcd_config(store)? {
        Some(cfg) => {
            let into = format!("etcd at {} (prefix {})", cfg.endpoints.join(","), cfg.prefix);
            let log = crate::store::etcd::EtcdLog::connect(cfg).await?;
            if let Some(holder) = log.try_acquire().await? {
                anyhow::bail!("{holder} writes the event log under this prefix: import into a prefix no server uses");
            }
            (
                crate::store::Store::open_etcd(log, crate::store::SNAPSHOT_EVERY).await?,
                into,
            )
        }
        None => {
            let dir = data_dir.join("store");
            if dir.join("db").exists() {
                anyhow::bail!(
                    "{} already holds an event log: import into a new data dir",
                    dir.display()
                );
            }
            std::fs::create_dir_all(&dir)?;
            crate::tls::private_dir(&dir)?;
            (crate::store::Store::open(&dir)?, dir.display().to_string())
        }
    };
    let moved = target.import(&entries).await;
    if let Some(log) = target.remote() {
        log.release().await;
    }
    let moved = moved?;
    Ok(format!(
        "imported {} events (resourceVersions {}..={}) into {into}\n",
        moved.events,
        moved.compacted_before.max(1),
        moved.last
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
