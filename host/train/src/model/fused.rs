//! Fused CPU kernels *with a backward pass* for the row-wise ops of the
//! loss and attention in training: softmax over the last dimension (and
//! attention's scale + mask + softmax in one), and log-softmax + gather of
//! the target token's log-probability (the policy's token log-probs: the
//! loss never needs the full log-softmax). The decoder's layer ops (RMSNorm,
//! rope, the gated MLP) are `verifine_models::ops`, shared with the judge.
//!
//! candle's own fused versions are custom ops without a backward (candle
//! issues 2168, 3568, 3569): used in training they stop gradients silently.
//! These implement `bwd`, each as one more fused pass. Composed from
//! candle's element-wise ops, each would take five to ten passes, each
//! allocating its output.
//!
//! Off the CPU, or for a dtype other than f32, the wrappers fall back to the
//! same maths composed from candle ops (CUDA has those kernels), so every
//! device trains; tests check that both paths agree in value and gradient.

use crate::error::Result;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, D, DType, Layout, Shape, Tensor};

use verifine_models::ops::{contiguous_data, row_len, softmax_in_place};

/// Whether `x` can take the fused CPU path.
pub(super) fn fused_path(x: &Tensor) -> bool {
    x.device().is_cpu() && x.dtype() == DType::F32
}

/// Ops reading fewer elements than this run on one thread.
const PARALLEL_FROM: usize = 1 << 15;

/// Calls `f(row index, output row)` for every `width`-long row of `out`, on
/// candle's thread pool when the op reads at least [`PARALLEL_FROM`]
/// elements (`input_len`).
pub(super) fn for_each_row(
    out: &mut [f32],
    width: usize,
    input_len: usize,
    f: impl Fn(usize, &mut [f32]) + Sync + Send,
) {
    if input_len < PARALLEL_FROM {
        out.chunks_exact_mut(width)
            .enumerate()
            .for_each(|(i, row)| f(i, row));
        return;
    }
    use rayon::prelude::*;
    // Rows of at least PARALLEL_FROM / 4 input elements per task.
    let rows_per_task =
        (PARALLEL_FROM / 4 / (input_len / (out.len() / width).max(1)).max(1)).max(1);
    out.par_chunks_exact_mut(width)
        .enumerate()
        .with_min_len(rows_per_task)
        .for_each(|(i, row)| f(i, row));
}

/// Writes softmax(`row`) into `out`.
fn softmax_row(row: &[f32], out: &mut [f32]) {
    out.copy_from_slice(row);
    softmax_in_place(out);
}

/// Softmax over the last dimension, with a backward pass.
pub fn softmax_last_dim(x: &Tensor) -> Result<Tensor> {
    if !fused_path(x) {
        return Ok(candle_nn::ops::softmax(x, D::Minus1)?);
    }
    Ok(x.contiguous()?.apply_op1(Softmax)?)
}

struct Softmax;

impl CustomOp1 for Softmax {
    fn name(&self) -> &'static str {
        "verifine-softmax"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = contiguous_data::<f32>(s, l)?;
        let n = row_len(l)?;
        let mut out = vec![0f32; x.len()];
        for_each_row(&mut out, n, x.len(), |i, o| {
            softmax_row(&x[i * n..(i + 1) * n], o)
        });
        Ok((CpuStorage::F32(out), l.shape().clone()))
    }

    fn bwd(&self, _: &Tensor, y: &Tensor, g: &Tensor) -> candle_core::Result<Option<Tensor>> {
        // dx = y · (g − Σ g·y), one pass per row.
        Ok(Some(y.apply_op2_no_bwd(
            &g.contiguous()?,
            &SoftmaxBackward { scale: 1.0 },
        )?))
    }
}

/// `scale · y · (g − Σ g·y)` per row: the gradient of softmax at output `y`
/// (of its input scaled by `scale`).
struct SoftmaxBackward {
    scale: f32,
}

