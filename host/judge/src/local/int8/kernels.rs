//! The products of one stripe of tiles (16 outputs) with up to
//! [`MAX_ROWS`] quantized token rows: an AVX-512 VNNI kernel and a
//! portable one that defines what it computes.
//!
//! For each block, the integer dot product `Σ q_w · q_x` of the weights'
//! unsigned bytes and the row's signed bytes is exact; the block then adds
//! `dot · (scale_w · scale_x) + offset_w · (scale_x · Σq_x)` to the output
//! in f32. Rows are handled [`MAX_ROWS`] at a time so that each tile loaded
//! is used by every row of the group.

use super::activations::QuantizedRows;
use super::blocks::BLOCK;
use super::tiles::{GROUP, TILE_OUTPUTS, Tile};

/// Token rows one kernel call handles.
pub const MAX_ROWS: usize = 8;

/// Outputs of a kernel call: `[row][output]`.
pub type RowsOut = [[f32; TILE_OUTPUTS]; MAX_ROWS];

/// The kernels this CPU runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// AVX-512 with VNNI (`vpdpbusd`): Ice Lake and later Xeons, Zen 4.
    Avx512Vnni,
    /// Plain Rust: any CPU, much slower than the float products it would
    /// replace, so it is used only by tests and as the reference.
    Portable,
}

impl Kernel {
    /// The fastest kernel this CPU has.
    pub fn detect() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vnni")
        {
            return Kernel::Avx512Vnni;
        }
        Kernel::Portable
    }

    /// Whether this kernel beats the float products it replaces.
    pub fn is_fast(self) -> bool {
        self != Kernel::Portable
    }

    /// Rows `first .. first + count` of `rows` times the stripe `tiles`
    /// into `out[..count]`.
    pub(super) fn run(
        self,
        tiles: &[Tile],
        rows: &QuantizedRows,
        first: usize,
        count: usize,
        out: &mut RowsOut,
    ) {
        assert!((1..=MAX_ROWS).contains(&count) && first + count <= rows.rows);
        assert_eq!(tiles.len(), rows.blocks());
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512Vnni => {
                macro_rules! rows_of {
                    ($($n:literal)*) => {
                        match count {
                            // SAFETY: `detect` chose this kernel only where the
                            // CPU has AVX-512 F, BW and VNNI; the bounds are
                            // asserted above.
                            $($n => unsafe { avx512::stripe::<$n>(tiles, rows, first, out) },)*
                            _ => unreachable!(),
                        }
                    };
                }
                rows_of!(1 2 3 4 5 6 7 8)
            }
            #[cfg(not(target_arch = "x86_64"))]
            Kernel::Avx512Vnni => unreachable!("detected only on x86_64"),
            Kernel::Portable => portable(tiles, rows, first, count, out),
        }
    }
}

fn portable(tiles: &[Tile], rows: &QuantizedRows, first: usize, count: usize, out: &mut RowsOut) {
    for (r, out) in out.iter_mut().enumerate().take(count) {
        let x = rows.row(first + r);
        let (scales, sums) = rows.row_scales(first + r);
        let mut acc = [0f32; TILE_OUTPUTS];
        for (b, tile) in tiles.iter().enumerate() {
            let xb = &x[b * BLOCK..(b + 1) * BLOCK];
            for (o, acc) in acc.iter_mut().enumerate() {
                let mut dot = 0i32;
                for (g, xg) in xb.chunks_exact(GROUP).enumerate() {
                    let w = &tile.q[g * GROUP * TILE_OUTPUTS + o * GROUP..][..GROUP];
                    for (&w, &x) in w.iter().zip(xg) {
                        dot += i32::from(w) * i32::from(x);
                    }
                }
                *acc += dot as f32 * (tile.scale[o] * scales[b]) + tile.offset[o] * sums[b];
            }
        }
        *out = acc;
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::*;
    use std::arch::x86_64::*;

    /// `R` rows through one stripe.
    ///
    /// # Safety
    /// The CPU has AVX-512 F, BW and VNNI; `first + R <= rows.rows` and
    /// `tiles.len() == rows.blocks()`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn stripe<const R: usize>(
        tiles: &[Tile],
        rows: &QuantizedRows,
        first: usize,
        out: &mut RowsOut,
    ) {
        let x: [*const i8; R] = std::array::from_fn(|r| rows.row(first + r).as_ptr());
        let scales: [(&[f32], &[f32]); R] = std::array::from_fn(|r| rows.row_scales(first + r));
        let mut acc = [_mm512_setzero_ps(); R];
        for (b, tile) in tiles.iter().enumerate() {
            let mut dots = [_mm512_setzero_si512(); R];
            for g in 0..BLOCK / GROUP {
                // SAFETY: `tile.q` is 512 bytes, 64-aligned (`Tile` is
                // `align(64)` and `q` its first field); `g < 8`.
                let w = unsafe { _mm512_load_si512(tile.q.as_ptr().add(g * 64).cast()) };
                for r in 0..R {
                    // SAFETY: row `first + r` has `blocks · 32` bytes and
                    // `b · 32 + 4g + 4 <= blocks · 32`.
                    let four = unsafe {
                        x[r].add(b * BLOCK + g * GROUP)
                            .cast::<i32>()
                            .read_unaligned()
                    };
                    dots[r] = _mm512_dpbusd_epi32(dots[r], w, _mm512_set1_epi32(four));
                }
            }
            // SAFETY: 16 f32 each, 64-aligned within the tile.
            let (scale, offset) = unsafe {
                (
                    _mm512_load_ps(tile.scale.as_ptr()),
                    _mm512_load_ps(tile.offset.as_ptr()),
                )
            };
            for r in 0..R {
                let (x_scale, x_sum) = (scales[r].0[b], scales[r].1[b]);
                let both = _mm512_mul_ps(scale, _mm512_set1_ps(x_scale));
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots[r]), both, acc[r]);
                acc[r] = _mm512_fmadd_ps(offset, _mm512_set1_ps(x_sum), acc[r]);
            }
        }
        for r in 0..R {
            // SAFETY: `out[r]` holds 16 f32.
            unsafe { _mm512_storeu_ps(out[r].as_mut_ptr(), acc[r]) };
        }
    }
}
