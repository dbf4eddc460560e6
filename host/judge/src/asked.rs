//! What a rubric asks a judge model, captured without asking anyone. A
//! verifier trained on these queries (`verifine judge train`, or an evolve
//! judge revision that retrains the judge's model) is later asked, byte for
//! byte, what it learnt on: the rubric renders its own queries, and the
//! local backend that will answer them encodes them.

use crate::error::Result;
use std::sync::{Arc, Mutex};
use verifine_base::PluginSpec;
use verifine_runtime::scorer_pool::score_all;
use verifine_runtime::scoring::RewardPlugins;
use verifine_runtime::{JudgeModels, ModelAnswer, ModelError, ModelRequest, Runtime, Sample};

/// The one query `rubric` (under `config`) asks a judge model about each
/// sample, or why there is not exactly one (the rubric asked none or
/// several, or failed: its error is included).
pub fn single_queries(
    rubric: &PluginSpec,
    config: &serde_json::Value,
    samples: &[Sample],
) -> Result<Vec<std::result::Result<ModelRequest, String>>> {
    let capture = Arc::new(Capture::default());
    let runtime = Runtime::new(Default::default())?.with_judges(capture.clone());
    let plugin = RewardPlugins::load(
        &runtime,
        rubric.clone(),
        config,
        None,
        &serde_json::json!({}),
    )?;
    let mut queries = Vec::with_capacity(samples.len());
    for sample in samples {
        let scored = score_all(&plugin, std::slice::from_ref(sample), 1, 1, &|_| {})?;
        let asked = std::mem::take(&mut *capture.asked.lock().expect("capture lock"));
        queries.push(
            <[ModelRequest; 1]>::try_from(asked)
                .map(|[query]| query)
                .map_err(|asked| {
                    let why = scored[0].error.clone().unwrap_or_default();
                    format!(
                        "the rubric asked {} queries (one rubric item per row is needed){}",
                        asked.len(),
                        if why.is_empty() {
                            String::new()
                        } else {
                            format!("; it said: {why}")
                        }
                    )
                }),
        );
    }
    Ok(queries)
}

/// A YES/NO query as a local model scores it: the prompt's ids and each
/// verdict's continuation ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YesNoIds {
    /// The prompt, chat template applied.
    pub prompt: Vec<u32>,
    /// The continuation meaning "met".
    pub yes: Vec<u32>,
    /// The continuation meaning "not met".
    pub no: Vec<u32>,
}

/// `query` encoded as `backend` will be asked it; an error names the
/// choices when they are not YES and NO.
#[cfg(feature = "local")]
pub fn yes_no_ids(
    backend: &crate::local::LocalBackend,
    query: &ModelRequest,
) -> std::result::Result<YesNoIds, String> {
    let ids = backend.query_ids(query);
    let pick = |word: &str| {
        query
            .choices
            .iter()
            .position(|c| c.trim().eq_ignore_ascii_case(word))
            .map(|i| ids.choices[i].clone())
    };
    match (pick("yes"), pick("no")) {
        (Some(yes), Some(no)) => Ok(YesNoIds {
            prompt: ids.prompt,
            yes,
            no,
        }),
        _ => Err(format!(
            "the rubric's query offers {:?}, not YES and NO",
            query.choices
        )),
    }
}

/// A stand-in judge that records what it is asked and answers the first
/// choice.
#[derive(Default)]
struct Capture {
    asked: Mutex<Vec<ModelRequest>>,
}

impl JudgeModels for Capture {
    fn ask(
        &self,
        _plugin: &str,
        requests: &[ModelRequest],
    ) -> Vec<std::result::Result<ModelAnswer, ModelError>> {
        self.asked
            .lock()
            .expect("capture lock")
            .extend(requests.iter().cloned());
        requests
            .iter()
            .map(|r| {
                Ok(ModelAnswer {
                    text: r.choices.first().cloned().unwrap_or_else(|| "YES".into()),
                    logprobs: Vec::new(),
                    usage: Default::default(),
                    model: "capture".into(),
                    seconds: 0.0,
                    cached: false,
                })
            })
            .collect()
    }
}
