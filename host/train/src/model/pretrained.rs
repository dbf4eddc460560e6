//! A decoder built from a pretrained model's weights, with the parts that
//! train chosen by a [`TrainablePlan`] (LoRA adapters, frozen layers), and
//! its weights written back under Hugging Face and PEFT names.
//!
//! Trainable tensors become variables of the run's [`VarMap`] under the
//! own decoder's names (`layers.3.q`, `layers.3.q.lora_a` …), so the
//! optimizer, checkpoints and exact resume work as for the embedded model;
//! frozen tensors are plain tensors outside it.

use super::block::{Adapter, Block, Linear};
use super::init::fnv1a;
use super::layers::rotary_tables;
use super::{Decoder, ModelConfig};
use crate::error::{Result, ensure};
use candle_core::{Tensor, Var};
use candle_nn::VarMap;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use verifine_base::SplitMix64;
use verifine_models::weights::{EMBED, FINAL_NORM, LM_HEAD, block_names};
use verifine_models::{DecoderSpec, Weights};

/// A projection LoRA can adapt, named as PEFT names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LoraModule {
    /// Query projection.
    #[serde(rename = "q_proj")]
    Query,
    /// Key projection.
    #[serde(rename = "k_proj")]
    Key,
    /// Value projection.
    #[serde(rename = "v_proj")]
    Value,
    /// Attention output projection.
    #[serde(rename = "o_proj")]
    Output,
    /// MLP gate.
    #[serde(rename = "gate_proj")]
    Gate,
    /// MLP up projection.
    #[serde(rename = "up_proj")]
    Up,
    /// MLP down projection.
    #[serde(rename = "down_proj")]
    Down,
}

impl LoraModule {
    /// PEFT's name.
    pub fn peft_name(self) -> &'static str {
        match self {
            LoraModule::Query => "q_proj",
            LoraModule::Key => "k_proj",
            LoraModule::Value => "v_proj",
            LoraModule::Output => "o_proj",
            LoraModule::Gate => "gate_proj",
            LoraModule::Up => "up_proj",
            LoraModule::Down => "down_proj",
        }
    }

    /// The own decoder's name of the projection.
    fn own_name(self) -> &'static str {
        match self {
            LoraModule::Query => "q",
            LoraModule::Key => "k",
            LoraModule::Value => "v",
            LoraModule::Output => "o",
            LoraModule::Gate => "gate",
            LoraModule::Up => "up",
            LoraModule::Down => "down",
        }
    }

    /// Every projection a block has, in block order.
    pub const ALL: [LoraModule; 7] = [
        LoraModule::Query,
        LoraModule::Key,
        LoraModule::Value,
        LoraModule::Output,
        LoraModule::Gate,
        LoraModule::Up,
        LoraModule::Down,
    ];
}

/// `[model.lora]`: low-rank adapters on the named projections; the base
/// weights are frozen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoraConfig {
    /// Rank.
    pub r: usize,
    /// The update is scaled by `alpha / r`.
    pub alpha: f64,
    /// Dropout on the adapters' input. Only 0 for now: a dropout mask
    /// would need the run's seeded generator threaded into every forward.
    #[serde(default)]
    pub dropout: f64,
    /// The adapted projections (PEFT's names).
    #[serde(default = "default_targets")]
    pub target_modules: Vec<LoraModule>,
}

fn default_targets() -> Vec<LoraModule> {
    vec![LoraModule::Query, LoraModule::Value]
}

/// Which parts of a pretrained model train.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainablePlan {
    /// Low-rank adapters instead of full weights.
    pub lora: Option<LoraConfig>,
    /// The embedding table (and a tied output projection) stays fixed.
    pub freeze_embeddings: bool,
    /// The first this many blocks stay fixed.
    pub freeze_layers: usize,
}

impl TrainablePlan {
    /// Refuses settings that cannot train.
    pub fn validate(&self, layers: usize) -> Result<()> {
        if let Some(lora) = &self.lora {
            ensure!(lora.r >= 1, "[model.lora] r must be at least 1");
            ensure!(lora.alpha > 0.0, "[model.lora] alpha must be positive");
            ensure!(
                lora.dropout == 0.0,
                "[model.lora] dropout = {} is not supported yet (only 0)",
                lora.dropout
            );
            ensure!(
                !lora.target_modules.is_empty(),
                "[model.lora] target_modules is empty"
            );
        }
        ensure!(
            self.freeze_layers <= layers,
            "[model.freeze] layers = {} but the model has {layers} blocks",
            self.freeze_layers
        );
        Ok(())
    }
}

