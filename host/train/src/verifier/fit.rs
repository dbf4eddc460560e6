//! The verifier's training loop, its held-out evaluation (before and
//! after), and what a run directory holds at the end: the checkpoint
//! (`hf/`, merged weights a local judge loads; `adapter/`, the LoRA
//! weights), `report.json`, `heldout_verdicts.jsonl` and `metrics.jsonl`.

use super::metrics::{VerdictMetrics, verdict_metrics};
use super::score::Scorer;
use super::{
    ClassBalance, VerdictExample, VerifierConfig, check_examples, distinct, split_by_group,
};
use crate::config::TrainConfig;
use crate::error::{Result, TrainError, bail, ensure};
use crate::model::sorted_vars;
use crate::optim::AdamW;
use crate::run::pretrained::Base;
use crate::sequences::{Backward, Sequence, batch, policy_log_probs, sft_loss};
use candle_nn::VarMap;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Instant;
use verifine_base::{SplitMix64, write_atomically, write_jsonl};

/// What `verifine judge train` reports (`report.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VerifierReport {
    /// The model trained.
    pub from: String,
    /// Examples dropped as repeats of an earlier one (same query, same
    /// label).
    #[serde(default)]
    pub repeats: usize,
    /// Training examples, and how many of them are labelled met.
    pub train_examples: usize,
    /// Of the training examples, labelled met.
    pub train_met: usize,
    /// Held-out examples (questions never trained on).
    pub heldout_examples: usize,
    /// How the classes were evened out.
    pub balance: ClassBalance,
    /// Optimizer steps taken.
    pub steps: usize,
    /// Seconds the steps took (no evaluation).
    pub train_seconds: f64,
    /// Mean loss of the first (up to ten) steps and of as many last ones.
    pub loss_first: Option<f64>,
    /// See `loss_first`.
    pub loss_last: Option<f64>,
    /// The untrained model on the held-out split.
    pub before: Option<VerdictMetrics>,
    /// The trained verifier on the held-out split.
    pub after: Option<VerdictMetrics>,
}

/// One line of `heldout_verdicts.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HeldoutVerdict {
    /// Where the example came from.
    pub source: String,
    /// Its group (question).
    pub group: String,
    /// The label.
    pub met: bool,
    /// The trained verifier's P(YES) (renormalised over YES and NO).
    pub p_yes: f64,
    /// The untrained model's.
    pub p_yes_before: f64,
}

#[derive(Serialize)]
struct StepLine {
    step: usize,
    loss: f64,
    learning_rate: f64,
}

