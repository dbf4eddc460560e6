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

criteria! {
    /// What math-answer judges.
    pub enum Checks {
        /// The response ends with a recognizable final answer.
        Format = "format",
        /// The answer equals the reference as a number.
        Correct = "correct",
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
                    &Checks::Format,
                    "The final answer is marked (\\boxed{}, ####, or A:)",
                    defaults.format_weight,
                )
                .in_dimension("format"),
            )
            .criterion(
                Criterion::new(
                    &Checks::Correct,
                    "The final answer equals the reference numerically",
                    defaults.correct_weight,
                )
                .in_dimension("outcome"),
            )
    }

    fn judge(config: &Config, _ctx: &Context, sample: &Sample) -> Result<Judgment, String> {
        let assessed = Assessed::of(config, &sample.response, sample.reference.as_deref())?;
        Ok(Judgment::from_verdicts(vec![
            Verdict::met(&Checks::Format, assessed.format_ok),
            Verdict::met(&Checks::Correct, assessed.correct),
        ])
        .with_total(Some(assessed.total))
        .because({
            let mut text = String::with_capacity(64);
            assessed.explain(&mut ExplanationText::appending_to(&mut text));
            text
        }))
    }
}

// The fast path (what the component runs): the sample read in place, the
// judgment written in place. The owned path above is the same judgment.
impl RubricInPlace for MathAnswer {
    fn judge_in_place(
        config: &Config,
        _ctx: &Context,
        sample: &SampleView<'_>,
        out: &mut JudgmentWriter<'_>,
    ) -> Result<(), String> {
        let assessed = Assessed::of(config, sample.response, sample.reference)?;
        out.total(assessed.total)
            .verdict(VerdictRef::met(&Checks::Format, assessed.format_ok))
            .verdict(VerdictRef::met(&Checks::Correct, assessed.correct))
            .explain_with(|text| assessed.explain(text));
        Ok(())
    }
}

/// What the rule finds in one response, before it is written either way.
struct Assessed {
    found: Option<(answer::Marker, f64)>,
    expected: f64,
    format_ok: bool,
    correct: bool,
    total: f64,
}

impl Assessed {
    fn of(config: &Config, response: &str, reference: Option<&str>) -> Result<Self, String> {
        let reference = reference.ok_or("math-answer needs a reference answer")?;
        let expected = reference_answer(reference)
            .ok_or_else(|| format!("no number in the reference {reference:?}"))?;
        let found = final_answer(response);
        let format_ok = found.is_some_and(|(marker, _)| marker.is_explicit());
        let correct = found.is_some_and(|(_, value)| same_number(value, expected));
        let total = config.format_weight * f64::from(u8::from(format_ok))
            + config.correct_weight * f64::from(u8::from(correct));
        Ok(Assessed {
            found,
            expected,
            format_ok,
            correct,
            total,
        })
    }

    /// The explanation, written piece by piece where it goes (no String
    /// between on the fast path, no `core::fmt` on either).
    fn explain(&self, text: &mut ExplanationText<'_>) {
        match self.found {
            Some((marker, value)) => text
                .push_str("answer ")
                .push_number(value)
                .push_str(" (by ")
                .push_str(marker.label())
                .push_str(") vs reference "),
            None => text.push_str("no answer found; reference "),
        }
        .push_number(self.expected);
    }
}

#[cfg(not(feature = "owned-path"))]
export_plugin!(rubric_in_place: MathAnswer);
#[cfg(feature = "owned-path")]
export_plugin!(rubric: MathAnswer);
export_native_plugin!(rubric_in_place: MathAnswer);

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
    fn the_fast_path_judges_as_the_owned_path_does() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/data/gsm8k/model_solutions.jsonl"
        );
        let mut cases: Vec<(String, Option<String>)> = vec![
            ("A: 18".into(), Some("#### 18".into())),
            (
                "\\boxed{-\\frac{1}{2}} or 1e300".into(),
                Some("-0.5".into()),
            ),
            ("no digits".into(), Some("A: 0".into())),
            ("#### 5".into(), None),
            ("#### 5".into(), Some("no number".into())),
            ("ünïcode 1,234.5 — A: -0".into(), Some("#### 0".into())),
        ];
        // The shared data sits beside the clone (as on CI); without it this
        // test fails rather than passing on the cases above alone.
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("{path}: {e} (shared/data beside the clone)"));
        for line in text.lines().take(100) {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            for key in ["6b_finetuning", "175b_verification"] {
                let solution = row[key]["solution"].as_str().unwrap().to_string();
                cases.push((solution, row["ground_truth"].as_str().map(str::to_string)));
            }
        }
        let config = Config {
            format_weight: 0.3,
            correct_weight: 0.7,
        };
        let ctx = Context::at_step(0);
        for (response, reference) in cases {
            let mut sample = Sample::new("s", "q", &response);
            sample.reference = reference;
            let owned = MathAnswer::judge(&config, &ctx, &sample);
            let in_place = judge_owned::<MathAnswer>(&config, &ctx, &sample);
            assert_eq!(
                postcard::to_stdvec(&owned).unwrap(),
                postcard::to_stdvec(&in_place).unwrap(),
                "{response:?}"
            );
        }
    }

    #[test]
    fn missing_reference_is_an_error() {
        let sample = Sample::new("s", "q", "A: 1");
        let err = MathAnswer::judge(&Config::default(), &Context::at_step(0), &sample);
        assert!(err.unwrap_err().contains("reference"));
    }
}
