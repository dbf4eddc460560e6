//! Training a pretrained model into a YES/NO verifier (`verifine judge
//! train`): LoRA on the same model layers as policy training, the loss on
//! the verdict's tokens only, the held-out split by question so that no
//! question is both learnt and scored.
//!
//! The examples arrive as token ids: the caller (the CLI) renders each
//! labelled (item, question, response) through the rubric plugin and the
//! local judge backend that will later ask the trained model, so the model
//! is trained on exactly the ids it is asked with. A verdict's confidence
//! is P(YES) renormalised over the two answers, as the local judge scores
//! constrained choices.

mod fit;
pub mod metrics;
mod score;

pub use fit::{HeldoutVerdict, VerifierReport, train_verifier};
pub use metrics::{ClassMetrics, VerdictMetrics, verdict_metrics};

use crate::config::ModelSize;
use crate::error::{Result, ensure};
use crate::model::{LoraConfig, LoraModule};
use crate::optim::OptimConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use verifine_base::SplitMix64;

/// One labelled verdict to learn or score.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerdictExample {
    /// What the held-out split keeps together (the question).
    pub group: String,
    /// Where it came from (`file:line`), for reports.
    pub source: String,
    /// The prompt as the judge backend encodes it.
    pub prompt: Vec<u32>,
    /// The answer meaning "met", as a continuation of the prompt.
    pub yes: Vec<u32>,
    /// The answer meaning "not met".
    pub no: Vec<u32>,
    /// The label.
    pub met: bool,
}

impl VerdictExample {
    /// The ids of the labelled answer.
    pub fn target(&self) -> &[u32] {
        if self.met { &self.yes } else { &self.no }
    }
}

/// How the two classes are evened out in the loss.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClassBalance {
    /// Each example's loss weighted by n / (2 · n_class) over the training
    /// split: both classes count equally, every example is drawn as often.
    #[default]
    Weighted,
    /// Batches drawn half from each class (the rarer one's examples repeat).
    Sampled,
    /// As the data fall: a verifier can then learn the base rate.
    None,
}

/// `verifine judge train`'s settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VerifierConfig {
    /// Seeds the split, the batches and the adapters' initialisation.
    pub seed: u64,
    /// The pretrained model (`from`), its adapters (`lora`) and the longest
    /// example in tokens (`max_seq_len`).
    pub model: ModelSize,
    /// Optimizer steps.
    pub steps: usize,
    /// Examples per step.
    pub batch_size: usize,
    /// AdamW.
    pub optim: OptimConfig,
    /// Share of the groups (questions) held out for the report.
    pub heldout_share: f64,
    /// How the classes are evened out.
    pub balance: ClassBalance,
    /// Stop after this many training seconds, even before `steps`.
    pub max_seconds: Option<f64>,
}

impl Default for VerifierConfig {
    fn default() -> Self {
        VerifierConfig {
            seed: 0,
            model: ModelSize {
                max_seq_len: 1024,
                lora: Some(LoraConfig {
                    r: 16,
                    alpha: 32.0,
                    dropout: 0.0,
                    target_modules: LoraModule::ALL.to_vec(),
                }),
                ..ModelSize::default()
            },
            steps: 100,
            batch_size: 8,
            optim: OptimConfig {
                learning_rate: 2e-4,
                warmup_steps: 5,
                ..OptimConfig::default()
            },
            heldout_share: 0.25,
            balance: ClassBalance::Weighted,
            max_seconds: None,
        }
    }
}

/// The training and held-out examples, split by group: a seeded shuffle
/// of the distinct groups, the first `heldout_share` of them (at least
/// one, and never all) held out.
pub fn split_by_group(
    examples: Vec<VerdictExample>,
    heldout_share: f64,
    seed: u64,
) -> Result<(Vec<VerdictExample>, Vec<VerdictExample>)> {
    ensure!(
        (0.0..1.0).contains(&heldout_share),
        "heldout_share must be in [0, 1), not {heldout_share}"
    );
    let mut groups: Vec<&str> = examples
        .iter()
        .map(|e| e.group.as_str())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    ensure!(
        heldout_share == 0.0 || groups.len() >= 2,
        "held-out examples need at least two groups (questions); the labels have {}",
        groups.len()
    );
    let mut rng = SplitMix64::new(seed);
    for i in (1..groups.len()).rev() {
        groups.swap(i, rng.below(i + 1));
    }
    let wanted = (groups.len() as f64 * heldout_share).round() as usize;
    let held = match heldout_share {
        0.0 => 0,
        _ => wanted.clamp(1, groups.len() - 1),
    };
    let heldout: BTreeSet<String> = groups[..held].iter().map(|g| g.to_string()).collect();
    Ok(examples
        .into_iter()
        .partition(|e| !heldout.contains(&e.group)))
}

