//! A rubric built against contract 0.2 directly with wit-bindgen (the SDK
//! moves on with the contract; this crate never does). It reads every field
//! of `judge`'s samples (0.2 has no `judge-packed`) and asks the judge named
//! `golden-1` through 0.2's `ask-judges`, constrained to YES or NO: met when
//! the answer is YES; the explanation carries the prompt it was given and
//! the tokens the answer used, so a test sees both crossed intact. Every
//! host must keep loading and running it.

wit_bindgen::generate!({ world: "rubric", path: "../../../wit/v0.2" });

use exports::verifine::plugin::rubric_plugin::Guest;
use verifine::plugin::host::{JudgeQuery, ask_judges};
use verifine::plugin::types::{Context, Criterion, Judgment, RubricInfo, Sample, Verdict};

struct Legacy;

fn criterion() -> Criterion {
    Criterion {
        id: "golden-says-yes".into(),
        description: "The judge golden-1 answers YES about the response".into(),
        weight: 1.0,
        dimension: "overall".into(),
        tags: Vec::new(),
    }
}

impl Guest for Legacy {
    fn describe() -> RubricInfo {
        RubricInfo {
            name: "legacy-contract-0-2".into(),
            version: "0.2.0".into(),
            criteria: vec![criterion()],
        }
    }

    fn judge(_: Context, samples: Vec<Sample>) -> Vec<Result<Judgment, String>> {
        let queries: Vec<JudgeQuery> = samples
            .iter()
            .map(|s| JudgeQuery {
                judge: Some("golden-1".into()),
                system: None,
                prompt: format!("Correct? {}", s.response),
                max_tokens: 1,
                temperature: Some(0.0),
                stop: Vec::new(),
                json_schema: None,
                top_logprobs: 0,
                choices: vec!["YES".into(), "NO".into()],
            })
            .collect();
        ask_judges(&queries)
            .into_iter()
            .zip(&samples)
            .map(|(answer, sample)| {
                let answer = answer?;
                let met = answer.text == "YES";
                Ok(Judgment {
                    total: Some(if met { 1.0 } else { 0.0 }),
                    verdicts: vec![Verdict {
                        criterion: "golden-says-yes".into(),
                        score: if met { 1.0 } else { 0.0 },
                        met: Some(met),
                        confidence: None,
                        explanation: None,
                    }],
                    sub_scores: Vec::new(),
                    criteria: vec![criterion()],
                    explanation: Some(format!(
                        "prompt {:?}; {} input tokens",
                        sample.prompt, answer.usage.input
                    )),
                })
            })
            .collect()
    }
}

// The exports exist only in the component, as the SDK's macro does it: a
// host build (the workspace's tests) links a cdylib, and the linker refuses
// export names that hold ':'.
#[cfg(target_arch = "wasm32")]
export!(Legacy);

/// The metadata section the host reads before compiling (the SDK writes
/// it for SDK-built plugins).
#[used]
#[unsafe(link_section = "verifine-plugin")]
static METADATA: [u8; 69] =
    *b"api-version=0.2.0\nkind=rubric\nname=legacy-contract-0-2\nversion=0.2.0\n";
