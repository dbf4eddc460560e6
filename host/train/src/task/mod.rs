//! The embedded default task: multi-step arithmetic problems with worked
//! solutions ending in `#### N`, generated from a seed (no downloads).
//!
//! Problems are chains of `min_steps`–`max_steps` operations on a running
//! value, posed as an instruction list or as a short story, optionally with
//! distractor sentences; the worked solution shows one line per step. These
//! knobs make a ladder of rungs: SFT can be given the worked solutions of
//! an easy rung and GRPO the answers of a harder one (`[sft] task`). Held-out
//! problems come from a different seed stream and never repeat a training
//! prompt.

use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use verifine_base::SplitMix64;

/// Mixed into the seed for the held-out problems, so they are drawn apart
/// from the training set's stream.
const HELDOUT_STREAM: u64 = 0x05EE_D0F4_E1D0;

/// Difficulty of generated problems.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TaskConfig {
    /// Fewest operations in one problem (at least 1).
    pub min_steps: usize,
    /// Most operations in one problem (at least `min_steps`).
    pub max_steps: usize,
    /// Largest operand.
    pub max_operand: i64,
    /// How problems are posed.
    pub phrasing: Phrasing,
    /// Sentences about other people's things inserted before the question,
    /// whose numbers the solution must ignore.
    pub distractors: usize,
    /// Read problems from dataset files instead of generating them.
    pub dataset: Option<crate::dataset::DatasetConfig>,
    /// Draw problems from GSM-Symbolic templates instead of generating
    /// them: answers only, held-out templates never trained on.
    pub symbolic: Option<crate::symbolic::SymbolicConfig>,
    /// Appended to every question after a blank line (how to mark the
    /// final answer, say); empty for none.
    pub instruction: String,
}

impl Default for TaskConfig {
    fn default() -> Self {
        TaskConfig {
            min_steps: 2,
            max_steps: 3,
            max_operand: 20,
            phrasing: Phrasing::Mixed,
            distractors: 0,
            dataset: None,
            symbolic: None,
            instruction: String::new(),
        }
    }
}

/// How generated problems are posed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phrasing {
    /// Half instruction lists, half stories.
    Mixed,
    /// "Start with 5, then add 3, then …. What is the result?"
    Instructions,
    /// "Ann has 5 coins. Then Ann gets 3 more coins, then …. How many …?"
    Story,
}

mod generate;
mod worked;

use crate::problem::Problem;

use generate::problem;
pub use worked::{CanaryResponse, Step, canary, steps, with_slip};

/// `n` problems from `seed`.
pub fn generate(seed: u64, n: usize, config: &TaskConfig) -> Vec<Problem> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(|_| problem(&mut rng, config)).collect()
}

/// Training and held-out problems: from the dataset files or the
/// GSM-Symbolic templates when the task names them, else generated
/// ([`splits`]).
pub fn problems(
    seed: u64,
    train: usize,
    heldout: usize,
    config: &TaskConfig,
) -> crate::error::Result<(Vec<Problem>, Vec<Problem>)> {
    let (mut train_set, mut heldout_set) = match (&config.dataset, &config.symbolic) {
        (Some(_), Some(_)) => {
            return Err(crate::error::TrainError::Invalid(
                "[task] names both a dataset and GSM-Symbolic templates; keep one".into(),
            ));
        }
        (Some(dataset), None) => crate::dataset::splits(dataset, seed, train, heldout)?,
        (None, Some(symbolic)) => crate::symbolic::splits(symbolic, seed, train, heldout)?,
        (None, None) => splits(seed, train, heldout, config),
    };
    if !config.instruction.is_empty() {
        for problem in train_set.iter_mut().chain(heldout_set.iter_mut()) {
            problem.prompt = format!("{}\n\n{}", problem.prompt, config.instruction);
        }
    }
    Ok((train_set, heldout_set))
}

/// Mixed into the seed for the problems of `[sft.task]`, so an easy rung's
/// draws are not the GRPO rung's own.
const SFT_STREAM: u64 = 0x5F7_7A5C;

