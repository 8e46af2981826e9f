//! The log itself: append a batch after the last seq (with its checksum and the chain of the
//! high-water mark), durability (group commit over sled's flush, then the mark), reading one
//! event or a range, and mapping a time to a seq.

use super::{mark, record, seq_of, Store, StoreError};
use crate::event::{DecodeError, Event};
use std::sync::atomic::Ordering;

/// The turn of the one caller running an fsync ([`Store::flush`]): released, and every
/// waiting caller woken, when that caller finishes, fails or is cancelled.
pub(super) struct FlushTurn<'a>(pub(super) &'a Store);

impl Drop for FlushTurn<'_> {
    fn drop(&mut self) {
        self.0.flushing.store(false, Ordering::SeqCst);
        self.0.flush_done.notify_waiters();
    }
}

impl Store {
    /// Records the duration of every sled flush from now on in `histogram` (seconds; the
    /// server's `mco_store_fsync_duration_seconds`, etcd's `etcd_disk_wal_fsync_duration_seconds`): the
    /// one durable write the callers of [`Store::flush`] queued behind share. Set once; later
    /// calls are ignored.
    pub fn record_fsyncs(&self, histogram: prometheus_client::metrics::histogram::Histogram) {
        let _ = self.fsync_seconds.set(histogram);
    }

    /// Sequence number of the newest appended event (0 for an empty log).
    pub fn last_seq(&self) -> u64 {
        self.last_seq.load(Ordering::SeqCst)
    }

    /// Sequence number of the newest event known to be on disk (everything up to it survives a
    /// crash).
    pub fn flushed_seq(&self) -> u64 {
        self.flushed_seq.load(Ordering::SeqCst)
    }

    /// Appends events atomically (all or none), in strictly increasing seq order after
    /// [`Store::last_seq`], each framed with its checksum. Not yet durable: call
    /// [`Store::flush`] before acknowledging.
    pub fn append(&self, events: &[Event]) -> Result<(), StoreError> {
        let mut head = self.head.lock().expect("head lock poisoned");
        let mut last = self.last_seq();
        let mut chain = head.chain;
        let mut batch = sled::Batch::default();
        for ev in events {
            if ev.seq <= last {
                return Err(StoreError::OutOfOrder { got: ev.seq, last });
            }
            last = ev.seq;
            let value = record::frame_with(|out| ev.encode_into(out));
            chain = mark::chain(chain, ev.seq, mark::record_crc(&value));
            batch.insert(&ev.seq.to_be_bytes(), value);
        }
        fail::fail_point!("store::append::before_batch");
        self.events.apply_batch(batch)?;
        fail::fail_point!("store::append::after_batch");
        *head = mark::Mark { seq: last, chain };
        self.last_seq.store(last, Ordering::SeqCst);
        Ok(())
    }

