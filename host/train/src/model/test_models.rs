//! Decoders shaped for tests outside `model`: an untied head, adapters,
//! frozen blocks, biases, and the weights tests check. (The sequences'
//! tests compare the two training passes through the log-probs a loss
//! reads; the decoder's fields stay private to `model`.)

use super::Decoder;
use super::block::Adapter;
use candle_core::{DType, Device, Tensor};
use candle_nn::{Init, VarMap};
use std::ops::Range;

const INIT: Init = Init::Randn {
    mean: 0.0,
    stdev: 0.3,
};

fn var(varmap: &VarMap, name: &str, shape: (usize, usize)) -> Tensor {
    varmap
        .get(shape, name, INIT, DType::F32, &Device::Cpu)
        .unwrap()
}

/// A tensor's values in row-major order, whatever its shape: what the
/// gradient tests compare element by element.
pub(crate) fn flat_values(tensor: &Tensor) -> Vec<f32> {
    tensor.flatten_all().unwrap().to_vec1().unwrap()
}

/// Gives `model` its own output projection (`lm_head`), a variable.
pub(crate) fn untie_head(model: &mut Decoder, varmap: &VarMap) {
    let shape = model.embed.dims2().unwrap();
    model.lm_head = Some(var(varmap, "lm_head", shape));
}

/// Rank-3 adapters on q, v and down of `layers`, their base weights frozen.
pub(crate) fn attach_adapters(model: &mut Decoder, varmap: &VarMap, layers: Range<usize>) {
    for l in layers {
        let block = &mut model.blocks[l];
        // Attention and MLP projections of every shape.
        for (name, linear) in [
            ("q", &mut block.q),
            ("v", &mut block.v),
            ("down", &mut block.down),
        ] {
            let (out, inner) = linear.weight.dims2().unwrap();
            linear.adapter = Some(Adapter {
                a: var(varmap, &format!("layers.{l}.{name}.lora_a"), (3, inner)),
                b: var(varmap, &format!("layers.{l}.{name}.lora_b"), (out, 3)),
                scale: 1.5,
            });
            linear.frozen = true;
        }
    }
}

/// Freezes every projection of `blocks`.
pub(crate) fn freeze_projections(model: &mut Decoder, blocks: Range<usize>) {
    for block in &mut model.blocks[blocks] {
        for linear in [
            &mut block.q,
            &mut block.k,
            &mut block.v,
            &mut block.o,
            &mut block.gate,
            &mut block.up,
            &mut block.down,
        ] {
            linear.frozen = true;
        }
    }
}

/// Freezes the embedding.
pub(crate) fn freeze_embedding(model: &mut Decoder) {
    model.embed_frozen = true;
}

/// Zero q/k/v biases on block `index`.
pub(crate) fn add_biases(model: &mut Decoder, index: usize) {
    let zeros = |t: &Tensor| {
        t.zeros_like()
            .unwrap()
            .narrow(1, 0, 1)
            .unwrap()
            .squeeze(1)
            .unwrap()
    };
    let block = &mut model.blocks[index];
    block.biases = Some([
        zeros(&block.q.weight),
        zeros(&block.k.weight),
        zeros(&block.v.weight),
    ]);
}

/// The embedding and block 0's q and down weights.
pub(crate) fn some_projection_weights(model: &Decoder) -> Vec<Tensor> {
    let block = &model.blocks[0];
    vec![
        model.embed.clone(),
        block.q.weight.clone(),
        block.down.weight.clone(),
    ]
}

/// Every RMSNorm weight: each block's two, then the final one.
pub(crate) fn norm_weights(model: &Decoder) -> Vec<Tensor> {
    let blocks = model.blocks.iter();
    blocks
        .flat_map(|b| [b.attn_norm.clone(), b.mlp_norm.clone()])
        .chain([model.final_norm.clone()])
        .collect()
}

/// The `A` matrix of block 0's q adapter, when it has one.
pub(crate) fn first_adapter(model: &Decoder) -> Option<Tensor> {
    model.blocks[0].q.adapter.as_ref().map(|a| a.a.clone())
}
