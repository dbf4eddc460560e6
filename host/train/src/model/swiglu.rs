//! The MLP's gating, `silu(gate) · up`, as one op with a backward pass to
//! both inputs: composed, it is a SiLU and a product forward and five or
//! six element-wise ops backward, each with a fresh output and a gradient
//! accumulation.

use super::fused::{data, for_each_row, fused_path, row_len};
use crate::error::{Result, bail};
use candle_core::{CpuStorage, CustomOp2, Layout, Shape, Tensor};

/// `silu(gate) · up`, element-wise, for tensors of one shape.
pub(super) fn swiglu(gate: &Tensor, up: &Tensor) -> Result<Tensor> {
    if gate.shape() != up.shape() {
        bail!(
            "swiglu: gate {:?} and up {:?} differ",
            gate.dims(),
            up.dims()
        );
    }
    if !fused_path(gate) || up.dtype() != gate.dtype() {
        return Ok((gate.silu()? * up)?);
    }
    Ok(gate.contiguous()?.apply_op2(&up.contiguous()?, SwiGlu)?)
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// The forward pass; its gradients are [`Backward`]'s two passes.
#[derive(Clone, Copy)]
struct SwiGlu;

impl CustomOp2 for SwiGlu {
    fn name(&self) -> &'static str {
        "verifine-swiglu"
    }

    fn cpu_fwd(
        &self,
        gs: &CpuStorage,
        gl: &Layout,
        us: &CpuStorage,
        ul: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (gate, up) = (data::<f32>(gs, gl)?, data::<f32>(us, ul)?);
        let mut out = vec![0f32; gate.len()];
        let width = row_len(gl)?;
        for_each_row(&mut out, width, gate.len() * 2, |i, o| {
            let (g, u) = (&gate[i * width..][..width], &up[i * width..][..width]);
            for ((o, &gv), &uv) in o.iter_mut().zip(g).zip(u) {
                *o = gv * sigmoid(gv) * uv;
            }
        });
        Ok((CpuStorage::F32(out), gl.shape().clone()))
    }

    fn bwd(
        &self,
        gate: &Tensor,
        up: &Tensor,
        _: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let grad = grad.contiguous()?;
        let d_gate = gate.apply_op3_no_bwd(up, &grad, &Backward::Gate)?;
        let d_up = gate.apply_op3_no_bwd(up, &grad, &Backward::Up)?;
        Ok((Some(d_gate), Some(d_up)))
    }
}

/// The gradient to one input from (gate, up, output gradient):
/// d gate = g · up · σ(gate) · (1 + gate · (1 − σ(gate))), d up = g · silu(gate).
#[derive(Clone, Copy)]
enum Backward {
    Gate,
    Up,
}

impl candle_core::CustomOp3 for Backward {
    fn name(&self) -> &'static str {
        match self {
            Backward::Gate => "verifine-swiglu-backward-gate",
            Backward::Up => "verifine-swiglu-backward-up",
        }
    }

    fn cpu_fwd(
        &self,
        gs: &CpuStorage,
        gl: &Layout,
        us: &CpuStorage,
        ul: &Layout,
        ds: &CpuStorage,
        dl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (gate, up, grad) = (
            data::<f32>(gs, gl)?,
            data::<f32>(us, ul)?,
            data::<f32>(ds, dl)?,
        );
        let mut out = vec![0f32; gate.len()];
        let width = row_len(gl)?;
        for_each_row(&mut out, width, gate.len() * 3, |i, o| {
            let range = i * width..(i + 1) * width;
            let (g, u, d) = (&gate[range.clone()], &up[range.clone()], &grad[range]);
            for (j, o) in o.iter_mut().enumerate() {
                let s = sigmoid(g[j]);
                *o = match self {
                    Backward::Gate => d[j] * u[j] * s * (1.0 + g[j] * (1.0 - s)),
                    Backward::Up => d[j] * g[j] * s,
                };
            }
        });
        Ok((CpuStorage::F32(out), gl.shape().clone()))
    }
}
