//! The event log on sled: append, read, per-object index, snapshots, retention, schema version.
//!
//! Owns the on-disk layout (trees `events`, `index`, `snapshots`, `meta`), durability (group
//! commit: one `flush_async` covers every append made before it started), rebuilding state
//! (newest snapshot + replay), one object's history through the index, and compaction. It must
//! not validate or interpret events beyond decoding.
//!
//! Layout (schema 3, `migrations/0003-checksums.md`; schema 2 in `0002-object-index.md`,
//! schema 1 in `0001-initial.md`):
//! - `events`: key = seq as 8 bytes big-endian, value = [`record::frame`] of [`Event::encode`]
//!   (a CRC-32 over the envelope);
//! - `index`: key = `<kind>\0<name>\0<seq big-endian>`, empty value: the seqs of one object's
//!   events, so its history costs what it has, not the whole log. Derived from `events`: the
//!   key [`INDEXED_THROUGH`] records how far; opening the store and every index read index the
//!   rest (appends stay one batch in one tree);
//! - `snapshots`: key = seq big-endian, value = [`record::frame`] of the JSON of [`State`] as of
//!   that seq;
//! - `meta`: `schema_version` = u32 big-endian; `compacted_before` = u64 big-endian, the first
//!   seq still in `events` after a compaction (absent: nothing was ever compacted).
//!
//! Integrity: opening the store upgrades an older schema ([`Store::open`]), then checks every
//! event's checksum, envelope and seq continuity and refuses a damaged log with
//! [`StoreError::Corrupt`] naming the first bad resourceVersion; every later read checks the
//! records it decodes; [`Store::verify`] (`mco store verify`) checks everything offline.
//! Failpoints (`fail` crate, `failpoints` feature) mark each crash-sensitive step:
//! `store::append::{before,after}_batch`, `store::flush::{before,after}`,
//! `store::snapshot::{before,after}`, `store::compact::{after_snapshot,after_events}`,
//! `store::index::before_batch`, `store::migrate::{batch,before_version}`.
//!
//! The narrow interface a second backend (etcd) must offer is: [`Store::append`] (a batch
//! after an expected last seq), [`Store::flush`], [`Store::read_range`], [`Store::object_seqs`],
//! snapshots ([`Store::write_snapshot`], [`Store::state_at`]) and retention
//! ([`Store::compact`]); subscription lives in [`crate::command::Hub`].

pub mod mark;
pub mod record;
pub mod verify;

use crate::event::{DecodeError, Event, SCHEMA_VERSION};
use crate::state::State;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Default snapshot interval: take a snapshot every this many events (bounds replay time at
/// start and the cost of a time-travel read). A setting: [`Store::with_snapshot_every`].
pub const SNAPSHOT_EVERY: u64 = 10_000;

/// The turn of the one caller running an fsync ([`Store::flush`]): released, and every
/// waiting caller woken, when that caller finishes, fails or is cancelled.
struct FlushTurn<'a>(&'a Store);

impl Drop for FlushTurn<'_> {
    fn drop(&mut self) {
        self.0.flushing.store(false, Ordering::SeqCst);
        self.0.flush_done.notify_waiters();
    }
}

