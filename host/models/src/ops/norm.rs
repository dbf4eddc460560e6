//! RMSNorm: `y = x · r · w` over a row, `r = 1 / √(mean x² + eps)`.

use super::cpu::{contiguous_data, for_each_chunk, row_len};
use candle_core::{CpuStorage, CustomOp2, CustomOp3, D, DType, Layout, Shape, Tensor};

/// `r = 1 / √(mean x² + eps)` of a row; eps is added in f64, as
/// transformers adds it.
#[inline(always)]
pub fn inverse_rms(row: &[f32], eps: f64) -> f32 {
    let mean_square = row.iter().map(|x| x * x).sum::<f32>() / row.len() as f32;
    (1.0 / (f64::from(mean_square) + eps).sqrt()) as f32
}

/// Writes the normed `row` into `out` and returns its `r`, which the
/// backward pass needs.
#[inline(always)]
pub fn normalize(row: &[f32], weight: &[f32], eps: f64, out: &mut [f32]) -> f32 {
    let r = inverse_rms(row, eps);
    for ((o, &x), &w) in out.iter_mut().zip(row).zip(weight) {
        *o = x * r * w;
    }
    r
}

/// The backward pass of [`normalize`] at `row` (whose `r` it returned),
/// from the output's gradient `grad_out`: adds the gradient of `row` to
/// `grad_row`, and the weight's to `grad_weight` when the weight trains.
#[inline(always)]
pub fn normalize_backward(
    row: &[f32],
    weight: &[f32],
    r: f32,
    grad_out: &[f32],
    grad_row: &mut [f32],
    grad_weight: Option<&mut [f32]>,
) {
    // dx = r · (g·w) − x · r³ · mean(g·w·x).
    let dot: f32 = grad_out
        .iter()
        .zip(weight)
        .zip(row)
        .map(|((g, w), x)| g * w * x)
        .sum();
    let coefficient = r * r * r * dot / row.len() as f32;
    for (((gx, g), w), x) in grad_row.iter_mut().zip(grad_out).zip(weight).zip(row) {
        *gx += r * g * w - x * coefficient;
    }
    // dw = g · x · r, summed over rows by the caller's accumulation.
    if let Some(grad_weight) = grad_weight {
        for ((gw, g), x) in grad_weight.iter_mut().zip(grad_out).zip(row) {
            *gw += g * x * r;
        }
    }
}

/// RMSNorm over the last dimension of `x`, computed in f32 whatever the
/// dtype and returned in `x`'s, with a backward pass to `x` and (when it is
/// tracked) to `weight`.
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> candle_core::Result<Tensor> {
    let dtype = x.dtype();
    let (x32, w32) = (x.to_dtype(DType::F32)?, weight.to_dtype(DType::F32)?);
    let normed = if x.device().is_cpu() {
        x32.contiguous()?
            .apply_op2(&w32.contiguous()?, RmsNorm { eps })?
    } else {
        composed(&x32, &w32, eps)?
    };
    normed.to_dtype(dtype)
}

/// The same maths from candle's element-wise ops (off the CPU).
pub(super) fn composed(x: &Tensor, weight: &Tensor, eps: f64) -> candle_core::Result<Tensor> {
    let mean_square = x.sqr()?.mean_keepdim(D::Minus1)?;
    x.broadcast_div(&(mean_square + eps)?.sqrt()?)?
        .broadcast_mul(weight)
}

#[derive(Clone, Copy)]
struct RmsNorm {
    eps: f64,
}

impl CustomOp2 for RmsNorm {
    fn name(&self) -> &'static str {
        "verifine-rms-norm"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xl: &Layout,
        ws: &CpuStorage,
        wl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (x, w) = (
            contiguous_data::<f32>(xs, xl)?,
            contiguous_data::<f32>(ws, wl)?,
        );
        let n = row_len(xl)?;
        if w.len() != n {
            candle_core::bail!("rms_norm: weight of {} for rows of {n}", w.len());
        }
        let mut out = vec![0f32; x.len()];
        for_each_chunk(&mut out, n, |first, out| {
            let rows = x[first..].chunks_exact(n);
            for (row, o) in rows.zip(out.chunks_exact_mut(n)) {
                normalize(row, w, self.eps, o);
            }
        });
        Ok((CpuStorage::F32(out), xl.shape().clone()))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _: &Tensor,
        g: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let g = g.contiguous()?;
        let dx = x.apply_op3_no_bwd(w, &g, &RmsNormBackward { eps: self.eps })?;
        if !w.track_op() {
            return Ok((Some(dx), None));
        }
        // d weight = Σ over rows of g · x · r.
        let normed = x.apply_op2_no_bwd(&w.ones_like()?, self)?;
        let rows = x.elem_count() / w.elem_count();
        let dw = (g * normed)?
            .reshape((rows, w.elem_count()))?
            .sum(0)?
            .reshape(w.shape())?;
        Ok((Some(dx), Some(dw)))
    }
}

/// The gradient of RMSNorm's input, from its input, weight and the
/// output's gradient.
struct RmsNormBackward {
    eps: f64,
}

impl CustomOp3 for RmsNormBackward {
    fn name(&self) -> &'static str {
        "verifine-rms-norm-backward"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xl: &Layout,
        ws: &CpuStorage,
        wl: &Layout,
        gs: &CpuStorage,
        gl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (x, w, g) = (
            contiguous_data::<f32>(xs, xl)?,
            contiguous_data::<f32>(ws, wl)?,
            contiguous_data::<f32>(gs, gl)?,
        );
        let n = row_len(xl)?;
        let mut out = vec![0f32; x.len()];
        for_each_chunk(&mut out, n, |first, out| {
            let rows = x[first..].chunks_exact(n).zip(g[first..].chunks_exact(n));
            for ((row, gr), o) in rows.zip(out.chunks_exact_mut(n)) {
                normalize_backward(row, w, inverse_rms(row, self.eps), gr, o, None);
            }
        });
        Ok((CpuStorage::F32(out), xl.shape().clone()))
    }
}
