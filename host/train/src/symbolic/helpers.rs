//! The helper functions templates call: which there are ([`Func`]), the
//! sets of [`Choices`] the random ones draw from (uniformly, with the
//! caller's generator; recovering an original problem lists them), and
//! what the others compute.

use super::eval_error::EvalError;
use super::number::{Kind, Number, Ratio};
use super::value::Value;
use std::sync::Arc;
use verifine_base::SplitMix64;

/// The most elements `range_list` or `range_str` may materialise, and the
/// most choices enumerated when recovering original values.
pub(crate) const MAX_LIST: u64 = 100_000;

/// The helper functions templates may call (the English templates' whole
/// set, plus `float`, `str` and `len`); the first six draw at random and
/// so are allowed only in `#init` lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Func {
    Sample,
    SampleSequential,
    Range,
    RangeList,
    RangeStr,
    Arange,
    IsInt,
    Divides,
    Int,
    Float,
    Round,
    EnsureInt,
    Fraction,
    Str,
    Len,
}

/// Each helper's name in a template.
const NAMES: [(&str, Func); 15] = [
    ("sample", Func::Sample),
    ("sample_sequential", Func::SampleSequential),
    ("range", Func::Range),
    ("range_list", Func::RangeList),
    ("range_str", Func::RangeStr),
    ("arange", Func::Arange),
    ("is_int", Func::IsInt),
    ("divides", Func::Divides),
    ("int", Func::Int),
    ("float", Func::Float),
    ("round", Func::Round),
    ("ensure_int", Func::EnsureInt),
    ("Fraction", Func::Fraction),
    ("str", Func::Str),
    ("len", Func::Len),
];

impl Func {
    pub(crate) fn from_name(name: &str) -> Option<Func> {
        NAMES.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
    }

    pub(crate) fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|(_, f)| *f == self)
            .map_or("?", |(n, _)| n)
    }

    /// The fewest and most arguments it takes.
    pub(crate) fn arity(self) -> (usize, usize) {
        match self {
            Func::Sample | Func::Round => (1, 2),
            Func::Range | Func::RangeList | Func::Arange => (2, 3),
            Func::RangeStr => (4, 4),
            Func::SampleSequential | Func::Divides => (2, 2),
            _ => (1, 1),
        }
    }

    /// Whether it draws from a set of possibilities (only in `#init`).
    pub(crate) fn is_random(self) -> bool {
        matches!(
            self,
            Func::Sample
                | Func::SampleSequential
                | Func::Range
                | Func::RangeList
                | Func::RangeStr
                | Func::Arange
        )
    }
}

/// What a random helper may give: drawn uniformly, or listed whole.
pub(crate) enum Choices {
    Items(Arc<[Value]>),
    /// `start, start + step, …` (`len` of them).
    Range {
        start: i128,
        step: i128,
        len: u64,
    },
    /// `points` evenly spaced values from `start` to `end`, rounded to
    /// `places` decimals and kept as text (as the package keeps them).
    Arange {
        start: Ratio,
        end: Ratio,
        points: u64,
        places: usize,
    },
    /// `n` consecutive items, wrapping around, from a random start.
    Rotations {
        items: Arc<[Value]>,
        n: usize,
    },
    /// `n` distinct items in random order (not enumerable).
    Subsets {
        items: Arc<[Value]>,
        n: usize,
    },
}

impl Choices {
    fn len(&self) -> u64 {
        match self {
            Choices::Items(items) | Choices::Rotations { items, .. } => items.len() as u64,
            Choices::Range { len, .. } => *len,
            Choices::Arange { points, .. } => *points,
            Choices::Subsets { .. } => 1,
        }
    }

