//! A verifier's verdict confidence on examples: P(YES) renormalised over
//! the two answers, as the local judge reads a constrained choice.

use super::{VerdictExample, VerifierConfig};
use crate::error::Result;
use crate::model::{Decoder, KvCache};
use crate::sequences::{Backward, Sequence, SequenceBatch, batch, policy_log_probs};
use candle_core::{DType, Device, Tensor};

/// Scores examples: P(YES) renormalised over the two answers.
pub(super) struct Scorer<'a> {
    pub pad: u32,
    pub device: &'a Device,
    pub batch_size: usize,
    pub config: &'a VerifierConfig,
}

impl Scorer<'_> {
    /// Scoring records no graph and keeps no tape: the adapters are folded
    /// into a copy. Single-token answers (YES and NO, as chat models spell
    /// them) take one pass of the prompt and compare the two logits at its
    /// end; longer answers are summed over a prompt-and-answer pass each.
    pub fn p_yes(&self, model: &Decoder, examples: &[VerdictExample]) -> Result<Vec<f64>> {
        let compute = model.cast(self.config.model.compute_dtype)?;
        let sampling = compute.for_sampling()?;
        let mut p = Vec::with_capacity(examples.len());
        for chunk in examples.chunk_by(|a, b| one_token(a) == one_token(b)) {
            match one_token(&chunk[0]) {
                true => {
                    for e in chunk {
                        p.push(self.one_pass(&sampling, e)?);
                    }
                }
                false => p.extend(self.two_passes(&compute.frozen_copy()?, chunk)?),
            }
        }
        Ok(p)
    }

    fn one_pass(&self, model: &Decoder, e: &VerdictExample) -> Result<f64> {
        let ids = Tensor::new(e.prompt.as_slice(), self.device)?.unsqueeze(0)?;
        let logits = model.next_token_logits(&ids, None, &mut KvCache::default())?;
        let logits = logits.squeeze(0)?.to_dtype(DType::F32)?;
        let at = |id: u32| -> Result<f64> {
            Ok(f64::from(logits.get(id as usize)?.to_scalar::<f32>()?))
        };
        Ok(sigmoid(at(e.yes[0])? - at(e.no[0])?))
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

/// Whether both answers are one token, and different ones.
fn one_token(e: &VerdictExample) -> bool {
    e.yes.len() == 1 && e.no.len() == 1 && e.yes != e.no
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
