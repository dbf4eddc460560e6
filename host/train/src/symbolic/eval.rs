//! Evaluating a parsed expression against a draw's variables. Values are
//! numbers (exact, see [`super::number`]), text, booleans and lists; the
//! operators behave as Python's do on them, except that anything Python
//! would do that is of no use to a word problem (repeating text, comparing
//! text with numbers, …) is a typed [`EvalError`] rather than a result.
//!
//! The random helpers (`sample`, `range`, …) describe a set of
//! [`Choices`]; a draw picks one uniformly with the caller's generator,
//! and recovering a problem's original values enumerates them.

use super::eval_error::{EvalError, type_error, value_error};
use super::expr::{BinOp, CmpOp, Expr};
use super::helpers::{Func, call, choices, too_many};
use super::number::{Kind, Number};
use super::value::Value;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use verifine_base::SplitMix64;

/// The variables of one draw (as expressions see them) and the template's
/// name lists; a variable hides a list of the same name.
pub(crate) struct Scope<'a> {
    pub(crate) vars: &'a HashMap<String, Value>,
    pub(crate) lists: &'a BTreeMap<String, Value>,
}

impl Scope<'_> {
    /// The value of `expr`; a random helper draws with `rng`, and without
    /// one (conditions, answers) it is an error.
    pub(crate) fn eval(
        &self,
        expr: &Expr,
        rng: &mut Option<&mut SplitMix64>,
    ) -> Result<Value, EvalError> {
        Ok(match expr {
            Expr::Num(n) => Value::Num(*n),
            Expr::Str(s) => Value::Str(s.clone()),
            Expr::Bool(b) => Value::Bool(*b),
            Expr::Name(name) => match self.vars.get(name).or_else(|| self.lists.get(name)) {
                Some(value) => value.clone(),
                None => return value_error(format!("`{name}` has no value")),
            },
            Expr::List(items) => Value::List(
                items
                    .iter()
                    .map(|e| self.eval(e, rng))
                    .collect::<Result<Vec<_>, _>>()?
                    .into(),
            ),
            Expr::Neg(e) => {
                let n = self.eval(e, rng)?.number()?;
                Value::Num(Number::new(n.value.neg()?, n.kind))
            }
            Expr::Pos(e) => Value::Num(self.eval(e, rng)?.number()?),
            Expr::Not(e) => Value::Bool(!self.eval(e, rng)?.truthy()),
            Expr::Binary(op, a, b) => binary(*op, self.eval(a, rng)?, self.eval(b, rng)?)?,
            Expr::Compare(first, rest) => {
                let mut left = self.eval(first, rng)?;
                for (op, e) in rest {
                    let right = self.eval(e, rng)?;
                    if !compare(*op, &left, &right)? {
                        return Ok(Value::Bool(false));
                    }
                    left = right;
                }
                Value::Bool(true)
            }
            Expr::And(items) => {
                for e in items {
                    if !self.eval(e, rng)?.truthy() {
                        return Ok(Value::Bool(false));
                    }
                }
                Value::Bool(true)
            }
            Expr::Or(items) => {
                for e in items {
                    if self.eval(e, rng)?.truthy() {
                        return Ok(Value::Bool(true));
                    }
                }
                Value::Bool(false)
            }
            Expr::If(test, then, other) => {
                let branch = if self.eval(test, rng)?.truthy() {
                    then
                } else {
                    other
                };
                self.eval(branch, rng)?
            }
            Expr::Index(list, index) => {
                let list = self.eval(list, rng)?;
                let items = list.list("an indexed value")?;
                let i = self.eval(index, rng)?.integer("an index")?;
                let at = if i < 0 { items.len() as i128 + i } else { i };
                match usize::try_from(at).ok().and_then(|at| items.get(at)) {
                    Some(item) => item.clone(),
                    None => {
                        return value_error(format!("index {i} outside a list of {}", items.len()));
                    }
                }
            }
            Expr::Call(func, args) => {
                let args = args
                    .iter()
                    .map(|e| self.eval(e, rng))
                    .collect::<Result<Vec<_>, _>>()?;
                if func.is_random() {
                    let Some(rng) = rng.as_deref_mut() else {
                        return type_error(format!(
                            "{}() draws at random: only #init lines may call it",
                            func.name()
                        ));
                    };
                    if *func == Func::RangeList {
                        return Ok(Value::List(
                            choices(*func, &args)?.all().ok_or_else(too_many)??.into(),
                        ));
                    }
                    choices(*func, &args)?.draw(rng)?
                } else {
                    call(*func, &args)?
                }
            }
        })
    }
}

fn binary(op: BinOp, a: Value, b: Value) -> Result<Value, EvalError> {
    match (op, &a, &b) {
        (BinOp::Add, Value::Str(x), Value::Str(y)) => return Ok(Value::Str(format!("{x}{y}"))),
        (BinOp::Add, Value::List(x), Value::List(y)) => {
            return Ok(Value::List([&x[..], &y[..]].concat().into()));
        }
        _ => {}
    }
    let (x, y) = match (a.number(), b.number()) {
        (Ok(x), Ok(y)) => (x, y),
        _ => {
            return type_error(format!(
                "`{}` between {} and {}",
                op.symbol(),
                a.kind_name(),
                b.kind_name()
            ));
        }
    };
    let joined = x.join(y);
    let (value, kind) = match op {
        BinOp::Add => (x.value.add(y.value)?, joined),
        BinOp::Sub => (x.value.sub(y.value)?, joined),
        BinOp::Mul => (x.value.mul(y.value)?, joined),
        BinOp::Div => (
            x.value.div(y.value)?,
            if joined == Kind::Int {
                Kind::Float
            } else {
                joined
            },
        ),
        BinOp::FloorDiv => (x.value.floor_div(y.value)?, joined),
        BinOp::Mod => (x.value.modulo(y.value)?, joined),
        BinOp::Pow => {
            let Some(exp) = y.as_integer() else {
                return type_error(format!(
                    "a power with a non-integer exponent ({})",
                    y.display()?
                ));
            };
            let kind = if joined == Kind::Int && exp < 0 {
                Kind::Float
            } else {
                joined
            };
            (x.value.pow(exp)?, kind)
        }
    };
    Ok(Value::Num(Number::new(value, kind)))
}

fn compare(op: CmpOp, a: &Value, b: &Value) -> Result<bool, EvalError> {
    let ordering = match (a, b) {
        (Value::Str(x), Value::Str(y)) => Some(x.cmp(y)),
        (Value::List(_), _) | (_, Value::List(_)) => None,
        (Value::Str(_), _) | (_, Value::Str(_)) => None,
        _ => Some(a.number()?.value.cmp(&b.number()?.value)),
    };
    let Some(ordering) = ordering else {
        return match op {
            CmpOp::Eq => Ok(a == b),
            CmpOp::Ne => Ok(a != b),
            _ => type_error(format!(
                "`{}` between {} and {}",
                op.symbol(),
                a.kind_name(),
                b.kind_name()
            )),
        };
    };
    Ok(match op {
        CmpOp::Eq => ordering == Ordering::Equal,
        CmpOp::Ne => ordering != Ordering::Equal,
        CmpOp::Lt => ordering == Ordering::Less,
        CmpOp::Le => ordering != Ordering::Greater,
        CmpOp::Gt => ordering == Ordering::Greater,
        CmpOp::Ge => ordering != Ordering::Less,
    })
}
