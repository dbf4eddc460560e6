//! What a training run is told to do: one TOML file, every table optional,
//! names as in TRL / verl where they exist so configs carry over.

use super::grpo::GrpoConfig;
use super::model::{ComputeDType, LoraConfig, ModelConfig, TrainablePlan};
use super::optim::OptimConfig;
use super::task::TaskConfig;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use verifine_base::PluginSetting;

mod validate;

/// Model size (the vocabulary comes from the trained tokenizer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelSize {
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Decoder blocks.
    pub num_layers: usize,
    /// Query heads.
    pub num_heads: usize,
    /// Key/value heads.
    pub num_kv_heads: usize,
    /// MLP width.
    pub intermediate_size: usize,
    /// Longest conversation in tokens.
    pub max_seq_len: usize,
    /// Precision of the forward and backward passes; weights and optimizer
    /// state stay f32 ("master weights").
    pub compute_dtype: ComputeDType,
    /// A pretrained policy: a Hugging Face checkpoint directory or a GGUF
    /// file. Its own shape replaces the size fields above (but
    /// `max_seq_len`, which cuts its context), its tokenizer and chat
    /// template replace the trained ones.
    pub from: Option<PathBuf>,
    /// `[model.lora]`: train low-rank adapters of a pretrained policy.
    pub lora: Option<LoraConfig>,
    /// `[model.freeze]`: parts of a pretrained policy that stay fixed.
    pub freeze: FreezeConfig,
}

/// `[model.freeze]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FreezeConfig {
    /// The embedding table (and a tied output projection).
    pub embeddings: bool,
    /// The first this many blocks.
    pub layers: usize,
}

impl ModelSize {
    /// What trains of a pretrained policy.
    pub fn trainable_plan(&self) -> TrainablePlan {
        TrainablePlan {
            lora: self.lora.clone(),
            freeze_embeddings: self.freeze.embeddings,
            freeze_layers: self.freeze.layers,
        }
    }
}

impl Default for ModelSize {
    fn default() -> Self {
        ModelSize {
            hidden_size: 64,
            num_layers: 2,
            num_heads: 4,
            num_kv_heads: 2,
            intermediate_size: 128,
            max_seq_len: 160,
            compute_dtype: ComputeDType::F32,
            from: None,
            lora: None,
            freeze: FreezeConfig::default(),
        }
    }
}

impl ModelSize {
    /// The full model config for a vocabulary of `vocab_size` tokens.
    pub fn model_config(&self, vocab_size: usize) -> ModelConfig {
        ModelConfig {
            vocab_size,
            hidden_size: self.hidden_size,
            num_layers: self.num_layers,
            num_heads: self.num_heads,
            num_kv_heads: self.num_kv_heads,
            intermediate_size: self.intermediate_size,
            max_seq_len: self.max_seq_len,
            rope_theta: 10_000.0,
            rms_eps: 1e-6,
            tie_word_embeddings: true,
            attention_bias: false,
            rope_scaling: None,
        }
    }
}

/// The SFT warm-up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SftConfig {
    /// Optimizer updates.
    pub steps: usize,
    /// Problems per update.
    pub batch_size: usize,
    /// Optimizer settings.
    pub optim: OptimConfig,
    /// Share of training targets with an arithmetic slip, standing in for
    /// the wrong solutions real SFT data holds (0 = clean data).
    pub noisy_target_share: f64,
    /// A curriculum plugin that keeps, drops or weights each SFT sample
    /// after the reward rubric judged its target; `None` keeps all.
    pub curriculum: Option<PluginSetting>,
    /// Held-out evaluation every this many SFT steps, with a monitor
    /// reading for the host's step hook (0 = only when SFT ends). For a
    /// host whose rounds are SFT (the judge decides membership) and whose
    /// trigger needs progress readings.
    pub eval_every: usize,
    /// `[sft.task]`: the problems whose worked solutions SFT trains on,
    /// when they are not the run's `[task]` (an easy rung of the ladder,
    /// say, while GRPO and the held-out problems are a harder one). Drawn
    /// from their own stream; a held-out prompt is never among them.
    pub task: Option<TaskConfig>,
    /// Ends SFT at the first step boundary after this many seconds of SFT
    /// steps (evaluations and checkpoints not counted), even before
    /// `steps`: a control arm given the same time as another run's phase.
    pub max_seconds: Option<f64>,
}

