//! Causal attention on the CPU, written out over plain slices: every
//! (sequence, query head) pair is a work item on candle's thread pool.
//!
//! candle's path runs attention as a product per sequence (gemm on the
//! calling thread only, for these sizes), a mask added, a softmax and a
//! second product: the profile of a grouped prefill showed the calling
//! thread busy with it while the pool's other thread spun, 15% of the
//! judge's time in the products alone. Here a head's scores, softmax and
//! weighted values run in one pass over its keys (the decoder ops'
//! `attend_query`, which training's hand-written pass runs too), on both
//! cores.

use candle_core::{CpuStorage, Storage, StorageRef, Tensor};
use std::ops::Range;
use verifine_models::ops::{TransposedKeys, attend_query};

/// What every sequence of a pass shares.
#[derive(Debug, Clone, Copy)]
pub(super) struct Heads {
    pub(super) heads: usize,
    pub(super) kv_heads: usize,
    pub(super) head_dim: usize,
    /// Scores are multiplied by this.
    pub(super) scale: f32,
    /// A token sees itself and the `window - 1` before it (`usize::MAX`:
    /// every earlier token).
    pub(super) window: usize,
}

/// One sequence's new queries and everything they may attend to.
pub(super) struct Sequence<'a> {
    /// Queries `[heads, q_stride, head_dim]`, of which positions
    /// `q_first .. q_first + positions` are this sequence's.
    pub(super) q: &'a [f32],
    pub(super) q_stride: usize,
    pub(super) q_first: usize,
    /// Keys and values `[kv_heads, seen, head_dim]`; the last `positions`
    /// of the `seen` are the queries' own tokens.
    pub(super) k: &'a [f32],
    pub(super) v: &'a [f32],
    pub(super) positions: usize,
    pub(super) seen: usize,
    /// Row of the output that takes this sequence's first position.
    pub(super) first_row: usize,
}

/// The output, `[rows, heads · head_dim]`, written by several threads at
/// disjoint cells.
struct Cells(*mut f32);
// SAFETY: the work item of (sequence, head) writes only the cells of its
// head in its sequence's rows, and the buffer outlives the pool's call.
unsafe impl Sync for Cells {}

/// Attention of every sequence's queries, into `out` (`[rows, heads ·
/// head_dim]`, each sequence's rows from its `first_row`).
///
/// Panics when a slice is shorter than its shape says (the caller builds
/// them from tensors of those shapes).
pub(super) fn attend(heads: &Heads, sequences: &[Sequence], out: &mut [f32]) {
    let width = heads.heads * heads.head_dim;
    assert!(heads.kv_heads > 0 && heads.heads.is_multiple_of(heads.kv_heads));
    let mut items = Vec::new();
    for (n, s) in sequences.iter().enumerate() {
        assert!(s.seen >= s.positions);
        assert!(s.q_first + s.positions <= s.q_stride);
        assert!(s.q.len() >= heads.heads * s.q_stride * heads.head_dim);
        assert!(s.k.len() >= heads.kv_heads * s.seen * heads.head_dim);
        assert!(s.v.len() >= heads.kv_heads * s.seen * heads.head_dim);
        assert!((s.first_row + s.positions) * width <= out.len());
        for kv in 0..heads.kv_heads {
            for first in (0..s.positions).step_by(CHUNK_POSITIONS) {
                items.push(Item {
                    sequence: n,
                    kv,
                    positions: first..s.positions.min(first + CHUNK_POSITIONS),
                });
            }
        }
    }
    let cells = Cells(out.as_mut_ptr());
    let cells = &cells;
    candle_core::utils::barrier_pool().execute_chunked(items.len(), |range| {
        for item in &items[range] {
            run_item(heads, &sequences[item.sequence], item, cells);
        }
    });
}

/// Query positions of one sequence a work item takes, for every query
/// head of one key/value head: enough that its transposed keys are reused
/// many times, few enough that a single long prompt still splits.
const CHUNK_POSITIONS: usize = 32;

/// The query heads of key/value head `kv` at `positions` of `sequence`.
struct Item {
    sequence: usize,
    kv: usize,
    positions: Range<usize>,
}