impl Decoder {
    /// A decoder holding `weights` (Hugging Face names) of a model shaped
    /// `spec`, its contexts cut to `max_seq_len`; what `plan` trains is
    /// registered in `varmap`. New adapters start as PEFT starts them
    /// (`A` uniform in ±1/√in from `seed`, `B` zero: no change at first).
    pub fn from_pretrained(
        spec: &DecoderSpec,
        weights: &Weights,
        max_seq_len: usize,
        plan: &TrainablePlan,
        varmap: &VarMap,
        seed: u64,
    ) -> Result<Decoder> {
        plan.validate(spec.num_layers)?;
        let config = ModelConfig::from_spec(spec, max_seq_len);
        config.validate()?;
        let device = weights
            .get(EMBED)
            .map(|t| t.device().clone())
            .unwrap_or(candle_core::Device::Cpu);
        // Variables are registered once the decoder is built.
        let vars: RefCell<Vec<(String, Var)>> = RefCell::new(Vec::new());
        let take = |hf: &str, own: &str, trainable: bool| -> Result<Tensor> {
            let tensor = weights.get(hf).ok_or_else(|| {
                crate::error::TrainError::Invalid(format!("the pretrained weights lack {hf}"))
            })?;
            if !trainable {
                return Ok(tensor.clone());
            }
            let var = Var::from_tensor(&tensor.copy()?)?;
            let t = var.as_tensor().clone();
            vars.borrow_mut().push((own.to_string(), var));
            Ok(t)
        };
        let full = plan.lora.is_none();
        let embed = take(EMBED, "embed", full && !plan.freeze_embeddings)?;
        let lm_head = match spec.tie_word_embeddings {
            true => None,
            false => Some(take(LM_HEAD, "lm_head", full && !plan.freeze_embeddings)?),
        };
        let mut blocks = Vec::with_capacity(spec.num_layers);
        for layer in 0..spec.num_layers {
            let n = block_names(layer);
            let trains = full && layer >= plan.freeze_layers;
            let own = |leaf: &str| format!("layers.{layer}.{leaf}");
            let projection = |module: LoraModule, hf: &str| -> Result<Linear> {
                let weight = take(hf, &own(module.own_name()), trains)?;
                let adapter = match &plan.lora {
                    Some(lora)
                        if layer >= plan.freeze_layers && lora.target_modules.contains(&module) =>
                    {
                        let (out, input) = weight.dims2()?;
                        let name = own(module.own_name());
                        let bound = 1.0 / (input as f64).sqrt();
                        let mut rng = SplitMix64::new(seed ^ fnv1a(&format!("{name}.lora_a")));
                        let a: Vec<f32> = (0..lora.r * input)
                            .map(|_| ((2.0 * unit(&mut rng) - 1.0) * bound) as f32)
                            .collect();
                        let a = Var::from_tensor(&Tensor::from_vec(a, (lora.r, input), &device)?)?;
                        let b = Var::zeros((out, lora.r), candle_core::DType::F32, &device)?;
                        let adapter = Adapter {
                            a: a.as_tensor().clone(),
                            b: b.as_tensor().clone(),
                            scale: lora.alpha / lora.r as f64,
                        };
                        vars.borrow_mut().push((format!("{name}.lora_a"), a));
                        vars.borrow_mut().push((format!("{name}.lora_b"), b));
                        Some(adapter)
                    }
                    _ => None,
                };
                Ok(Linear {
                    adapter,
                    frozen: !trains,
                    ..Linear::plain(weight)
                })
            };
            let q = projection(LoraModule::Query, &n.q)?;
            let k = projection(LoraModule::Key, &n.k)?;
            let v = projection(LoraModule::Value, &n.v)?;
            let o = projection(LoraModule::Output, &n.o)?;
            let gate = projection(LoraModule::Gate, &n.gate)?;
            let up = projection(LoraModule::Up, &n.up)?;
            let down = projection(LoraModule::Down, &n.down)?;
            let biases = match spec.attention_bias {
                false => None,
                true => Some([
                    take(&n.q_bias, &own("q_bias"), trains)?,
                    take(&n.k_bias, &own("k_bias"), trains)?,
                    take(&n.v_bias, &own("v_bias"), trains)?,
                ]),
            };
            blocks.push(Block {
                attn_norm: take(&n.attn_norm, &own("attn_norm"), trains)?,
                q,
                k,
                v,
                biases,
                o,
                mlp_norm: take(&n.mlp_norm, &own("mlp_norm"), trains)?,
                gate,
                up,
                down,
            });
        }
        let final_norm = take(FINAL_NORM, "final_norm", full)?;
        varmap
            .data()
            .lock()
            .expect("varmap lock")
            .extend(vars.into_inner());
        let (cos, sin) = rotary_tables(&config, &device)?;
        Ok(Decoder {
            config,
            embed_frozen: !full || plan.freeze_embeddings,
            embed,
            lm_head,
            blocks,
            final_norm,
            cos,
            sin,
        })
    }