impl CustomOp2 for SoftmaxBackward {
    fn name(&self) -> &'static str {
        "verifine-softmax-backward"
    }

    fn cpu_fwd(
        &self,
        ys: &CpuStorage,
        yl: &Layout,
        gs: &CpuStorage,
        gl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (y, g) = (
            contiguous_data::<f32>(ys, yl)?,
            contiguous_data::<f32>(gs, gl)?,
        );
        let n = row_len(yl)?;
        let mut out = vec![0f32; y.len()];
        for_each_row(&mut out, n, y.len(), |i, o| {
            let (yr, gr) = (&y[i * n..(i + 1) * n], &g[i * n..(i + 1) * n]);
            let dot: f32 = yr.iter().zip(gr).map(|(a, b)| a * b).sum();
            for ((o, &yv), &gv) in o.iter_mut().zip(yr).zip(gr) {
                *o = self.scale * yv * (gv - dot);
            }
        });
        Ok((CpuStorage::F32(out), yl.shape().clone()))
    }
}

/// `softmax(scale · scores + mask)` over the last dimension, with a backward
/// pass to `scores`: attention's scaling, masking and normalisation in one
/// pass each way. `mask` is the additive `[batch, 1, queries, keys]` shared
/// by every head (it gets no gradient); `scores` is `[batch, heads,
/// queries, keys]`, or any `[batch, a, b, keys]` whose rows cycle through
/// the queries (grouped-query attention's `[batch, kv_heads, group ·
/// queries, keys]`), so no reshape is needed on either side.
pub fn scaled_masked_softmax(scores: &Tensor, mask: &Tensor, scale: f64) -> Result<Tensor> {
    let (batch, _, rows, keys) = scores.dims4()?;
    let (mask_batch, mask_heads, queries, mask_keys) = mask.dims4()?;
    if (mask_batch, mask_heads, mask_keys) != (batch, 1, keys)
        || !rows.is_multiple_of(queries.max(1))
    {
        crate::error::bail!(
            "scaled_masked_softmax: mask {:?} for scores {:?}",
            mask.dims(),
            scores.dims()
        );
    }
    if !fused_path(scores) || mask.dtype() != DType::F32 {
        let (b, a, _, k) = scores.dims4()?;
        let per_query = scores.reshape((b, a * rows / queries, queries, k))?;
        let mask = mask.to_dtype(scores.dtype())?;
        let probs = softmax_last_dim(&(per_query * scale)?.broadcast_add(&mask)?)?;
        return Ok(probs.reshape(scores.shape())?);
    }
    Ok(scores
        .contiguous()?
        .apply_op2(&mask.contiguous()?, ScaledMaskedSoftmax { scale })?)
}

struct ScaledMaskedSoftmax {
    scale: f64,
}

impl CustomOp2 for ScaledMaskedSoftmax {
    fn name(&self) -> &'static str {
        "verifine-scaled-masked-softmax"
    }

    fn cpu_fwd(
        &self,
        ss: &CpuStorage,
        sl: &Layout,
        ms: &CpuStorage,
        ml: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (scores, mask) = (
            contiguous_data::<f32>(ss, sl)?,
            contiguous_data::<f32>(ms, ml)?,
        );
        let (_, a, rows, keys) = sl.shape().dims4()?;
        let queries = ml.shape().dims()[2];
        let scale = self.scale as f32;
        let mut out = vec![0f32; scores.len()];
        for_each_row(&mut out, keys, scores.len(), |i, o| {
            // Row i is (batch, head, query) in row order; the mask row drops
            // the head.
            let (b, q) = (i / (a * rows), i % queries);
            let m = &mask[(b * queries + q) * keys..][..keys];
            let row = &scores[i * keys..(i + 1) * keys];
            for ((o, &x), &mv) in o.iter_mut().zip(row).zip(m) {
                *o = x * scale + mv;
            }
            softmax_in_place(o);
        });
        Ok((CpuStorage::F32(out), sl.shape().clone()))
    }

    fn bwd(
        &self,
        _: &Tensor,
        _: &Tensor,
        y: &Tensor,
        g: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        // d scores = scale · y · (g − Σ g·y).
        let backward = SoftmaxBackward {
            scale: self.scale as f32,
        };
        Ok((Some(y.apply_op2_no_bwd(&g.contiguous()?, &backward)?), None))
    }
}

