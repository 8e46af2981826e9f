//! Snapshots (`snapshots` tree): writing one, and rebuilding the state from the newest one at or
//! before a seq plus the events after it (current state and time travel).

use super::{record, seq_of, sled_read_error, Store, StoreError};
use crate::state::State;

impl Store {
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
}

/// A stored snapshot: checksum, JSON, and its seq against its key.
pub(super) fn decode_snapshot(key: &[u8], value: &[u8]) -> Result<State, StoreError> {
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
