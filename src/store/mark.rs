//! The high-water mark of schema 4 (`migrations/0004-high-water-mark.md`): a small file beside
//! sled's files, `store/high-water-mark`, recording the newest acknowledged resourceVersion and
//! a chained checksum of the log up to it, so that records sled's recovery silently drops (one
//! damaged byte in its log file ends its recovery there) or replaces are detected at open.
//!
//! Owns the file's format, its atomic replacement (write a temporary file, fsync it, rename it
//! over the mark, fsync the directory) and the chain function. It must not decide what a
//! mismatch means: the store's check ([`crate::store::Store::check_events`]) does.
//!
//! Format, 24 bytes: `mco-hwm\x01` (magic and format version) · seq, u64 big-endian · chain,
//! u32 big-endian · CRC-32 (IEEE) of the 20 bytes before it, u32 big-endian. Any other length,
//! magic or CRC is a damaged mark.
//!
//! The chain at seq `n` is the CRC-32 (IEEE, `crc32fast`) of the concatenation, over every
//! retained event `i <= n` in seq order, of `i` (u64 big-endian) and the event's record CRC
//! (u32 big-endian, [`super::record`]); after a compaction it continues from the chain at the
//! cut (`meta.chain_before`). It changes when any record up to `n` is missing, added, reordered
//! or has other contents (its CRC then differs), with the 2^-32 chance of a miss of a CRC: a
//! guard against storage faults, not against someone who can write the data directory.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The mark's file name, in the store's directory (beside sled's `db`, `conf` and `blobs/`).
pub const MARK_FILE: &str = "high-water-mark";

/// The temporary file a new mark is written to before it is renamed over [`MARK_FILE`].
pub const MARK_TMP: &str = "high-water-mark.tmp";

/// Magic and format version.
const MAGIC: &[u8; 8] = b"mco-hwm\x01";

/// Bytes of an encoded mark.
pub const MARK_LEN: usize = 24;

/// What the mark records: every event up to `seq` was acknowledged (made durable by sled's
/// flush) and the log up to it has chain `chain`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mark {
    /// The newest resourceVersion made durable before the mark was written.
    pub seq: u64,
    /// The chain of the log up to `seq` ([`chain`]).
    pub chain: u32,
}

/// The chain after the event `seq` whose record CRC is `record_crc`, continuing `prev` (the
/// chain of the events before it; 0 before the first event of the log).
pub fn chain(prev: u32, seq: u64, record_crc: u32) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(prev);
    h.update(&seq.to_be_bytes());
    h.update(&record_crc.to_be_bytes());
    h.finalize()
}

/// The record CRC of a stored event value (the frame's bytes 1..5), or 0 for a value too short
/// to hold one (such a value fails its own check first).
pub fn record_crc(value: &[u8]) -> u32 {
    value
        .get(1..super::record::HEADER)
        .map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")))
        .unwrap_or(0)
}

impl Mark {
    /// The 24 bytes of the file.
    pub fn encode(&self) -> [u8; MARK_LEN] {
        let mut out = [0u8; MARK_LEN];
        out[..8].copy_from_slice(MAGIC);
        out[8..16].copy_from_slice(&self.seq.to_be_bytes());
        out[16..20].copy_from_slice(&self.chain.to_be_bytes());
        let crc = crc32fast::hash(&out[..20]);
        out[20..].copy_from_slice(&crc.to_be_bytes());
        out
    }

    /// Decodes the file's bytes. Errors: a sentence saying what is wrong with them.
    pub fn decode(bytes: &[u8]) -> Result<Mark, String> {
        if bytes.len() != MARK_LEN {
            return Err(format!("{} bytes, a mark has {MARK_LEN}", bytes.len()));
        }
        if &bytes[..8] != MAGIC {
            return Err("not a high-water mark of this format (magic differs)".into());
        }
        let stored = u32::from_be_bytes(bytes[20..].try_into().expect("4 bytes"));
        let computed = crc32fast::hash(&bytes[..20]);
        if stored != computed {
            return Err(format!(
                "checksum mismatch (stored {stored:08x}, computed {computed:08x})"
            ));
        }
        Ok(Mark {
            seq: u64::from_be_bytes(bytes[8..16].try_into().expect("8 bytes")),
            chain: u32::from_be_bytes(bytes[16..20].try_into().expect("4 bytes")),
        })
    }
}

