//! Integer products of GGUF's block formats whose values are `scale · q +
//! offset` per 32 (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, and the k-quants Q4_K and
//! Q5_K) with token rows quantized to bytes, as llama.cpp computes them:
//! candle runs the 32-value formats either with scalar code (Q4_1, Q5_*)
//! or, for inputs not a multiple of 256 wide (SmolLM2's 576, Gemma 3's
//! 640), one dot product per output and row, so before this the judge
//! widened them to f32 and spent half its time in float products; its
//! k-quant kernels take one row at a time.
//!
//! The weights are repacked once at load (`tiles`: 1.25 bytes a weight,
//! a quarter of f32), each product quantizes its rows (`activations`) and
//! runs the stripes of 16 outputs on candle's CPU thread pool (`kernels`),
//! the pool every other op of the decoder runs on: a second pool's threads
//! would wake and spin against candle's on the same cores.

mod activations;
mod blocks;
mod kernels;
mod tiles;

use crate::config::WeightProducts;
pub use activations::QuantizedRows;
pub use blocks::BlockFormat;
pub use kernels::Kernel;
use kernels::{MAX_ROWS, RowsOut};
use std::ops::Range;
use tiles::{TILE_OUTPUTS, TiledMatrix};

/// A weight matrix `[outputs, inputs]` held for integer products.
pub struct Int8Matrix {
    matrix: TiledMatrix,
    kernel: Kernel,
}

/// The destination of a product, written by several threads at disjoint
/// cells.
struct Cells(*mut f32);
// SAFETY: each stripe's task writes only its own 16 columns of each row
// (below), so no two threads write one cell, and the buffer outlives the
// parallel loop that uses it.
unsafe impl Sync for Cells {}

/// The kernel the judge's block-format matrices run on `device` when
/// `products` asks for integer ones: `None` off the CPU, or where no kernel
/// here beats the float products.
pub fn kernel_for(device: &candle_core::Device, products: WeightProducts) -> Option<Kernel> {
    let kernel = Kernel::detect();
    let wanted = products == WeightProducts::Int8;
    (wanted && device.is_cpu() && kernel.is_fast()).then_some(kernel)
}

impl Int8Matrix {
    /// The matrix in `raw`, the file's bytes of an `[outputs, inputs]`
    /// tensor in `format`, run by `kernel`.
    pub fn new(
        format: BlockFormat,
        outputs: usize,
        inputs: usize,
        raw: &[u8],
        kernel: Kernel,
    ) -> Result<Self, String> {
        let matrix = TiledMatrix::pack(format, outputs, inputs, raw)?;
        Ok(Int8Matrix { matrix, kernel })
    }

    /// Inputs a row must have.
    pub fn inputs(&self) -> usize {
        self.matrix.inputs
    }

    /// Outputs of a row.
    pub fn outputs(&self) -> usize {
        self.matrix.outputs
    }

    /// `x · wᵀ` for `rows.rows` rows, row-major `[rows, outputs]`.
    pub fn product(&self, rows: &QuantizedRows) -> Vec<f32> {
        assert_eq!(rows.inner, self.matrix.inputs, "rows of the wrong width");
        let (m, n) = (rows.rows, self.matrix.outputs);
        let mut dst = vec![0f32; m * n];
        let cells = Cells(dst.as_mut_ptr());
        let cells = &cells;
        // Work items are (chunk of rows, stripe), chunk-major, so a thread
        // runs consecutive stripes over rows that stay in its cache; a
        // stripe over all of a long prompt's rows would stream them from
        // memory once per stripe.
        let chunk = rows_per_chunk(self.matrix.inputs);
        let stripes = self.matrix.stripes();
        let pool = candle_core::utils::barrier_pool();
        pool.execute_chunked(m.div_ceil(chunk) * stripes, |items| {
            for item in items {
                let first = item / stripes * chunk;
                let s = item % stripes;
                self.stripe_product(s, rows, first..m.min(first + chunk), cells);
            }
        });
        dst
    }

    /// Stripe `s` (outputs `16·s ..`) of the product, for rows `span`.
    fn stripe_product(&self, s: usize, rows: &QuantizedRows, span: Range<usize>, cells: &Cells) {
        let (m, n) = (span.end, self.matrix.outputs);
        let tiles = self.matrix.stripe(s);
        let width = (n - s * TILE_OUTPUTS).min(TILE_OUTPUTS);
        let mut out: RowsOut = [[0.0; TILE_OUTPUTS]; MAX_ROWS];
        let mut first = span.start;
        while first < m {
            let count = (m - first).min(MAX_ROWS);
            self.kernel.run(tiles, rows, first, count, &mut out);
            for (r, row) in out.iter().enumerate().take(count) {
                // SAFETY: `(first + r) · n + s · 16 + width <= m · n`,
                // and these cells belong to stripe `s` alone.
                unsafe {
                    let at = cells.0.add((first + r) * n + s * TILE_OUTPUTS);
                    std::ptr::copy_nonoverlapping(row.as_ptr(), at, width);
                }
            }
            first += count;
        }
    }
}

/// Rows one work item multiplies: about 64 KiB of quantized values, which
/// stay in a core's L2 cache while it runs stripe after stripe over them
/// (a multiple of the kernel's row group, 8 to 256 rows).
fn rows_per_chunk(inputs: usize) -> usize {
    let rows = (64 * 1024 / inputs.max(1)).clamp(MAX_ROWS, 256);
    rows / MAX_ROWS * MAX_ROWS
}

#[cfg(test)]
mod tests;
