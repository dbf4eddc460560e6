//! `math-answer`: a rule-based outcome reward for math word problems.
//!
//! The final answer is taken from `\boxed{…}`, else `#### N`, else a line
//! starting `A: N`, else the last number in the response; it is compared
//! numerically with the reference (a bare answer or a worked solution ending
//! in `#### N` / `A: N`). Reward = format_weight·format_ok + correct_weight·correct.

#![warn(missing_docs)]

pub mod answer;
mod scan;

use answer::{final_answer, reference_answer, same_number};
use serde::Deserialize;
use verifine_plugin_api::*;

/// Weights of the two criteria (`[rubric.config]` in the run's TOML).
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Weight of `format`: the answer is marked (`\boxed{}`, `####`, `A:`).
    pub format_weight: f64,
    /// Weight of `correct`: the answer equals the reference as a number.
    pub correct_weight: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            format_weight: 0.1,
            correct_weight: 0.9,
        }
    }
}

/// The plugin.
pub struct MathAnswer;

impl Rubric for MathAnswer {
    type Config = Config;
    // Never the prompt: the answer and the reference decide.
    const READS: SampleFields = SampleFields::RESPONSE.union(SampleFields::REFERENCE);

    fn describe() -> RubricInfo {
        let defaults = Config::default();
        RubricInfo::new("math-answer", env!("CARGO_PKG_VERSION"))
            .criterion(
                Criterion::new(
                    "format",
                    "The final answer is marked (\\boxed{}, ####, or A:)",
                    defaults.format_weight,
                )
                .in_dimension("format"),
            )
            .criterion(
                Criterion::new(
                    "correct",
                    "The final answer equals the reference numerically",
                    defaults.correct_weight,
                )
                .in_dimension("outcome"),
            )
    }

    fn judge(config: &Config, _ctx: &Context, sample: &Sample) -> Result<Judgment, String> {
        let reference = sample
            .reference
            .as_deref()
            .ok_or("math-answer needs a reference answer")?;
        let expected = reference_answer(reference)
            .ok_or_else(|| format!("no number in the reference {reference:?}"))?;
        let found = final_answer(&sample.response);
        let format_ok = found.is_some_and(|(marker, _)| marker.is_explicit());
        let correct = found.is_some_and(|(_, value)| same_number(value, expected));

        let explanation = match found {
            Some((marker, value)) => format!(
                "answer {value} (by {}) vs reference {expected}",
                marker.label()
            ),
            None => format!("no answer found; reference {expected}"),
        };
        let total = config.format_weight * f64::from(u8::from(format_ok))
            + config.correct_weight * f64::from(u8::from(correct));
        Ok(Judgment::from_verdicts(vec![
            Verdict::met("format", format_ok),
            Verdict::met("correct", correct),
        ])
        .with_total(Some(total))
        .because(explanation))
    }
}

export_plugin!(rubric: MathAnswer);
export_native_plugin!(rubric: MathAnswer);

#[cfg(test)]
mod tests {
    use super::*;
    use answer::Marker;

    fn value(text: &str) -> Option<f64> {
        final_answer(text).map(|(_, v)| v)
    }

    #[test]
    fn finds_marked_answers_in_priority_order() {
        assert_eq!(
            final_answer("so \\boxed{42}. A: 7"),
            Some((Marker::Boxed, 42.0))
        );
        assert_eq!(
            final_answer("work\n#### 1,234"),
            Some((Marker::Hashes, 1234.0))
        );
        assert_eq!(
            final_answer("x\nA: $18.00."),
            Some((Marker::AnswerPrefix, 18.0))
        );
        assert_eq!(
            final_answer("it is 3 then 5"),
            Some((Marker::LastNumber, 5.0))
        );
        assert_eq!(final_answer("no digits here"), None);
        // Only the last \boxed counts; unbalanced, the next marker decides,
        // even one before it.
        assert_eq!(
            final_answer("#### 5 \\boxed{7} \\boxed{8\nA: 9"),
            Some((Marker::Hashes, 5.0))
        );
        assert_eq!(
            final_answer("x\n  Answer: 4\nA 3\nwell A: 2"),
            Some((Marker::AnswerPrefix, 4.0))
        );
    }

    #[test]
    fn reads_signs_percentages_and_fractions() {
        assert_eq!(value("#### -5"), Some(-5.0));
        assert_eq!(value("#### 12%"), Some(12.0));
        assert_eq!(value("\\boxed{\\frac{3}{4}}"), Some(0.75));
        assert_eq!(value("\\boxed{-\\dfrac{1}{2}}"), Some(-0.5));
        assert_eq!(value("A: 3/4 of a pie"), Some(0.75));
        assert_eq!(value("#### $1,000,000"), Some(1_000_000.0));
        assert_eq!(value("#### .5"), Some(0.5));
        assert_eq!(value("A: 5-3 is not a sign"), Some(5.0));
    }

    #[test]
    fn ignores_calculator_annotations_in_the_fallback() {
        assert_eq!(value("16-3 = <<16-3=13>>13 eggs"), Some(13.0));
    }

    #[test]
    fn reference_may_be_bare_or_worked() {
        assert_eq!(reference_answer("18"), Some(18.0));
        assert_eq!(reference_answer("$1,200"), Some(1200.0));
        assert_eq!(reference_answer("9 * 2 = <<9*2=18>>18\nA: 18"), Some(18.0));
        assert_eq!(reference_answer("steps\n#### 72"), Some(72.0));
    }

    #[test]
    fn reward_weights_format_and_correctness() {
        let ctx = Context::at_step(0);
        let config = Config::default();
        let judge = |response: &str| {
            let sample = Sample::new("s", "q", response).with_reference("#### 18");
            MathAnswer::judge(&config, &ctx, &sample)
                .unwrap()
                .total
                .unwrap()
        };
        assert!((judge("A: 18") - 1.0).abs() < 1e-12);
        assert!((judge("A: 17") - 0.1).abs() < 1e-12);
        assert!((judge("I think 18") - 0.9).abs() < 1e-12);
        assert_eq!(judge("no idea"), 0.0);
    }

    #[test]
    fn missing_reference_is_an_error() {
        let sample = Sample::new("s", "q", "A: 1");
        let err = MathAnswer::judge(&Config::default(), &Context::at_step(0), &sample);
        assert!(err.unwrap_err().contains("reference"));
    }
}