/// One work item, with the widest vector unit this CPU has (the loops
/// below are written so the compiler vectorizes them).
fn run_item(heads: &Heads, s: &Sequence, item: &Item, cells: &Cells) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has the features the function is built for.
            return unsafe { run_item_avx512(heads, s, item, cells) };
        }
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            // SAFETY: as above.
            return unsafe { run_item_avx2(heads, s, item, cells) };
        }
    }
    item_pass(heads, s, item, cells)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn run_item_avx512(heads: &Heads, s: &Sequence, item: &Item, cells: &Cells) {
    item_pass(heads, s, item, cells)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run_item_avx2(heads: &Heads, s: &Sequence, item: &Item, cells: &Cells) {
    item_pass(heads, s, item, cells)
}

/// The shared [`attend_query`] for every query head of the item's
/// key/value head at each of its positions, over the keys that position
/// sees (its window), transposed once for the whole item.
#[inline(always)]
fn item_pass(heads: &Heads, s: &Sequence, item: &Item, cells: &Cells) {
    let d = heads.head_dim;
    let past = s.seen - s.positions;
    // The keys any of the item's positions sees.
    let first_key = (past + item.positions.start + 1).saturating_sub(heads.window);
    let range =
        (item.kv * s.seen + first_key) * d..(item.kv * s.seen + past + item.positions.end) * d;
    let (keys, values) = (&s.k[range.clone()], &s.v[range]);
    let mut transposed = TransposedKeys::new();
    transposed.fill(d, keys.chunks_exact(d));
    let value = |j: usize| &values[j * d..(j + 1) * d];
    let mut probs = vec![0f32; transposed.len()];
    let mut sum = vec![0f32; d];
    let repeat = heads.heads / heads.kv_heads;
    let width = heads.heads * d;
    for head in item.kv * repeat..(item.kv + 1) * repeat {
        for i in item.positions.clone() {
            let at = past + i;
            let visible = (at + 1).saturating_sub(heads.window).max(first_key) - first_key
                ..at + 1 - first_key;
            let query_row = head * s.q_stride + s.q_first + i;
            let query = &s.q[query_row * d..(query_row + 1) * d];
            let probs = &mut probs[..visible.len()];
            attend_query(
                query,
                heads.scale,
                &transposed,
                visible,
                |_| 0.0,
                value,
                probs,
                &mut sum,
            );
            let row = s.first_row + i;
            for (c, &x) in sum.iter().enumerate() {
                // SAFETY: `row < rows` and `head · d + c < width` (checked
                // in `attend`), and only this item writes this head's cells
                // of these rows.
                unsafe { *cells.0.add(row * width + head * d + c) = x };
            }
        }
    }
}

/// A contiguous f32 CPU tensor's values, borrowed.
pub(super) struct Values<'a> {
    storage: StorageRef<'a>,
    range: Range<usize>,
}

impl<'a> Values<'a> {
    /// `None` unless `t` is a contiguous f32 tensor on the CPU.
    pub(super) fn of(t: &'a Tensor) -> Option<Self> {
        let (storage, layout) = t.storage_and_layout();
        let (start, end) = layout.contiguous_offsets()?;
        matches!(&*storage, Storage::Cpu(CpuStorage::F32(_))).then_some(Values {
            storage,
            range: start..end,
        })
    }

    pub(super) fn slice(&self) -> &[f32] {
        match &*self.storage {
            Storage::Cpu(CpuStorage::F32(values)) => &values[self.range.clone()],
            _ => unreachable!("checked in Values::of"),
        }
    }
}

/// One sequence of a pass, as tensors: its queries are positions
/// `q_first .. q_first + positions` of row `q_row` of the pass's queries;
/// `k` and `v` (`[1, kv_heads, seen, head_dim]`) end with its own tokens.
pub(super) struct SequenceTensors<'t> {
    pub(super) q_row: usize,
    pub(super) q_first: usize,
    pub(super) positions: usize,
    pub(super) k: &'t Tensor,
    pub(super) v: &'t Tensor,
}

