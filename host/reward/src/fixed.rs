//! A reward function of plugins that never change during a run.

use crate::convert::{SampleShape, reward_of};
use verifine_runtime::scoring::{RewardPlugins, Scorer};
use verifine_runtime::{Provenance, RuntimeError, Sample};
use verifine_train::hooks::{Answer, Reward, RewardFunction};

/// A reward function made of loaded plugins (the judge, or the evaluator).
pub struct FixedReward {
    scorer: Scorer,
    provenance: Vec<Provenance>,
    shape: SampleShape,
}

impl FixedReward {
    /// Scores with `plugins`; `rules` (the name of the rubric's config, as
    /// evolve's judge revisions number it: `rules r3`) is added to the
    /// rubric's version in the provenance every metrics line carries.
    pub fn new(plugins: &RewardPlugins, rules: Option<&str>) -> Result<Self, RuntimeError> {
        let mut rubric = plugins.rubric.provenance();
        if let Some(rules) = rules {
            rubric.version = format!("{} {rules}", rubric.version);
        }
        Ok(FixedReward {
            scorer: plugins.scorer()?,
            provenance: vec![rubric, plugins.aggregator.provenance()],
            shape: SampleShape::default(),
        })
    }

    /// Shows the rubric `shape`'s samples (a reference-free judge never
    /// sees the reference; a fixed context for every answer).
    pub fn with_shape(mut self, shape: SampleShape) -> Self {
        self.shape = shape;
        self
    }
}

impl RewardFunction for FixedReward {
    fn score(&mut self, step: usize, answers: &[Answer]) -> Vec<Reward> {
        let samples: Vec<Sample> = answers.iter().map(|a| self.shape.sample(a)).collect();
        self.scorer
            .score_batch(step as u64, 0, &samples)
            .iter()
            .map(reward_of)
            .collect()
    }

    fn provenance(&self) -> Vec<Provenance> {
        self.provenance.clone()
    }
}
