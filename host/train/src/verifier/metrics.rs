//! How good a YES/NO verifier is on labelled verdicts: accuracy against the
//! base rate, balanced accuracy (the mean of the two recalls, which a
//! verifier answering YES to everything cannot lift above 0.5), precision
//! and recall per class, the expected calibration error of its
//! confidence, and the ROC AUC of P(YES) (how well it ranks, whatever the
//! threshold).

use serde::{Deserialize, Serialize};

/// Bins of the expected calibration error (equal width over [0.5, 1]).
pub const ECE_BINS: usize = 10;

/// Precision and recall of one class.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClassMetrics {
    /// Of the verdicts given as this class, the share that are it (`None`
    /// when the verifier never gave it).
    pub precision: Option<f64>,
    /// Of the examples of this class, the share given it (`None` when there
    /// are none).
    pub recall: Option<f64>,
}

/// A verifier's verdicts scored against labels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerdictMetrics {
    /// Labelled examples.
    pub examples: usize,
    /// Share of examples labelled YES (met).
    pub base_rate: f64,
    /// What always answering the majority class scores.
    pub majority_accuracy: f64,
    /// Share of verdicts (YES when P(YES) ≥ 0.5) that match the label.
    pub accuracy: f64,
    /// Mean of the YES and NO recalls (of those defined).
    pub balanced_accuracy: f64,
    /// The YES class.
    pub yes: ClassMetrics,
    /// The NO class.
    pub no: ClassMetrics,
    /// Expected calibration error of the verdict's confidence
    /// (max(P(YES), P(NO))), over [`ECE_BINS`] bins.
    pub ece: f64,
    /// Mean P(YES) given, against `base_rate`: a verifier leaning one way.
    pub mean_p_yes: f64,
    /// The chance that a met example gets a higher P(YES) than an unmet
    /// one (ties count half): 0.5 ranks at random, 1 separates the
    /// classes at some threshold. `None` with one class only.
    #[serde(default)]
    pub auc: Option<f64>,
}

/// Scores `p_yes[i]` (the verifier's probability that example `i` is met)
/// against `met[i]`; `None` without examples.
pub fn verdict_metrics(p_yes: &[f64], met: &[bool]) -> Option<VerdictMetrics> {
    assert_eq!(p_yes.len(), met.len(), "one probability per label");
    let n = met.len();
    if n == 0 {
        return None;
    }
    let said_yes: Vec<bool> = p_yes.iter().map(|&p| p >= 0.5).collect();
    let count = |f: &dyn Fn(usize) -> bool| (0..n).filter(|&i| f(i)).count();
    let positives = count(&|i| met[i]);
    let true_yes = count(&|i| met[i] && said_yes[i]);
    let true_no = count(&|i| !met[i] && !said_yes[i]);
    let given_yes = count(&|i| said_yes[i]);
    let ratio = |a: usize, b: usize| (b > 0).then(|| a as f64 / b as f64);
    let yes = ClassMetrics {
        precision: ratio(true_yes, given_yes),
        recall: ratio(true_yes, positives),
    };
    let no = ClassMetrics {
        precision: ratio(true_no, n - given_yes),
        recall: ratio(true_no, n - positives),
    };
    let recalls: Vec<f64> = [yes.recall, no.recall].into_iter().flatten().collect();
    let base_rate = positives as f64 / n as f64;
    Some(VerdictMetrics {
        examples: n,
        base_rate,
        majority_accuracy: base_rate.max(1.0 - base_rate),
        accuracy: (true_yes + true_no) as f64 / n as f64,
        balanced_accuracy: recalls.iter().sum::<f64>() / recalls.len() as f64,
        yes,
        no,
        ece: expected_calibration_error(p_yes, met),
        mean_p_yes: p_yes.iter().sum::<f64>() / n as f64,
        auc: roc_auc(p_yes, met),
    })
}

/// The Mann-Whitney form of the ROC AUC: over the examples sorted by P(YES),
/// the met ones' mean rank (ties share their mean rank).
fn roc_auc(p_yes: &[f64], met: &[bool]) -> Option<f64> {
    let positives = met.iter().filter(|&&m| m).count();
    let negatives = met.len() - positives;
    if positives == 0 || negatives == 0 {
        return None;
    }
    let mut order: Vec<usize> = (0..p_yes.len()).collect();
    order.sort_by(|&a, &b| p_yes[a].total_cmp(&p_yes[b]));
    let mut rank_sum = 0.0;
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && p_yes[order[end]] == p_yes[order[start]] {
            end += 1;
        }
        // Ranks start + 1 ..= end share their mean.
        let mean_rank = (start + 1 + end) as f64 / 2.0;
        let met_here = order[start..end].iter().filter(|&&i| met[i]).count();
        rank_sum += mean_rank * met_here as f64;
        start = end;
    }
    let (p, n) = (positives as f64, negatives as f64);
    Some((rank_sum - p * (p + 1.0) / 2.0) / (p * n))
}

