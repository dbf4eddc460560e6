//! `worked-steps`: a reference-free rubric for the generated arithmetic word
//! problems (host/train's task) solved with worked steps.
//!
//! It reads the prompt (the problem) and the response (step lines
//! `a op b = c`, then `#### N`) and never the reference. Three dimensions —
//! `grounded` (the steps use the problem's quantities), `valid` (each step
//! computes) and `complete` (a marked final answer that follows from the
//! steps) — are each the weighted mean of the sub-criteria the config makes
//! active, drawn from a fixed library ([`criteria::Sub`]). The total is the
//! weighted mean of the dimensions that have an active sub-criterion, or 0
//! when the gate sub-criterion scores below 1.
//!
//! The default config is deliberately loose: it rewards any arithmetically
//! valid chain that ends in its own result, even one that ignores the
//! problem. [`Config::strict`] is the recommended tight judge. A config may
//! also have a judge model answer a YES/NO question per dimension
//! ([`asked`]), one more weighted item of that dimension: a model-backed
//! rubric the judge loop calibrates like the rule-based one.

#![warn(missing_docs)]

pub mod asked;
pub mod config;
pub mod criteria;
pub mod problem;
pub mod response;

use asked::{ASKED_ID, Asked};
pub use config::Config;
use criteria::{Dimension, Facts, Sub, UNPARSED};
use verifine_plugin_api::*;

/// The plugin.
pub struct WorkedSteps;

impl Rubric for WorkedSteps {
    type Config = Config;

    fn describe() -> RubricInfo {
        let defaults = Config::default();
        let info = Sub::ALL.into_iter().fold(
            RubricInfo::new("worked-steps", env!("CARGO_PKG_VERSION")),
            |info, sub| {
                info.criterion(
                    Criterion::new(&sub.criterion_id(), sub.description(), defaults.weight(sub))
                        .in_dimension(sub.dimension().id()),
                )
            },
        );
        Dimension::ALL.into_iter().fold(info, |info, dimension| {
            info.criterion(
                Criterion::new(
                    &asked_criterion(dimension),
                    "A judge model's YES to the dimension's question (config `ask`)",
                    0.0,
                )
                .in_dimension(dimension.id()),
            )
        })
    }

    fn judge(config: &Config, ctx: &Context, sample: &Sample) -> Result<Judgment, String> {
        Self::judge_batch(config, ctx, std::slice::from_ref(sample))
            .pop()
            .expect("one judgment per sample")
    }

    fn judge_batch(
        config: &Config,
        _ctx: &Context,
        samples: &[Sample],
    ) -> Vec<Result<Judgment, String>> {
        samples
            .iter()
            .zip(asked::ask_all(config, samples))
            .map(|(sample, asked)| {
                asked.map(|asked| judge_asked(config, &sample.prompt, &sample.response, &asked))
            })
            .collect()
    }
}

/// `<dimension>/asked-model`.
fn asked_criterion(dimension: Dimension) -> String {
    format!("{}/{ASKED_ID}", dimension.id())
}

/// Judges `response` to `prompt` under `config`, which asks no judge model
/// (its `ask` weights are ignored).
pub fn judge(config: &Config, prompt: &str, response: &str) -> Judgment {
    judge_asked(config, prompt, response, &[None; 3])
}

