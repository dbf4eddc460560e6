//! Turning token sequences into training tensors.
//!
//! A sequence carries, per token, whether it is a target of the loss: in SFT
//! the response, in GRPO the completion, never the prompt, the padding, or
//! (in self-verification rollouts) the verification turns.

use super::model::{Decoder, manual};
use crate::error::{Result, ensure};
use candle_core::backprop::GradStore;
use candle_core::{DType, Device, Tensor, Var};

/// Token ids and which of them the loss trains on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Sequence {
    /// The whole conversation's ids.
    pub ids: Vec<u32>,
    /// `trainable[i]`: token `i` is a loss target (predicted from `ids[..i]`).
    pub trainable: Vec<bool>,
}

impl Sequence {
    /// Prompt tokens (not trained) followed by response tokens (trained).
    pub fn prompt_response(prompt: &[u32], response: &[u32]) -> Self {
        Sequence {
            ids: prompt.iter().chain(response).copied().collect(),
            trainable: std::iter::repeat_n(false, prompt.len())
                .chain(std::iter::repeat_n(true, response.len()))
                .collect(),
        }
    }
}

/// Next-token tensors of a right-padded batch, all `[batch, longest − 1]`.
pub struct SequenceBatch {
    /// Ids fed to the model.
    pub input: Tensor,
    /// The id to predict at each position.
    pub targets: Tensor,
    /// 1.0 where the target is trainable, else 0.0 (f32).
    pub loss_mask: Tensor,
    /// 1 for real tokens, 0 for padding (u32), for attention.
    pub key_mask: Tensor,
}

/// Builds the batch; every sequence needs at least two tokens.
pub fn batch(sequences: &[Sequence], pad: u32, device: &Device) -> Result<SequenceBatch> {
    ensure!(!sequences.is_empty(), "empty batch");
    let longest = sequences.iter().map(|s| s.ids.len()).max().unwrap_or(0);
    ensure!(longest >= 2, "sequences need at least two tokens");
    let width = longest - 1;
    let rows = sequences.len();
    let (mut input, mut targets) = (
        Vec::with_capacity(rows * width),
        Vec::with_capacity(rows * width),
    );
    let (mut loss_mask, mut key_mask) = (
        Vec::with_capacity(rows * width),
        Vec::with_capacity(rows * width),
    );
    for s in sequences {
        ensure!(
            s.ids.len() == s.trainable.len(),
            "ids and trainable flags differ in length"
        );
        for i in 0..width {
            let real_input = i < s.ids.len();
            let real_target = i + 1 < s.ids.len();
            input.push(if real_input { s.ids[i] } else { pad });
            targets.push(if real_target { s.ids[i + 1] } else { pad });
            loss_mask.push(if real_target && s.trainable[i + 1] {
                1.0f32
            } else {
                0.0
            });
            key_mask.push(u32::from(real_input));
        }
    }
    Ok(SequenceBatch {
        input: Tensor::from_vec(input, (rows, width), device)?,
        targets: Tensor::from_vec(targets, (rows, width), device)?,
        loss_mask: Tensor::from_vec(loss_mask, (rows, width), device)?,
        key_mask: Tensor::from_vec(key_mask, (rows, width), device)?,
    })
}

/// Log-prob of every target under `model`: one full forward pass over the
/// whole conversation, `[batch, longest − 1]`.
pub fn log_probs(model: &Decoder, batch: &SequenceBatch) -> Result<Tensor> {
    model.target_log_probs(&batch.input, Some(&batch.key_mask), &batch.targets)
}

/// How an update computes its gradients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backward {
    /// The hand-written pass where it covers the model (f32 on the CPU,
    /// without q/k/v biases), candle's autograd elsewhere.
    #[default]
    Fastest,
    /// candle's autograd always: the reference the hand-written pass is
    /// tested against.
    Autograd,
}

/// The log-probs of a batch's targets, and the way back from a loss built
/// on them to the model's weights.
pub struct PolicyLogProbs<'a> {
    /// `[batch, longest − 1]`. On the hand-written path the positions
    /// outside the loss mask are 0 (their logits are never computed).
    pub values: Tensor,
    manual: Option<(&'a Decoder, manual::Tape)>,
}

