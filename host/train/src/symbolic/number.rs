//! Exact numbers for the template evaluator. Python evaluates templates in
//! binary floats, where `0.29 * 100` is `28.999999999999996` and `int()` of
//! it is 28; here every number is an exact fraction of two 128-bit integers,
//! so `int(0.29 * 100)` is 29 and `is_int(y / d)` means exactly that. An
//! operation whose result does not fit is an [`EvalError::Overflow`], never
//! a wrapped or rounded value.
//!
//! Each number also remembers which Python type it would have (int, float
//! or Fraction): only to be shown the way Python shows it (`4` / `4.0` /
//! `1/2`) when a computed value is put into a question.

use super::eval_error::EvalError;
use std::cmp::Ordering;

/// `num / den` in lowest terms with `den > 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ratio {
    num: i128,
    den: i128,
}

fn gcd(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    // Neither side is i128::MIN (`Ratio::new` refuses it), so this fits.
    a as i128
}

fn checked(value: Option<i128>) -> Result<i128, EvalError> {
    value.ok_or(EvalError::Overflow)
}

impl Ratio {
    /// The integer `n`.
    pub(crate) fn int(n: i128) -> Ratio {
        Ratio { num: n, den: 1 }
    }

    /// `num / den`, reduced; a zero `den` is a division by zero.
    pub(crate) fn new(num: i128, den: i128) -> Result<Ratio, EvalError> {
        if den == 0 {
            return Err(EvalError::DivisionByZero);
        }
        if num == i128::MIN || den == i128::MIN {
            return Err(EvalError::Overflow);
        }
        let g = gcd(num, den).max(1);
        let (mut num, mut den) = (num / g, den / g);
        if den < 0 {
            num = checked(num.checked_neg())?;
            den = checked(den.checked_neg())?;
        }
        Ok(Ratio { num, den })
    }

    pub(crate) fn numer(self) -> i128 {
        self.num
    }

    pub(crate) fn denom(self) -> i128 {
        self.den
    }

    pub(crate) fn is_integer(self) -> bool {
        self.den == 1
    }

    pub(crate) fn is_zero(self) -> bool {
        self.num == 0
    }

    pub(crate) fn add(self, o: Ratio) -> Result<Ratio, EvalError> {
        let g = gcd(self.den, o.den);
        let left = checked(self.num.checked_mul(o.den / g))?;
        let right = checked(o.num.checked_mul(self.den / g))?;
        Ratio::new(
            checked(left.checked_add(right))?,
            checked((self.den / g).checked_mul(o.den))?,
        )
    }

    pub(crate) fn neg(self) -> Result<Ratio, EvalError> {
        Ok(Ratio {
            num: checked(self.num.checked_neg())?,
            den: self.den,
        })
    }

    pub(crate) fn sub(self, o: Ratio) -> Result<Ratio, EvalError> {
        self.add(o.neg()?)
    }

    pub(crate) fn mul(self, o: Ratio) -> Result<Ratio, EvalError> {
        let g1 = gcd(self.num, o.den).max(1);
        let g2 = gcd(o.num, self.den).max(1);
        let num = checked((self.num / g1).checked_mul(o.num / g2))?;
        let den = checked((self.den / g2).checked_mul(o.den / g1))?;
        Ratio::new(num, den)
    }

    pub(crate) fn div(self, o: Ratio) -> Result<Ratio, EvalError> {
        if o.num == 0 {
            return Err(EvalError::DivisionByZero);
        }
        self.mul(Ratio::new(o.den, o.num)?)
    }

    /// The largest integer not above the value (Python's `math.floor`).
    pub(crate) fn floor(self) -> i128 {
        self.num.div_euclid(self.den)
    }

    /// The integer part, rounding toward zero (Python's `int()`).
    pub(crate) fn trunc(self) -> i128 {
        self.num / self.den
    }

    /// Python's `//`: the floor of the quotient.
    pub(crate) fn floor_div(self, o: Ratio) -> Result<Ratio, EvalError> {
        Ok(Ratio::int(self.div(o)?.floor()))
    }

    /// Python's `%`: the remainder takes the divisor's sign.
    pub(crate) fn modulo(self, o: Ratio) -> Result<Ratio, EvalError> {
        self.sub(o.mul(self.floor_div(o)?)?)
    }

    /// `self ** exp` for an integer exponent; `0 ** -1` divides by zero.
    pub(crate) fn pow(self, exp: i128) -> Result<Ratio, EvalError> {
        if exp < 0 {
            return Ratio::int(1).div(self.pow(checked(exp.checked_neg())?)?);
        }
        if self.den == 1 && self.num.unsigned_abs() <= 1 {
            // 0, 1 and -1 stay small whatever the exponent.
            let n = match (self.num, exp) {
                (_, 0) => 1,
                (-1, e) if e % 2 == 1 => -1,
                (-1, _) => 1,
                (n, _) => n,
            };
            return Ok(Ratio::int(n));
        }
        let exp = u32::try_from(exp).map_err(|_| EvalError::Overflow)?;
        Ratio::new(
            checked(self.num.checked_pow(exp))?,
            checked(self.den.checked_pow(exp))?,
        )
    }

