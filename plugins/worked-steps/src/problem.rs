//! Reading the generated arithmetic word problems (host/train's task): the
//! starting quantity and the list of operations applied to it.
//!
//! Two forms are recognised, as the task generator writes them:
//! - instructions: `Start with 7, then add 5, then subtract 2, then multiply
//!   by 3. What is the result?`
//! - a story: `Ann has 7 apples. Then Ann gets 5 more apples, then gives away
//!   2 apples, then ends up with 3 times as many apples. How many apples does
//!   Ann have now?`
//!
//! Anything else does not parse; the caller decides what that costs.

/// An arithmetic operation of a problem or a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
}

impl Op {
    /// The operator as written in a step line.
    pub fn symbol(self) -> char {
        match self {
            Op::Add => '+',
            Op::Sub => '-',
            Op::Mul => '*',
        }
    }

    /// The operator written as `symbol`, if it is one of `+ - *`.
    pub fn from_symbol(symbol: u8) -> Option<Op> {
        match symbol {
            b'+' => Some(Op::Add),
            b'-' => Some(Op::Sub),
            b'*' => Some(Op::Mul),
            _ => None,
        }
    }

    /// `a op b`, or `None` on i64 overflow.
    pub fn apply(self, a: i64, b: i64) -> Option<i64> {
        match self {
            Op::Add => a.checked_add(b),
            Op::Sub => a.checked_sub(b),
            Op::Mul => a.checked_mul(b),
        }
    }
}

/// A parsed problem: start from `start`, then apply `ops` in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The starting quantity.
    pub start: i64,
    /// The operations with their operands, in the order the problem states them.
    pub ops: Vec<(Op, i64)>,
}

impl Problem {
    /// The answer the problem asks for, or `None` on overflow.
    pub fn answer(&self) -> Option<i64> {
        self.ops
            .iter()
            .try_fold(self.start, |value, &(op, n)| op.apply(value, n))
    }
}

/// Parses `prompt` in either of the task's two forms; `None` when it is
/// neither (or a number does not fit in an i64).
pub fn parse(prompt: &str) -> Option<Problem> {
    let prompt = prompt.trim();
    if let Some(at) = prompt.find("Start with ") {
        return parse_instructions(&prompt[at + "Start with ".len()..]);
    }
    parse_story(prompt)
}

/// `7, then add 5, then multiply by 2. What is the result?`
fn parse_instructions(text: &str) -> Option<Problem> {
    let (body, _) = text.split_once('.')?;
    let mut parts = body.split(", then ");
    let start = number(parts.next()?)?;
    let ops = parts
        .map(|part| {
            let part = part.trim();
            if let Some(n) = part.strip_prefix("add ") {
                Some((Op::Add, number(n)?))
            } else if let Some(n) = part.strip_prefix("subtract ") {
                Some((Op::Sub, number(n)?))
            } else {
                Some((Op::Mul, number(part.strip_prefix("multiply by ")?)?))
            }
        })
        .collect::<Option<Vec<_>>>()?;
    (!ops.is_empty()).then_some(Problem { start, ops })
}

/// `Ann has 7 apples. Then Ann gets 5 more apples, then ... How many ...?`
fn parse_story(prompt: &str) -> Option<Problem> {
    let (first, rest) = prompt.split_once(". Then ")?;
    let (subject, holding) = first.split_once(" has ")?;
    let name = subject.split_whitespace().last()?;
    let (start, _item) = holding.trim().split_once(' ')?;
    let start = number(start)?;
    let (events, _question) = rest.split_once('.')?;
    let events = events.trim().strip_prefix(name)?;
    let ops = events
        .split(", then ")
        .map(|event| {
            let event = event.trim();
            if let Some(tail) = event.strip_prefix("gets ") {
                let (n, tail) = tail.split_once(' ')?;
                tail.starts_with("more").then_some(())?;
                Some((Op::Add, number(n)?))
            } else if let Some(tail) = event.strip_prefix("gives away ") {
                Some((Op::Sub, number(tail.split_once(' ')?.0)?))
            } else {
                let tail = event.strip_prefix("ends up with ")?;
                let (n, tail) = tail.split_once(' ')?;
                tail.starts_with("times as many").then_some(())?;
                Some((Op::Mul, number(n)?))
            }
        })
        .collect::<Option<Vec<_>>>()?;
    (!ops.is_empty()).then_some(Problem { start, ops })
}