/// Key of the `index` tree recording the last seq indexed (u64 big-endian). Sorts after every
/// index entry (a kind never starts with 0xff).
pub const INDEXED_THROUGH: &[u8] = b"\xffindexed_through";

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("event store: {0}")]
    Sled(#[from] sled::Error),
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("snapshot at {seq} does not decode: {source}")]
    Snapshot { seq: u64, source: serde_json::Error },
    #[error("store schema {found} is newer than this build's {SCHEMA_VERSION}; upgrade mco")]
    SchemaTooNew { found: u32 },
    #[error("append out of order: event {got} after {last}")]
    OutOfOrder { got: u64, last: u64 },
    /// A damaged or missing record: the log cannot be trusted from `seq` on, and the store
    /// refuses to serve it rather than replay it. `tree` is `events` or `snapshots`.
    #[error(
        "the event log is corrupt at resourceVersion {seq} ({tree}: {what}); the records before it are intact. \
         The server will not start on it. Run `mco store verify --data-dir DIR` for the full report, then restore \
         the data directory from a backup{}",
        repair_hint(tree, *seq, what)
    )]
    Corrupt { seq: u64, tree: &'static str, what: String },
    /// `mco store verify` on a directory without a store.
    #[error("no event log in {0}")]
    NoStore(String),
    /// `mco store verify` on a store written before checksums (schema 1 or 2).
    #[error("the store has schema {found}, from before record checksums (migrations/0003-checksums.md): start `mco server` on it once to upgrade it, then verify")]
    NoChecksums { found: u32 },
    /// The high-water mark could not be read or written (an I/O error, not a damaged mark:
    /// that is [`StoreError::Corrupt`]).
    #[error("the store's high-water mark {path}: {source}")]
    Mark { path: String, source: std::io::Error },
    /// sled cannot open or read the store where no single record can be named (its recovery
    /// reads every blob and its `conf`): a damaged `db`, `conf` or `blobs/` file. `acknowledged`
    /// is what the high-water mark records (the range of resourceVersions at risk).
    #[error(
        "sled cannot read the event log ({what}): a damaged db, conf, snap.* or blobs/ file; no resourceVersion can be proven{}. \
         The server will not start on it. Run `mco store verify --data-dir DIR` for the report, then restore the data \
         directory from a backup",
        match acknowledged {
            Some(m) => format!(" (the high-water mark records resourceVersions up to {m} as acknowledged: all of them are at risk)"),
            None => String::new(),
        }
    )]
    Unreadable { what: String, acknowledged: Option<u64> },
    /// A read before the oldest retained history (Kubernetes answers 410 Expired).
    #[error("resourceVersion {seq} is older than the retained history (compacted before {oldest})")]
    Compacted { seq: u64, oldest: u64 },
}

/// What can be done about corruption besides restoring a backup.
fn repair_hint(tree: &str, seq: u64, what: &str) -> String {
    if what.starts_with(SLED_CANNOT_READ) {
        // Truncating would have to read (and rewrite) the very pages sled cannot read: it
        // fails there, so the backup is the only repair offered.
        return format!(
            " (`mco store truncate` cannot help here: removing the records from resourceVersion {seq} on needs the \
             pages sled cannot read; keep a copy of the damaged directory for analysis)"
        );
    }
    if tree == "mark" {
        // Nothing in the log is damaged; only its completeness is unproven.
        return format!(
            ", or, if nothing was written after resourceVersion {} (or its loss is accepted), keep the log as it is \
             with `mco store truncate --data-dir DIR --after {}` (removes nothing, records a new mark)",
            seq.saturating_sub(1),
            seq.saturating_sub(1)
        );
    }
    if tree == "snapshots" {
        // A snapshot is derived from the events before it.
        format!(
            ", or remove the damaged snapshot with `mco store verify --data-dir DIR --drop-snapshot {seq}` \
             (snapshots are derived from the events; a snapshot the retained events cannot rebuild is refused)"
        )
    } else {
        format!(
            ", or keep the history up to resourceVersion {} with `mco store truncate --data-dir DIR --after {}` \
             (every write after it is lost)",
            seq.saturating_sub(1),
            seq.saturating_sub(1)
        )
    }
}

/// What `mco store stats` reports.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreStats {
    /// Events retained in the log.
    pub events: u64,
    /// Snapshots retained.
    pub snapshots: u64,
    /// sled's estimate of the bytes on disk.
    pub bytes_on_disk: u64,
    /// Bytes of the retained events' JSON bodies.
    pub body_bytes: u64,
    /// The oldest resourceVersion a time-travel read can still answer (0: the whole history).
    pub oldest_resource_version: u64,
    /// The newest resourceVersion.
    pub newest_resource_version: u64,
    /// Retained events per object kind.
    pub events_per_kind: std::collections::BTreeMap<String, u64>,
    /// The snapshot interval, in events.
    pub snapshot_every: u64,
}

/// What a compaction did.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionReport {
    /// Events removed.
    pub events_removed: u64,
    /// Snapshots removed.
    pub snapshots_removed: u64,
    /// The oldest resourceVersion still readable after it (the snapshot at the cut).
    pub oldest_resource_version: u64,
}

