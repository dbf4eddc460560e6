//! Prefill of prompts that share a prefix. A rubric's per-criterion
//! queries about one sample repeat the same instructions and conversation
//! and differ only in their last few dozen tokens. The shared prefix is
//! encoded once (or taken from the prompt cache) and the prompts' own
//! tokens then run through the weight products together, as one sequence
//! of all their tokens: a few rows per product make poor use of the
//! cores, a few hundred make good use of them. In attention each prompt
//! sees the prefix and its own earlier tokens only, so every answer is the
//! one the prompt would get on its own.

use super::LocalBackend;
use super::causal::{SequenceTensors, attend_on_cpu};
use super::error::{DecoderError, Result, e};
use super::model::{JudgeDecoder, KvCache};
use super::norms::normed;
use super::tables::attention_mask;
use candle_core::Tensor;

/// Prompts group only when they share at least this many tokens; below it
/// a separate prefill costs about the same.
const MIN_SHARED_TOKENS: usize = 16;

/// At most this many prompt tokens after the prefix, and this many
/// prompts, run in one pass. Integer products reach their speed a token by
/// 32 rows, while larger passes ran slower a token: on SmolLM2's
/// HealthBench batch (two cores) 7.0 queries/s at 256, 6.9 at 128 and 512,
/// 6.0 at 4 096 (`benches/vs_llama_server.rs`).
const MAX_GROUP_TOKENS: usize = 256;
const MAX_GROUP_PROMPTS: usize = 256;

/// A prompt joins a group only if the tokens the group then computes that
/// one prompt after another would have taken from the prompt cache stay
/// within this share of what the group runs. With float products one pass
/// of ten 60-token suffixes took about two thirds of ten passes (SmolLM2,
/// two cores), so a quarter of recomputation paid; with integer products
/// and passes of at most [`MAX_GROUP_TOKENS`] the grouped batch is still
/// 1.04–1.12× one prompt a call (BENCHMARKS.md), with this share.
const MAX_RECOMPUTED_SHARE: f64 = 0.25;

/// Prompts (by index) to prefill together after their first `shared`
/// tokens.
#[derive(Debug, PartialEq)]
pub(super) struct PromptGroup {
    pub(super) members: Vec<usize>,
    pub(super) shared: usize,
}

/// A group being formed: per member, its length and the prefix it would
/// reuse if the prompts ran one after another.
struct Forming {
    group: PromptGroup,
    lengths: Vec<usize>,
    reuse: Vec<usize>,
}

/// Groups consecutive prompts by a shared prefix. A prompt stays out of a
/// group whose prefix would be much shorter than what it shares with an
/// earlier prompt or the prompt cache holds of it (`reusable[i]`): the
/// queries about a new sample start a new group. `None` prompts (those
/// that could not be encoded) are left out.
pub(super) fn group_by_prefix(prompts: &[Option<&[u32]>], reusable: &[usize]) -> Vec<PromptGroup> {
    let mut groups: Vec<PromptGroup> = Vec::new();
    let mut open: Option<Forming> = None;
    for (i, prompt) in prompts.iter().enumerate() {
        let Some(prompt) = prompt else { continue };
        // Every prompt keeps at least its last token to run.
        let last = prompt.len() - 1;
        if let Some(forming) = open.as_mut() {
            let member = |m: usize| prompts[forming.group.members[m]].unwrap_or_default();
            let shared = common_prefix(member(0), prompt)
                .min(last)
                .min(forming.group.shared);
            let reuse = (0..forming.group.members.len())
                .map(|m| common_prefix(member(m), prompt))
                .fold(reusable[i], usize::max)
                .min(last);
            if forming.admits(prompt.len(), reuse, shared) {
                forming.group.members.push(i);
                forming.group.shared = shared;
                forming.lengths.push(prompt.len());
                forming.reuse.push(reuse);
                continue;
            }
            groups.extend(open.take().map(|f| f.group));
        }
        open = Some(Forming {
            group: PromptGroup {
                members: vec![i],
                shared: last,
            },
            lengths: vec![prompt.len()],
            reuse: vec![reusable[i].min(last)],
        });
    }
    groups.extend(open.map(|f| f.group));
    groups
}

