//! `screen.toml`: the screening slice, the judges file, the candidate and
//! golden verifiers, the choice rules' settings and, optionally, the
//! post-training score each candidate reached.

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use verifine_base::PluginSpec;

/// The whole screen.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScreenConfig {
    /// Score-input rows whose context holds `{"rubrics": [...]}` (relative
    /// paths are read from the config's folder). Verdicts in the rows are
    /// ignored: every verifier judges every (response, criterion) pair.
    pub slice: PathBuf,
    /// How the slice file is laid out.
    #[serde(default)]
    pub slice_format: SliceFormat,
    /// Screen only the first this many tasks.
    #[serde(default)]
    pub max_tasks: Option<usize>,
    /// The judge backends (`judges.toml`) that `kind = "judge"` verifiers name.
    #[serde(default)]
    pub judges: Option<PathBuf>,
    /// The row-rubric plugin that asks model judges (`healthbench`,
    /// `prbench`, or a path).
    #[serde(default = "default_rubric")]
    pub rubric: PluginSpec,
    /// Accuracy against the golden majority a cheap candidate must reach.
    #[serde(default = "default_threshold")]
    pub threshold: f64,
    /// The user's fixed pick (the "balanced" rule); a candidate's name.
    #[serde(default)]
    pub balanced: Option<String>,
    /// The verifiers to choose among.
    pub candidates: Vec<Verifier>,
    /// The verifiers whose 2-of-3 majority is the reference (three, from
    /// different families in a real setup).
    pub goldens: Vec<Verifier>,
    /// Scores reached by post-training with each candidate's rewards.
    #[serde(default)]
    pub post_training: Option<PostTraining>,
}

/// Slice layouts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SliceFormat {
    /// `verifine score` input rows with `{"rubrics": [...]}` contexts.
    #[default]
    ScoreRows,
    /// GSM8K model solutions (`question`, `ground_truth`, and per model
    /// `{"solution", "is_correct"}`): each solution one task with the single
    /// item "the final answer is correct", `is_correct` its row label.
    Gsm8kSolutions,
}

fn default_rubric() -> PluginSpec {
    PluginSpec::from("healthbench")
}

fn default_threshold() -> f64 {
    0.80
}

/// One verifier.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verifier {
    /// Its name in tables and picks.
    pub name: String,
    /// Where its verdicts come from (`source = { kind = "judge" | "plugin" | "labels", … }`).
    pub source: Source,
    /// A known price per 1 000 tasks (human labels, a hosted rule), added
    /// to what its judge's ledger counts.
    #[serde(default)]
    pub usd_per_1000_tasks: f64,
}

/// Where a verifier's verdicts come from.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Source {
    /// A judge model of the judges file, asked through the screen's rubric.
    Judge {
        /// The judge's name in the judges file.
        judge: String,
        /// Rubric items per query.
        #[serde(default = "default_batch")]
        batch: usize,
        /// `json` or `yes-no` (the rubric plugin's `answer`).
        #[serde(default = "default_answer")]
        answer: String,
        /// Reference-guided grading: each rubric item names the row's
        /// reference answer, so the judge compares rather than solves (a
        /// cheap verifier is asked this way when an answer key exists).
        #[serde(default)]
        reference: bool,
    },
    /// A rubric plugin that judges each row itself (a rule, a checker).
    Plugin {
        /// The plugin.
        plugin: PluginSpec,
        /// The criterion whose verdict decides a row's single item; without
        /// it the plugin's verdicts, in order, must match the row's items.
        #[serde(default)]
        criterion: Option<String>,
        /// `[rubric.config]` for the plugin.
        #[serde(default)]
        config: Option<toml::Table>,
    },
    /// Verdicts from a file: `{"id": ROW_ID, "verdicts": [true, false, null, …]}`
    /// per line, one per item of the row.
    Labels {
        /// The JSONL file (relative to the config's folder).
        path: PathBuf,
    },
    /// The slice rows' own boolean `label` (for rows with one rubric item,
    /// e.g. a solution's `is_correct`).
    RowLabel,
}

fn default_batch() -> usize {
    3
}

fn default_answer() -> String {
    "json".to_string()
}

/// Post-training scores, one per candidate that was trained with.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostTraining {
    /// The score before post-training.
    pub baseline: f64,
    /// The score after post-training with each candidate's rewards.
    pub scores: BTreeMap<String, f64>,
    /// The score with the golden protocol's rewards, when measured (else the
    /// best candidate's score stands for the best).
    #[serde(default)]
    pub golden: Option<f64>,
}

impl ScreenConfig {
    /// Reads and checks the config; relative paths become relative to its
    /// folder.
    pub fn load(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let mut config: ScreenConfig =
            toml::from_str(&text).with_context(|| format!("invalid config {}", path.display()))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = dir.join(&*p);
            }
        };
        resolve(&mut config.slice);
        if let Some(judges) = &mut config.judges {
            resolve(judges);
        }
        for verifier in config.candidates.iter_mut().chain(&mut config.goldens) {
            if let Source::Labels { path } = &mut verifier.source {
                resolve(path);
            }
        }
        config
            .check()
            .with_context(|| format!("invalid config {}", path.display()))?;
        Ok(config)
    }

    fn check(&self) -> Result<()> {
        if self.candidates.is_empty() || self.goldens.is_empty() {
            bail!("at least one candidate and one golden verifier are needed");
        }
        let mut names = std::collections::BTreeSet::new();
        for v in self.candidates.iter().chain(&self.goldens) {
            if !names.insert(v.name.as_str()) {
                bail!("verifier name {:?} is used twice", v.name);
            }
            if !(v.usd_per_1000_tasks.is_finite() && v.usd_per_1000_tasks >= 0.0) {
                bail!(
                    "{}: usd_per_1000_tasks must be finite and not negative",
                    v.name
                );
            }
            if let Source::Judge { batch, answer, .. } = &v.source {
                if *batch == 0 {
                    bail!("{}: batch must be at least 1", v.name);
                }
                if answer != "json" && answer != "yes-no" {
                    bail!(
                        "{}: answer {answer:?} is neither \"json\" nor \"yes-no\"",
                        v.name
                    );
                }
                if self.judges.is_none() {
                    bail!(
                        "{} asks a judge model, but no `judges` file is given",
                        v.name
                    );
                }
            }
        }
        if !(0.0..=1.0).contains(&self.threshold) {
            bail!("threshold {} is not in [0, 1]", self.threshold);
        }
        if let Some(balanced) = &self.balanced
            && !self.candidates.iter().any(|c| &c.name == balanced)
        {
            bail!("balanced names {balanced:?}, which is no candidate");
        }
        if let Some(post) = &self.post_training
            && let Some(unknown) = post
                .scores
                .keys()
                .find(|k| !self.candidates.iter().any(|c| &c.name == *k))
        {
            bail!("post_training scores name {unknown:?}, which is no candidate");
        }
        Ok(())
    }
}
