//! The packed calls' encoding (contract 0.3: postcard 1's wire format) at
//! the level both sides write by hand: LEB128 lengths and length-prefixed
//! UTF-8. The guest SDK and the host each read and write whole records with
//! these, so the two ends cannot drift apart on a length.

use alloc::vec::Vec;

/// Appends `value` as a varint (LEB128: seven bits a byte, low bits first).
/// Inlined: most values are lengths under 128, one byte, and a call costs
/// more than writing it (most of all in a component).
#[inline]
pub fn put_varint(out: &mut Vec<u8>, value: usize) {
    if value < 0x80 {
        out.push(value as u8);
        return;
    }
    let mut value = value as u64;
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends `text` as a string: its length in bytes, then its UTF-8.
#[inline]
pub fn put_text(out: &mut Vec<u8>, text: &str) {
    put_varint(out, text.len());
    out.extend_from_slice(text.as_bytes());
}

/// Reads the varint at `*at` and moves past it; on failure `*at` is where
/// the problem is and the error says what it is. A one-byte varint (a
/// length under 128, the usual case) is read inline.
#[inline]
pub fn varint(bytes: &[u8], at: &mut usize) -> Result<usize, &'static str> {
    match bytes.get(*at) {
        Some(&byte) if byte < 0x80 => {
            *at += 1;
            Ok(usize::from(byte))
        }
        _ => long_varint(bytes, at),
    }
}

/// [`varint`] past its first byte's fast case.
fn long_varint(bytes: &[u8], at: &mut usize) -> Result<usize, &'static str> {
    let mut value: u64 = 0;
    for shift in (0..70).step_by(7) {
        let byte = *bytes.get(*at).ok_or("the buffer ends early")?;
        let bits = u64::from(byte & 0x7f);
        if shift == 63 && bits > 1 {
            return Err("a length over 64 bits");
        }
        *at += 1;
        value |= bits << shift;
        if byte & 0x80 == 0 {
            return usize::try_from(value).map_err(|_| "a length over usize");
        }
    }
    Err("a varint over ten bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_bad_ones_are_named() {
        for value in [
            0,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            usize::MAX >> 1,
            usize::MAX,
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            let mut at = 0;
            assert_eq!(varint(&out, &mut at), Ok(value));
            assert_eq!(at, out.len());
        }
        assert_eq!(varint(&[0x80], &mut 0), Err("the buffer ends early"));
        assert_eq!(varint(&[0xff; 11], &mut 0), Err("a length over 64 bits"));
        let mut text = Vec::new();
        put_text(&mut text, "é1");
        assert_eq!(text, [3, 0xc3, 0xa9, b'1']);
    }
}
