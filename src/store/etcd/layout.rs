//! The key layout of the event log in etcd, and the pure steps of writing and reading it:
//! naming keys, splitting a record too large for one etcd value into parts and joining them
//! again, and cutting a batch into transactions within etcd's limits. No IO.
//!
//! Under the prefix (default `/mco/`):
//! - `schema`: the store schema ([`crate::event::SCHEMA_VERSION`]), u32 big-endian;
//! - `head`: the newest committed seq, u64 big-endian; while a batch larger than one
//!   transaction is being written, followed by the 16-byte id of that batch (a *claim*: the
//!   batch is not committed until the head names its last seq alone);
//! - `events/<seq, 20 digits>`: the [`crate::store::record::frame`] of the event's envelope, as
//!   in sled's `events` tree. A record over [`PART_BYTES`] is split: the key holds
//!   [`PARTS_MARKER`], the part count (u32 big-endian) and the CRC-32 of the whole record, and
//!   the parts follow under `events/<seq>/<part, 4 digits>` (they sort between the record's key
//!   and the next record's);
//! - `compacted_before`: the first seq retained after a compaction, u64 big-endian;
//! - `base/<seq>/<part>`: the snapshot at the cut of the last compaction (framed JSON of the
//!   state, in parts), from which a replica that starts after the compaction folds;
//! - `writer`: the name of the mco server writing under the prefix, attached to its etcd lease
//!   (every write compares it: the fence).

/// The largest etcd value mco writes: well under etcd's default request limit
/// (`--max-request-bytes`, 1.5 MiB), so that a transaction of several values still fits.
pub const PART_BYTES: usize = 512 * 1024;

/// The most payload bytes one transaction carries (etcd's default request limit is 1.5 MiB;
/// keys and framing take the rest).
pub const TXN_BYTES: usize = 1024 * 1024;

/// The most operations in one transaction, below etcd's default `--max-txn-ops` (128), with
/// room for the compares' companions (the head and the cleanup of a failed batch).
pub const TXN_OPS: usize = 120;

/// The value of a record's key when the record is stored in parts.
pub const PARTS_MARKER: &[u8; 8] = b"mcoparts";

/// The key names of one store under its prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    /// The layout under `prefix`, which gets a trailing `/` when it has none.
    pub fn new(prefix: &str) -> Keys {
        let mut prefix = prefix.to_string();
        if !prefix.ends_with('/') {
            prefix.push('/');
        }
        Keys { prefix }
    }

    /// The prefix, ending in `/`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `<prefix>head`.
    pub fn head(&self) -> Vec<u8> {
        format!("{}head", self.prefix).into_bytes()
    }

    /// `<prefix>schema`.
    pub fn schema(&self) -> Vec<u8> {
        format!("{}schema", self.prefix).into_bytes()
    }

    /// `<prefix>writer`.
    pub fn writer(&self) -> Vec<u8> {
        format!("{}writer", self.prefix).into_bytes()
    }

    /// `<prefix>compacted_before`.
    pub fn compacted_before(&self) -> Vec<u8> {
        format!("{}compacted_before", self.prefix).into_bytes()
    }

    /// `<prefix>events/<seq>`: the key of record `seq` (its parts sort right after it).
    pub fn event(&self, seq: u64) -> Vec<u8> {
        format!("{}events/{seq:020}", self.prefix).into_bytes()
    }

    /// `<prefix>events/<seq>/<part>`.
    pub fn event_part(&self, seq: u64, part: usize) -> Vec<u8> {
        format!("{}events/{seq:020}/{part:04}", self.prefix).into_bytes()
    }

    /// `<prefix>base/<seq>/<part>`.
    pub fn base_part(&self, seq: u64, part: usize) -> Vec<u8> {
        format!("{}base/{seq:020}/{part:04}", self.prefix).into_bytes()
    }

    /// `<prefix>base/`: every part of every base snapshot is under it.
    pub fn base_prefix(&self) -> Vec<u8> {
        format!("{}base/", self.prefix).into_bytes()
    }

    /// `<prefix>base/<seq>/`.
    pub fn base_of(&self, seq: u64) -> Vec<u8> {
        format!("{}base/{seq:020}/", self.prefix).into_bytes()
    }

    /// What a key under `events/` names: the record's seq and, for a part, its number.
    /// `None` for a key of another shape.
    pub fn parse_event(&self, key: &[u8]) -> Option<(u64, Option<usize>)> {
        let rest = key.strip_prefix(format!("{}events/", self.prefix).as_bytes())?;
        let rest = std::str::from_utf8(rest).ok()?;
        let (seq, part) = match rest.split_once('/') {
            Some((seq, part)) => (seq, Some(part.parse().ok()?)),
            None => (rest, None),
        };
        (seq.len() == 20).then_some(())?;
        Some((seq.parse().ok()?, part))
    }
}