    fn get(&self, i: u64) -> Result<Value, EvalError> {
        Ok(match self {
            Choices::Items(items) => items[i as usize].clone(),
            Choices::Range { start, step, .. } => {
                let offset = step.checked_mul(i as i128).ok_or(EvalError::Overflow)?;
                Value::Num(Number::int(
                    start.checked_add(offset).ok_or(EvalError::Overflow)?,
                ))
            }
            Choices::Arange {
                start,
                end,
                points,
                places,
            } => {
                let fraction = if *points == 1 {
                    Ratio::int(0)
                } else {
                    Ratio::new(i as i128, *points as i128 - 1)?
                };
                let value = start
                    .add(end.sub(*start)?.mul(fraction)?)?
                    .round(*places as i128)?;
                Value::Str(Number::new(value, Kind::Float).display()?)
            }
            Choices::Rotations { items, n } => Value::List(
                (0..*n)
                    .map(|k| items[(i as usize + k) % items.len()].clone())
                    .collect(),
            ),
            Choices::Subsets { .. } => {
                return value_error("a sample of several items has no list of choices".into());
            }
        })
    }

    /// One choice, uniformly.
    pub(crate) fn draw(&self, rng: &mut SplitMix64) -> Result<Value, EvalError> {
        if let Choices::Subsets { items, n } = self {
            let mut pool = items.to_vec();
            for k in 0..*n {
                let pick = k + rng.below(pool.len() - k);
                pool.swap(k, pick);
            }
            pool.truncate(*n);
            return Ok(Value::List(pool.into()));
        }
        let len = usize::try_from(self.len()).map_err(|_| EvalError::Overflow)?;
        self.get(rng.below(len) as u64)
    }

    /// Every choice, or `None` when they cannot be listed (or are too many).
    pub(crate) fn all(&self) -> Option<Result<Vec<Value>, EvalError>> {
        if matches!(self, Choices::Subsets { .. }) || self.len() > MAX_LIST {
            return None;
        }
        Some((0..self.len()).map(|i| self.get(i)).collect())
    }
}

pub(crate) fn too_many() -> EvalError {
    EvalError::Value(format!("more than {MAX_LIST} values"))
}

/// The choices of a random helper given its evaluated arguments.
pub(crate) fn choices(func: Func, args: &[Value]) -> Result<Choices, EvalError> {
    match func {
        Func::Sample => {
            let items = args[0].list("sample()'s first argument")?.clone();
            let n = args
                .get(1)
                .map_or(Ok(1), |n| n.integer("sample()'s count"))?;
            if items.is_empty() || n < 1 || n > items.len() as i128 {
                return value_error(format!("sample() of {n} from {} items", items.len()));
            }
            Ok(if n == 1 {
                Choices::Items(items)
            } else {
                Choices::Subsets {
                    items,
                    n: n as usize,
                }
            })
        }
        Func::SampleSequential => {
            let items = args[0]
                .list("sample_sequential()'s first argument")?
                .clone();
            let n = args[1].integer("sample_sequential()'s count")?;
            if items.is_empty() || !(1..=MAX_LIST as i128).contains(&n) {
                return value_error(format!(
                    "sample_sequential() of {n} from {} items",
                    items.len()
                ));
            }
            Ok(Choices::Rotations {
                items,
                n: n as usize,
            })
        }
        Func::Range | Func::RangeList => {
            let (start, stop) = (
                args[0].integer("range()'s start")?,
                args[1].integer("range()'s stop")?,
            );
            let step = args.get(2).map_or(Ok(1), |s| s.integer("range()'s step"))?;
            let span = |a: i128, b: i128| b.checked_sub(a).ok_or(EvalError::Overflow);
            let len = match step {
                0 => return value_error("range() with step 0".into()),
                s if s > 0 && stop > start => (span(start, stop)? - 1) / s + 1,
                s if s < 0 && stop < start => {
                    (span(stop, start)? - 1) / s.checked_neg().ok_or(EvalError::Overflow)? + 1
                }
                _ => 0,
            };
            if len == 0 && func == Func::Range {
                return value_error(format!("range({start}, {stop}, {step}) is empty"));
            }
            Ok(Choices::Range {
                start,
                step,
                len: u64::try_from(len).map_err(|_| EvalError::Overflow)?,
            })
        }
        Func::RangeStr => {
            let range = choices(Func::RangeList, &args[..3])?
                .all()
                .ok_or_else(too_many)??;
            let words = args[3].list("range_str()'s list")?;
            let mut items = Vec::new();
            for i in range {
                let k = i.integer("an index")?;
                if k >= 1 && k <= words.len() as i128 {
                    items.push(Value::List(Arc::new([words[k as usize - 1].clone(), i])));
                }
            }
            if items.is_empty() {
                return value_error("range_str() has no choices".into());
            }
            Ok(Choices::Items(items.into()))
        }
        Func::Arange => {
            let (start, end) = (args[0].number()?.value, args[1].number()?.value);
            let step = args.get(2).map_or(Ok(Number::int(1)), Value::number)?;
            if start > end || step.value <= Ratio::int(0) || step.kind == Kind::Fraction {
                return value_error(
                    "arange() needs start <= end and a positive decimal step".into(),
                );
            }
            // Decimal places of the step as Python writes it (`1` → 0, `0.25` → 2, `1.0` → 1).
            let places = step
                .display()?
                .split_once('.')
                .map_or(0, |(_, frac)| frac.len());
            let steps = end.sub(start)?.div(step.value)?.round(0)?.numer();
            let points = steps.checked_add(1).ok_or(EvalError::Overflow)?;
            Ok(Choices::Arange {
                start,
                end,
                points: u64::try_from(points).map_err(|_| EvalError::Overflow)?,
                places,
            })
        }
        _ => Err(EvalError::Type(format!("{}() does not draw", func.name()))),
    }
}

