//! Moving a log between backends: `mco store export` writes every retained record of a store
//! (sled or etcd) to one file, byte for byte as stored (each with its checksum); `mco store
//! import` writes such a file into an empty store of either backend. Every seq, time, actor
//! and body is preserved because the records are copied, not re-encoded.
//!
//! The file: the line `mco-store-export 1\n`, then entries `[kind: u8][seq: u64 BE][len: u32
//! BE][bytes]`: kind `C` (the first seq retained after a compaction, no bytes), `S` (a snapshot:
//! the framed JSON of the state at `seq`; the first one after a `C` is the snapshot at the cut),
//! `E` (an event record). Events come in seq order; `mco store import` checks every record's
//! checksum and envelope and their continuity before anything is written, and writes nothing
//! into a store that is not empty.

use super::log::decode_event;
use super::snapshot::decode_snapshot;
use super::{Store, StoreError};
use std::io::{Read, Write};
use std::sync::atomic::Ordering;

/// The first line of an export file.
pub const MAGIC: &[u8] = b"mco-store-export 1\n";

/// One entry of an export file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// The first seq retained after a compaction.
    CompactedBefore(u64),
    /// A snapshot (framed JSON of the state at `seq`).
    Snapshot { seq: u64, record: Vec<u8> },
    /// An event record (framed envelope).
    Event { seq: u64, record: Vec<u8> },
}

/// What an export or import moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Moved {
    /// Event records.
    pub events: u64,
    /// Snapshots (on etcd only the one at the cut is stored; the others are derived).
    pub snapshots: u64,
    /// The first seq retained after a compaction (0: never compacted).
    pub compacted_before: u64,
    /// The newest seq.
    pub last: u64,
}

fn io(e: std::io::Error) -> StoreError {
    StoreError::Export(e.to_string())
}

/// Writes one entry.
pub fn write_entry(out: &mut impl Write, entry: &Entry) -> Result<(), StoreError> {
    let (kind, seq, bytes): (u8, u64, &[u8]) = match entry {
        Entry::CompactedBefore(seq) => (b'C', *seq, &[]),
        Entry::Snapshot { seq, record } => (b'S', *seq, record),
        Entry::Event { seq, record } => (b'E', *seq, record),
    };
    out.write_all(&[kind]).map_err(io)?;
    out.write_all(&seq.to_be_bytes()).map_err(io)?;
    out.write_all(&(bytes.len() as u32).to_be_bytes()).map_err(io)?;
    out.write_all(bytes).map_err(io)
}

/// Reads the entries of an export file, checking its first line.
pub fn read_entries(input: &mut impl Read) -> Result<Vec<Entry>, StoreError> {
    let mut magic = vec![0; MAGIC.len()];
    input
        .read_exact(&mut magic)
        .map_err(|_| StoreError::Export("not an mco store export (too short)".into()))?;
    if magic != MAGIC {
        return Err(StoreError::Export(
            "not an mco store export (no `mco-store-export 1` line)".into(),
        ));
    }
    let mut out = Vec::new();
    loop {
        let mut head = [0u8; 13];
        match input.read_exact(&mut head[..1]) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(out),
            Err(e) => return Err(io(e)),
        }
        input
            .read_exact(&mut head[1..])
            .map_err(|_| StoreError::Export(format!("truncated after {} entries", out.len())))?;
        let seq = u64::from_be_bytes(head[1..9].try_into().expect("8 bytes"));
        let len = u32::from_be_bytes(head[9..13].try_into().expect("4 bytes")) as usize;
        let mut record = vec![0; len];
        input
            .read_exact(&mut record)
            .map_err(|_| StoreError::Export(format!("the entry at resourceVersion {seq} is truncated")))?;
        out.push(match head[0] {
            b'C' => Entry::CompactedBefore(seq),
            b'S' => Entry::Snapshot { seq, record },
            b'E' => Entry::Event { seq, record },
            k => {
                return Err(StoreError::Export(format!(
                    "unknown entry kind {k:#04x} at resourceVersion {seq}"
                )))
            }
        });
    }
}

/// Checks the entries as an import must find them: every record's checksum and envelope (a
/// snapshot's JSON), events in order without a gap from the cut, the snapshot at the cut when
/// the log was compacted.
pub fn check_entries(entries: &[Entry]) -> Result<Moved, StoreError> {
    let mut moved = Moved::default();
    let mut expected = None;
    for e in entries {
        match e {
            Entry::CompactedBefore(seq) => moved.compacted_before = *seq,
            Entry::Snapshot { seq, record } => {
                decode_snapshot(&seq.to_be_bytes(), record).map_err(damaged)?;
                moved.snapshots += 1;
            }
            Entry::Event { seq, record } => {
                decode_event(&seq.to_be_bytes(), record).map_err(damaged)?;
                let want = *expected.get_or_insert(moved.compacted_before.max(1));
                if *seq != want {
                    return Err(StoreError::Export(format!(
                        "resourceVersion {want} is missing from the export (the next is {seq})"
                    )));
                }
                expected = Some(seq + 1);
                moved.events += 1;
                moved.last = *seq;
            }
        }
    }
    if moved.compacted_before > 1 {
        let cut = moved.compacted_before - 1;
        if !entries
            .iter()
            .any(|e| matches!(e, Entry::Snapshot { seq, .. } if *seq == cut))
        {
            return Err(StoreError::Export(format!(
                "the log was compacted before {} and the export has no snapshot at {cut}",
                moved.compacted_before
            )));
        }
        moved.last = moved.last.max(cut);
    }
    Ok(moved)
}