/// Σ over bins of (bin share) × |accuracy − mean confidence|, where an
/// example's confidence is that of the verdict it was given.
fn expected_calibration_error(p_yes: &[f64], met: &[bool]) -> f64 {
    let mut bins = [(0usize, 0.0f64, 0usize); ECE_BINS];
    for (&p, &label) in p_yes.iter().zip(met) {
        let said_yes = p >= 0.5;
        let confidence = if said_yes { p } else { 1.0 - p };
        // Confidence lies in [0.5, 1]; the top bin includes 1.
        let bin = (((confidence - 0.5) * 2.0 * ECE_BINS as f64) as usize).min(ECE_BINS - 1);
        let (count, sum, right) = &mut bins[bin];
        *count += 1;
        *sum += confidence;
        *right += usize::from(said_yes == label);
    }
    let n = p_yes.len() as f64;
    bins.iter()
        .filter(|(count, _, _)| *count > 0)
        .map(|&(count, sum, right)| {
            let c = count as f64;
            c / n * (right as f64 / c - sum / c).abs()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verifier_that_always_says_yes_sits_at_the_base_rate() {
        let met = [true, true, true, false];
        let m = verdict_metrics(&[0.9; 4], &met).unwrap();
        assert_eq!(m.accuracy, 0.75);
        assert_eq!(m.base_rate, 0.75);
        assert_eq!(m.majority_accuracy, 0.75);
        assert_eq!(m.balanced_accuracy, 0.5);
        assert_eq!(m.yes.recall, Some(1.0));
        assert_eq!(m.no.recall, Some(0.0));
        assert_eq!(m.no.precision, None, "it never said NO");
        // Confidence 0.9, right 3 times of 4: |0.75 − 0.9|.
        assert!((m.ece - 0.15).abs() < 1e-12, "{}", m.ece);
    }

    #[test]
    fn per_class_precision_and_recall() {
        // Labels Y Y N N N; verdicts Y N Y N N.
        let m = verdict_metrics(
            &[0.8, 0.3, 0.6, 0.1, 0.2],
            &[true, true, false, false, false],
        )
        .unwrap();
        assert_eq!(m.accuracy, 0.6);
        assert_eq!(m.yes.precision, Some(0.5));
        assert_eq!(m.yes.recall, Some(0.5));
        assert_eq!(m.no.precision, Some(2.0 / 3.0));
        assert_eq!(m.no.recall, Some(2.0 / 3.0));
        assert!((m.balanced_accuracy - (0.5 + 2.0 / 3.0) / 2.0).abs() < 1e-12);
    }

    #[test]
    fn a_calibrated_confident_verifier_has_no_calibration_error() {
        let m = verdict_metrics(&[1.0, 0.0, 1.0], &[true, false, true]).unwrap();
        assert_eq!(m.accuracy, 1.0);
        assert_eq!(m.ece, 0.0);
        assert!(verdict_metrics(&[], &[]).is_none());
    }

    #[test]
    fn the_auc_counts_ordered_pairs_and_ties_half() {
        // Met at 0.9 and 0.4, unmet at 0.6 and 0.1: 3 of 4 pairs ordered.
        let m = verdict_metrics(&[0.9, 0.4, 0.6, 0.1], &[true, true, false, false]).unwrap();
        assert_eq!(m.auc, Some(0.75));
        // A constant verifier ranks nothing: every pair a tie.
        let flat = verdict_metrics(&[0.3; 4], &[true, false, true, false]).unwrap();
        assert_eq!(flat.auc, Some(0.5));
        // Separated at some threshold, though every verdict is NO.
        let low = verdict_metrics(&[0.4, 0.2, 0.1], &[true, false, false]).unwrap();
        assert_eq!((low.auc, low.accuracy), (Some(1.0), 2.0 / 3.0));
    }

    #[test]
    fn one_class_only_leaves_the_other_recall_undefined() {
        let m = verdict_metrics(&[0.2, 0.7], &[false, false]).unwrap();
        assert_eq!(m.yes.recall, None);
        assert_eq!(m.balanced_accuracy, 0.5, "the NO recall alone");
        assert_eq!(m.auc, None);
    }
}
