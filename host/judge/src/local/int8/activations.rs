//! Token rows quantized to signed bytes, 32 values a block with one scale
//! each (ggml's Q8_1: the form llama.cpp multiplies 4- and 5-bit weights
//! with). Each block also keeps `scale · Σq`, which the weights' offsets
//! multiply.

use super::blocks::BLOCK;
use std::sync::Mutex;

/// `rows × inner` values as `scale[r][b] · q[r][i]`.
pub struct QuantizedRows {
    /// Token rows.
    pub rows: usize,
    /// Values a row (a multiple of 32).
    pub inner: usize,
    q: Vec<i8>,
    scale: Vec<f32>,
    scaled_sum: Vec<f32>,
}

/// Rows from which quantizing is split between threads.
const PARALLEL_ROWS: usize = 16;

/// A block's values and where its bytes go.
type BlockIn<'a> = (&'a [f32], &'a mut [i8]);
/// Where a block's scale and `scale · Σq` go.
type ScalesOut<'a> = (&'a mut f32, &'a mut f32);

/// What quantizes one block: writes the bytes and returns the scale and
/// `scale · Σq`.
type QuantizeBlock = fn(&[f32; BLOCK], &mut [i8; BLOCK]) -> (f32, f32);

/// The fastest way this CPU quantizes a block.
fn block_quantizer() -> QuantizeBlock {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") {
        return |block, out| {
            // SAFETY: the CPU has AVX-512 F (checked just above).
            unsafe { avx512::quantize_block(block, out) }
        };
    }
    quantize_block
}

/// One block to the nearest of 255 levels (ties to even, as llama.cpp's
/// SIMD code rounds).
fn quantize_block(block: &[f32; BLOCK], out: &mut [i8; BLOCK]) -> (f32, f32) {
    if !block.iter().all(|v| v.is_finite()) {
        // A non-finite value makes the block's products NaN, as a float
        // product would be.
        return (f32::NAN, f32::NAN);
    }
    let amax = block.iter().fold(0f32, |m, v| m.max(v.abs()));
    if amax == 0.0 {
        *out = [0; BLOCK];
        return (0.0, 0.0);
    }
    let inverse = 127.0 / amax;
    let mut sum = 0i32;
    for (o, v) in out.iter_mut().zip(block) {
        *o = (v * inverse).round_ties_even() as i8;
        sum += i32::from(*o);
    }
    let d = amax / 127.0;
    (d, d * sum as f32)
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::BLOCK;
    use std::arch::x86_64::*;

    /// [`super::quantize_block`] in AVX-512: the same bytes and scales.
    ///
    /// # Safety
    /// The CPU has AVX-512 F.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn quantize_block(block: &[f32; BLOCK], out: &mut [i8; BLOCK]) -> (f32, f32) {
        // SAFETY: `block` holds 32 f32, two unaligned loads of 16.
        let (lo, hi) = unsafe {
            (
                _mm512_loadu_ps(block.as_ptr()),
                _mm512_loadu_ps(block.as_ptr().add(16)),
            )
        };
        let (abs_lo, abs_hi) = (_mm512_abs_ps(lo), _mm512_abs_ps(hi));
        // Ordered comparisons: NaN is not ≤ MAX, nor is infinity.
        let largest = _mm512_set1_ps(f32::MAX);
        let finite = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(abs_lo, largest)
            & _mm512_cmp_ps_mask::<_CMP_LE_OQ>(abs_hi, largest);
        if finite != 0xFFFF {
            return (f32::NAN, f32::NAN);
        }
        let amax = _mm512_reduce_max_ps(_mm512_max_ps(abs_lo, abs_hi));
        if amax == 0.0 {
            *out = [0; BLOCK];
            return (0.0, 0.0);
        }
        let inverse = _mm512_set1_ps(127.0 / amax);
        // The default rounding mode: to nearest, ties to even.
        let q_lo = _mm512_cvtps_epi32(_mm512_mul_ps(lo, inverse));
        let q_hi = _mm512_cvtps_epi32(_mm512_mul_ps(hi, inverse));
        let sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q_lo, q_hi));
        // SAFETY: `out` holds 32 bytes, two unaligned stores of 16.
        unsafe {
            _mm_storeu_si128(out.as_mut_ptr().cast(), _mm512_cvtepi32_epi8(q_lo));
            _mm_storeu_si128(out.as_mut_ptr().add(16).cast(), _mm512_cvtepi32_epi8(q_hi));
        }
        let d = amax / 127.0;
        (d, d * sum as f32)
    }
}