/// Judges `response` to `prompt` under `config`, with the judge model's
/// answers for the dimensions it was asked about.
pub fn judge_asked(config: &Config, prompt: &str, response: &str, asked: &Asked) -> Judgment {
    let facts = Facts::read(prompt, response);
    let mut verdicts = Vec::new();
    let mut failed = Vec::new();
    let mut dimension_scores = Vec::new();
    for dimension in Dimension::ALL {
        let (mut weighted, mut weights) = (0.0, 0.0);
        for (sub, weight) in config.active_in(dimension) {
            let check = facts.check(sub);
            if check.score < 1.0 && check.note == UNPARSED {
                failed.push(sub.id().to_string());
            } else if check.score < 1.0 {
                failed.push(format!("{} ({})", sub.id(), check.note));
            }
            weighted += weight * check.score;
            weights += weight;
            verdicts.push(Verdict {
                criterion: sub.criterion_id(),
                score: check.score,
                met: Some(check.score >= 1.0),
                confidence: None,
                explanation: Some(check.note),
            });
        }
        let ask_weight = config.ask.weight(dimension);
        if let Some(yes) = asked[dimension as usize].filter(|_| ask_weight > 0.0) {
            if yes < 0.5 {
                failed.push(format!(
                    "{ASKED_ID} on {} (P(YES) {yes:.2})",
                    dimension.id()
                ));
            }
            weighted += ask_weight * yes;
            weights += ask_weight;
            verdicts.push(Verdict {
                criterion: asked_criterion(dimension),
                score: yes,
                met: Some(yes >= 0.5),
                confidence: Some(yes.max(1.0 - yes)),
                explanation: Some(format!(
                    "judge `{}`: P(YES) {yes:.3} to \"{}\"",
                    config.ask.judge,
                    config.ask.question(dimension)
                )),
            });
        }
        if weights > 0.0 {
            dimension_scores.push((dimension, weighted / weights));
        }
    }

    let (mut weighted, mut weights) = (0.0, 0.0);
    for &(dimension, score) in &dimension_scores {
        weighted += config.dimension_weight(dimension) * score;
        weights += config.dimension_weight(dimension);
    }
    let mean = if weights > 0.0 {
        weighted / weights
    } else {
        0.0
    };
    let gate = config.gate.map(|sub| (sub, facts.check(sub)));
    let gate_passed = gate.as_ref().is_none_or(|(_, check)| check.score >= 1.0);
    let total = if gate_passed { mean } else { 0.0 };

    let mut explanation = if failed.is_empty() {
        "all active checks passed".to_string()
    } else {
        format!("failed: {}", failed.join("; "))
    };
    if let Some((sub, check)) = &gate
        && !gate_passed
    {
        explanation = format!(
            "gate {} failed ({}): total 0; {explanation}",
            sub.id(),
            check.note
        );
    }
    if facts.problem.is_none() {
        explanation.push_str("; ");
        explanation.push_str(UNPARSED);
    }

    let mut judgment = Judgment::from_verdicts(verdicts)
        .with_total(Some(total))
        .because(explanation);
    for (dimension, score) in dimension_scores {
        judgment = judgment.with_sub_score(dimension.id(), score);
    }
    if gate.is_some() {
        judgment = judgment.with_sub_score("gate", if gate_passed { 1.0 } else { 0.0 });
    }
    judgment
}

export_plugin!(rubric: WorkedSteps);
export_native_plugin!(rubric: WorkedSteps);

#[cfg(test)]
mod tests {
    use super::*;

    const PROMPT: &str = "Start with 7, then add 5, then multiply by 2. What is the result?";
    const STORY: &str = "Ann has 7 apples. Then Ann gets 5 more apples, then ends up with 2 \
                         times as many apples. How many apples does Ann have now?";
    const CORRECT: &str = "7 + 5 = 12\n12 * 2 = 24\n#### 24";
    const UNGROUNDED: &str = "1 + 1 = 2\n2 * 3 = 6\n#### 6";

    fn total(config: &Config, prompt: &str, response: &str) -> f64 {
        judge(config, prompt, response).total.unwrap()
    }

