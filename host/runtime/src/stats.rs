//! Agreement statistics with bootstrap confidence intervals.
//!
//! Binary labels: accuracy, precision, recall, F1 and balanced F1 (the mean of
//! the positive-class and negative-class F1, as HealthBench's meta-evaluation
//! reports). Continuous scores: Pearson, Spearman and mean absolute error.

use serde::Serialize;
use verifine_base::SplitMix64;

mod bootstrap;
pub use bootstrap::{bootstrap, bootstrap_many, percentile};

/// Whether a reward agrees with a label: it exists, and (reward ≥
/// `threshold`) equals the label. A failed score never agrees. The one rule
/// behind canary agreement, disputed cases and `plugin diff`.
pub fn agrees(total: Option<f64>, label: bool, threshold: f64) -> bool {
    total.is_some_and(|t| (t >= threshold) == label)
}

/// Share of `(reward, label)` pairs that [`agrees`] accepts; `None` when
/// there are none.
pub fn label_agreement(
    pairs: impl IntoIterator<Item = (Option<f64>, bool)>,
    threshold: f64,
) -> Option<f64> {
    let (mut agreeing, mut n) = (0usize, 0usize);
    for (total, label) in pairs {
        n += 1;
        agreeing += usize::from(agrees(total, label, threshold));
    }
    (n > 0).then(|| agreeing as f64 / n as f64)
}

/// A statistic with its bootstrap percentile interval. NaN (undefined, e.g.
/// a correlation of a constant series) serializes as null.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    /// The statistic on the full sample (NaN when undefined).
    #[serde(serialize_with = "finite_or_null")]
    pub value: f64,
    /// Lower bound of the 95% interval (2.5th percentile of the resamples).
    #[serde(serialize_with = "finite_or_null")]
    pub ci_low: f64,
    /// Upper bound of the 95% interval (97.5th percentile of the resamples).
    #[serde(serialize_with = "finite_or_null")]
    pub ci_high: f64,
}

fn finite_or_null<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.is_finite() {
        s.serialize_f64(*v)
    } else {
        s.serialize_none()
    }
}

/// Mean and the standard deviation of the mean over bootstrap resamples.
pub fn bootstrap_mean_std(values: &[f64], resamples: usize, seed: u64) -> (f64, f64) {
    let mean_of = |idx: &[usize]| idx.iter().map(|&i| values[i]).sum::<f64>() / idx.len() as f64;
    let all: Vec<usize> = (0..values.len()).collect();
    if values.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let mut rng = SplitMix64::new(seed);
    let mut idx = vec![0; values.len()];
    let means: Vec<f64> = (0..resamples)
        .map(|_| {
            idx.iter_mut().for_each(|i| *i = rng.below(values.len()));
            mean_of(&idx)
        })
        .collect();
    let m = means.iter().sum::<f64>() / means.len().max(1) as f64;
    let var = means.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (means.len().max(2) - 1) as f64;
    (mean_of(&all), var.sqrt())
}

/// Counts of a binary confusion matrix.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Confusion {
    /// True positives: predicted and gold both positive.
    pub tp: usize,
    /// False positives: predicted positive, gold negative.
    pub fp: usize,
    /// True negatives: predicted and gold both negative.
    pub tn: usize,
    /// False negatives: predicted negative, gold positive (`fn` is a keyword).
    pub fn_: usize,
}

impl Confusion {
    /// Counts the pairs at `indices`; a repeated index counts again, as bootstrap resamples need.
    pub fn from_pairs(pred: &[bool], gold: &[bool], indices: &[usize]) -> Self {
        let mut c = Confusion::default();
        for &i in indices {
            match (pred[i], gold[i]) {
                (true, true) => c.tp += 1,
                (true, false) => c.fp += 1,
                (false, false) => c.tn += 1,
                (false, true) => c.fn_ += 1,
            }
        }
        c
    }

    /// Share of pairs where prediction and gold agree (0 when there are none).
    pub fn accuracy(&self) -> f64 {
        ratio(self.tp + self.tn, self.tp + self.tn + self.fp + self.fn_)
    }

    /// Precision of the positive class (0 when nothing is predicted positive).
    pub fn precision(&self) -> f64 {
        ratio(self.tp, self.tp + self.fp)
    }

    /// Recall of the positive class (0 when there are no positives).
    pub fn recall(&self) -> f64 {
        ratio(self.tp, self.tp + self.fn_)
    }

    /// F1 of the positive class: harmonic mean of precision and recall.
    ///
    /// Undefined (NaN, reported as null) when the positive class appears
    /// neither in the gold labels nor in the predictions.
    pub fn f1(&self) -> f64 {
        if self.tp + self.fp + self.fn_ == 0 {
            return f64::NAN;
        }
        harmonic(self.precision(), self.recall())
    }