/// A record of the export file that does not check: named as the file's, not as a store's
/// (there is no store to repair: the file is damaged).
fn damaged(e: StoreError) -> StoreError {
    match e {
        StoreError::Corrupt { seq, what, .. } => StoreError::Export(format!(
            "the export file is damaged at resourceVersion {seq} ({what}): nothing was imported; export the log again"
        )),
        StoreError::Snapshot { seq, source } => StoreError::Export(format!(
            "the export file's snapshot at resourceVersion {seq} does not decode ({source}): nothing was imported"
        )),
        e => e,
    }
}

impl Store {
    /// The entries of this store as an export has them: the cut (if compacted), the snapshots,
    /// then every retained event record (on etcd: this replica's copy, checked when opened).
    pub fn export_entries(&self) -> Result<Vec<Entry>, StoreError> {
        let mut out = Vec::new();
        let compacted = self.compacted_before.load(Ordering::SeqCst);
        if compacted > 1 {
            out.push(Entry::CompactedBefore(compacted));
        }
        for r in self.snapshots.iter() {
            let (k, v) = r?;
            out.push(Entry::Snapshot {
                seq: super::seq_of(&k),
                record: v.to_vec(),
            });
        }
        for r in self.events.iter() {
            let (k, v) = r?;
            out.push(Entry::Event {
                seq: super::seq_of(&k),
                record: v.to_vec(),
            });
        }
        Ok(out)
    }

    /// Writes [`Store::export_entries`] to `out` as an export file.
    pub fn export(&self, out: &mut impl Write) -> Result<Moved, StoreError> {
        let entries = self.export_entries()?;
        let moved = check_entries(&entries)?;
        out.write_all(MAGIC).map_err(io)?;
        for e in &entries {
            write_entry(out, e)?;
        }
        out.flush().map_err(io)?;
        Ok(moved)
    }

    /// Imports checked `entries` into this store, which must be empty: on sled the cut, every
    /// snapshot and every event; on etcd the cut with its snapshot, and every event (the other
    /// snapshots are derived by each replica). Durable when it returns.
    ///
    /// Errors: [`StoreError::Export`] for a store that is not empty or entries that do not
    /// check ([`check_entries`]); the backend's own.
    pub async fn import(&self, entries: &[Entry]) -> Result<Moved, StoreError> {
        let moved = check_entries(entries)?;
        if self.last_seq() != 0 || self.compacted_before.load(Ordering::SeqCst) != 0 {
            return Err(StoreError::Export(format!(
                "the store is not empty (it holds resourceVersions up to {}): import into a new one",
                self.last_seq()
            )));
        }
        if moved.compacted_before > 1 {
            let cut = moved.compacted_before - 1;
            let base = entries
                .iter()
                .find_map(|e| match e {
                    Entry::Snapshot { seq, record } if *seq == cut => Some(record.clone()),
                    _ => None,
                })
                .expect("checked: the snapshot at the cut is there");
            if let Some(log) = self.remote.clone() {
                log.import_base(moved.compacted_before, base.clone()).await?;
            }
            self.snapshots.insert(cut.to_be_bytes(), base)?;
            self.meta
                .insert("compacted_before", &moved.compacted_before.to_be_bytes())?;
            self.compacted_before.store(moved.compacted_before, Ordering::SeqCst);
            self.last_seq.store(cut, Ordering::SeqCst);
            self.flushed_seq.store(cut, Ordering::SeqCst);
            self.head.lock().expect("head lock poisoned").seq = cut;
        }
        let mut batch = Vec::new();
        for e in entries {
            match e {
                Entry::Snapshot { seq, record } if self.remote.is_none() => {
                    self.snapshots.insert(seq.to_be_bytes(), record.clone())?;
                }
                Entry::Event { seq, record } => {
                    batch.push(decode_event(&seq.to_be_bytes(), record)?);
                    if batch.len() == 500 {
                        self.append(&std::mem::take(&mut batch))?;
                        self.flush().await?;
                    }
                }
                _ => {}
            }
        }
        self.append(&batch)?;
        self.flush().await?;
        self.index_missing()?;
        Ok(moved)
    }
}