    fn sub_score(judgment: &Judgment, name: &str) -> Option<f64> {
        judgment
            .sub_scores
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.value)
    }

    #[test]
    fn a_correct_solution_scores_1_under_both_configs() {
        for prompt in [PROMPT, STORY] {
            assert_eq!(total(&Config::default(), prompt, CORRECT), 1.0);
            let strict = judge(&Config::strict(), prompt, CORRECT);
            assert_eq!(strict.total, Some(1.0), "{:?}", strict.explanation);
            assert_eq!(strict.verdicts.len(), Sub::ALL.len());
            assert!(strict.verdicts.iter().all(|v| v.met == Some(true)));
        }
    }

    #[test]
    fn the_loose_default_rewards_an_ungrounded_chain_and_strict_does_not() {
        assert_eq!(total(&Config::default(), PROMPT, UNGROUNDED), 1.0);
        let strict = judge(&Config::strict(), PROMPT, UNGROUNDED);
        // Operations and step count happen to match; the numbers do not.
        assert_eq!(sub_score(&strict, "grounded"), Some(0.5));
        assert!((strict.total.unwrap() - 2.5 / 3.0).abs() < 1e-12);
        assert_eq!(sub_score(&strict, "valid"), Some(1.0));
        assert_eq!(sub_score(&strict, "complete"), Some(1.0));
        assert!(strict.explanation.unwrap().contains("numbers-appear"));
    }

    #[test]
    fn verdicts_and_sub_scores_follow_the_config() {
        let j = judge(
            &Config::default(),
            PROMPT,
            "7 + 5 = 13\n13 * 2 = 26\n#### 26",
        );
        let ids: Vec<&str> = j.verdicts.iter().map(|v| v.criterion.as_str()).collect();
        assert_eq!(
            ids,
            [
                "grounded/has-steps",
                "valid/steps-compute",
                "complete/final-marked",
                "complete/final-follows"
            ]
        );
        let compute = j.verdict("valid/steps-compute").unwrap();
        assert_eq!((compute.score, compute.met), (0.5, Some(false)));
        assert_eq!(sub_score(&j, "valid"), Some(0.5));
        assert_eq!(sub_score(&j, "gate"), Some(1.0));
        assert!((j.total.unwrap() - 2.5 / 3.0).abs() < 1e-12);
        assert!(
            j.explanation
                .unwrap()
                .contains("steps-compute (1/2 steps compute)")
        );
    }

    #[test]
    fn the_gate_removes_all_credit() {
        let j = judge(&Config::default(), PROMPT, "7 + 5 = 12\n12 * 2 = 24");
        assert_eq!(j.total, Some(0.0));
        assert_eq!(sub_score(&j, "gate"), Some(0.0));
        assert_eq!(sub_score(&j, "valid"), Some(1.0));
        assert!(
            j.explanation
                .unwrap()
                .starts_with("gate final-marked failed")
        );
        // Without a gate the same response keeps its partial credit.
        let ungated: Config = serde_json::from_str(r#"{"gate": null}"#).unwrap();
        let j = judge(&ungated, PROMPT, "7 + 5 = 12\n12 * 2 = 24");
        assert_eq!(j.total, Some(2.0 / 3.0));
        assert_eq!(sub_score(&j, "gate"), None);
        // A gate that is not active still gates.
        let gated: Config = serde_json::from_str(r#"{"gate": "chain-continues"}"#).unwrap();
        let broken = "7 + 5 = 12\n7 * 2 = 14\n#### 14";
        assert_eq!(total(&gated, PROMPT, broken), 0.0);
        assert_eq!(total(&Config::default(), PROMPT, broken), 1.0);
    }

    #[test]
    fn weights_and_left_out_dimensions() {
        let config: Config = serde_json::from_str(
            r#"{"grounded": {}, "valid": {"steps-compute": 3, "chain-continues": 1},
                "dimension_weights": {"valid": 3}, "gate": null}"#,
        )
        .unwrap();
        // valid: steps 1/2 compute, chain continues: (3*0.5 + 1*1)/4 = 0.625.
        let j = judge(&config, PROMPT, "7 + 5 = 13\n13 * 2 = 26\n#### 26");
        assert_eq!(sub_score(&j, "grounded"), None);
        assert_eq!(sub_score(&j, "valid"), Some(0.625));
        assert_eq!(sub_score(&j, "complete"), Some(1.0));
        assert!((j.total.unwrap() - (3.0 * 0.625 + 1.0) / 4.0).abs() < 1e-12);
    }

    #[test]
    fn the_reference_is_never_read() {
        let ctx = Context::at_step(0);
        let bare = Sample::new("s", PROMPT, CORRECT);
        let wrong = bare.clone().with_reference("#### 99");
        let a = WorkedSteps::judge(&Config::strict(), &ctx, &bare).unwrap();
        let b = WorkedSteps::judge(&Config::strict(), &ctx, &wrong).unwrap();
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            serde_json::to_value(&b).unwrap()
        );
    }

    #[test]
    fn describe_lists_the_library_with_default_weights() {
        let info = WorkedSteps::describe();
        assert_eq!(info.name, "worked-steps");
        assert_eq!(info.criteria.len(), Sub::ALL.len() + Dimension::ALL.len());
        let c = info
            .criteria
            .iter()
            .find(|c| c.id == "complete/final-follows")
            .unwrap();
        assert_eq!((c.weight, c.dimension.as_str()), (1.0, "complete"));
        let c = info
            .criteria
            .iter()
            .find(|c| c.id == "grounded/numbers-appear")
            .unwrap();
        assert_eq!((c.weight, c.dimension.as_str()), (0.0, "grounded"));
    }

    #[test]
    fn hostile_inputs_never_panic() {
        let big = "9".repeat(1 << 20);
        let many = "1 + 1 = 2\n".repeat(100_000) + "#### 2";
        let wide = format!("{} * {} = 1\n#### 1", i64::MAX, i64::MAX);
        let cases: [(&str, &str); 9] = [
            ("", ""),
            (PROMPT, "####"),
            (PROMPT, "#### \u{1f600}"),
            (PROMPT, &big),
            (&big, CORRECT),
            (PROMPT, &many),
            (PROMPT, &wide),
            (
                "Start with \u{e9}, then add 5.",
                "\u{202e}7 + 5 = 12\n#### 12",
            ),
            ("Ann has 7", "\0\r\n\r\n####-"),
        ];
        for (prompt, response) in cases {
            let j = judge(&Config::strict(), prompt, response);
            let t = j.total.unwrap();
            assert!((0.0..=1.0).contains(&t), "{t}");
            assert!(j.explanation.unwrap().len() < 2000);
            assert!(t < 1.0 || response == CORRECT);
        }
    }
}
