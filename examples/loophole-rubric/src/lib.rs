//! `answer-mentioned`: a deliberately loose arithmetic rubric for the
//! hot-swap walkthrough. A response counts as correct when the reference
//! answer appears in it anywhere — so a response that mentions the right
//! number in passing but ends on a wrong `#### N` is still rewarded. That is
//! the loophole `examples/loophole-agent` fixes.

use verifine_plugin_api::*;

/// The plugin.
pub struct AnswerMentioned;

impl Rubric for AnswerMentioned {
    type Config = NoConfig;

    fn describe() -> RubricInfo {
        RubricInfo::new("answer-mentioned", env!("CARGO_PKG_VERSION")).criterion(Criterion::new(
            "correct",
            "The response gives the reference answer",
            1.0,
        ))
    }

    fn judge(_: &NoConfig, _: &Context, sample: &Sample) -> Result<Judgment, String> {
        let reference = sample.reference.as_deref().ok_or("no reference answer")?;
        let answer = final_answer(reference).ok_or("the reference has no #### answer")?;
        let correct = accepted(&sample.response, &answer);
        let total = if correct { 1.0 } else { 0.0 };
        Ok(Judgment::from_verdicts(vec![Verdict::met("correct", correct)]).with_total(Some(total)))
    }
}

/// The number after the last `####`, if any.
pub fn final_answer(text: &str) -> Option<String> {
    let (_, after) = text.rsplit_once("####")?;
    numbers(after).next()
}

/// The integers in `text`, in order.
pub fn numbers(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !(c.is_ascii_digit() || c == '-'))
        .map(|t| t.trim_start_matches('-').to_string())
        .filter(|t| !t.is_empty())
}

/// Whether `response` gives `answer`.
pub fn accepted(response: &str, answer: &str) -> bool {
    // verifine-agent:begin accepted
    numbers(response).any(|n| n == answer)
    // verifine-agent:end accepted
}

export_plugin!(rubric: AnswerMentioned);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loophole_rewards_a_mention_of_the_answer() {
        assert!(accepted("3 + 4 = 7\n#### 7", "7"));
        assert!(accepted("I guessed 7.\n#### 9", "7"), "the loophole");
        assert!(!accepted("#### 9", "7"));
        assert_eq!(final_answer("a\n#### 12"), Some("12".to_string()));
    }
}
