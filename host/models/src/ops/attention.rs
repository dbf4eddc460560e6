//! Attention of one query over the keys it sees: the scores, their softmax
//! and the weighted sum of values, the part of attention both the local
//! judge (over its KV cache) and training's hand-written pass (over a
//! batch row, keeping the probabilities for its backward) run.
//!
//! What differs between them stays with them: where keys and values live
//! (the judge's cache is `[kv_heads, seen, dim]` per sequence, training's
//! token rows are `[positions, kv_heads · dim]`), which keys a query sees
//! (a sliding window, padding) and how the work is split over threads. So
//! the keys come in as [`TransposedKeys`], a copy each caller fills from
//! its own layout once per key/value head, and the values through a
//! closure. Training's backward pass through these probabilities is its
//! own (`verifine-train`'s `model::manual::attention`): only it needs one.

use super::softmax::softmax_in_place;
use std::ops::Range;

/// The keys of one key/value head, transposed to `[dim, keys]`.
///
/// A query's score against every key is then `Σ_c q_c · row_c`, each
/// `row_c` the contiguous `c`-th component of all keys: the loop adds
/// along keys, which vectorizes with no sum across a vector's lanes, and
/// one transposition serves every query head and position that reads this
/// key/value head.
#[derive(Debug, Default)]
pub struct TransposedKeys {
    values: Vec<f32>,
    keys: usize,
}

impl TransposedKeys {
    /// Empty; [`fill`](Self::fill) gives it keys.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the keys by `keys`, each `dim` long, reusing the buffer.
    ///
    /// Panics when a key is not `dim` long.
    #[inline(always)]
    pub fn fill<'k>(&mut self, dim: usize, keys: impl ExactSizeIterator<Item = &'k [f32]>) {
        let count = keys.len();
        self.keys = count;
        self.values.clear();
        self.values.resize(dim * count, 0.0);
        for (j, key) in keys.enumerate() {
            assert_eq!(
                key.len(),
                dim,
                "key {j} has {} values, not {dim}",
                key.len()
            );
            for (c, &x) in key.iter().enumerate() {
                self.values[c * count + j] = x;
            }
        }
    }

    /// How many keys it holds.
    pub fn len(&self) -> usize {
        self.keys
    }

    /// Whether it holds no key.
    pub fn is_empty(&self) -> bool {
        self.keys == 0
    }
}