/// The append-only event log. Cheap to clone; one process per data directory (sled's lock).
#[derive(Clone)]
pub struct Store {
    db: sled::Db,
    events: sled::Tree,
    index: sled::Tree,
    snapshots: sled::Tree,
    meta: sled::Tree,
    snapshot_every: u64,
    /// The first seq still in `events` (0: never compacted).
    compacted_before: Arc<AtomicU64>,
    /// Every event up to this seq is in `index` ([`INDEXED_THROUGH`], cached).
    indexed_through: Arc<AtomicU64>,
    /// Held by the one caller indexing the tail of the log.
    index_lock: Arc<std::sync::Mutex<()>>,
    last_seq: Arc<AtomicU64>,
    /// Highest seq known to be on disk.
    flushed_seq: Arc<AtomicU64>,
    /// Set while one caller runs the fsync; the others wait for it to finish (group commit).
    flushing: Arc<AtomicBool>,
    /// Wakes every waiting caller at once when an fsync finishes or its caller gives up.
    flush_done: Arc<tokio::sync::Notify>,
    /// Where the duration of each sled flush (the fsync the queued callers share) is recorded,
    /// once set ([`Store::record_fsyncs`]).
    fsync_seconds: Arc<std::sync::OnceLock<prometheus_client::metrics::histogram::Histogram>>,
    /// The store's directory, where the high-water mark lives ([`mark`]).
    dir: Arc<PathBuf>,
    /// The newest appended seq and the chain of the log up to it ([`mark::chain`]); held for the
    /// whole of an append, so appends are one at a time and the two always agree.
    head: Arc<std::sync::Mutex<mark::Mark>>,
    /// The chain of the events before `compacted_before` (`meta.chain_before`; 0: none).
    chain_before: Arc<std::sync::atomic::AtomicU32>,
    /// The mark as the store directory held it when opened, or as this store last wrote it.
    mark_at_open: Arc<std::sync::RwLock<mark::MarkFile>>,
}

