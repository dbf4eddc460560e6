//! `plateau-trigger`: starts the judge loop when training stops paying off.
//!
//! Checked every `every` steps (default 150). Over the last `window` checks
//! (default 4) it fires when
//! - the mean progress of the fixed evaluator per check is below `threshold`, or
//! - |change in judge reward − change in evaluator score| exceeds `threshold`
//!   (the judge is rewarding something the evaluator does not see).
//!
//! `threshold` (default 0.5) is in the units of the scores the host passes.

#![warn(missing_docs)]

use serde::Deserialize;
use verifine_plugin_api::*;

/// Schedule and sensitivity (`[trigger.config]`).
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Steps between checks (default 150).
    pub every: u64,
    /// Checks looked back over (default 4).
    pub window: usize,
    /// Progress per check below which training has stalled, and the largest
    /// gap allowed between judge-reward and evaluator changes (default 0.5).
    pub threshold: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            every: 150,
            window: 4,
            threshold: 0.5,
        }
    }
}

/// The plugin.
pub struct PlateauTrigger;

impl Trigger for PlateauTrigger {
    type Config = Config;

    fn check(
        config: &Config,
        _: &Context,
        history: &[MonitorPoint],
    ) -> Result<TriggerDecision, String> {
        if config.every == 0 || config.window == 0 {
            return Err("`every` and `window` must be at least 1".to_string());
        }
        let current = history.last().ok_or("empty history")?;
        if current.step % config.every != 0 {
            return Ok(TriggerDecision::hold(format!(
                "step {} is not a check step (every {})",
                current.step, config.every
            )));
        }
        // One point per check step; a later point for the same step replaces an earlier one.
        let mut checks: Vec<&MonitorPoint> = Vec::new();
        for point in history.iter().filter(|p| p.step % config.every == 0) {
            match checks.last() {
                Some(last) if last.step == point.step => *checks.last_mut().unwrap() = point,
                _ => checks.push(point),
            }
        }
        if checks.len() <= config.window {
            return Ok(TriggerDecision::hold(format!(
                "{} checks so far, need {} to judge progress",
                checks.len(),
                config.window + 1
            )));
        }
        let first = checks[checks.len() - 1 - config.window];
        let evaluator_change = current.evaluator_score - first.evaluator_score;
        let judge_change = current.judge_reward - first.judge_reward;
        let mean_progress = evaluator_change / config.window as f64;
        let divergence = (judge_change - evaluator_change).abs();

        Ok(if mean_progress < config.threshold {
            TriggerDecision::fire(format!(
                "evaluator progress {mean_progress:.3} per check over the last {} checks \
                 is below {}",
                config.window, config.threshold
            ))
        } else if divergence > config.threshold {
            TriggerDecision::fire(format!(
                "judge reward changed by {judge_change:.3} but the evaluator by \
                 {evaluator_change:.3} (gap {divergence:.3} > {})",
                config.threshold
            ))
        } else {
            TriggerDecision::hold(format!(
                "evaluator progress {mean_progress:.3} per check, judge gap {divergence:.3}"
            ))
        })
    }
}

export_plugin!(trigger: PlateauTrigger);

#[cfg(test)]
mod tests {
    use super::*;

    fn history(evaluator: &[f64], judge: &[f64]) -> Vec<MonitorPoint> {
        evaluator
            .iter()
            .zip(judge)
            .enumerate()
            .map(|(i, (e, j))| MonitorPoint {
                step: i as u64 * 150,
                round: 0,
                evaluator_score: *e,
                judge_reward: *j,
            })
            .collect()
    }

    fn check(h: &[MonitorPoint]) -> TriggerDecision {
        PlateauTrigger::check(&Config::default(), &Context::at_step(0), h).unwrap()
    }

    #[test]
    fn holds_while_improving_in_step_with_the_judge() {
        let h = history(
            &[10.0, 11.0, 12.0, 13.0, 14.0],
            &[10.0, 11.0, 12.0, 13.0, 14.0],
        );
        assert!(!check(&h).fire);
    }

    #[test]
    fn fires_on_a_plateau() {
        let h = history(
            &[10.0, 10.1, 10.2, 10.2, 10.3],
            &[10.0, 10.1, 10.2, 10.2, 10.3],
        );
        assert!(check(&h).fire);
    }

    #[test]
    fn fires_when_judge_and_evaluator_diverge() {
        let h = history(
            &[10.0, 11.0, 12.0, 13.0, 14.0],
            &[10.0, 12.0, 14.0, 16.0, 18.0],
        );
        let decision = check(&h);
        assert!(decision.fire, "{}", decision.reason);
        assert!(decision.reason.contains("judge reward"));
    }

    #[test]
    fn only_checks_on_schedule_and_after_warm_up() {
        let mut h = history(&[10.0, 10.0], &[10.0, 10.0]);
        assert!(!check(&h).fire);
        h.push(MonitorPoint {
            step: 151,
            round: 0,
            evaluator_score: 0.0,
            judge_reward: 0.0,
        });
        assert!(check(&h).reason.contains("not a check step"));
    }
}
