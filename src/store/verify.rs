//! Store integrity: the schema 3 upgrade (framing every record with its checksum), the check
//! run at every open, the full offline check of `mco store verify`, and the two repairs it
//! offers (`mco store truncate --after N`, `mco store verify --drop-snapshot N`).
//!
//! Owns what "intact" means for the on-disk layout of `migrations/0003-checksums.md`: every
//! event's checksum and envelope, the seqs continuous from the first retained one (after a
//! compaction, `compacted_before`) to the last, each envelope's seq equal to its key, every
//! snapshot's checksum and JSON, and the index consistent with the events. It must not change
//! the store except through the upgrade and the two explicit repairs.

use super::mark::{self, MarkFile};
use super::{
    decode_event, decode_snapshot, index_key, record, seq_of, sled_read_error, Store, StoreError, INDEXED_THROUGH,
};
use crate::event::Event;
use crate::state::State;
use std::sync::atomic::Ordering;

/// Problems listed at most by [`Store::verify`] (the first one is what matters).
pub const MAX_PROBLEMS: usize = 100;

/// Records framed per batch by the 0003 upgrade.
const UPGRADE_BATCH: usize = 4096;

/// One damaged or missing record.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    /// The resourceVersion (seq) of the record, or of the first missing one.
    pub seq: u64,
    /// `events`, `snapshots` or `index`.
    pub tree: &'static str,
    /// What is wrong with it.
    pub what: String,
}

impl Problem {
    /// The error the store answers with for this problem.
    pub fn into_error(self) -> StoreError {
        StoreError::Corrupt {
            seq: self.seq,
            tree: self.tree,
            what: self.what,
        }
    }
}

/// What [`Store::check_events`] found.
#[derive(Clone, Debug, Default)]
pub struct EventCheck {
    /// Events read.
    pub events: u64,
    /// Seq of the first and last retained event (0 when none).
    pub first: u64,
    pub last: u64,
    /// In seq order.
    pub problems: Vec<Problem>,
    /// The chain of the log, for the high-water mark.
    pub mark: ChainCheck,
}

/// The chain ([`mark::chain`]) of the events read by [`Store::check_events`].
#[derive(Clone, Debug, Default)]
pub struct ChainCheck {
    /// The chain up to the last event read (the cut's, `meta.chain_before`, when none).
    pub chain_at_last: u32,
    /// The chain up to the seq of the mark the store was opened with, when the log reaches it.
    pub chain_at_mark: Option<u32>,
    /// The newest seq the log holds (the last event read, or the cut of a compaction that
    /// removed every event).
    pub log_end: u64,
}

/// What `mco store verify` reports.
#[derive(Clone, Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyReport {
    /// The store's `schema_version`.
    pub schema_version: u32,
    /// Events checked (checksum, envelope, seq).
    pub events: u64,
    /// First and last retained resourceVersion (0 when the log is empty).
    pub first_resource_version: u64,
    pub last_resource_version: u64,
    /// Snapshots checked (checksum, JSON, seq).
    pub snapshots: u64,
    /// Index entries checked against the events.
    pub index_entries: u64,
    /// Every event up to this seq is indexed.
    pub indexed_through: u64,
    /// The newest resourceVersion the high-water mark records as acknowledged (`None`: no
    /// mark, a store of schema 3 or older, or a damaged mark, reported as a problem).
    pub acknowledged_through: Option<u64>,
    /// Damaged or missing records, in tree then seq order, at most [`MAX_PROBLEMS`].
    pub problems: Vec<Problem>,
}

impl VerifyReport {
    /// True when nothing is wrong.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// The first problem of the `events` tree, else the first of any tree: what the store
    /// refuses to open on.
    pub fn first_problem(&self) -> Option<&Problem> {
        self.problems
            .iter()
            .find(|p| p.tree == "events")
            .or(self.problems.first())
    }
}

/// Offset and length of `seq` in a bincode 1.3.3 envelope: after `schema` (a u32), a u64
/// little-endian (`migrations/0001-initial.md`).
const SEQ_AT: std::ops::Range<usize> = 4..12;

