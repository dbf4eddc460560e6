//! Reading a server's answer to a query with choices: which choice it
//! names, and how sure the model was of it.

use verifine_runtime::judge_models::{ModelAnswer, ModelError, TokenLogprob};

/// An answer to a query with choices, as exactly one of them: the text
/// (or the JSON string an HTTP server was asked for, also inside a
/// markdown code fence or with its closing quote lost, as small models
/// and llama-server give it), trimmed and compared
/// without case. Anything else is the query's failure.
pub(crate) fn pick_choice(
    mut answer: ModelAnswer,
    choices: &[String],
) -> std::result::Result<ModelAnswer, ModelError> {
    if choices.is_empty() {
        return Ok(answer);
    }
    let text = answer.text.trim();
    let unfenced = text
        .strip_prefix("```")
        .and_then(|t| t.strip_suffix("```"))
        .map_or(text, |t| t.trim_start_matches("json").trim());
    // A quote left open (the server's parser took the fence's end and the
    // quote with it) still names the choice.
    let unquoted = serde_json::from_str::<String>(unfenced)
        .unwrap_or_else(|_| unfenced.trim_matches('"').to_string());
    let unquoted = unquoted.trim();
    match choices.iter().find(|c| c.eq_ignore_ascii_case(unquoted)) {
        Some(choice) => {
            answer.text = choice.clone();
            answer.logprobs = choice_confidence(&answer.logprobs, choice, choices);
            Ok(answer)
        }
        None => Err(ModelError::BadAnswer(format!(
            "the answer {:?} is none of the choices {choices:?}",
            verifine_base::text::sanitize(text, 80)
        ))),
    }
}

/// The log-probabilities of a constrained answer as a local judge gives
/// them: one entry, the choices' probabilities at the token where they
/// part ways (a server's answer starts with the quote of a JSON string,
/// whose probability is 1), renormalized over the choices, so `exp` of the
/// chosen one is the verdict's confidence. Empty (no confidence) when the
/// server's log-probabilities do not cover every choice at that token.
fn choice_confidence(
    logprobs: &[TokenLogprob],
    chosen: &str,
    choices: &[String],
) -> Vec<TokenLogprob> {
    let matches = |token: &str, choice: &str| {
        let token = token.trim().trim_matches('"');
        !token.is_empty() && choice.to_lowercase().starts_with(&token.to_lowercase())
    };
    let Some(step) = logprobs.iter().find(|t| matches(&t.token, chosen)) else {
        return Vec::new();
    };
    // A server reports the top tokens before its grammar masks them: a
    // choice missing there has no probability to compare, and then no
    // confidence is claimed.
    let candidates: Vec<(&str, f64)> = std::iter::once((step.token.as_str(), step.logprob))
        .chain(step.top.iter().map(|(t, lp)| (t.as_str(), *lp)))
        .collect();
    let scored: Vec<(String, f64)> = choices
        .iter()
        .map(|choice| {
            let best = candidates
                .iter()
                .filter(|(token, _)| matches(token, choice))
                .map(|(_, lp)| *lp)
                .fold(f64::NEG_INFINITY, f64::max);
            (choice.clone(), best)
        })
        .collect();
    if scored.iter().any(|(_, lp)| !lp.is_finite()) {
        return Vec::new();
    }
    let max = scored
        .iter()
        .map(|(_, lp)| *lp)
        .fold(f64::NEG_INFINITY, f64::max);
    let norm = max
        + scored
            .iter()
            .map(|(_, lp)| (lp - max).exp())
            .sum::<f64>()
            .ln();
    let mut top: Vec<(String, f64)> = scored.into_iter().map(|(c, lp)| (c, lp - norm)).collect();
    top.sort_by(|a, b| b.1.total_cmp(&a.1));
    let logprob = top
        .iter()
        .find(|(c, _)| c == chosen)
        .map_or(f64::NEG_INFINITY, |(_, lp)| *lp);
    vec![TokenLogprob {
        token: chosen.to_string(),
        logprob,
        top,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_choice_is_read_bare_quoted_or_fenced_and_nothing_else() {
        let choices = ["YES".to_string(), "NO".to_string()];
        let answer = |text: &str| ModelAnswer {
            text: text.into(),
            logprobs: Vec::new(),
            usage: verifine_runtime::judge_models::TokenUsage::default(),
            model: "m".into(),
            seconds: 0.0,
            cached: false,
        };
        for text in [
            "YES",
            " yes\n",
            "\"YES\"",
            "```json\n  \"YES\"\n```",
            "```\"yes\"```",
        ] {
            assert_eq!(
                pick_choice(answer(text), &choices).unwrap().text,
                "YES",
                "{text:?}"
            );
        }
        for text in [
            "",
            " \n \t",
            "```json\n\"YES",
            "YES NO",
            "```YES",
            "\"YESNO\"",
        ] {
            assert!(pick_choice(answer(text), &choices).is_err(), "{text:?}");
        }
    }

    fn step(token: &str, logprob: f64, top: &[(&str, f64)]) -> TokenLogprob {
        TokenLogprob {
            token: token.into(),
            logprob,
            top: top.iter().map(|(t, lp)| (t.to_string(), *lp)).collect(),
        }
    }

    #[test]
    fn a_servers_quoted_choice_gets_the_confidence_where_the_choices_part() {
        let choices = ["YES".to_string(), "NO".to_string()];
        // `"` then `YES`: the quote is certain; YES and NO compete after it.
        let answer = [
            step("\"", 0.0, &[("\"", 0.0)]),
            step(
                "YES",
                -0.5,
                &[("YES", -0.5), (" NO", -1.5), ("maybe", -2.0)],
            ),
            step("\"", 0.0, &[]),
        ];
        let confidence = choice_confidence(&answer, "YES", &choices);
        let p = confidence[0].logprob.exp();
        let expected = (-0.5f64).exp() / ((-0.5f64).exp() + (-1.5f64).exp());
        assert!((p - expected).abs() < 1e-12, "{p} vs {expected}");
        assert_eq!(confidence[0].top[1].0, "NO");
    }

    #[test]
    fn no_confidence_is_claimed_when_a_choice_is_missing_from_the_top_tokens() {
        let choices = ["YES".to_string(), "NO".to_string()];
        let answer = [step("N", -8.1, &[(" to", -0.8), ("$", -1.2)])];
        assert!(choice_confidence(&answer, "NO", &choices).is_empty());
    }
}
