//! What a screen found: `summary.json` (every figure) and `report.md`
//! (the tables a person reads), written atomically.

use super::config::{PostTraining, Source, Verifier};
use super::run::VerifierRun;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use verifine_judge::screen::{self, Agreement};

/// The whole screen.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScreenSummary {
    /// The slice file.
    pub slice: String,
    /// Rows (tasks) in the slice.
    pub tasks: usize,
    /// (response, criterion) pairs.
    pub pairs: usize,
    /// Pairs where the goldens have a majority.
    pub pairs_with_majority: usize,
    /// The cost-reducing rule's accuracy threshold.
    pub threshold: f64,
    /// Each candidate, against the golden majority (top-level figures) and
    /// each golden.
    pub candidates: Vec<VerifierRow>,
    /// Each golden, against the majority and the other goldens.
    pub goldens: Vec<VerifierRow>,
    /// What the golden protocol (every golden judging) costs.
    pub golden_protocol_usd_per_1000_tasks: f64,
    /// The choice rules' picks.
    pub picks: Picks,
    /// The post-training score before training, when scores were given.
    pub post_training_baseline: Option<f64>,
    /// How far one flipped verdict moves scores.
    pub single_error: SingleError,
}

/// One verifier's row.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VerifierRow {
    /// Its name.
    pub name: String,
    /// Where its verdicts come from, in words.
    pub source: String,
    /// Agreement with the golden majority.
    #[serde(flatten)]
    pub versus_majority: Agreement,
    /// Agreement with each golden (other than itself).
    pub versus_goldens: BTreeMap<String, Agreement>,
    /// What it costs.
    #[serde(flatten)]
    pub cost: Cost,
    /// Rows with at least one pair it gave no verdict on.
    pub failed_rows: usize,
    /// The first such failure.
    pub first_error: Option<String>,
    /// Task scores from its verdicts (HealthBench's rule).
    pub task_scores: TaskScores,
    /// Post-training: best − this candidate's score.
    pub score_gap: Option<f64>,
    /// Post-training: (score − baseline) / (best − baseline).
    pub uplift: Option<f64>,
    /// 1 − its cost / the golden protocol's cost.
    pub cost_reduction: Option<f64>,
}

/// Cost per 1 000 tasks.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Cost {
    /// USD by the judge's price table, plus the verifier's own price.
    pub usd_per_1000_tasks: f64,
    /// Requests sent.
    pub calls_per_1000_tasks: f64,
    /// Prompt tokens.
    pub input_tokens_per_1000_tasks: f64,
    /// Of those, served from a prompt cache or reused prefix.
    pub cached_input_tokens_per_1000_tasks: f64,
    /// Answer tokens.
    pub output_tokens_per_1000_tasks: f64,
    /// Seconds of this machine (local judges, plugins).
    pub device_seconds_per_1000_tasks: f64,
}

/// Mean task scores.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct TaskScores {
    /// Over the rows it scored.
    pub mean: Option<f64>,
    /// Over rows marked `"split": "hard"`.
    pub hard: Option<f64>,
    /// Over the other marked rows.
    pub nonhard: Option<f64>,
    /// HealthBench's weighted "all": (100·hard + 160·nonhard) / 260.
    pub all: Option<f64>,
}

/// The choice rules' picks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Picks {
    /// The cheapest candidate at or above the threshold (else the cheapest).
    pub cost_reducing: Option<String>,
    /// The user's fixed pick.
    pub balanced: Option<String>,
}

/// One flipped verdict's reach.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct SingleError {
    /// The most one flip moves any task's score.
    pub largest_task_move: Option<f64>,
    /// The most one flip moves the slice's mean score.
    pub policy_move: Option<f64>,
}

impl VerifierRow {
    /// A row from a run and its agreements.
    pub fn new(
        verifier: &Verifier,
        run: &VerifierRun,
        tasks: usize,
        versus_majority: Agreement,
        versus_goldens: BTreeMap<String, Agreement>,
        task_scores: TaskScores,
    ) -> Self {
        let per_k = run.ledger.per_thousand(tasks);
        let k = 1000.0 / tasks.max(1) as f64;
        VerifierRow {
            name: verifier.name.clone(),
            source: describe(&verifier.source),
            versus_majority,
            versus_goldens,
            cost: Cost {
                usd_per_1000_tasks: per_k.usd + verifier.usd_per_1000_tasks,
                calls_per_1000_tasks: run.ledger.calls as f64 * k,
                input_tokens_per_1000_tasks: run.ledger.usage.input as f64 * k,
                cached_input_tokens_per_1000_tasks: run.ledger.usage.cached_input as f64 * k,
                output_tokens_per_1000_tasks: run.ledger.usage.output as f64 * k,
                device_seconds_per_1000_tasks: run.device_seconds * k,
            },
            failed_rows: run.failed_rows,
            first_error: run.first_error.clone(),
            task_scores,
            score_gap: None,
            uplift: None,
            cost_reduction: None,
        }
    }
}