/// The problems SFT trains on when `[sft.task]` names its own rung: `n`
/// from that task's own stream, without any of the held-out prompts.
pub fn sft_problems(
    seed: u64,
    n: usize,
    config: &TaskConfig,
    heldout: &[Problem],
) -> crate::error::Result<Vec<Problem>> {
    let held: HashSet<&str> = heldout.iter().map(|p| p.prompt.as_str()).collect();
    let (mut set, _) = problems(seed ^ SFT_STREAM, n, 0, config)?;
    set.retain(|p| !held.contains(p.prompt.as_str()));
    Ok(set)
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

    /// FNV-1a over the prompts and solutions of `problems`.
    fn fingerprint(problems: &[Problem]) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for p in problems {
            for b in p.prompt.bytes().chain(p.solution.bytes()) {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x100_0000_01b3);
            }
        }
        h
    }

    #[test]
    fn the_defaults_draw_the_problems_the_generator_drew_before_the_ladder() {
        // Measured on the generator before `min_steps`, `phrasing` and
        // `distractors` existed: earlier runs keep their problems.
        let problems = generate(7, 500, &TaskConfig::default());
        assert_eq!(
            problems[0].prompt,
            "Start with 8, then multiply by 3, then subtract 5. What is the result?"
        );
        assert_eq!(
            format!("{:016x}", fingerprint(&problems)),
            "377d9e5c17cd2f36"
        );
    }

    #[test]
    fn rungs_have_the_step_counts_and_phrasing_they_ask_for() {
        for (min_steps, max_steps) in [(1, 1), (1, 2), (3, 3), (4, 6)] {
            let config = TaskConfig {
                min_steps,
                max_steps,
                phrasing: Phrasing::Story,
                ..TaskConfig::default()
            };
            let problems = generate(11, 300, &config);
            let counts: HashSet<usize> =
                problems.iter().map(|p| steps(&p.solution).len()).collect();
            assert_eq!(
                counts,
                (min_steps..=max_steps).collect(),
                "{min_steps}..={max_steps}"
            );
            assert!(problems.iter().all(|p| p.prompt.ends_with("have now?")));
        }
        let instructions = TaskConfig {
            phrasing: Phrasing::Instructions,
            ..TaskConfig::default()
        };
        assert!(
            generate(2, 100, &instructions)
                .iter()
                .all(|p| p.prompt.starts_with("Start with"))
        );
    }

    #[test]
    fn distractors_add_sentences_but_change_no_answer() {
        let plain = TaskConfig::default();
        let distracted = TaskConfig {
            distractors: 2,
            ..TaskConfig::default()
        };
        for p in generate(5, 200, &distracted) {
            let others = ["Gus", "Hana", "Ivo", "Jun"];
            let mentions: usize = others
                .iter()
                .map(|n| p.prompt.matches(&format!("{n} has ")).count())
                .sum();
            assert_eq!(mentions, 2, "{}", p.prompt);
            assert!(
                p.prompt.ends_with('?'),
                "the question stays last: {}",
                p.prompt
            );
            // The solution is the plain problem's: distractors are not used.
            assert_eq!(steps(&p.solution).last().map(|s| s.result), Some(p.answer));
        }
        // The same draws up to the distractors: the first problem's chain is the plain one's.
        assert_eq!(
            generate(5, 1, &plain)[0].solution,
            generate(5, 1, &distracted)[0].solution
        );
    }

    #[test]
    fn sft_problems_come_from_their_own_rung_and_never_a_held_out_prompt() {
        let hard = TaskConfig {
            min_steps: 3,
            max_steps: 3,
            ..TaskConfig::default()
        };
        let easy = TaskConfig {
            min_steps: 1,
            max_steps: 1,
            ..TaskConfig::default()
        };
        let (_, heldout) = splits(3, 10, 50, &hard);
        let mut sft = sft_problems(3, 400, &easy, &heldout).unwrap();
        assert!(sft.iter().all(|p| steps(&p.solution).len() == 1));
        // A held-out prompt drawn into the SFT set is removed.
        let leaked = sft[..5].to_vec();
        let kept = sft_problems(3, 400, &easy, &leaked).unwrap();
        assert_eq!(kept.len(), sft.len() - 5);
        sft.retain(|p| !leaked.contains(p));
        assert_eq!(kept, sft);
    }

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