impl Default for SftConfig {
    fn default() -> Self {
        SftConfig {
            steps: 700,
            batch_size: 16,
            optim: OptimConfig {
                learning_rate: 2e-3,
                warmup_steps: 20,
                ..OptimConfig::default()
            },
            noisy_target_share: 0.0,
            curriculum: None,
            eval_every: 0,
            task: None,
            max_seconds: None,
        }
    }
}

/// What happens to a sample whose reward could not be computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RewardFailure {
    /// The sample leaves its group's advantage computation.
    Abstain,
    /// The sample gets reward 0.
    Zero,
}

/// The GRPO phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GrpoPhase {
    /// Optimizer updates.
    pub steps: usize,
    /// Distinct prompts per update (each gets `num_generations` completions).
    pub prompts_per_step: usize,
    /// Longest completion (per answer turn with self-verification). TRL's
    /// name, `max_completion_length`, is accepted too.
    #[serde(alias = "max_completion_length")]
    pub max_new_tokens: usize,
    /// Sampling temperature of rollouts.
    pub temperature: f64,
    /// The objective (TRL names).
    pub objective: GrpoConfig,
    /// Optimizer settings.
    pub optim: OptimConfig,
    /// Reward failures: abstain or zero.
    pub on_reward_failure: RewardFailure,
    /// Ends GRPO at the first step boundary after this many seconds of
    /// GRPO steps (evaluations and checkpoints not counted), even before
    /// `steps`.
    pub max_seconds: Option<f64>,
}

impl Default for GrpoPhase {
    fn default() -> Self {
        GrpoPhase {
            steps: 400,
            prompts_per_step: 16,
            max_new_tokens: 48,
            temperature: 1.0,
            objective: GrpoConfig::default(),
            optim: OptimConfig {
                learning_rate: 2e-4,
                warmup_steps: 5,
                ..OptimConfig::default()
            },
            on_reward_failure: RewardFailure::Abstain,
            max_seconds: None,
        }
    }
}

/// Self-verification rollouts (SVR-R1): answer, verify YES/NO, rethink on NO.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SelfVerification {
    /// Off: plain single-answer rollouts.
    pub enabled: bool,
    /// Most answer turns in one rollout (the first answer included).
    pub max_turns: usize,
    /// The user turn asking the policy to check its answer.
    pub verify_prompt: String,
    /// The user turn appended after a NO (the rethink trigger).
    pub rethink_prompt: String,
    /// Longest verification reply.
    pub max_verify_tokens: usize,
    /// Share of SFT samples that teach verification (a correct answer
    /// verified YES, or a slipped one verified NO and redone).
    pub sft_share: f64,
}

impl Default for SelfVerification {
    fn default() -> Self {
        SelfVerification {
            enabled: false,
            max_turns: 2,
            verify_prompt: "Check the answer. Is it correct? Reply YES or NO.".to_string(),
            rethink_prompt: "Rethink the problem and solve it again.".to_string(),
            max_verify_tokens: 4,
            sft_share: 0.5,
        }
    }
}

/// The reward: a rubric and an optional aggregator from the plugin runtime.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RewardConfig {
    /// The rubric slot (default: built-in `math-answer`).
    pub rubric: PluginSetting,
    /// The aggregator slot (default: the rubric's own total).
    #[serde(default)]
    pub aggregator: Option<PluginSetting>,
    /// The rewards training accepts, `[low, high]` (default `[-1, 1]`): a
    /// total outside it (or not finite) counts as a failed reward under
    /// `grpo.on_reward_failure`, so a plugin answering 1e300 cannot blow up
    /// an update. Widen it for rubrics whose totals go beyond.
    #[serde(default = "default_reward_range")]
    pub range: [f64; 2],
    /// Judges the held-out answers, with their references, in place of the
    /// rubric (default: the rubric itself), so that a reference-free reward
    /// is measured by a reference-based evaluator it never sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluator: Option<PluginSetting>,
    /// Keep every reference from the rubric and the aggregator (the
    /// evaluator still gets it): a reward meant to work without one, such
    /// as a trained verifier's, is then trained with as it will be used.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reference_free: bool,
    /// The context (JSON) every rewarded sample carries, for rubrics that
    /// read their items from it (`healthbench`: `{ rubrics = [{ criterion
    /// = "…", points = 1.0 }] }`) on generated tasks, which carry none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<serde_json::Value>,
}

fn default_reward_range() -> [f64; 2] {
    [-1.0, 1.0]
}

