//! The plugin's config: which sub-criteria of the library are active, their
//! weights, the dimensions' weights and the gate.
//!
//! ```json
//! {
//!   "grounded": {"has-steps": 1.0},
//!   "valid": {"steps-compute": 1.0},
//!   "complete": {"final-marked": 1.0, "final-follows": 1.0},
//!   "dimension_weights": {"grounded": 1.0, "valid": 1.0, "complete": 1.0},
//!   "gate": "final-marked"
//! }
//! ```
//!
//! Every key is optional and the values shown are the defaults (the loose
//! judge). A dimension table that is given replaces that dimension's default
//! table: it lists the active sub-criteria (weight 0 = inactive).
//! `dimension_weights` entries that are left out stay 1. `gate` names a
//! sub-criterion (`final-marked` or `complete/final-marked`), or is `null`
//! for no gate; the gate is checked whether or not it is active. `ask`
//! (see [`crate::asked`]) has a judge model answer a YES/NO question per
//! dimension, weighted among that dimension's sub-criteria; off by default.

use crate::asked::{Ask, RawAsk};
use crate::criteria::{Dimension, Sub};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The validated config.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "RawConfig")]
pub struct Config {
    /// The active sub-criteria (weight > 0) with their weights, in library order.
    pub active: Vec<(Sub, f64)>,
    /// Each dimension's weight, in the order of [`Dimension::ALL`].
    pub dimension_weights: [f64; 3],
    /// The gate: when this sub-criterion scores below 1 the total is 0.
    pub gate: Option<Sub>,
    /// The dimensions a judge model is asked about.
    pub ask: Ask,
}

impl Config {
    /// The weight of `dimension`.
    pub fn dimension_weight(&self, dimension: Dimension) -> f64 {
        self.dimension_weights[dimension as usize]
    }

    /// The active sub-criteria of `dimension` with their weights.
    pub fn active_in(&self, dimension: Dimension) -> impl Iterator<Item = (Sub, f64)> + '_ {
        self.active
            .iter()
            .copied()
            .filter(move |(sub, _)| sub.dimension() == dimension)
    }

    /// The weight of `sub` (0 when inactive).
    pub fn weight(&self, sub: Sub) -> f64 {
        self.active
            .iter()
            .find(|(s, _)| *s == sub)
            .map_or(0.0, |(_, w)| *w)
    }

    /// A recommended strict judge: every sub-criterion of the library active
    /// with weight 1, equal dimension weights, gated on `final-marked`. A
    /// response scores 1 only when it works the problem's own operations in
    /// order, correctly, and ends at the marked answer.
    pub fn strict() -> Config {
        Config {
            active: Sub::ALL.iter().map(|&s| (s, 1.0)).collect(),
            dimension_weights: [1.0; 3],
            gate: Some(Sub::FinalMarked),
            ask: Ask::default(),
        }
    }
}

impl Default for Config {
    /// The deliberately loose judge: any valid chain ending in its marked
    /// result scores 1, whether or not it uses the problem's numbers.
    fn default() -> Self {
        Config {
            active: vec![
                (Sub::HasSteps, 1.0),
                (Sub::StepsCompute, 1.0),
                (Sub::FinalMarked, 1.0),
                (Sub::FinalFollows, 1.0),
            ],
            dimension_weights: [1.0; 3],
            gate: Some(Sub::FinalMarked),
            ask: Ask::default(),
        }
    }
}

/// The config as written, before validation.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    grounded: Option<BTreeMap<String, f64>>,
    #[serde(default)]
    valid: Option<BTreeMap<String, f64>>,
    #[serde(default)]
    complete: Option<BTreeMap<String, f64>>,
    #[serde(default)]
    dimension_weights: RawDimensionWeights,
    #[serde(default = "default_gate")]
    gate: Option<String>,
    #[serde(default)]
    ask: RawAsk,
}

fn default_gate() -> Option<String> {
    Some(Sub::FinalMarked.id().to_string())
}

#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct RawDimensionWeights {
    grounded: f64,
    valid: f64,
    complete: f64,
}

impl Default for RawDimensionWeights {
    fn default() -> Self {
        RawDimensionWeights {
            grounded: 1.0,
            valid: 1.0,
            complete: 1.0,
        }
    }
}

pub(crate) fn check_weight(key: &str, weight: f64) -> Result<(), String> {
    if weight.is_finite() && weight >= 0.0 {
        Ok(())
    } else {
        Err(format!(
            "`{key}`: weight must be finite and >= 0, got {weight}"
        ))
    }
}

fn known_ids(dimension: Dimension) -> String {
    dimension.subs().map(Sub::id).collect::<Vec<_>>().join(", ")
}

impl TryFrom<RawConfig> for Config {
    type Error = String;