    /// Waits until everything appended before the call is on disk. Concurrent callers share
    /// one fsync (group commit): one caller runs it, covering everything appended when it
    /// starts; the callers that arrive meanwhile wait for it to finish, all woken at once, and
    /// those it did not cover elect the next one. (Queueing the callers behind a lock handed
    /// them the turn one by one, each through the async scheduler: under load, writers waited
    /// ~50x the fsync itself.)
    pub async fn flush(&self) -> Result<(), StoreError> {
        let mine = self.last_seq();
        loop {
            let done = self.flush_done.notified();
            tokio::pin!(done);
            // Registered before the checks, so a finish between them still wakes this caller.
            done.as_mut().enable();
            if self.flushed_seq.load(Ordering::SeqCst) >= mine {
                return Ok(()); // an fsync that started after our append covered it
            }
            if self
                .flushing
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                let _turn = FlushTurn(self);
                if self.flushed_seq.load(Ordering::SeqCst) >= mine {
                    return Ok(()); // the previous turn ended between the check and the exchange
                }
                return self.flush_now().await;
            }
            done.await;
        }
    }

    /// Runs one sled flush covering every event appended so far, then records them in the
    /// high-water mark ([`mark::write`]); the caller holds the turn. The mark is written only
    /// after sled's flush returns, so it never claims more than is durable in sled; a crash
    /// between the two leaves the mark behind the log, which the check at open accepts.
    async fn flush_now(&self) -> Result<(), StoreError> {
        if let Some(log) = self.remote.clone() {
            return self.commit_to_etcd(&log).await;
        }
        let target = *self.head.lock().expect("head lock poisoned");
        fail::fail_point!("store::flush::before");
        let started = std::time::Instant::now();
        self.db.flush_async().await?;
        if let Some(h) = self.fsync_seconds.get() {
            h.observe(started.elapsed().as_secs_f64());
        }
        fail::fail_point!("store::flush::after");
        // Inline: a hand-off to the blocking pool cost more than the write on a busy machine.
        mark::write(&self.dir, target).map_err(|source| StoreError::Mark {
            path: mark::path(&self.dir).display().to_string(),
            source,
        })?;
        self.flushed_seq.fetch_max(target.seq, Ordering::SeqCst);
        Ok(())
    }

    /// Events with `seq > after`, oldest first.
    pub fn read_after(&self, after: u64) -> impl Iterator<Item = Result<Event, StoreError>> + use<> {
        self.events.range((after + 1).to_be_bytes()..).map(|r| {
            let (k, v) = r?;
            decode_event(&k, &v)
        })
    }

    /// Events with `after < seq <= until`.
    pub fn read_range(
        &self,
        after: u64,
        until: u64,
    ) -> impl DoubleEndedIterator<Item = Result<Event, StoreError>> + use<> {
        use std::ops::Bound;
        // An empty range reads nothing (sled is not asked for an inverted one).
        let from = after.saturating_add(1);
        let to = if until >= from {
            Bound::Included(until.to_be_bytes())
        } else {
            Bound::Excluded(from.to_be_bytes())
        };
        self.events.range((Bound::Included(from.to_be_bytes()), to)).map(|r| {
            let (k, v) = r?;
            decode_event(&k, &v)
        })
    }

    /// The event with sequence number `seq`, if retained.
    pub fn event(&self, seq: u64) -> Result<Option<Event>, StoreError> {
        match self.events.get(seq.to_be_bytes())? {
            Some(v) => Ok(Some(decode_event(&seq.to_be_bytes(), &v)?)),
            None => Ok(None),
        }
    }

    /// The newest seq whose event was appended at or before `time_ms` (ms since the epoch),
    /// by binary search over the retained log (append times follow seq order); 0 when the log
    /// starts later. Errors: [`StoreError::Compacted`] for a time before the retained history.
    pub fn seq_at_time(&self, time_ms: i64) -> Result<u64, StoreError> {
        let (mut lo, mut hi) = (self.compacted_before.load(Ordering::SeqCst).max(1), self.last_seq());
        if hi == 0 {
            return Ok(0);
        }
        let time_of = |seq: u64| -> Result<Option<i64>, StoreError> { Ok(self.event(seq)?.map(|e| e.time_ms)) };
        if time_of(lo)?.is_none_or(|t| t > time_ms) {
            let compacted = self.compacted_before.load(Ordering::SeqCst);
            if compacted > 1 {
                // The answer lies in the compacted part: it cannot be told any more.
                return Err(StoreError::Compacted {
                    seq: 0,
                    oldest: self.oldest_readable(),
                });
            }
            return Ok(0);
        }
        // Invariant: time(lo) <= time_ms; answer in [lo, hi].
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            match time_of(mid)? {
                Some(t) if t <= time_ms => lo = mid,
                _ => hi = mid - 1,
            }
        }
        Ok(lo)
    }
}

/// A stored event: checksum, envelope, and the envelope's seq against its key.
pub(super) fn decode_event(key: &[u8], value: &[u8]) -> Result<Event, StoreError> {
    let seq = seq_of(key);
    let corrupt = |what: String| StoreError::Corrupt {
        seq,
        tree: "events",
        what,
    };
    let payload = record::unframe(value).map_err(|e| corrupt(e.to_string()))?;
    let ev = Event::decode(payload).map_err(|e| match e {
        DecodeError::TooNew { .. } => StoreError::Decode(e),
        e => corrupt(e.to_string()),
    })?;
    if ev.seq != seq {
        return Err(corrupt(format!(
            "the record stored under it says resourceVersion {}",
            ev.seq
        )));
    }
    Ok(ev)
}