    /// F1 of the negative class; undefined (NaN) when no label and no
    /// prediction is negative.
    pub fn negative_f1(&self) -> f64 {
        if self.tn + self.fp + self.fn_ == 0 {
            return f64::NAN;
        }
        harmonic(
            ratio(self.tn, self.tn + self.fn_),
            ratio(self.tn, self.tn + self.fp),
        )
    }

    /// Mean of the positive- and negative-class F1 over the classes that
    /// occur: a perfect prediction of an all-positive set scores 1, not 0.5.
    pub fn balanced_f1(&self) -> f64 {
        let defined: Vec<f64> = [self.f1(), self.negative_f1()]
            .into_iter()
            .filter(|f| !f.is_nan())
            .collect();
        if defined.is_empty() {
            return f64::NAN;
        }
        defined.iter().sum::<f64>() / defined.len() as f64
    }
}

fn ratio(num: usize, den: usize) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}

fn harmonic(a: f64, b: f64) -> f64 {
    if a + b == 0.0 {
        0.0
    } else {
        2.0 * a * b / (a + b)
    }
}

/// Pearson correlation of the indexed pairs: undefined (NaN) when either side
/// is constant or not finite. Deviations are scaled by their largest size
/// before squaring, so values near 1e200 neither overflow nor vanish.
pub fn pearson(x: &[f64], y: &[f64], indices: &[usize]) -> f64 {
    if indices.len() < 2 {
        return f64::NAN;
    }
    let (Some((mx, sx)), Some((my, sy))) =
        (centre_and_scale(x, indices), centre_and_scale(y, indices))
    else {
        return f64::NAN;
    };
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for &i in indices {
        let (a, b) = ((x[i] - mx) / sx, (y[i] - my) / sy);
        sxy += a * b;
        sxx += a * a;
        syy += b * b;
    }
    (sxy / (sxx * syy).sqrt()).clamp(-1.0, 1.0)
}

/// The mean of the indexed values and their largest deviation from it;
/// `None` when the values are constant (exactly: a computed mean's rounding
/// does not make a constant series vary) or not all finite.
fn centre_and_scale(values: &[f64], indices: &[usize]) -> Option<(f64, f64)> {
    let first = values[indices[0]];
    if indices.iter().any(|&i| !values[i].is_finite())
        || indices.iter().all(|&i| values[i] == first)
    {
        return None;
    }
    // A running mean: no sum of large values to overflow.
    let mut mean = 0.0;
    for (k, &i) in indices.iter().enumerate() {
        mean += (values[i] - mean) / (k + 1) as f64;
    }
    let scale = indices
        .iter()
        .fold(0.0f64, |m, &i| m.max((values[i] - mean).abs()));
    (scale > 0.0 && scale.is_finite()).then_some((mean, scale))
}

/// Spearman correlation: Pearson on ranks, ties given their average rank.
pub fn spearman(x: &[f64], y: &[f64], indices: &[usize]) -> f64 {
    let xs: Vec<f64> = indices.iter().map(|&i| x[i]).collect();
    let ys: Vec<f64> = indices.iter().map(|&i| y[i]).collect();
    let all: Vec<usize> = (0..indices.len()).collect();
    pearson(&ranks(&xs), &ranks(&ys), &all)
}

/// Average ranks (1-based) of `values`.
pub fn ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut ranks = vec![0.0; values.len()];
    let mut start = 0;
    while start < order.len() {
        let mut end = start;
        while end + 1 < order.len() && values[order[end + 1]] == values[order[start]] {
            end += 1;
        }
        let average = (start + end) as f64 / 2.0 + 1.0;
        for &i in &order[start..=end] {
            ranks[i] = average;
        }
        start = end + 1;
    }
    ranks
}

