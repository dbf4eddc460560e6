//! The accept rule's check against the reference: a revision may not raise
//! the judge's reward on labelled answers whose final answer is wrong.
//!
//! Agreement with the labels cannot see every exploit: at seed 1 of the
//! default run a revision that doubled `valid`'s weight raised Pearson on
//! the accumulated labels, yet the round it rewarded became 12%
//! valid-but-ungrounded (BENCHMARKS.md, "verifine evolve across seeds").
//! The fixed evaluator decides what is right; this check asks the same
//! question it does (the final answer against the reference's) of the
//! labelled cases. The judge never sees the reference; only the host's
//! accept rule does.

use super::LabelledSet;
use crate::cases::final_answer;

/// Indices of the labelled answers whose final answer is not the reference's.
pub(super) fn answers(set: &LabelledSet) -> Vec<usize> {
    set.cases
        .iter()
        .enumerate()
        .filter(|(_, c)| final_answer(&c.response) != final_answer(&c.reference))
        .map(|(i, _)| i)
        .collect()
}

/// Mean of `scores` over `indices`; `None` when there are none.
pub(super) fn mean(scores: &[f64], indices: &[usize]) -> Option<f64> {
    (!indices.is_empty())
        .then(|| indices.iter().map(|&i| scores[i]).sum::<f64>() / indices.len() as f64)
}
