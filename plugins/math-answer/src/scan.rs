//! Finding the last of three bytes, many bytes per step. `str::rfind`
//! walks one machine word per step, four bytes in wasm32, and finding each
//! marker on its own walks the text once per marker; this walks it once
//! for all of them: sixteen bytes per step in a component (wasm's 128-bit
//! SIMD, which every engine that runs components has), eight elsewhere
//! (64-bit words, on every target).

const ONES: u64 = 0x0101_0101_0101_0101;
const LOW_SEVEN: u64 = 0x7f7f_7f7f_7f7f_7f7f;

/// 0x80 in every byte of `word` that is zero, 0 elsewhere (exact: no
/// false positives from borrows, unlike the shorter `(w - 1) & !w` form).
fn zero_bytes(word: u64) -> u64 {
    !(((word & LOW_SEVEN) + LOW_SEVEN) | word | LOW_SEVEN)
}

/// Marks (0x80) the bytes of `word` equal to any of `needles`.
fn matches(word: u64, needles: [u8; 3]) -> u64 {
    needles.iter().fold(0, |found, &b| {
        found | zero_bytes(word ^ (ONES * u64::from(b)))
    })
}

/// The position of the last byte before `end` that is one of `needles`.
pub fn last_of_three(bytes: &[u8], end: usize, needles: [u8; 3]) -> Option<usize> {
    #[cfg(target_arch = "wasm32")]
    return simd128::last_of_three(bytes, end, needles);
    #[cfg(not(target_arch = "wasm32"))]
    last_of_three_by_words(bytes, end, needles)
}

/// Sixteen bytes per step with wasm's SIMD; the last partial step by words.
#[cfg(target_arch = "wasm32")]
mod simd128 {
    use core::arch::wasm32::{u8x16, u8x16_bitmask, u8x16_eq, u8x16_splat, v128_or};

    #[target_feature(enable = "simd128")]
    pub fn last_of_three(bytes: &[u8], end: usize, needles: [u8; 3]) -> Option<usize> {
        let mut end = end.min(bytes.len());
        let [a, b, c] = [0, 1, 2].map(|i| u8x16_splat(needles[i]));
        while end >= 16 {
            let w: &[u8; 16] = bytes[end - 16..end].try_into().expect("sixteen bytes");
            let v = u8x16(
                w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8], w[9], w[10], w[11], w[12],
                w[13], w[14], w[15],
            );
            let found = u8x16_bitmask(v128_or(
                v128_or(u8x16_eq(v, a), u8x16_eq(v, b)),
                u8x16_eq(v, c),
            ));
            if found != 0 {
                // Bit i is byte i: the highest set bit is the last in the text.
                return Some(end - 16 + (15 - found.leading_zeros() as usize));
            }
            end -= 16;
        }
        super::last_of_three_by_words(bytes, end, needles)
    }
}

/// Eight bytes per step in a 64-bit word.
fn last_of_three_by_words(bytes: &[u8], end: usize, needles: [u8; 3]) -> Option<usize> {
    let mut end = end.min(bytes.len());
    while end >= 8 {
        let chunk: [u8; 8] = bytes[end - 8..end].try_into().expect("eight bytes");
        let found = matches(u64::from_le_bytes(chunk), needles);
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
