//! Finding the last of three bytes, sixteen bytes per step. `str::rfind`
//! walks one machine word per step, four bytes in wasm32, and finding each
//! marker on its own walks the text once per marker; this walks it once
//! for all of them. The step is the same everywhere it can be: three
//! byte compares of a 16-byte block and its byte mask, with wasm's 128-bit
//! SIMD in a component (which every engine that runs components has) and
//! SSE2 on x86-64 (part of its baseline), so the plugin linked natively and
//! the component run one algorithm; elsewhere eight bytes per step in a
//! 64-bit word.

/// The position of the last byte before `end` that is one of `needles`.
pub fn last_of_three(bytes: &[u8], end: usize, needles: [u8; 3]) -> Option<usize> {
    let end = end.min(bytes.len());
    #[cfg(target_arch = "wasm32")]
    let end = match wasm::last_in_blocks(bytes, end, needles) {
        Ok(found) => return Some(found),
        Err(end) => end,
    };
    #[cfg(target_arch = "x86_64")]
    let end = match x86_64::last_in_blocks(bytes, end, needles) {
        Ok(found) => return Some(found),
        Err(end) => end,
    };
    last_by_words(bytes, end, needles)
}

/// Bit i of a block's mask is byte i: the highest set bit is the last
/// match in the text.
fn last_in_mask(block_start: usize, mask: u32) -> usize {
    block_start + (31 - mask.leading_zeros() as usize)
}

#[cfg(target_arch = "wasm32")]
mod wasm {
    use core::arch::wasm32::{u8x16_bitmask, u8x16_eq, u8x16_splat, v128, v128_load, v128_or};

    /// The last match in whole 16-byte blocks before `end`, or the end of
    /// the bytes left before the first whole block.
    #[target_feature(enable = "simd128")]
    pub fn last_in_blocks(bytes: &[u8], mut end: usize, needles: [u8; 3]) -> Result<usize, usize> {
        let [a, b, c] = needles.map(|n| u8x16_splat(n));
        while end >= 16 {
            let block = &bytes[end - 16..end];
            // SAFETY: `block` is 16 readable bytes; v128 loads need no alignment.
            let v = unsafe { v128_load(block.as_ptr().cast::<v128>()) };
            let mask = u8x16_bitmask(v128_or(
                v128_or(u8x16_eq(v, a), u8x16_eq(v, b)),
                u8x16_eq(v, c),
            ));
            if mask != 0 {
                return Ok(super::last_in_mask(end - 16, u32::from(mask)));
            }
            end -= 16;
        }
        Err(end)
    }
}

#[cfg(target_arch = "x86_64")]
mod x86_64 {
    use core::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };

    /// The last match in whole 16-byte blocks before `end`, or the end of
    /// the bytes left before the first whole block.
    pub fn last_in_blocks(bytes: &[u8], mut end: usize, needles: [u8; 3]) -> Result<usize, usize> {
        // SAFETY (every intrinsic below): SSE2 is part of x86-64's baseline.
        let [a, b, c] = needles.map(|n| unsafe { _mm_set1_epi8(n as i8) });
        while end >= 16 {
            let block = &bytes[end - 16..end];
            // SAFETY: `block` is 16 readable bytes; `loadu` needs no alignment.
            let mask = unsafe {
                let v = _mm_loadu_si128(block.as_ptr().cast::<__m128i>());
                let hits = _mm_or_si128(
                    _mm_or_si128(_mm_cmpeq_epi8(v, a), _mm_cmpeq_epi8(v, b)),
                    _mm_cmpeq_epi8(v, c),
                );
                _mm_movemask_epi8(hits) as u32
            };
            if mask != 0 {
                return Ok(super::last_in_mask(end - 16, mask));
            }
            end -= 16;
        }
        Err(end)
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const LOW_SEVEN: u64 = 0x7f7f_7f7f_7f7f_7f7f;

/// 0x80 in every byte of `word` that is zero, 0 elsewhere (exact: no
/// false positives from borrows, unlike the shorter `(w - 1) & !w` form).
fn zero_bytes(word: u64) -> u64 {
    !(((word & LOW_SEVEN) + LOW_SEVEN) | word | LOW_SEVEN)
}

/// Marks (0x80) the bytes of `word` equal to any of `needles`.
fn word_matches(word: u64, needles: [u8; 3]) -> u64 {
    needles.iter().fold(0, |found, &b| {
        found | zero_bytes(word ^ (ONES * u64::from(b)))
    })
}

/// Eight bytes per step in a 64-bit word, the rest one at a time.
fn last_by_words(bytes: &[u8], mut end: usize, needles: [u8; 3]) -> Option<usize> {
    while end >= 8 {
        let chunk: [u8; 8] = bytes[end - 8..end].try_into().expect("eight bytes");
        let found = word_matches(u64::from_le_bytes(chunk), needles);
        if found != 0 {
            // Little-endian: the highest set byte is the last in the text.
            let last = 7 - found.leading_zeros() as usize / 8;
            return Some(end - 8 + last);
        }
        end -= 8;
    }
    bytes[..end].iter().rposition(|b| needles.contains(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_a_plain_search_everywhere() {
        let needles = [b'\\', b'#', b'A'];
        // Every needle and near-needle (0x80 | needle, needle ± 1) at
        // every offset of texts shorter and longer than a word.
        let alphabet = [
            b'\\',
            b'#',
            b'A',
            b'a',
            b'\\' | 0x80,
            b'#' + 1,
            b'A' - 1,
            0,
            0xff,
        ];
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for len in 0..40 {
            for _ in 0..200 {
                let text: Vec<u8> = (0..len)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        alphabet[(state % alphabet.len() as u64) as usize]
                    })
                    .collect();
                for end in 0..=len + 1 {
                    let expected = text[..end.min(len)]
                        .iter()
                        .rposition(|b| needles.contains(b));
                    assert_eq!(
                        last_of_three(&text, end, needles),
                        expected,
                        "{text:?} {end}"
                    );
                }
            }
        }
    }
}
