//! The embedded default task: multi-step arithmetic problems with worked
//! solutions ending in `#### N`, generated from a seed (no downloads).
//!
//! Problems are chains of 2–`max_steps` operations on a running value, posed
//! either as an instruction list or as a short story; the worked solution
//! shows one line per step. Held-out problems come from a different seed
//! stream and never repeat a training prompt.

use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use verifine_base::SplitMix64;

/// Mixed into the seed for the held-out problems, so they are drawn apart
/// from the training set's stream.
const HELDOUT_STREAM: u64 = 0x05EE_D0F4_E1D0;

/// Mixed into the seed for the canary set's draws.
const CANARY_STREAM: u64 = 0xCA_4A_41;

/// Difficulty of generated problems.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TaskConfig {
    /// Most operations in one problem (at least 2).
    pub max_steps: usize,
    /// Largest operand.
    pub max_operand: i64,
    /// Read problems from dataset files instead of generating them.
    pub dataset: Option<crate::dataset::DatasetConfig>,
    /// Appended to every question after a blank line (how to mark the
    /// final answer, say); empty for none.
    pub instruction: String,
}

impl Default for TaskConfig {
    fn default() -> Self {
        TaskConfig {
            max_steps: 3,
            max_operand: 20,
            dataset: None,
            instruction: String::new(),
        }
    }
}

/// One problem with its worked solution and answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// The question shown to the policy.
    pub prompt: String,
    /// A step-by-step solution ending in `#### answer` (the SFT target and the reference).
    pub solution: String,
    /// The final answer.
    pub answer: i64,
}

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
const ITEMS: [&str; 6] = ["apples", "stamps", "marbles", "coins", "books", "shells"];

fn problem(rng: &mut SplitMix64, config: &TaskConfig) -> Problem {
    let max = config.max_operand.max(2) as usize;
    let pick =
        |rng: &mut SplitMix64, lo: i64, hi: i64| lo + rng.below((hi - lo + 1) as usize) as i64;
    let start = pick(rng, 1, max as i64);
    let steps = 2 + rng.below(config.max_steps.max(2) - 1);
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

    let prompt = if rng.below(2) == 0 {
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

/// One line `a op b = c` of a worked solution: the format the generator
/// writes and judges and annotators read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// The value the step starts from.
    pub from: i64,
    /// `+`, `-` or `*`.
    pub op: char,
    /// The operand.
    pub operand: i64,
    /// The stated result.
    pub result: i64,
}

impl Step {
    /// Whether the stated result is what the operation gives.
    pub fn computes(&self) -> bool {
        let value = match self.op {
            '+' => self.from.checked_add(self.operand),
            '-' => self.from.checked_sub(self.operand),
            '*' => self.from.checked_mul(self.operand),
            _ => None,
        };
        value == Some(self.result)
    }
}

/// The step lines of a worked solution, in order; other lines are skipped.
pub fn steps(text: &str) -> Vec<Step> {
    text.lines()
        .filter_map(|line| parse_step(line.trim()))
        .collect()
}

fn parse_step(line: &str) -> Option<Step> {
    let (lhs, rhs) = line.split_once(" = ")?;
    let mut parts = lhs.split(' ');
    let from = parts.next()?.parse().ok()?;
    let op = parts.next().filter(|p| p.len() == 1)?.chars().next()?;
    let operand = parts.next()?.parse().ok()?;
    if parts.next().is_some() || !matches!(op, '+' | '-' | '*') {
        return None;
    }
    Some(Step {
        from,
        op,
        operand,
        result: rhs.trim().parse().ok()?,
    })
}

/// The worked solution of `problem` with one arithmetic slip: one step's
/// result is off by 1–3 and every later step carries the error on, so the
/// final answer is wrong. Stands in for the wrong solutions real SFT data
/// holds, and teaches self-verification what a NO looks like.
pub fn with_slip(problem: &Problem, rng: &mut SplitMix64) -> String {
    let steps = steps(&problem.solution);
    let slipped = rng.below(steps.len().max(1));
    let delta = 1 + rng.below(3) as i64;
    let mut running = steps.first().map_or(problem.answer, |s| s.from);
    let mut lines = Vec::with_capacity(steps.len() + 1);
    for (i, &Step { op, operand: b, .. }) in steps.iter().enumerate() {
        let mut next = match op {
            '+' => running + b,
            '-' => running - b,
            _ => running * b,
        };
        if i == slipped {
            // Stay non-negative, as the generator does.
            next = if next >= delta && rng.below(2) == 0 {
                next - delta
            } else {
                next + delta
            };
        }
        lines.push(format!("{running} {op} {b} = {next}"));
        running = next;
    }
    lines.push(format!("#### {running}"));
    lines.join("\n")
}

/// A labelled canary case: a response to a problem and whether a correct
/// verifier rewards it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanaryResponse {
    /// The problem.
    pub problem: Problem,
    /// The response.
    pub response: String,
    /// Whether its final answer is right.
    pub label: bool,
}