impl Store {
    /// Opens (or creates) the store in `dir`: records the schema version, upgrades an older
    /// store (0002: the object index; 0003: a checksum on every record; 0004: the high-water
    /// mark), then checks every event and the log against the high-water mark
    /// ([`Store::check_events`]) before anything is replayed, and records the mark of what it
    /// found. Errors: [`StoreError::Corrupt`] naming the first bad or missing resourceVersion and
    /// what to do (acknowledged events missing from the log among them),
    /// [`StoreError::SchemaTooNew`], [`StoreError::Mark`], sled's own (a data dir in use among
    /// them).
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        sled::Config::new()
            .path(dir)
            .open()
            .map_err(StoreError::from)
            .and_then(|db| Store::from_db(db, dir))
            .map_err(unreadable(dir))
    }

    /// A store in a temporary directory removed on drop (tests, benchmarks; sled puts it in
    /// `/dev/shm` when there is one), its high-water mark in it.
    pub fn temporary() -> Result<Store, StoreError> {
        let config = sled::Config::new().temporary(true);
        let dir = config.get_path();
        let db = config.open()?;
        Store::from_db(db, &dir)
    }

    /// Opens the store in `dir` for `mco store verify` and its repairs: no upgrade, no check, no
    /// indexing, nothing written. Errors: sled's own, a schema newer than this build, or a
    /// store older than schema 3 (its records carry no checksums yet: a server upgrades it).
    pub fn open_for_repair(dir: &Path) -> Result<Store, StoreError> {
        if !dir.join("db").exists() {
            return Err(StoreError::NoStore(dir.display().to_string()));
        }
        let (store, found) = sled::Config::new()
            .path(dir)
            .open()
            .map_err(StoreError::from)
            .and_then(|db| Store::assemble(db, dir))
            .map_err(unreadable(dir))?;
        match found {
            Some(3..=SCHEMA_VERSION) => Ok(store),
            None if store.events.is_empty() => Ok(store),
            found => Err(StoreError::NoChecksums {
                found: found.unwrap_or(1),
            }),
        }
    }

    /// The store's trees and counters, its mark file as found, and its recorded schema version.
    fn assemble(db: sled::Db, dir: &Path) -> Result<(Store, Option<u32>), StoreError> {
        let meta = db.open_tree("meta")?;
        let found = meta
            .get("schema_version")?
            .map(|v| u32::from_be_bytes(v.as_ref().try_into().unwrap_or([0xff; 4])));
        if let Some(found) = found.filter(|f| *f > SCHEMA_VERSION) {
            return Err(StoreError::SchemaTooNew { found });
        }
        let events = db.open_tree("events")?;
        let index = db.open_tree("index")?;
        let snapshots = db.open_tree("snapshots")?;
        let last = match events.last() {
            Ok(last) => last.map(|(k, _)| seq_of(&k)).unwrap_or(0),
            // The newest record is unreadable (a damaged blob file): the log ends, as far as it
            // can be read, at the last record before the first unreadable one. The check at
            // open reports the rest.
            Err(_) => events
                .iter()
                .map_while(Result::ok)
                .last()
                .map(|(k, _)| seq_of(&k))
                .unwrap_or(0),
        };
        let compacted_before = meta.get("compacted_before")?.map(|v| seq_of(&v)).unwrap_or(0);
        // A log compacted to nothing still ends where it ended.
        let last = last.max(compacted_before.saturating_sub(1));
        let chain_before = meta
            .get("chain_before")?
            .map(|v| u32::from_be_bytes(v.as_ref().try_into().unwrap_or([0; 4])))
            .unwrap_or(0);
        let mark_at_open = mark::read(dir).map_err(|source| StoreError::Mark {
            path: mark::path(dir).display().to_string(),
            source,
        })?;
        let store = Store {
            db,
            events,
            index,
            snapshots,
            meta,
            snapshot_every: SNAPSHOT_EVERY,
            compacted_before: Arc::new(AtomicU64::new(compacted_before)),
            indexed_through: Arc::new(AtomicU64::new(0)),
            index_lock: Arc::new(std::sync::Mutex::new(())),
            last_seq: Arc::new(AtomicU64::new(last)),
            flushed_seq: Arc::new(AtomicU64::new(last)),
            flushing: Arc::default(),
            flush_done: Arc::default(),
            fsync_seconds: Arc::default(),
            dir: Arc::new(dir.to_path_buf()),
            head: Arc::default(),
            chain_before: Arc::new(std::sync::atomic::AtomicU32::new(chain_before)),
            mark_at_open: Arc::new(std::sync::RwLock::new(mark_at_open)),
        };
        Ok((store, found))
    }

    fn from_db(db: sled::Db, dir: &Path) -> Result<Store, StoreError> {
        let (store, found) = Store::assemble(db, dir)?;
        // Schema 1/2 -> 3 (migrations/0003-checksums.md): frame every record with its checksum.
        if found.is_some_and(|f| f < 3) || (found.is_none() && !store.events.is_empty()) {
            store.upgrade_to_checksums()?;
        }
        // Nothing is replayed or served before every event has passed its checksum and the log
        // holds every event the high-water mark says was acknowledged.
        let check = store.check_events(true)?;
        let problem = check
            .problems
            .into_iter()
            .next()
            .or(store.mark_problem(found, &check.mark));
        if let Some(problem) = problem {
            return Err(problem.into_error());
        }
        // Schema 3 -> 4 (migrations/0004-high-water-mark.md): the mark of what the log holds,
        // written before the schema that requires it. Every open records the log it checked
        // (the mark may lag the log after a crash between sled's flush and the mark's write).
        let head = mark::Mark {
            seq: check.last.max(store.last_seq()),
            chain: check.mark.chain_at_last,
        };
        *store.head.lock().expect("head lock poisoned") = head;
        if store.recorded_mark() != mark::MarkFile::Present(head) {
            store.write_mark(head)?;
        }
        if found != Some(SCHEMA_VERSION) {
            store.meta.insert("schema_version", &SCHEMA_VERSION.to_be_bytes())?;
            store.db.flush()?;
        }
        // Schema 1 -> 2 (migrations/0002-object-index.md): the index is derived, so upgrading is
        // indexing every event; a store whose index lags (a crash between the two batches)
        // catches up the same way.
        store.index_missing()?;
        Ok(store)
    }

    /// Replaces the high-water mark ([`mark::write`]), outside the flush path (open, repairs).
    fn write_mark(&self, m: mark::Mark) -> Result<(), StoreError> {
        mark::write(&self.dir, m).map_err(|source| StoreError::Mark {
            path: mark::path(&self.dir).display().to_string(),
            source,
        })?;
        *self.mark_at_open.write().expect("mark lock poisoned") = mark::MarkFile::Present(m);
        Ok(())
    }

    /// The mark as opened, or as last written outside the flush path.
    fn recorded_mark(&self) -> mark::MarkFile {
        self.mark_at_open.read().expect("mark lock poisoned").clone()
    }

    /// The same store taking a snapshot every `every` events (at least 1).
    pub fn with_snapshot_every(mut self, every: u64) -> Store {
        self.snapshot_every = every.max(1);
        self
    }

    /// The snapshot interval, in events.
    pub fn snapshot_every(&self) -> u64 {
        self.snapshot_every
    }

    /// Indexes the events after [`INDEXED_THROUGH`]. Appends do not touch the index (a
    /// second tree in every append halved the durable append rate); the index catches up here,
    /// before every index read and at open, at the cost of the events appended since.
    fn index_missing(&self) -> Result<(), StoreError> {
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

    /// Records a snapshot of `state` (as of `state.seq`), framed with its checksum.
    pub fn write_snapshot(&self, state: &State) -> Result<(), StoreError> {
        let json = serde_json::to_vec(state).expect("state serializes");
        fail::fail_point!("store::snapshot::before");
        self.snapshots.insert(state.seq.to_be_bytes(), record::frame(&json))?;
        fail::fail_point!("store::snapshot::after");
        Ok(())
    }

    /// The newest snapshot at or before `seq`, or an empty state.
    fn snapshot_at_or_before(&self, seq: u64) -> Result<State, StoreError> {
        match self.snapshots.range(..=seq.to_be_bytes()).next_back() {
            None => Ok(State::default()),
            Some(r) => {
                let (k, v) = r.map_err(|e| sled_read_error(e, "snapshots", seq))?;
                decode_snapshot(&k, &v)
            }
        }
    }

    /// Rebuilds the current state: newest snapshot, then replay of the events after it.
    pub fn load_state(&self) -> Result<State, StoreError> {
        self.state_at(u64::MAX)
    }

    /// The oldest seq a time-travel read can answer: 0 when nothing was compacted, else the
    /// snapshot left at the cut.
    pub fn oldest_readable(&self) -> u64 {
        self.compacted_before.load(Ordering::SeqCst).saturating_sub(1)
    }

    /// The state as of log sequence number `seq` (time travel): nearest snapshot at or before
    /// it, then replay up to and including `seq`. The cost is one snapshot plus at most the
    /// snapshot interval of events, whatever the log's length.
    ///
    /// Errors: [`StoreError::Compacted`] for a seq before [`Store::oldest_readable`].
    pub fn state_at(&self, seq: u64) -> Result<State, StoreError> {
        let oldest = self.oldest_readable();
        if seq < oldest {
            return Err(StoreError::Compacted { seq, oldest });
        }
        let mut state = self.snapshot_at_or_before(seq)?;
        for ev in self.read_range(state.seq, seq) {
            state.apply(&ev?);
        }
        Ok(state)
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

    /// Counts for `mco store stats` (a scan of the retained log).
    pub fn stats(&self) -> Result<StoreStats, StoreError> {
        let mut stats = StoreStats {
            snapshots: self.snapshots.len() as u64,
            bytes_on_disk: self.size_on_disk(),
            oldest_resource_version: self.oldest_readable(),
            newest_resource_version: self.last_seq(),
            snapshot_every: self.snapshot_every,
            ..Default::default()
        };
        for r in self.events.iter() {
            let (k, v) = r?;
            let ev = decode_event(&k, &v)?;
            stats.events += 1;
            stats.body_bytes += ev.body.len() as u64;
            *stats.events_per_kind.entry(ev.object_kind).or_default() += 1;
        }
        Ok(stats)
    }

    /// Bytes used on disk (sled's estimate).
    pub fn size_on_disk(&self) -> u64 {
        self.db.size_on_disk().unwrap_or(0)
    }
}

/// A sled error reading the records of `tree` from `seq` on: sled's own checksum failing (a
/// damaged blob file answers "Read corrupted data at file offset None") is
/// [`StoreError::Corrupt`] at `seq`, naming it and the repair; any other error is sled's.
/// How [`sled_read_error`]'s description begins ([`repair_hint`] tells that damage by it).
const SLED_CANNOT_READ: &str = "sled cannot read the record";

fn sled_read_error(e: sled::Error, tree: &'static str, seq: u64) -> StoreError {
    match e {
        sled::Error::Corruption { .. } => StoreError::Corrupt {
            seq,
            tree,
            what: format!(
                "{SLED_CANNOT_READ} at or after resourceVersion {seq}: its own checksum fails (a damaged file, \
                 often one of blobs/, where sled keeps large values: {})",
                e.to_string().split(" backtrace").next().unwrap_or_default()
            ),
        },
        e => StoreError::Sled(e),
    }
}

/// sled's checksum failing, or its `conf` unreadable, anywhere else than in a record the store
/// can name: [`StoreError::Unreadable`], with the range the mark of `dir` says is at risk; any
/// other error unchanged.
fn unreadable(dir: &Path) -> impl Fn(StoreError) -> StoreError + '_ {
    move |e| match e {
        StoreError::Sled(
            e @ (sled::Error::Corruption { .. } | sled::Error::Unsupported(_) | sled::Error::ReportableBug(_)),
        ) => StoreError::Unreadable {
            what: e.to_string().split(" backtrace").next().unwrap_or_default().to_string(),
            acknowledged: match mark::read(dir) {
                Ok(mark::MarkFile::Present(m)) => Some(m.seq),
                _ => None,
            },
        },
        e => e,
    }
}