/// What the store directory holds as its mark.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MarkFile {
    /// No mark file (a new store, or one written before schema 4).
    Absent,
    /// A valid mark.
    Present(Mark),
    /// A mark file that does not decode: why.
    Damaged(String),
}

/// The mark's path in the store directory `dir`.
pub fn path(dir: &Path) -> PathBuf {
    dir.join(MARK_FILE)
}

/// Reads the mark of the store directory `dir`. Errors: I/O other than a missing file.
pub fn read(dir: &Path) -> std::io::Result<MarkFile> {
    match std::fs::read(path(dir)) {
        Ok(bytes) => Ok(match Mark::decode(&bytes) {
            Ok(m) => MarkFile::Present(m),
            Err(why) => MarkFile::Damaged(why),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(MarkFile::Absent),
        Err(e) => Err(e),
    }
}

/// Replaces the mark of `dir` with `mark`, atomically and durably: writes [`MARK_TMP`], fsyncs
/// it, renames it over [`MARK_FILE`], fsyncs the directory. A crash at any point leaves the old
/// mark or the new one, whole (a leftover temporary file is overwritten by the next write).
/// Failpoints: `store::mark::before_rename`, `store::mark::after`.
pub fn write(dir: &Path, mark: Mark) -> std::io::Result<()> {
    let tmp = dir.join(MARK_TMP);
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(&mark.encode())?;
        f.sync_data()?;
    }
    fail::fail_point!("store::mark::before_rename");
    std::fs::rename(&tmp, path(dir))?;
    std::fs::File::open(dir)?.sync_all()?;
    fail::fail_point!("store::mark::after");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_round_trips_and_every_flipped_byte_is_caught() {
        let mark = Mark {
            seq: 126,
            chain: 0xdead_beef,
        };
        let bytes = mark.encode();
        assert_eq!(Mark::decode(&bytes), Ok(mark));
        for i in 0..MARK_LEN {
            for bit in 0..8 {
                let mut bad = bytes;
                bad[i] ^= 1 << bit;
                assert!(Mark::decode(&bad).is_err(), "flip of bit {bit} of byte {i}");
            }
        }
        assert!(Mark::decode(&bytes[..23]).is_err());
        assert!(Mark::decode(&[]).is_err());
    }

    #[test]
    fn the_chain_is_the_crc_of_the_concatenation() {
        // chain(chain(0, 1, a), 2, b) = CRC-32 of 1·a·2·b (crc32fast continues a CRC).
        let (a, b) = (0x1111_2222u32, 0x3333_4444u32);
        let mut bytes = Vec::new();
        for (s, c) in [(1u64, a), (2, b)] {
            bytes.extend_from_slice(&s.to_be_bytes());
            bytes.extend_from_slice(&c.to_be_bytes());
        }
        assert_eq!(chain(chain(0, 1, a), 2, b), crc32fast::hash(&bytes));
        assert_ne!(
            chain(chain(0, 1, b), 2, a),
            chain(chain(0, 1, a), 2, b),
            "order matters"
        );
    }

    #[test]
    fn a_write_replaces_the_mark_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), MarkFile::Absent);
        write(dir.path(), Mark { seq: 1, chain: 7 }).unwrap();
        write(dir.path(), Mark { seq: 2, chain: 9 }).unwrap();
        assert_eq!(read(dir.path()).unwrap(), MarkFile::Present(Mark { seq: 2, chain: 9 }));
        assert!(!dir.path().join(MARK_TMP).exists());
        std::fs::write(path(dir.path()), b"short").unwrap();
        assert!(matches!(read(dir.path()).unwrap(), MarkFile::Damaged(_)));
    }
}
