//! A reward function made of a rubric and an aggregator, and batch scoring
//! spread over worker threads.
//!
//! The total of a sample is the aggregator's output when an aggregator was
//! chosen explicitly; otherwise the rubric's own total, or — for rubrics that
//! return only verdicts — the default aggregator's (`weighted-sum`).

use crate::error::{Result, RuntimeError};
use crate::judgments::{JudgmentRef, Judgments};
use crate::{
    Context, Criterion, Judgment, Plugin, PluginError, PluginInstance, PluginKind, Runtime, Sample,
    Scoring,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use verifine_base::{PluginSetting, PluginSpec};

/// The aggregator used when none is named.
pub const DEFAULT_AGGREGATOR: &str = "weighted-sum";

/// Which plugins make up the reward, with their config tables (as JSON).
#[derive(Clone)]
pub struct RewardPlugins {
    /// The rubric that judges each sample.
    pub rubric: Arc<Plugin>,
    /// The rubric's config table, as the JSON its context carries.
    pub rubric_config: String,
    /// The named aggregator, or [`DEFAULT_AGGREGATOR`].
    pub aggregator: Arc<Plugin>,
    /// The aggregator's config table, as JSON.
    pub aggregator_config: String,
    /// Whether the aggregator was chosen by the user (then it always decides the total).
    pub aggregator_explicit: bool,
}

impl RewardPlugins {
    /// Loads the rubric and the aggregator (the default one when `aggregator` is `None`).
    pub fn load(
        runtime: &Runtime,
        rubric: impl Into<PluginSpec>,
        rubric_config: &serde_json::Value,
        aggregator: Option<PluginSpec>,
        aggregator_config: &serde_json::Value,
    ) -> Result<Self> {
        Ok(RewardPlugins {
            rubric: runtime.load_kind(rubric, PluginKind::Rubric)?,
            rubric_config: rubric_config.to_string(),
            aggregator: runtime.load_kind(
                aggregator
                    .clone()
                    .unwrap_or_else(|| DEFAULT_AGGREGATOR.into()),
                PluginKind::Aggregator,
            )?,
            aggregator_config: aggregator_config.to_string(),
            aggregator_explicit: aggregator.is_some(),
        })
    }

    /// Loads the plugins named by config slots.
    pub fn from_settings(
        runtime: &Runtime,
        rubric: &PluginSetting,
        aggregator: Option<&PluginSetting>,
    ) -> Result<Self> {
        RewardPlugins::load(
            runtime,
            &rubric.plugin,
            &rubric.config_json(),
            aggregator.map(|a| a.plugin.clone()),
            &aggregator.map_or(serde_json::json!({}), PluginSetting::config_json),
        )
    }

    /// A scorer with its own plugin instances, for one worker thread.
    pub fn scorer(&self) -> Result<Scorer> {
        let mut rubric = self.rubric.instance();
        let criteria = rubric
            .describe()
            .map_err(|error| RuntimeError::Describe {
                plugin: self.rubric.metadata.name.clone(),
                error,
            })?
            .criteria;
        Ok(Scorer {
            function: self.clone(),
            rubric,
            aggregator: self.aggregator.instance(),
            criteria,
        })
    }
}

/// The outcome for one sample. `total` is `None` when scoring failed (see
/// `error`) or the rubric defines no score for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredSample {
    /// The reward; `None` on failure (see `error`) or when undefined.
    pub total: Option<f64>,
    /// The rubric's own total, when an explicit aggregator replaced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rubric_total: Option<f64>,
    /// The rubric's judgment; `None` when judging failed.
    pub judgment: Option<Judgment>,
    /// Why there is no total: the rubric's or aggregator's error, or a non-finite total.
    pub error: Option<String>,
}

/// Scores batches through one rubric instance and one aggregator instance.
pub struct Scorer {
    function: RewardPlugins,
    rubric: PluginInstance,
    aggregator: PluginInstance,
    criteria: Vec<Criterion>,
}

impl Scorer {
    /// The criteria the rubric described when this scorer was made.
    pub fn criteria(&self) -> &[Criterion] {
        &self.criteria
    }

    /// Scores one batch; failures are per sample. When the rubric's batch
    /// call fails (a trap on one sample, say), the samples are judged one by
    /// one, so only the ones that fail alone fail; a batch that ran out of
    /// time is not retried (that would multiply the wait).
    pub fn score_batch(&mut self, step: u64, round: u32, samples: &[Sample]) -> Vec<ScoredSample> {
        self.score_batch_in_place(step, round, samples)
            .iter()
            .map(|one| one.to_scored_sample())
            .collect()
    }