impl QuantizedRows {
    /// Quantizes `values` (`rows × inner`, row-major; `inner` a multiple of
    /// 32) to the nearest of 255 levels per block.
    pub fn quantize(values: &[f32], inner: usize) -> Self {
        assert!(inner > 0 && inner.is_multiple_of(BLOCK), "inner {inner}");
        assert!(
            values.len().is_multiple_of(inner),
            "{} values",
            values.len()
        );
        let rows = values.len() / inner;
        let blocks = values.len() / BLOCK;
        let mut q = vec![0i8; values.len()];
        let mut scale = vec![0f32; blocks];
        let mut scaled_sum = vec![0f32; blocks];
        let quantize_block = block_quantizer();
        let each = |((block, out), (d, s)): (BlockIn<'_>, ScalesOut<'_>)| {
            (*d, *s) = quantize_block(block.try_into().unwrap(), out.try_into().unwrap());
        };
        let pool = candle_core::utils::barrier_pool();
        let parts = if rows >= PARALLEL_ROWS {
            pool.n_workers() + 1
        } else {
            1
        };
        // One part of the rows per thread of candle's pool (each thread
        // takes its own part's lock, so none waits on another).
        let per_part = rows.div_ceil(parts) * inner;
        let work: Vec<Mutex<_>> = values
            .chunks(per_part)
            .zip(q.chunks_mut(per_part))
            .zip(scale.chunks_mut(per_part / BLOCK))
            .zip(scaled_sum.chunks_mut(per_part / BLOCK))
            .map(Mutex::new)
            .collect();
        let run = |part: usize| {
            let Some(Ok(mut part)) = work.get(part).map(Mutex::lock) else {
                return;
            };
            let (((values, q), scale), scaled_sum) = &mut *part;
            let blocks_in = values.chunks_exact(BLOCK).zip(q.chunks_exact_mut(BLOCK));
            let scales_out = scale.iter_mut().zip(scaled_sum.iter_mut());
            blocks_in.zip(scales_out).for_each(each);
        };
        match work.len() {
            0 => {}
            1 => run(0),
            _ => pool.execute(run),
        }
        drop(work);
        QuantizedRows {
            rows,
            inner,
            q,
            scale,
            scaled_sum,
        }
    }

    /// Blocks in a row.
    pub fn blocks(&self) -> usize {
        self.inner / BLOCK
    }

    /// The quantized values of row `row`.
    pub fn row(&self, row: usize) -> &[i8] {
        &self.q[row * self.inner..(row + 1) * self.inner]
    }

    /// Scale of block `block` of row `row`.
    pub fn scale(&self, row: usize, block: usize) -> f32 {
        self.scale[row * self.blocks() + block]
    }

    /// `scale · Σq` of block `block` of row `row`.
    pub fn scaled_sum(&self, row: usize, block: usize) -> f32 {
        self.scaled_sum[row * self.blocks() + block]
    }

    /// The scales of row `row`'s blocks.
    pub fn row_scales(&self, row: usize) -> (&[f32], &[f32]) {
        let b = self.blocks();
        (
            &self.scale[row * b..(row + 1) * b],
            &self.scaled_sum[row * b..(row + 1) * b],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_within_half_a_level_of_its_values() {
        let values: Vec<f32> = (0..64)
            .map(|i| ((i * 37 % 29) as f32 - 14.0) * 0.37)
            .collect();
        let rows = QuantizedRows::quantize(&values, 64);
        for b in 0..2 {
            let d = rows.scale(0, b);
            let mut sum = 0f32;
            for i in 0..BLOCK {
                let back = d * f32::from(rows.row(0)[b * BLOCK + i]);
                assert!((back - values[b * BLOCK + i]).abs() <= d / 2.0 + 1e-6);
                sum += back;
            }
            assert!((rows.scaled_sum(0, b) - sum).abs() < 1e-4);
        }
    }

    #[test]
    fn the_fast_quantizer_gives_the_portable_ones_bytes_and_scales() {
        let fast = block_quantizer();
        for seed in 0..200u32 {
            let block: [f32; BLOCK] = std::array::from_fn(|i| {
                let h = (seed * 31 + i as u32).wrapping_mul(2_654_435_761);
                // Some values fall exactly on a half level.
                if i == 5 {
                    63.5
                } else {
                    (h >> 8) as f32 / (1 << 20) as f32 - 8.0
                }
            });
            let (mut a, mut b) = ([0i8; BLOCK], [0i8; BLOCK]);
            assert_eq!(fast(&block, &mut a), quantize_block(&block, &mut b));
            assert_eq!(a, b, "seed {seed}");
        }
    }

    #[test]
    fn a_block_of_zeros_has_scale_zero_and_a_non_finite_one_is_nan() {
        let mut values = vec![0f32; 96];
        values[40] = f32::INFINITY;
        values[70] = f32::NAN;
        let rows = QuantizedRows::quantize(&values, 32);
        assert_eq!(rows.scale(0, 0), 0.0);
        assert!(rows.scale(1, 0).is_nan() && rows.scaled_sum(1, 0).is_nan());
        assert!(rows.scale(2, 0).is_nan());
    }
}
