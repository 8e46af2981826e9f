//! The checksummed record frame of schema 3 (`migrations/0003-checksums.md`): every value of
//! the `events` and `snapshots` trees is `[0xC3][CRC-32 of the payload, u32 big-endian][payload]`.
//!
//! Owns framing, unframing and telling a legacy (schema 1–2, unframed) value from a framed one.
//! It must not interpret the payload: the store decodes it ([`crate::event::Event::decode`] for
//! events, JSON of [`crate::state::State`] for snapshots).
//!
//! The checksum is CRC-32 (IEEE 802.3 polynomial, the one of zlib, gzip and PNG) computed with
//! the `crc32fast` crate. It detects every single flipped bit, every burst of up to 32 bits, and
//! a truncation or extension of the value (the CRC then covers different bytes). It is a guard
//! against storage faults, not against an attacker with write access to the data directory.

/// First byte of a framed value. Legacy event envelopes start with their `schema` as a u32
/// little-endian (`01` or `02`) and legacy snapshots with `{`, so the tag tells them apart.
pub const TAG: u8 = 0xC3;

/// Bytes before the payload: the tag and the CRC.
pub const HEADER: usize = 5;

/// Why a stored value is not a valid frame.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Shorter than the header: the value was truncated.
    #[error("the value is truncated ({len} bytes, a record has at least {HEADER})")]
    Truncated { len: usize },
    /// The first byte is not [`TAG`]: an unframed (pre-schema-3) value in a schema-3 store, or a
    /// damaged first byte.
    #[error("the value has no checksum frame (first byte {first:#04x}, expected {TAG:#04x})")]
    Untagged { first: u8 },
    /// The payload's CRC differs from the stored one: a changed or truncated payload.
    #[error("checksum mismatch (stored {stored:08x}, computed {computed:08x} over {len} payload bytes)")]
    Checksum { stored: u32, computed: u32, len: usize },
}

/// CRC-32 (IEEE) of `bytes`.
pub fn crc(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// Frames `payload`: tag, CRC, payload.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.push(TAG);
    out.extend_from_slice(&crc(payload).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Frames the payload `write` appends to the buffer it is given, without copying it: the
/// header is reserved first and its CRC filled in after.
pub fn frame_with(write: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(&[TAG, 0, 0, 0, 0]);
    write(&mut out);
    let crc = crc(&out[HEADER..]);
    out[1..HEADER].copy_from_slice(&crc.to_be_bytes());
    out
}

/// The payload of a framed value, after checking its CRC.
pub fn unframe(value: &[u8]) -> Result<&[u8], FrameError> {
    if value.len() < HEADER {
        // An empty value or a lone tag cannot even say whether it was framed.
        return Err(FrameError::Truncated { len: value.len() });
    }
    if value[0] != TAG {
        return Err(FrameError::Untagged { first: value[0] });
    }
    let stored = u32::from_be_bytes(value[1..HEADER].try_into().expect("4 bytes"));
    let payload = &value[HEADER..];
    let computed = crc(payload);
    if stored != computed {
        return Err(FrameError::Checksum {
            stored,
            computed,
            len: payload.len(),
        });
    }
    Ok(payload)
}

/// True when `value` starts with the frame's tag (it may still fail [`unframe`]). Used by the
/// 0003 upgrade to tell what it has already framed from what it has not.
pub fn is_framed(value: &[u8]) -> bool {
    value.first() == Some(&TAG)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_round_trips_and_every_single_bit_flip_is_caught() {
        let payload = b"{\"seq\":3,\"pools\":{}}".to_vec();
        let framed = frame(&payload);
        assert_eq!(unframe(&framed).unwrap(), &payload[..]);
        assert_eq!(frame_with(|b| b.extend_from_slice(&payload)), framed);
        for byte in 0..framed.len() {
            for bit in 0..8 {
                let mut bad = framed.clone();
                bad[byte] ^= 1 << bit;
                assert!(
                    unframe(&bad).is_err(),
                    "flip of bit {bit} of byte {byte} went unnoticed"
                );
            }
        }
    }

    #[test]
    fn truncations_and_legacy_values_are_refused() {
        let framed = frame(b"payload");
        for len in 0..framed.len() {
            assert!(unframe(&framed[..len]).is_err(), "truncated to {len}");
        }
        assert_eq!(unframe(&framed[..3]), Err(FrameError::Truncated { len: 3 }));
        assert_eq!(unframe(b"{\"seq\":1}"), Err(FrameError::Untagged { first: b'{' }));
        assert!(!is_framed(&[2, 0, 0, 0]));
        assert!(is_framed(&framed));
        // The CRC-32/IEEE check value of "123456789" (the catalogue's `check`).
        assert_eq!(crc(b"123456789"), 0xCBF4_3926);
    }
}
