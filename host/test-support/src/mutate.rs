//! Seeded byte mutations for fuzzing file readers: bit flips, numbers at
//! the edges of every width written over a field, cuts and duplicated
//! pieces, mostly near the start where headers are.

/// Numbers that break arithmetic: zero, one, the edges of every width.
pub const EXTREMES: &[u64] = &[
    0,
    1,
    2,
    3,
    7,
    255,
    256,
    65_535,
    1 << 20,
    (1 << 31) - 1,
    1 << 31,
    u32::MAX as u64,
    1 << 32,
    1 << 40,
    (1 << 63) - 1,
    1 << 63,
    u64::MAX,
];

/// One to four random edits of `seed`; `below(n)` draws from `0..n`
/// (the caller's seeded generator).
pub fn mutate_bytes(seed: &[u8], below: &mut dyn FnMut(usize) -> usize) -> Vec<u8> {
    let mut out = seed.to_vec();
    for _ in 0..1 + below(4) {
        // Four edits in five land in the first 8 KiB: headers, metadata.
        let span = if below(5) == 0 {
            out.len()
        } else {
            out.len().min(8192)
        };
        let at = below(span.max(1));
        match below(4) {
            0 if !out.is_empty() => {
                let i = at.min(out.len() - 1);
                out[i] ^= 1 << below(8);
            }
            1 => {
                let width = [1usize, 2, 4, 8][below(4)];
                let bytes = EXTREMES[below(EXTREMES.len())].to_le_bytes();
                for (i, byte) in bytes[..width].iter().enumerate() {
                    if let Some(slot) = out.get_mut(at + i) {
                        *slot = *byte;
                    }
                }
            }
            2 => out.truncate(at),
            _ => {
                let at = at.min(out.len());
                let end = (at + 1 + below(64)).min(out.len());
                let piece = out[at..end].to_vec();
                out.splice(at..at, piece);
            }
        }
    }
    out
}
