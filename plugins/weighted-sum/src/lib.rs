//! `weighted-sum`: the default aggregator.
//!
//! reward = Σ weight·score / Σ positive weights, clamped to [0, 1]. Negative
//! weights penalize; a criterion without a verdict counts as score 0. With no
//! positive weight the reward is undefined (none), as HealthBench rules.

#![warn(missing_docs)]

use verifine_plugin_api::*;

/// The plugin.
pub struct WeightedSum;

impl Aggregator for WeightedSum {
    type Config = NoConfig;

    fn aggregate(_: &NoConfig, _: &Context, item: &Scoring) -> Result<Option<f64>, String> {
        let positive: f64 = item.criteria.iter().map(|c| c.weight.max(0.0)).sum();
        if positive <= 0.0 {
            return Ok(None);
        }
        let mut sum = 0.0;
        for verdict in &item.judgment.verdicts {
            let weight = item
                .weight_of(&verdict.criterion)
                .ok_or_else(|| format!("verdict on unknown criterion {:?}", verdict.criterion))?;
            if !verdict.score.is_finite() {
                return Err(format!("non-finite score for {:?}", verdict.criterion));
            }
            sum += weight * verdict.score;
        }
        Ok(Some((sum / positive).clamp(0.0, 1.0)))
    }
}

export_plugin!(aggregator: WeightedSum);

#[cfg(test)]
mod tests {
    use super::*;

    fn scoring(weights: &[f64], scores: &[f64]) -> Scoring {
        let criteria = weights
            .iter()
            .enumerate()
            .map(|(i, w)| Criterion::new(&format!("c{i}"), "", *w))
            .collect();
        let verdicts = scores
            .iter()
            .enumerate()
            .map(|(i, s)| Verdict::scored(&format!("c{i}"), *s))
            .collect();
        Scoring {
            criteria,
            judgment: Judgment::from_verdicts(verdicts),
        }
    }

    fn reward(weights: &[f64], scores: &[f64]) -> Result<Option<f64>, String> {
        WeightedSum::aggregate(
            &NoConfig {},
            &Context::at_step(0),
            &scoring(weights, scores),
        )
    }

    #[test]
    fn divides_by_positive_weights_only() {
        // (7 + 10 - 6) / 22 = 0.5
        assert_eq!(
            reward(&[7.0, 5.0, 10.0, -6.0], &[1.0, 0.0, 1.0, 1.0]),
            Ok(Some(0.5))
        );
    }

    #[test]
    fn clamps_to_unit_interval() {
        assert_eq!(reward(&[1.0, -5.0], &[0.0, 1.0]), Ok(Some(0.0)));
    }

    #[test]
    fn undefined_without_positive_weight() {
        assert_eq!(reward(&[-1.0], &[1.0]), Ok(None));
    }

    #[test]
    fn refuses_verdicts_on_unknown_criteria() {
        let mut item = scoring(&[1.0], &[1.0]);
        item.judgment.verdicts[0].criterion = "nope".into();
        assert!(WeightedSum::aggregate(&NoConfig {}, &Context::at_step(0), &item).is_err());
    }
}
