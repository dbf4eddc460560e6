//! Sampling completions from the policy with a KV cache.
//!
//! Prompts of a batch are left-padded to a common length, so every row's
//! next token sits at the same position; the key mask hides the padding.
//! Repeated prompts (a GRPO group's) are read once, and finished rows leave
//! the batch.
//! Sampling runs on a [`Decoder::for_sampling`] copy: no graph is recorded
//! and LoRA adapters are folded in.

use super::model::{Decoder, KvCache};
use crate::error::{Result, ensure};
use candle_core::{D, DType, Device, Tensor};
use verifine_base::SplitMix64;

/// How to pick the next token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    /// The most likely token (evaluation).
    Greedy,
    /// A draw from softmax(logits / temperature).
    Temperature(f64),
}

/// One sampled completion.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// Generated ids, the stop token included when it was produced.
    pub ids: Vec<u32>,
    /// Whether generation hit `max_new_tokens` before the stop token.
    pub truncated: bool,
}

/// Token ids and limits of a generation call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GenerateOptions<'a> {
    /// Fills left padding and the input of finished rows.
    pub pad: u32,
    /// Any of these ends a completion (kept in its ids): a model may end a
    /// turn and end a document on different tokens.
    pub stops: &'a [u32],
    /// Longest completion.
    pub max_new_tokens: usize,
    /// Greedy or temperature sampling.
    pub sampling: Sampling,
}

/// Continues each prompt until the stop token or `max_new_tokens`.
pub fn generate(
    model: &Decoder,
    prompts: &[Vec<u32>],
    options: GenerateOptions<'_>,
    rng: &mut SplitMix64,
    device: &Device,
) -> Result<Vec<Completion>> {
    let GenerateOptions {
        pad,
        stops,
        max_new_tokens,
        sampling,
    } = options;
    ensure!(!prompts.is_empty(), "no prompts to continue");
    let model = model.for_sampling()?;
    let batch = prompts.len();
    let width = prompts.iter().map(Vec::len).max().unwrap_or(0);
    ensure!(width > 0, "empty prompt");
    let mask_row = |p: &Vec<u32>| -> Vec<u32> {
        std::iter::repeat_n(0, width - p.len())
            .chain(std::iter::repeat_n(1, p.len()))
            .collect()
    };

    // A group's samples share one prompt: each distinct prompt is read
    // once and its keys and values copied to the rows that continue it.
    let mut distinct: Vec<&Vec<u32>> = Vec::new();
    let mut source = Vec::with_capacity(batch);
    for prompt in prompts {
        let index = match distinct.iter().position(|d| *d == prompt) {
            Some(index) => index,
            None => {
                distinct.push(prompt);
                distinct.len() - 1
            }
        };
        source.push(index as u32);
    }
    let padded: Vec<u32> = distinct
        .iter()
        .flat_map(|p| std::iter::repeat_n(pad, width - p.len()).chain(p.iter().copied()))
        .collect();
    let distinct_mask: Vec<Vec<u32>> = distinct.iter().map(|p| mask_row(p)).collect();
    let mut cache = KvCache::with_capacity(width + max_new_tokens);
    let input = Tensor::from_vec(padded, (distinct.len(), width), device)?;
    let mut last = model.next_token_logits(
        &input,
        Some(&mask_tensor(&distinct_mask, device)?),
        &mut cache,
    )?;
    if distinct.len() < batch {
        let rows = Tensor::from_vec(source, batch, device)?;
        cache.select_rows(&rows)?;
        last = last.index_select(&rows, 0)?;
    }

    let mut key_mask: Vec<Vec<u32>> = prompts.iter().map(mask_row).collect();
    let mut completions: Vec<Completion> = vec![
        Completion {
            ids: Vec::new(),
            truncated: true
        };
        batch
    ];
    // `live[i]`: the completion the cache's row `i` continues. Rows that
    // finish leave the batch once they are a quarter of it, so the rest
    // stop paying for them.
    let mut live: Vec<usize> = (0..batch).collect();
    for generated in 1..=max_new_tokens {
        let next = pick(&last, sampling, rng)?;
        let mut finished = vec![false; live.len()];
        for (i, token) in next.iter().enumerate() {
            let completion = &mut completions[live[i]];
            if !completion.truncated {
                // Finished earlier and still in the batch: fed padding, masked.
                finished[i] = true;
                continue;
            }
            completion.ids.push(*token);
            if stops.contains(token) {
                completion.truncated = false;
                finished[i] = true;
            }
        }
        let done = finished.iter().filter(|f| **f).count();
        if done == live.len() || generated == max_new_tokens {
            break;
        }
        if done * 4 >= live.len() {
            let keep: Vec<u32> = (0..live.len() as u32)
                .filter(|&i| !finished[i as usize])
                .collect();
            cache.select_rows(&Tensor::from_vec(keep.clone(), keep.len(), device)?)?;
            live = keep.iter().map(|&i| live[i as usize]).collect();
            key_mask = keep.iter().map(|&i| key_mask[i as usize].clone()).collect();
            finished = vec![false; live.len()];
        }
        let fed: Vec<u32> = live
            .iter()
            .zip(&finished)
            .map(|(&row, done)| {
                if *done {
                    pad
                } else {
                    *completions[row].ids.last().unwrap_or(&pad)
                }
            })
            .collect();
        for (mask, done) in key_mask.iter_mut().zip(&finished) {
            mask.push(u32::from(!*done));
        }
        let input = Tensor::from_vec(fed, (live.len(), 1), device)?;
        last =
            model.next_token_logits(&input, Some(&mask_tensor(&key_mask, device)?), &mut cache)?;
    }
    Ok(completions)
}

