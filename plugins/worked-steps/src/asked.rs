//! Dimensions a judge model is asked about (the host's `ask-judges`): per
//! dimension, one YES/NO question about the whole solution, whose
//! probability of YES joins that dimension's sub-criteria as one more
//! weighted item (criterion `<dimension>/asked-model`). The questions are
//! part of the config, so a judge revision may reword them as well as
//! reweigh them; the host caches answers, so re-scoring under other weights
//! asks nothing again.

use crate::config::Config;
use crate::criteria::Dimension;
use verifine_plugin_api::{JudgeAnswer, JudgeQuery, Sample, ask_judges};

/// The sub-criterion id of a dimension's model verdict.
pub const ASKED_ID: &str = "asked-model";

/// Per dimension (in [`Dimension::ALL`] order), the model's probability of
/// YES for one sample; `None` where the dimension is not asked.
pub type Asked = [Option<f64>; 3];

const SYSTEM: &str = "You check worked solutions to arithmetic word problems. \
                      Answer with YES or NO only.";

/// The question a dimension is asked when the config gives none.
pub fn default_question(dimension: Dimension) -> &'static str {
    match dimension {
        Dimension::Grounded => {
            "Does every step use only numbers stated in the problem or results of earlier \
             steps, applying the problem's operations in order?"
        }
        Dimension::Valid => "Is the arithmetic of every step correct?",
        Dimension::Complete => {
            "Does the solution end with a final line `#### N` where N is the result of the \
             last step?"
        }
    }
}

/// Asks the configured judge every asked dimension of every sample, in one
/// call; a sample whose answers failed gets the error.
pub fn ask_all(config: &Config, samples: &[Sample]) -> Vec<Result<Asked, String>> {
    let dimensions: Vec<Dimension> = Dimension::ALL
        .into_iter()
        .filter(|&d| config.ask.weight(d) > 0.0)
        .collect();
    if dimensions.is_empty() {
        return vec![Ok([None; 3]); samples.len()];
    }
    let queries: Vec<JudgeQuery> = samples
        .iter()
        .flat_map(|sample| {
            dimensions
                .iter()
                .map(move |&d| query(config, d, &sample.prompt, &sample.response))
        })
        .collect();
    let mut answers = ask_judges(&queries).into_iter();
    samples
        .iter()
        .map(|_| {
            let mut asked: Asked = [None; 3];
            let mut failure = None;
            for &dimension in &dimensions {
                match answers.next() {
                    Some(Ok(answer)) => asked[dimension as usize] = Some(yes_probability(&answer)),
                    Some(Err(e)) => {
                        failure.get_or_insert(format!(
                            "judge `{}` on {}: {e}",
                            config.ask.judge,
                            dimension.id()
                        ));
                    }
                    None => {
                        failure.get_or_insert("the host answered fewer queries than asked".into());
                    }
                }
            }
            failure.map_or(Ok(asked), Err)
        })
        .collect()
}

/// The query for one dimension of one sample: greedy, one token, YES or NO.
pub fn query(config: &Config, dimension: Dimension, prompt: &str, response: &str) -> JudgeQuery {
    let question = config.ask.question(dimension);
    JudgeQuery::new(
        format!(
            "Problem:\n{prompt}\n\nSolution:\n{response}\n\nQuestion: {question}\n\
             Answer YES or NO."
        ),
        1,
    )
    .to_judge(config.ask.judge.clone())
    .with_system(SYSTEM)
    .with_temperature(0.0)
    .choosing(&["YES", "NO"])
}

/// P(YES) renormalised over YES and NO when the answer has both
/// probabilities; else 1 for a YES answer and 0 for anything else.
pub fn yes_probability(answer: &JudgeAnswer) -> f64 {
    match (answer.probability_of("YES"), answer.probability_of("NO")) {
        (Some(yes), Some(no)) if yes + no > 0.0 => yes / (yes + no),
        (Some(yes), None) => yes,
        _ => f64::from(u8::from(answer.text.trim().eq_ignore_ascii_case("YES"))),
    }
}

/// Which dimensions the judge model is asked about (`ask` in the config):
/// `{"judge": "judge", "grounded": 1.0, "questions": {"grounded": "…"}}`.
/// A dimension's weight is that of its model verdict among its active
/// sub-criteria; 0 (the default) asks nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    /// The host's judge to ask (`judge` by default).
    pub judge: String,
    /// Per dimension, in [`Dimension::ALL`] order.
    pub weights: [f64; 3],
    /// Per dimension, a question replacing [`default_question`].
    pub questions: [Option<String>; 3],
}

impl Default for Ask {
    fn default() -> Self {
        Ask {
            judge: "judge".to_string(),
            weights: [0.0; 3],
            questions: [None, None, None],
        }
    }
}

impl Ask {
    /// The weight of `dimension`'s model verdict (0: not asked).
    pub fn weight(&self, dimension: Dimension) -> f64 {
        self.weights[dimension as usize]
    }

    /// The question `dimension` is asked.
    pub fn question(&self, dimension: Dimension) -> &str {
        self.questions[dimension as usize]
            .as_deref()
            .unwrap_or_else(|| default_question(dimension))
    }
}

/// `ask` as written.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RawAsk {
    judge: Option<String>,
    grounded: f64,
    valid: f64,
    complete: f64,
    questions: std::collections::BTreeMap<String, String>,
}