/// An event's frame and CRC, and the seq its envelope records, without decoding the envelope.
fn check_event_frame(seq: u64, value: &[u8]) -> Result<(), StoreError> {
    let corrupt = |what: String| StoreError::Corrupt {
        seq,
        tree: "events",
        what,
    };
    let payload = record::unframe(value).map_err(|e| corrupt(e.to_string()))?;
    let recorded = payload
        .get(SEQ_AT)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .ok_or_else(|| {
            corrupt(format!(
                "the envelope is {} bytes, too short for its seq",
                payload.len()
            ))
        })?;
    if recorded != seq {
        return Err(corrupt(format!(
            "the record stored under it says resourceVersion {recorded}"
        )));
    }
    Ok(())
}

impl Store {
    /// Schema 1/2 -> 3 (`migrations/0003-checksums.md`): frames every event and snapshot not
    /// yet framed, in batches, then flushes. A crash part-way leaves a mix of framed and
    /// unframed records under the old `schema_version`, and the next open resumes (a framed
    /// value is recognised by its tag). An old record that does not decode is refused as
    /// [`StoreError::Corrupt`]: its checksum would vouch for garbage.
    pub(super) fn upgrade_to_checksums(&self) -> Result<(), StoreError> {
        let mut framed = 0u64;
        for (tree, name) in [(&self.events, "events"), (&self.snapshots, "snapshots")] {
            let mut batch = sled::Batch::default();
            let mut n = 0usize;
            for r in tree.iter() {
                let (k, v) = r?;
                if record::is_framed(&v) {
                    continue;
                }
                let seq = seq_of(&k);
                let refuse = |what: String| StoreError::Corrupt { seq, tree: name, what };
                if name == "events" {
                    let ev = Event::decode(&v).map_err(|e| refuse(e.to_string()))?;
                    if ev.seq != seq {
                        return Err(refuse(format!(
                            "the record stored under it says resourceVersion {}",
                            ev.seq
                        )));
                    }
                } else if let Err(e) = serde_json::from_slice::<State>(&v) {
                    return Err(refuse(format!("snapshot does not decode: {e}")));
                }
                batch.insert(k, record::frame(&v));
                n += 1;
                if n.is_multiple_of(UPGRADE_BATCH) {
                    tree.apply_batch(std::mem::take(&mut batch))?;
                    fail::fail_point!("store::migrate::batch");
                }
            }
            tree.apply_batch(batch)?;
            framed += n as u64;
        }
        self.db.flush()?;
        fail::fail_point!("store::migrate::before_version");
        self.meta.insert("schema_version", &3u32.to_be_bytes())?;
        self.db.flush()?;
        tracing::info!(
            records = framed,
            "store upgraded to schema 3: every record carries its checksum"
        );
        Ok(())
    }

