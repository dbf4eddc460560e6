//! `verifine._verifine`: the Rust half of the Python package. A `Scorer`
//! holds a rubric and an aggregator loaded once; scoring releases the GIL
//! and spreads batches over threads, each with its own plugin instances.
//! The adapters for TRL, verl and OpenRLHF are Python (`verifine/`), on top
//! of this.

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::collections::BTreeMap;
use verifine_runtime::scorer_pool::ScorerPool;
use verifine_runtime::scoring::{RewardPlugins, ScoredSample};
use verifine_runtime::{Limits, Runtime, Sample};

/// One criterion's verdict.
#[pyclass(module = "verifine", frozen, get_all, skip_from_py_object)]
#[derive(Clone)]
struct Verdict {
    criterion: String,
    score: f64,
    met: Option<bool>,
    confidence: Option<f64>,
    explanation: Option<String>,
}

#[pymethods]
impl Verdict {
    fn __repr__(&self) -> String {
        format!(
            "Verdict(criterion={:?}, score={}, met={:?})",
            self.criterion, self.score, self.met
        )
    }
}

/// How a rubric judged one sample: the reward (`total`, `None` when
/// scoring failed or the rubric defines no score), the verdicts, named
/// sub-scores, the explanation, and why there is no total.
#[pyclass(module = "verifine", frozen)]
struct Judgment {
    #[pyo3(get)]
    total: Option<f64>,
    #[pyo3(get)]
    rubric_total: Option<f64>,
    #[pyo3(get)]
    verdicts: Vec<Verdict>,
    #[pyo3(get)]
    sub_scores: Vec<(String, f64)>,
    #[pyo3(get)]
    explanation: Option<String>,
    #[pyo3(get)]
    error: Option<String>,
    criteria: BTreeMap<String, f64>,
}

#[pymethods]
impl Judgment {
    fn __repr__(&self) -> String {
        format!(
            "Judgment(total={:?}, verdicts={}, error={:?})",
            self.total,
            self.verdicts.len(),
            self.error
        )
    }

    /// Each criterion's score (the mean where a criterion was judged more
    /// than once), as the reward server reports it.
    fn criteria(&self) -> BTreeMap<String, f64> {
        self.criteria.clone()
    }
}

impl From<ScoredSample> for Judgment {
    fn from(scored: ScoredSample) -> Self {
        let criteria = verifine_serve::protocol::criterion_scores(&scored);
        let (verdicts, sub_scores, explanation) = match scored.judgment {
            Some(j) => (
                j.verdicts
                    .into_iter()
                    .map(|v| Verdict {
                        criterion: v.criterion,
                        score: v.score,
                        met: v.met,
                        confidence: v.confidence,
                        explanation: v.explanation,
                    })
                    .collect(),
                j.sub_scores
                    .into_iter()
                    .map(|s| (s.name, s.value))
                    .collect(),
                j.explanation,
            ),
            None => Default::default(),
        };
        Judgment {
            total: scored.total,
            rubric_total: scored.rubric_total,
            verdicts,
            sub_scores,
            explanation,
            error: scored.error,
            criteria,
        }
    }
}

/// A rubric plus an aggregator, loaded once (compiled, version-checked),
/// scoring lists of samples.
#[pyclass(module = "verifine", frozen)]
struct Scorer {
    pool: ScorerPool,
    criteria: Vec<String>,
    threads: usize,
    batch_size: usize,
}

