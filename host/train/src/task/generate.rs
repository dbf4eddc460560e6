//! The generator's problems: a chain of operations on a running value,
//! posed as an instruction list or a short story, with optional distractor
//! sentences, and the worked solution one line per step.

use super::{Phrasing, TaskConfig};
use crate::problem::Problem;
use verifine_base::SplitMix64;

#[derive(Clone, Copy)]
enum Op {
    Add(i64),
    Sub(i64),
    Mul(i64),
}

impl Op {
    fn apply(self, value: i64) -> i64 {
        match self {
            Op::Add(n) => value + n,
            Op::Sub(n) => value - n,
            Op::Mul(n) => value * n,
        }
    }

    fn symbol(self) -> (char, i64) {
        match self {
            Op::Add(n) => ('+', n),
            Op::Sub(n) => ('-', n),
            Op::Mul(n) => ('*', n),
        }
    }

    fn instruction(self) -> String {
        match self {
            Op::Add(n) => format!("add {n}"),
            Op::Sub(n) => format!("subtract {n}"),
            Op::Mul(n) => format!("multiply by {n}"),
        }
    }

    fn story(self, item: &str) -> String {
        match self {
            Op::Add(n) => format!("gets {n} more {item}"),
            Op::Sub(n) => format!("gives away {n} {item}"),
            Op::Mul(n) => format!("ends up with {n} times as many {item}"),
        }
    }
}

const NAMES: [&str; 6] = ["Ann", "Ben", "Cleo", "Dev", "Eli", "Fay"];
/// Names of the people distractor sentences are about (never a problem's own).
const OTHER_NAMES: [&str; 4] = ["Gus", "Hana", "Ivo", "Jun"];
const ITEMS: [&str; 6] = ["apples", "stamps", "marbles", "coins", "books", "shells"];

/// One problem. With the defaults (`min_steps` 2, mixed phrasing, no
/// distractors) the draws are those of the generator before the ladder's
/// knobs existed, so earlier runs' problems are unchanged.
pub(super) fn problem(rng: &mut SplitMix64, config: &TaskConfig) -> Problem {
    let max = config.max_operand.max(2) as usize;
    let pick =
        |rng: &mut SplitMix64, lo: i64, hi: i64| lo + rng.below((hi - lo + 1) as usize) as i64;
    let start = pick(rng, 1, max as i64);
    let fewest = config.min_steps.max(1);
    let most = config.max_steps.max(fewest);
    let steps = fewest + rng.below(most - fewest + 1);
    let mut value = start;
    let mut ops = Vec::with_capacity(steps);
    for _ in 0..steps {
        let op = match rng.below(3) {
            0 => Op::Add(pick(rng, 1, max as i64)),
            // Keep the running value non-negative.
            1 if value > 1 => Op::Sub(pick(rng, 1, value.min(max as i64))),
            2 if value <= 50 => Op::Mul(pick(rng, 2, 4)),
            _ => Op::Add(pick(rng, 1, max as i64)),
        };
        ops.push(op);
        value = op.apply(value);
    }

    let as_story = match config.phrasing {
        Phrasing::Mixed => rng.below(2) != 0,
        Phrasing::Instructions => false,
        Phrasing::Story => true,
    };
    let mut prompt = if !as_story {
        let steps: Vec<String> = ops.iter().map(|op| op.instruction()).collect();
        format!(
            "Start with {start}, then {}. What is the result?",
            steps.join(", then ")
        )
    } else {
        let name = NAMES[rng.below(NAMES.len())];
        let item = ITEMS[rng.below(ITEMS.len())];
        let events: Vec<String> = ops.iter().map(|op| op.story(item)).collect();
        format!(
            "{name} has {start} {item}. Then {name} {}. How many {item} does {name} have now?",
            events.join(", then ")
        )
    };
    if config.distractors > 0 {
        prompt = with_distractors(&prompt, config.distractors, max as i64, rng);
    }
    let mut lines = Vec::with_capacity(steps + 1);
    let mut running = start;
    for op in &ops {
        let (symbol, n) = op.symbol();
        let next = op.apply(running);
        lines.push(format!("{running} {symbol} {n} = {next}"));
        running = next;
    }
    lines.push(format!("#### {value}"));
    Problem {
        prompt,
        solution: lines.join("\n"),
        answer: value,
    }
}

/// `prompt` with `count` sentences about other people's things inserted
/// before its question: numbers the solution must not use.
fn with_distractors(prompt: &str, count: usize, max: i64, rng: &mut SplitMix64) -> String {
    let (story, question) = prompt
        .rsplit_once(". ")
        .map_or(("", prompt), |(story, question)| (story, question));
    let mut sentences = vec![format!("{story}.")];
    for _ in 0..count {
        let name = OTHER_NAMES[rng.below(OTHER_NAMES.len())];
        let item = ITEMS[rng.below(ITEMS.len())];
        let n = 1 + rng.below(max as usize) as i64;
        sentences.push(format!("{name} has {n} {item}."));
    }
    sentences.push(question.to_string());
    sentences.join(" ")
}