    /// Checks every retained event: its checksum, its seq against its key, and that the seqs
    /// run without a gap from the first retained one (1, or `compacted_before` after a
    /// compaction) to the last. `at_open` (the check of every open) stops at the first problem
    /// and reads the envelope's seq at its fixed offset without decoding the rest (a payload
    /// whose CRC matches is the bytes this build's encoder wrote; decoding every envelope would
    /// cost as much as replaying the whole log); otherwise (`mco store verify`) every envelope
    /// is decoded and up to [`MAX_PROBLEMS`] are collected. Errors: only sled's own.
    pub fn check_events(&self, at_open: bool) -> Result<EventCheck, StoreError> {
        let first_only = at_open;
        let mut out = EventCheck::default();
        let mut expected = self.compacted_before.load(Ordering::SeqCst).max(1);
        let mark_seq = match self.recorded_mark() {
            MarkFile::Present(m) => Some(m.seq),
            _ => None,
        };
        let mut chain = self.chain_before.load(Ordering::SeqCst);
        out.mark.log_end = expected - 1;
        if mark_seq == Some(expected - 1) {
            out.mark.chain_at_mark = Some(chain);
        }
        // Events before `compacted_before` are left over from a compaction a crash cut short:
        // readers never see them (and the next compaction removes them).
        for r in self.events.range(expected.to_be_bytes()..) {
            let (k, v) = match r {
                Ok(kv) => kv,
                Err(e) => {
                    // sled cannot read what follows (a damaged blob file, its own checksum):
                    // nothing after the last event read can be trusted.
                    let what = match sled_read_error(e, "events", expected) {
                        StoreError::Corrupt { what, .. } => what,
                        other => other.to_string(),
                    };
                    out.problems.push(Problem {
                        seq: expected,
                        tree: "events",
                        what,
                    });
                    break;
                }
            };
            if k.len() != 8 {
                out.problems.push(Problem {
                    seq: expected,
                    tree: "events",
                    what: format!("a key of {} bytes (keys are 8-byte seqs)", k.len()),
                });
            } else {
                let seq = seq_of(&k);
                if out.events == 0 {
                    out.first = seq;
                }
                out.last = seq;
                out.events += 1;
                if seq != expected {
                    out.problems.push(Problem {
                        seq: expected,
                        tree: "events",
                        what: if seq > expected {
                            format!(
                                "missing: the next retained event is resourceVersion {seq} ({} missing)",
                                seq - expected
                            )
                        } else {
                            format!("resourceVersion {seq} is before the retained history")
                        },
                    });
                }
                expected = seq + 1;
                chain = mark::chain(chain, seq, mark::record_crc(&v));
                out.mark.log_end = seq;
                if mark_seq == Some(seq) {
                    out.mark.chain_at_mark = Some(chain);
                }
                let checked = if at_open {
                    check_event_frame(seq, &v)
                } else {
                    decode_event(&k, &v).map(|_| ())
                };
                match checked {
                    Ok(_) => {}
                    Err(StoreError::Corrupt { seq, tree, what }) => out.problems.push(Problem { seq, tree, what }),
                    Err(e) => out.problems.push(Problem {
                        seq,
                        tree: "events",
                        what: e.to_string(),
                    }),
                }
            }
            if (first_only && !out.problems.is_empty()) || out.problems.len() >= MAX_PROBLEMS {
                break;
            }
        }
        out.mark.chain_at_last = chain;
        Ok(out)
    }

    /// The log against the high-water mark the store was opened with
    /// (`migrations/0004-high-water-mark.md`), given the schema the store recorded and the
    /// chain [`Store::check_events`] computed: acknowledged events missing from the log (the
    /// log ends before the mark), a log whose records up to the mark are not the acknowledged
    /// ones (chain mismatch), or a damaged or missing mark in a store that must have one
    /// (schema 4). A log ahead of the mark is not a problem: a crash between sled's flush and
    /// the mark's write leaves it so.
    pub fn mark_problem(&self, schema: Option<u32>, check: &ChainCheck) -> Option<Problem> {
        let path = mark::path(&self.dir);
        let end = check.log_end;
        let unprovable = |why: String| Problem {
            seq: end + 1,
            tree: "mark",
            what: format!(
                "the high-water mark {} is {why}: the log's records up to resourceVersion {end} are intact, \
                 but that no acknowledged event after it was lost cannot be proven",
                path.display()
            ),
        };
        match &self.recorded_mark() {
            MarkFile::Absent if schema.is_some_and(|s| s >= 4) => Some(unprovable("missing".into())),
            MarkFile::Absent => None,
            MarkFile::Damaged(why) => Some(unprovable(format!("damaged ({why})"))),
            MarkFile::Present(m) if end < m.seq => Some(Problem {
                seq: end + 1,
                tree: "events",
                what: format!(
                    "missing: the log ends at resourceVersion {end}, but the high-water mark ({}) records every \
                     event up to resourceVersion {} as acknowledged: {} acknowledged events lost (sled's recovery \
                     stops at a damaged record of its log file and drops every record after it)",
                    path.display(),
                    m.seq,
                    m.seq - end
                ),
            }),
            MarkFile::Present(m) => match check.chain_at_mark {
                Some(c) if c == m.chain => None,
                computed => {
                    let first = self.compacted_before.load(Ordering::SeqCst).max(1);
                    Some(Problem {
                        seq: first,
                        tree: "events",
                        what: format!(
                            "the events up to resourceVersion {} are not the acknowledged ones (their chained checksum is {}, \
                             the high-water mark {} records {:08x}): a record was replaced, and which one cannot be told",
                            m.seq,
                            computed.map(|c| format!("{c:08x}")).unwrap_or_else(|| "unknown".into()),
                            path.display(),
                            m.chain
                        ),
                    })
                }
            },
        }
    }

