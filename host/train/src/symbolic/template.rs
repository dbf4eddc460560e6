//! A parsed template, and drawing from it: a variant, or the original
//! problem rebuilt from the question's placeholders.

use super::eval::Scope;
use super::eval_error::EvalError;
use super::expr::Expr;
use super::helpers::{Choices, choices};
use super::render::{Piece, render};
use super::value::Value;
use super::{Rejection, SymbolicError};
use crate::problem::Problem;
use std::collections::{BTreeMap, HashMap};
use verifine_base::SplitMix64;

/// A parsed GSM-Symbolic template: everything needed to draw variants,
/// checked when it is read (every name defined, every function known), so
/// a draw can only fail on the values it drew.
#[derive(Debug, Clone)]
pub struct Template {
    /// The file it came from, for errors.
    pub(super) source: String,
    pub(super) question: Vec<Piece>,
    /// The original problem's value of each placeholder, as written.
    pub(super) defaults: Vec<(String, String)>,
    /// `#init` lines, those that depend on no other variable first (the
    /// package's order), then the rest in file order.
    pub(super) lines: Vec<InitLine>,
    pub(super) conditions: Vec<Checked>,
    /// `#answer:` and the solution's `#### {…}`: at least one; where both
    /// are given, a draw counts only when they agree.
    pub(super) answers: Vec<Checked>,
    /// The name lists (`names`, `fractions` …) the expressions read.
    pub(super) lists: BTreeMap<String, Value>,
    pub(super) original_question: Option<String>,
    pub(super) original_answer: Option<String>,
}

#[derive(Debug, Clone)]
pub(super) struct InitLine {
    pub(super) names: Vec<String>,
    pub(super) expr: Expr,
    /// Reads other variables (evaluated after the independent lines).
    pub(super) derived: bool,
    pub(super) at: String,
}

/// An expression with where it came from (`line 23`, `#answer:`).
#[derive(Debug, Clone)]
pub(super) struct Checked {
    pub(super) expr: Expr,
    pub(super) source: String,
    pub(super) at: String,
}

impl Template {
    /// The file it was read from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The original problem's question, as the file gives it.
    pub fn original_question(&self) -> Option<&str> {
        self.original_question.as_deref()
    }

    /// The original problem's answer (the text after `####`), which may
    /// not be an integer (the package has a `3.5`).
    pub fn original_answer(&self) -> Option<&str> {
        self.original_answer.as_deref()
    }

    /// Refuses a template that cannot be used: one variant must be drawn
    /// (from a fixed seed, so loading is reproducible), and where the
    /// original problem can be rebuilt with an integer answer, its values
    /// must give that answer — a template whose expressions disagree with
    /// its own problem is not trusted to answer variants.
    pub fn check(&self) -> Result<(), SymbolicError> {
        super::variants(self, &mut SplitMix64::new(0), 1)?;
        let expected = self.original_answer().and_then(|a| a.parse::<i64>().ok());
        if let (Some(expected), Ok(original)) = (expected, self.original())
            && original.answer != expected
        {
            return Err(SymbolicError::Original {
                template: self.source.clone(),
                message: format!(
                    "its values give {}, but its answer is {expected}",
                    original.answer
                ),
            });
        }
        Ok(())
    }

    /// One draw: every variable, then the conditions and the answer.
    pub(crate) fn draw(&self, rng: &mut SplitMix64) -> Result<Problem, Rejection> {
        let (mut vars, mut shown) = (HashMap::new(), HashMap::new());
        for line in &self.lines {
            let scope = Scope {
                vars: &vars,
                lists: &self.lists,
            };
            let value = scope
                .eval(&line.expr, &mut Some(&mut *rng))
                .map_err(|e| at(&line.at, e))?;
            bind(line, value, &mut vars, &mut shown)?;
        }
        self.finish(&vars, &shown, true)
    }

