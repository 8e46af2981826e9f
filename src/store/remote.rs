//! The store on the etcd backend ([`super::etcd`]): opening it (this replica's copy of the log
//! rebuilt from etcd, every record checked), a flush as an etcd commit, and compaction in etcd.
//! The reads, the index and the snapshots are the sled trees' as for a local store.

use super::etcd::EtcdLog;
use super::log::decode_event;
use super::snapshot::decode_snapshot;
use super::{mark, record, Store, StoreError};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Store {
    /// Opens the event log held in etcd through `log`, which must hold the writer lease
    /// ([`EtcdLog::try_acquire`]): prepares the keyspace ([`EtcdLog::prepare`]: schema, a batch
    /// left unfinished), then copies the log into a store of this process (a temporary sled
    /// directory: the index and the time-travel snapshots, one every `snapshot_every` events,
    /// are derived per replica), starting from the snapshot at the last compaction's cut,
    /// checking every record's checksum, envelope and seq continuity up to the head as
    /// [`Store::open`] does.
    ///
    /// Errors: [`StoreError::Corrupt`] (tree `etcd`) naming the first bad or missing
    /// resourceVersion; [`StoreError::SchemaTooNew`]; [`StoreError::Etcd`];
    /// [`StoreError::Fenced`] without the lease.
    pub async fn open_etcd(log: Arc<EtcdLog>, snapshot_every: u64) -> Result<Store, StoreError> {
        let meta = log.prepare().await?;
        let mut store = Store::temporary()?.with_snapshot_every(snapshot_every);
        let mut state = crate::state::State::default();
        let from = meta.compacted_before.saturating_sub(1);
        if meta.compacted_before > 1 {
            let base = log.base(from).await?.ok_or_else(|| StoreError::Corrupt {
                seq: from,
                tree: "etcd",
                what: format!(
                    "the log was compacted before {} and the snapshot at its cut is missing",
                    meta.compacted_before
                ),
            })?;
            state = decode_snapshot(&from.to_be_bytes(), &base).map_err(in_etcd)?;
            store.write_snapshot(&state)?;
            store
                .meta
                .insert("compacted_before", &meta.compacted_before.to_be_bytes())?;
            store.compacted_before.store(meta.compacted_before, Ordering::SeqCst);
            store.last_seq.store(from, Ordering::SeqCst);
        }
        let mut expected = from + 1;
        log.read_records(from, meta.head.seq, |page| {
            let mut batch = sled::Batch::default();
            for (seq, value) in page {
                if seq != expected {
                    return Err(missing(expected, meta.head.seq));
                }
                let event = decode_event(&seq.to_be_bytes(), &value).map_err(in_etcd)?;
                batch.insert(&seq.to_be_bytes(), value);
                expected += 1;
                // This replica's time-travel snapshots, at the interval a local store has them.
                state.apply(&event);
                if seq.is_multiple_of(store.snapshot_every) {
                    store.write_snapshot(&state)?;
                }
            }
            store.events.apply_batch(batch)?;
            Ok(())
        })
        .await?;
        if expected != meta.head.seq + 1 {
            return Err(missing(expected, meta.head.seq));
        }
        store.last_seq.store(meta.head.seq, Ordering::SeqCst);
        store.flushed_seq.store(meta.head.seq, Ordering::SeqCst);
        *store.head.lock().expect("head lock poisoned") = mark::Mark {
            seq: meta.head.seq,
            chain: 0,
        };
        store.index_missing()?;
        store.remote = Some(log);
        Ok(store)
    }

    /// The etcd backend this store makes its log durable in, if any.
    pub fn remote(&self) -> Option<&Arc<EtcdLog>> {
        self.remote.as_ref()
    }

    /// The flush of a store on etcd ([`Store::flush`] holds the turn): commits every record
    /// appended after the last commit, guarded on etcd's head being the last committed seq.
    pub(super) async fn commit_to_etcd(&self, log: &EtcdLog) -> Result<(), StoreError> {
        let target = self.head.lock().expect("head lock poisoned").seq;
        let after = self.flushed_seq();
        let records = self.framed_range(after, target)?;
        let started = std::time::Instant::now();
        log.commit(after, records).await?;
        if let Some(h) = self.fsync_seconds.get() {
            h.observe(started.elapsed().as_secs_f64());
        }
        self.flushed_seq.fetch_max(target, Ordering::SeqCst);
        Ok(())
    }

    /// The stored (framed) records with `after < seq <= through`.
    fn framed_range(&self, after: u64, through: u64) -> Result<Vec<super::etcd::layout::Record>, StoreError> {
        let mut out = Vec::new();
        for r in self.events.range((after + 1).to_be_bytes()..=through.to_be_bytes()) {
            let (k, v) = r?;
            out.push((super::seq_of(&k), v.to_vec()));
        }
        Ok(out)
    }

    /// The part of [`Store::compact`] done in etcd: the snapshot at the cut becomes the base,
    /// then the cut is recorded and the events before it deleted.
    pub(super) fn compact_in_etcd(&self, log: &EtcdLog, before: u64) -> Result<(), StoreError> {
        let state = self.state_at(before - 1)?;
        let json = serde_json::to_vec(&state).expect("state serializes");
        log.compact_blocking(before, record::frame(&json))
    }
}

/// The entries of the log held in etcd as an export has them (the cut and its snapshot, then
/// every event up to the head), read without the writer lease: a running server keeps
/// writing; the export is the log as of the head read first.
pub async fn etcd_export_entries(log: &EtcdLog) -> Result<Vec<super::export::Entry>, StoreError> {
    use super::export::Entry;
    let meta = log.meta().await?;
    let mut out = Vec::new();
    if meta.compacted_before > 1 {
        let cut = meta.compacted_before - 1;
        out.push(Entry::CompactedBefore(meta.compacted_before));
        let record = log.base(cut).await?.ok_or_else(|| StoreError::Corrupt {
            seq: cut,
            tree: "etcd",
            what: "the snapshot at the cut is missing".to_string(),
        })?;
        out.push(Entry::Snapshot { seq: cut, record });
    }
    log.read_records(meta.compacted_before.saturating_sub(1), meta.head.seq, |page| {
        out.extend(page.into_iter().map(|(seq, record)| Entry::Event { seq, record }));
        Ok(())
    })
    .await?;
    Ok(out)
}

/// A corrupt record read from etcd is named as etcd's (its repair is etcd's restore).
fn in_etcd(e: StoreError) -> StoreError {
    match e {
        StoreError::Corrupt { seq, what, .. } => StoreError::Corrupt {
            seq,
            tree: "etcd",
            what,
        },
        e => e,
    }
}

fn missing(seq: u64, head: u64) -> StoreError {
    StoreError::Corrupt {
        seq,
        tree: "etcd",
        what: format!("the record is missing from etcd (its head says the log reaches resourceVersion {head})"),
    }
}