    /// The full offline check of `mco store verify`: [`Store::check_events`], then every
    /// snapshot (checksum, JSON, seq; the state it holds must be rebuildable, i.e. not before
    /// the retained history unless it is the compaction's own), then the index against the
    /// events (every event up to `indexed_through` has its entry, every entry names a retained
    /// event of that kind and name). Errors: only sled's own; corruption is in the report.
    pub fn verify(&self) -> Result<VerifyReport, StoreError> {
        let events = self.check_events(false)?;
        let schema_version = self
            .meta
            .get("schema_version")?
            .map(|v| u32::from_be_bytes(v.as_ref().try_into().unwrap_or([0xff; 4])))
            .unwrap_or(0);
        let mut problems = events.problems;
        // The mark against a log that reads to its end (a log that stops early is reported
        // already, at the record it stops at).
        if problems.len() < MAX_PROBLEMS {
            problems.extend(self.mark_problem(Some(schema_version).filter(|s| *s > 0), &events.mark));
        }
        let mut report = VerifyReport {
            schema_version,
            events: events.events,
            first_resource_version: events.first,
            last_resource_version: events.last,
            acknowledged_through: match self.recorded_mark() {
                MarkFile::Present(m) => Some(m.seq),
                _ => None,
            },
            problems,
            ..Default::default()
        };
        for r in self.snapshots.iter() {
            let (k, v) = match r {
                Ok(kv) => kv,
                Err(e) => {
                    let at = self
                        .snapshots
                        .last()
                        .ok()
                        .flatten()
                        .map(|(k, _)| seq_of(&k))
                        .unwrap_or(0);
                    match sled_read_error(e, "snapshots", at) {
                        StoreError::Corrupt { seq, tree, what } => report.problems.push(Problem { seq, tree, what }),
                        other => return Err(other),
                    }
                    break;
                }
            };
            report.snapshots += 1;
            match decode_snapshot(&k, &v) {
                Ok(_) => {}
                Err(StoreError::Corrupt { seq, tree, what }) => report.problems.push(Problem { seq, tree, what }),
                Err(StoreError::Snapshot { seq, source }) => report.problems.push(Problem {
                    seq,
                    tree: "snapshots",
                    what: format!("snapshot does not decode: {source}"),
                }),
                Err(e) => return Err(e),
            }
        }
        match self.verify_index(&mut report) {
            Ok(()) => {}
            // sled cannot read a page the index check needs: the events' check names the
            // record when it is one of them; the index's is rebuilt from the events.
            Err(StoreError::Sled(e @ sled::Error::Corruption { .. })) => report.problems.push(Problem {
                seq: report.indexed_through,
                tree: "index",
                what: format!(
                    "sled cannot read part of the index or of the events it names: {}",
                    e.to_string().split(" backtrace").next().unwrap_or_default()
                ),
            }),
            Err(e) => return Err(e),
        }
        report.problems.truncate(MAX_PROBLEMS);
        Ok(report)
    }

    /// The index against the events, for [`Store::verify`]: every event up to `indexed_through`
    /// has its entry, every entry names a retained event of that kind and name.
    fn verify_index(&self, report: &mut VerifyReport) -> Result<(), StoreError> {
        let through = self.index.get(INDEXED_THROUGH)?.map(|v| seq_of(&v)).unwrap_or(0);
        report.indexed_through = through;
        let index_problem = |seq: u64, what: String, report: &mut VerifyReport| {
            if report.problems.len() < MAX_PROBLEMS {
                report.problems.push(Problem {
                    seq,
                    tree: "index",
                    what,
                });
            }
        };
        for r in self.index.iter() {
            let (k, _) = r?;
            if k.as_ref() == INDEXED_THROUGH {
                continue;
            }
            report.index_entries += 1;
            if k.len() < 10 {
                index_problem(0, format!("an index key of {} bytes", k.len()), report);
                continue;
            }
            let seq = seq_of(&k[k.len() - 8..]);
            if seq < self.compacted_before.load(Ordering::SeqCst) {
                // Left by a compaction a crash cut short (it removes the events, then their
                // entries); never read: history reads stop at the retained history.
                continue;
            }
            match self
                .events
                .get(seq.to_be_bytes())?
                .map(|v| decode_event(&seq.to_be_bytes(), &v))
            {
                Some(Ok(ev)) if index_key(&ev.object_kind, &ev.name, seq) == k.as_ref() => {}
                Some(Ok(ev)) => index_problem(
                    seq,
                    format!(
                        "the index entry does not name the event's object {}/{}",
                        ev.object_kind, ev.name
                    ),
                    report,
                ),
                Some(Err(_)) => {} // reported with the events
                None => index_problem(seq, "the index names an event the log does not hold".into(), report),
            }
        }
        for r in self.events.range(..=through.to_be_bytes()) {
            let (k, v) = r?;
            if let Ok(ev) = decode_event(&k, &v) {
                if !self.index.contains_key(index_key(&ev.object_kind, &ev.name, ev.seq))? {
                    index_problem(ev.seq, "the event has no index entry".into(), report);
                }
            }
        }
        Ok(())
    }