/// A non-negative integer written in digits only.
fn number(text: &str) -> Option<i64> {
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Every run of ASCII digits in `text` that fits in an i64, sorted and
/// deduplicated (for binary search).
pub fn numbers_in(text: &str) -> Vec<i64> {
    let mut numbers: Vec<i64> = text
        .split(|c: char| !c.is_ascii_digit())
        .filter(|run| !run.is_empty())
        .filter_map(|run| run.parse().ok())
        .collect();
    numbers.sort_unstable();
    numbers.dedup();
    numbers
}

#[cfg(test)]
mod tests {
    use super::*;
    use Op::*;

    #[test]
    fn parses_the_instruction_form() {
        let p = parse("Start with 7, then add 5, then multiply by 2. What is the result?").unwrap();
        assert_eq!(p.start, 7);
        assert_eq!(p.ops, vec![(Add, 5), (Mul, 2)]);
        assert_eq!(p.answer(), Some(24));
        let p = parse(
            "Start with 20, then subtract 13, then add 1, then multiply by 4. What is the result?",
        )
        .unwrap();
        assert_eq!(p.ops, vec![(Sub, 13), (Add, 1), (Mul, 4)]);
        assert_eq!(p.answer(), Some(32));
    }

    #[test]
    fn parses_the_story_form() {
        let p = parse(
            "Ann has 7 apples. Then Ann gets 5 more apples, then ends up with 2 times as many \
             apples. How many apples does Ann have now?",
        )
        .unwrap();
        assert_eq!(p.start, 7);
        assert_eq!(p.ops, vec![(Add, 5), (Mul, 2)]);
        let p = parse(
            "Cleo has 12 marbles. Then Cleo gives away 4 marbles, then gives away 3 marbles, then \
             gets 10 more marbles. How many marbles does Cleo have now?",
        )
        .unwrap();
        assert_eq!(p.ops, vec![(Sub, 4), (Sub, 3), (Add, 10)]);
        assert_eq!(p.answer(), Some(15));
    }

    #[test]
    fn tolerates_surrounding_text_around_the_instruction_form() {
        let p = parse("Question: Start with 3, then add 4. What is the result?\nAnswer:").unwrap();
        assert_eq!(
            p,
            Problem {
                start: 3,
                ops: vec![(Add, 4)]
            }
        );
    }

    #[test]
    fn other_text_does_not_parse() {
        for prompt in [
            "",
            "What is 2 + 2?",
            "Start with seven, then add 5. What is the result?",
            "Start with 7, then divide by 2. What is the result?",
            "Start with 7. What is the result?",
            "Start with 99999999999999999999, then add 1. What is the result?",
            "Ann has 7 apples. Then Ben gets 5 more apples. How many apples does Ann have now?",
            "Ann has 7 apples. Then Ann eats 5 apples. How many apples does Ann have now?",
            "Ann has 7 apples. Then Ann gets 5 apples. How many?",
            "Ann has many apples. Then Ann gets 5 more apples. How many?",
            "Start with 7, then add -5. What is the result?",
            "Ann has 7 \u{1f34e}. Then Ann ends up with 2 times \u{1f34e}. How many?",
        ] {
            assert_eq!(parse(prompt), None, "{prompt:?}");
        }
    }

    #[test]
    fn the_answer_reports_overflow() {
        let p = Problem {
            start: i64::MAX,
            ops: vec![(Add, 1)],
        };
        assert_eq!(p.answer(), None);
    }

    #[test]
    fn collects_the_numbers_of_a_prompt() {
        assert_eq!(
            numbers_in("Ann has 7 apples, gets 12 more, then 7; 99999999999999999999 x"),
            vec![7, 12]
        );
        assert_eq!(numbers_in("no digits \u{e9}"), Vec::<i64>::new());
    }
}