impl Forming {
    /// Whether a prompt of `length` tokens, which would reuse `reuse` of
    /// them on its own, joins with the group's prefix cut to `shared`.
    fn admits(&self, length: usize, reuse: usize, shared: usize) -> bool {
        let lengths = self.lengths.iter().chain([&length]);
        let run_after_prefix: usize = lengths.map(|l| l - shared).sum();
        // The first member computes the prefix in any case.
        let recomputed: usize = self.reuse[1..]
            .iter()
            .chain([&reuse])
            .map(|r| r.saturating_sub(shared))
            .sum();
        let run = run_after_prefix + shared.saturating_sub(self.reuse[0]);
        shared >= MIN_SHARED_TOKENS
            && run_after_prefix <= MAX_GROUP_TOKENS
            && self.lengths.len() < MAX_GROUP_PROMPTS
            && recomputed as f64 <= MAX_RECOMPUTED_SHARE * run as f64
    }
}

impl PromptGroup {
    /// Prompt `i` on its own: the prompt cache alone decides how much of
    /// it is reused, so no prefix is named.
    pub(super) fn alone(i: usize) -> PromptGroup {
        PromptGroup {
            members: vec![i],
            shared: 0,
        }
    }
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl LocalBackend {
    /// How many tokens of `prompt` the prompt cache would give it (all but
    /// the last at most: that one must run to give the next token).
    pub(super) fn reusable(&self, prompt: &[u32]) -> usize {
        let Ok(prompts) = self.prompts.lock() else {
            return 0;
        };
        prompts
            .iter()
            .map(|p| common_prefix(&p.tokens, prompt).min(prompt.len().saturating_sub(1)))
            .max()
            .unwrap_or(0)
    }

    /// The caches and next-token log-probabilities of `prompts`, which all
    /// begin with the same `shared` tokens, and how many tokens of each
    /// were not computed for it (reused from the prompt cache, or computed
    /// once for the group and counted for its first prompt only).
    pub(super) fn prefill_group(
        &self,
        prompts: &[&[u32]],
        shared: usize,
    ) -> Result<Vec<(KvCache, Vec<f32>, usize)>> {
        let first = prompts
            .first()
            .ok_or_else(|| DecoderError::Batch("an empty group".into()))?;
        // The prefix, from the prompt cache as far as it holds it.
        let (mut prefix, reused) = self.start_from_cache(&first[..=shared])?;
        if reused < shared {
            self.model.forward(&first[reused..shared], &mut prefix, 1)?;
            self.remember(&first[..shared], &prefix);
        }
        let suffixes: Vec<&[u32]> = prompts.iter().map(|p| &p[shared..]).collect();
        let ran = self.model.forward_suffixes(&prefix, &suffixes)?;
        Ok(ran
            .into_iter()
            .enumerate()
            .map(|(i, (next, cache))| (cache, next, if i == 0 { reused } else { shared }))
            .collect())
    }
}

impl JudgeDecoder {
    /// Runs each of `suffixes` after the tokens `prefix` holds, all in one
    /// pass, as if each had been run alone after it. Returns, per suffix,
    /// the next token's log-probabilities after its last token and its
    /// cache (the prefix and its own tokens).
    pub fn forward_suffixes(
        &self,
        prefix: &KvCache,
        suffixes: &[&[u32]],
    ) -> Result<Vec<(Vec<f32>, KvCache)>> {
        Ok(self
            .forward_each(prefix, suffixes, 1)?
            .into_iter()
            .map(|(mut rows, cache)| (rows.remove(0), cache))
            .collect())
    }