impl TryFrom<RawAsk> for Ask {
    type Error = String;

    fn try_from(raw: RawAsk) -> Result<Ask, String> {
        let weights = [raw.grounded, raw.valid, raw.complete];
        for (dimension, weight) in Dimension::ALL.into_iter().zip(weights) {
            crate::config::check_weight(&format!("ask.{}", dimension.id()), weight)?;
        }
        let mut questions = [None, None, None];
        for (key, question) in raw.questions {
            let dimension = Dimension::ALL
                .into_iter()
                .find(|d| d.id() == key)
                .ok_or_else(|| {
                    format!("ask.questions: `{key}` is not a dimension (grounded, valid, complete)")
                })?;
            if question.trim().is_empty() {
                return Err(format!("ask.questions.{key} is empty"));
            }
            questions[dimension as usize] = Some(question);
        }
        let judge = raw.judge.unwrap_or_else(|| "judge".to_string());
        if judge.is_empty() {
            return Err("ask.judge is empty".to_string());
        }
        Ok(Ask {
            judge,
            weights,
            questions,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge_asked;
    use serde_json::json;
    use verifine_plugin_api::TokenUsage;

    const PROMPT: &str = "Start with 7, then add 5, then multiply by 2. What is the result?";
    const UNGROUNDED: &str = "1 + 1 = 2\n2 * 3 = 6\n#### 6";

    fn parse(value: serde_json::Value) -> Result<Config, String> {
        serde_json::from_value(value).map_err(|e| e.to_string())
    }

    fn answer(text: &str, top: &[(&str, f64)]) -> JudgeAnswer {
        JudgeAnswer {
            text: text.into(),
            logprobs: vec![verifine_plugin_api::TokenLogprob {
                token: text.into(),
                logprob: 0.0,
                top: top.iter().map(|(t, p)| (t.to_string(), p.ln())).collect(),
            }],
            usage: TokenUsage {
                input: 0,
                cached_input: 0,
                output: 0,
            },
            model: "m".into(),
            seconds: 0.0,
            cached: false,
        }
    }

    #[test]
    fn an_asked_dimension_weighs_the_models_yes_among_its_checks() {
        let config = parse(json!({"ask": {"grounded": 1.0}})).unwrap();
        assert_eq!(config.ask.weights, [1.0, 0.0, 0.0]);
        // has-steps passes (1.0); the model says 0.2 → grounded 0.6.
        let j = judge_asked(&config, PROMPT, UNGROUNDED, &[Some(0.2), None, None]);
        let grounded = j.sub_scores.iter().find(|s| s.name == "grounded").unwrap();
        assert!((grounded.value - 0.6).abs() < 1e-12);
        let verdict = j.verdict("grounded/asked-model").unwrap();
        assert_eq!((verdict.score, verdict.met), (0.2, Some(false)));
        assert!(j.explanation.unwrap().contains("asked-model on grounded"));
        // A dimension the config does not ask is not weighed, whatever came back.
        let unasked = judge_asked(&Config::default(), PROMPT, UNGROUNDED, &[Some(0.0); 3]);
        assert_eq!(unasked.total, Some(1.0));
    }

    #[test]
    fn a_dimension_with_only_the_model_counts() {
        let config = parse(json!({"grounded": {}, "ask": {"grounded": 2.0}})).unwrap();
        let j = judge_asked(&config, PROMPT, UNGROUNDED, &[Some(1.0), None, None]);
        assert_eq!(j.total, Some(1.0));
        assert!(parse(json!({"grounded": {}, "valid": {}, "complete": {}})).is_err());
        assert!(
            parse(json!({"grounded": {}, "valid": {}, "complete": {}, "ask": {"valid": 1.0}}))
                .is_ok()
        );
    }

    #[test]
    fn bad_ask_tables_are_refused_with_the_key() {
        for (ask, needle) in [
            (json!({"grounded": -1.0}), "ask.grounded"),
            (
                json!({"questions": {"style": "Nice?"}}),
                "`style` is not a dimension",
            ),
            (
                json!({"questions": {"valid": "  "}}),
                "ask.questions.valid is empty",
            ),
            (json!({"judge": ""}), "ask.judge is empty"),
            (json!({"model": "x"}), "unknown field"),
        ] {
            let err = parse(json!({"ask": ask})).unwrap_err();
            assert!(err.contains(needle), "{err}");
        }
        let worded = parse(json!({"ask": {"valid": 1.0, "judge": "golden-1",
            "questions": {"valid": "Right?"}}}))
        .unwrap();
        let query = query(&worded, Dimension::Valid, PROMPT, UNGROUNDED);
        assert_eq!(query.judge.as_deref(), Some("golden-1"));
        assert!(query.prompt.contains("Question: Right?") && query.prompt.contains(UNGROUNDED));
        assert_eq!(query.choices, ["YES", "NO"]);
    }

    #[test]
    fn yes_is_renormalised_over_the_two_choices() {
        let p = yes_probability(&answer("NO", &[("YES", 0.2), ("NO", 0.6)]));
        assert!((p - 0.25).abs() < 1e-12);
        assert_eq!(yes_probability(&answer("yes", &[])), 1.0);
        assert_eq!(yes_probability(&answer("maybe", &[])), 0.0);
    }
}
