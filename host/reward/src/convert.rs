//! Between training's types and the plugin contract's: an answer becomes
//! a sample, a scored sample becomes a reward.

use verifine_runtime::Sample;
use verifine_runtime::scoring::ScoredSample;
use verifine_train::hooks::{Answer, Reward};

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