    /// [`Scorer::score_batch`] with the judgments read where the rubric's
    /// answer lies: a caller that writes rows or sums rewards allocates
    /// nothing per sample.
    pub fn score_batch_in_place(
        &mut self,
        step: u64,
        round: u32,
        samples: &[Sample],
    ) -> ScoredBatch {
        let ctx = |config: &str| Context {
            step,
            round,
            config: config.to_string(),
        };
        let rubric_ctx = ctx(&self.function.rubric_config);
        let judgments = match self.rubric.judge_in_place(&rubric_ctx, samples) {
            Ok(judgments) => judgments,
            Err(e @ PluginError::Timeout { .. }) => {
                let failed: Vec<_> = samples.iter().map(|_| Err(e.to_string())).collect();
                Judgments::from_owned(&failed)
            }
            Err(e) if samples.len() == 1 => Judgments::from_owned(&[Err(e.to_string())]),
            Err(_) => {
                let one_by_one: Vec<_> = samples
                    .iter()
                    .map(|sample| {
                        match self.rubric.judge(&rubric_ctx, std::slice::from_ref(sample)) {
                            Ok(mut one) => {
                                one.pop().unwrap_or_else(|| Err("no judgment".to_string()))
                            }
                            Err(e) => Err(e.to_string()),
                        }
                    })
                    .collect();
                Judgments::from_owned(&one_by_one)
            }
        };

        // Which judged samples need the aggregator, and their inputs.
        let explicit = self.function.aggregator_explicit;
        let mut needs_aggregate = Vec::new();
        let mut items = Vec::new();
        for (i, judgment) in judgments.iter().enumerate() {
            if let Ok(j) = judgment
                && (explicit || j.total().is_none())
            {
                let judgment = j.to_judgment();
                let criteria = if judgment.criteria.is_empty() {
                    self.criteria.clone()
                } else {
                    judgment.criteria.clone()
                };
                needs_aggregate.push(i);
                items.push(Scoring { criteria, judgment });
            }
        }
        let mut aggregated: Vec<Option<Result<Option<f64>, String>>> = vec![None; samples.len()];
        if !items.is_empty() {
            let results = self
                .aggregator
                .aggregate(&ctx(&self.function.aggregator_config), &items)
                .unwrap_or_else(|e| items.iter().map(|_| Err(e.to_string())).collect());
            for (i, result) in needs_aggregate.into_iter().zip(results) {
                aggregated[i] = Some(result);
            }
        }

        let outcomes = judgments
            .iter()
            .zip(aggregated)
            .map(|(judgment, aggregate)| match judgment {
                Err(e) => Outcome::failed(e.to_string()),
                Ok(j) => {
                    let rubric_total = j.total();
                    let total = match aggregate {
                        Some(Ok(reward)) => Ok(reward),
                        Some(Err(e)) => Err(format!("aggregator: {e}")),
                        None => Ok(rubric_total),
                    };
                    let (total, error) = match total {
                        Ok(Some(t)) if !t.is_finite() => {
                            (None, Some(format!("non-finite total {t}")))
                        }
                        Ok(t) => (t, None),
                        Err(e) => (None, Some(e)),
                    };
                    Outcome {
                        total,
                        rubric_total: if explicit { rubric_total } else { None },
                        error,
                    }
                }
            })
            .collect();
        ScoredBatch {
            judgments,
            outcomes,
        }
    }
}

/// A batch scored in place: the rubric's answer and each sample's reward.
#[derive(Debug, Clone)]
pub struct ScoredBatch {
    judgments: Judgments,
    outcomes: Vec<Outcome>,
}

#[derive(Debug, Clone)]
struct Outcome {
    total: Option<f64>,
    rubric_total: Option<f64>,
    error: Option<String>,
}

impl Outcome {
    fn failed(error: String) -> Self {
        Outcome {
            total: None,
            rubric_total: None,
            error: Some(error),
        }
    }
}

impl ScoredBatch {
    /// Each sample's outcome, in input order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = ScoredRef<'_>> + '_ {
        self.outcomes
            .iter()
            .zip(self.judgments.iter())
            .map(|(outcome, judgment)| ScoredRef {
                total: outcome.total,
                rubric_total: outcome.rubric_total,
                judgment: judgment.ok(),
                error: outcome.error.as_deref(),
            })
    }
}

/// [`ScoredSample`] with its judgment read in place (see
/// [`Scorer::score_batch_in_place`]).
#[derive(Debug, Clone, Copy)]
pub struct ScoredRef<'a> {
    /// The reward; `None` on failure (see `error`) or when undefined.
    pub total: Option<f64>,
    /// The rubric's own total, when an explicit aggregator replaced it.
    pub rubric_total: Option<f64>,
    /// The rubric's judgment; `None` when judging failed.
    pub judgment: Option<JudgmentRef<'a>>,
    /// Why there is no total: the rubric's or aggregator's error, or a non-finite total.
    pub error: Option<&'a str>,
}

impl ScoredRef<'_> {
    /// The owned outcome.
    pub fn to_scored_sample(&self) -> ScoredSample {
        ScoredSample {
            total: self.total,
            rubric_total: self.rubric_total,
            judgment: self.judgment.map(|j| j.to_judgment()),
            error: self.error.map(str::to_string),
        }
    }
}