impl RewardConfig {
    /// `total` when it is inside [`RewardConfig::range`], else `None`.
    pub fn admit(&self, total: Option<f64>) -> Option<f64> {
        let [low, high] = self.range;
        total.filter(|t| (low..=high).contains(t))
    }
}

impl Default for RewardConfig {
    fn default() -> Self {
        RewardConfig {
            rubric: PluginSetting::new("math-answer"),
            aggregator: None,
            range: default_reward_range(),
            evaluator: None,
            reference_free: false,
            context: None,
        }
    }
}

/// When checkpoints are written and how many are kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CheckpointConfig {
    /// A checkpoint every this many steps (SFT and GRPO counted together;
    /// 0 = only at the end).
    pub every: usize,
    /// Newest checkpoints kept; older ones are deleted once a newer one is
    /// complete.
    pub keep: usize,
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        CheckpointConfig {
            every: 200,
            keep: 2,
        }
    }
}

/// What training is told to do. The host adds its own tables beside it
/// (sandbox limits, hot-swap) in the file users write, so unknown top-level
/// keys are the host's to refuse (it knows its own); every table below the
/// top level refuses unknown keys itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct TrainConfig {
    /// Seeds data, initialization and sampling.
    pub seed: u64,
    /// Seeds only the draws of training (which prompt or SFT item comes
    /// next, the rollouts' sampling, pass@k) when set, so that runs can vary
    /// their sampling over the same data and starting weights (`verifine
    /// evolve --seeds`). `None`: `seed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampling_seed: Option<u64>,
    /// Problem difficulty.
    pub task: TaskConfig,
    /// Training problems generated.
    pub train_problems: usize,
    /// Held-out problems for greedy accuracy.
    pub heldout_problems: usize,
    /// Held-out accuracy is also measured every this many GRPO steps
    /// (0 = only before and after GRPO).
    pub eval_every: usize,
    /// Before and after GRPO, also sample this many answers per held-out
    /// problem at the GRPO temperature and report pass@k: the share solved
    /// at least once, the headroom GRPO can lift greedy accuracy towards
    /// (0 = not measured).
    pub pass_at_k: usize,
    /// Most tokens in the trained vocabulary.
    pub vocab_size: usize,
    /// A finished run directory to start from: its `tokenizer.json` is
    /// copied into the new run (no tokenizer is trained, `vocab_size` is
    /// not used) and its
    /// `model.safetensors` are the starting weights, which `model` must
    /// match. SFT steps, if any, continue from them; the KL reference
    /// (`beta > 0`) is the model after those steps (the base itself when
    /// `sft.steps = 0`). A relative path is taken from the working
    /// directory. `None`: a fresh model and tokenizer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_from: Option<PathBuf>,
    /// Model size.
    pub model: ModelSize,
    /// SFT warm-up.
    pub sft: SftConfig,
    /// GRPO phase.
    pub grpo: GrpoPhase,
    /// Self-verification rollouts.
    pub self_verification: SelfVerification,
    /// Reward plugins (loaded by the host; training only scores through
    /// [`crate::hooks::RewardFunction`]).
    pub reward: RewardConfig,
    /// Checkpoint schedule.
    pub checkpoints: CheckpointConfig,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            seed: 0,
            sampling_seed: None,
            task: TaskConfig {
                max_steps: 2,
                max_operand: 9,
                ..TaskConfig::default()
            },
            train_problems: 4000,
            heldout_problems: 200,
            eval_every: 25,
            pass_at_k: 8,
            vocab_size: 400,
            init_from: None,
            model: ModelSize::default(),
            sft: SftConfig::default(),
            grpo: GrpoPhase::default(),
            self_verification: SelfVerification::default(),
            reward: RewardConfig::default(),
            checkpoints: CheckpointConfig::default(),
        }
    }
}

impl TrainConfig {
    /// The seed of training's draws: `sampling_seed`, else `seed`.
    pub fn effective_sampling_seed(&self) -> u64 {
        self.sampling_seed.unwrap_or(self.seed)
    }

    /// SFT and GRPO steps together.
    pub fn total_steps(&self) -> usize {
        self.sft.steps + self.grpo.steps
    }
}

#[cfg(test)]
mod tests {
    use super::GrpoPhase;

    #[test]
    fn trl_option_names_are_accepted() {
        let phase: GrpoPhase = toml::from_str("max_completion_length = 12").unwrap();
        assert_eq!(phase.max_new_tokens, 12);
    }
}
