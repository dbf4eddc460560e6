//! Reading a policy's worked solution: step lines `a op b = c` (op one of
//! `+ - *`, integers possibly negative) and a final line `#### N`.
//!
//! The final line is the first line that starts with `####` (after
//! whitespace); the steps are the step lines before it (all of them when
//! there is none). Every other line is ignored, except that non-blank text
//! after the final line is noted.

use crate::problem::Op;

/// One worked step `a op b = c`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// The first operand.
    pub a: i64,
    /// The operator.
    pub op: Op,
    /// The second operand.
    pub b: i64,
    /// The stated result.
    pub c: i64,
}

impl Step {
    /// Whether `a op b` really is `c` (an overflowing step is wrong).
    pub fn computes(&self) -> bool {
        self.op.apply(self.a, self.b) == Some(self.c)
    }
}

/// The final line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Final {
    /// The integer after `####`; `None` when it is missing, not an integer or
    /// out of the i64 range.
    pub value: Option<i64>,
    /// Whether any non-blank line follows it.
    pub text_after: bool,
}

/// A parsed response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Response {
    /// The step lines before the final line, in order.
    pub steps: Vec<Step>,
    /// The final line, if the response has one.
    pub final_line: Option<Final>,
}

/// Parses `text`; never fails (malformed lines are simply not steps).
pub fn parse(text: &str) -> Response {
    let mut response = Response::default();
    let mut lines = text.lines();
    for line in lines.by_ref() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("####") {
            response.final_line = Some(Final {
                value: integer(rest.trim()),
                text_after: false,
            });
            break;
        }
        if let Some(step) = step(line) {
            response.steps.push(step);
        }
    }
    if let Some(final_line) = &mut response.final_line {
        final_line.text_after = lines.any(|line| !line.trim().is_empty());
    }
    response
}

/// A whole string that is one integer: an optional `-` and ASCII digits.
fn integer(text: &str) -> Option<i64> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// `a op b = c` with optional spaces between the parts, nothing else.
fn step(line: &str) -> Option<Step> {
    let mut cursor = Cursor {
        bytes: line.as_bytes(),
        at: 0,
    };
    let a = cursor.integer()?;
    cursor.spaces();
    let op = Op::from_symbol(cursor.byte()?)?;
    cursor.spaces();
    let b = cursor.integer()?;
    cursor.spaces();
    (cursor.byte()? == b'=').then_some(())?;
    cursor.spaces();
    let c = cursor.integer()?;
    cursor.spaces();
    (cursor.at == cursor.bytes.len()).then_some(Step { a, op, b, c })
}

/// A position in a line, read byte by byte (every byte it accepts is ASCII,
/// so it never splits a character it returns).
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn spaces(&mut self) {
        while self
            .bytes
            .get(self.at)
            .is_some_and(|b| *b == b' ' || *b == b'\t')
        {
            self.at += 1;
        }
    }

    /// An optional `-` directly followed by digits; `None` when there are no
    /// digits or the number does not fit in an i64.
    fn integer(&mut self) -> Option<i64> {
        let start = self.at;
        if self.bytes.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        let digits = self.at;
        while self.bytes.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
        if self.at == digits {
            return None;
        }
        std::str::from_utf8(&self.bytes[start..self.at])
            .ok()?
            .parse()
            .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(a: i64, op: Op, b: i64, c: i64) -> Step {
        Step { a, op, b, c }
    }

    #[test]
    fn reads_steps_and_the_final_line() {
        let r = parse("7 + 5 = 12\n12 * 2 = 24\n#### 24\n");
        assert_eq!(r.steps, vec![s(7, Op::Add, 5, 12), s(12, Op::Mul, 2, 24)]);
        assert_eq!(
            r.final_line,
            Some(Final {
                value: Some(24),
                text_after: false
            })
        );
    }

    #[test]
    fn steps_allow_negative_numbers_and_loose_spacing() {
        let r = parse("  -3 -   -4=1\r\n5-3 = 2\n2*-1=-2\t\n");
        assert_eq!(
            r.steps,
            vec![
                s(-3, Op::Sub, -4, 1),
                s(5, Op::Sub, 3, 2),
                s(2, Op::Mul, -1, -2)
            ]
        );
        assert_eq!(r.final_line, None);
    }

    #[test]
    fn other_lines_are_not_steps() {
        let r = parse(
            "First, 7 + 5 = 12\n7 + 5 = 12 apples\n7 / 5 = 1\n7 + 5\n= 12\n7 x 5 = 35\n\
             7 + 5 = \n99999999999999999999 + 1 = 2\n\u{ff17} + 5 = 12\n- + 1 = 1",
        );
        assert!(r.steps.is_empty(), "{:?}", r.steps);
    }

    #[test]
    fn the_first_marked_line_is_final_and_later_text_is_noted() {
        let r = parse("1 + 1 = 2\n#### 2\n3 + 3 = 6\n#### 6");
        assert_eq!(r.steps, vec![s(1, Op::Add, 1, 2)]);
        assert_eq!(
            r.final_line,
            Some(Final {
                value: Some(2),
                text_after: true
            })
        );
        let r = parse("#### 5\n   \n\t\n");
        assert!(!r.final_line.unwrap().text_after);
    }

    #[test]
    fn unreadable_final_values() {
        for text in [
            "####",
            "#### ",
            "#### five",
            "#### 5.",
            "#### 1,000",
            "#### -",
            "#### 99999999999999999999",
            "#### 5 apples",
        ] {
            let r = parse(text);
            assert_eq!(r.final_line.unwrap().value, None, "{text:?}");
        }
        assert_eq!(parse("####-7").final_line.unwrap().value, Some(-7));
    }

    #[test]
    fn overflowing_steps_do_not_compute() {
        assert!(!s(i64::MAX, Op::Add, 1, i64::MIN).computes());
        assert!(!s(i64::MIN, Op::Mul, -1, i64::MIN).computes());
        assert!(s(i64::MAX, Op::Sub, 1, i64::MAX - 1).computes());
    }

    #[test]
    fn empty_and_hostile_text() {
        assert_eq!(parse(""), Response::default());
        let long = "1 + 1 = 2\n".repeat(100_000);
        assert_eq!(parse(&long).steps.len(), 100_000);
        let r = parse("\u{202e}#### 3\n\u{0}");
        assert_eq!(r.final_line, None);
    }
}