fn describe(source: &Source) -> String {
    match source {
        Source::Judge {
            judge,
            batch,
            answer,
            reference,
        } => {
            let guided = if *reference { ", reference-guided" } else { "" };
            match answer.as_str() {
                "yes-no" => format!("judge {judge} (one item per query, YES/NO{guided})"),
                _ => format!("judge {judge} (batch {batch}, {answer}{guided})"),
            }
        }
        Source::Plugin {
            plugin, criterion, ..
        } => match criterion {
            Some(c) => format!("plugin {plugin} ({c})"),
            None => format!("plugin {plugin}"),
        },
        Source::Labels { path } => format!("labels {}", path.display()),
        Source::RowLabel => "the rows' labels".to_string(),
    }
}

/// Mean task scores by HealthBench's rule (Σ points met / Σ positive
/// points); a row with a missing verdict or no positive points has none.
pub fn task_scores(
    verdicts: &[Vec<Option<bool>>],
    points: &[Vec<f64>],
    hard: &[Option<bool>],
) -> TaskScores {
    let scores: Vec<Option<f64>> = verdicts
        .iter()
        .zip(points)
        .map(|(v, p)| {
            let positive: f64 = p.iter().filter(|x| **x > 0.0).sum();
            let met: Option<Vec<bool>> = v.iter().copied().collect();
            let met = met?;
            (positive > 0.0).then(|| {
                p.iter()
                    .zip(&met)
                    .filter(|(_, m)| **m)
                    .map(|(x, _)| x)
                    .sum::<f64>()
                    / positive
            })
        })
        .collect();
    let mean = |keep: &dyn Fn(usize) -> bool| {
        let kept: Vec<f64> = scores
            .iter()
            .enumerate()
            .filter(|(i, _)| keep(*i))
            .filter_map(|(_, s)| *s)
            .collect();
        (!kept.is_empty()).then(|| kept.iter().sum::<f64>() / kept.len() as f64)
    };
    let hard_mean = mean(&|i| hard[i] == Some(true));
    let nonhard_mean = mean(&|i| hard[i] == Some(false));
    TaskScores {
        mean: mean(&|_| true),
        hard: hard_mean,
        nonhard: nonhard_mean,
        all: hard_mean
            .zip(nonhard_mean)
            .map(|(h, n)| screen::healthbench_all(h, n)),
    }
}

/// Fills each candidate's score gap, uplift and cost reduction.
pub fn post_training(candidates: &mut [VerifierRow], post: &PostTraining, golden_usd: f64) {
    let best = post.golden.unwrap_or_else(|| {
        post.scores
            .values()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max)
    });
    for row in candidates.iter_mut() {
        row.cost_reduction = screen::cost_reduction(row.cost.usd_per_1000_tasks, golden_usd);
        if let Some(&score) = post.scores.get(&row.name) {
            row.score_gap = Some(best - score);
            row.uplift = screen::uplift(score, post.baseline, best);
        }
    }
}

/// The command's one-line answer.
pub fn one_line(summary: &ScreenSummary) -> String {
    format!(
        "{} tasks, {} pairs ({} with a golden majority); cost-reducing pick: {}; balanced pick: {}",
        summary.tasks,
        summary.pairs,
        summary.pairs_with_majority,
        summary.picks.cost_reducing.as_deref().unwrap_or("-"),
        summary.picks.balanced.as_deref().unwrap_or("-"),
    )
}

/// Writes `summary.json` and `report.md` into `dir`.
pub fn write(summary: &ScreenSummary, dir: &Path) -> Result<()> {
    let json = serde_json::to_vec_pretty(summary)?;
    verifine_base::write_atomically(&dir.join("summary.json"), |w| w.write_all(&json))?;
    let markdown = markdown(summary);
    verifine_base::write_atomically(&dir.join("report.md"), |w| w.write_all(markdown.as_bytes()))?;
    Ok(())
}

