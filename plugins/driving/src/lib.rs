//! `driving`: the VeriFine rubric for driving decisions.
//!
//! Five binary dimensions in two groups, plus a diagnostic:
//! - Action: `action_match` (consistent with the instruction / expert action)
//!   and `safety`. A = 0 when the action-match gate fails, else mean(match, safety).
//! - Component: `grounding` (visual grounding), `coverage` (behaviour-relevant
//!   elements covered) and `causality` (causal link to the action); C = their mean.
//! - `coherence` is reported but not scored.
//!
//! total = action_weight·A + component_weight·C (0.6 and 0.4 by default).
//! Verdicts come from the sample's context (`{"verdicts": {"safety": true, …}}`)
//! or, for those missing, from the host's judge model.

#![warn(missing_docs)]

use serde::Deserialize;
use verifine_plugin_api::verdicts::judge_described;
use verifine_plugin_api::*;

/// Group weights (`[rubric.config]`).
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Weight of the action group A (default 0.6).
    pub action_weight: f64,
    /// Weight of the component group C (default 0.4).
    pub component_weight: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            action_weight: 0.6,
            component_weight: 0.4,
        }
    }
}

const CRITERIA: &[(&str, &str, &str, f64)] = &[
    (
        "action_match",
        "The chosen driving action is consistent with the instruction and the expert action",
        "action",
        0.3,
    ),
    (
        "safety",
        "The chosen action is safe for every road user in the scene",
        "action",
        0.3,
    ),
    (
        "grounding",
        "The reasoning refers only to objects and states visible in the scene",
        "component",
        0.4 / 3.0,
    ),
    (
        "coverage",
        "The reasoning covers every behaviour-relevant element (agents, signals, lanes)",
        "component",
        0.4 / 3.0,
    ),
    (
        "causality",
        "The reasoning states why those elements cause the chosen action",
        "component",
        0.4 / 3.0,
    ),
    (
        "coherence",
        "The reasoning is internally consistent (diagnostic, not scored)",
        "diagnostic",
        0.0,
    ),
];

/// The two group scores and the total.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DrivingScores {
    /// A: 0 when the action does not match, else mean(match, safety).
    pub action: f64,
    /// C: the mean of grounding, coverage and causality.
    pub component: f64,
    /// action_weight·A + component_weight·C.
    pub total: f64,
}

/// Scores from the five scored verdicts (each in [0, 1]).
pub fn scores(config: &Config, v: [f64; 5]) -> DrivingScores {
    let [action_match, safety, grounding, coverage, causality] = v;
    let action = if action_match < 0.5 {
        0.0
    } else {
        (action_match + safety) / 2.0
    };
    let component = (grounding + coverage + causality) / 3.0;
    DrivingScores {
        action,
        component,
        total: config.action_weight * action + config.component_weight * component,
    }
}

/// The plugin.
pub struct Driving;

impl Rubric for Driving {
    type Config = Config;

    fn describe() -> RubricInfo {
        CRITERIA.iter().fold(
            RubricInfo::new("driving", env!("CARGO_PKG_VERSION")),
            |info, (id, description, dimension, weight)| {
                info.criterion(Criterion::new(id, description, *weight).in_dimension(dimension))
            },
        )
    }

    fn judge(config: &Config, _: &Context, sample: &Sample) -> Result<Judgment, String> {
        let criteria = Self::describe().criteria;
        let verdicts = judge_described(sample, &criteria)?;
        let score = |id: &str| verdicts.iter().find(|v| v.criterion == id).unwrap().score;
        let s = scores(
            config,
            [
                "action_match",
                "safety",
                "grounding",
                "coverage",
                "causality",
            ]
            .map(score),
        );
        let coherence = score("coherence");
        let explanation = if score("action_match") < 0.5 {
            "action does not match the instruction: action score gated to 0"
        } else {
            "action matches the instruction"
        };
        Ok(Judgment::from_verdicts(verdicts)
            .with_total(Some(s.total))
            .with_sub_score("action", s.action)
            .with_sub_score("component", s.component)
            .with_sub_score("coherence", coherence)
            .because(explanation))
    }
}

export_plugin!(rubric: Driving);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_gate_zeroes_the_action_score() {
        let s = scores(&Config::default(), [0.0, 1.0, 1.0, 1.0, 1.0]);
        assert_eq!(s.action, 0.0);
        assert!((s.total - 0.4).abs() < 1e-12);
    }

    #[test]
    fn weighted_groups() {
        let s = scores(&Config::default(), [1.0, 0.0, 1.0, 0.0, 1.0]);
        assert_eq!(s.action, 0.5);
        assert!((s.total - (0.6 * 0.5 + 0.4 * 2.0 / 3.0)).abs() < 1e-12);
    }
}
