//! Retention: the oldest readable seq, and compaction (snapshot at the cut, then the events,
//! snapshots and index entries before it removed, the chain of what was removed kept).

use super::{mark, seq_of, CompactionReport, Store, StoreError, INDEXED_THROUGH};
use std::sync::atomic::Ordering;

impl Store {
    /// The oldest seq a time-travel read can answer: 0 when nothing was compacted, else the
    /// snapshot left at the cut.
    pub fn oldest_readable(&self) -> u64 {
        self.compacted_before.load(Ordering::SeqCst).saturating_sub(1)
    }

    /// Removes the events with `seq < before` (and the snapshots and index entries they need no
    /// longer), after writing a snapshot of the state at `before - 1`, so that every read at or
    /// after it still answers and older ones get [`StoreError::Compacted`]. The current state is
    /// untouched: every object still present (every rendered config a pool or node references
    /// included) stays.
    ///
    /// `before` is clamped to `last_seq + 1`. Errors: store errors, or a `before` at or below
    /// an earlier cut (nothing to do is not an error: the report is empty).
    pub fn compact(&self, before: u64) -> Result<CompactionReport, StoreError> {
        let before = before.min(self.last_seq() + 1);
        let done = self.compacted_before.load(Ordering::SeqCst);
        if before <= done.max(1) {
            return Ok(CompactionReport {
                oldest_resource_version: self.oldest_readable(),
                ..Default::default()
            });
        }
        if let Some(log) = self.remote.clone() {
            // etcd first: a replica that opens after it starts from the new cut.
            self.compact_in_etcd(&log, before)?;
        }
        let cut = before - 1;
        let state = self.state_at(cut)?;
        self.write_snapshot(&state)?;
        fail::fail_point!("store::compact::after_snapshot");
        // The chain of the events removed, so that the check at open continues it from the cut
        // (recorded with the cut, in one batch).
        let mut chain = self.chain_before.load(Ordering::SeqCst);
        for r in self.events.range(done.max(1).to_be_bytes()..before.to_be_bytes()) {
            let (k, v) = r?;
            chain = mark::chain(chain, seq_of(&k), mark::record_crc(&v));
        }
        // Readers are turned away from the part being removed before it goes.
        let mut cut_batch = sled::Batch::default();
        cut_batch.insert("compacted_before", &before.to_be_bytes());
        cut_batch.insert("chain_before", &chain.to_be_bytes());
        self.meta.apply_batch(cut_batch)?;
        self.chain_before.store(chain, Ordering::SeqCst);
        self.compacted_before.store(before, Ordering::SeqCst);
        let mut report = CompactionReport::default();
        let mut batch = sled::Batch::default();
        for r in self.events.range(..before.to_be_bytes()) {
            let (k, _) = r?;
            batch.remove(k);
            report.events_removed += 1;
        }
        self.events.apply_batch(batch)?;
        fail::fail_point!("store::compact::after_events");
        let mut batch = sled::Batch::default();
        for r in self.snapshots.range(..cut.to_be_bytes()) {
            let (k, _) = r?;
            batch.remove(k);
            report.snapshots_removed += 1;
        }
        self.snapshots.apply_batch(batch)?;
        let mut batch = sled::Batch::default();
        for r in self.index.iter() {
            let (k, _) = r?;
            if k.as_ref() != INDEXED_THROUGH && k.len() >= 8 && seq_of(&k[k.len() - 8..]) < before {
                batch.remove(k);
            }
        }
        self.index.apply_batch(batch)?;
        report.oldest_resource_version = cut;
        Ok(report)
    }
}
