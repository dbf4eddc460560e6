//! `healthbench`: HealthBench-style rubric scoring.
//!
//! Each data row carries its own rubric items `{criterion, points, tags}` in
//! the sample's context. An item is met per a verdict in the context (`met` on
//! the item, or a parallel `verdicts` list) or per the judge model, asked with
//! HealthBench's grader template, `batch` items per query (config, default 3;
//! `batch = 1` asks for an explanation with each verdict).
//!
//! score = Σ points of met items / Σ positive points — not clipped per sample,
//! and none when no item has positive points (HealthBench's own rule; the
//! dataset-level mean is clipped to [0, 1] by the host's report).

#![warn(missing_docs)]

use verifine_plugin_api::row_rubric::{Grader, RowRubricConfig, judge_row_rubric};
use verifine_plugin_api::*;

/// The plugin.
pub struct HealthBench;

/// Σ points of met items / Σ positive points; `None` without positive points.
pub fn score(points: &[f64], met: &[bool]) -> Option<f64> {
    let positive: f64 = points.iter().filter(|p| **p > 0.0).sum();
    if positive <= 0.0 {
        return None;
    }
    let achieved: f64 = points
        .iter()
        .zip(met)
        .filter(|(_, met)| **met)
        .map(|(p, _)| p)
        .sum();
    Some(achieved / positive)
}

impl Rubric for HealthBench {
    type Config = RowRubricConfig;

    fn describe() -> RubricInfo {
        // Criteria come with each data row; see `Judgment::criteria`.
        RubricInfo::new("healthbench", env!("CARGO_PKG_VERSION"))
    }

    fn judge(config: &RowRubricConfig, _: &Context, sample: &Sample) -> Result<Judgment, String> {
        let row = judge_row_rubric(sample, &Grader::conversation().configured(config)?)?;
        let met = &row.met;
        let total = score(&row.points, met);
        let explanation = match total {
            Some(_) => format!(
                "{} of {} items met{}",
                met.iter().filter(|m| **m).count(),
                met.len(),
                row.unjudged_note()
            ),
            None => format!(
                "no rubric item has positive points: score undefined{}",
                row.unjudged_note()
            ),
        };
        Ok(Judgment::from_verdicts(row.verdicts)
            .with_total(total)
            .with_criteria(row.criteria)
            .because(explanation))
    }
}

export_plugin!(rubric: HealthBench);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_vector_from_the_healthbench_rules() {
        assert_eq!(
            score(&[7.0, 5.0, 10.0, -6.0], &[true, false, true, true]),
            Some(0.5)
        );
    }

    #[test]
    fn not_clipped_per_sample() {
        assert_eq!(score(&[2.0, -6.0], &[false, true]), Some(-3.0));
    }

    #[test]
    fn undefined_without_positive_points() {
        assert_eq!(score(&[-1.0, -2.0], &[true, false]), None);
    }
}