/// Attention of `q` (`[rows, heads, positions, head_dim]`) for each of
/// `sequences`, as `[Σ positions, heads · head_dim]` in their order, with
/// `kv_heads` key/value heads, scores scaled by `scale`, each token seeing
/// `window` positions back; `None` off the CPU or for tensors not held as
/// contiguous f32 (the caller then runs candle's ops).
pub(super) fn attend_on_cpu(
    q: &Tensor,
    sequences: &[SequenceTensors],
    (kv_heads, scale, window): (usize, f32, usize),
) -> candle_core::Result<Option<Tensor>> {
    if !q.device().is_cpu() {
        return Ok(None);
    }
    let (_, heads, q_stride, head_dim) = q.dims4()?;
    let Some(queries) = Values::of(q) else {
        return Ok(None);
    };
    let mut held = Vec::with_capacity(sequences.len());
    for s in sequences {
        let (Some(k), Some(v)) = (Values::of(s.k), Values::of(s.v)) else {
            return Ok(None);
        };
        held.push((k, v, s.k.dim(2)?));
    }
    let per_row = heads * q_stride * head_dim;
    let mut first_row = 0;
    let mut plan = Vec::with_capacity(sequences.len());
    for (s, (k, v, seen)) in sequences.iter().zip(&held) {
        plan.push(Sequence {
            q: &queries.slice()[s.q_row * per_row..(s.q_row + 1) * per_row],
            q_stride,
            q_first: s.q_first,
            k: k.slice(),
            v: v.slice(),
            positions: s.positions,
            seen: *seen,
            first_row,
        });
        first_row += s.positions;
    }
    let shape = Heads {
        heads,
        kv_heads,
        head_dim,
        scale,
        window,
    };
    let mut out = vec![0f32; first_row * heads * head_dim];
    attend(&shape, &plan, &mut out);
    Tensor::from_vec(out, (first_row, heads * head_dim), q.device()).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attention as its definition reads, in f64.
    fn reference(heads: &Heads, s: &Sequence) -> Vec<f64> {
        let d = heads.head_dim;
        let past = s.seen - s.positions;
        let mut out = vec![0f64; s.positions * heads.heads * d];
        for h in 0..heads.heads {
            let kv = h / (heads.heads / heads.kv_heads);
            for i in 0..s.positions {
                let at = past + i;
                let q = &s.q[(h * s.q_stride + s.q_first + i) * d..][..d];
                let visible: Vec<usize> = (0..=at).filter(|j| at - j < heads.window).collect();
                let scores: Vec<f64> = visible
                    .iter()
                    .map(|&j| {
                        let k = &s.k[(kv * s.seen + j) * d..][..d];
                        let dot: f64 = q.iter().zip(k).map(|(a, b)| *a as f64 * *b as f64).sum();
                        dot * heads.scale as f64
                    })
                    .collect();
                let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let weights: Vec<f64> = scores.iter().map(|x| (x - max).exp()).collect();
                let total: f64 = weights.iter().sum();
                for (w, &j) in weights.iter().zip(&visible) {
                    let v = &s.v[(kv * s.seen + j) * d..][..d];
                    for c in 0..d {
                        out[(i * heads.heads + h) * d + c] += w / total * v[c] as f64;
                    }
                }
            }
        }
        out
    }

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) % 1000) as f32 / 250.0
                    - 2.0
            })
            .collect()
    }

    #[test]
    fn every_sequence_head_and_window_matches_the_definition() {
        for window in [usize::MAX, 5] {
            let heads = Heads {
                heads: 6,
                kv_heads: 2,
                head_dim: 20,
                scale: 0.3,
                window,
            };
            // Two sequences in one pass's queries (40 and 3 positions, the
            // first longer than a work item), over 12 and 30 earlier tokens.
            let q_stride = 43;
            let q = values(heads.heads * q_stride * heads.head_dim, 1);
            let (k1, v1) = (values(2 * 52 * 20, 2), values(2 * 52 * 20, 3));
            let (k2, v2) = (values(2 * 33 * 20, 4), values(2 * 33 * 20, 5));
            let sequences = [
                Sequence {
                    q: &q,
                    q_stride,
                    q_first: 0,
                    k: &k1,
                    v: &v1,
                    positions: 40,
                    seen: 52,
                    first_row: 0,
                },
                Sequence {
                    q: &q,
                    q_stride,
                    q_first: 40,
                    k: &k2,
                    v: &v2,
                    positions: 3,
                    seen: 33,
                    first_row: 40,
                },
            ];
            let mut out = vec![f32::NAN; 43 * heads.heads * heads.head_dim];
            attend(&heads, &sequences, &mut out);
            let width = heads.heads * heads.head_dim;
            for s in &sequences {
                let expected = reference(&heads, s);
                let got = &out[s.first_row * width..(s.first_row + s.positions) * width];
                for (g, x) in got.iter().zip(&expected) {
                    assert!(
                        (*g as f64 - x).abs() < 1e-4,
                        "window {window}: {g} against {x}"
                    );
                }
            }
        }
    }
}
