//! The gated MLP's activations: `act(gate) · up`, with SiLU (SwiGLU:
//! Llama, Qwen) or tanh-approximated GELU (GeGLU: Gemma).

use super::cpu::{contiguous_data, for_each_chunk};
use super::softmax::exp;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, DType, Layout, Shape, Tensor};

/// The activation applied to the gate of a gated MLP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `x · σ(x)`.
    Silu,
    /// `gelu_pytorch_tanh`: `x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))`.
    GeluTanh,
}

/// `σ(x) = 1 / (1 + e⁻ˣ)`.
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// `d silu(x) / dx` from `x` and `s = σ(x)`: `s · (1 + x · (1 − s))`.
#[inline(always)]
fn silu_slope(x: f32, s: f32) -> f32 {
    s * (1.0 + x * (1.0 - s))
}

const SQRT_2_OVER_PI: f32 = 0.797_884_6;
const GELU_CUBIC: f32 = 0.044_715;

impl Activation {
    /// `act(x)`.
    #[inline(always)]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Activation::Silu => x * sigmoid(x),
            Activation::GeluTanh => {
                let t = (SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x)).tanh();
                0.5 * x * (1.0 + t)
            }
        }
    }

    /// `d act(x) / dx`.
    #[inline(always)]
    pub fn slope(self, x: f32) -> f32 {
        match self {
            Activation::Silu => silu_slope(x, sigmoid(x)),
            Activation::GeluTanh => {
                let t = (SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x)).tanh();
                let inner_slope = SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_CUBIC * x * x);
                0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * inner_slope
            }
        }
    }
}

/// SwiGLU over equally long slices: `out = silu(gate) · up`, keeping
/// `σ(gate)` in `sigmoid` so the backward pass needs no second `exp`.
#[inline(always)]
pub fn swiglu(gate: &[f32], up: &[f32], out: &mut [f32], sigmoid_of_gate: &mut [f32]) {
    for (((o, s), &g), &u) in out.iter_mut().zip(sigmoid_of_gate).zip(gate).zip(up) {
        *s = sigmoid(g);
        *o = g * *s * u;
    }
}

/// The backward pass of [`swiglu`] from the output's gradient: writes the
/// gradients of `gate` and `up`.
#[inline(always)]
pub fn swiglu_backward(
    (gate, up, sigmoid_of_gate): (&[f32], &[f32], &[f32]),
    grad_out: &[f32],
    grad_gate: &mut [f32],
    grad_up: &mut [f32],
) {
    for i in 0..grad_gate.len() {
        let (g, u, s, d) = (gate[i], up[i], sigmoid_of_gate[i], grad_out[i]);
        grad_up[i] = d * g * s;
        grad_gate[i] = d * u * silu_slope(g, s);
    }
}

/// `act(gate) · up` over tensors of one shape, in f32 on the CPU (in
/// `gate`'s dtype elsewhere), with a backward pass to both.
pub fn gated(gate: &Tensor, up: &Tensor, activation: Activation) -> candle_core::Result<Tensor> {
    if gate.shape() != up.shape() {
        candle_core::bail!(
            "gated: gate {:?} and up {:?} differ",
            gate.dims(),
            up.dims()
        );
    }
    if !gate.device().is_cpu() {
        return composed(gate, up, activation);
    }
    let dtype = gate.dtype();
    let (gate, up) = (gate.to_dtype(DType::F32)?, up.to_dtype(DType::F32)?);
    gate.contiguous()?
        .apply_op2(&up.contiguous()?, Gated(activation))?
        .to_dtype(dtype)
}

/// The same maths from candle's element-wise ops (off the CPU).
pub(super) fn composed(
    gate: &Tensor,
    up: &Tensor,
    activation: Activation,
) -> candle_core::Result<Tensor> {
    let activated = match activation {
        Activation::Silu => gate.silu()?,
        Activation::GeluTanh => gate.gelu()?,
    };
    activated * up
}

/// `out = act(gate) · up`, element by element.
fn gate_all(act: impl Fn(f32) -> f32 + Sync, gate: &[f32], up: &[f32], out: &mut [f32]) {
    for_each_chunk(out, 1, |first, out| {
        for ((o, &g), &u) in out.iter_mut().zip(&gate[first..]).zip(&up[first..]) {
            *o = act(g) * u;
        }
    });
}

struct Gated(Activation);

impl CustomOp2 for Gated {
    fn name(&self) -> &'static str {
        "verifine-gated"
    }

    fn cpu_fwd(
        &self,
        gs: &CpuStorage,
        gl: &Layout,
        us: &CpuStorage,
        ul: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (gate, up) = (
            contiguous_data::<f32>(gs, gl)?,
            contiguous_data::<f32>(us, ul)?,
        );
        let mut out = vec![0f32; gate.len()];
        // One loop per activation, so each vectorizes.
        match self.0 {
            Activation::Silu => gate_all(|x| Activation::Silu.apply(x), gate, up, &mut out),
            Activation::GeluTanh => gate_all(|x| Activation::GeluTanh.apply(x), gate, up, &mut out),
        }
        Ok((CpuStorage::F32(out), gl.shape().clone()))
    }

    fn bwd(
        &self,
        gate: &Tensor,
        up: &Tensor,
        _: &Tensor,
        g: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let g = g.contiguous()?;
        let of = |wrt| {
            gate.apply_op3_no_bwd(
                up,
                &g,
                &GatedBackward {
                    activation: self.0,
                    wrt,
                },
            )
        };
        Ok((Some(of(Input::Gate)?), Some(of(Input::Up)?)))
    }
}

/// Which input of [`Gated`] a backward op differentiates.
#[derive(Clone, Copy)]
enum Input {
    Gate,
    Up,
}

struct GatedBackward {
    activation: Activation,
    wrt: Input,
}

impl CustomOp3 for GatedBackward {
    fn name(&self) -> &'static str {
        match self.wrt {
            Input::Gate => "verifine-gated-backward-gate",
            Input::Up => "verifine-gated-backward-up",
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
            contiguous_data::<f32>(gs, gl)?,
            contiguous_data::<f32>(us, ul)?,
            contiguous_data::<f32>(ds, dl)?,
        );
        let act = self.activation;
        let mut out = vec![0f32; gate.len()];
        for_each_chunk(&mut out, 1, |first, out| {
            let inputs = gate[first..].iter().zip(&up[first..]).zip(&grad[first..]);
            for (o, ((&g, &u), &d)) in out.iter_mut().zip(inputs) {
                *o = match self.wrt {
                    Input::Gate => d * u * act.slope(g),
                    Input::Up => d * act.apply(g),
                };
            }
        });
        Ok((CpuStorage::F32(out), gl.shape().clone()))
    }
}
