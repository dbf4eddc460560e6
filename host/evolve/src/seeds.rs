//! One config at several seeds, and the report across them.
//!
//! A single trajectory cannot carry a claim: runs on another machine diverge
//! as another seed would (the matrix kernels round differently), and a
//! 250-step round moves RB by ±3–5 points on its own. So the claims of the
//! co-evolution table are made over seeds: each row's RB as the mean with a
//! 95% Student-t interval across seeds, each seed's value beside it, the
//! judge's frozen-test Pearson per revision per seed, the last round's
//! per-seed differences from every earlier row, and the checks the table
//! is read by, each with the numbers that decide it.

use crate::config::EvolveConfig;
use crate::error::{EvolveError, Result};
use crate::run::EvolveProgress;
use crate::summary::{Check, EvolveSummary, PairedDifference, RowAcrossSeeds, SeedReport};
use std::fmt::Write as _;
use std::path::Path;
use verifine_base::write_atomically;

/// Runs `config` once per loop seed (its top-level `seed` replaced; the
/// base and the data stay those of `[train] seed`), each into
/// `dir/seed-<N>`, and writes the report across them into `dir`. A seed whose
/// run finished earlier (a `summary.json`) is read, not run again; one that
/// stopped (a `state.json`) is resumed. `progress` makes the callback of
/// each seed's run; `announce` hears which seed starts and how.
pub fn run(
    config: &EvolveConfig,
    dir: &Path,
    seeds: &[u64],
    mut progress: impl FnMut() -> Box<dyn FnMut(EvolveProgress)>,
    mut announce: impl FnMut(u64, SeedStart),
) -> Result<SeedReport> {
    let mut runs = Vec::with_capacity(seeds.len());
    for &seed in seeds {
        let seed_dir = dir.join(format!("seed-{seed}"));
        let summary = if seed_dir.join("summary.json").exists() {
            announce(seed, SeedStart::Finished);
            crate::summary::read(&seed_dir)?
        } else if seed_dir.join("state.json").exists() {
            announce(seed, SeedStart::Resumed);
            crate::run::resume(&seed_dir, progress())?
        } else {
            announce(seed, SeedStart::Fresh);
            let mut seeded = config.clone();
            seeded.seed = Some(seed);
            crate::run::start(seeded, &seed_dir, progress())?
        };
        runs.push(SeedRun { seed, summary });
    }
    let report = across(&runs)?;
    write(&report, dir)?;
    Ok(report)
}

/// How a seed's run began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedStart {
    /// From the start.
    Fresh,
    /// After the last task an earlier, stopped run finished.
    Resumed,
    /// Not at all: it had finished; its summary is read.
    Finished,
}

/// A finished run of one seed.
struct SeedRun {
    /// The loop seed it ran with.
    seed: u64,
    /// Its `summary.json`.
    summary: EvolveSummary,
}

/// The row across seeds of the policies the loop delivered.
const KEPT_ROW: &str = "kept";

/// RB points the last round may fall below R1 at any seed.
const LAST_ROUND_SLACK: f64 = 0.03;

/// The report across `runs`; every run must have the same rows.
fn across(runs: &[SeedRun]) -> Result<SeedReport> {
    let first = runs
        .first()
        .ok_or_else(|| EvolveError::Invalid("a report across seeds needs a run".into()))?;
    let names: Vec<&str> = first.summary.rows.iter().map(|r| r.name.as_str()).collect();
    for run in runs {
        let these: Vec<&str> = run.summary.rows.iter().map(|r| r.name.as_str()).collect();
        if these != names {
            return Err(EvolveError::Invalid(format!(
                "seed {} has rows {these:?}, seed {} {names:?}: not the same config",
                run.seed, first.seed
            )));
        }
    }
    let across_seeds = |name: &str, values: Vec<f64>| {
        let (mean, interval) = mean_interval(&values);
        RowAcrossSeeds {
            name: name.to_string(),
            rb_mean: mean,
            rb_interval: interval,
            rb_per_seed: values,
        }
    };
    let mut rows: Vec<RowAcrossSeeds> = names
        .iter()
        .enumerate()
        .map(|(i, name)| across_seeds(name, runs.iter().map(|r| r.summary.rows[i].rb).collect()))
        .collect();
    // What the loop delivers at each seed, when every seed kept a policy.
    let kept: Vec<String> = runs.iter().filter_map(|r| r.summary.kept.clone()).collect();
    let kept = match kept.len() == runs.len() {
        true => kept,
        false => Vec::new(),
    };
    if !kept.is_empty() {
        let values = runs
            .iter()
            .zip(&kept)
            .map(|(run, row)| {
                run.summary
                    .rows
                    .iter()
                    .find(|r| &r.name == row)
                    .map(|r| r.rb)
                    .ok_or_else(|| {
                        EvolveError::Invalid(format!(
                            "seed {} kept {row}, which is not a row",
                            run.seed
                        ))
                    })
            })
            .collect::<Result<Vec<f64>>>()?;
        rows.push(across_seeds(KEPT_ROW, values));
    }
    let judge_pearson = runs
        .iter()
        .map(|r| r.summary.judge.iter().map(|j| j.pearson_test).collect())
        .collect();
    let mut report = SeedReport {
        seeds: runs.iter().map(|r| r.seed).collect(),
        rows,
        judge_pearson,
        paired: Vec::new(),
        checks: Vec::new(),
        kept,
    };
    report.paired = paired(&report);
    report.checks = checks(&report);
    Ok(report)
}