/// The smallest key after every key that starts with `key` (etcd's range end for a prefix).
pub fn prefix_end(key: &[u8]) -> Vec<u8> {
    let mut end = key.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0] // every key: etcd's "\0" range end
}

/// One put of a batch: key and value.
pub type Put = (Vec<u8>, Vec<u8>);

/// One record of the log: its seq and its framed bytes.
pub type Record = (u64, Vec<u8>);

/// The puts that store record `seq`: one when it fits [`PART_BYTES`], else the marker and the
/// parts.
pub fn record_puts(keys: &Keys, seq: u64, record: &[u8]) -> Vec<Put> {
    if record.len() <= PART_BYTES {
        return vec![(keys.event(seq), record.to_vec())];
    }
    let parts: Vec<&[u8]> = record.chunks(PART_BYTES).collect();
    let mut marker = PARTS_MARKER.to_vec();
    marker.extend_from_slice(&(parts.len() as u32).to_be_bytes());
    marker.extend_from_slice(&crate::store::record::crc(record).to_be_bytes());
    let mut puts = vec![(keys.event(seq), marker)];
    for (i, p) in parts.into_iter().enumerate() {
        puts.push((keys.event_part(seq, i), p.to_vec()));
    }
    puts
}

/// The puts of a base snapshot (the framed JSON of the state at `seq`), in parts.
pub fn base_puts(keys: &Keys, seq: u64, snapshot: &[u8]) -> Vec<Put> {
    snapshot
        .chunks(PART_BYTES)
        .enumerate()
        .map(|(i, p)| (keys.base_part(seq, i), p.to_vec()))
        .collect()
}

/// Cuts `puts` into transactions of at most [`TXN_OPS`] operations and [`TXN_BYTES`] of values
/// each (a lone value larger than that gets a transaction of its own), in order.
pub fn transactions(puts: Vec<Put>) -> Vec<Vec<Put>> {
    let mut out: Vec<Vec<Put>> = Vec::new();
    let mut bytes = 0usize;
    for put in puts {
        let size = put.0.len() + put.1.len();
        match out.last_mut() {
            Some(txn) if txn.len() < TXN_OPS && bytes + size <= TXN_BYTES => {
                bytes += size;
                txn.push(put);
            }
            _ => {
                bytes = size;
                out.push(vec![put]);
            }
        }
    }
    out
}

/// Joins what a range read of `events/` returned (keys in order) into `(seq, record)` pairs,
/// checking that every split record has all its parts and its CRC. `Err((seq, what))` names
/// the first record that cannot be joined.
pub fn join_records(keys: &Keys, kvs: Vec<Put>) -> Result<Vec<Record>, (u64, String)> {
    let mut out: Vec<Record> = Vec::new();
    // The split record being joined: its seq, parts expected, CRC, the bytes so far, parts seen.
    let mut open: Option<(u64, u32, u32, Vec<u8>, u32)> = None;
    let close = |open: &mut Option<(u64, u32, u32, Vec<u8>, u32)>, out: &mut Vec<Record>| {
        if let Some((seq, n, crc, bytes, seen)) = open.take() {
            if seen != n {
                return Err((seq, format!("the record is stored in {n} parts and {seen} were found")));
            }
            if crate::store::record::crc(&bytes) != crc {
                return Err((seq, "its parts do not add up to the record (CRC mismatch)".to_string()));
            }
            out.push((seq, bytes));
        }
        Ok(())
    };
    for (key, value) in kvs {
        let Some((seq, part)) = keys.parse_event(&key) else {
            return Err((
                0,
                format!("unexpected key {:?} among the events", String::from_utf8_lossy(&key)),
            ));
        };
        match part {
            None => {
                close(&mut open, &mut out)?;
                if let Some(rest) = value.strip_prefix(PARTS_MARKER.as_slice()) {
                    let n = rest
                        .get(..4)
                        .map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")));
                    let crc = rest
                        .get(4..8)
                        .map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")));
                    let (Some(n), Some(crc)) = (n, crc) else {
                        return Err((seq, "its parts marker is truncated".to_string()));
                    };
                    open = Some((seq, n, crc, Vec::new(), 0));
                } else {
                    out.push((seq, value));
                }
            }
            Some(i) => match &mut open {
                Some((s, _, _, bytes, seen)) if *s == seq && *seen as usize == i => {
                    bytes.extend_from_slice(&value);
                    *seen += 1;
                }
                _ => return Err((seq, format!("part {i} does not follow its record's parts in order"))),
            },
        }
    }
    close(&mut open, &mut out)?;
    Ok(out)
}