fn num(v: Option<f64>) -> String {
    // + 0.0 turns a negative zero into a zero.
    v.map_or("-".to_string(), |v| format!("{:.3}", v + 0.0))
}

fn markdown(s: &ScreenSummary) -> String {
    let mut out = format!(
        "# Verifier screen\n\nSlice `{}`: {} tasks, {} (response, criterion) pairs, {} with a \
         2-of-{} golden majority.\n\n",
        s.slice,
        s.tasks,
        s.pairs,
        s.pairs_with_majority,
        s.goldens.len()
    );
    out += "## Candidates against the golden majority\n\n\
            | candidate | source | accuracy | precision | recall | F1 | Spearman | pairs | USD / 1k tasks | calls / 1k | tokens in (cached) / 1k | device s / 1k | failed rows |\n\
            |---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for c in &s.candidates {
        out += &table_row(c);
    }
    out += "\n## Goldens\n\n\
            | golden | source | accuracy vs majority | precision | recall | F1 | Spearman | pairs | USD / 1k tasks | calls / 1k | tokens in (cached) / 1k | device s / 1k | failed rows |\n\
            |---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for g in &s.goldens {
        out += &table_row(g);
    }
    out += "\n## Agreement with each golden (accuracy)\n\n| verifier |";
    let names: Vec<&String> = s.goldens.iter().map(|g| &g.name).collect();
    for n in &names {
        out += &format!(" {n} |");
    }
    out += &format!("\n|---|{}\n", "---|".repeat(names.len()));
    for row in s.candidates.iter().chain(&s.goldens) {
        out += &format!("| {} |", row.name);
        for n in &names {
            out += &format!(" {} |", num(row.versus_goldens.get(*n).map(|a| a.accuracy)));
        }
        out += "\n";
    }
    out += &format!(
        "\n## Picks\n\n- **cost-reducing** (cheapest with accuracy ≥ {:.2} against the golden majority, \
         else the cheapest): {}\n- **balanced** (fixed by the user): {}\n- golden protocol: {:.4} USD per 1 000 tasks\n",
        s.threshold,
        s.picks.cost_reducing.as_deref().unwrap_or("-"),
        s.picks.balanced.as_deref().unwrap_or("-"),
        s.golden_protocol_usd_per_1000_tasks
    );
    out += "\n## Task scores from each verifier's verdicts\n\n\
            | verifier | mean | hard | non-hard | all (100·hard + 160·non-hard)/260 | score gap | uplift | cost reduction |\n\
            |---|---|---|---|---|---|---|---|\n";
    for row in s.candidates.iter().chain(&s.goldens) {
        let t = row.task_scores;
        out += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            row.name,
            num(t.mean),
            num(t.hard),
            num(t.nonhard),
            num(t.all),
            num(row.score_gap),
            num(row.uplift),
            num(row.cost_reduction)
        );
    }
    if s.post_training_baseline.is_none() {
        out += "\nNo post-training scores were given (`[post_training]`), so score gaps and uplift are not computed.\n";
    }
    out += &format!(
        "\n## Sensitivity to one wrong verdict\n\nOne flipped verdict moves a task's score by at most {} \
         and the slice's mean score by at most {}.\n",
        num(s.single_error.largest_task_move),
        num(s.single_error.policy_move)
    );
    let failures: Vec<String> = s
        .candidates
        .iter()
        .chain(&s.goldens)
        .filter_map(|r| r.first_error.as_ref().map(|e| format!("- {}: {e}", r.name)))
        .collect();
    if !failures.is_empty() {
        out += &format!(
            "\n## First failure of each verifier that failed\n\n{}\n",
            failures.join("\n")
        );
    }
    out
}

fn table_row(r: &VerifierRow) -> String {
    let a = &r.versus_majority;
    format!(
        "| {} | {} | {:.3} | {:.3} | {:.3} | {} | {} | {} | {:.4} | {:.0} | {:.0} ({:.0}) | {:.2} | {} |\n",
        r.name,
        r.source,
        a.accuracy,
        a.precision,
        a.recall,
        num(a.f1),
        num(a.spearman),
        a.n,
        r.cost.usd_per_1000_tasks,
        r.cost.calls_per_1000_tasks,
        r.cost.input_tokens_per_1000_tasks,
        r.cost.cached_input_tokens_per_1000_tasks,
        r.cost.device_seconds_per_1000_tasks,
        r.failed_rows
    )
}
