//! Explanations written cheaply in a component: numbers formatted as
//! `f64`'s `Display` does without float formatting, and text appended piece
//! by piece without `core::fmt` ([`crate::JudgmentWriter::explain_with`]).

use std::fmt::{self, Write as _};

/// An `f64` that formats as `f64`'s `Display` does, byte for byte, but
/// whole numbers through integer formatting: in a component, float
/// formatting emulates 128-bit multiplies, and explanations are mostly
/// whole numbers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Number(pub f64);

impl Number {
    /// The digits of a whole number below 2^53, written by hand into
    /// `buffer` (what `f64`'s `Display` writes for it); `None` for
    /// anything else.
    fn whole(self, buffer: &mut [u8; 24]) -> Option<&str> {
        let value = self.0;
        // Below 2^53 every whole f64 is an exact integer; NaN and the
        // infinities have no whole part and fall through.
        if value.fract() != 0.0 || value.abs() >= 9_007_199_254_740_992.0 {
            return None;
        }
        if value == 0.0 && value.is_sign_negative() {
            return Some("-0");
        }
        let mut rest = value.abs() as u64;
        let mut at = buffer.len();
        loop {
            at -= 1;
            buffer[at] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        if value < 0.0 {
            at -= 1;
            buffer[at] = b'-';
        }
        Some(std::str::from_utf8(&buffer[at..]).expect("ASCII digits"))
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Flags are left to f64's own formatting.
        let plain = f.precision().is_none() && f.width().is_none() && !f.sign_plus();
        if plain && let Some(digits) = self.whole(&mut [0; 24]) {
            return f.write_str(digits);
        }
        fmt::Display::fmt(&self.0, f)
    }
}

/// An explanation written piece by piece ([`crate::JudgmentWriter::explain_with`]):
/// what `format_args!` would write, without `core::fmt`'s machinery, which
/// in a component costs more than the rule that finds the answer.
pub struct ExplanationText<'s> {
    text: &'s mut String,
}

impl<'s> ExplanationText<'s> {
    /// Pieces appended to `text` (how an owned path writes the same
    /// explanation as its fast path).
    pub fn appending_to(text: &'s mut String) -> Self {
        ExplanationText { text }
    }

    /// Appends text.
    pub fn push_str(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    /// Appends a number as `f64`'s `Display` writes it (see [`Number`]).
    pub fn push_number(&mut self, value: f64) -> &mut Self {
        match Number(value).whole(&mut [0; 24]) {
            Some(digits) => self.text.push_str(digits),
            // Writing into a String cannot fail.
            None => {
                let _ = write!(self.text, "{value}");
            }
        }
        self
    }
}
