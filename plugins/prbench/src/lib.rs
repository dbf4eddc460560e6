//! `prbench`: PRBench-style scoring of signed rubric items.
//!
//! With points = Σ weights of met items, Σpos the sum of positive weights and
//! Σneg the sum of negative ones (≤ 0):
//! normalized = (points − Σneg) / (Σpos − Σneg), in [0, 1]; ratio = points / Σpos.
//! Both are reported as sub-scores; `normalized` is the total.
//!
//! Items come from the sample's context (`{"rubrics": [{criterion, points, tags, met}]}`
//! or a parallel `verdicts` list), verdicts from the context or the judge model.

#![warn(missing_docs)]

use verifine_plugin_api::row_rubric::{Grader, RowRubricConfig, judge_row_rubric};
use verifine_plugin_api::*;

/// PRBench's grader: a professional task and its response.
fn task_grader() -> Grader {
    Grader {
        introduction: "Your job is to look at a professional task, its response and rubric \
            items, and decide for each rubric item whether the response meets it.",
        heading: "Task",
        ..Grader::conversation()
    }
}

/// Normalized and ratio scores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrScores {
    /// The met points shifted by the penalties' total and divided by the
    /// rubric's span (Σ positive + Σ |negative|): 1 for every positive item
    /// and no penalty, 0 for every penalty and no positive item.
    pub normalized: f64,
    /// The met points (penalties met subtract) over Σ positive points;
    /// `None` for a rubric without positive points.
    pub ratio: Option<f64>,
}

/// The two PRBench scores; `None` when the rubric has no spread (Σpos = Σneg = 0).
pub fn scores(points: &[f64], met: &[bool]) -> Option<PrScores> {
    let positive: f64 = points.iter().filter(|p| **p > 0.0).sum();
    let negative: f64 = points.iter().filter(|p| **p < 0.0).sum();
    let achieved: f64 = points
        .iter()
        .zip(met)
        .filter(|(_, m)| **m)
        .map(|(p, _)| p)
        .sum();
    let span = positive - negative;
    if span <= 0.0 {
        return None;
    }
    Some(PrScores {
        normalized: (achieved - negative) / span,
        ratio: (positive > 0.0).then(|| achieved / positive),
    })
}

/// The plugin.
pub struct PrBench;

impl Rubric for PrBench {
    type Config = RowRubricConfig;

    fn describe() -> RubricInfo {
        RubricInfo::new("prbench", env!("CARGO_PKG_VERSION"))
    }

    fn judge(config: &RowRubricConfig, _: &Context, sample: &Sample) -> Result<Judgment, String> {
        let row = judge_row_rubric(sample, &task_grader().configured(config)?)?;
        let unjudged = row.unjudged_note();
        let mut judgment = Judgment::from_verdicts(row.verdicts).with_criteria(row.criteria);
        match scores(&row.points, &row.met) {
            Some(s) => {
                judgment = judgment
                    .with_total(Some(s.normalized))
                    .with_sub_score("normalized", s.normalized);
                if let Some(ratio) = s.ratio {
                    judgment = judgment.with_sub_score("ratio", ratio);
                }
            }
            None => {
                judgment = judgment.because(format!(
                    "rubric has no weighted items: score undefined{unjudged}"
                ));
            }
        }
        if !unjudged.is_empty() && judgment.explanation.is_none() {
            judgment = judgment.because(unjudged.trim_start_matches("; ").to_string());
        }
        Ok(judgment)
    }
}

export_plugin!(rubric: PrBench);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalized_and_ratio() {
        // points = 7 + 10 - 6 = 11, Σpos = 22, Σneg = -6
        let s = scores(&[7.0, 5.0, 10.0, -6.0], &[true, false, true, true]).unwrap();
        assert!((s.normalized - 17.0 / 28.0).abs() < 1e-12);
        assert_eq!(s.ratio, Some(0.5));
    }

    #[test]
    fn all_penalties_met_is_zero() {
        let s = scores(&[3.0, -2.0], &[false, true]).unwrap();
        assert_eq!(s.normalized, 0.0);
        assert!((s.ratio.unwrap() + 2.0 / 3.0).abs() < 1e-12);
    }
}