/// The log-prob of every target under `model`, ready for a backward pass
/// (see [`Backward`]).
pub fn policy_log_probs<'a>(
    model: &'a Decoder,
    batch: &SequenceBatch,
    backward: Backward,
) -> Result<PolicyLogProbs<'a>> {
    if backward == Backward::Autograd || !manual::supports(model) {
        return Ok(PolicyLogProbs {
            values: log_probs(model, batch)?,
            manual: None,
        });
    }
    let flat = FlatBatch::of(batch)?;
    let (values, tape) = manual::forward(model, &flat.view())?;
    let (rows, seq) = (flat.rows, flat.seq);
    // A variable, so that the loss's backward pass stops at it with its
    // gradient; the hand-written pass goes on from there.
    let values = Tensor::from_vec(values, (rows, seq), batch.input.device())?;
    let values = Var::from_tensor(&values)?.as_tensor().clone();
    Ok(PolicyLogProbs {
        values,
        manual: Some((model, tape)),
    })
}

/// The next-token distribution (over the whole vocabulary) at each
/// position `batch`'s loss mask marks, rows in order, `[marked · vocab]`;
/// `None` where the hand-written pass does not cover `model`. One pass
/// reads a choice among single tokens (a verifier's YES or NO) at once.
pub fn marked_distributions(model: &Decoder, batch: &SequenceBatch) -> Result<Option<Vec<f32>>> {
    if !manual::supports(model) {
        return Ok(None);
    }
    let flat = FlatBatch::of(batch)?;
    let (_, tape) = manual::forward(model, &flat.view())?;
    Ok(Some(tape.into_wanted_distributions()))
}

/// A batch flattened as the hand-written pass reads it.
struct FlatBatch {
    rows: usize,
    seq: usize,
    ids: Vec<u32>,
    keys: Vec<bool>,
    targets: Vec<u32>,
    wanted: Vec<bool>,
}

impl FlatBatch {
    fn of(batch: &SequenceBatch) -> Result<Self> {
        let (rows, seq) = batch.input.dims2()?;
        let flat_u32 = |t: &Tensor| -> Result<Vec<u32>> {
            Ok(t.flatten_all()?.to_dtype(DType::U32)?.to_vec1::<u32>()?)
        };
        let keys: Vec<bool> = flat_u32(&batch.key_mask)?.iter().map(|&k| k != 0).collect();
        let wanted: Vec<bool> = batch
            .loss_mask
            .flatten_all()?
            .to_vec1::<f32>()?
            .iter()
            .map(|&m| m != 0.0)
            .collect();
        let (ids, targets) = (flat_u32(&batch.input)?, flat_u32(&batch.targets)?);
        Ok(FlatBatch {
            rows,
            seq,
            ids,
            keys,
            targets,
            wanted,
        })
    }

    fn view(&self) -> manual::Batch<'_> {
        manual::Batch {
            batch: self.rows,
            seq: self.seq,
            ids: &self.ids,
            keys: &self.keys,
            targets: &self.targets,
            wanted: &self.wanted,
        }
    }
}

impl PolicyLogProbs<'_> {
    /// The gradients of `loss` for every weight of the model.
    pub fn backward(self, loss: &Tensor) -> Result<GradStore> {
        let mut grads = loss.backward()?;
        let Some((model, tape)) = self.manual else {
            return Ok(grads);
        };
        let grad = match grads.remove(&self.values) {
            Some(g) => g.flatten_all()?.to_vec1::<f32>()?,
            None => vec![0.0; self.values.elem_count()],
        };
        for (weight, grad) in manual::backward(model, tape, &grad)? {
            let grad = Tensor::from_vec(grad, weight.shape(), weight.device())?;
            grads.insert(&weight, grad);
        }
        Ok(grads)
    }
}

