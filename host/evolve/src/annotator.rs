//! A simulated annotator: stands in for a person in the default run and the
//! tests. It knows the gold solution (as a careful person checking the
//! problem would), scores each dimension on a coarse scale with noise, and
//! now and then revises one of its own earlier labels. Its labels are not
//! ground truth: the accept rule keeps a margin for their noise.

use crate::cases::{Case, Dimensions, final_answer, steps};
use crate::labels::{Label, LabelAction};
use serde::{Deserialize, Serialize};
use verifine_base::SplitMix64;

/// How the simulated annotator behaves (`[annotator]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AnnotatorConfig {
    /// Seed of its noise; the frozen test labels use `seed + 1` (another
    /// annotator).
    pub seed: u64,
    /// Standard deviation of the noise added to each dimension (scores in [0, 1]).
    pub noise: f64,
    /// Points on its scale per dimension, above zero (4: scores in quarters).
    pub scale: u32,
    /// Chance, per new batch, that it revises one of its earlier labels.
    pub revise_chance: f64,
    /// Seed of the independent annotator who labels the frozen test set
    /// (default: `seed + 1`).
    pub test_seed: Option<u64>,
}

impl Default for AnnotatorConfig {
    fn default() -> Self {
        AnnotatorConfig {
            seed: 17,
            noise: 0.1,
            scale: 4,
            revise_chance: 0.3,
            test_seed: None,
        }
    }
}

impl AnnotatorConfig {
    /// The independent annotator of the frozen test set (and of test-time
    /// selection): seed `test_seed` (default `seed + 1`), no self-revision.
    pub fn independent(&self) -> AnnotatorConfig {
        AnnotatorConfig {
            seed: self.test_seed.unwrap_or(self.seed + 1),
            revise_chance: 0.0,
            ..self.clone()
        }
    }

    /// The loop's annotator at a loop seed (the evolve config's `seed`): its noise
    /// drawn from `seed` mixed with the loop seed, so that runs at several
    /// loop seeds label with other draws; unchanged without one. The frozen
    /// test set's annotator ([`Self::independent`]) never depends on it.
    pub fn under_loop_seed(&self, loop_seed: Option<u64>) -> AnnotatorConfig {
        match loop_seed {
            Some(loop_seed) => AnnotatorConfig {
                seed: self.seed ^ loop_seed.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                ..self.clone()
            },
            None => self.clone(),
        }
    }
}

/// The quality of a response as the gold solution shows it, per dimension:
/// `grounded` — the steps take the problem's start, operations and operands,
/// position by position; `valid` — the share of steps that compute;
/// `complete` — 1 for a marked, correct final answer, 0.5 for a marked one
/// that follows from the steps but is wrong, 0.25 for a marked one that
/// does not follow, 0 for none.
pub fn true_quality(case: &Case) -> Dimensions {
    let gold = steps(&case.reference);
    let given = steps(&case.response);
    let positions = gold.len().max(given.len()).max(1);
    let grounded = gold
        .iter()
        .zip(&given)
        .enumerate()
        .filter(|(i, (g, s))| {
            g.op == s.op && g.operand == s.operand && (*i > 0 || g.from == s.from)
        })
        .count() as f64
        / positions as f64;
    let valid = if given.is_empty() {
        0.0
    } else {
        given.iter().filter(|s| s.computes()).count() as f64 / given.len() as f64
    };
    let complete = match final_answer(&case.response) {
        None => 0.0,
        Some(n) if Some(n) == final_answer(&case.reference) => 1.0,
        Some(n) if given.last().is_some_and(|s| s.result == n) => 0.5,
        Some(_) => 0.25,
    };
    Dimensions::from([
        ("grounded".to_string(), grounded),
        ("valid".to_string(), valid),
        ("complete".to_string(), complete),
    ])
}

/// A person's overall score from their dimension scores: nothing without a
/// final answer (`complete` = 0), otherwise the mean.
pub fn overall(dimensions: &Dimensions) -> f64 {
    if dimensions.get("complete").is_some_and(|&c| c <= 0.0) || dimensions.is_empty() {
        return 0.0;
    }
    dimensions.values().sum::<f64>() / dimensions.len() as f64
}

/// The simulated annotator.
#[derive(Debug, Clone)]
pub struct Annotator {
    name: String,
    config: AnnotatorConfig,
    rng: SplitMix64,
}

impl Annotator {
    /// An annotator called `name` whose noise comes from `config.seed`.
    pub fn new(name: impl Into<String>, config: AnnotatorConfig) -> Self {
        let rng = SplitMix64::new(config.seed ^ 0xA11_0747);
        Annotator {
            name: name.into(),
            config,
            rng,
        }
    }