/// `log softmax(logits)[target]` per row: `[..]` from logits `[.., vocab]`
/// and targets `[..]` (u32), with a backward pass to the logits.
pub fn log_softmax_gather(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    if !fused_path(logits) {
        let log_probs = candle_nn::ops::log_softmax(logits, D::Minus1)?;
        return Ok(log_probs
            .gather(&targets.unsqueeze(D::Minus1)?.contiguous()?, D::Minus1)?
            .squeeze(D::Minus1)?);
    }
    let targets = targets.to_dtype(DType::U32)?.contiguous()?;
    Ok(logits.contiguous()?.apply_op2(&targets, LogSoftmaxGather)?)
}

/// The log-sum-exp of a row.
fn log_sum_exp(row: &[f32]) -> f32 {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = row.iter().map(|&x| (x - max).exp()).sum();
    max + sum.ln()
}

/// Every target must index the vocabulary.
fn check_targets(targets: &[u32], vocab: usize) -> candle_core::Result<()> {
    match targets.iter().find(|&&t| t as usize >= vocab) {
        Some(t) => {
            candle_core::bail!("log_softmax_gather: target {t} outside a vocabulary of {vocab}")
        }
        None => Ok(()),
    }
}

struct LogSoftmaxGather;

impl CustomOp2 for LogSoftmaxGather {
    fn name(&self) -> &'static str {
        "verifine-log-softmax-gather"
    }

    fn cpu_fwd(
        &self,
        ls: &CpuStorage,
        ll: &Layout,
        ts: &CpuStorage,
        tl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (logits, targets) = (
            contiguous_data::<f32>(ls, ll)?,
            contiguous_data::<u32>(ts, tl)?,
        );
        let vocab = row_len(ll)?;
        if logits.len() / vocab != targets.len() {
            candle_core::bail!(
                "log_softmax_gather: {} rows of logits, {} targets",
                logits.len() / vocab,
                targets.len()
            );
        }
        check_targets(targets, vocab)?;
        let mut out = vec![0f32; targets.len()];
        for_each_row(&mut out, 1, logits.len(), |i, o| {
            let row = &logits[i * vocab..(i + 1) * vocab];
            o[0] = row[targets[i] as usize] - log_sum_exp(row);
        });
        Ok((CpuStorage::F32(out), tl.shape().clone()))
    }

    fn bwd(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        _: &Tensor,
        g: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        // d logits = g · (onehot(target) − softmax(logits)), one pass per row.
        let grad = logits.apply_op3_no_bwd(targets, &g.contiguous()?, &LogSoftmaxGatherBackward)?;
        Ok((Some(grad), None))
    }
}

struct LogSoftmaxGatherBackward;

impl CustomOp3 for LogSoftmaxGatherBackward {
    fn name(&self) -> &'static str {
        "verifine-log-softmax-gather-backward"
    }

    fn cpu_fwd(
        &self,
        ls: &CpuStorage,
        ll: &Layout,
        ts: &CpuStorage,
        tl: &Layout,
        gs: &CpuStorage,
        gl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (logits, targets, g) = (
            contiguous_data::<f32>(ls, ll)?,
            contiguous_data::<u32>(ts, tl)?,
            contiguous_data::<f32>(gs, gl)?,
        );
        let vocab = row_len(ll)?;
        check_targets(targets, vocab)?;
        let mut out = vec![0f32; logits.len()];
        for_each_row(&mut out, vocab, logits.len(), |i, o| {
            let gi = g[i];
            if gi == 0.0 {
                return;
            }
            softmax_row(&logits[i * vocab..(i + 1) * vocab], o);
            o.iter_mut().for_each(|p| *p *= -gi);
            o[targets[i] as usize] += gi;
        });
        Ok((CpuStorage::F32(out), ll.shape().clone()))
    }
}