/// Trains `config.model.from` into a verifier on `examples` and writes the
/// run into `run_dir` (see the module doc).
pub fn train_verifier(
    config: &VerifierConfig,
    examples: Vec<VerdictExample>,
    run_dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<VerifierReport> {
    ensure!(config.steps >= 1, "steps must be at least 1");
    ensure!(config.batch_size >= 1, "batch_size must be at least 1");
    let Some(from) = config.model.from.clone() else {
        bail!("[model] from must name the pretrained model to train");
    };
    let (examples, repeats) = distinct(examples);
    let (train, heldout) = split_by_group(examples, config.heldout_share, config.seed)?;
    check_examples(&train)?;
    check_lengths(train.iter().chain(&heldout), config.model.max_seq_len)?;
    let train_config = TrainConfig {
        seed: config.seed,
        model: config.model.clone(),
        ..TrainConfig::default()
    };
    let device = crate::model::device()?;
    let Some(base) = Base::load(&train_config, &device)? else {
        bail!("[model] from must name the pretrained model to train");
    };
    check_ids(train.iter().chain(&heldout), base.model.spec.vocab_size)?;
    let varmap = VarMap::new();
    let model = base.decoder(&train_config, &varmap)?;
    ensure!(
        !varmap.all_vars().is_empty(),
        "nothing trains: [model.freeze] layers = {} leaves none of the model's {} blocks",
        config.model.freeze.layers,
        base.model.spec.num_layers
    );
    let pad = base.model.pad_id();
    let scorer = Scorer {
        pad,
        device: &device,
        batch_size: config.batch_size,
        config,
    };
    progress(&format!(
        "{} training and {} held-out examples; scoring the untrained model",
        train.len(),
        heldout.len()
    ));
    let p_before = scorer.p_yes(&model, &heldout)?;
    let mut optimizer = AdamW::new(sorted_vars(&varmap), config.optim.clone())?;
    let mut draw = Batches::new(&train, config.balance, config.seed);
    let (mut losses, mut lines) = (Vec::new(), Vec::new());
    let started = Instant::now();
    for step in 0..config.steps {
        if config
            .max_seconds
            .is_some_and(|limit| started.elapsed().as_secs_f64() >= limit)
        {
            break;
        }
        let picked = draw.next(config.batch_size);
        let sequences: Vec<Sequence> = picked
            .iter()
            .map(|&i| Sequence::prompt_response(&train[i].prompt, train[i].target()))
            .collect();
        let weights: Option<Vec<f64>> = draw.weights(&picked);
        let b = batch(&sequences, pad, &device)?;
        let learning_rate = optimizer.learning_rate();
        let compute = model.cast(config.model.compute_dtype)?;
        let pass = policy_log_probs(&compute, &b, Backward::Fastest)?;
        let loss = sft_loss(&pass.values, &b, weights.as_deref())?;
        optimizer.step(&pass.backward(&loss)?)?;
        let loss = f64::from(loss.to_scalar::<f32>()?);
        ensure!(loss.is_finite(), "step {step}: the loss is {loss}");
        progress(&format!(
            "step {}/{}: loss {loss:.4}",
            step + 1,
            config.steps
        ));
        losses.push(loss);
        lines.push(StepLine {
            step,
            loss,
            learning_rate,
        });
    }
    let train_seconds = started.elapsed().as_secs_f64();
    progress("scoring the trained verifier on the held-out split");
    let p_after = scorer.p_yes(&model, &heldout)?;
    let met: Vec<bool> = heldout.iter().map(|e| e.met).collect();
    base.export(&train_config, &model, run_dir)?;
    write_jsonl(&run_dir.join("metrics.jsonl"), &lines)?;
    let verdicts: Vec<HeldoutVerdict> = heldout
        .iter()
        .zip(p_after.iter().zip(&p_before))
        .map(|(e, (&p_yes, &p_yes_before))| HeldoutVerdict {
            source: e.source.clone(),
            group: e.group.clone(),
            met: e.met,
            p_yes,
            p_yes_before,
        })
        .collect();
    write_jsonl(&run_dir.join("heldout_verdicts.jsonl"), &verdicts)?;
    let mean = |xs: &[f64]| (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64);
    // Up to ten steps at each end, never the same step at both.
    let window = (losses.len() / 2).clamp(1, 10).min(losses.len());
    let report = VerifierReport {
        from: from.display().to_string(),
        repeats,
        train_examples: train.len(),
        train_met: train.iter().filter(|e| e.met).count(),
        heldout_examples: heldout.len(),
        balance: config.balance,
        steps: losses.len(),
        train_seconds,
        loss_first: mean(&losses[..window]),
        loss_last: mean(&losses[losses.len() - window..]),
        before: verdict_metrics(&p_before, &met),
        after: verdict_metrics(&p_after, &met),
    };
    let path = run_dir.join("report.json");
    write_atomically(&path, |w| {
        serde_json::to_writer_pretty(&mut *w, &report)?;
        w.write_all(b"\n")
    })?;
    Ok(report)
}

/// Refuses an example longer than the model's context, naming it.
fn check_lengths<'a>(
    examples: impl Iterator<Item = &'a VerdictExample>,
    max_seq_len: usize,
) -> Result<()> {
    let longest = examples.max_by_key(|e| e.prompt.len() + e.yes.len().max(e.no.len()));
    if let Some(e) = longest {
        let len = e.prompt.len() + e.yes.len().max(e.no.len());
        ensure!(
            len <= max_seq_len,
            "{}: {len} tokens with its answer, more than max_seq_len {max_seq_len}",
            e.source
        );
    }
    Ok(())
}

/// Refuses ids the model has no row for (another model's vocabulary).
fn check_ids<'a>(
    mut examples: impl Iterator<Item = &'a VerdictExample>,
    vocab_size: usize,
) -> Result<()> {
    let bad = examples.find(|e| {
        e.prompt
            .iter()
            .chain(&e.yes)
            .chain(&e.no)
            .any(|&id| id as usize >= vocab_size)
    });
    match bad {
        Some(e) => Err(TrainError::Invalid(format!(
            "{}: token ids beyond the model's {vocab_size}-token vocabulary \
             (encoded for another model?)",
            e.source
        ))),
        None => Ok(()),
    }
}