    fn try_from(raw: RawConfig) -> Result<Config, String> {
        let defaults = Config::default();
        let tables = [raw.grounded, raw.valid, raw.complete];
        let mut active = Vec::new();
        for (dimension, table) in Dimension::ALL.into_iter().zip(tables) {
            let Some(table) = table else {
                active.extend(defaults.active_in(dimension));
                continue;
            };
            for (id, weight) in table {
                let sub = dimension.subs().find(|s| s.id() == id).ok_or_else(|| {
                    let elsewhere = Sub::from_id(&id)
                        .map(|s| format!(" (it belongs to `{}`)", s.dimension().id()))
                        .unwrap_or_default();
                    format!(
                        "unknown sub-criterion `{id}` in `{}`{elsewhere}; known: {}",
                        dimension.id(),
                        known_ids(dimension)
                    )
                })?;
                check_weight(&format!("{}.{id}", dimension.id()), weight)?;
                if weight > 0.0 {
                    active.push((sub, weight));
                }
            }
        }
        active.sort_by_key(|(sub, _)| *sub);

        let raw_weights = raw.dimension_weights;
        let dimension_weights = [
            raw_weights.grounded,
            raw_weights.valid,
            raw_weights.complete,
        ];
        for (dimension, weight) in Dimension::ALL.into_iter().zip(dimension_weights) {
            check_weight(&format!("dimension_weights.{}", dimension.id()), weight)?;
        }

        let gate = match raw.gate {
            None => None,
            Some(id) => Some(Sub::from_id(&id).ok_or_else(|| {
                let all: Vec<&str> = Sub::ALL.iter().map(|s| s.id()).collect();
                format!(
                    "unknown gate `{id}`; known: {} (or null for no gate)",
                    all.join(", ")
                )
            })?),
        };

        let config = Config {
            active,
            dimension_weights,
            gate,
            ask: Ask::try_from(raw.ask)?,
        };
        let counted: f64 = Dimension::ALL
            .into_iter()
            .filter(|&d| config.active_in(d).next().is_some() || config.ask.weight(d) > 0.0)
            .map(|d| config.dimension_weight(d))
            .sum();
        if counted <= 0.0 {
            return Err(format!(
                "all weights are zero: no dimension has both an active sub-criterion and a \
                 positive weight (grounded: {}; valid: {}; complete: {})",
                known_ids(Dimension::Grounded),
                known_ids(Dimension::Valid),
                known_ids(Dimension::Complete)
            ));
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(value: serde_json::Value) -> Result<Config, String> {
        serde_json::from_value(value).map_err(|e| e.to_string())
    }

    #[test]
    fn empty_config_is_the_default() {
        assert_eq!(parse(json!({})).unwrap(), Config::default());
    }

    #[test]
    fn the_written_default_is_the_default() {
        let written = json!({
            "grounded": {"has-steps": 1.0},
            "valid": {"steps-compute": 1.0},
            "complete": {"final-marked": 1.0, "final-follows": 1.0},
            "dimension_weights": {"grounded": 1.0, "valid": 1.0, "complete": 1.0},
            "gate": "final-marked"
        });
        assert_eq!(parse(written).unwrap(), Config::default());
    }

    #[test]
    fn tables_replace_defaults_and_zero_weights_deactivate() {
        let config = parse(json!({
            "grounded": {"numbers-appear": 2.0, "has-steps": 0.0},
            "dimension_weights": {"valid": 0.5},
            "gate": null
        }))
        .unwrap();
        assert_eq!(
            config.active,
            vec![
                (Sub::NumbersAppear, 2.0),
                (Sub::StepsCompute, 1.0),
                (Sub::FinalMarked, 1.0),
                (Sub::FinalFollows, 1.0)
            ]
        );
        assert_eq!(config.dimension_weights, [1.0, 0.5, 1.0]);
        assert_eq!(config.gate, None);
        let qualified = parse(json!({"gate": "valid/chain-continues"})).unwrap();
        assert_eq!(qualified.gate, Some(Sub::ChainContinues));
    }

    #[test]
    fn the_strict_config_is_expressible() {
        let strict = parse(json!({
            "grounded": {"has-steps": 1, "numbers-appear": 1, "starts-from-problem": 1,
                         "operands-in-order": 1, "operations-match": 1, "step-count-matches": 1},
            "valid": {"steps-compute": 1, "chain-continues": 1},
            "complete": {"final-marked": 1, "final-follows": 1, "nothing-after-final": 1}
        }))
        .unwrap();
        assert_eq!(strict, Config::strict());
    }

    #[test]
    fn bad_configs_name_the_key_and_the_known_ids() {
        let cases = [
            (
                json!({"style": {}}),
                vec!["style", "grounded", "dimension_weights"],
            ),
            (
                json!({"grounded": {"has-step": 1}}),
                vec!["has-step", "has-steps", "numbers-appear"],
            ),
            (
                json!({"valid": {"final-marked": 1}}),
                vec!["final-marked", "belongs to `complete`", "steps-compute"],
            ),
            (
                json!({"valid": {"steps-compute": -1}}),
                vec!["valid.steps-compute", "-1"],
            ),
            (
                json!({"dimension_weights": {"style": 1}}),
                vec!["style", "grounded", "complete"],
            ),
            (
                json!({"dimension_weights": {"valid": -0.5}}),
                vec!["dimension_weights.valid"],
            ),
            (
                json!({"gate": "final"}),
                vec!["final", "final-marked", "null"],
            ),
            (
                json!({"grounded": {"has-steps": "1"}}),
                vec!["invalid type"],
            ),
            (
                json!({"grounded": {}, "valid": {}, "complete": {"final-marked": 0}}),
                vec!["all weights are zero", "has-steps"],
            ),
            (
                json!({"dimension_weights": {"grounded": 0, "valid": 0, "complete": 0}}),
                vec!["all weights are zero"],
            ),
        ];
        for (value, needles) in cases {
            let err = parse(value.clone()).unwrap_err();
            for needle in needles {
                assert!(err.contains(needle), "{value}: {err:?} lacks {needle:?}");
            }
        }
    }

    #[test]
    fn non_finite_weights_are_refused() {
        assert!(check_weight("x", f64::NAN).is_err());
        assert!(check_weight("x", f64::INFINITY).is_err());
        assert!(check_weight("x", 0.0).is_ok());
    }
}