    /// The generator's state, so a resumed loop labels as an uninterrupted one.
    pub fn state(&self) -> u64 {
        self.rng.state()
    }

    /// Puts back a state from [`Annotator::state`].
    pub fn restore(&mut self, state: u64) {
        self.rng = SplitMix64::new(state);
    }

    /// Labels new cases; with `revise_chance` it also revises one of its
    /// `earlier` labels (the newest revision of each case), more carefully.
    pub fn label(&mut self, cases: &[Case], earlier: &[(Case, Label)]) -> Vec<Label> {
        let mut labels: Vec<Label> = cases
            .iter()
            .map(|case| self.score(case, self.config.noise, 0, LabelAction::Score))
            .collect();
        if !earlier.is_empty() && self.uniform() < self.config.revise_chance {
            let (case, old) = &earlier[self.rng.below(earlier.len())];
            let mut revised = self.score(
                case,
                self.config.noise / 2.0,
                old.revision + 1,
                LabelAction::Revise,
            );
            revised.note = Some("revised my earlier score after a second look".to_string());
            labels.push(revised);
        }
        labels
    }

    fn score(&mut self, case: &Case, noise: f64, revision: u32, action: LabelAction) -> Label {
        let scale = f64::from(self.config.scale.max(1));
        let dimensions: Dimensions = true_quality(case)
            .into_iter()
            .map(|(name, value)| {
                let noisy = (value + noise * self.gaussian()).clamp(0.0, 1.0);
                (name, (noisy * scale).round() / scale)
            })
            .collect();
        Label {
            case_id: case.id.clone(),
            annotator: self.name.clone(),
            total: overall(&dimensions),
            dimensions,
            revision,
            action,
            note: None,
        }
    }

    fn uniform(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A standard normal draw (Box–Muller).
    fn gaussian(&mut self) -> f64 {
        let u1 = self.uniform().max(f64::MIN_POSITIVE);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(response: &str) -> Case {
        Case {
            id: "c".into(),
            scenario: "instructions-2".into(),
            prompt: "Start with 4, then add 3, then multiply by 2. What is the result?".into(),
            response: response.into(),
            reference: "4 + 3 = 7\n7 * 2 = 14\n#### 14".into(),
        }
    }

    #[test]
    fn true_quality_tells_grounded_from_merely_valid() {
        let right = true_quality(&case("4 + 3 = 7\n7 * 2 = 14\n#### 14"));
        assert_eq!(right.values().copied().collect::<Vec<_>>(), [1.0, 1.0, 1.0]);
        let ungrounded = true_quality(&case("1 + 1 = 2\n2 * 5 = 10\n#### 10"));
        assert_eq!(ungrounded["grounded"], 0.0);
        assert_eq!(ungrounded["valid"], 1.0);
        assert_eq!(ungrounded["complete"], 0.5);
        let unmarked = true_quality(&case("4 + 3 = 7"));
        assert_eq!(overall(&unmarked), 0.0);
    }

    #[test]
    fn noiseless_labels_are_the_true_quality_and_noise_stays_on_the_scale() {
        let cases = vec![case("4 + 3 = 7\n7 * 2 = 15\n#### 15")];
        let exact = AnnotatorConfig {
            noise: 0.0,
            revise_chance: 0.0,
            ..AnnotatorConfig::default()
        };
        let label = &Annotator::new("a", exact).label(&cases, &[])[0];
        assert_eq!(label.dimensions, true_quality(&cases[0]));
        let mut noisy = Annotator::new(
            "b",
            AnnotatorConfig {
                noise: 0.5,
                ..AnnotatorConfig::default()
            },
        );
        for label in noisy.label(&vec![cases[0].clone(); 50], &[]) {
            for v in label.dimensions.values() {
                assert!((0.0..=1.0).contains(v) && (v * 4.0).fract() == 0.0, "{v}");
            }
        }
    }

    #[test]
    fn it_sometimes_revises_an_earlier_label_with_a_higher_revision() {
        let config = AnnotatorConfig {
            revise_chance: 1.0,
            ..AnnotatorConfig::default()
        };
        let mut annotator = Annotator::new("a", config);
        let first = annotator.label(&[case("4 + 3 = 7\n#### 7")], &[]);
        let earlier = vec![(case("4 + 3 = 7\n#### 7"), first[0].clone())];
        let next = annotator.label(&[], &earlier);
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].revision, 1);
        assert_eq!(next[0].action, LabelAction::Revise);
    }
}