    /// [`JudgeDecoder::forward_suffixes`] keeping the next-token
    /// log-probabilities after each suffix's last `keep` positions (one
    /// suffix of many kept positions is a plain forward pass).
    pub(super) fn forward_each(
        &self,
        prefix: &KvCache,
        suffixes: &[&[u32]],
        keep: usize,
    ) -> Result<Vec<(Vec<Vec<f32>>, KvCache)>> {
        let past = prefix.len;
        if keep == 0 || suffixes.is_empty() || suffixes.iter().any(|s| s.len() < keep) {
            return Err(DecoderError::Batch(format!(
                "a forward pass needs suffixes of at least {} token(s) to keep",
                keep.max(1)
            )));
        }
        if let Some(long) = suffixes
            .iter()
            .find(|s| past + s.len() > self.context_length)
        {
            return Err(DecoderError::Prompt(format!(
                "{} tokens exceed the context length {}",
                past + long.len(),
                self.context_length
            )));
        }
        let tokens = suffixes.concat();
        let total = tokens.len();
        let spans: Vec<(usize, usize)> = suffixes
            .iter()
            .scan(0, |start, s| {
                let span = (*start, s.len());
                *start += s.len();
                Some(span)
            })
            .collect();
        let positions: Vec<u32> = spans
            .iter()
            .flat_map(|&(_, len)| (past..past + len).map(|p| p as u32))
            .collect();
        let positions = Tensor::new(positions.as_slice(), &self.device).map_err(e)?;
        let kind = |cos: &Tensor, sin: &Tensor, window: Option<usize>| -> Result<LayerKind> {
            Ok(LayerKind {
                window: window.unwrap_or(usize::MAX),
                cos: cos.index_select(&positions, 0).map_err(e)?,
                sin: sin.index_select(&positions, 0).map_err(e)?,
                masks: spans
                    .iter()
                    .map(|&(_, len)| attention_mask(len, past, window, &self.device))
                    .collect::<Result<_>>()?,
            })
        };
        let global = kind(&self.cos, &self.sin, None)?;
        let local = match &self.local {
            Some((cos, sin, window)) => Some(kind(cos, sin, Some(*window))?),
            None => None,
        };
        let mut caches: Vec<Vec<(Tensor, Tensor)>> = vec![Vec::new(); suffixes.len()];
        let mut x = self.embed(&tokens)?.unsqueeze(0).map_err(e)?;
        for (i, layer) in self.layers.iter().enumerate() {
            let at = match (&local, layer.sliding) {
                (Some(local), true) => local,
                _ => &global,
            };
            let h = normed(&x, &layer.attn_norm, self.eps)?;
            let (q, k, v) = self.query_key_value(layer, &h, (1, total), &at.cos, &at.sin)?;
            for (j, &(start, len)) in spans.iter().enumerate() {
                let own = |t: &Tensor| t.narrow(2, start, len).and_then(|t| t.contiguous());
                let (kj, vj) = match prefix.layers.get(i) {
                    Some((pk, pv)) => (
                        Tensor::cat(&[pk, &own(&k).map_err(e)?], 2).map_err(e)?,
                        Tensor::cat(&[pv, &own(&v).map_err(e)?], 2).map_err(e)?,
                    ),
                    None => (own(&k).map_err(e)?, own(&v).map_err(e)?),
                };
                caches[j].push((kj, vj));
            }
            let sequences: Vec<SequenceTensors> = spans
                .iter()
                .zip(&caches)
                .map(|(&(start, len), layers)| SequenceTensors {
                    q_row: 0,
                    q_first: start,
                    positions: len,
                    k: &layers[i].0,
                    v: &layers[i].1,
                })
                .collect();
            let heads = (self.kv_heads, self.attention_scale as f32, at.window);
            let attended = match attend_on_cpu(&q, &sequences, heads).map_err(e)? {
                Some(attended) => attended.unsqueeze(0).map_err(e)?,
                None => {
                    let mut attended = Vec::with_capacity(spans.len());
                    for (j, s) in sequences.iter().enumerate() {
                        let own = q.narrow(2, s.q_first, s.positions).map_err(e)?;
                        attended.push(self.attend(&own, s.k, s.v, &at.masks[j])?);
                    }
                    Tensor::cat(&attended, 2)
                        .and_then(|a| a.transpose(1, 2))
                        .and_then(|a| a.reshape((1, total, self.heads * self.head_dim)))
                        .map_err(e)?
                }
            };
            x = self.finish_block(layer, x, &attended)?;
        }
        let kept: Vec<u32> = spans
            .iter()
            .flat_map(|&(s, len)| (s + len - keep..s + len).map(|p| p as u32))
            .collect();
        let kept = Tensor::new(kept.as_slice(), &self.device).map_err(e)?;
        let last = x
            .squeeze(0)
            .and_then(|x| x.index_select(&kept, 0))
            .and_then(|x| x.unsqueeze(0))
            .map_err(e)?;
        let mut rows = self
            .log_probs(&last)?
            .squeeze(0)
            .and_then(|t| t.to_vec2::<f32>())
            .map_err(e)?
            .into_iter();
        Ok(caches
            .into_iter()
            .zip(&spans)
            .map(|(layers, &(_, len))| {
                let cache = KvCache {
                    layers,
                    len: past + len,
                };
                (rows.by_ref().take(keep).collect(), cache)
            })
            .collect())
    }
}

/// Rotary angles of every token in the pass and each suffix's mask, for
/// one kind of layer (global or sliding-window).
struct LayerKind {
    /// A token sees this many positions back, itself included.
    window: usize,
    cos: Tensor,
    sin: Tensor,
    masks: Vec<Option<Tensor>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(prompts: &[&[u32]], reusable: &[usize]) -> Vec<(Vec<usize>, usize)> {
        let prompts: Vec<Option<&[u32]>> = prompts.iter().copied().map(Some).collect();
        group_by_prefix(&prompts, reusable)
            .into_iter()
            .map(|g| (g.members, g.shared))
            .collect()
    }