    /// Rounded to `digits` decimals, ties to even (Python's `round`).
    pub(crate) fn round(self, digits: i128) -> Result<Ratio, EvalError> {
        if !(-30..=30).contains(&digits) {
            return Err(EvalError::Value(format!("round() to {digits} digits")));
        }
        let scale = Ratio::int(10i128.pow(digits.unsigned_abs() as u32));
        let scaled = if digits >= 0 {
            self.mul(scale)?
        } else {
            self.div(scale)?
        };
        let low = scaled.floor();
        let rounded = match scaled.sub(Ratio::int(low))?.cmp(&Ratio { num: 1, den: 2 }) {
            Ordering::Less => low,
            Ordering::Greater => checked(low.checked_add(1))?,
            Ordering::Equal if low % 2 == 0 => low,
            Ordering::Equal => checked(low.checked_add(1))?,
        };
        let rounded = Ratio::int(rounded);
        if digits >= 0 {
            rounded.div(scale)
        } else {
            rounded.mul(scale)
        }
    }

    /// The value as a terminating decimal with at least `min_places` places,
    /// or `None` when it has none (a third) or needs more than 30 places.
    pub(crate) fn decimal(self, min_places: usize) -> Option<String> {
        let mut places = 0;
        let mut scaled = self;
        while !scaled.is_integer() {
            places += 1;
            if places > 30 {
                return None;
            }
            scaled = scaled.mul(Ratio::int(10)).ok()?;
        }
        let places = places.max(min_places);
        let scaled = self
            .mul(Ratio::int(10i128.checked_pow(places as u32)?))
            .ok()?;
        let digits = format!("{:0>width$}", scaled.num.unsigned_abs(), width = places + 1);
        let (int_part, frac_part) = digits.split_at(digits.len() - places);
        let sign = if self.num < 0 { "-" } else { "" };
        Some(match places {
            0 => format!("{sign}{int_part}"),
            _ => format!("{sign}{int_part}.{frac_part}"),
        })
    }
}

impl PartialOrd for Ratio {
    fn partial_cmp(&self, other: &Ratio) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ratio {
    /// Exact, and free of overflow: integer parts first, then the
    /// fractional parts compared through their reciprocals (Euclid's steps).
    fn cmp(&self, other: &Ratio) -> Ordering {
        let (a, b) = (self.floor(), other.floor());
        if a != b {
            return a.cmp(&b);
        }
        let ra = self.num.rem_euclid(self.den);
        let rb = other.num.rem_euclid(other.den);
        match (ra == 0, rb == 0) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            // ra/den_a < rb/den_b  ⇔  den_a/ra > den_b/rb
            (false, false) => Ratio {
                num: other.den,
                den: rb,
            }
            .cmp(&Ratio {
                num: self.den,
                den: ra,
            }),
        }
    }
}

/// Which Python type a number would have: it decides only how the number is
/// shown, and what `/` (always a float) and `//` give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Int,
    Float,
    Fraction,
}

/// An exact value with the Python type it stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Number {
    pub(crate) value: Ratio,
    pub(crate) kind: Kind,
}

impl Number {
    pub(crate) fn int(n: i128) -> Number {
        Number {
            value: Ratio::int(n),
            kind: Kind::Int,
        }
    }

    pub(crate) fn new(value: Ratio, kind: Kind) -> Number {
        Number { value, kind }
    }

    /// The type Python gives `self op other` for `+ - * // %`: a float
    /// wins, then a Fraction, then int.
    pub(crate) fn join(self, other: Number) -> Kind {
        match (self.kind, other.kind) {
            (Kind::Float, _) | (_, Kind::Float) => Kind::Float,
            (Kind::Fraction, _) | (_, Kind::Fraction) => Kind::Fraction,
            _ => Kind::Int,
        }
    }

    /// `12` (an int), `0.25` or `3.` (floats), with an optional sign,
    /// exactly; `None` for anything else (exponents, `inf`, `1_000`) or a
    /// number too large.
    pub(crate) fn parse(text: &str) -> Option<Number> {
        let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
        let (int_part, frac_part) = match unsigned.split_once('.') {
            Some((a, b)) => (a, Some(b)),
            None => (unsigned, None),
        };
        let digits = format!("{int_part}{}", frac_part.unwrap_or(""));
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let mut mantissa: i128 = digits.parse().ok()?;
        if text.starts_with('-') {
            mantissa = -mantissa;
        }
        match frac_part {
            None => Some(Number::int(mantissa)),
            Some(frac) => {
                let scale = 10i128.checked_pow(frac.len() as u32)?;
                Some(Number::new(Ratio::new(mantissa, scale).ok()?, Kind::Float))
            }
        }
    }

    /// The integer this is, if it is one (whatever its type).
    pub(crate) fn as_integer(self) -> Option<i128> {
        self.value.is_integer().then(|| self.value.numer())
    }

    /// Shown as Python's `str()` shows it: `12`, `2.5`, `4.0`, `3/4`. A
    /// float without a short exact decimal (a third) is refused: Python
    /// would print sixteen digits of a value that is not the real one.
    pub(crate) fn display(self) -> Result<String, EvalError> {
        match self.kind {
            Kind::Int => Ok(self.value.numer().to_string()),
            Kind::Fraction if self.value.is_integer() => Ok(self.value.numer().to_string()),
            Kind::Fraction => Ok(format!("{}/{}", self.value.numer(), self.value.denom())),
            Kind::Float => {
                // Python prints the double nearest to a decimal of up to 15
                // significant digits as that decimal; beyond, it may not.
                let significant = |text: &str| {
                    text.chars()
                        .filter(char::is_ascii_digit)
                        .skip_while(|c| *c == '0')
                        .count()
                };
                match self.value.decimal(1) {
                    Some(text) if significant(&text) <= 15 => Ok(text),
                    _ => Err(EvalError::Value(format!(
                        "{}/{} has no short decimal form to show",
                        self.value.numer(),
                        self.value.denom()
                    ))),
                }
            }
        }
    }
}
