//! `x · wᵀ (+ addend)` for a weight that does not train (a frozen layer, the
//! base of a LoRA projection, a frozen embedding used as the output
//! projection).
//!
//! candle's matmul backward computes the gradient of both factors whether
//! or not one is a variable, so a frozen `[out, in]` weight would still
//! cost a full `[out, in]` product per backward pass — a third of the
//! update for a LoRA run. This op passes the gradient to `x` (and the
//! addend) only. It calls the matrix kernel directly on the argument's and
//! the weight's storage and writes the product into the output, so nothing
//! is copied on the way in or out; the addend (a LoRA update) is the
//! product's starting value instead of a separate sum.

use super::fused::fused_path;
use super::kernels::{Mat, MatMut, matmul};
use crate::error::Result;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, DType, Layout, Shape, Storage, Tensor};
use verifine_models::ops::contiguous_data;

/// `x · weightᵀ + addend` (`x`: `[rows, in]`, addend `[rows, out]`), no
/// gradient to `weight`.
pub(super) fn frozen_linear(
    x: &Tensor,
    weight: &Tensor,
    addend: Option<&Tensor>,
) -> Result<Tensor> {
    let weight = weight.detach();
    let direct = fused_path(x)
        && weight.dtype() == DType::F32
        && weight.is_contiguous()
        && x.rank() == 2
        && addend.is_none_or(|a| a.dtype() == DType::F32);
    if !direct {
        let y = x.matmul(&weight.t()?)?;
        return Ok(match addend {
            Some(a) => (y + a)?,
            None => y,
        });
    }
    let op = FrozenLinear { weight };
    let x = x.contiguous()?;
    Ok(match addend {
        None => x.apply_op1(op)?,
        Some(a) => x.apply_op2(&a.contiguous()?, op)?,
    })
}

struct FrozenLinear {
    weight: Tensor,
}

impl FrozenLinear {
    /// The product over the contiguous `x`, starting from `addend`.
    fn product(
        &self,
        x: &[f32],
        x_shape: &Shape,
        addend: Option<&[f32]>,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (rows, inner) = x_shape.dims2()?;
        let (out, weight_inner) = self.weight.dims2()?;
        if inner != weight_inner {
            candle_core::bail!(
                "frozen linear: rows of {inner} for a weight {:?}",
                self.weight.dims()
            );
        }
        let (storage, layout) = self.weight.storage_and_layout();
        let Storage::Cpu(storage) = &*storage else {
            candle_core::bail!("frozen linear: the weight is not on the CPU");
        };
        let w = contiguous_data::<f32>(storage, layout)?;
        let mut y = match addend {
            Some(a) if a.len() == rows * out => a.to_vec(),
            Some(a) => candle_core::bail!("frozen linear: addend of {} for {rows}×{out}", a.len()),
            None => vec![0f32; rows * out],
        };
        matmul(
            MatMut::rows(&mut y, rows, out),
            Mat::rows(x, rows, inner),
            Mat::rows(w, out, inner).t(),
            addend.is_some(),
        );
        Ok((CpuStorage::F32(y), Shape::from((rows, out))))
    }
}

impl CustomOp1 for FrozenLinear {
    fn name(&self) -> &'static str {
        "verifine-frozen-linear"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        self.product(
            contiguous_data::<f32>(storage, layout)?,
            layout.shape(),
            None,
        )
    }

    fn bwd(&self, _x: &Tensor, _y: &Tensor, grad: &Tensor) -> candle_core::Result<Option<Tensor>> {
        Ok(Some(grad.matmul(&self.weight)?))
    }
}

impl CustomOp2 for FrozenLinear {
    fn name(&self) -> &'static str {
        "verifine-frozen-linear-plus"
    }

    fn cpu_fwd(
        &self,
        x: &CpuStorage,
        x_layout: &Layout,
        addend: &CpuStorage,
        addend_layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let addend = contiguous_data::<f32>(addend, addend_layout)?;
        self.product(
            contiguous_data::<f32>(x, x_layout)?,
            x_layout.shape(),
            Some(addend),
        )
    }

    fn bwd(
        &self,
        _x: &Tensor,
        _addend: &Tensor,
        _y: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        Ok((Some(grad.matmul(&self.weight)?), Some(grad.clone())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var, backprop::GradStore};

    fn gap(a: &Tensor, b: &Tensor) -> f32 {
        let diff = (a - b).unwrap().abs().unwrap();
        diff.max_all().unwrap().to_scalar::<f32>().unwrap()
    }

    /// Gradients of `Σ y · upstream`.
    fn grads(y: &Tensor, upstream: &Tensor) -> GradStore {
        (y * upstream)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap()
    }

    #[test]
    fn matches_the_product_and_passes_the_gradient_to_x_only() {
        let device = Device::Cpu;
        let x = Var::randn(0f32, 1.0, (5, 7), &device).unwrap();
        let w = Var::randn(0f32, 1.0, (3, 7), &device).unwrap();
        let fused = frozen_linear(x.as_tensor(), w.as_tensor(), None).unwrap();
        let plain = x.as_tensor().matmul(&w.t().unwrap()).unwrap();
        assert!(gap(&fused, &plain) < 1e-5);
        let upstream = Tensor::randn(0f32, 1.0, (5, 3), &device).unwrap();
        let (g_fused, g_plain) = (grads(&fused, &upstream), grads(&plain, &upstream));
        let x = x.as_tensor();
        assert!(gap(g_fused.get(x).unwrap(), g_plain.get(x).unwrap()) < 1e-5);
        assert!(
            g_fused.get(w.as_tensor()).is_none(),
            "no gradient to the weight"
        );
    }

    #[test]
    fn an_addend_is_added_and_gets_the_upstream_gradient() {
        let device = Device::Cpu;
        let x = Var::randn(0f32, 1.0, (6, 5), &device).unwrap();
        let addend = Var::randn(0f32, 1.0, (6, 4), &device).unwrap();
        let w = Tensor::randn(0f32, 1.0, (4, 5), &device).unwrap();
        let fused = frozen_linear(x.as_tensor(), &w, Some(addend.as_tensor())).unwrap();
        let plain = (x.as_tensor().matmul(&w.t().unwrap()).unwrap() + addend.as_tensor()).unwrap();
        assert!(gap(&fused, &plain) < 1e-5);
        let upstream = Tensor::randn(0f32, 1.0, (6, 4), &device).unwrap();
        let (g_fused, g_plain) = (grads(&fused, &upstream), grads(&plain, &upstream));
        for var in [x.as_tensor(), addend.as_tensor()] {
            assert!(gap(g_fused.get(var).unwrap(), g_plain.get(var).unwrap()) < 1e-5);
        }
    }
}
