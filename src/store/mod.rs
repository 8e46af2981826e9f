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
//! ([`Store::compact`]); subscription lives in [`crate::command::Hub`]. The files follow it:
//! `log.rs` (append, flush, read a range), `index.rs` (one object's seqs), `snapshot.rs`,
//! `retention.rs`; this file holds [`Store`], opening and errors; `verify.rs` the checks.

pub mod etcd;
pub mod export;
mod index;
mod log;
pub mod mark;
pub mod record;
mod remote;
mod retention;
mod snapshot;
pub mod verify;

pub use remote::etcd_export_entries;

use index::index_key;
pub use index::INDEXED_THROUGH;
use log::decode_event;
use snapshot::decode_snapshot;

use crate::event::{DecodeError, SCHEMA_VERSION};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

/// Default snapshot interval: take a snapshot every this many events (bounds replay time at
/// start and the cost of a time-travel read). A setting: [`Store::with_snapshot_every`].
pub const SNAPSHOT_EVERY: u64 = 10_000;

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
         The server will not start on it. {}{}",
        corrupt_advice(tree),
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
    /// etcd did not answer, or answered with an error (the etcd backend, [`etcd`]).
    #[error("etcd: {0}")]
    Etcd(String),
    /// This server no longer holds the etcd writer lease: another server may write the log,
    /// and this one's writes are refused (the fence of [`etcd`]).
    #[error(
        "this server no longer holds the etcd writer lease of the event log (held by {holder}); its writes are refused"
    )]
    Fenced { holder: String },
    /// An export file that cannot be read or imported, or a store that is not empty for an
    /// import ([`export`]).
    #[error("{0}")]
    Export(String),
    /// Another writer moved the log's head in etcd: the batch was not written.
    #[error("the event log's head in etcd is at resourceVersion {found}, not {expected}: another writer appended; nothing was written")]
    HeadMoved { expected: u64, found: u64 },
}

/// The first advice of a corrupt log: sled's offline check and a backup of the data dir, or,
/// for the log in etcd, etcd's own restore ([`repair_hint`] says more).
fn corrupt_advice(tree: &str) -> &'static str {
    if tree == "etcd" {
        "Restore etcd's keyspace from a backup"
    } else {
        "Run `mco store verify --data-dir DIR` for the full report, then restore the data directory from a backup"
    }
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
    if tree == "etcd" {
        // The log lives in etcd: its repair is etcd's restore.
        return format!(
            " (the log is in etcd: restore the keyspace from an etcd snapshot, `etcdctl snapshot restore`; \
             resourceVersion {seq} and after cannot be read as stored)"
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
    /// Where the log is durable when it is not this directory: the etcd backend. The sled
    /// trees are then this replica's copy of the log, its index and its snapshots, rebuilt
    /// from etcd at open ([`Store::open_etcd`]); a flush is an etcd commit, not an fsync.
    remote: Option<Arc<etcd::EtcdLog>>,
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
            remote: None,
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

fn seq_of(key: &[u8]) -> u64 {
    u64::from_be_bytes(key.try_into().unwrap_or([0; 8]))
}

#[cfg(test)]
mod tests {
    use super::log::FlushTurn;
    use super::*;
    use crate::event::Event;
    use crate::event::EventType;
    use crate::state::State;
    use std::sync::atomic::Ordering;

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
