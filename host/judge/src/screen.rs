//! The arithmetic of choosing a judge ("A Cheap Verifier is Good Enough"):
//! the golden judges' 2-of-3 majority, each candidate's agreement with a
//! reference (accuracy, precision, recall, F1, Spearman), the choice rules
//! (cost-reducing: the cheapest candidate with accuracy ≥ a threshold
//! against the golden majority, else the cheapest; balanced: the user's
//! pick), uplift, HealthBench's weighted "all" split and the sensitivity of
//! scores to one flipped verdict. Pure functions over verdicts; the
//! `verifiers screen` command runs the judges and reports with these.

use serde::{Deserialize, Serialize};
use verifine_runtime::stats::{Confusion, spearman};

/// One judge's verdict per (response, criterion) pair; `None` where it
/// gave none (failed, refused by its budget).
pub type Verdicts = [Option<bool>];

/// The majority of the golden judges per pair: the verdict more than half
/// of them gave (2 of 3), `None` where no verdict has a majority.
pub fn majority(goldens: &[&Verdicts]) -> Vec<Option<bool>> {
    let pairs = goldens.iter().map(|g| g.len()).min().unwrap_or(0);
    let need = goldens.len() / 2 + 1;
    (0..pairs)
        .map(|i| {
            let yes = goldens.iter().filter(|g| g[i] == Some(true)).count();
            let no = goldens.iter().filter(|g| g[i] == Some(false)).count();
            if yes >= need {
                Some(true)
            } else if no >= need {
                Some(false)
            } else {
                None
            }
        })
        .collect()
}

/// How one judge agrees with a reference, over the pairs both answered.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Agreement {
    /// Share of pairs with the same verdict.
    pub accuracy: f64,
    /// Of the pairs the judge calls met, the share the reference does.
    pub precision: f64,
    /// Of the pairs the reference calls met, the share the judge does.
    pub recall: f64,
    /// Harmonic mean of precision and recall (`None` when no pair is met
    /// on either side).
    pub f1: Option<f64>,
    /// Spearman correlation of the verdicts as 0/1 (`None` when either side
    /// is constant).
    pub spearman: Option<f64>,
    /// Pairs compared.
    pub n: usize,
}

/// Agreement of `judge` with `reference` over the pairs where both gave a
/// verdict.
pub fn agreement(judge: &Verdicts, reference: &Verdicts) -> Agreement {
    let both: Vec<(bool, bool)> = judge
        .iter()
        .zip(reference)
        .filter_map(|(j, r)| Some(((*j)?, (*r)?)))
        .collect();
    let (pred, gold): (Vec<bool>, Vec<bool>) = both.iter().copied().unzip();
    let all: Vec<usize> = (0..both.len()).collect();
    let confusion = Confusion::from_pairs(&pred, &gold, &all);
    let as_number = |v: &[bool]| {
        v.iter()
            .map(|&b| f64::from(u8::from(b)))
            .collect::<Vec<_>>()
    };
    let rho = spearman(&as_number(&pred), &as_number(&gold), &all);
    let f1 = confusion.f1();
    Agreement {
        accuracy: confusion.accuracy(),
        precision: confusion.precision(),
        recall: confusion.recall(),
        f1: f1.is_finite().then_some(f1),
        spearman: rho.is_finite().then_some(rho),
        n: both.len(),
    }
}

/// A candidate as the choice rules see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// Its name.
    pub name: String,
    /// Accuracy against the golden majority.
    pub accuracy: f64,
    /// USD per 1 000 tasks.
    pub usd_per_1000_tasks: f64,
}

/// The cost-reducing choice: the cheapest candidate whose accuracy reaches
/// `threshold` (0.80 in the paper), or the cheapest of all when none does.
/// Ties in cost go to the more accurate, then to the earlier listed.
pub fn cost_reducing(candidates: &[Candidate], threshold: f64) -> Option<&Candidate> {
    let cheapest = |good_enough: bool| {
        candidates
            .iter()
            .filter(|c| !good_enough || c.accuracy >= threshold)
            .min_by(|a, b| {
                a.usd_per_1000_tasks
                    .total_cmp(&b.usd_per_1000_tasks)
                    .then(b.accuracy.total_cmp(&a.accuracy))
            })
    };
    cheapest(true).or_else(|| cheapest(false))
}

/// Uplift of a chosen judge's post-training score: (chosen − baseline) /
/// (best − baseline); `None` when best equals baseline.
pub fn uplift(chosen: f64, baseline: f64, best: f64) -> Option<f64> {
    let span = best - baseline;
    (span.abs() > f64::EPSILON).then(|| (chosen - baseline) / span)
}

