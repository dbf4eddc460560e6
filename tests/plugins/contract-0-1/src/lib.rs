//! A rubric built against contract 0.1 directly with wit-bindgen (the SDK
//! moves on with the contract; this crate never does). It asks the judge
//! model through 0.1's `judge-model`: met when the answer starts with YES.
//! Every host must keep loading and running it.

wit_bindgen::generate!({ world: "rubric", path: "../../../wit/v0.1" });

use exports::verifine::plugin::rubric_plugin::Guest;
use verifine::plugin::host::{ModelQuery, judge_model};
use verifine::plugin::types::{Context, Criterion, Judgment, RubricInfo, Sample, Verdict};

struct Legacy;

fn criterion() -> Criterion {
    Criterion {
        id: "judge-says-yes".into(),
        description: "The judge model answers YES about the response".into(),
        weight: 1.0,
        dimension: "overall".into(),
        tags: Vec::new(),
    }
}

impl Guest for Legacy {
    fn describe() -> RubricInfo {
        RubricInfo {
            name: "legacy-contract-0-1".into(),
            version: "0.1.0".into(),
            criteria: vec![criterion()],
        }
    }

    fn judge(_: Context, samples: Vec<Sample>) -> Vec<Result<Judgment, String>> {
        let queries: Vec<ModelQuery> = samples
            .iter()
            .map(|s| ModelQuery {
                system: None,
                prompt: format!("Is this correct? {}", s.response),
                max_tokens: 4,
            })
            .collect();
        judge_model(&queries)
            .into_iter()
            .map(|answer| {
                let met = answer?.trim_start().starts_with("YES");
                Ok(Judgment {
                    total: Some(if met { 1.0 } else { 0.0 }),
                    verdicts: vec![Verdict {
                        criterion: "judge-says-yes".into(),
                        score: if met { 1.0 } else { 0.0 },
                        met: Some(met),
                        confidence: None,
                        explanation: None,
                    }],
                    sub_scores: Vec::new(),
                    criteria: vec![criterion()],
                    explanation: None,
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
    *b"api-version=0.1.0\nkind=rubric\nname=legacy-contract-0-1\nversion=0.1.0\n";