/// `n` labelled canary cases from `seed`, in equal thirds: the worked
/// solution (rewarded), a slipped solution (not rewarded), and a slipped
/// solution that mentions the right answer in passing before its wrong final
/// answer (not rewarded — the bait a loose rubric falls for).
pub fn canary(seed: u64, n: usize, config: &TaskConfig) -> Vec<CanaryResponse> {
    let mut rng = SplitMix64::new(seed ^ CANARY_STREAM);
    (0..n)
        .map(|i| {
            let problem = problem(&mut rng, config);
            let (response, label) = match i % 3 {
                0 => (problem.solution.clone(), true),
                1 => (with_slip(&problem, &mut rng), false),
                _ => {
                    let slipped = with_slip(&problem, &mut rng);
                    let (steps, last) = slipped.rsplit_once('\n').unwrap_or(("", &slipped));
                    let answer = problem.answer;
                    (
                        format!("{steps}\nMy first guess was {answer}.\n{last}"),
                        false,
                    )
                }
            };
            CanaryResponse {
                problem,
                response,
                label,
            }
        })
        .collect()
}

/// `n` problems from `seed`.
pub fn generate(seed: u64, n: usize, config: &TaskConfig) -> Vec<Problem> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(|_| problem(&mut rng, config)).collect()
}

/// Training and held-out problems: from the dataset files when the task
/// names them, else generated ([`splits`]).
pub fn problems(
    seed: u64,
    train: usize,
    heldout: usize,
    config: &TaskConfig,
) -> crate::error::Result<(Vec<Problem>, Vec<Problem>)> {
    let (mut train_set, mut heldout_set) = match &config.dataset {
        Some(dataset) => crate::dataset::splits(dataset, seed, train, heldout)?,
        None => splits(seed, train, heldout, config),
    };
    if !config.instruction.is_empty() {
        for problem in train_set.iter_mut().chain(heldout_set.iter_mut()) {
            problem.prompt = format!("{}\n\n{}", problem.prompt, config.instruction);
        }
    }
    Ok((train_set, heldout_set))
}

/// Generated training and held-out problems from one seed; no held-out
/// prompt appears in training.
pub fn splits(
    seed: u64,
    train: usize,
    heldout: usize,
    config: &TaskConfig,
) -> (Vec<Problem>, Vec<Problem>) {
    let train_set = generate(seed, train, config);
    let seen: HashSet<&str> = train_set.iter().map(|p| p.prompt.as_str()).collect();
    let mut rng = SplitMix64::new(seed ^ HELDOUT_STREAM);
    let mut heldout_set = Vec::with_capacity(heldout);
    let mut attempts = 0;
    while heldout_set.len() < heldout && attempts < heldout * 100 {
        let p = problem(&mut rng, config);
        if !seen.contains(p.prompt.as_str()) {
            heldout_set.push(p);
        }
        attempts += 1;
    }
    (train_set, heldout_set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worked_solutions_end_in_the_answer_and_check_out() {
        for p in generate(3, 200, &TaskConfig::default()) {
            assert!(p.solution.ends_with(&format!("#### {}", p.answer)), "{p:?}");
            for line in p.solution.lines().filter(|l| l.contains('=')) {
                let (lhs, rhs) = line.split_once(" = ").unwrap();
                let parts: Vec<&str> = lhs.split(' ').collect();
                let (a, b): (i64, i64) = (parts[0].parse().unwrap(), parts[2].parse().unwrap());
                let expected = match parts[1] {
                    "+" => a + b,
                    "-" => a - b,
                    _ => a * b,
                };
                assert_eq!(expected, rhs.parse::<i64>().unwrap(), "{line}");
            }
            assert!(p.answer >= 0);
        }
    }

    #[test]
    fn a_slipped_solution_is_well_formed_but_ends_in_a_wrong_answer() {
        let mut rng = SplitMix64::new(4);
        for p in generate(5, 300, &TaskConfig::default()) {
            let slipped = with_slip(&p, &mut rng);
            let read = math_answer::answer::reference_answer(&slipped).unwrap();
            assert_ne!(read, p.answer as f64, "{slipped}");
            assert_eq!(slipped.lines().count(), p.solution.lines().count());
            let wrong_lines = slipped
                .lines()
                .zip(p.solution.lines())
                .filter(|(a, b)| a != b)
                .count();
            assert!(wrong_lines >= 2, "the slip carries on to the answer");
        }
    }

    #[test]
    fn canary_labels_follow_the_final_answer() {
        for case in canary(1, 60, &TaskConfig::default()) {
            let read = math_answer::answer::reference_answer(&case.response).unwrap();
            assert_eq!(
                read == case.problem.answer as f64,
                case.label,
                "{}",
                case.response
            );
        }
    }

    #[test]
    fn same_seed_same_problems_and_splits_are_disjoint() {
        let config = TaskConfig::default();
        assert_eq!(generate(9, 50, &config), generate(9, 50, &config));
        let (train, heldout) = splits(9, 500, 100, &config);
        assert_eq!(heldout.len(), 100);
        let seen: HashSet<_> = train.iter().map(|p| &p.prompt).collect();
        assert!(heldout.iter().all(|p| !seen.contains(&p.prompt)));
    }

    #[test]
    fn math_answer_reads_every_reference() {
        // The reward plugin must read the generated reference as the answer.
        for p in generate(
            1,
            300,
            &TaskConfig {
                max_steps: 4,
                max_operand: 30,
                ..TaskConfig::default()
            },
        ) {
            let read = math_answer::answer::reference_answer(&p.solution);
            assert_eq!(read, Some(p.answer as f64), "{}", p.solution);
        }
    }
}