/// Cost reduction of a protocol against a reference one: 1 − cost / reference.
pub fn cost_reduction(cost: f64, reference: f64) -> Option<f64> {
    (reference > 0.0).then(|| 1.0 - cost / reference)
}

/// HealthBench's weighted "all" split from the hard and non-hard splits:
/// (100·s_hard + 160·s_nonhard) / 260.
pub fn healthbench_all(hard: f64, nonhard: f64) -> f64 {
    (100.0 * hard + 160.0 * nonhard) / 260.0
}

/// How much one flipped verdict can move a task's score: the largest
/// |points| of one item over the task's positive points (`None` when the
/// task has no positive points and so no score).
pub fn single_error_task(points: &[f64]) -> Option<f64> {
    let positive: f64 = points.iter().filter(|p| **p > 0.0).sum();
    (positive > 0.0).then(|| points.iter().map(|p| p.abs()).fold(0.0, f64::max) / positive)
}

/// How much one flipped verdict can move the policy score (the mean over
/// tasks): the largest single-error move of any task, over the task count.
pub fn single_error_policy(tasks: &[Vec<f64>]) -> Option<f64> {
    let worst = tasks
        .iter()
        .filter_map(|t| single_error_task(t))
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))?;
    Some(worst / tasks.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Option<bool> = Some(true);
    const F: Option<bool> = Some(false);

    #[test]
    fn the_golden_majority_is_two_of_three() {
        let a = [T, T, F, None, T];
        let b = [T, F, F, None, None];
        let c = [F, F, T, T, F];
        assert_eq!(majority(&[&a, &b, &c]), [T, F, F, None, None]);
    }

    #[test]
    fn agreement_matches_a_hand_count() {
        // Pairs both answered: (T,T) (T,F) (F,F) (F,T) (T,T) (F,F); the None is skipped.
        let judge = [T, T, F, F, T, F, None];
        let gold = [T, F, F, T, T, F, T];
        let a = agreement(&judge, &gold);
        assert_eq!(a.n, 6);
        // tp 2, fp 1, tn 2, fn 1.
        assert!((a.accuracy - 4.0 / 6.0).abs() < 1e-12);
        assert!((a.precision - 2.0 / 3.0).abs() < 1e-12);
        assert!((a.recall - 2.0 / 3.0).abs() < 1e-12);
        assert!((a.f1.unwrap() - 2.0 / 3.0).abs() < 1e-12);
        // On 0/1 values Spearman is the phi coefficient: (2·2 − 1·1)/sqrt(3·3·3·3) = 1/3.
        assert!((a.spearman.unwrap() - 1.0 / 3.0).abs() < 1e-12);
        let constant = agreement(&[T, T], &[T, F]);
        assert_eq!(constant.spearman, None);
    }

    #[test]
    fn the_cost_reducing_rule_takes_the_cheapest_good_enough_judge() {
        let c = |name: &str, accuracy: f64, usd: f64| Candidate {
            name: name.into(),
            accuracy,
            usd_per_1000_tasks: usd,
        };
        let pool = [
            c("big", 0.95, 10.0),
            c("mid", 0.82, 2.0),
            c("small", 0.7, 0.5),
        ];
        assert_eq!(cost_reducing(&pool, 0.8).unwrap().name, "mid");
        // None reaches 0.99: the cheapest of all.
        assert_eq!(cost_reducing(&pool, 0.99).unwrap().name, "small");
        assert!(cost_reducing(&[], 0.8).is_none());
    }

    #[test]
    fn uplift_split_weighting_and_sensitivity_by_hand() {
        assert!((uplift(0.6, 0.5, 0.7).unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(uplift(0.6, 0.5, 0.5), None);
        assert_eq!(cost_reduction(2.0, 8.0), Some(0.75));
        assert!((healthbench_all(0.26, 0.52) - (26.0 + 83.2) / 260.0).abs() < 1e-12);
        // Items +5, +3, −4: positive 8; one flip moves at most 5/8.
        assert_eq!(single_error_task(&[5.0, 3.0, -4.0]), Some(0.625));
        assert_eq!(single_error_task(&[-2.0]), None);
        let tasks = vec![vec![5.0, 3.0, -4.0], vec![10.0, 10.0], vec![-1.0]];
        assert_eq!(single_error_policy(&tasks), Some(0.625 / 3.0));
    }
}
