//! Constructors and helpers on the contract's records, so plugins read as
//! statements of their rules rather than struct literals.

use crate::{
    Context, Criterion, Judgment, RubricInfo, Sample, Scoring, SubScore, TriggerDecision, Verdict,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;

/// Config type for plugins that take no configuration (accepts any table).
#[derive(Debug, Default, Deserialize)]
pub struct NoConfig {}

impl Context {
    /// A context at `step` with no plugin config; handy in native unit tests.
    pub fn at_step(step: u64) -> Self {
        Context {
            step,
            round: 0,
            config: "{}".to_string(),
        }
    }
}

impl Criterion {
    /// A criterion in the default dimension ("overall") without tags.
    pub fn new(id: &str, description: &str, weight: f64) -> Self {
        Criterion {
            id: id.to_string(),
            description: description.to_string(),
            weight,
            dimension: "overall".to_string(),
            tags: Vec::new(),
        }
    }

    /// Places the criterion in a dimension (e.g. "action").
    pub fn in_dimension(mut self, dimension: &str) -> Self {
        self.dimension = dimension.to_string();
        self
    }

    /// Adds tags (e.g. "axis:accuracy").
    pub fn with_tags<I: IntoIterator<Item = S>, S: Into<String>>(mut self, tags: I) -> Self {
        self.tags.extend(tags.into_iter().map(Into::into));
        self
    }
}

impl RubricInfo {
    /// An empty description; add criteria with [`RubricInfo::criterion`].
    pub fn new(name: &str, version: &str) -> Self {
        RubricInfo {
            name: name.to_string(),
            version: version.to_string(),
            criteria: Vec::new(),
        }
    }

    /// Adds a criterion.
    pub fn criterion(mut self, criterion: Criterion) -> Self {
        self.criteria.push(criterion);
        self
    }
}

impl Verdict {
    /// A binary verdict: score 1 when met, 0 otherwise.
    pub fn met(criterion: &str, met: bool) -> Self {
        Verdict {
            criterion: criterion.to_string(),
            score: if met { 1.0 } else { 0.0 },
            met: Some(met),
            confidence: None,
            explanation: None,
        }
    }

    /// A graded verdict; the score is clamped to [0, 1].
    pub fn scored(criterion: &str, score: f64) -> Self {
        Verdict {
            criterion: criterion.to_string(),
            score: score.clamp(0.0, 1.0),
            met: None,
            confidence: None,
            explanation: None,
        }
    }

    /// Attaches an explanation.
    pub fn because(mut self, explanation: impl Into<String>) -> Self {
        self.explanation = Some(explanation.into());
        self
    }

    /// Attaches a confidence in [0, 1].
    pub fn with_confidence(mut self, confidence: f64) -> Self {
        self.confidence = Some(confidence.clamp(0.0, 1.0));
        self
    }
}

impl Judgment {
    /// A judgment with verdicts only; the aggregator computes the reward.
    pub fn from_verdicts(verdicts: Vec<Verdict>) -> Self {
        Judgment {
            total: None,
            verdicts,
            sub_scores: Vec::new(),
            criteria: Vec::new(),
            explanation: None,
        }
    }

    /// Sets the rubric's own total.
    pub fn with_total(mut self, total: Option<f64>) -> Self {
        self.total = total;
        self
    }

    /// Adds a named sub-score.
    pub fn with_sub_score(mut self, name: &str, value: f64) -> Self {
        self.sub_scores.push(SubScore {
            name: name.to_string(),
            value,
        });
        self
    }

    /// Declares row-level criteria (rubric items that came with the data).
    pub fn with_criteria(mut self, criteria: Vec<Criterion>) -> Self {
        self.criteria = criteria;
        self
    }

    /// Attaches an overall explanation.
    pub fn because(mut self, explanation: impl Into<String>) -> Self {
        self.explanation = Some(explanation.into());
        self
    }

    /// The verdict on `criterion`, if any.
    pub fn verdict(&self, criterion: &str) -> Option<&Verdict> {
        self.verdicts.iter().find(|v| v.criterion == criterion)
    }
}

impl Sample {
    /// A sample with an empty context; handy in native unit tests.
    pub fn new(id: &str, prompt: &str, response: &str) -> Self {
        Sample {
            id: id.to_string(),
            prompt: prompt.to_string(),
            response: response.to_string(),
            reference: None,
            context: "{}".to_string(),
            metadata: Vec::new(),
        }
    }

    /// Sets the reference answer.
    pub fn with_reference(mut self, reference: &str) -> Self {
        self.reference = Some(reference.to_string());
        self
    }

    /// Sets the context JSON.
    pub fn with_context(mut self, context: serde_json::Value) -> Self {
        self.context = context.to_string();
        self
    }

    /// Parses the sample's context JSON into `T`; an empty context parses as `{}`.
    pub fn context_as<T: DeserializeOwned>(&self) -> Result<T, String> {
        let text = if self.context.trim().is_empty() {
            "{}"
        } else {
            &self.context
        };
        serde_json::from_str(text).map_err(|e| format!("sample {}: invalid context: {e}", self.id))
    }
}

impl Scoring {
    /// The weight of `criterion`, looked up in this item's criteria.
    pub fn weight_of(&self, criterion: &str) -> Option<f64> {
        self.criteria
            .iter()
            .find(|c| c.id == criterion)
            .map(|c| c.weight)
    }
}

impl TriggerDecision {
    /// Fire, with the reason.
    pub fn fire(reason: impl Into<String>) -> Self {
        TriggerDecision {
            fire: true,
            reason: reason.into(),
        }
    }

    /// Do not fire, with the reason.
    pub fn hold(reason: impl Into<String>) -> Self {
        TriggerDecision {
            fire: false,
            reason: reason.into(),
        }
    }
}
