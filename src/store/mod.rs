//! The event log on sled: append, read, snapshot, schema version.
//!
//! Owns the on-disk layout (trees `events`, `snapshots`, `meta`), durability (group commit:
//! one `flush_async` covers every append made before it started) and rebuilding
//! state (newest snapshot + replay). It must not validate or interpret events beyond decoding.
//!
//! Layout (schema 1, `migrations/0001-initial.md`):
//! - `events`: key = seq as 8 bytes big-endian, value = [`Event::encode`];
//! - `snapshots`: key = seq big-endian, value = JSON of [`State`] as of that seq;
//! - `meta`: `schema_version` = u32 big-endian.

use crate::event::{DecodeError, Event, SCHEMA_VERSION};
use crate::state::State;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Take a snapshot every this many events (bounds replay time at start).
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
}

/// The append-only event log. Cheap to clone; one process per data directory (sled's lock).
#[derive(Clone)]
pub struct Store {
    db: sled::Db,
    events: sled::Tree,
    snapshots: sled::Tree,
    last_seq: Arc<AtomicU64>,
    /// Highest seq known to be on disk.
    flushed_seq: Arc<AtomicU64>,
    /// Held by the one caller running an fsync; the others queue behind it (group commit).
    flush_lock: Arc<tokio::sync::Mutex<()>>,
}

impl Store {
    /// Opens (or creates) the store in `dir`, checking and recording the schema version.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        let db = sled::Config::new().path(dir).open()?;
        Store::from_db(db)
    }

    /// A store in a temporary directory removed on drop (tests, benchmarks).
    pub fn temporary() -> Result<Store, StoreError> {
        Store::from_db(sled::Config::new().temporary(true).open()?)
    }

    fn from_db(db: sled::Db) -> Result<Store, StoreError> {
        let meta = db.open_tree("meta")?;
        match meta.get("schema_version")? {
            None => {
                meta.insert("schema_version", &SCHEMA_VERSION.to_be_bytes())?;
            }
            Some(v) => {
                let found = u32::from_be_bytes(v.as_ref().try_into().unwrap_or([0xff; 4]));
                if found > SCHEMA_VERSION {
                    return Err(StoreError::SchemaTooNew { found });
                }
                // Older schemas would be upgraded here, one numbered migration at a time.
            }
        }
        let events = db.open_tree("events")?;
        let snapshots = db.open_tree("snapshots")?;
        let last = events.last()?.map(|(k, _)| seq_of(&k)).unwrap_or(0);
        Ok(Store {
            db,
            events,
            snapshots,
            last_seq: Arc::new(AtomicU64::new(last)),
            flushed_seq: Arc::new(AtomicU64::new(last)),
            flush_lock: Arc::new(tokio::sync::Mutex::new(())),
        })
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
    /// [`Store::last_seq`]. Not yet durable: call [`Store::flush`] before acknowledging.
    pub fn append(&self, events: &[Event]) -> Result<(), StoreError> {
        let mut last = self.last_seq();
        let mut batch = sled::Batch::default();
        for ev in events {
            if ev.seq <= last {
                return Err(StoreError::OutOfOrder { got: ev.seq, last });
            }
            last = ev.seq;
            batch.insert(&ev.seq.to_be_bytes(), ev.encode());
        }
        self.events.apply_batch(batch)?;
        self.last_seq.store(last, Ordering::SeqCst);
        Ok(())
    }

    /// Waits until everything appended before the call is on disk. Concurrent callers share
    /// one fsync (group commit).
    pub async fn flush(&self) -> Result<(), StoreError> {
        let mine = self.last_seq();
        let _turn = self.flush_lock.lock().await;
        if self.flushed_seq.load(Ordering::SeqCst) >= mine {
            return Ok(()); // an fsync that started after our append already covered it
        }
        let target = self.last_seq();
        self.db.flush_async().await?;
        self.flushed_seq.fetch_max(target, Ordering::SeqCst);
        Ok(())
    }

    /// Events with `seq > after`, oldest first.
    pub fn read_after(&self, after: u64) -> impl Iterator<Item = Result<Event, StoreError>> + use<> {
        self.events.range((after + 1).to_be_bytes()..).map(|r| {
            let (_, v) = r?;
            Ok(Event::decode(&v)?)
        })
    }

    /// Events with `after < seq <= until`.
    pub fn read_range(&self, after: u64, until: u64) -> impl Iterator<Item = Result<Event, StoreError>> + use<> {
        self.events
            .range((after + 1).to_be_bytes()..=until.to_be_bytes())
            .map(|r| {
                let (_, v) = r?;
                Ok(Event::decode(&v)?)
            })
    }

    /// Records a snapshot of `state` (as of `state.seq`).
    pub fn write_snapshot(&self, state: &State) -> Result<(), StoreError> {
        let json = serde_json::to_vec(state).expect("state serializes");
        self.snapshots.insert(state.seq.to_be_bytes(), json)?;
        Ok(())
    }

    /// The newest snapshot at or before `seq`, or an empty state.
    fn snapshot_at_or_before(&self, seq: u64) -> Result<State, StoreError> {
        match self.snapshots.range(..=seq.to_be_bytes()).next_back() {
            None => Ok(State::default()),
            Some(r) => {
                let (k, v) = r?;
                serde_json::from_slice(&v).map_err(|source| StoreError::Snapshot {
                    seq: seq_of(&k),
                    source,
                })
            }
        }
    }

    /// Rebuilds the current state: newest snapshot, then replay of the events after it.
    pub fn load_state(&self) -> Result<State, StoreError> {
        self.state_at(u64::MAX)
    }

    /// The state as of log sequence number `seq` (time travel): nearest snapshot at or before
    /// it, then replay up to and including `seq`.
    pub fn state_at(&self, seq: u64) -> Result<State, StoreError> {
        let mut state = self.snapshot_at_or_before(seq)?;
        for ev in self.read_range(state.seq, seq) {
            state.apply(&ev?);
        }
        Ok(state)
    }

    /// Bytes used on disk (sled's estimate).
    pub fn size_on_disk(&self) -> u64 {
        self.db.size_on_disk().unwrap_or(0)
    }
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
            schema: SCHEMA_VERSION,
            seq,
            id: *uuid::Uuid::now_v7().as_bytes(),
            time_ms: 0,
            event_type: t.as_str().into(),
            object_kind: kind.into(),
            name: name.into(),
            actor: "test".into(),
            reason: String::new(),
            detail: String::new(),
            body: serde_json::to_vec(&body).unwrap(),
        }
    }

    fn pool(name: &str, rv: u64) -> serde_json::Value {
        serde_json::json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
            "metadata": {"name": name, "resourceVersion": rv.to_string()}, "spec": {"paused": rv.is_multiple_of(2)}})
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
}