fn value_error<T>(message: String) -> Result<T, EvalError> {
    Err(EvalError::Value(message))
}

/// The helpers that do not draw.
pub(crate) fn call(func: Func, args: &[Value]) -> Result<Value, EvalError> {
    let first = &args[0];
    let num = |n: Ratio, kind| Value::Num(Number::new(n, kind));
    Ok(match func {
        Func::IsInt => Value::Bool(match first {
            Value::Num(n) => n.value.is_integer(),
            Value::Bool(_) => true,
            _ => false,
        }),
        Func::Divides => {
            let (a, b) = (first.number()?.value, args[1].number()?.value);
            Value::Bool(!b.is_zero() && a.modulo(b)?.is_zero())
        }
        Func::Int => match first {
            Value::Str(s) => match Number::parse(s.trim()) {
                Some(n) if n.kind == Kind::Int => Value::Num(n),
                _ => return value_error(format!("int() of text {s:?}")),
            },
            other => Value::Num(Number::int(other.number()?.value.trunc())),
        },
        Func::Float => match first {
            Value::Str(s) => match Number::parse(s.trim()) {
                Some(n) => num(n.value, Kind::Float),
                None => return value_error(format!("float() of text {s:?}")),
            },
            other => num(other.number()?.value, Kind::Float),
        },
        Func::Round => {
            let n = first.number()?;
            match args.get(1) {
                None => num(n.value.round(0)?, Kind::Int),
                Some(digits) => num(n.value.round(digits.integer("round()'s digits")?)?, n.kind),
            }
        }
        Func::EnsureInt => match first.number()?.as_integer() {
            Some(i) => Value::Num(Number::int(i)),
            None => {
                return value_error(format!(
                    "ensure_int({}): not an integer",
                    first.number()?.display()?
                ));
            }
        },
        Func::Fraction => match first {
            Value::Num(n) if n.kind == Kind::Float && !n.value.is_integer() => {
                // The package's limit_denominator(): exact here, so only a
                // denominator it would keep is accepted.
                if n.value.denom() > 1_000_000 {
                    return value_error(
                        "Fraction() of a value with a denominator above a million".into(),
                    );
                }
                Value::Str(format!("{}/{}", n.value.numer(), n.value.denom()))
            }
            Value::Num(n) if n.kind == Kind::Float => Value::Str(n.value.numer().to_string()),
            other => Value::Str(other.display()?),
        },
        Func::Str => Value::Str(first.display()?),
        Func::Len => match first {
            Value::Str(s) => Value::Num(Number::int(s.chars().count() as i128)),
            other => Value::Num(Number::int(other.list("len()'s argument")?.len() as i128)),
        },
        _ => return value_error(format!("{}() draws at random", func.name())),
    })
}
