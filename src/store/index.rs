//! The per-object index (`index` tree): one object's seqs, its newest event at a seq, the
//! names of a kind, prefix scans; and catching the index up with the log (it is derived).

use super::{seq_of, Store, StoreError};
use crate::event::Event;
use std::sync::atomic::Ordering;

/// Key of the `index` tree recording the last seq indexed (u64 big-endian). Sorts after every
/// index entry (a kind never starts with 0xff).
pub const INDEXED_THROUGH: &[u8] = b"\xffindexed_through";

impl Store {
    /// Indexes the events after [`INDEXED_THROUGH`]. Appends do not touch the index (a
    /// second tree in every append halved the durable append rate); the index catches up here,
    /// before every index read and at open, at the cost of the events appended since.
    pub(super) fn index_missing(&self) -> Result<(), StoreError> {
        let last = self.last_seq();
        if self.indexed_through.load(Ordering::SeqCst) >= last {
            return Ok(());
        }
        let _one_indexer = self.index_lock.lock().expect("index lock poisoned");
        let through = self.index.get(INDEXED_THROUGH)?.map(|v| seq_of(&v)).unwrap_or(0);
        if through >= last {
            self.indexed_through.fetch_max(through, Ordering::SeqCst);
            return Ok(());
        }
        let mut batch = sled::Batch::default();
        let mut n = 0u64;
        for ev in self.read_range(through, last) {
            let ev = ev?;
            batch.insert(index_key(&ev.object_kind, &ev.name, ev.seq), &[][..]);
            n += 1;
            if n.is_multiple_of(10_000) {
                batch.insert(INDEXED_THROUGH, &ev.seq.to_be_bytes());
                self.index.apply_batch(std::mem::take(&mut batch))?;
            }
        }
        batch.insert(INDEXED_THROUGH, &last.to_be_bytes());
        fail::fail_point!("store::index::before_batch");
        self.index.apply_batch(batch)?;
        self.indexed_through.fetch_max(last, Ordering::SeqCst);
        if n > 10_000 {
            tracing::info!(events = n, "indexed the event log by object");
        }
        Ok(())
    }

    /// The seqs of one object's events with `after < seq <= until`, oldest first, through the
    /// index (cost proportional to the object's own history).
    pub fn object_seqs(&self, kind: &str, name: &str, after: u64, until: u64) -> Result<Vec<u64>, StoreError> {
        self.index_missing()?;
        let from = index_key(kind, name, after.saturating_add(1));
        let to = index_key(kind, name, until);
        let mut out = Vec::new();
        if after >= until {
            return Ok(out);
        }
        for r in self.index.range(from..=to) {
            let (k, _) = r?;
            out.push(seq_of(&k[k.len() - 8..]));
        }
        Ok(out)
    }

    /// The newest event at or before `seq` that created, changed or deleted one object (notes
    /// skipped), through the index, newest first: the cost is the object's events after that
    /// one. `None` when the retained log has none (the object did not exist yet, or its events
    /// were compacted away: callers check [`Store::oldest_readable`]).
    pub fn object_event_at(&self, kind: &str, name: &str, seq: u64) -> Result<Option<Event>, StoreError> {
        self.index_missing()?;
        let from = index_key(kind, name, 0);
        let to = index_key(kind, name, seq);
        for r in self.index.range(from..=to).rev() {
            let (k, _) = r?;
            let Some(ev) = self.event(seq_of(&k[k.len() - 8..]))? else {
                continue;
            };
            if !ev.event_type().is_some_and(|t| t.is_note()) {
                return Ok(Some(ev));
            }
        }
        Ok(None)
    }

    /// The seqs of the events (`after < seq <= until`) of every object of `kind` whose name
    /// starts with `prefix`, through the index (`rendered-worker-` gives every rendered config
    /// the worker pool ever had), sorted.
    pub fn prefix_seqs(&self, kind: &str, prefix: &str, after: u64, until: u64) -> Result<Vec<u64>, StoreError> {
        self.index_missing()?;
        let mut start = Vec::with_capacity(kind.len() + prefix.len() + 1);
        start.extend_from_slice(kind.as_bytes());
        start.push(0);
        start.extend_from_slice(prefix.as_bytes());
        let mut out = Vec::new();
        for r in self.index.scan_prefix(&start) {
            let (k, _) = r?;
            let seq = seq_of(&k[k.len() - 8..]);
            if seq > after && seq <= until {
                out.push(seq);
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    /// Every object name of `kind` the retained log has events for (deleted objects included),
    /// sorted, with the seq of its newest event.
    pub fn names(&self, kind: &str) -> Result<Vec<(String, u64)>, StoreError> {
        self.index_missing()?;
        let mut prefix = kind.as_bytes().to_vec();
        prefix.push(0);
        let mut out: Vec<(String, u64)> = Vec::new();
        for r in self.index.scan_prefix(&prefix) {
            let (k, _) = r?;
            let rest = &k[prefix.len()..k.len() - 9];
            let seq = seq_of(&k[k.len() - 8..]);
            let name = String::from_utf8_lossy(rest).into_owned();
            match out.last_mut() {
                Some((n, s)) if *n == name => *s = seq,
                _ => out.push((name, seq)),
            }
        }
        Ok(out)
    }
}

/// `<kind>\0<name>\0<seq big-endian>`: an object's index entries sort by seq.
pub(super) fn index_key(kind: &str, name: &str, seq: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(kind.len() + name.len() + 10);
    k.extend_from_slice(kind.as_bytes());
    k.push(0);
    k.extend_from_slice(name.as_bytes());
    k.push(0);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}
