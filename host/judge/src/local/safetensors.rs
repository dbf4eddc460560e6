//! Loading a Hugging Face checkpoint directory as a judge: the shape and
//! weights are read by `verifine-models` (as training reads them), then
//! held as the judge decoder's matrices. Llama and qwen2 checkpoints keep
//! q/k in the rotate-half layout, so both rotate halves.

use super::model::{Activation, JudgeDecoder, Layer, RopeStyle, Shape};
use super::projection::Projection;
use candle_core::{Device, Tensor};
use std::path::Path;
use verifine_models::weights::{EMBED, FINAL_NORM, LM_HEAD, block_names};
use verifine_models::{DecoderSpec, weights};

use super::model::{DecoderError, Result};

/// The shape of the checkpoint in `dir` (`config.json`).
pub fn spec(dir: &Path) -> Result<DecoderSpec> {
    DecoderSpec::from_config_json(dir).map_err(|e| DecoderError::Weights(e.to_string()))
}

/// Loads the decoder of the checkpoint in `dir`.
pub fn load(dir: &Path, spec: &DecoderSpec, device: &Device) -> Result<JudgeDecoder> {
    if spec.rope_scaling.is_some() {
        return Err(DecoderError::Weights(format!(
            "{}: rope_scaling is not supported by the judge decoder yet",
            dir.display()
        )));
    }
    let weights_error = |e: verifine_models::ModelError| DecoderError::Weights(e.to_string());
    let mut tensors = weights::load_safetensors_dir(dir, device).map_err(weights_error)?;
    weights::check_shapes(spec, &mut tensors, dir).map_err(weights_error)?;
    let mut take = |name: &str| -> Result<Tensor> {
        tensors
            .remove(name)
            .ok_or_else(|| DecoderError::Weights(format!("{}: no tensor {name}", dir.display())))
    };
    let embedding = take(EMBED)?;
    let mut layers = Vec::new();
    for i in 0..spec.num_layers {
        let n = block_names(i);
        let bias = |t: Result<Tensor>| t.ok();
        let (q_bias, k_bias, v_bias) = match spec.attention_bias {
            true => (
                bias(take(&n.q_bias)),
                bias(take(&n.k_bias)),
                bias(take(&n.v_bias)),
            ),
            false => (None, None, None),
        };
        layers.push(Layer {
            attn_norm: take(&n.attn_norm)?,
            q: Projection::dense(&take(&n.q)?)?,
            k: Projection::dense(&take(&n.k)?)?,
            v: Projection::dense(&take(&n.v)?)?,
            q_bias,
            k_bias,
            v_bias,
            o: Projection::dense(&take(&n.o)?)?,
            ffn_norm: take(&n.mlp_norm)?,
            gate: Projection::dense(&take(&n.gate)?)?,
            up: Projection::dense(&take(&n.up)?)?,
            down: Projection::dense(&take(&n.down)?)?,
            q_norm: None,
            k_norm: None,
            post_attn_norm: None,
            post_ffn_norm: None,
            sliding: false,
        });
    }
    let norm = take(FINAL_NORM)?;
    let output = match spec.tie_word_embeddings {
        true => Projection::tied(&embedding),
        false => Projection::dense(&take(LM_HEAD)?)?,
    };
    JudgeDecoder::assemble(
        embedding,
        layers,
        norm,
        output,
        Shape {
            heads: spec.num_heads,
            kv_heads: spec.num_kv_heads,
            eps: spec.rms_norm_eps,
            rope: RopeStyle::Halves,
            freq_base: spec.rope_theta as f32,
            position_scale: 1.0,
            context_length: spec.max_position_embeddings.min(32_768),
            head_dim: None,
            embed_scale: None,
            activation: Activation::Silu,
            attention_scale: None,
            sliding_window: None,
        },
        device,
    )
}