    /// Every weight under its Hugging Face name, adapters folded in: the
    /// checkpoint transformers loads.
    pub fn merged_weights(&self) -> Result<Weights> {
        let mut out = Weights::new();
        let f32 = |t: &Tensor| t.detach().to_dtype(candle_core::DType::F32);
        out.insert(EMBED.into(), f32(&self.embed)?);
        if let Some(head) = &self.lm_head {
            out.insert(LM_HEAD.into(), f32(head)?);
        }
        out.insert(FINAL_NORM.into(), f32(&self.final_norm)?);
        for (layer, block) in self.blocks.iter().enumerate() {
            let n = block_names(layer);
            for (name, linear) in [
                (n.q, &block.q),
                (n.k, &block.k),
                (n.v, &block.v),
                (n.o, &block.o),
                (n.gate, &block.gate),
                (n.up, &block.up),
                (n.down, &block.down),
            ] {
                out.insert(name, f32(&linear.merged()?)?);
            }
            out.insert(n.attn_norm, f32(&block.attn_norm)?);
            out.insert(n.mlp_norm, f32(&block.mlp_norm)?);
            if let Some([q, k, v]) = &block.biases {
                out.insert(n.q_bias, f32(q)?);
                out.insert(n.k_bias, f32(k)?);
                out.insert(n.v_bias, f32(v)?);
            }
        }
        Ok(out)
    }

    /// The LoRA adapters under PEFT's names, when there are any.
    pub fn adapter_weights(&self) -> Result<Option<Weights>> {
        let mut out = Weights::new();
        for (layer, block) in self.blocks.iter().enumerate() {
            for module in LoraModule::ALL {
                let linear = match module {
                    LoraModule::Query => &block.q,
                    LoraModule::Key => &block.k,
                    LoraModule::Value => &block.v,
                    LoraModule::Output => &block.o,
                    LoraModule::Gate => &block.gate,
                    LoraModule::Up => &block.up,
                    LoraModule::Down => &block.down,
                };
                let Some(adapter) = &linear.adapter else {
                    continue;
                };
                let parent =
                    if matches!(module, LoraModule::Gate | LoraModule::Up | LoraModule::Down) {
                        "mlp"
                    } else {
                        "self_attn"
                    };
                let prefix = format!(
                    "base_model.model.model.layers.{layer}.{parent}.{}",
                    module.peft_name()
                );
                let f32 = |t: &Tensor| t.detach().to_dtype(candle_core::DType::F32);
                out.insert(format!("{prefix}.lora_A.weight"), f32(&adapter.a)?);
                out.insert(format!("{prefix}.lora_B.weight"), f32(&adapter.b)?);
            }
        }
        Ok((!out.is_empty()).then_some(out))
    }
}

impl ModelConfig {
    /// The decoder config of a pretrained model, its context cut to
    /// `max_seq_len` (the rotary tables cover no more).
    pub fn from_spec(spec: &DecoderSpec, max_seq_len: usize) -> ModelConfig {
        ModelConfig {
            vocab_size: spec.vocab_size,
            hidden_size: spec.hidden_size,
            num_layers: spec.num_layers,
            num_heads: spec.num_heads,
            num_kv_heads: spec.num_kv_heads,
            intermediate_size: spec.intermediate_size,
            max_seq_len: max_seq_len.min(spec.max_position_embeddings),
            rope_theta: spec.rope_theta,
            rms_eps: spec.rms_norm_eps,
            tie_word_embeddings: spec.tie_word_embeddings,
            attention_bias: spec.attention_bias,
            rope_scaling: spec.rope_scaling,
        }
    }
}

fn unit(rng: &mut SplitMix64) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}
