//! Moving attention heads between the token-row layout of projections and
//! the per-head layout of attention, with rotary position embeddings fused
//! into the move for queries and keys; each with a backward pass.
//!
//! A projection's output is `[batch · seq, heads · dim]` (rows are tokens);
//! attention multiplies `[batch, heads, seq, dim]`. Composed from candle
//! ops this is a reshape, a transpose, a copy and (for q and k) candle-nn's
//! `rope_slow`, about a dozen element-wise ops; every one of those records
//! a node whose gradient candle accumulates into a fresh zeroed tensor. Here
//! it is one pass each way. (candle's own fused `rope` kernels have no
//! backward: candle issue 2168.)
//!
//! The rotation is rotate-half's: the pair `(x[j], x[j + dim/2])` turns by
//! the angle of position `t` and frequency `j`, whose cosine and sine are
//! the tables' `[t, j]`.

use super::fused::{for_each_row, fused_path};
use crate::error::{Result, bail};
use candle_core::{CpuStorage, CustomOp1, CustomOp3, Layout, Shape, Tensor};
use verifine_models::ops::contiguous_data;
use verifine_models::ops::{self, RopeStyle, rope};

/// The sizes that relate the two layouts.
#[derive(Clone, Copy, Debug)]
pub(super) struct HeadLayout {
    pub batch: usize,
    pub seq: usize,
    pub heads: usize,
    pub dim: usize,
}

impl HeadLayout {
    fn elements(self) -> usize {
        self.batch * self.seq * self.heads * self.dim
    }

    /// The per-head layout, with `group` heads stacked along the rows
    /// (`[batch, heads / group, group · seq, dim]`, same element order).
    pub fn per_head_shape(self, group: usize) -> (usize, usize, usize, usize) {
        (self.batch, self.heads / group, group * self.seq, self.dim)
    }

    fn rows_shape(self) -> (usize, usize) {
        (self.batch * self.seq, self.heads * self.dim)
    }

    /// Input row of output row `i`: to heads, output rows are
    /// (batch, head, position) and input rows (batch, position, head); back
    /// to rows, the other way round.
    fn source_row(self, i: usize, to_heads: bool) -> (usize, usize) {
        let (s, h) = (self.seq, self.heads);
        if to_heads {
            let (n, head, t) = (i / (h * s), (i / s) % h, i % s);
            ((n * s + t) * h + head, t)
        } else {
            let (n, t, head) = (i / (s * h), (i / h) % s, i % h);
            ((n * h + head) * s + t, t)
        }
    }
}

/// Token rows `[batch · seq, heads · dim]` to `[batch, heads / group, group ·
/// seq, dim]`, rotated when `tables` (cos, sin: `[seq, dim / 2]`) are given.
pub(super) fn to_heads(
    x: &Tensor,
    layout: HeadLayout,
    group: usize,
    tables: Option<(&Tensor, &Tensor)>,
) -> Result<Tensor> {
    let shape = layout.per_head_shape(group);
    if x.dims2()? != layout.rows_shape() || !layout.heads.is_multiple_of(group) {
        bail!(
            "to_heads: {:?} is not the token rows of {layout:?}",
            x.dims()
        );
    }
    if let Some((cos, sin)) = tables {
        let half = (layout.seq, layout.dim / 2);
        if !layout.dim.is_multiple_of(2) || cos.dims2()? != half || sin.dims2()? != half {
            bail!(
                "rope: tables {:?} and {:?} for {layout:?} (want [seq, dim / 2], even dim)",
                cos.dims(),
                sin.dims()
            );
        }
    }
    let fused = fused_path(x) && tables.is_none_or(|(c, s)| fused_path(c) && fused_path(s));
    if !fused {
        let (b, s, h, d) = (layout.batch, layout.seq, layout.heads, layout.dim);
        let heads = x.reshape((b, s, h, d))?.transpose(1, 2)?.contiguous()?;
        let heads = match tables {
            Some((cos, sin)) => rope(&heads, cos, sin, RopeStyle::Halves)?,
            None => heads,
        };
        return Ok(heads.reshape(shape)?);
    }
    let op = Move {
        layout,
        to_heads: true,
        shape: Shape::from(shape),
    };
    Ok(match tables {
        Some((cos, sin)) => {
            x.contiguous()?
                .apply_op3(&cos.contiguous()?, &sin.contiguous()?, op)?
        }
        None => x.contiguous()?.apply_op1(op)?,
    })
}

