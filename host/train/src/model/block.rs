//! One decoder block's weights, and the projections that may carry a LoRA
//! adapter.

use super::WeightLayout;
use crate::error::Result;
use candle_core::Tensor;

/// A trainable low-rank update of a frozen projection: the projection
/// computes `x Wᵀ + scale · (x Aᵀ) Bᵀ`, never the merged `[out, in]`
/// matrix, so only `A` (`[r, in]`) and `B` (`[out, r]`) get gradients.
pub(super) struct Adapter {
    pub a: Tensor,
    pub b: Tensor,
    pub scale: f64,
}

/// A projection `x · weightᵀ`, with an adapter when LoRA targets it.
pub(super) struct Linear {
    pub weight: Tensor,
    pub adapter: Option<Adapter>,
    /// The weight does not train: its gradient is never computed.
    pub frozen: bool,
    /// How `weight` is stored.
    pub layout: WeightLayout,
}

impl Linear {
    /// A projection without adapter.
    pub fn plain(weight: Tensor) -> Self {
        Linear {
            weight,
            adapter: None,
            frozen: false,
            layout: WeightLayout::OutByIn,
        }
    }

    /// `x · wᵀ` for token rows `x` (`[rows, in]`): one 2-D product, so the
    /// weight's gradient is one `[out, in]` product too.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if self.layout == WeightLayout::InByOut {
            return Ok(x.matmul(&self.weight)?);
        }
        // The adapter's scale multiplies the narrow `[rows, r]` product.
        let low = match &self.adapter {
            None => None,
            Some(adapter) => {
                Some((x.matmul(&adapter.a.t()?)? * adapter.scale)?.matmul(&adapter.b.t()?)?)
            }
        };
        Ok(match (self.frozen, low) {
            (true, low) => super::frozen::frozen_linear(x, &self.weight, low.as_ref())?,
            (false, None) => x.matmul(&self.weight.t()?)?,
            (false, Some(low)) => (x.matmul(&self.weight.t()?)? + low)?,
        })
    }

    /// The weight with the adapter folded in (what an export or a frozen
    /// reference holds), `[out, in]`.
    pub fn merged(&self) -> Result<Tensor> {
        Ok(match &self.adapter {
            None if self.layout == WeightLayout::InByOut => self.weight.t()?,
            None => self.weight.clone(),
            Some(adapter) => {
                let delta = adapter.b.matmul(&adapter.a)?;
                (&self.weight + (delta * adapter.scale)?)?
            }
        })
    }

    fn try_map(
        &self,
        f: &impl Fn(&Tensor) -> candle_core::Result<Tensor>,
    ) -> candle_core::Result<Linear> {
        Ok(Linear {
            weight: f(&self.weight)?,
            adapter: match &self.adapter {
                None => None,
                Some(a) => Some(Adapter {
                    a: f(&a.a)?,
                    b: f(&a.b)?,
                    scale: a.scale,
                }),
            },
            frozen: self.frozen,
            layout: self.layout,
        })
    }
}

/// A decoder block: attention and SwiGLU MLP, each after an RMSNorm.
pub(super) struct Block {
    pub attn_norm: Tensor,
    pub q: Linear,
    pub k: Linear,
    pub v: Linear,
    /// Query/key/value biases (qwen2).
    pub biases: Option<[Tensor; 3]>,
    pub o: Linear,
    pub mlp_norm: Tensor,
    pub gate: Linear,
    pub up: Linear,
    pub down: Linear,
}

impl Block {
    /// The block rebuilt projection by projection (`linear`) and tensor by
    /// tensor (`tensor`: norms and biases); the one place that lists them.
    fn rebuild<E>(
        &self,
        linear: impl Fn(&Linear) -> std::result::Result<Linear, E>,
        tensor: impl Fn(&Tensor) -> std::result::Result<Tensor, E>,
    ) -> std::result::Result<Block, E> {
        Ok(Block {
            attn_norm: tensor(&self.attn_norm)?,
            q: linear(&self.q)?,
            k: linear(&self.k)?,
            v: linear(&self.v)?,
            biases: match &self.biases {
                None => None,
                Some([q, k, v]) => Some([tensor(q)?, tensor(k)?, tensor(v)?]),
            },
            o: linear(&self.o)?,
            mlp_norm: tensor(&self.mlp_norm)?,
            gate: linear(&self.gate)?,
            up: linear(&self.up)?,
            down: linear(&self.down)?,
        })
    }

    /// The block with `f` applied to every tensor (adapters included).
    pub fn try_map(
        &self,
        f: impl Fn(&Tensor) -> candle_core::Result<Tensor>,
    ) -> candle_core::Result<Block> {
        self.rebuild(|l| l.try_map(&f), &f)
    }

    /// The block with every adapter folded into its weight, copied into
    /// storage of its own (no graph, unaffected by later updates).
    pub fn merged_copy(&self) -> candle_core::Result<Block> {
        let merge = |l: &Linear| -> candle_core::Result<Linear> {
            let weight = l
                .merged()
                .map_err(|e| candle_core::Error::Msg(e.to_string()))?;
            Ok(Linear {
                frozen: true,
                ..Linear::plain(weight.detach().copy()?)
            })
        };
        self.rebuild(merge, |t| t.detach().copy())
    }

    /// What sampling computes with: every adapter folded into its weight,
    /// weights stored `[in, out]`, no graph.
    pub fn for_sampling(&self) -> Result<Block> {
        let merge = |l: &Linear| -> Result<Linear> {
            Ok(Linear {
                weight: l.merged()?.detach().t()?.contiguous()?,
                adapter: None,
                frozen: true,
                layout: WeightLayout::InByOut,
            })
        };
        self.rebuild(merge, |t| Ok(t.detach()))
    }
}
