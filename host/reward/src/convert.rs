//! Between training's types and the plugin contract's: an answer becomes
//! a sample, a scored sample becomes a reward.

use verifine_runtime::Sample;
use verifine_runtime::scoring::ScoredSample;
use verifine_train::config::RewardConfig;
use verifine_train::hooks::{Answer, Reward};

/// What the rubric is shown of each answer beyond its prompt and response
/// (`[reward] context` and `reference_free`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SampleShape {
    /// The context every sample carries (JSON text); none: the sample's own.
    pub context: Option<String>,
    /// Whether the reference is kept from the rubric.
    pub reference_free: bool,
}

impl SampleShape {
    /// The shape `config` asks for.
    pub fn of(config: &RewardConfig) -> Self {
        SampleShape {
            context: config.context.as_ref().map(|c| c.to_string()),
            reference_free: config.reference_free,
        }
    }

    /// The sample the rubric sees for `answer`.
    pub fn sample(&self, answer: &Answer) -> Sample {
        self.apply(answer_sample(answer))
    }

    /// `sample` as the rubric sees it (the hot-swap gate's canary cases are
    /// shown as training's answers are).
    pub fn apply(&self, mut sample: Sample) -> Sample {
        if self.reference_free {
            sample.reference = None;
        }
        if let Some(context) = &self.context {
            sample.context = context.clone();
        }
        sample
    }
}

/// The contract's sample for training's answer (the reference travels
/// along; a reference-free judge ignores it).
pub fn answer_sample(answer: &Answer) -> Sample {
    let sample = Sample::new(&answer.id, &answer.prompt, &answer.response);
    match &answer.reference {
        Some(reference) => sample.with_reference(reference),
        None => sample,
    }
}

/// Training's reward from a scored sample: the total and each verdict's score.
pub fn reward_of(scored: &ScoredSample) -> Reward {
    Reward {
        total: scored.total,
        criteria: scored
            .judgment
            .iter()
            .flat_map(|j| &j.verdicts)
            .map(|v| (v.criterion.clone(), v.score))
            .collect(),
    }
}