/// The value of the head key: the newest committed seq, and the id of a batch being written
/// after it (a claim).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    /// The newest committed seq (0: an empty log).
    pub seq: u64,
    /// The batch being written after `seq`, if a multi-transaction batch is under way or was
    /// cut short.
    pub claim: Option<[u8; 16]>,
}

impl Head {
    /// 8 bytes of seq, then the 16-byte claim if any.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.seq.to_be_bytes().to_vec();
        if let Some(c) = self.claim {
            out.extend_from_slice(&c);
        }
        out
    }

    /// The head as stored; an absent key is the empty log.
    pub fn decode(value: Option<&[u8]>) -> Result<Head, String> {
        let Some(v) = value else {
            return Ok(Head { seq: 0, claim: None });
        };
        match v.len() {
            8 | 24 => Ok(Head {
                seq: u64::from_be_bytes(v[..8].try_into().expect("8 bytes")),
                claim: (v.len() == 24).then(|| v[8..].try_into().expect("16 bytes")),
            }),
            n => Err(format!("the head key holds {n} bytes (8 or 24 expected)")),
        }
    }
}

/// A u64 stored big-endian (`compacted_before`); an absent key is 0.
pub fn decode_u64(value: Option<&[u8]>) -> Result<u64, String> {
    match value {
        None => Ok(0),
        Some(v) => v
            .try_into()
            .map(u64::from_be_bytes)
            .map_err(|_| format!("{} bytes where 8 were expected", v.len())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_as_the_log_and_parse_back() {
        let k = Keys::new("/mco");
        assert_eq!(k.prefix(), "/mco/");
        assert!(k.event(9) < k.event(10));
        assert!(k.event(10) < k.event_part(10, 0));
        assert!(k.event_part(10, 9999) < k.event(11));
        assert_eq!(k.parse_event(&k.event(42)), Some((42, None)));
        assert_eq!(k.parse_event(&k.event_part(42, 3)), Some((42, Some(3))));
        assert_eq!(k.parse_event(b"/mco/events/12"), None);
        assert_eq!(k.parse_event(b"/other/events/00000000000000000001"), None);
        assert_eq!(prefix_end(b"/mco/base/"), b"/mco/base0".to_vec());
    }

    #[test]
    fn a_large_record_is_split_and_joined_again() {
        let k = Keys::new("/mco/");
        let big: Vec<u8> = (0..(PART_BYTES * 2 + 17)).map(|i| (i % 251) as u8).collect();
        let mut kvs = record_puts(&k, 7, b"small");
        kvs.extend(record_puts(&k, 8, &big));
        kvs.extend(record_puts(&k, 9, b"after"));
        assert_eq!(kvs.len(), 1 + 4 + 1, "a marker and three parts");
        let joined = join_records(&k, kvs.clone()).unwrap();
        assert_eq!(joined, vec![(7, b"small".to_vec()), (8, big), (9, b"after".to_vec())]);
        // A part missing, or a part changed, names the record.
        let mut missing = kvs.clone();
        missing.remove(3);
        assert_eq!(join_records(&k, missing).unwrap_err().0, 8);
        let mut changed = kvs;
        changed[2].1[5] ^= 1;
        let err = join_records(&k, changed).unwrap_err();
        assert_eq!(err.0, 8);
        assert!(err.1.contains("CRC"), "{}", err.1);
    }

    #[test]
    fn transactions_stay_within_etcds_limits() {
        let puts: Vec<Put> = (0..300u64).map(|s| (s.to_be_bytes().to_vec(), vec![0; 100])).collect();
        let txns = transactions(puts);
        assert_eq!(txns.iter().map(Vec::len).collect::<Vec<_>>(), vec![120, 120, 60]);
        let puts: Vec<Put> = (0..5u64).map(|s| (vec![s as u8], vec![0; 400 * 1024])).collect();
        assert_eq!(
            transactions(puts).iter().map(Vec::len).collect::<Vec<_>>(),
            vec![2, 2, 1]
        );
    }

    #[test]
    fn the_head_round_trips_with_and_without_a_claim() {
        for h in [
            Head { seq: 0, claim: None },
            Head {
                seq: 77,
                claim: Some([9; 16]),
            },
        ] {
            assert_eq!(Head::decode(Some(&h.encode())).unwrap(), h);
        }
        assert_eq!(Head::decode(None).unwrap(), Head { seq: 0, claim: None });
        assert!(Head::decode(Some(b"abc")).is_err());
    }
}
