//! The accept rule: whether a proposed revision's scores agree better with
//! the labels than the live revision's, without losing earlier competence.

use super::{CalibrationConfig, LabelledSet, alignment, wrong};
use crate::calibration::Alignment;
use serde::{Deserialize, Serialize};

/// What the accept rule decided about one proposal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Whether the proposal goes live.
    pub accepted: bool,
    /// Why, in words.
    pub reason: String,
    /// The live judge on the newest batch.
    pub current_before: Alignment,
    /// The proposal on the newest batch.
    pub current_after: Alignment,
    /// The earlier case that got worse the most, and by how much.
    pub worst_regression: Option<(String, f64)>,
    /// The live judge on the whole accumulated set.
    #[serde(default)]
    pub accumulated_before: Option<Alignment>,
    /// The proposal on the whole accumulated set.
    #[serde(default)]
    pub accumulated_after: Option<Alignment>,
    /// The judge's mean reward on the labelled answers with a wrong final
    /// answer, live then proposed (`None` when there are none).
    #[serde(default)]
    pub wrong_reward: Option<(f64, f64)>,
}

/// The accept rule.
pub fn decide(
    config: &CalibrationConfig,
    set: &LabelledSet,
    live: &[f64],
    candidate: &[f64],
) -> Decision {
    let human = set.human();
    let before = alignment(live, &human, &set.current);
    let after = alignment(candidate, &human, &set.current);
    let worst = set
        .earlier
        .iter()
        .map(|&i| {
            (
                i,
                (candidate[i] - human[i]).abs() - (live[i] - human[i]).abs(),
            )
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .filter(|(_, worse)| *worse > 0.0)
        .map(|(i, worse)| (set.cases[i].id.clone(), worse));
    let all = set.all();
    let accumulated_before = alignment(live, &human, &all);
    let accumulated_after = alignment(candidate, &human, &all);
    let wrong = wrong::answers(set);
    let wrong_reward = wrong::mean(live, &wrong).zip(wrong::mean(candidate, &wrong));
    let drop = accumulated_before.pearson - accumulated_after.pearson;
    let gain = after.pearson - before.pearson;
    let (accepted, reason) = if gain <= config.min_gain {
        (
            false,
            format!(
                "Pearson on the newest batch {:.3} → {:.3}: does not rise by more than {}",
                before.pearson, after.pearson, config.min_gain
            ),
        )
    } else if let Some((id, worse)) = worst.as_ref().filter(|(_, w)| *w > config.margin) {
        (
            false,
            format!(
                "earlier case {id} gets worse by {worse:.3} (margin {})",
                config.margin
            ),
        )
    } else if drop > config.max_accumulated_drop {
        (
            false,
            format!(
                "Pearson on the accumulated set {:.3} → {:.3}: falls by more than {}",
                accumulated_before.pearson, accumulated_after.pearson, config.max_accumulated_drop
            ),
        )
    } else if accumulated_after.mae - accumulated_before.mae > config.max_accumulated_mae_rise {
        (
            false,
            format!(
                "MAE on the accumulated set {:.3} → {:.3}: rises by more than {}",
                accumulated_before.mae, accumulated_after.mae, config.max_accumulated_mae_rise
            ),
        )
    } else if let (Some(limit), Some((live_wrong, proposed_wrong))) =
        (config.max_wrong_reward_rise, wrong_reward)
        && proposed_wrong - live_wrong > limit
    {
        (
            false,
            format!(
                "mean reward on the {} labelled answers with a wrong final answer \
                 {live_wrong:.3} → {proposed_wrong:.3}: rises by more than {limit}",
                wrong.len()
            ),
        )
    } else {
        (
            true,
            format!(
                "Pearson on the newest batch {:.3} → {:.3} (accumulated {:.3} → {:.3}), \
                 no earlier case worse by more than {}",
                before.pearson,
                after.pearson,
                accumulated_before.pearson,
                accumulated_after.pearson,
                config.margin
            ),
        )
    };
    Decision {
        accepted,
        reason,
        current_before: before,
        current_after: after,
        worst_regression: worst,
        accumulated_before: Some(accumulated_before),
        accumulated_after: Some(accumulated_after),
        wrong_reward,
    }
}

/// The decision on a proposal refused before it was scored (its code did
/// not build, load or pass its snapshot cases): the live figures stand on
/// both sides.
pub(super) fn refused_before_scoring(set: &LabelledSet, live: &[f64], reason: String) -> Decision {
    let human = set.human();
    let before = alignment(live, &human, &set.current);
    let all = set.all();
    let accumulated = alignment(live, &human, &all);
    Decision {
        accepted: false,
        reason,
        current_before: before,
        current_after: before,
        worst_regression: None,
        accumulated_before: Some(accumulated),
        accumulated_after: Some(accumulated),
        wrong_reward: None,
    }
}
