//! An example rubric plugin with a config table (the book's own rubric,
//! `examples/book-rubric`, has none; docs/src/plugins/writing.md): rewards
//! responses that mark a final answer and stay under a word budget.

use serde::Deserialize;
use verifine_plugin_api::*;

/// `[rubric.config]` in the run's TOML.
#[derive(Deserialize)]
#[serde(default)]
pub struct Config {
    pub max_words: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config { max_words: 120 }
    }
}

criteria! {
    /// What the rubric checks: `describe()` and the verdicts name these, so
    /// a misspelled criterion does not compile.
    pub enum Checks {
        Marked = "marked",
        Concise = "concise",
    }
}

pub struct Concise;

impl Rubric for Concise {
    type Config = Config;

    fn describe() -> RubricInfo {
        RubricInfo::new("concise", env!("CARGO_PKG_VERSION"))
            .criterion(Criterion::new(
                &Checks::Marked,
                "Ends with a marked final answer",
                1.0,
            ))
            .criterion(Criterion::new(
                &Checks::Concise,
                "Stays within the word budget",
                1.0,
            ))
    }

    fn judge(config: &Config, _: &Context, sample: &Sample) -> Result<Judgment, String> {
        let words = sample.response.split_whitespace().count();
        let marked = sample.response.contains("####") || sample.response.contains("\\boxed{");
        Ok(Judgment::from_verdicts(vec![
            Verdict::met(&Checks::Marked, marked),
            Verdict::met(&Checks::Concise, words <= config.max_words)
                .because(format!("{words} words (budget {})", config.max_words)),
        ]))
    }
}

export_plugin!(rubric: Concise);
