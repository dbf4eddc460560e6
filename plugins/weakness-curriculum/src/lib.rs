//! `weakness-curriculum`: focus training where the policy is weakest.
//!
//! The weakness of a (scenario, dimension) cell is 1 − the mean judge score of
//! the batch's candidates with that scenario tag in that dimension. A
//! candidate's priority is `base_priority + gain · w`, where w is the largest
//! weakness among its cells, so prompts that exercise weak cells are sampled
//! more. Candidates whose target the judge marks unreliable — the judge scores
//! their reference answer below `min_reference_score` — are dropped.

#![warn(missing_docs)]

use serde::Deserialize;
use std::collections::BTreeMap;
use verifine_plugin_api::*;

/// Priorities and the reliability cut (`[curriculum.config]`).
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Priority of a candidate in no weak cell (default 1).
    pub base_priority: f64,
    /// Extra priority per unit of its weakest cell's weakness (default 4).
    pub gain: f64,
    /// Reference answers the judge scores below this are unreliable targets,
    /// dropped (default 0.5).
    pub min_reference_score: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            base_priority: 1.0,
            gain: 4.0,
            min_reference_score: 0.5,
        }
    }
}

/// The (scenario, dimension) cells of a candidate with its mean score in each.
fn cells(candidate: &Candidate) -> Vec<((String, String), f64)> {
    let scenarios: Vec<String> = if candidate.tags.is_empty() {
        vec!["untagged".to_string()]
    } else {
        candidate.tags.clone()
    };
    let mut dimensions: Vec<(String, f64)> = candidate
        .history
        .iter()
        .filter(|h| !h.scores.is_empty())
        .map(|h| {
            let mean = h.scores.iter().sum::<f64>() / h.scores.len() as f64;
            (h.dimension.clone(), mean)
        })
        .collect();
    if dimensions.is_empty() {
        dimensions.push(("reward".to_string(), candidate.reward_mean));
    }
    scenarios
        .iter()
        .flat_map(|s| {
            dimensions
                .iter()
                .map(move |(d, m)| ((s.clone(), d.clone()), *m))
        })
        .collect()
}

/// The plugin.
pub struct WeaknessCurriculum;

impl Curriculum for WeaknessCurriculum {
    type Config = Config;

    fn select(
        config: &Config,
        _: &Context,
        candidates: &[Candidate],
    ) -> Result<Vec<CurriculumDecision>, String> {
        let per_candidate: Vec<_> = candidates.iter().map(cells).collect();
        let mut sums: BTreeMap<&(String, String), (f64, usize)> = BTreeMap::new();
        for (cell, mean) in per_candidate.iter().flatten() {
            if mean.is_finite() {
                let entry = sums.entry(cell).or_default();
                entry.0 += mean;
                entry.1 += 1;
            }
        }
        let weakness = |cell: &(String, String)| {
            sums.get(cell)
                .map(|(sum, n)| (1.0 - sum / *n as f64).clamp(0.0, 1.0))
                .unwrap_or(0.0)
        };

        Ok(candidates
            .iter()
            .zip(&per_candidate)
            .map(|(candidate, cells)| {
                if let Some(score) = candidate.reference_score
                    && score < config.min_reference_score
                {
                    return CurriculumDecision {
                        selection: Selection::Drop,
                        reason: format!(
                            "the judge scores the reference answer {score:.2} < {}: \
                             target unreliable",
                            config.min_reference_score
                        ),
                    };
                }
                let (cell, w) = cells
                    .iter()
                    .map(|(cell, _)| (cell, weakness(cell)))
                    .fold(
                        None,
                        |best: Option<(&(String, String), f64)>, (c, w)| match best {
                            Some((_, bw)) if bw >= w => best,
                            _ => Some((c, w)),
                        },
                    )
                    .expect("every candidate has at least one cell");
                CurriculumDecision {
                    selection: Selection::Keep(config.base_priority + config.gain * w),
                    reason: format!("weakest cell {} × {} (weakness {w:.2})", cell.0, cell.1),
                }
            })
            .collect())
    }
}

export_plugin!(curriculum: WeaknessCurriculum);

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(
        id: &str,
        tag: &str,
        dim: &str,
        scores: &[f64],
        reference: Option<f64>,
    ) -> Candidate {
        Candidate {
            sample_id: id.into(),
            tags: vec![tag.into()],
            history: vec![DimensionHistory {
                dimension: dim.into(),
                scores: scores.to_vec(),
            }],
            reward_mean: 0.5,
            reward_std: 0.1,
            rollouts: 8,
            reference_score: reference,
        }
    }

    fn priority(d: &CurriculumDecision) -> f64 {
        match d.selection {
            Selection::Keep(p) => p,
            Selection::Drop => 0.0,
        }
    }

    #[test]
    fn weak_cells_get_higher_priority_and_unreliable_targets_drop() {
        let batch = [
            candidate("a", "scenario:merge", "causality", &[0.1, 0.3], Some(0.9)),
            candidate("b", "scenario:highway", "causality", &[0.9, 1.0], None),
            candidate("c", "scenario:merge", "safety", &[1.0], Some(0.1)),
        ];
        let d =
            WeaknessCurriculum::select(&Config::default(), &Context::at_step(0), &batch).unwrap();
        assert!(priority(&d[0]) > priority(&d[1]));
        assert!(d[0].reason.contains("scenario:merge × causality"));
        assert!(matches!(d[2].selection, Selection::Drop));
        assert!(d[2].reason.contains("unreliable"));
    }
}