/// Mean and 95% Student-t interval of the mean.
fn mean_interval(values: &[f64]) -> (f64, [f64; 2]) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if values.len() < 2 {
        return (mean, [mean, mean]);
    }
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let half = student_t_975(values.len() - 1) * (variance / n).sqrt();
    (mean, [mean - half, mean + half])
}

/// The 97.5% quantile of Student's t with `df` degrees of freedom.
fn student_t_975(df: usize) -> f64 {
    const TABLE: [f64; 10] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    ];
    match df {
        0 => f64::INFINITY,
        1..=10 => TABLE[df - 1],
        11..=30 => 2.042 + (2.228 - 2.042) * (30 - df) as f64 / 20.0,
        _ => 1.96,
    }
}

/// The rounds with the revised judge, `R1` … in order.
fn round_rows(report: &SeedReport) -> Vec<&RowAcrossSeeds> {
    report
        .rows
        .iter()
        .filter(|r| {
            r.name
                .strip_prefix('R')
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .collect()
}

/// The last round minus every earlier row, seed by seed.
fn paired(report: &SeedReport) -> Vec<PairedDifference> {
    let Some(last) = round_rows(report).last().copied() else {
        return Vec::new();
    };
    let mut differences: Vec<PairedDifference> = report
        .rows
        .iter()
        .take_while(|r| r.name != last.name)
        .map(|other| difference(last, other))
        .collect();
    let row = |name: &str| report.rows.iter().find(|r| r.name == name);
    if let (Some(kept), Some(base)) = (row(KEPT_ROW), row("base")) {
        differences.push(difference(kept, base));
    }
    differences
}

/// `a − b`, seed by seed.
fn difference(a: &RowAcrossSeeds, b: &RowAcrossSeeds) -> PairedDifference {
    let per_seed: Vec<f64> = a
        .rb_per_seed
        .iter()
        .zip(&b.rb_per_seed)
        .map(|(x, y)| x - y)
        .collect();
    let (mean, interval) = mean_interval(&per_seed);
    PairedDifference {
        name: format!("{} − {}", a.name, b.name),
        mean,
        interval,
        per_seed,
    }
}

fn checks(report: &SeedReport) -> Vec<Check> {
    let rounds = round_rows(report);
    let (Some(first), Some(last)) = (rounds.first(), rounds.last()) else {
        return Vec::new();
    };
    let mut checks = Vec::new();
    // Within a seed, the base and the data are shared by every row, so the
    // claims rest on per-seed differences, not on the rows' own intervals.
    let difference = |other: &str| {
        let name = format!("{} − {other}", last.name);
        report.paired.iter().find(|p| p.name == name)
    };
    if let Some(gain) = difference("base") {
        checks.push(Check {
            claim: format!(
                "{} above base, paired across seeds: 95% interval above 0",
                last.name
            ),
            holds: gain.interval[0] > 0.0,
            detail: format!(
                "{}: {:+.3} [{:+.3}, {:+.3}], per seed {}",
                gain.name,
                gain.mean,
                gain.interval[0],
                gain.interval[1],
                list(&gain.per_seed)
            ),
        });
    }
    for name in ["random-initial", "guided-initial"] {
        let Some(gain) = difference(name) else {
            continue;
        };
        checks.push(Check {
            claim: format!("{} above {name} at every seed", last.name),
            holds: gain.per_seed.iter().all(|d| *d > 0.0),
            detail: format!("{} per seed: {}", gain.name, list(&gain.per_seed)),
        });
    }
    let drops: Vec<f64> = last
        .rb_per_seed
        .iter()
        .zip(&first.rb_per_seed)
        .map(|(l, f)| l - f)
        .collect();
    checks.push(Check {
        claim: format!(
            "no seed's {} more than {:.0} points below its {}",
            last.name,
            LAST_ROUND_SLACK * 100.0,
            first.name
        ),
        holds: drops.iter().all(|d| *d >= -LAST_ROUND_SLACK),
        detail: format!("{} − {} per seed: {}", last.name, first.name, list(&drops)),
    });
    let gains: Vec<f64> = report
        .judge_pearson
        .iter()
        .map(|p| p.last().copied().unwrap_or(f64::NAN) - p.first().copied().unwrap_or(f64::NAN))
        .collect();
    checks.push(Check {
        claim: "final judge's frozen-test Pearson above the initial one at every seed".into(),
        holds: gains.iter().all(|g| *g > 0.0),
        detail: format!("final − initial per seed: {}", list(&gains)),
    });
    checks
}

fn list(values: &[f64]) -> String {
    let parts: Vec<String> = values.iter().map(|v| format!("{v:+.3}")).collect();
    parts.join(", ")
}

/// Writes `seeds.json`, `seeds.md` and `seeds.png` into `dir` (each through
/// a temporary file and a rename).
fn write(report: &SeedReport, dir: &Path) -> Result<()> {
    let json =
        serde_json::to_string_pretty(report).map_err(|e| EvolveError::Invalid(e.to_string()))?;
    write_atomically(&dir.join("seeds.json"), |w| w.write_all(json.as_bytes()))?;
    let markdown = markdown(report);
    write_atomically(&dir.join("seeds.md"), |w| w.write_all(markdown.as_bytes()))?;
    crate::plot::draw_seeds(report, &dir.join("seeds.png"))
}

/// The report as a Markdown table with the checks below it.
pub fn markdown(report: &SeedReport) -> String {
    let seeds: Vec<String> = report.seeds.iter().map(|s| format!("seed {s}")).collect();
    let mut out = format!(
        "# RB across seeds {}\n\n| row | mean RB [95% t interval] | {} |\n|---|---|{}\n",
        report
            .seeds
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        seeds.join(" | "),
        "---|".repeat(seeds.len())
    );
    for row in &report.rows {
        let values: Vec<String> = row.rb_per_seed.iter().map(|v| format!("{v:.3}")).collect();
        let _ = writeln!(
            out,
            "| {} | {:.3} [{:.3}, {:.3}] | {} |",
            row.name,
            row.rb_mean,
            row.rb_interval[0],
            row.rb_interval[1],
            values.join(" | ")
        );
    }
    if !report.kept.is_empty() {
        let _ = writeln!(
            out,
            "\n`{KEPT_ROW}`: the policy each seed's loop delivered (the validation set's best after the last round): {}.",
            report.kept.join(", ")
        );
    }
    out.push_str("\n## Paired differences within each seed\n\n");
    for difference in &report.paired {
        let _ = writeln!(
            out,
            "- {}: {:+.3} [{:+.3}, {:+.3}] (per seed: {})",
            difference.name,
            difference.mean,
            difference.interval[0],
            difference.interval[1],
            list(&difference.per_seed)
        );
    }
    out.push_str("\n## Judge Pearson on the frozen test labels, per revision\n\n");
    for (seed, pearson) in report.seeds.iter().zip(&report.judge_pearson) {
        let values: Vec<String> = pearson.iter().map(|p| format!("{p:.3}")).collect();
        let _ = writeln!(out, "- seed {seed}: {}", values.join(" → "));
    }
    out.push_str("\n## Checks\n\n");
    for check in &report.checks {
        let mark = if check.holds { "holds" } else { "**fails**" };
        let _ = writeln!(out, "- {}: {mark} ({})", check.claim, check.detail);
    }
    out
}

#[cfg(test)]
#[path = "seeds_tests.rs"]
mod tests;