    /// Removes every event, snapshot and index entry after `after`, keeping the history up to
    /// it (`mco store truncate --after N`, the repair for a log damaged from `N + 1` on: every
    /// write after `N` is lost). Flushes before returning. Errors: sled's own.
    pub fn truncate_after(&self, after: u64) -> Result<u64, StoreError> {
        let from = after.saturating_add(1).to_be_bytes();
        let mut removed = 0u64;
        for (tree, name) in [(&self.events, "events"), (&self.snapshots, "snapshots")] {
            let mut batch = sled::Batch::default();
            for r in tree.range(from..) {
                // Pages sled cannot read cannot be removed either: say so, with the repair left.
                let (k, _) = r.map_err(|e| sled_read_error(e, name, after.saturating_add(1)))?;
                batch.remove(k);
                if std::ptr::eq(tree, &self.events) {
                    removed += 1;
                }
            }
            tree.apply_batch(batch)?;
        }
        let mut batch = sled::Batch::default();
        for r in self.index.iter() {
            let (k, _) = r?;
            if k.as_ref() != INDEXED_THROUGH && k.len() >= 8 && seq_of(&k[k.len() - 8..]) > after {
                batch.remove(k);
            }
        }
        let through = self.index.get(INDEXED_THROUGH)?.map(|v| seq_of(&v)).unwrap_or(0);
        batch.insert(INDEXED_THROUGH, &through.min(after).to_be_bytes());
        self.index.apply_batch(batch)?;
        self.indexed_through.store(through.min(after), Ordering::SeqCst);
        let mut chain = self.chain_before.load(Ordering::SeqCst);
        let mut last = self.compacted_before.load(Ordering::SeqCst).saturating_sub(1);
        for r in self
            .events
            .range(self.compacted_before.load(Ordering::SeqCst).max(1).to_be_bytes()..)
        {
            let (k, v) = r?;
            last = seq_of(&k);
            chain = super::mark::chain(chain, last, super::mark::record_crc(&v));
        }
        self.last_seq.store(last, Ordering::SeqCst);
        self.flushed_seq.store(last, Ordering::SeqCst);
        self.db.flush()?;
        // The history kept is the acknowledged one from now on (written after sled's flush).
        let head = super::mark::Mark { seq: last, chain };
        *self.head.lock().expect("head lock poisoned") = head;
        self.write_mark(head)?;
        Ok(removed)
    }

    /// Removes the snapshot at `seq` (`mco store verify --drop-snapshot N`): snapshots are
    /// derived from the events, so the state is rebuilt from an earlier snapshot and the events
    /// after it. Refused when the events it summarises were compacted away (it is then the
    /// only record of that state). Returns whether a snapshot was removed.
    pub fn drop_snapshot(&self, seq: u64) -> Result<bool, StoreError> {
        let compacted = self.compacted_before.load(Ordering::SeqCst);
        if compacted > 1 && seq < compacted {
            return Err(StoreError::Corrupt {
                seq,
                tree: "snapshots",
                what: format!(
                    "the events before resourceVersion {compacted} were compacted away, so this snapshot cannot be rebuilt; restore a backup"
                ),
            });
        }
        let removed = self.snapshots.remove(seq.to_be_bytes())?.is_some();
        self.db.flush()?;
        Ok(removed)
    }
}