/// `<kind>\0<name>\0<seq big-endian>`: an object's index entries sort by seq.
fn index_key(kind: &str, name: &str, seq: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(kind.len() + name.len() + 10);
    k.extend_from_slice(kind.as_bytes());
    k.push(0);
    k.extend_from_slice(name.as_bytes());
    k.push(0);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

/// A stored event: checksum, envelope, and the envelope's seq against its key.
fn decode_event(key: &[u8], value: &[u8]) -> Result<Event, StoreError> {
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

/// A stored snapshot: checksum, JSON, and its seq against its key.
fn decode_snapshot(key: &[u8], value: &[u8]) -> Result<State, StoreError> {
    let seq = seq_of(key);
    let corrupt = |what: String| StoreError::Corrupt {
        seq,
        tree: "snapshots",
        what,
    };
    let payload = record::unframe(value).map_err(|e| corrupt(e.to_string()))?;
    let mut state: State = serde_json::from_slice(payload).map_err(|source| StoreError::Snapshot { seq, source })?;
    state.reindex();
    if state.seq != seq {
        return Err(corrupt(format!(
            "the snapshot stored under it is of resourceVersion {}",
            state.seq
        )));
    }
    Ok(state)
}

fn seq_of(key: &[u8]) -> u64 {
    u64::from_be_bytes(key.try_into().unwrap_or([0; 8]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventType;

    fn ev(seq: u64, t: EventType, kind: &str, name: &str, body: serde_json::Value) -> Event {
        Event {
            id: *uuid::Uuid::now_v7().as_bytes(),
            ..Event::for_test(seq, t, kind, name, &body)
        }
    }

    fn pool(name: &str, rv: u64) -> serde_json::Value {
        serde_json::json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
            "metadata": {"name": name, "resourceVersion": rv.to_string()}, "spec": {"paused": rv.is_multiple_of(2)}})
    }

    fn numbered(seq: u64) -> Event {
        ev(seq, EventType::PoolUpdated, "MachineConfigPool", "p", pool("p", seq))
    }

    /// Concurrent writers share fsyncs: each one's flush returns only once its events are on
    /// disk, and every append+flush pair is covered by fewer sled flushes than writers.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_flushes_share_fsyncs_and_cover_every_append() {
        let store = Store::temporary().unwrap();
        let metrics = crate::metrics::Metrics::new();
        store.record_fsyncs(metrics.fsync_seconds.clone());
        let appends = Arc::new(std::sync::Mutex::new(0u64));
        let mut writers = Vec::new();
        for _ in 0..64 {
            let (store, appends) = (store.clone(), appends.clone());
            writers.push(tokio::spawn(async move {
                let seq = {
                    let mut last = appends.lock().unwrap();
                    *last += 1;
                    store.append(&[numbered(*last)]).unwrap();
                    *last
                };
                store.flush().await.unwrap();
                assert!(store.flushed_seq() >= seq, "flush returned before {seq} was durable");
            }));
        }
        for w in writers {
            w.await.unwrap();
        }
        assert_eq!(store.flushed_seq(), 64);
        let text = metrics.encode(&State::default(), &crate::model::Keys::default());
        let count: u64 = text
            .lines()
            .find_map(|l| l.strip_prefix("mco_store_fsync_duration_seconds_count "))
            .expect("the fsync histogram is exported")
            .parse()
            .unwrap();
        assert!((1..64).contains(&count), "{count} fsyncs for 64 writers");
    }

    /// A caller holding the fsync turn that goes away (its request cancelled mid-flush) wakes
    /// the waiting callers, and one of them flushes: nobody is stranded behind it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_flusher_does_not_strand_the_waiters() {
        let store = Store::temporary().unwrap();
        store.flushing.store(true, Ordering::SeqCst);
        let turn = FlushTurn(&store);
        store.append(&[numbered(1)]).unwrap();
        let mut waiter = tokio::spawn({
            let store = store.clone();
            async move { store.flush().await }
        });
        let early = tokio::time::timeout(std::time::Duration::from_millis(100), &mut waiter).await;
        assert!(early.is_err(), "the waiter returned while another caller held the turn");
        assert_eq!(store.flushed_seq(), 0);
        drop(turn);
        tokio::time::timeout(std::time::Duration::from_secs(10), waiter)
            .await
            .expect("the waiter is woken when the turn is released")
            .unwrap()
            .unwrap();
        assert_eq!(store.flushed_seq(), 1);
    }

    /// The cost of durability on a real disk (the bench runs in `/dev/shm`, where an fsync is
    /// free): batches of 100 events appended and flushed by the store (sled's flush, then the
    /// high-water mark) against raw sled `apply_batch` + `flush` of the same bytes, in
    /// directories under `MCO_DISK_BENCH_DIR` (default the system's temporary directory).
    /// Prints both medians. `cargo test --features failpoints --lib durable_append_on_disk --
    /// --ignored --nocapture`.
    #[tokio::test]
    #[ignore = "a measurement, not a check"]
    async fn durable_append_on_disk_against_raw_sled() {
        let base = std::env::var("MCO_DISK_BENCH_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|_| std::env::temp_dir());
        let (a, b) = (
            tempfile::tempdir_in(&base).unwrap(),
            tempfile::tempdir_in(&base).unwrap(),
        );
        let store = Store::open(a.path()).unwrap();
        let db = sled::Config::new().path(b.path()).open().unwrap();
        let tree = db.open_tree("events").unwrap();
        let (mut mco, mut raw) = (Vec::new(), Vec::new());
        for round in 0..200u64 {
            let evs: Vec<Event> = (1..=100).map(|i| numbered(round * 100 + i)).collect();
            let t = std::time::Instant::now();
            store.append(&evs).unwrap();
            store.flush().await.unwrap();
            mco.push(t.elapsed());
            let t = std::time::Instant::now();
            let mut batch = sled::Batch::default();
            for e in &evs {
                batch.insert(&e.seq.to_be_bytes(), record::frame_with(|out| e.encode_into(out)));
            }
            tree.apply_batch(batch).unwrap();
            db.flush().unwrap();
            raw.push(t.elapsed());
        }
        mco.sort();
        raw.sort();
        println!(
            "on disk ({}): mco append+flush+mark median {:?}, raw sled apply_batch+flush median {:?}, ratio {:.2}",
            base.display(),
            mco[100],
            raw[100],
            raw[100].as_secs_f64() / mco[100].as_secs_f64()
        );
    }

    #[tokio::test]
    async fn replay_and_time_travel_across_snapshots() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            let mut state = State::default();
            for seq in 1..=30u64 {
                let e = ev(
                    seq,
                    if seq == 1 {
                        EventType::PoolCreated
                    } else {
                        EventType::PoolUpdated
                    },
                    "MachineConfigPool",
                    "p",
                    pool("p", seq),
                );
                store.append(std::slice::from_ref(&e)).unwrap();
                state.apply(&e);
                if seq == 10 {
                    store.write_snapshot(&state).unwrap();
                }
            }
            let del = ev(31, EventType::PoolDeleted, "MachineConfigPool", "p", pool("p", 30));
            store.append(&[del]).unwrap();
            store.flush().await.unwrap();
            assert!(store
                .append(&[ev(31, EventType::PoolCreated, "MachineConfigPool", "q", pool("q", 31))])
                .is_err());
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.last_seq(), 31);
        let now = store.load_state().unwrap();
        assert_eq!(now.seq, 31);
        assert!(now.pools.is_empty());
        for at in [5u64, 10, 11, 30] {
            let s = store.state_at(at).unwrap();
            assert_eq!(s.seq, at);
            assert_eq!(
                s.pools["p"].metadata.resource_version.as_deref(),
                Some(at.to_string().as_str())
            );
        }
    }

    fn at(seq: u64, time_ms: i64, name: &str) -> Event {
        let mut e = ev(seq, EventType::PoolUpdated, "MachineConfigPool", name, pool(name, seq));
        e.time_ms = time_ms;
        e
    }

    #[tokio::test]
    async fn one_objects_history_comes_from_the_index() {
        let store = Store::temporary().unwrap();
        let evs: Vec<Event> = (1..=30u64)
            .map(|s| at(s, s as i64, if s % 3 == 0 { "a" } else { "b" }))
            .collect();
        store.append(&evs).unwrap();
        store.flush().await.unwrap();
        assert_eq!(
            store.object_seqs("MachineConfigPool", "a", 0, 30).unwrap(),
            vec![3, 6, 9, 12, 15, 18, 21, 24, 27, 30]
        );
        assert_eq!(
            store.object_seqs("MachineConfigPool", "a", 6, 15).unwrap(),
            vec![9, 12, 15]
        );
        assert!(store.object_seqs("MachineConfigPool", "c", 0, 30).unwrap().is_empty());
        // "a" is not a prefix match for "ab"
        store.append(&[at(31, 31, "ab")]).unwrap();
        assert_eq!(store.object_seqs("MachineConfigPool", "a", 27, 31).unwrap(), vec![30]);
        assert!(store.object_seqs("Node", "a", 0, 31).unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_schema_1_store_is_indexed_when_opened() {
        let dir = tempfile::tempdir().unwrap();
        {
            // What a schema-1 build wrote: events and meta, no index tree.
            let db = sled::Config::new().path(dir.path()).open().unwrap();
            db.open_tree("meta")
                .unwrap()
                .insert("schema_version", &1u32.to_be_bytes())
                .unwrap();
            let events = db.open_tree("events").unwrap();
            for s in 1..=5u64 {
                let mut e = at(s, s as i64, "p");
                e.schema = 1;
                events.insert(s.to_be_bytes(), e.encode()).unwrap();
            }
            db.flush().unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(
            store.object_seqs("MachineConfigPool", "p", 0, 5).unwrap(),
            vec![1, 2, 3, 4, 5]
        );
        assert_eq!(
            store.load_state().unwrap().pools["p"]
                .metadata
                .resource_version
                .as_deref(),
            Some("5")
        );
        let meta = store.meta.get("schema_version").unwrap().unwrap();
        assert_eq!(u32::from_be_bytes(meta.as_ref().try_into().unwrap()), SCHEMA_VERSION);
    }

    #[tokio::test]
    async fn times_map_to_sequence_numbers() {
        let store = Store::temporary().unwrap();
        let evs: Vec<Event> = (1..=20u64).map(|s| at(s, 1000 + 10 * s as i64, "p")).collect();
        store.append(&evs).unwrap();
        assert_eq!(store.seq_at_time(0).unwrap(), 0, "before the log");
        assert_eq!(store.seq_at_time(1010).unwrap(), 1);
        assert_eq!(store.seq_at_time(1015).unwrap(), 1);
        assert_eq!(store.seq_at_time(1100).unwrap(), 10);
        assert_eq!(store.seq_at_time(9999).unwrap(), 20);
    }

    #[tokio::test]
    async fn compaction_keeps_reads_from_the_cut_and_refuses_older_ones() {
        let store = Store::temporary().unwrap().with_snapshot_every(5);
        let mut state = State::default();
        for s in 1..=40u64 {
            let e = at(s, s as i64, if s % 2 == 0 { "even" } else { "odd" });
            store.append(std::slice::from_ref(&e)).unwrap();
            state.apply(&e);
            if s % 5 == 0 {
                store.write_snapshot(&state).unwrap();
            }
        }
        let before_25 = store.state_at(25).unwrap();
        let report = store.compact(26).unwrap();
        assert_eq!(report.events_removed, 25);
        assert_eq!(report.oldest_resource_version, 25);
        assert_eq!(store.oldest_readable(), 25);
        assert_eq!(store.state_at(25).unwrap(), before_25);
        assert_eq!(store.load_state().unwrap(), state);
        assert!(matches!(
            store.state_at(24),
            Err(StoreError::Compacted { seq: 24, oldest: 25 })
        ));
        assert_eq!(
            store.object_seqs("MachineConfigPool", "even", 0, 40).unwrap(),
            vec![26, 28, 30, 32, 34, 36, 38, 40]
        );
        assert!(
            matches!(store.seq_at_time(3), Err(StoreError::Compacted { .. })),
            "before the cut"
        );
        assert_eq!(store.seq_at_time(30).unwrap(), 30);
        let stats = store.stats().unwrap();
        assert_eq!(
            (
                stats.events,
                stats.oldest_resource_version,
                stats.newest_resource_version
            ),
            (15, 25, 40)
        );
        assert_eq!(stats.events_per_kind["MachineConfigPool"], 15);
        // Compacting again before the same cut does nothing.
        assert_eq!(store.compact(20).unwrap().events_removed, 0);
    }
}