/// SFT loss from the batch's log-probs ([`policy_log_probs`]): negative
/// log-likelihood of trainable tokens, each sequence weighted (a
/// curriculum's keep weight; `None` = all 1).
pub fn sft_loss(
    log_probs: &Tensor,
    batch: &SequenceBatch,
    weights: Option<&[f64]>,
) -> Result<Tensor> {
    let nll = log_probs.neg()?;
    let mask = match weights {
        Some(w) => {
            ensure!(w.len() == batch.input.dim(0)?, "one weight per sequence");
            let w: Vec<f32> = w.iter().map(|x| *x as f32).collect();
            let w = Tensor::from_vec(w, (batch.input.dim(0)?, 1), batch.input.device())?;
            batch.loss_mask.broadcast_mul(&w)?
        }
        None => batch.loss_mask.clone(),
    };
    let total = (nll * &mask)?.sum_all()?;
    Ok(total
        .div(&mask.sum_all()?.maximum(1e-6)?)?
        .to_dtype(DType::F32)?)
}

#[cfg(test)]
#[path = "sequences_parity_tests.rs"]
mod parity_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ModelConfig, sorted_vars};
    use crate::optim::{AdamW, OptimConfig};
    use candle_nn::VarMap;

    #[test]
    fn masks_cover_only_response_targets() {
        let seqs = [
            Sequence::prompt_response(&[1, 2], &[3, 4]),
            Sequence::prompt_response(&[5], &[6]),
        ];
        let b = batch(&seqs, 0, &Device::Cpu).unwrap();
        assert_eq!(
            b.input.to_vec2::<u32>().unwrap(),
            vec![vec![1, 2, 3], vec![5, 6, 0]]
        );
        assert_eq!(
            b.targets.to_vec2::<u32>().unwrap(),
            vec![vec![2, 3, 4], vec![6, 0, 0]]
        );
        assert_eq!(
            b.loss_mask.to_vec2::<f32>().unwrap(),
            vec![vec![0.0, 1.0, 1.0], vec![1.0, 0.0, 0.0]]
        );
        assert_eq!(
            b.key_mask.to_vec2::<u32>().unwrap(),
            vec![vec![1, 1, 1], vec![1, 1, 0]]
        );
    }

    #[test]
    fn sft_fits_a_response() {
        let varmap = VarMap::new();
        let model = Decoder::new(ModelConfig::tiny(9), &varmap, &Device::Cpu).unwrap();
        let config = OptimConfig {
            learning_rate: 1e-2,
            warmup_steps: 0,
            ..OptimConfig::default()
        };
        let mut opt = AdamW::new(sorted_vars(&varmap), config).unwrap();
        let b = batch(
            &[Sequence::prompt_response(&[1, 2, 3], &[7, 5, 8])],
            0,
            &Device::Cpu,
        )
        .unwrap();
        let initial = sft_loss(&log_probs(&model, &b).unwrap(), &b, None)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        for _ in 0..40 {
            let pass = policy_log_probs(&model, &b, Backward::Fastest).unwrap();
            let loss = sft_loss(&pass.values, &b, None).unwrap();
            opt.step(&pass.backward(&loss).unwrap()).unwrap();
        }
        let last = sft_loss(&log_probs(&model, &b).unwrap(), &b, None)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(last < 0.2 * initial, "{initial} -> {last}");
    }

    #[test]
    fn zero_weight_sequences_do_not_count() {
        let model = Decoder::new(ModelConfig::tiny(9), &VarMap::new(), &Device::Cpu).unwrap();
        let one = batch(&[Sequence::prompt_response(&[1], &[2, 3])], 0, &Device::Cpu).unwrap();
        let two = batch(
            &[
                Sequence::prompt_response(&[1], &[2, 3]),
                Sequence::prompt_response(&[4], &[5, 6]),
            ],
            0,
            &Device::Cpu,
        )
        .unwrap();
        let alone = sft_loss(&log_probs(&model, &one).unwrap(), &one, None)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        let weighted = sft_loss(&log_probs(&model, &two).unwrap(), &two, Some(&[1.0, 0.0]))
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!((alone - weighted).abs() < 1e-5);
    }
}
