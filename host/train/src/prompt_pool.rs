//! A weighted pool of GRPO prompts supplied by the host (the co-evolution
//! loop weights the problems its policy should practise on). Each GRPO step
//! draws its prompts from it with probability proportional to weight, with
//! the run's own generator, so a run with a pool is as reproducible as one
//! without.

use crate::conversation::unit;
use crate::error::{Result, ensure};
use crate::problem::Problem;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use verifine_base::SplitMix64;

/// GRPO prompts and their sampling weights (the same length; weights finite,
/// not negative, with a positive sum).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptPool {
    /// The problems prompts are drawn from; each answer is rewarded against
    /// its problem's worked solution.
    pub problems: Vec<Problem>,
    /// One weight per problem: a problem is drawn with probability
    /// `weight / sum` (0 = never).
    pub weights: Vec<f64>,
}

impl PromptPool {
    /// Refuses a pool that cannot be drawn from, naming the offending index.
    pub fn validate(&self) -> Result<()> {
        ensure!(
            self.problems.len() == self.weights.len(),
            "prompt pool: {} problems but {} weights (one weight per problem)",
            self.problems.len(),
            self.weights.len()
        );
        ensure!(!self.problems.is_empty(), "prompt pool: no problems");
        for (i, w) in self.weights.iter().enumerate() {
            ensure!(
                w.is_finite() && *w >= 0.0,
                "prompt pool: weight {i} is {w} (weights must be finite and not negative)"
            );
        }
        let sum: f64 = self.weights.iter().sum();
        ensure!(
            sum.is_finite() && sum > 0.0,
            "prompt pool: the weights sum to {sum} (must be positive and finite)"
        );
        Ok(())
    }

    /// sha256 (hex) of the pool's canonical serialization (JSON of problems
    /// and weights, in order): checkpoints record it, and a resume with a
    /// different pool is refused.
    pub fn fingerprint(&self) -> String {
        fingerprint_of(self)
    }

    /// The index of one problem, drawn with probability proportional to its
    /// weight (a [`PromptPool::validate`]d pool never yields a zero-weight
    /// problem).
    pub fn draw(&self, rng: &mut SplitMix64) -> usize {
        let total: f64 = self.weights.iter().sum();
        let x = unit(rng) * total;
        let mut acc = 0.0;
        let mut last_positive = 0;
        for (i, &w) in self.weights.iter().enumerate() {
            if w > 0.0 {
                acc += w;
                last_positive = i;
                if x < acc {
                    return i;
                }
            }
        }
        // Rounding can put x at the very top of the range.
        last_positive
    }
}

/// sha256 (hex) of a value's JSON serialization: what checkpoints record
/// of the host's inputs, so a resume with different ones is refused.
pub(crate) fn fingerprint_of<T: Serialize>(value: &T) -> String {
    let bytes = serde_json::to_vec(value).expect("host inputs serialize to JSON");
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(n: i64) -> Problem {
        Problem {
            prompt: format!("p{n}"),
            solution: format!("#### {n}"),
            answer: n,
        }
    }

    fn pool(weights: Vec<f64>) -> PromptPool {
        PromptPool {
            problems: (0..weights.len() as i64).map(problem).collect(),
            weights,
        }
    }

    #[test]
    fn draws_follow_the_weights_and_never_pick_zero_weight_problems() {
        let pool = pool(vec![1.0, 0.0, 3.0, 0.0]);
        pool.validate().unwrap();
        let mut rng = SplitMix64::new(7);
        let mut counts = [0usize; 4];
        for _ in 0..40_000 {
            counts[pool.draw(&mut rng)] += 1;
        }
        assert_eq!((counts[1], counts[3]), (0, 0), "{counts:?}");
        let ratio = counts[2] as f64 / counts[0] as f64;
        assert!((ratio - 3.0).abs() < 0.2, "{counts:?}");
    }

    #[test]
    fn bad_pools_are_refused_naming_the_index() {
        let err = |p: PromptPool| p.validate().unwrap_err().to_string();
        assert!(err(pool(vec![])).contains("no problems"));
        assert!(err(pool(vec![1.0, f64::NAN])).contains("weight 1"));
        assert!(err(pool(vec![1.0, 2.0, -1.0])).contains("weight 2"));
        assert!(err(pool(vec![0.0, 0.0])).contains("sum"));
        let mut short = pool(vec![1.0, 1.0]);
        short.weights.pop();
        assert!(err(short).contains("2 problems but 1 weights"));
    }

    #[test]
    fn the_fingerprint_changes_with_problems_and_weights() {
        let a = pool(vec![1.0, 2.0]);
        assert_eq!(a.fingerprint(), pool(vec![1.0, 2.0]).fingerprint());
        assert_eq!(a.fingerprint().len(), 64);
        assert_ne!(a.fingerprint(), pool(vec![1.0, 2.5]).fingerprint());
        let mut b = pool(vec![1.0, 2.0]);
        b.problems[0].prompt.push('!');
        assert_ne!(a.fingerprint(), b.fingerprint());
    }
}