/// The examples without repeats (the same query ids and label as an
/// earlier one), and how many were dropped. A policy's runs often answer a
/// question alike; a repeat would weigh twice in training and, held out,
/// twice in the report. The same query labelled both ways is kept: that
/// disagreement is the labels' own.
pub fn distinct(examples: Vec<VerdictExample>) -> (Vec<VerdictExample>, usize) {
    let before = examples.len();
    let mut seen = std::collections::HashSet::new();
    let kept: Vec<VerdictExample> = examples
        .into_iter()
        .filter(|e| seen.insert((e.prompt.clone(), e.target().to_vec())))
        .collect();
    let dropped = before - kept.len();
    (kept, dropped)
}

/// Refuses training examples that cannot teach a verifier: none, one class
/// only, or an empty answer.
pub fn check_examples(train: &[VerdictExample]) -> Result<()> {
    ensure!(!train.is_empty(), "no training examples");
    let yes = train.iter().filter(|e| e.met).count();
    ensure!(
        yes > 0 && yes < train.len(),
        "the training labels hold one class only ({yes} met of {}): a verifier needs both",
        train.len()
    );
    if let Some(e) = train
        .iter()
        .find(|e| e.yes.is_empty() || e.no.is_empty() || e.prompt.is_empty())
    {
        crate::error::bail!("{}: an empty prompt or answer", e.source);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(group: &str, met: bool) -> VerdictExample {
        VerdictExample {
            group: group.into(),
            source: format!("{group}.jsonl:1"),
            prompt: vec![1, 2],
            yes: vec![3],
            no: vec![4],
            met,
        }
    }

    #[test]
    fn the_split_keeps_each_question_on_one_side() {
        let examples: Vec<_> = (0..40)
            .map(|i| example(&format!("q{}", i / 4), i % 2 == 0))
            .collect();
        let (train, heldout) = split_by_group(examples.clone(), 0.25, 7).unwrap();
        assert_eq!(train.len() + heldout.len(), 40);
        assert_eq!(
            heldout.len(),
            12,
            "3 of 10 questions (rounded), 4 answers each"
        );
        let held: BTreeSet<_> = heldout.iter().map(|e| &e.group).collect();
        assert!(train.iter().all(|e| !held.contains(&e.group)));
        // Seeded: the same split again, another with another seed.
        assert_eq!(
            split_by_group(examples.clone(), 0.25, 7).unwrap().1,
            heldout
        );
        assert_ne!(split_by_group(examples, 0.25, 8).unwrap().1, heldout);
    }

    #[test]
    fn a_split_never_holds_out_everything_or_nothing() {
        let two = vec![example("a", true), example("b", false)];
        let (train, heldout) = split_by_group(two.clone(), 0.9, 0).unwrap();
        assert_eq!((train.len(), heldout.len()), (1, 1));
        let (train, heldout) = split_by_group(two, 0.01, 0).unwrap();
        assert_eq!((train.len(), heldout.len()), (1, 1));
        let err = split_by_group(vec![example("a", true)], 0.5, 0).unwrap_err();
        assert!(err.to_string().contains("at least two groups"), "{err}");
        assert!(split_by_group(vec![], 1.0, 0).is_err());
    }

    #[test]
    fn repeated_queries_count_once_unless_their_labels_differ() {
        let mut examples = vec![
            example("a", true),
            example("a", true),
            example("b", false),
            example("a", false),
        ];
        examples[2].prompt = vec![9];
        let (kept, dropped) = distinct(examples);
        assert_eq!(dropped, 1);
        let kept: Vec<(Vec<u32>, bool)> = kept.into_iter().map(|e| (e.prompt, e.met)).collect();
        assert_eq!(
            kept,
            vec![(vec![1, 2], true), (vec![9], false), (vec![1, 2], false)]
        );
    }

    #[test]
    fn labels_of_one_class_are_refused() {
        let err = check_examples(&[example("a", true), example("b", true)]).unwrap_err();
        assert!(
            err.to_string().contains("one class only (2 met of 2)"),
            "{err}"
        );
        assert!(check_examples(&[]).is_err());
        let mut empty = example("c", false);
        empty.no.clear();
        let err = check_examples(&[example("a", true), empty]).unwrap_err();
        assert!(err.to_string().starts_with("c.jsonl:1"), "{err}");
    }
}
