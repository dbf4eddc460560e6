//! Test-time selection (`verifine select`): one policy answers each
//! held-out problem N times; each selector — random, the initial judge, the
//! judge revision of R1, the final judge, the reference-based evaluator, and the annotator
//! itself as the upper bound — picks the best of the first `b` candidates
//! for every budget b = 1..N; the table is the annotator's mean score of the
//! picks with a 95% bootstrap interval. A judge that ranks like people
//! climbs towards the upper bound as the budget grows.

use super::Evolve;
use crate::annotator::Annotator;
use crate::calibration::totals;
use crate::cases::Case;
use crate::error::{EvolveError, Result};
use crate::judge::JudgeRevision;
use crate::summary::{Selection, SelectorCurve};
use std::fmt::Write as _;
use std::path::Path;
use verifine_base::{SplitMix64, write_atomically};
use verifine_runtime::stats::bootstrap;

/// Mixed into the seed for the candidates and the random selector.
const SELECT_STREAM: u64 = 0x5E1E_C7ED;

impl Evolve {
    /// Runs the comparison for the policy of `row` and writes
    /// `selection.json` and `selection.md` into the run directory.
    pub fn select(&self, row: &str, candidates: usize, problems: usize) -> Result<Selection> {
        if candidates == 0 || problems == 0 {
            return Err(EvolveError::Invalid(
                "select: --candidates and --problems must be at least 1".into(),
            ));
        }
        let dir = if row == "base" {
            self.base_dir()
        } else {
            self.row_dir(row)
        };
        if !dir.join("model.safetensors").exists() {
            return Err(EvolveError::Invalid(format!(
                "select: row {row:?} has no finished policy in {}",
                dir.display()
            )));
        }
        let heldout: Vec<_> = self.heldout().into_iter().take(problems).collect();
        let policy = verifine_train::Policy::load(&dir, &self.config.train.model)?;
        let g = &self.config.train.grpo;
        let seed = self.config.loop_seed() ^ SELECT_STREAM;
        let answers = policy.answer(
            &heldout,
            verifine_train::rollout::Sampling::Temperature(g.temperature),
            candidates,
            g.max_new_tokens,
            seed,
        )?;
        let cases: Vec<Case> = heldout
            .iter()
            .zip(&answers)
            .enumerate()
            .flat_map(|(i, (p, rs))| {
                rs.iter()
                    .enumerate()
                    .map(move |(k, r)| Case::new(format!("select-{i}-{k}"), p, r))
            })
            .collect();
        let human: Vec<f64> =
            Annotator::new("select-annotator", self.config.annotator.independent())
                .label(&cases, &[])
                .iter()
                .map(|l| l.total)
                .collect();

        let mut selectors: Vec<(String, Vec<f64>)> = Vec::new();
        let mut rng = SplitMix64::new(seed);
        selectors.push((
            "random".into(),
            cases
                .iter()
                .map(|_| (rng.next_u64() >> 11) as f64)
                .collect(),
        ));
        let revision = |n: u32| self.state.revisions.iter().find(|r| r.number == n).cloned();
        let judges: Vec<(String, Option<JudgeRevision>)> = vec![
            ("initial judge (r0)".to_string(), revision(0)),
            (
                format!(
                    "R1 judge (r{})",
                    self.state.trained_with.get("R1").copied().unwrap_or(0)
                ),
                self.state.trained_with.get("R1").and_then(|&n| revision(n)),
            ),
            (
                format!("final judge (r{})", self.state.live.number),
                Some(self.state.live.clone()),
            ),
        ];
        for (name, judge) in judges {
            if let Some(judge) = judge {
                selectors.push((name, totals(&self.judge.score(&judge, &cases)?)));
            }
        }
        selectors.push(("RB".into(), self.evaluator_totals(&cases)?));
        selectors.push(("annotator (upper bound)".into(), human.clone()));

        let curves = selectors
            .into_iter()
            .map(|(selector, scores)| {
                let (mut mean, mut ci) = (Vec::new(), Vec::new());
                for budget in 1..=candidates {
                    let picked: Vec<f64> = (0..heldout.len())
                        .map(|p| {
                            let range = p * candidates..p * candidates + budget;
                            let best = range
                                .max_by(|&a, &b| scores[a].total_cmp(&scores[b]).then(b.cmp(&a)))
                                .expect("budget ≥ 1");
                            human[best]
                        })
                        .collect();
                    let e = bootstrap(picked.len(), self.config.bootstrap, seed, |idx| {
                        idx.iter().map(|&i| picked[i]).sum::<f64>() / idx.len().max(1) as f64
                    });
                    mean.push(e.value);
                    ci.push([e.ci_low, e.ci_high]);
                }
                SelectorCurve { selector, mean, ci }
            })
            .collect();
        let selection = Selection {
            row: row.to_string(),
            candidates,
            problems: heldout.len(),
            curves,
        };
        write(&selection, &self.dir)?;
        Ok(selection)
    }
}

fn write(selection: &Selection, dir: &Path) -> Result<()> {
    let json =
        serde_json::to_string_pretty(selection).map_err(|e| EvolveError::Invalid(e.to_string()))?;
    write_atomically(&dir.join("selection.json"), |w| {
        w.write_all(json.as_bytes())
    })?;
    let mut md = format!(
        "# Test-time selection\n\nPolicy of row {}, {} candidates for each of {} held-out problems. Each selector picks the \
         best of the first b candidates; the cell is the annotator's mean score of the picks [95% bootstrap interval].\n\n| selector |",
        selection.row, selection.candidates, selection.problems
    );
    for b in 1..=selection.candidates {
        let _ = write!(md, " b = {b} |");
    }
    md.push_str("\n|---|");
    md.push_str(&"---|".repeat(selection.candidates));
    md.push('\n');
    for curve in &selection.curves {
        let _ = write!(md, "| {} |", curve.selector);
        for (m, c) in curve.mean.iter().zip(&curve.ci) {
            let _ = write!(md, " {m:.3} [{:.3}, {:.3}] |", c[0], c[1]);
        }
        md.push('\n');
    }
    write_atomically(&dir.join("selection.md"), |w| w.write_all(md.as_bytes()))?;
    crate::plot::draw_selection(selection, &dir.join("selection.png"))
}
