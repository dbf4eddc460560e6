//! A verifier's verdict confidence on examples: P(YES) renormalised over
//! the two answers, as the local judge reads a constrained choice.

use super::{VerdictExample, VerifierConfig};
use crate::error::Result;
use crate::model::Decoder;
use crate::sequences::{
    Backward, Sequence, SequenceBatch, batch, marked_distributions, policy_log_probs,
};
use candle_core::Device;

/// Scores examples: P(YES) renormalised over the two answers.
pub(super) struct Scorer<'a> {
    pub pad: u32,
    pub device: &'a Device,
    pub batch_size: usize,
    pub config: &'a VerifierConfig,
}

impl Scorer<'_> {
    /// Scoring records no graph and keeps no tape: the adapters are folded
    /// into a copy. Where one answer is a single token (NO, where YES is
    /// `Y`+`ES`), one pass of the prompt and the longer answer reads both:
    /// the longer token by token, the short one off the distribution after
    /// the prompt. Other answers are summed over a prompt-and-answer pass
    /// each.
    pub fn p_yes(&self, model: &Decoder, examples: &[VerdictExample]) -> Result<Vec<f64>> {
        let compute = model.cast(self.config.model.compute_dtype)?;
        let frozen = compute.frozen_copy()?;
        let mut p = Vec::with_capacity(examples.len());
        for chunk in examples.chunk_by(|a, b| one_token(a) == one_token(b)) {
            match one_token(&chunk[0]) {
                true => p.extend(self.one_pass(&frozen, chunk)?),
                false => p.extend(self.two_passes(&frozen, chunk)?),
            }
        }
        Ok(p)
    }

    fn one_pass(&self, model: &Decoder, examples: &[VerdictExample]) -> Result<Vec<f64>> {
        let mut p = Vec::with_capacity(examples.len());
        for chunk in examples.chunks(self.batch_size) {
            // Each prompt followed by its longer answer.
            let sequences: Vec<Sequence> = chunk
                .iter()
                .map(|e| Sequence::prompt_response(&e.prompt, longer(e)))
                .collect();
            let b = batch(&sequences, self.pad, self.device)?;
            let Some(distributions) = marked_distributions(model, &b)? else {
                // Outside the hand-written pass (biases, a GPU, bf16).
                p.extend(self.two_passes(model, chunk)?);
                continue;
            };
            let marked: usize = chunk.iter().map(|e| longer(e).len()).sum();
            let vocab = distributions.len() / marked;
            let mut rows = distributions.chunks_exact(vocab);
            for e in chunk {
                let rows: Vec<&[f32]> = rows.by_ref().take(longer(e).len()).collect();
                // The longer answer token by token; the one-token answer
                // from the distribution after the prompt.
                let ln = |row: &[f32], id: u32| f64::from(row[id as usize]).ln();
                let long: f64 = rows.iter().zip(longer(e)).map(|(r, &id)| ln(r, id)).sum();
                let short = ln(rows[0], shorter(e)[0]);
                let (yes, no) = match e.yes.len() >= e.no.len() {
                    true => (long, short),
                    false => (short, long),
                };
                // No mass on either answer: no preference either way.
                p.push(match yes.max(no) {
                    m if m == f64::NEG_INFINITY => 0.5,
                    _ => sigmoid(yes - no),
                });
            }
        }
        Ok(p)
    }

    fn two_passes(&self, model: &Decoder, examples: &[VerdictExample]) -> Result<Vec<f64>> {
        let mut p = Vec::with_capacity(examples.len());
        // Two sequences an example: half a training batch of examples keeps
        // a chunk's activations the size of a training step's.
        for chunk in examples.chunks(self.batch_size.div_ceil(2)) {
            let sequences: Vec<Sequence> = chunk
                .iter()
                .flat_map(|e| {
                    [
                        Sequence::prompt_response(&e.prompt, &e.yes),
                        Sequence::prompt_response(&e.prompt, &e.no),
                    ]
                })
                .collect();
            let b = batch(&sequences, self.pad, self.device)?;
            let sums = answer_log_probs(model, &b)?;
            p.extend(sums.chunks(2).map(|pair| sigmoid(pair[0] - pair[1])));
        }
        Ok(p)
    }
}

/// Whether one pass reads both answers: one of them is a single token,
/// and they start differently (YES and NO in any chat model's spelling).
fn one_token(e: &VerdictExample) -> bool {
    let (yes, no) = (e.yes.first(), e.no.first());
    (e.yes.len() == 1 || e.no.len() == 1) && yes.is_some() && no.is_some() && yes != no
}

fn longer(e: &VerdictExample) -> &[u32] {
    if e.yes.len() >= e.no.len() {
        &e.yes
    } else {
        &e.no
    }
}

fn shorter(e: &VerdictExample) -> &[u32] {
    if e.yes.len() >= e.no.len() {
        &e.no
    } else {
        &e.yes
    }
}

/// Each row's summed log-probability of its trainable tokens.
fn answer_log_probs(model: &Decoder, b: &SequenceBatch) -> Result<Vec<f64>> {
    let pass = policy_log_probs(model, b, Backward::Fastest)?;
    let summed = (pass.values * &b.loss_mask)?.sum(1)?;
    Ok(summed
        .to_vec1::<f32>()?
        .into_iter()
        .map(f64::from)
        .collect())
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelConfig;
    use candle_nn::VarMap;

    #[test]
    fn one_pass_with_the_longer_answer_reads_what_two_answer_passes_sum() {
        let varmap = VarMap::new();
        let model = Decoder::new(ModelConfig::tiny(23), &varmap, &Device::Cpu).unwrap();
        let examples: Vec<VerdictExample> = (0..5u32)
            .map(|i| VerdictExample {
                group: format!("q{i}"),
                source: format!("x:{i}"),
                prompt: (0..3 + i).map(|t| (t * 7 + i) % 20 + 1).collect(),
                // YES in two tokens, or NO: either may be the longer.
                yes: if i % 2 == 0 { vec![21, 5] } else { vec![21] },
                no: if i % 2 == 0 { vec![22] } else { vec![22, 6] },
                met: i % 2 == 0,
            })
            .collect();
        let config = VerifierConfig::default();
        let scorer = Scorer {
            pad: 0,
            device: &Device::Cpu,
            batch_size: 2,
            config: &config,
        };
        let frozen = model.frozen_copy().unwrap();
        let one = scorer.one_pass(&frozen, &examples).unwrap();
        let two = scorer.two_passes(&frozen, &examples).unwrap();
        assert_eq!(scorer.p_yes(&model, &examples).unwrap(), one);
        for (a, b) in one.iter().zip(&two) {
            assert!((a - b).abs() < 1e-5, "one pass {a}, two passes {b}");
        }
        assert!(one.iter().any(|p| (p - 0.5).abs() > 1e-3), "{one:?}");
    }
}