/// Draws training batches: shuffled epochs, or half from each class.
struct Batches {
    order: Vec<usize>,
    at: usize,
    by_class: [Vec<usize>; 2],
    weight: [f64; 2],
    balance: ClassBalance,
    rng: SplitMix64,
}

impl Batches {
    fn new(train: &[VerdictExample], balance: ClassBalance, seed: u64) -> Self {
        let by_class: [Vec<usize>; 2] =
            [false, true].map(|met| (0..train.len()).filter(|&i| train[i].met == met).collect());
        let n = train.len() as f64;
        let weight = [0, 1].map(|c| n / (2.0 * by_class[c].len().max(1) as f64));
        Batches {
            order: (0..train.len()).collect(),
            at: train.len(),
            by_class,
            weight,
            balance,
            rng: SplitMix64::new(seed ^ 0x5EED_BA7C),
        }
    }

    fn next(&mut self, size: usize) -> Vec<usize> {
        if self.balance == ClassBalance::Sampled {
            // Alternating classes, the batch's first one drawn at random.
            let first = self.rng.below(2);
            return (0..size)
                .map(|slot| {
                    let class = &self.by_class[(slot + first) % 2];
                    class[self.rng.below(class.len())]
                })
                .collect();
        }
        (0..size)
            .map(|_| {
                if self.at == self.order.len() {
                    for i in (1..self.order.len()).rev() {
                        self.order.swap(i, self.rng.below(i + 1));
                    }
                    self.at = 0;
                }
                self.at += 1;
                self.order[self.at - 1]
            })
            .collect()
    }

    /// Loss weights of the picked examples (`None`: all 1).
    fn weights(&self, picked: &[usize]) -> Option<Vec<f64>> {
        (self.balance == ClassBalance::Weighted).then(|| {
            picked
                .iter()
                .map(|&i| self.weight[usize::from(self.by_class[1].binary_search(&i).is_ok())])
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn examples(met: &[bool]) -> Vec<VerdictExample> {
        met.iter()
            .enumerate()
            .map(|(i, &met)| VerdictExample {
                group: format!("q{i}"),
                source: format!("x:{i}"),
                prompt: vec![1],
                yes: vec![2],
                no: vec![3],
                met,
            })
            .collect()
    }

    #[test]
    fn weighted_batches_count_both_classes_equally() {
        // One met example among four: it weighs 2, the others 2/3.
        let train = examples(&[false, true, false, false]);
        let mut draw = Batches::new(&train, ClassBalance::Weighted, 0);
        let epoch = draw.next(4);
        let mut sorted = epoch.clone();
        sorted.sort();
        assert_eq!(sorted, vec![0, 1, 2, 3], "an epoch visits each once");
        let w = draw.weights(&[0, 1, 2, 3]).unwrap();
        assert_eq!(w, vec![4.0 / 6.0, 2.0, 4.0 / 6.0, 4.0 / 6.0]);
        let total_met: f64 = w[1];
        let total_not: f64 = w[0] + w[2] + w[3];
        assert!((total_met - total_not).abs() < 1e-12);
        assert!(
            Batches::new(&train, ClassBalance::None, 0)
                .weights(&[0])
                .is_none()
        );
    }

    #[test]
    fn sampled_batches_are_half_each_class() {
        let train = examples(&[false, true, false, false, false, false]);
        let mut draw = Batches::new(&train, ClassBalance::Sampled, 3);
        let picked = draw.next(10);
        let met = picked.iter().filter(|&&i| train[i].met).count();
        assert_eq!(met, 5);
        assert!(draw.weights(&picked).is_none());
    }

    #[test]
    fn too_long_examples_and_foreign_ids_are_named() {
        let mut long = examples(&[true]);
        long[0].prompt = vec![1; 10];
        let err = check_lengths(long.iter(), 8).unwrap_err();
        assert!(err.to_string().starts_with("x:0: 11 tokens"), "{err}");
        assert!(check_lengths(long.iter(), 11).is_ok());
        let err = check_ids(long.iter(), 2).unwrap_err();
        assert!(err.to_string().contains("2-token vocabulary"), "{err}");
    }
}