/// Mean absolute error of the indexed pairs.
pub fn mae(x: &[f64], y: &[f64], indices: &[usize]) -> f64 {
    if indices.is_empty() {
        return f64::NAN;
    }
    indices.iter().map(|&i| (x[i] - y[i]).abs()).sum::<f64>() / indices.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(n: usize) -> Vec<usize> {
        (0..n).collect()
    }

    #[test]
    fn a_class_that_never_occurs_leaves_balanced_f1_to_the_other() {
        let perfect_positive = Confusion::from_pairs(&[true; 4], &[true; 4], &all(4));
        assert_eq!(perfect_positive.f1(), 1.0);
        assert!(perfect_positive.negative_f1().is_nan());
        assert_eq!(perfect_positive.balanced_f1(), 1.0);
        let perfect_negative = Confusion::from_pairs(&[false; 3], &[false; 3], &all(3));
        assert_eq!(perfect_negative.balanced_f1(), 1.0);
        // A class present on one side only is defined, and scores 0.
        let all_wrong = Confusion::from_pairs(&[true; 2], &[false; 2], &all(2));
        assert_eq!(all_wrong.balanced_f1(), 0.0);
    }

    #[test]
    fn pearson_is_undefined_for_constant_or_non_finite_series_and_scales_large_ones() {
        let constant = [0.1; 7];
        let varying = [0.3, 0.1, 0.7, 0.2, 0.9, 0.4, 0.5];
        assert!(pearson(&constant, &varying, &all(7)).is_nan());
        assert!(pearson(&[1.0, f64::INFINITY], &[1.0, 2.0], &all(2)).is_nan());
        let huge: Vec<f64> = varying.iter().map(|v| v * 1e200).collect();
        let tiny: Vec<f64> = varying.iter().map(|v| v * 1e-200).collect();
        assert!((pearson(&huge, &varying, &all(7)) - 1.0).abs() < 1e-12);
        assert!((pearson(&tiny, &huge, &all(7)) - 1.0).abs() < 1e-12);
        let reversed: Vec<f64> = varying.iter().map(|v| -v * 1e200).collect();
        assert!((pearson(&reversed, &varying, &all(7)) + 1.0).abs() < 1e-12);
    }

    #[test]
    fn pearson_by_hand() {
        // x = 1..5, y = 2,4,5,4,5: Sxy = 6, Sxx = 10, Syy = 6 → 6 / sqrt(60)
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        let y = [2.0, 4.0, 5.0, 4.0, 5.0];
        assert!((pearson(&x, &y, &all(5)) - 6.0 / 60f64.sqrt()).abs() < 1e-12);
        assert!(pearson(&x, &[1.0; 5], &all(5)).is_nan());
    }

    #[test]
    fn spearman_with_ties_by_hand() {
        // ranks of y = 2,4,5,4,5 are 1, 2.5, 4.5, 2.5, 4.5
        assert_eq!(
            ranks(&[2.0, 4.0, 5.0, 4.0, 5.0]),
            vec![1.0, 2.5, 4.5, 2.5, 4.5]
        );
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        let y = [2.0, 4.0, 5.0, 4.0, 5.0];
        // Pearson of (1..5) with (1, 2.5, 4.5, 2.5, 4.5): Sxy = 4 + 0.5 + 0 - 0.5 + 3 = 7, Sxx = 10, Syy = 9
        let expected = 7.0 / (10.0f64 * 9.0).sqrt();
        assert!((spearman(&x, &y, &all(5)) - expected).abs() < 1e-12);
        // monotone but non-linear → 1
        assert!((spearman(&x, &[1.0, 8.0, 27.0, 64.0, 125.0], &all(5)) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn f1_and_balanced_f1_by_hand() {
        // pred: T T F F T F, gold: T F F T T F → tp 2, fp 1, tn 2, fn 1
        let pred = [true, true, false, false, true, false];
        let gold = [true, false, false, true, true, false];
        let c = Confusion::from_pairs(&pred, &gold, &all(6));
        assert_eq!(
            c,
            Confusion {
                tp: 2,
                fp: 1,
                tn: 2,
                fn_: 1
            }
        );
        assert!((c.precision() - 2.0 / 3.0).abs() < 1e-12);
        assert!((c.recall() - 2.0 / 3.0).abs() < 1e-12);
        assert!((c.f1() - 2.0 / 3.0).abs() < 1e-12);
        assert!((c.negative_f1() - 2.0 / 3.0).abs() < 1e-12);
        // asymmetric case: tp 3, fp 1, tn 0, fn 0 → F1 = 6/7, negative F1 = 0
        let c = Confusion {
            tp: 3,
            fp: 1,
            tn: 0,
            fn_: 0,
        };
        assert!((c.f1() - 6.0 / 7.0).abs() < 1e-12);
        assert_eq!(c.negative_f1(), 0.0);
        assert!((c.balanced_f1() - 3.0 / 7.0).abs() < 1e-12);
        assert!((c.accuracy() - 0.75).abs() < 1e-12);
    }

    #[test]
    fn mae_by_hand() {
        assert!((mae(&[1.0, 2.0, 4.0], &[1.5, 2.0, 3.0], &all(3)) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn bootstrap_interval_brackets_the_estimate() {
        let x: Vec<f64> = (0..200).map(|i| i as f64).collect();
        let y: Vec<f64> = x.iter().map(|v| v + ((v * 7.0) % 13.0) * 5.0).collect();
        let e = bootstrap(200, 1000, 7, |idx| pearson(&x, &y, idx));
        assert!(e.ci_low <= e.value && e.value <= e.ci_high, "{e:?}");
        assert!(
            e.ci_high - e.ci_low > 0.0 && e.ci_high - e.ci_low < 0.2,
            "{e:?}"
        );
        // same seed, same interval
        assert_eq!(e, bootstrap(200, 1000, 7, |idx| pearson(&x, &y, idx)));
    }

    #[test]
    fn bootstrap_std_of_the_mean_is_near_the_analytic_value() {
        // values 0/1 with p = 0.5, n = 400: std of the mean = 0.5 / 20 = 0.025
        let values: Vec<f64> = (0..400).map(|i| (i % 2) as f64).collect();
        let (mean, std) = bootstrap_mean_std(&values, 1000, 1);
        assert_eq!(mean, 0.5);
        assert!((std - 0.025).abs() < 0.004, "{std}");
    }
}
