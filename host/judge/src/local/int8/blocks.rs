//! GGUF's block formats, read as unsigned integers with a scale
//! and an offset per block: every value is `scale · q + offset` exactly,
//! with `q` in `0..=255`. That one form is what the integer products
//! multiply, whatever the file's format was.
//!
//! Layouts (ggml's `block_q4_0` … `block_q8_0`, little-endian):
//! - Q4_0, 18 bytes: f16 `d`, 16 bytes of nibbles; `d · (q − 8)`.
//! - Q4_1, 20 bytes: f16 `d`, f16 `m`, 16 bytes of nibbles; `d · q + m`.
//! - Q5_0, 22 bytes: f16 `d`, 32 high bits, 16 bytes of nibbles; `d · (q − 16)`.
//! - Q5_1, 24 bytes: f16 `d`, f16 `m`, 32 high bits, nibbles; `d · q + m`.
//! - Q8_0, 34 bytes: f16 `d`, 32 signed bytes; `d · q`, stored as `q + 128`.
//!
//! In a nibble block, byte `j` holds value `j` in its low half and value
//! `j + 16` in its high half.
//!
//! The k-quant super-blocks of 256 values split into eight sub-blocks of
//! 32, each `(d · sc) · q − dmin · m` with 6-bit `sc` and `m`, so they take
//! the same form exactly (ggml's `block_q4_K`, `block_q5_K`):
//! - Q4_K, 144 bytes: f16 `d`, f16 `dmin`, 12 bytes of packed `sc`/`m`,
//!   128 bytes of nibbles: bytes `32k ..` hold sub-block `2k` in their low
//!   halves and `2k + 1` in their high halves.
//! - Q5_K, 176 bytes: as Q4_K with 32 bytes of fifth bits before the
//!   nibbles: bit `2k` of byte `l` is value `l` of sub-block `2k`, bit
//!   `2k + 1` value `l` of sub-block `2k + 1`.
//!
//! Q6_K's sub-blocks are 16 values wide, so it stays with candle's kernel.

use candle_core::quantized::GgmlDType;

/// Values in a block.
pub const BLOCK: usize = 32;

/// The block formats the integer products read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockFormat {
    /// 4 bits, symmetric.
    Q4_0,
    /// 4 bits with a minimum.
    Q4_1,
    /// 5 bits, symmetric.
    Q5_0,
    /// 5 bits with a minimum.
    Q5_1,
    /// 8 bits, symmetric.
    Q8_0,
    /// 4 bits, super-blocks of 256 with 6-bit sub-block scales and minima.
    Q4K,
    /// 5 bits, likewise.
    Q5K,
}

/// One block, unpacked: `value[i] = scale · q[i] + offset`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UnsignedBlock {
    /// The values' integers.
    pub q: [u8; BLOCK],
    /// What one step of `q` is worth.
    pub scale: f32,
    /// The value of `q = 0`.
    pub offset: f32,
}

impl BlockFormat {
    /// The format of `dtype`, if it is one of these.
    pub fn of(dtype: GgmlDType) -> Option<Self> {
        Some(match dtype {
            GgmlDType::Q4_0 => BlockFormat::Q4_0,
            GgmlDType::Q4_1 => BlockFormat::Q4_1,
            GgmlDType::Q5_0 => BlockFormat::Q5_0,
            GgmlDType::Q5_1 => BlockFormat::Q5_1,
            GgmlDType::Q8_0 => BlockFormat::Q8_0,
            GgmlDType::Q4K => BlockFormat::Q4K,
            GgmlDType::Q5K => BlockFormat::Q5K,
            _ => return None,
        })
    }

    /// Values of one block in the file (a whole number of 32-value blocks).
    pub fn values(self) -> usize {
        match self {
            BlockFormat::Q4K | BlockFormat::Q5K => 256,
            _ => BLOCK,
        }
    }

    /// Bytes of one block in the file.
    pub fn bytes(self) -> usize {
        match self {
            BlockFormat::Q4K => 144,
            BlockFormat::Q5K => 176,
            BlockFormat::Q4_0 => 18,
            BlockFormat::Q4_1 => 20,
            BlockFormat::Q5_0 => 22,
            BlockFormat::Q5_1 => 24,
            BlockFormat::Q8_0 => 34,
        }
    }

    /// Unpacks one block of the file (`raw`, exactly [`Self::bytes`] long)
    /// into its blocks of 32 values, passed to `each` in order.
    pub fn unpack(self, raw: &[u8], mut each: impl FnMut(UnsignedBlock)) {
        match self {
            BlockFormat::Q4K | BlockFormat::Q5K => unpack_k(self, raw, each),
            _ => each(self.unpack_block(raw)),
        }
    }