#[pymethods]
impl Scorer {
    /// `rubric`: a built-in name or a path to a `.wasm` component;
    /// `rubric_config` / `aggregator_config`: the plugins' own tables as
    /// JSON text; `threads`: 0 for one per core.
    #[new]
    #[pyo3(signature = (rubric, aggregator=None, rubric_config="{}", aggregator_config="{}", threads=0, batch_size=64, call_timeout_ms=10_000, memory_mib=256))]
    #[allow(
        clippy::too_many_arguments,
        reason = "Python keyword arguments, each a setting of the scorer"
    )]
    fn new(
        py: Python<'_>,
        rubric: &str,
        aggregator: Option<&str>,
        rubric_config: &str,
        aggregator_config: &str,
        threads: usize,
        batch_size: usize,
        call_timeout_ms: u64,
        memory_mib: u64,
    ) -> PyResult<Self> {
        let json = |text: &str, what: &str| {
            serde_json::from_str::<serde_json::Value>(text)
                .map_err(|e| PyValueError::new_err(format!("{what} is not JSON: {e}")))
        };
        let rubric_config = json(rubric_config, "rubric_config")?;
        let aggregator_config = json(aggregator_config, "aggregator_config")?;
        let limits = Limits {
            call_timeout_ms,
            memory_mib,
        };
        let (rubric, aggregator) = (rubric.to_string(), aggregator.map(str::to_string));
        let (pool, criteria) = py
            .detach(|| -> Result<_, String> {
                let runtime = Runtime::new(limits).map_err(|e| e.to_string())?;
                let plugins = RewardPlugins::load(
                    &runtime,
                    rubric.as_str(),
                    &rubric_config,
                    aggregator.map(Into::into),
                    &aggregator_config,
                )
                .map_err(|e| e.to_string())?;
                // The first scorer reads the criteria and stays in the pool.
                let pool = ScorerPool::new(plugins);
                let criteria = pool.criteria().map_err(|e| e.to_string())?;
                Ok((pool, criteria.into_iter().map(|c| c.id).collect()))
            })
            .map_err(PyRuntimeError::new_err)?;
        let threads = if threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            threads
        };
        Ok(Scorer {
            pool,
            criteria,
            threads,
            batch_size: batch_size.max(1),
        })
    }

    /// The criteria the rubric describes (row-level rubrics may judge others).
    #[getter]
    fn criteria(&self) -> Vec<String> {
        self.criteria.clone()
    }

    /// The rubric and aggregator as `name@version+sha256`.
    #[getter]
    fn revisions(&self) -> (String, String) {
        let show =
            |p: verifine_runtime::Provenance| format!("{}@{}+{}", p.name, p.version, p.sha256);
        (
            show(self.pool.function().rubric.provenance()),
            show(self.pool.function().aggregator.provenance()),
        )
    }

    /// Judges each (prompt, response[, reference][, context JSON]) sample.
    #[pyo3(signature = (prompts, responses, references=None, contexts=None))]
    fn score(
        &self,
        py: Python<'_>,
        prompts: Vec<String>,
        responses: Vec<String>,
        references: Option<Vec<Option<String>>>,
        contexts: Option<Vec<Option<String>>>,
    ) -> PyResult<Vec<Judgment>> {
        let samples = samples(prompts, responses, references, contexts)?;
        self.score_samples(py, samples)
    }

    /// Seconds per scoring of the samples, `repeats` times, timed inside
    /// Rust: the anchor the adapter's overhead is measured against
    /// (`python/bench/overhead.py`); not part of the API.
    #[pyo3(signature = (prompts, responses, references, repeats))]
    fn _score_timed(
        &self,
        py: Python<'_>,
        prompts: Vec<String>,
        responses: Vec<String>,
        references: Option<Vec<Option<String>>>,
        repeats: usize,
    ) -> PyResult<Vec<f64>> {
        let samples = samples(prompts, responses, references, None)?;
        py.detach(|| {
            (0..repeats)
                .map(|_| {
                    let started = std::time::Instant::now();
                    let scored = self.pool.score(&samples, self.batch_size, self.threads)?;
                    std::hint::black_box(scored);
                    Ok(started.elapsed().as_secs_f64())
                })
                .collect::<Result<Vec<f64>, verifine_runtime::RuntimeError>>()
        })
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }

    /// OpenRLHF's `reward_func(queries, prompts, labels)`, as the reward
    /// server answers `/get_reward`: the JSON of `{"rewards", "scores",
    /// "extra_logs"}`.
    fn openrlhf(
        &self,
        py: Python<'_>,
        queries: Vec<String>,
        prompts: Option<Vec<String>>,
        labels: Option<Vec<String>>,
    ) -> PyResult<String> {
        let labels = labels.map(|l| l.into_iter().map(serde_json::Value::String).collect());
        let samples = verifine_serve::protocol::openrlhf_samples(queries, prompts, labels)
            .map_err(PyValueError::new_err)?;
        let scored = self.run(py, &samples)?;
        Ok(verifine_serve::protocol::openrlhf_response(0, &scored).to_string())
    }
}

impl Scorer {
    fn score_samples(&self, py: Python<'_>, samples: Vec<Sample>) -> PyResult<Vec<Judgment>> {
        Ok(self
            .run(py, &samples)?
            .into_iter()
            .map(Judgment::from)
            .collect())
    }

    /// Scores with the GIL released, on pooled scorers.
    fn run(&self, py: Python<'_>, samples: &[Sample]) -> PyResult<Vec<ScoredSample>> {
        py.detach(|| self.pool.score(samples, self.batch_size, self.threads))
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }
}

fn samples(
    prompts: Vec<String>,
    responses: Vec<String>,
    references: Option<Vec<Option<String>>>,
    contexts: Option<Vec<Option<String>>>,
) -> PyResult<Vec<Sample>> {
    let n = prompts.len();
    for (name, len) in [
        ("responses", Some(responses.len())),
        ("references", references.as_ref().map(Vec::len)),
        ("contexts", contexts.as_ref().map(Vec::len)),
    ] {
        if let Some(len) = len.filter(|&len| len != n) {
            return Err(PyValueError::new_err(format!(
                "{name} has {len} entries, prompts has {n}"
            )));
        }
    }
    let mut references = references.map(Vec::into_iter);
    let mut contexts = contexts.map(Vec::into_iter);
    prompts
        .into_iter()
        .zip(responses)
        .enumerate()
        .map(|(i, (prompt, response))| {
            let mut sample = Sample::new(i.to_string(), prompt, response);
            sample.reference = references.as_mut().and_then(Iterator::next).flatten();
            if let Some(context) = contexts.as_mut().and_then(Iterator::next).flatten() {
                serde_json::from_str::<serde_json::Value>(&context).map_err(|e| {
                    PyValueError::new_err(format!("contexts[{i}] is not JSON: {e}"))
                })?;
                sample.context = context;
            }
            Ok(sample)
        })
        .collect()
}

/// A label, as the JSON text a client would send, as the reference text a
/// rubric reads: parsed by the reward server's JSON reader and converted by
/// its own `label_text`, so the local-function adapters and `/get_reward`
/// hand a rubric the same text by construction. `null` and `""`: "" (no
/// reference).
#[pyfunction]
fn label_text(json: &str) -> PyResult<String> {
    let label: serde_json::Value = serde_json::from_str(json).map_err(|e| {
        let shown: String = json.chars().take(80).collect();
        PyValueError::new_err(format!(
            "verifine: the reward server refuses the label {shown}: {e}"
        ))
    })?;
    Ok(verifine_serve::protocol::label_text(&label).unwrap_or_default())
}

/// The extension module.
#[pymodule]
fn _verifine(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(label_text, module)?)?;
    module.add_class::<Scorer>()?;
    module.add_class::<Judgment>()?;
    module.add_class::<Verdict>()?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
