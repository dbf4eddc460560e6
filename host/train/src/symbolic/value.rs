//! The values template variables and expressions take.

use super::eval_error::{EvalError, type_error};
use super::number::{Kind, Number, Ratio};
use std::sync::Arc;

/// A value of a template variable or expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Num(Number),
    Str(String),
    Bool(bool),
    /// A list or tuple, shared: a name list is read on every draw.
    List(Arc<[Value]>),
}

impl Value {
    pub(crate) fn kind_name(&self) -> &'static str {
        match self {
            Value::Num(_) => "a number",
            Value::Str(_) => "text",
            Value::Bool(_) => "a boolean",
            Value::List(_) => "a list",
        }
    }

    /// Python's truth value.
    pub(crate) fn truthy(&self) -> bool {
        match self {
            Value::Num(n) => !n.value.is_zero(),
            Value::Str(s) => !s.is_empty(),
            Value::Bool(b) => *b,
            Value::List(items) => !items.is_empty(),
        }
    }

    /// As `str()` shows it, for a question's text. A list is refused (Python
    /// would print its brackets and quotes into the question).
    pub(crate) fn display(&self) -> Result<String, EvalError> {
        match self {
            Value::Num(n) => n.display(),
            Value::Str(s) => Ok(s.clone()),
            Value::Bool(b) => Ok(if *b { "True" } else { "False" }.to_string()),
            Value::List(_) => type_error("a list cannot be shown in a question".into()),
        }
    }

    /// The number this is (a boolean counts as 0 or 1, as in Python).
    pub(crate) fn number(&self) -> Result<Number, EvalError> {
        match self {
            Value::Num(n) => Ok(*n),
            Value::Bool(b) => Ok(Number::int(i128::from(*b))),
            Value::Str(s) => type_error(format!("expected a number, got the text {s:?}")),
            Value::List(_) => type_error("expected a number, got a list".into()),
        }
    }

    pub(crate) fn integer(&self, what: &str) -> Result<i128, EvalError> {
        let n = self.number()?;
        n.as_integer().ok_or_else(|| {
            let shown = n.display().unwrap_or_else(|_| "a fraction".into());
            EvalError::Type(format!("{what} must be an integer, not {shown}"))
        })
    }

    pub(crate) fn list(&self, what: &str) -> Result<&Arc<[Value]>, EvalError> {
        match self {
            Value::List(items) => Ok(items),
            other => type_error(format!("{what} must be a list, not {}", other.kind_name())),
        }
    }

    /// A variable's value as expressions see it (the package's
    /// `parse_value`): text that is a whole number (`"12"`), a decimal
    /// (`"2.5"`) or a fraction (`"3/4"`) becomes that number, a float that
    /// is whole becomes an int; anything else is kept.
    pub(crate) fn parsed(self) -> Value {
        match self {
            Value::Num(n) if n.kind == Kind::Float && n.value.is_integer() => {
                Value::Num(Number::new(n.value, Kind::Int))
            }
            Value::Str(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
                Number::parse(&s).map_or(Value::Str(s), Value::Num)
            }
            Value::Str(s) => {
                if let Some(n) = Number::parse(s.trim()) {
                    return Value::Num(Number::new(n.value, Kind::Float));
                }
                let fraction = s.split_once('/').and_then(|(a, b)| {
                    let digits = |t: &str| {
                        !t.is_empty()
                            && t.trim_start_matches('-')
                                .bytes()
                                .all(|c| c.is_ascii_digit())
                    };
                    if !digits(a) || !digits(b) {
                        return None;
                    }
                    Ratio::new(a.parse().ok()?, b.parse().ok()?).ok()
                });
                fraction.map_or(Value::Str(s), |r| {
                    Value::Num(Number::new(r, Kind::Fraction))
                })
            }
            other => other,
        }
    }

    /// A value of the package's `replacements.json` (name lists and the like).
    pub(crate) fn from_json(json: &serde_json::Value) -> Option<Value> {
        Some(match json {
            serde_json::Value::String(s) => Value::Str(s.clone()),
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Value::Num(Number::int(i128::from(i))),
                None => Value::Num(Number::new(
                    Number::parse(&n.to_string())?.value,
                    Kind::Float,
                )),
            },
            serde_json::Value::Array(items) => Value::List(
                items
                    .iter()
                    .map(Value::from_json)
                    .collect::<Option<Vec<_>>>()?
                    .into(),
            ),
            _ => return None,
        })
    }
}
