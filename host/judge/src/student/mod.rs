//! A distilled student judge (VeriFine's teacher → student): a compact
//! candle classifier that predicts, from a (prompt, response) pair alone,
//! the teacher's verdict on each of a fixed set of criteria. Trained by
//! [`train`] with equal-weight binary cross-entropy over the criteria
//! (label smoothing only on the gate criterion); totals are never its
//! target — the aggregator plugin makes them from its sub-scores.
//!
//! As a judge backend (`kind = "student"`) it answers the queries of
//! verifine's row-rubric grader (`healthbench`, `prbench`, any plugin using
//! the SDK's `Grader`): it reads the conversation and the rubric items from
//! the query and answers each item whose text it was trained on, as a JSON
//! list of verdicts, or YES/NO for a query with choices. An item it does
//! not know fails the query, naming it.

mod error;
pub mod features;
pub mod train;

pub use error::StudentError;

use crate::http::Exchange;
use candle_core::{DType, Device, Module, Tensor};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Instant;
use verifine_base::FileError;
use verifine_runtime::judge_models::{
    ModelAnswer, ModelError, ModelRequest, TokenLogprob, TokenUsage,
};

/// `student.json`: what the weights mean.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudentSpec {
    /// The criteria, in output order: (id, text the grader shows for it).
    pub criteria: Vec<(String, String)>,
    /// The criterion trained with label smoothing, if any.
    pub gate: Option<String>,
    /// Feature buckets (see [`features::featurize`]).
    pub buckets: usize,
    /// Hidden width.
    pub hidden: usize,
}

/// The classifier: features → hidden (ReLU) → one logit per criterion.
pub struct StudentModel {
    /// What the outputs are.
    pub spec: StudentSpec,
    hidden: candle_nn::Linear,
    output: candle_nn::Linear,
}

const WEIGHTS: &str = "student.safetensors";
const SPEC: &str = "student.json";

impl StudentModel {
    /// A model over `spec` with weights from `vars` (names `hidden.*`,
    /// `output.*`).
    pub fn new(spec: StudentSpec, vars: candle_nn::VarBuilder) -> candle_core::Result<Self> {
        Ok(StudentModel {
            hidden: candle_nn::linear(spec.buckets, spec.hidden, vars.pp("hidden"))?,
            output: candle_nn::linear(spec.hidden, spec.criteria.len(), vars.pp("output"))?,
            spec,
        })
    }

    /// Logits `[batch, criteria]` for features `[batch, buckets]`.
    pub fn logits(&self, features: &Tensor) -> candle_core::Result<Tensor> {
        self.output.forward(&self.hidden.forward(features)?.relu()?)
    }

    /// P(met) per criterion for each pair.
    pub fn predict(&self, pairs: &[(&str, &str)]) -> candle_core::Result<Vec<Vec<f64>>> {
        if pairs.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<f32> = pairs
            .iter()
            .flat_map(|(p, r)| features::featurize(p, r, self.spec.buckets))
            .collect();
        let x = Tensor::from_vec(rows, (pairs.len(), self.spec.buckets), &Device::Cpu)?;
        let p = candle_nn::ops::sigmoid(&self.logits(&x)?)?;
        p.to_dtype(DType::F64)?.to_vec2()
    }

    /// Loads a student directory written by [`StudentModel::save`].
    pub fn load(dir: &Path) -> Result<Self, StudentError> {
        let spec_path = dir.join(SPEC);
        let text = std::fs::read_to_string(&spec_path)
            .map_err(|e| FileError::io("reading", &spec_path, e))?;
        let spec: StudentSpec =
            serde_json::from_str(&text).map_err(|source| StudentError::Spec {
                path: spec_path.clone(),
                source,
            })?;
        let weights = dir.join(WEIGHTS);
        // SAFETY: the file is only read; a concurrent writer would replace
        // it by a rename, never write into it.
        let vars = unsafe {
            candle_nn::VarBuilder::from_mmaped_safetensors(&[&weights], DType::F32, &Device::Cpu)
        }
        .map_err(|source| StudentError::Weights {
            path: weights.clone(),
            source,
        })?;
        StudentModel::new(spec, vars).map_err(|source| StudentError::Weights {
            path: weights,
            source,
        })
    }

