//! The loop's results as data: a run's `summary.json` (the table, the
//! judge's alignment, what each judge loop did) with the records it is
//! made from (`judge/loops.jsonl`, `kept.jsonl`), the report across seeds
//! (`seeds.json`) and a test-time selection (`selection.json`). The
//! reports, the plots and the reading are made from these, and a finished
//! run is read back as them; they sit below everything that writes or
//! draws them, so drawing a result never reaches into the loop.

use crate::error::{EvolveError, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;
use verifine_base::Provenance;
use verifine_train::sft_data::SftItem;

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// `base`, `random-initial`, `guided-initial`, `R1` …
    pub name: String,
    /// Fixed evaluator's mean total.
    pub rb: f64,
    /// Its 95% bootstrap interval.
    pub rb_ci: [f64; 2],
    /// The final judge's mean total.
    pub rf: f64,
    /// Its interval.
    pub rf_ci: [f64; 2],
    /// Share of correct final answers.
    pub accuracy: f64,
    /// Its interval.
    pub accuracy_ci: [f64; 2],
    /// Share of wrong answers whose steps all compute but do not follow the
    /// problem (what the loose initial judge cannot see), by the annotator's
    /// noise-free reading.
    pub valid_ungrounded: f64,
    /// The judge revision that rewarded the row (none for the base).
    pub judge_revision: Option<u32>,
    /// Whether the trigger fired during the row's round.
    pub trigger_fired: Option<bool>,
    /// In `sft-membership` mode, what the judge let into the round's SFT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub membership: Option<MembershipTally>,
    /// The row (or `base`) whose policy the round started from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_from: Option<String>,
    /// RB on the validation set, which decides the kept policy
    /// (`round_start = "kept"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_rb: Option<f64>,
}

/// A judge revision's agreement with people.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeRow {
    /// The revision number.
    pub revision: u32,
    /// Pearson against the frozen test labels.
    pub pearson_test: f64,
    /// MAE against the frozen test labels.
    pub mae_test: f64,
    /// Pearson on the accumulated judge evaluation set at the end (`None`
    /// when no judge loop labelled anything).
    pub pearson_accumulated: Option<f64>,
    /// MAE on it.
    pub mae_accumulated: Option<f64>,
    /// Where the revision came from.
    pub origin: String,
    /// The component it runs (name, version, sha256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<Provenance>,
}

/// `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvolveSummary {
    /// The table, in order.
    pub rows: Vec<Row>,
    /// Judge alignment per revision, oldest first.
    pub judge: Vec<JudgeRow>,
    /// What each judge loop did.
    pub loops: Vec<LoopRecord>,
    /// The row whose policy the loop delivers (`round_start = "kept"`):
    /// the one the validation set rated best after the last round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
}

/// Reads a finished run's summary.
pub fn read(dir: &Path) -> Result<EvolveSummary> {
    let path = dir.join("summary.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| verifine_base::FileError::io("reading", &path, e))?;
    serde_json::from_str(&text)
        .map_err(|e| EvolveError::Invalid(format!("{}: {e}", path.display())))
}

/// What one judge loop did (`judge/loops.jsonl`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoopRecord {
    /// The round whose judge it produced.
    pub round: u32,
    /// Whether it ran (the trigger fired and no review is pending).
    pub ran: bool,
    /// Why it did or did not run, and how calibration ended.
    pub note: String,
    /// Cases labelled in this loop.
    pub labelled: usize,
    /// Revisions accepted.
    pub accepted: usize,
    /// The live revision afterwards.
    pub live: u32,
}

/// Kept and wrong counts of one round's candidates (for the report).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MembershipTally {
    /// Candidates judged.
    pub candidates: usize,
    /// Candidates kept.
    pub kept: usize,
    /// Kept candidates whose final answer is wrong (by the fixed evaluator).
    pub kept_wrong: usize,
    /// Dropped candidates whose final answer is right.
    pub dropped_right: usize,
}

impl MembershipTally {
    /// Counts a round's `sft_selection.jsonl` items.
    pub(crate) fn of(items: &[SftItem]) -> Self {
        let mut tally = MembershipTally {
            candidates: items.len(),
            ..MembershipTally::default()
        };
        for item in items {
            match (item.weight.is_some(), item.noisy) {
                (true, true) => tally.kept_wrong += 1,
                (false, false) => tally.dropped_right += 1,
                _ => {}
            }
            tally.kept += usize::from(item.weight.is_some());
        }
        tally
    }
}

/// One line of `kept.jsonl`: what the loop decided after a round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeptDecision {
    /// The round's row.
    pub row: String,
    /// Its validation RB.
    pub validation_rb: f64,
    /// The kept policy's row and validation RB before the round.
    pub before: (String, f64),
    /// Whether the round became the kept policy.
    pub kept: bool,
    /// The live judge revision after the decision.
    pub live: u32,
}

/// A row of the table across seeds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RowAcrossSeeds {
    /// `base`, `random-initial`, `guided-initial`, `R1` …
    pub name: String,
    /// Mean RB over the seeds.
    pub rb_mean: f64,
    /// 95% Student-t interval of that mean across seeds (a point for one seed).
    pub rb_interval: [f64; 2],
    /// Each seed's RB, in the order of [`SeedReport::seeds`].
    pub rb_per_seed: Vec<f64>,
}

/// One row minus another, per seed, with the mean difference's interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairedDifference {
    /// `R3 − base` …
    pub name: String,
    /// Mean of the per-seed differences.
    pub mean: f64,
    /// Its 95% Student-t interval.
    pub interval: [f64; 2],
    /// Each seed's difference.
    pub per_seed: Vec<f64>,
}

/// One of the checks the table is read by.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// What must hold.
    pub claim: String,
    /// Whether it holds.
    pub holds: bool,
    /// The numbers that decide it.
    pub detail: String,
}

/// `seeds.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeedReport {
    /// The seeds, in run order.
    pub seeds: Vec<u64>,
    /// The table's rows.
    pub rows: Vec<RowAcrossSeeds>,
    /// Per seed, the judge's frozen-test Pearson per revision (oldest first).
    pub judge_pearson: Vec<Vec<f64>>,
    /// The last round against each earlier row, seed by seed: a difference
    /// within a seed cancels what the seed moves for every row (the base
    /// alone spans 20 points across seeds).
    pub paired: Vec<PairedDifference>,
    /// The checks.
    pub checks: Vec<Check>,
    /// Per seed, the row whose policy the loop delivered (empty unless
    /// every seed's run kept one: `round_start = "kept"`).
    pub kept: Vec<String>,
}

/// One selector's curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelectorCurve {
    /// `random`, `initial judge (r0)`, `R1 judge (rN)`, `final judge (rN)`,
    /// `RB`, `annotator (upper bound)`.
    pub selector: String,
    /// Mean annotator score of the pick at budgets 1..N.
    pub mean: Vec<f64>,
    /// 95% bootstrap intervals, per budget.
    pub ci: Vec<[f64; 2]>,
}

/// `selection.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// The row whose policy answered.
    pub row: String,
    /// Candidates per problem.
    pub candidates: usize,
    /// Problems.
    pub problems: usize,
    /// One curve per selector.
    pub curves: Vec<SelectorCurve>,
}
