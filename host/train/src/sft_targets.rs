//! SFT targets chosen by the host instead of generated here: the
//! co-evolution loop's rounds in which the judge only decides membership
//! hand training the candidates (pool targets, the policy's own answers)
//! with the judge's keep / drop decision and weight. Training draws from
//! them as from its own SFT pool; checkpoints record their fingerprint, and
//! a resume with other targets is refused. [`SftItem`], the sample both
//! these targets and the SFT pool hold, lives here, below the pool.

use crate::error::{Result, ensure};
use crate::problem::Problem;
use crate::prompt_pool::fingerprint_of;
use serde::{Deserialize, Serialize};

/// One trainable sample and how often it is drawn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SftItem {
    /// Index into the problems SFT trains on (the generated training set, or
    /// the host's [`SftTargets`]).
    pub problem: usize,
    /// The answer turn trained on.
    pub target: String,
    /// Whether the target carries a slip (known to the generator only).
    pub noisy: bool,
    /// The judge's score of the target (`None` without a curriculum, or when
    /// judging failed).
    pub judge_score: Option<f64>,
    /// Kept with this weight, or dropped (`None`).
    pub weight: Option<f64>,
    /// The curriculum's reason.
    pub reason: String,
}

/// The host's SFT candidates: `items[i].problem` indexes `problems`; an
/// item is kept with its weight, or dropped (`weight: None`, recorded with
/// its reason in `sft_selection.jsonl` all the same).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SftTargets {
    /// The problems the targets answer.
    pub problems: Vec<Problem>,
    /// The candidates, kept or dropped.
    pub items: Vec<SftItem>,
}

impl SftTargets {
    /// Refuses targets training cannot draw from, naming the offending item.
    pub fn validate(&self) -> Result<()> {
        for (i, item) in self.items.iter().enumerate() {
            ensure!(
                item.problem < self.problems.len(),
                "SFT targets: item {i} names problem {} of {}",
                item.problem,
                self.problems.len()
            );
            if let Some(w) = item.weight {
                ensure!(
                    w.is_finite() && w > 0.0,
                    "SFT targets: item {i} is kept with weight {w} (weights must be positive and finite)"
                );
            }
        }
        ensure!(
            self.items.iter().any(|item| item.weight.is_some()),
            "SFT targets: none of the {} candidates is kept",
            self.items.len()
        );
        Ok(())
    }

    /// sha256 (hex) of the targets' canonical serialization.
    pub fn fingerprint(&self) -> String {
        fingerprint_of(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(weights: &[Option<f64>], problem: usize) -> SftTargets {
        SftTargets {
            problems: vec![Problem {
                prompt: "p".into(),
                solution: "#### 1".into(),
                answer: 1,
            }],
            items: weights
                .iter()
                .map(|&weight| SftItem {
                    problem,
                    target: "#### 1".into(),
                    noisy: false,
                    judge_score: Some(1.0),
                    weight,
                    reason: "kept".into(),
                })
                .collect(),
        }
    }

    #[test]
    fn bad_targets_are_refused_naming_the_item() {
        let err = |t: SftTargets| t.validate().unwrap_err().to_string();
        assert!(err(targets(&[Some(1.0)], 3)).contains("item 0 names problem 3 of 1"));
        assert!(err(targets(&[Some(1.0), Some(f64::NAN)], 0)).contains("item 1"));
        assert!(err(targets(&[Some(1.0), Some(-2.0)], 0)).contains("item 1"));
        assert!(err(targets(&[None, None], 0)).contains("none of the 2"));
        targets(&[None, Some(0.5)], 0).validate().unwrap();
    }

    #[test]
    fn the_fingerprint_follows_the_decisions() {
        let a = targets(&[Some(1.0), None], 0);
        assert_eq!(
            a.fingerprint(),
            targets(&[Some(1.0), None], 0).fingerprint()
        );
        assert_ne!(
            a.fingerprint(),
            targets(&[Some(1.0), Some(1.0)], 0).fingerprint()
        );
    }
}