    /// Writes `student.safetensors` and `student.json` into `dir`, each
    /// through a temporary file and a rename.
    pub fn save(&self, dir: &Path) -> Result<(), StudentError> {
        std::fs::create_dir_all(dir).map_err(|e| FileError::io("creating", dir, e))?;
        let tensors: std::collections::HashMap<String, Tensor> = [
            ("hidden.weight", self.hidden.weight()),
            ("output.weight", self.output.weight()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .chain(
            [
                ("hidden.bias", self.hidden.bias()),
                ("output.bias", self.output.bias()),
            ]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_string(), v.clone()))),
        )
        .collect();
        let weights = dir.join(WEIGHTS);
        let tmp = verifine_base::temporary_sibling(&weights);
        if let Err(source) = candle_core::safetensors::save(&tensors, &tmp) {
            let _ = std::fs::remove_file(&tmp);
            return Err(StudentError::Weights { path: tmp, source });
        }
        std::fs::rename(&tmp, &weights).map_err(|e| FileError::io("renaming into", &weights, e))?;
        let json = serde_json::to_vec_pretty(&self.spec).map_err(|source| StudentError::Spec {
            path: dir.join(SPEC),
            source,
        })?;
        verifine_base::write_atomically(&dir.join(SPEC), |w| w.write_all(&json))?;
        Ok(())
    }
}

/// A grader query taken apart: the conversation's two turns and the items.
struct GraderQuery<'a> {
    prompt: &'a str,
    response: &'a str,
    items: Vec<&'a str>,
}

/// Reads a query of the SDK's row-rubric grader.
fn parse_grader_query(text: &str) -> Option<GraderQuery<'_>> {
    let (_, rest) = text.split_once("\nuser: ")?;
    let (prompt, rest) = rest.split_once("\n\nassistant: ")?;
    let (response, rest) = rest.split_once("\n\n# Rubric items\n")?;
    let (items, _) = rest.split_once("\n\n# Instructions")?;
    let items = items
        .lines()
        .map(|line| line.split_once(". ").map_or(line, |(_, item)| item))
        .collect();
    Some(GraderQuery {
        prompt,
        response,
        items,
    })
}

/// A student answering as a judge backend.
pub struct StudentBackend {
    model: StudentModel,
    name: String,
}

impl StudentBackend {
    /// Loads the student in `dir`.
    pub fn new(dir: &Path) -> Result<Self, StudentError> {
        Ok(StudentBackend {
            model: StudentModel::load(dir)?,
            name: format!("student:{}", dir.display()),
        })
    }

    /// Answers each request in turn.
    pub fn exchange_all(&self, requests: &[&ModelRequest]) -> Vec<Exchange> {
        requests
            .iter()
            .map(|r| {
                let started = Instant::now();
                let answer = self.answer(r);
                Exchange {
                    answer,
                    calls: 1,
                    seconds: started.elapsed().as_secs_f64(),
                }
            })
            .collect()
    }

    fn answer(&self, request: &ModelRequest) -> Result<ModelAnswer, ModelError> {
        let started = Instant::now();
        let query = parse_grader_query(&request.prompt).ok_or_else(|| {
            ModelError::BadQuery(
                "the student judge answers only the row-rubric grader's queries".into(),
            )
        })?;
        let columns: Vec<usize> = query
            .items
            .iter()
            .map(|item| {
                self.model
                    .spec
                    .criteria
                    .iter()
                    .position(|(_, text)| text.split_whitespace().eq(item.split_whitespace()))
                    .ok_or_else(|| {
                        ModelError::BadQuery(format!(
                            "the student was not trained on the item {item:?}"
                        ))
                    })
            })
            .collect::<Result<_, _>>()?;
        let p = self
            .model
            .predict(&[(query.prompt, query.response)])
            .map_err(|e| ModelError::Model(e.to_string()))?
            .remove(0);
        let met: Vec<(bool, f64)> = columns
            .iter()
            .map(|&c| (p[c] >= verifine_base::PASS_MARK, p[c]))
            .collect();
        let (text, logprobs) = if request.choices.is_empty() {
            let list: Vec<bool> = met.iter().map(|(m, _)| *m).collect();
            (
                serde_json::to_string(&list).expect("booleans serialize"),
                Vec::new(),
            )
        } else {
            let (yes, p_yes) = met[0];
            let text = if yes { "YES" } else { "NO" };
            let top = vec![
                ("YES".to_string(), p_yes.max(1e-12).ln()),
                ("NO".to_string(), (1.0 - p_yes).max(1e-12).ln()),
            ];
            let logprob = if yes { top[0].1 } else { top[1].1 };
            (
                text.to_string(),
                vec![TokenLogprob {
                    token: text.to_string(),
                    logprob,
                    top,
                }],
            )
        };
        Ok(ModelAnswer {
            text,
            logprobs,
            usage: TokenUsage::default(),
            model: self.name.clone(),
            seconds: started.elapsed().as_secs_f64(),
            cached: false,
        })
    }
}

/// Where a student's files are, for messages.
pub fn files(dir: &Path) -> [PathBuf; 2] {
    [dir.join(SPEC), dir.join(WEIGHTS)]
}