fn mask_tensor(rows: &[Vec<u32>], device: &Device) -> Result<Tensor> {
    let width = rows[0].len();
    let flat: Vec<u32> = rows.iter().flatten().copied().collect();
    Ok(Tensor::from_vec(flat, (rows.len(), width), device)?)
}

/// The next token of each row from logits `[batch, vocab]`.
fn pick(logits: &Tensor, sampling: Sampling, rng: &mut SplitMix64) -> Result<Vec<u32>> {
    match sampling {
        Sampling::Greedy => Ok(logits.argmax(D::Minus1)?.to_dtype(DType::U32)?.to_vec1()?),
        Sampling::Temperature(t) => {
            ensure!(t > 0.0, "temperature must be positive");
            let probs = candle_nn::ops::softmax_last_dim(&(logits.to_dtype(DType::F32)? / t)?)?;
            let rows: Vec<Vec<f32>> = probs.to_vec2()?;
            Ok(rows.iter().map(|p| draw(p, rng)).collect())
        }
    }
}

/// Inverse-CDF draw from a probability vector.
fn draw(probs: &[f32], rng: &mut SplitMix64) -> u32 {
    let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let mut acc = 0.0f64;
    for (i, p) in probs.iter().enumerate() {
        acc += f64::from(*p);
        if u < acc {
            return i as u32;
        }
    }
    (probs.len() - 1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelConfig;
    use candle_nn::VarMap;

    fn options(max_new_tokens: usize, sampling: Sampling) -> GenerateOptions<'static> {
        GenerateOptions {
            pad: 0,
            stops: &[12],
            max_new_tokens,
            sampling,
        }
    }

    fn model() -> Decoder {
        Decoder::new(ModelConfig::tiny(13), &VarMap::new(), &Device::Cpu).unwrap()
    }

    #[test]
    fn greedy_batch_matches_one_prompt_at_a_time_despite_padding() {
        let model = model();
        let prompts = vec![vec![1, 2, 3, 4, 5], vec![6, 7]];
        let mut rng = SplitMix64::new(0);
        let batched = generate(
            &model,
            &prompts,
            options(6, Sampling::Greedy),
            &mut rng,
            &Device::Cpu,
        )
        .unwrap();
        for (prompt, together) in prompts.iter().zip(&batched) {
            let alone = generate(
                &model,
                std::slice::from_ref(prompt),
                options(6, Sampling::Greedy),
                &mut rng,
                &Device::Cpu,
            )
            .unwrap();
            assert_eq!(&alone[0], together);
        }
    }

    #[test]
    fn repeated_prompts_and_rows_leaving_the_batch_change_no_answer() {
        let model = model();
        // Half the vocabulary stops: rows finish at different steps and
        // leave the batch; three rows continue one prompt read once.
        let stops: Vec<u32> = (0..model.config().vocab_size as u32).step_by(2).collect();
        let options = GenerateOptions {
            stops: &stops,
            ..options(12, Sampling::Greedy)
        };
        let a = vec![1, 2, 3, 4, 5];
        let prompts = vec![a.clone(), vec![6, 7], a.clone(), vec![9, 3, 1], a, vec![8]];
        let mut rng = SplitMix64::new(0);
        let batched = generate(&model, &prompts, options, &mut rng, &Device::Cpu).unwrap();
        let lengths: std::collections::BTreeSet<usize> =
            batched.iter().map(|c| c.ids.len()).collect();
        assert!(
            lengths.len() > 1,
            "rows should finish at different steps: {batched:?}"
        );
        for (prompt, together) in prompts.iter().zip(&batched) {
            let alone = generate(
                &model,
                std::slice::from_ref(prompt),
                options,
                &mut rng,
                &Device::Cpu,
            )
            .unwrap();
            assert_eq!(&alone[0], together);
        }
    }

    #[test]
    fn any_stop_token_ends_a_completion_and_is_kept() {
        let model = model();
        let prompts = vec![vec![1, 2, 3]];
        let mut rng = SplitMix64::new(0);
        let unstopped = GenerateOptions {
            stops: &[],
            ..options(6, Sampling::Greedy)
        };
        let free = generate(&model, &prompts, unstopped, &mut rng, &Device::Cpu).unwrap();
        let third = free[0].ids[2];
        let stops = [u32::MAX, third];
        let stopped = GenerateOptions {
            stops: &stops,
            ..unstopped
        };
        let cut = generate(&model, &prompts, stopped, &mut rng, &Device::Cpu).unwrap();
        let first = free[0].ids.iter().position(|t| *t == third).unwrap();
        assert_eq!(cut[0].ids, free[0].ids[..=first]);
        assert!(!cut[0].truncated);
    }

    #[test]
    fn sampling_is_reproducible_from_the_seed() {
        let model = model();
        let prompts = vec![vec![1, 2, 3]; 3];
        let run = |seed| {
            let mut rng = SplitMix64::new(seed);
            generate(
                &model,
                &prompts,
                options(8, Sampling::Temperature(1.0)),
                &mut rng,
                &Device::Cpu,
            )
            .unwrap()
        };
        assert_eq!(run(5), run(5));
        assert!(run(5).iter().all(|c| c.ids.len() <= 8));
    }

    #[test]
    fn draws_follow_the_distribution() {
        let mut rng = SplitMix64::new(1);
        let probs = [0.1f32, 0.0, 0.9];
        let draws: Vec<u32> = (0..2000).map(|_| draw(&probs, &mut rng)).collect();
        let share = draws.iter().filter(|d| **d == 2).count() as f64 / 2000.0;
        assert!((share - 0.9).abs() < 0.03, "{share}");
        assert!(!draws.contains(&1));
    }
}