    /// The original problem rebuilt from its placeholders' defaults: a
    /// variable the question does not show is recovered from its `#init`
    /// line when exactly one of the line's choices fits the values shown
    /// (`sides_txt, sides_val = sample([("six-sided", 6), …])` with
    /// `six-sided` shown gives `sides_val = 6`). Conditions are not
    /// checked (an original need not lie in the variants' ranges). Its
    /// answer can then be compared with [`Template::original_answer`].
    pub fn original(&self) -> Result<Problem, SymbolicError> {
        let fail = |message: String| SymbolicError::Original {
            template: self.source.clone(),
            message,
        };
        let (mut vars, mut shown) = (HashMap::new(), HashMap::new());
        // A variable shown twice keeps its last default, as in the package
        // (`{item,Bagel}s cost … than 2 {item,bagel}s`).
        for (name, text) in &self.defaults {
            shown.insert(name.clone(), Value::Str(text.clone()));
            vars.insert(name.clone(), Value::Str(text.clone()).parsed());
        }
        for line in &self.lines {
            if line.names.iter().all(|n| vars.contains_key(n)) {
                continue;
            }
            let scope = Scope {
                vars: &vars,
                lists: &self.lists,
            };
            let candidates = match &line.expr {
                Expr::Call(func, args) if func.is_random() => {
                    let args = args
                        .iter()
                        .map(|a| scope.eval(a, &mut None))
                        .collect::<Result<Vec<_>, _>>();
                    match args
                        .and_then(|args| choices(*func, &args))
                        .map(|c: Choices| c.all())
                    {
                        Ok(Some(Ok(all))) => all,
                        _ => {
                            return Err(fail(format!("{}: its choices cannot be listed", line.at)));
                        }
                    }
                }
                expr => vec![
                    scope
                        .eval(expr, &mut None)
                        .map_err(|e| fail(format!("{}: {e}", line.at)))?,
                ],
            };
            let fitting: Vec<_> = candidates
                .into_iter()
                .filter_map(|value| {
                    let (mut v, mut s) = (HashMap::new(), HashMap::new());
                    bind(line, value, &mut v, &mut s).ok()?;
                    let fits = line
                        .names
                        .iter()
                        .all(|n| vars.get(n).is_none_or(|known| same(known, &v[n])));
                    fits.then_some((v, s))
                })
                .collect();
            let [(v, s)] = fitting.as_slice() else {
                return Err(fail(format!(
                    "{}: {} of its choices fit the question's values",
                    line.at,
                    fitting.len()
                )));
            };
            for name in &line.names {
                vars.entry(name.clone()).or_insert_with(|| v[name].clone());
                shown.entry(name.clone()).or_insert_with(|| s[name].clone());
            }
        }
        self.finish(&vars, &shown, false)
            .map_err(|e| fail(e.to_string()))
    }

    /// Conditions (when `check`), the answer, and the question's text.
    fn finish(
        &self,
        vars: &HashMap<String, Value>,
        shown: &HashMap<String, Value>,
        check: bool,
    ) -> Result<Problem, Rejection> {
        let scope = Scope {
            vars,
            lists: &self.lists,
        };
        for condition in self.conditions.iter().filter(|_| check) {
            if !scope
                .eval(&condition.expr, &mut None)
                .map_err(|e| at(&condition.at, e))?
                .truthy()
            {
                return Err(Rejection::Condition(condition.source.clone()));
            }
        }
        let mut answer: Option<(i128, &str)> = None;
        for checked in &self.answers {
            let value = scope
                .eval(&checked.expr, &mut None)
                .map_err(|e| at(&checked.at, e))?;
            let number = value.number().map_err(|e| at(&checked.at, e))?;
            let Some(n) = number.as_integer() else {
                let shown = number.display().unwrap_or_else(|_| {
                    format!("{}/{}", number.value.numer(), number.value.denom())
                });
                return Err(Rejection::NotInteger(shown));
            };
            if let Some((first, first_at)) = answer.filter(|(first, _)| *first != n) {
                return Err(Rejection::Disagree {
                    first: format!("{first_at} gives {first}"),
                    second: format!("{} gives {n}", checked.at),
                });
            }
            answer = Some((n, &checked.at));
        }
        let answer = answer.map_or(
            Err(EvalError::Value("no answer expression".into())),
            |(n, _)| i64::try_from(n).map_err(|_| EvalError::Overflow),
        );
        let answer = answer.map_err(|e| at("the answer", e))?;
        let prompt = render(&self.question, shown).map_err(|e| at("the question", e))?;
        Ok(Problem {
            prompt,
            solution: format!("#### {answer}"),
            answer,
        })
    }
}

fn at(place: &str, error: EvalError) -> Rejection {
    Rejection::Eval {
        at: place.to_string(),
        error,
    }
}

/// Python's `==`, or the same text (a default `"10"` and a drawn `10`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Num(x), Value::Num(y)) => x.value == y.value,
        _ => a == b || matches!((a.display(), b.display()), (Ok(x), Ok(y)) if x == y),
    }
}

/// Assigns a line's value to its names: one name takes it whole; several
/// take a list's items, or (the package's rule) the items of its items
/// flattened one level, when that makes the counts match.
fn bind(
    line: &InitLine,
    value: Value,
    vars: &mut HashMap<String, Value>,
    shown: &mut HashMap<String, Value>,
) -> Result<(), Rejection> {
    let values = match (line.names.len(), value) {
        (1, value) => vec![value],
        (n, Value::List(items)) if items.len() == n => items.to_vec(),
        (_, Value::List(items)) => {
            let flat = |v: &Value| {
                if let Value::List(inner) = v {
                    inner.to_vec()
                } else {
                    vec![v.clone()]
                }
            };
            items.iter().flat_map(flat).collect()
        }
        (_, other) => vec![other],
    };
    if values.len() != line.names.len() {
        let message = format!("{} names but {} values", line.names.len(), values.len());
        return Err(at(&line.at, EvalError::Value(message)));
    }
    for (name, value) in line.names.iter().zip(values) {
        vars.insert(name.clone(), value.clone().parsed());
        shown.insert(name.clone(), value);
    }
    Ok(())
}
