//! RMSNorm as one fused CPU op with a backward pass to `x` and `weight`
//! (see [`super::fused`] for why ops are fused).

use super::fused::{data, for_each_row, fused_path, row_len};
use crate::error::Result;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, D, DType, Layout, Shape, Tensor};

/// RMSNorm over the last dimension, `x / √(mean x² + eps) · weight`, with a
/// backward pass to `x` and `weight`.
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> Result<Tensor> {
    if !fused_path(x) || weight.dtype() != DType::F32 {
        let mean_square = x.sqr()?.mean_keepdim(D::Minus1)?;
        let normed = x.broadcast_div(&(mean_square + eps)?.sqrt()?)?;
        return Ok(normed.broadcast_mul(weight)?);
    }
    Ok(x.contiguous()?
        .apply_op2(&weight.contiguous()?, RmsNorm { eps })?)
}

/// 1 / √(mean x² + eps) of a row, in f64 as the composed path's eps is.
pub(super) fn inverse_rms(row: &[f32], eps: f64) -> f32 {
    let mean_square = row.iter().map(|x| x * x).sum::<f32>() / row.len() as f32;
    (1.0 / (f64::from(mean_square) + eps).sqrt()) as f32
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
        let (x, w) = (data::<f32>(xs, xl)?, data::<f32>(ws, wl)?);
        let n = row_len(xl)?;
        if w.len() != n {
            candle_core::bail!("rms_norm: weight of {} for rows of {n}", w.len());
        }
        let mut out = vec![0f32; x.len()];
        for_each_row(&mut out, n, x.len(), |i, o| {
            let row = &x[i * n..(i + 1) * n];
            let r = inverse_rms(row, self.eps);
            for ((o, &xv), &wv) in o.iter_mut().zip(row).zip(w) {
                *o = xv * r * wv;
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
            data::<f32>(xs, xl)?,
            data::<f32>(ws, wl)?,
            data::<f32>(gs, gl)?,
        );
        let n = row_len(xl)?;
        let mut out = vec![0f32; x.len()];
        for_each_row(&mut out, n, x.len(), |i, o| {
            let (row, gr) = (&x[i * n..(i + 1) * n], &g[i * n..(i + 1) * n]);
            // y = x·r·w with r = (mean x² + eps)^-½:
            // dx = r·(g·w) − x·r³·mean(g·w·x).
            let r = inverse_rms(row, self.eps);
            let mean_gwx = row
                .iter()
                .zip(gr)
                .zip(w)
                .map(|((&xv, &gv), &wv)| gv * wv * xv)
                .sum::<f32>()
                / n as f32;
            let r3 = r * r * r;
            for (((o, &xv), &gv), &wv) in o.iter_mut().zip(row).zip(gr).zip(w) {
                *o = r * gv * wv - xv * r3 * mean_gwx;
            }
        });
        Ok((CpuStorage::F32(out), xl.shape().clone()))
    }
}
