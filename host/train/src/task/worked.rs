//! Worked solutions as the generator writes them (`a op b = c` per line,
//! then `#### N`): reading their steps, slipping one, and labelled canary
//! cases built from them.

use super::TaskConfig;
use super::generate::problem;
use crate::problem::Problem;
use verifine_base::SplitMix64;

/// Mixed into the seed for the canary set's draws.
const CANARY_STREAM: u64 = 0xCA_4A_41;

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