    #[test]
    fn consecutive_prompts_with_a_long_shared_prefix_group() {
        let base: Vec<u32> = (0..40).collect();
        let a = [&base[..], &[100, 101]].concat();
        let b = [&base[..], &[200]].concat();
        let c = [&base[..30], &[300, 301, 302]].concat();
        let other: Vec<u32> = (500..560).collect();
        assert_eq!(
            group(&[&a, &b, &c, &other], &[0; 4]),
            vec![(vec![0, 1, 2], 30), (vec![3], 59)]
        );
    }

    #[test]
    fn short_overlaps_and_better_cached_prompts_stay_alone() {
        let a: Vec<u32> = (0..40).collect();
        let b = [&a[..10], &[7; 30]].concat();
        assert_eq!(
            group(&[&a, &b], &[0, 0]),
            vec![(vec![0], 39), (vec![1], 39)]
        );
        let c = [&a[..20], &[9; 20]].concat();
        // The cache holds all of `c` but its last token, far more than the
        // 20 it shares; a few tokens more would not keep it out.
        assert_eq!(
            group(&[&a, &c], &[0, 39]),
            vec![(vec![0], 39), (vec![1], 39)]
        );
        assert_eq!(group(&[&a, &c], &[0, 22]), vec![(vec![0, 1], 20)]);
    }

    #[test]
    fn the_queries_about_a_new_sample_start_a_new_group() {
        let instructions: Vec<u32> = (0..30).collect();
        let sample = |s: u32| [&instructions[..], &vec![100 + s; 80][..]].concat();
        let query = |s: u32, q: u32| [&sample(s)[..], &[1000 + q; 20][..]].concat();
        let prompts = [
            query(0, 0),
            query(0, 1),
            query(0, 2),
            query(1, 0),
            query(1, 1),
        ];
        let prompts: Vec<&[u32]> = prompts.iter().map(Vec::as_slice).collect();
        assert_eq!(
            group(&prompts, &[0; 5]),
            vec![(vec![0, 1, 2], 110), (vec![3, 4], 110)]
        );
    }

    #[test]
    fn a_prompt_repeated_keeps_its_last_token_to_run() {
        let a: Vec<u32> = (0..40).collect();
        assert_eq!(group(&[&a, &a], &[0, 0]), vec![(vec![0, 1], 39)]);
        let prompts = [Some(&a[..]), None, Some(&a[..])];
        let groups = group_by_prefix(&prompts, &[0, 0, 0]);
        assert_eq!(
            groups,
            vec![PromptGroup {
                members: vec![0, 2],
                shared: 39
            }]
        );
    }

    #[test]
    fn a_group_stops_at_its_token_budget() {
        let base: Vec<u32> = (0..20).collect();
        let long = |i: u32| [&base[..], &vec![1000 + i; MAX_GROUP_TOKENS / 2][..]].concat();
        let groups = group(&[&long(0), &long(1), &long(2)], &[0; 3]);
        assert_eq!(
            groups,
            vec![(vec![0, 1], 20), (vec![2], 20 + MAX_GROUP_TOKENS / 2 - 1)]
        );
    }
}