/// Per-head `[batch, …, dim]` (any 4-D shape with the element order of
/// `[batch, heads, seq, dim]`) back to token rows `[batch · seq, heads · dim]`.
pub(super) fn to_rows(x: &Tensor, layout: HeadLayout) -> Result<Tensor> {
    if x.elem_count() != layout.elements() || x.dims().len() != 4 {
        bail!(
            "to_rows: {:?} is not a per-head layout of {layout:?}",
            x.dims()
        );
    }
    if !fused_path(x) {
        let (b, s, h, d) = (layout.batch, layout.seq, layout.heads, layout.dim);
        return Ok(x
            .reshape((b, h, s, d))?
            .transpose(1, 2)?
            .reshape(layout.rows_shape())?);
    }
    let op = Move {
        layout,
        to_heads: false,
        shape: Shape::from(layout.rows_shape()),
    };
    Ok(x.contiguous()?.apply_op1(op)?)
}

/// One move between the layouts, rotating by +angle to heads and by −angle
/// back (the rotation's inverse, so each direction is the other's gradient).
#[derive(Clone)]
struct Move {
    layout: HeadLayout,
    to_heads: bool,
    /// The output's shape.
    shape: Shape,
}

impl Move {
    fn run(&self, x: &[f32], tables: Option<(&[f32], &[f32])>) -> Vec<f32> {
        let (layout, dim) = (self.layout, self.layout.dim);
        let half = dim / 2;
        let mut out = vec![0f32; x.len()];
        for_each_row(&mut out, dim, x.len(), |i, o| {
            let (row, t) = layout.source_row(i, self.to_heads);
            let source = &x[row * dim..][..dim];
            let Some((cos, sin)) = tables else {
                o.copy_from_slice(source);
                return;
            };
            let tables = (&cos[t * half..][..half], &sin[t * half..][..half]);
            o.copy_from_slice(source);
            // Back to rows is the backward pass: the inverse rotation.
            ops::rope::rotate(o, tables, RopeStyle::Halves, !self.to_heads);
        });
        out
    }

    /// The move in the other direction, shaped like `x` was.
    fn reverse(&self, x: &Tensor) -> Move {
        Move {
            layout: self.layout,
            to_heads: !self.to_heads,
            shape: x.shape().clone(),
        }
    }
}

impl CustomOp1 for Move {
    fn name(&self) -> &'static str {
        "verifine-move-heads"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let out = self.run(contiguous_data::<f32>(s, l)?, None);
        Ok((CpuStorage::F32(out), self.shape.clone()))
    }

    fn bwd(&self, x: &Tensor, _: &Tensor, g: &Tensor) -> candle_core::Result<Option<Tensor>> {
        Ok(Some(g.contiguous()?.apply_op1_no_bwd(&self.reverse(x))?))
    }
}

impl CustomOp3 for Move {
    fn name(&self) -> &'static str {
        "verifine-rope-heads"
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
        let tables = (
            contiguous_data::<f32>(cs, cl)?,
            contiguous_data::<f32>(ss, sl)?,
        );
        let out = self.run(contiguous_data::<f32>(xs, xl)?, Some(tables));
        Ok((CpuStorage::F32(out), self.shape.clone()))
    }

    fn bwd(
        &self,
        x: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        _: &Tensor,
        g: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let dx = g
            .contiguous()?
            .apply_op3_no_bwd(cos, sin, &self.reverse(x))?;
        Ok((Some(dx), None, None))
    }
}