/// `softmax(scale · q·kⱼ + bias(j))` over the keys `visible` into `probs`
/// (one per visible key, in order), and `Σⱼ probsⱼ · value(j)` into `out`.
///
/// `bias` adds to key `j`'s score before the softmax (training's padding
/// mask: a large negative number weighs nothing); `value(j)` is key `j`'s
/// value, `out.len()` long. Key indices are those of `keys`. Inlined, so
/// that a caller compiled for a wider vector unit gets these loops at its
/// width.
///
/// Panics when `visible` is empty or reaches past the keys, or when
/// `probs` is not one per visible key.
#[allow(clippy::too_many_arguments, reason = "one query's whole problem")]
#[inline(always)]
pub fn attend_query<'v>(
    query: &[f32],
    scale: f32,
    keys: &TransposedKeys,
    visible: Range<usize>,
    bias: impl Fn(usize) -> f32,
    value: impl Fn(usize) -> &'v [f32],
    probs: &mut [f32],
    out: &mut [f32],
) {
    assert!(!visible.is_empty() && visible.end <= keys.keys);
    assert_eq!(probs.len(), visible.len());
    assert!(keys.values.len() >= query.len() * keys.keys);
    probs.fill(0.0);
    for (c, &q) in query.iter().enumerate() {
        let q = q * scale;
        let row = &keys.values[c * keys.keys..][visible.clone()];
        for (score, k) in probs.iter_mut().zip(row) {
            *score += q * k;
        }
    }
    for (score, j) in probs.iter_mut().zip(visible.clone()) {
        *score += bias(j);
    }
    softmax_in_place(probs);
    out.fill(0.0);
    for (&p, j) in probs.iter().zip(visible) {
        for (acc, v) in out.iter_mut().zip(value(j)) {
            *acc += p * v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attention as its definition reads, in f64.
    fn reference(
        query: &[f32],
        scale: f32,
        keys: &[Vec<f32>],
        values: &[Vec<f32>],
        visible: Range<usize>,
        bias: &[f32],
    ) -> (Vec<f64>, Vec<f64>) {
        let scores: Vec<f64> = visible
            .clone()
            .map(|j| {
                let dot: f64 = query
                    .iter()
                    .zip(&keys[j])
                    .map(|(q, k)| f64::from(*q) * f64::from(*k))
                    .sum();
                dot * f64::from(scale) + f64::from(bias[j])
            })
            .collect();
        let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
        let total: f64 = weights.iter().sum();
        let probs: Vec<f64> = weights.iter().map(|w| w / total).collect();
        let mut out = vec![0f64; values[0].len()];
        for (p, j) in probs.iter().zip(visible) {
            for (acc, v) in out.iter_mut().zip(&values[j]) {
                *acc += p * f64::from(*v);
            }
        }
        (probs, out)
    }

    fn rows(count: usize, dim: usize, seed: u32) -> Vec<Vec<f32>> {
        (0..count)
            .map(|j| {
                (0..dim)
                    .map(|c| {
                        let i = (j * dim + c) as u32;
                        (i.wrapping_mul(2_654_435_761).wrapping_add(seed) % 1000) as f32 / 250.0
                            - 2.0
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn every_window_and_mask_matches_the_definition() {
        // Head widths below, at and past a vector's lanes; runs of keys
        // starting at 0 and inside the keys; no mask and padding masked.
        for dim in [3, 16, 37] {
            let keys = rows(29, dim, 1);
            let values = rows(29, dim, 2);
            let query = &rows(1, dim, 3)[0];
            let mut transposed = TransposedKeys::new();
            transposed.fill(dim, keys.iter().map(Vec::as_slice));
            assert_eq!(transposed.len(), 29);
            for visible in [0..1, 0..29, 7..20, 28..29] {
                for masked in [false, true] {
                    let bias: Vec<f32> = (0..29)
                        .map(|j| if masked && j % 3 == 1 { -1e9 } else { 0.0 })
                        .collect();
                    if masked && visible.clone().all(|j| j % 3 == 1) {
                        continue;
                    }
                    let mut probs = vec![f32::NAN; visible.len()];
                    let mut out = vec![f32::NAN; dim];
                    attend_query(
                        query,
                        0.3,
                        &transposed,
                        visible.clone(),
                        |j| bias[j],
                        |j| &values[j],
                        &mut probs,
                        &mut out,
                    );
                    let (want_probs, want_out) =
                        reference(query, 0.3, &keys, &values, visible.clone(), &bias);
                    for (got, want) in probs
                        .iter()
                        .zip(&want_probs)
                        .chain(out.iter().zip(&want_out))
                    {
                        assert!(
                            (f64::from(*got) - want).abs() < 1e-5 * (1.0 + want.abs()),
                            "dim {dim}, keys {visible:?}, masked {masked}: {got} against {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn refilling_replaces_every_key() {
        let mut transposed = TransposedKeys::new();
        transposed.fill(4, rows(10, 4, 5).iter().map(Vec::as_slice));
        let keys = rows(3, 4, 6);
        transposed.fill(4, keys.iter().map(Vec::as_slice));
        assert_eq!(transposed.len(), 3);
        let values = rows(3, 4, 7);
        let (mut probs, mut out) = (vec![0f32; 3], vec![0f32; 4]);
        let query = &rows(1, 4, 8)[0];
        attend_query(
            query,
            1.0,
            &transposed,
            0..3,
            |_| 0.0,
            |j| &values[j],
            &mut probs,
            &mut out,
        );
        let (want, _) = reference(query, 1.0, &keys, &values, 0..3, &[0.0; 3]);
        for (got, want) in probs.iter().zip(&want) {
            assert!(
                (f64::from(*got) - want).abs() < 1e-6,
                "{got} against {want}"
            );
        }
    }
}
