//! Rotary position embeddings: each pair of a head's dimensions turns by
//! the angle `position · frequency`.

use super::cpu::{contiguous_data, for_each_chunk};
use candle_core::{CpuStorage, CustomOp3, DType, Layout, Shape, Tensor};

/// Which of a head's dimensions form the pairs that turn together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeStyle {
    /// `(x[j], x[j + dim/2])`: transformers' rotate-half (Llama, Qwen,
    /// Gemma checkpoints).
    Halves,
    /// `(x[2j], x[2j + 1])`: the original interleaved pairing (GGUF's
    /// `rope_type` 0).
    Adjacent,
}

/// cos and sin of every position's angle per frequency, `[positions,
/// frequencies]` row-major, from the inverse frequencies
/// (`verifine_models::config::inverse_frequencies`, scaling included).
/// Angles are computed in f64 and rounded once.
pub fn rotary_tables(inverse_frequencies: &[f64], positions: usize) -> (Vec<f32>, Vec<f32>) {
    let elements = positions * inverse_frequencies.len();
    let (mut cos, mut sin) = (Vec::with_capacity(elements), Vec::with_capacity(elements));
    for position in 0..positions {
        for frequency in inverse_frequencies {
            let angle = position as f64 * frequency;
            cos.push(angle.cos() as f32);
            sin.push(angle.sin() as f32);
        }
    }
    (cos, sin)
}

/// Turns one head (`dim` values) by the angles whose cos and sin are `cos`
/// and `sin` (`dim / 2` each). `inverse` turns back, which is also the
/// backward pass: a rotation's transpose is its inverse.
#[inline(always)]
pub fn rotate(head: &mut [f32], (cos, sin): (&[f32], &[f32]), style: RopeStyle, inverse: bool) {
    let half = head.len() / 2;
    let sign = if inverse { -1.0 } else { 1.0 };
    let turn = |a: f32, b: f32, j: usize| {
        let s = sign * sin[j];
        (a * cos[j] - b * s, b * cos[j] + a * s)
    };
    match style {
        RopeStyle::Halves => {
            let (first, second) = head.split_at_mut(half);
            for (j, (a, b)) in first.iter_mut().zip(second).enumerate() {
                (*a, *b) = turn(*a, *b, j);
            }
        }
        RopeStyle::Adjacent => {
            for (j, pair) in head.chunks_exact_mut(2).enumerate() {
                (pair[0], pair[1]) = turn(pair[0], pair[1], j);
            }
        }
    }
}

/// Rotary embedding of `x` (`[batch, heads, positions, dim]`) by tables
/// `[positions, dim / 2]`, or `[batch, positions, dim / 2]` when each
/// sequence of a batch sits at its own positions; with a backward pass to
/// `x`.
pub fn rope(
    x: &Tensor,
    cos: &Tensor,
    sin: &Tensor,
    style: RopeStyle,
) -> candle_core::Result<Tensor> {
    let (batch, _, positions, dim) = x.dims4()?;
    let fits = |t: &Tensor| {
        let d = t.dims();
        d == [positions, dim / 2] || d == [batch, positions, dim / 2]
    };
    if !dim.is_multiple_of(2) || !fits(cos) || !fits(sin) || cos.dims() != sin.dims() {
        candle_core::bail!(
            "rope: tables {:?} and {:?} for {:?} (want [positions, dim / 2] or [batch, positions, dim / 2], even dim)",
            cos.dims(),
            sin.dims(),
            x.dims()
        );
    }
    let op = Rope {
        style,
        inverse: false,
    };
    if !x.device().is_cpu() {
        return op.composed(x, cos, sin);
    }
    let dtype = x.dtype();
    let f32 = |t: &Tensor| t.to_dtype(DType::F32).and_then(|t| t.contiguous());
    f32(x)?
        .apply_op3(&f32(cos)?, &f32(sin)?, op)?
        .to_dtype(dtype)
}

#[derive(Clone, Copy)]
pub(super) struct Rope {
    pub(super) style: RopeStyle,
    pub(super) inverse: bool,
}

impl Rope {
    /// The same rotation from candle's element-wise ops (off the CPU).
    pub(super) fn composed(
        self,
        x: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
    ) -> candle_core::Result<Tensor> {
        let (b, h, t, d) = x.dims4()?;
        let sin = if self.inverse {
            sin.neg()?
        } else {
            sin.clone()
        };
        let (cos, sin) = (cos.to_dtype(x.dtype())?, sin.to_dtype(x.dtype())?);
        let (x, axis, tables) = match self.style {
            RopeStyle::Halves => (x.clone(), 3, vec![1, 1, t, d / 2]),
            RopeStyle::Adjacent => (x.reshape((b, h, t, d / 2, 2))?, 4, vec![1, 1, t, d / 2, 1]),
        };
        let (cos, sin) = (cos.reshape(tables.clone())?, sin.reshape(tables)?);
        let width = x.dims()[axis] / 2;
        let (a, bb) = (x.narrow(axis, 0, width)?, x.narrow(axis, width, width)?);
        let first = (a.broadcast_mul(&cos)? - bb.broadcast_mul(&sin)?)?;
        let second = (bb.broadcast_mul(&cos)? + a.broadcast_mul(&sin)?)?;
        Tensor::cat(&[first, second], axis)?.reshape((b, h, t, d))
    }
}

impl CustomOp3 for Rope {
    fn name(&self) -> &'static str {
        "verifine-rope"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xl: &Layout,
        cs: &CpuStorage,
        cl: &Layout,
        ss: &CpuStorage,
        sl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = contiguous_data::<f32>(xs, xl)?;
        let (cos, sin) = (
            contiguous_data::<f32>(cs, cl)?,
            contiguous_data::<f32>(ss, sl)?,
        );
        let (_, heads, positions, dim) = xl.shape().dims4()?;
        let half = dim / 2;
        let per_sequence = cl.shape().rank() == 3;
        let mut out = x.to_vec();
        for_each_chunk(&mut out, dim, |first, out| {
            for (i, head) in out.chunks_exact_mut(dim).enumerate() {
                let row = first / dim + i;
                let sequence = row / (heads * positions);
                let t = match per_sequence {
                    true => sequence * positions + row % positions,
                    false => row % positions,
                };
                let tables = (&cos[t * half..][..half], &sin[t * half..][..half]);
                rotate(head, tables, self.style, self.inverse);
            }
        });
        Ok((CpuStorage::F32(out), xl.shape().clone()))
    }

    fn bwd(
        &self,
        _: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        _: &Tensor,
        g: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let back = Rope {
            inverse: !self.inverse,
            ..*self
        };
        let dx = g.contiguous()?.apply_op3_no_bwd(cos, sin, &back)?;
        Ok((Some(dx), None, None))
    }
}
