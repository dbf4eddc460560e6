//! A finished run's policy answering problems it was not trained on (the
//! co-evolution loop asks it for answers to judge), and the batched
//! answering that held-out evaluation shares with it.

use crate::config::{FreezeConfig, ModelSize};
use crate::conversation::{Rollout, RolloutOptions, rollouts};
use crate::error::{Result, ensure};
use crate::model::{Decoder, load_matching_weights};
use crate::problem::Problem;
use crate::rollout::Sampling;
use crate::tokenizer::ChatTokenizer;
use candle_core::Device;
use candle_nn::VarMap;
use std::path::Path;
use verifine_base::SplitMix64;
use verifine_models::Pretrained;

/// Rows (problems × copies) decoded per batch.
const CHUNK: usize = 50;

/// Problems per batch when each is answered `copies` times.
pub(crate) fn problems_per_chunk(copies: usize) -> usize {
    (CHUNK / copies.max(1)).max(1)
}

/// Rolls out `copies` answers to every problem, [`problems_per_chunk`]
/// problems per batch, in order: row `p * copies + c` is copy `c` of
/// problem `p`. `model` is already cast to the compute dtype.
pub(crate) fn answer_rollouts(
    model: &Decoder,
    tokenizer: &ChatTokenizer,
    problems: &[Problem],
    copies: usize,
    options: RolloutOptions<'_>,
    rng: &mut SplitMix64,
    device: &Device,
) -> Result<Vec<Rollout>> {
    let mut rolled = Vec::with_capacity(problems.len() * copies);
    for chunk in problems.chunks(problems_per_chunk(copies)) {
        let prompts: Vec<Vec<u32>> = chunk
            .iter()
            .flat_map(|p| std::iter::repeat_n(&p.prompt, copies))
            .map(|prompt| tokenizer.prompt_ids(prompt))
            .collect::<Result<_>>()?;
        rolled.extend(rollouts(model, tokenizer, &prompts, options, rng, device)?);
    }
    Ok(rolled)
}

/// A rollout's final answer as text, as the reward sees it.
pub(crate) fn answer_text(tokenizer: &ChatTokenizer, rollout: &Rollout) -> Result<String> {
    tokenizer.decode(&rollout.final_answer.ids)
}

/// A saved policy: a finished run's tokenizer and final weights, ready to
/// answer.
pub struct Policy {
    model: Decoder,
    tokenizer: ChatTokenizer,
    device: Device,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("model", self.model.config())
            .finish_non_exhaustive()
    }
}

impl Policy {
    /// Reads `tokenizer.json` and `model.safetensors` of the finished run in
    /// `run_dir`, into a model of size `model` (refused, naming both shapes
    /// and the file, when the weights are of another size).
    ///
    /// A run of a pretrained policy (`[model] from`) is read from the
    /// checkpoint it exported (`hf/`: merged weights, the model's own
    /// tokenizer and chat template).
    pub fn load(run_dir: &Path, model: &ModelSize) -> Result<Policy> {
        let device = crate::model::device()?;
        let exported = run_dir.join("hf");
        if model.from.is_some() {
            ensure!(
                exported.join("config.json").is_file(),
                "{}: a pretrained policy's run exports hf/ when it finishes; it has none",
                run_dir.display()
            );
            return Policy::load_exported(&exported, model, device);
        }
        let tokenizer = ChatTokenizer::load(&run_dir.join("tokenizer.json"))?;
        let varmap = VarMap::new();
        let decoder = Decoder::new(model.model_config(tokenizer.vocab_size()), &varmap, &device)?;
        load_matching_weights(&varmap, &run_dir.join("model.safetensors"), &device)?;
        // Frozen, so cast to the compute dtype once.
        let model = decoder.frozen_copy()?.cast(model.compute_dtype)?;
        Ok(Policy {
            model,
            tokenizer,
            device,
        })
    }

    fn load_exported(checkpoint: &Path, model: &ModelSize, device: Device) -> Result<Policy> {
        let pretrained = Pretrained::load(checkpoint, &device)?;
        let tokenizer = ChatTokenizer::pretrained(&pretrained)?;
        let varmap = VarMap::new();
        // Every weight as it was exported: no adapters, nothing frozen.
        let plan = ModelSize {
            lora: None,
            freeze: FreezeConfig::default(),
            ..model.clone()
        }
        .trainable_plan();
        let decoder = Decoder::from_pretrained(
            &pretrained.spec,
            &pretrained.weights,
            model.max_seq_len,
            &plan,
            &varmap,
            0,
        )?;
        Ok(Policy {
            model: decoder.frozen_copy()?.cast(model.compute_dtype)?,
            tokenizer,
            device,
        })
    }

    /// `copies` answers to each problem (one answer turn each, up to
    /// `max_new_tokens` tokens), as the text the reward sees; sampled with
    /// a generator seeded from `seed`, so the same call gives the same
    /// answers. Problems are batched as held-out evaluation batches them.
    pub fn answer(
        &self,
        problems: &[Problem],
        sampling: Sampling,
        copies: usize,
        max_new_tokens: usize,
        seed: u64,
    ) -> Result<Vec<Vec<String>>> {
        ensure!(copies >= 1, "Policy::answer needs at least one copy");
        ensure!(
            max_new_tokens >= 1,
            "Policy::answer needs max_new_tokens of at least 1"
        );
        if problems.is_empty() {
            return Ok(Vec::new());
        }
        let options = RolloutOptions {
            max_new_tokens,
            max_seq_len: self.model.config().max_seq_len,
            sampling,
            verification: None,
        };
        let mut rng = SplitMix64::new(seed);
        let rolled = answer_rollouts(
            &self.model,
            &self.tokenizer,
            problems,
            copies,
            options,
            &mut rng,
            &self.device,
        )?;
        rolled
            .chunks(copies)
            .map(|rows| {
                rows.iter()
                    .map(|r| answer_text(&self.tokenizer, r))
                    .collect()
            })
            .collect()
    }
}