    fn unpack_block(self, raw: &[u8]) -> UnsignedBlock {
        debug_assert_eq!(raw.len(), self.bytes());
        let half = |at: usize| f16_to_f32(u16::from_le_bytes([raw[at], raw[at + 1]]));
        let d = half(0);
        let mut q = [0u8; BLOCK];
        let nibbles = |q: &mut [u8; BLOCK], bytes: &[u8]| {
            for (j, &byte) in bytes.iter().enumerate() {
                q[j] = byte & 0x0F;
                q[j + 16] = byte >> 4;
            }
        };
        let high_bits = |q: &mut [u8; BLOCK], at: usize| {
            let bits = u32::from_le_bytes([raw[at], raw[at + 1], raw[at + 2], raw[at + 3]]);
            for (j, value) in q.iter_mut().enumerate() {
                *value |= (((bits >> j) & 1) as u8) << 4;
            }
        };
        let offset = match self {
            BlockFormat::Q4_0 => {
                nibbles(&mut q, &raw[2..18]);
                -8.0 * d
            }
            BlockFormat::Q4_1 => {
                nibbles(&mut q, &raw[4..20]);
                half(2)
            }
            BlockFormat::Q5_0 => {
                nibbles(&mut q, &raw[6..22]);
                high_bits(&mut q, 2);
                -16.0 * d
            }
            BlockFormat::Q5_1 => {
                nibbles(&mut q, &raw[8..24]);
                high_bits(&mut q, 4);
                half(2)
            }
            BlockFormat::Q8_0 => {
                for (value, &byte) in q.iter_mut().zip(&raw[2..34]) {
                    *value = (byte as i8 as i16 + 128) as u8;
                }
                -128.0 * d
            }
            BlockFormat::Q4K | BlockFormat::Q5K => unreachable!("super-blocks unpack in unpack_k"),
        };
        UnsignedBlock {
            q,
            scale: d,
            offset,
        }
    }
}

/// The eight sub-blocks of a Q4_K or Q5_K super-block.
fn unpack_k(format: BlockFormat, raw: &[u8], mut each: impl FnMut(UnsignedBlock)) {
    debug_assert_eq!(raw.len(), format.bytes());
    let half = |at: usize| f16_to_f32(u16::from_le_bytes([raw[at], raw[at + 1]]));
    let (d, dmin) = (half(0), half(2));
    let packed = &raw[4..16];
    // ggml's `get_scale_min_k4`: sub-block j's 6-bit scale and minimum.
    let scale_min = |j: usize| -> (u8, u8) {
        if j < 4 {
            (packed[j] & 63, packed[j + 4] & 63)
        } else {
            (
                (packed[j + 4] & 0x0F) | ((packed[j - 4] >> 6) << 4),
                (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4),
            )
        }
    };
    let (fifth_bits, nibbles) = match format {
        BlockFormat::Q5K => (Some(&raw[16..48]), &raw[48..176]),
        _ => (None, &raw[16..144]),
    };
    for j in 0..8 {
        let bytes = &nibbles[32 * (j / 2)..32 * (j / 2 + 1)];
        let mut q = [0u8; BLOCK];
        for (l, value) in q.iter_mut().enumerate() {
            let nibble = if j % 2 == 0 {
                bytes[l] & 0x0F
            } else {
                bytes[l] >> 4
            };
            let fifth = fifth_bits.map_or(0, |bits| ((bits[l] >> j) & 1) << 4);
            *value = nibble | fifth;
        }
        let (sc, m) = scale_min(j);
        each(UnsignedBlock {
            q,
            scale: d * f32::from(sc),
            offset: -(dmin * f32::from(m)),
        });
    }
}

/// IEEE half precision to single (exact: every f16 is an f32).
fn f16_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits >> 15) << 31;
    let exponent = u32::from((bits >> 10) & 0x1F);
    let mantissa = u32::from(bits & 0x3FF);
    let magnitude = match (exponent, mantissa) {
        (0, 0) => 0,
        // Subnormal: mantissa · 2⁻²⁴, normalized for f32.
        (0, m) => {
            let shift = m.leading_zeros() - 21;
            let m = (m << shift) & 0x3FF;
            ((127 - 15 + 1 - shift) << 23) | (m << 13)
        }
        (0x1F, m) => (0xFF << 23) | (m << 13),
        (e, m) => ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(sign | magnitude)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_converts_exactly() {
        for (bits, value) in [
            (0x3C00u16, 1.0f32),
            (0xC000, -2.0),
            (0x0001, 2f32.powi(-24)),
            (0x03FF, 1023.0 * 2f32.powi(-24)),
            (0x7BFF, 65504.0),
            (0x0000, 0.0),
            (0x3555, 0.333_251_95),
        ] {
            assert_eq!(f16_to_f32(bits), value, "{bits:#06x}");
        }
        assert!(f16_to_f32(0x7C00).is_infinite());
        assert!(f16_to_f32(0x7E00).is_nan());
    }
}
