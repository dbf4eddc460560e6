//! `x · wᵀ` for a weight that does not train (a frozen layer, the base of
//! a LoRA projection, a frozen embedding used as the output projection).
//!
//! candle's matmul backward computes the gradient of both factors whether
//! or not one is a variable, so a frozen `[out, in]` weight would still
//! cost a full `[out, in]` product per backward pass — a third of the
//! update for a LoRA run. This op passes the gradient to `x` only.

use super::fused::{data, fused_path};
use crate::error::Result;
use candle_core::{CpuStorage, CustomOp1, Layout, Shape, Tensor};

/// `x · weightᵀ` (`x`: `[rows, in]`), no gradient to `weight`.
pub(super) fn frozen_linear(x: &Tensor, weight: &Tensor) -> Result<Tensor> {
    if !fused_path(x) || weight.dtype() != x.dtype() || x.rank() != 2 {
        return Ok(x.matmul(&weight.detach().t()?)?);
    }
    Ok(x.contiguous()?.apply_op1(FrozenLinear {
        weight: weight.detach(),
    })?)
}

struct FrozenLinear {
    weight: Tensor,
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
        let x = data::<f32>(storage, layout)?;
        let (rows, _) = layout.shape().dims2()?;
        let x = Tensor::from_slice(x, layout.shape(), self.weight.device())?;
        let y = x.matmul(&self.weight.t()?)?;
        let out = self.weight.dim(0)?;
        Ok((
            CpuStorage::F32(y.flatten_all()?.to_vec1()?),
            Shape::from((rows, out)),
        ))
    }

    fn bwd(&self, _x: &Tensor, _y: &Tensor, grad: &Tensor) -> candle_core::Result<Option<Tensor>> {
        Ok(Some(grad.matmul(&self.weight)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    #[test]
    fn matches_the_product_and_passes_the_gradient_to_x_only() {
        let device = Device::Cpu;
        let x = Var::randn(0f32, 1.0, (5, 7), &device).unwrap();
        let w = Tensor::randn(0f32, 1.0, (3, 7), &device).unwrap();
        let fused = frozen_linear(x.as_tensor(), &w).unwrap();
        let plain = x.as_tensor().matmul(&w.t().unwrap()).unwrap();
        let gap = |a: &Tensor, b: &Tensor| {
            (a - b)
                .unwrap()
                .abs()
                .unwrap()
                .max_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap()
        };
        assert!(gap(&fused, &plain) < 1e-5);
        let upstream = Tensor::randn(0f32, 1.0, (5, 3), &device).unwrap();
        let g_fused = (&fused * &upstream)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        let g_plain = (&plain * &upstream)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        assert!(
            gap(
                g_fused.get(x.as_tensor()).unwrap(),
                g_plain.get(x.as_tensor()).unwrap()
            ) < 1e-5
        );
    }
}
