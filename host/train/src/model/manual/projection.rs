//! A projection `x · Wᵀ`, plus `s · (x Aᵀ) Bᵀ` when a LoRA adapter targets
//! it, forward and backward over token rows.
//!
//! The adapter's update is never merged into `W`: the forward pass keeps
//! `s · x Aᵀ` (`[rows, r]`), from which the backward pass gets `B`'s
//! gradient, and `A`'s comes from `s · g B`. A frozen `W` (always, under
//! LoRA) gets no gradient, so its `[out, in]` product is never computed.

use super::buffers::Buffer;
use super::{Held, WeightGrad};
use crate::error::Result;
use crate::model::block::Linear;
use crate::model::kernels::{Mat, MatMut, matmul};

/// A projection's tensors, read in place.
pub(super) struct Projection<'a> {
    linear: &'a Linear,
    weight: Held<'a>,
    /// `A` (`[r, in]`), `B` (`[out, r]`) and the scale.
    adapter: Option<(Held<'a>, Held<'a>, f32)>,
    out: usize,
    inner: usize,
}

impl<'a> Projection<'a> {
    pub fn of(linear: &'a Linear) -> Result<Self> {
        let (out, inner) = linear.weight.dims2()?;
        let adapter = match &linear.adapter {
            None => None,
            Some(a) => Some((Held::of(&a.a)?, Held::of(&a.b)?, a.scale as f32)),
        };
        Ok(Projection {
            linear,
            weight: Held::of(&linear.weight)?,
            adapter,
            out,
            inner,
        })
    }

    /// Writes (or adds, when `accumulate`) the projection of the token rows
    /// `x` into `into`; returns `s · x Aᵀ` when an adapter targets it.
    pub fn forward(
        &self,
        x: &[f32],
        rows: usize,
        into: &mut [f32],
        accumulate: bool,
    ) -> Result<Option<Buffer>> {
        let (out, inner) = (self.out, self.inner);
        let x = Mat::rows(x, rows, inner);
        let weight = Mat::rows(self.weight.slice()?, out, inner).t();
        matmul(MatMut::rows(into, rows, out), x, weight, accumulate);
        let Some((a, b, scale)) = &self.adapter else {
            return Ok(None);
        };
        let rank = a.slice()?.len() / inner;
        let mut low = Buffer::scratch(rows * rank);
        let a_t = Mat::rows(a.slice()?, rank, inner).t();
        matmul(MatMut::rows(&mut low, rows, rank), x, a_t, false);
        low.iter_mut().for_each(|v| *v *= scale);
        let b_t = Mat::rows(b.slice()?, out, rank).t();
        matmul(
            MatMut::rows(into, rows, out),
            Mat::rows(&low, rows, rank),
            b_t,
            true,
        );
        Ok(Some(low))
    }

    /// From the output's gradient `g`: writes (or adds) the input's gradient
    /// into `grad_x` and pushes the gradients of what trains.
    #[expect(
        clippy::too_many_arguments,
        reason = "the projection's backward needs its input, output gradient, saved product and both outputs"
    )]
    pub fn backward(
        &self,
        g: &[f32],
        x: &[f32],
        low: Option<Buffer>,
        rows: usize,
        grad_x: &mut [f32],
        accumulate: bool,
        grads: &mut Vec<WeightGrad>,
    ) -> Result<()> {
        let (out, inner) = (self.out, self.inner);
        let (g_mat, x_mat) = (Mat::rows(g, rows, out), Mat::rows(x, rows, inner));
        let weight = Mat::rows(self.weight.slice()?, out, inner);
        matmul(MatMut::rows(grad_x, rows, inner), g_mat, weight, accumulate);
        if !self.linear.frozen {
            grads.push((self.linear.weight.clone(), transposed_product(g_mat, x_mat)));
        }
        let (Some((a, b, scale)), Some(low), Some(adapter)) =
            (&self.adapter, low, &self.linear.adapter)
        else {
            return Ok(());
        };
        let rank = low.len() / rows.max(1);
        // s · g B: the gradient of the adapter's `[rows, r]` product.
        let mut g_low = Buffer::scratch(rows * rank);
        let b = Mat::rows(b.slice()?, out, rank);
        matmul(MatMut::rows(&mut g_low, rows, rank), g_mat, b, false);
        g_low.iter_mut().for_each(|v| *v *= scale);
        let g_low_mat = Mat::rows(&g_low, rows, rank);
        grads.push((adapter.a.clone(), transposed_product(g_low_mat, x_mat)));
        let a = Mat::rows(a.slice()?, rank, inner);
        matmul(MatMut::rows(grad_x, rows, inner), g_low_mat, a, true);
        let low_mat = Mat::rows(&low, rows, rank);
        grads.push((adapter.b.clone(), transposed_product(g_mat, low_mat)));
        Ok(())
    }
}

/// `gᵀ · x` as a fresh `[g.cols, x.cols]` vector: a weight's gradient.
fn transposed_product(g: Mat, x: Mat) -> Vec<f32> {
    let mut grad = vec![0f32; g.cols * x.cols];
    matmul(MatMut::rows(&mut grad, g.cols, x.cols), g.t(), x, false);
    grad
}
