//! The run's outputs: `summary.json` (the table as data), `report.md` and
//! `plot.png`. RB is the fixed reference-based evaluator's mean total on
//! the held-out policy test set, RF the *final* judge revision's mean total
//! on the same answers, accuracy the share of correct final answers; each
//! with a 95% bootstrap interval. Judge alignment is measured per revision
//! on the frozen test labels (never used to decide anything) and on the
//! accumulated set.

use super::judge_loop::TestCase;
use super::round::heldout_answers;
use super::{Evolve, Task, plan};
use crate::annotator::true_quality;
use crate::calibration::{Alignment, alignment, totals};
use crate::cases::Case;
use crate::config::RoundMode;
use crate::error::{EvolveError, Result};
use crate::labels::LabelStore;
use crate::summary::{EvolveSummary, JudgeRow, KeptDecision, MembershipTally, Row};
use std::fmt::Write as _;
use verifine_base::{read_jsonl, read_jsonl_if_exists, write_atomically};
use verifine_runtime::stats::bootstrap;
use verifine_train::sft_data::SftItem;

/// Writes summary.json, report.md and plot.png.
pub(super) fn write(run: &Evolve) -> Result<()> {
    let summary = summarize(run)?;
    let json =
        serde_json::to_string_pretty(&summary).map_err(|e| EvolveError::Invalid(e.to_string()))?;
    write_atomically(&run.dir.join("summary.json"), |w| {
        w.write_all(json.as_bytes())
    })?;
    let markdown = markdown(&summary);
    write_atomically(&run.dir.join("report.md"), |w| {
        w.write_all(markdown.as_bytes())
    })?;
    crate::plot::draw(&summary, &run.dir.join("plot.png"))
}

fn summarize(run: &Evolve) -> Result<EvolveSummary> {
    let resamples = run.config.bootstrap;
    let seed = run.config.train.seed;
    let interval = |values: &[f64]| {
        let e = bootstrap(values.len(), resamples, seed, |idx| {
            idx.iter().map(|&i| values[i]).sum::<f64>() / idx.len().max(1) as f64
        });
        (e.value, [e.ci_low, e.ci_high])
    };
    let mut names = vec!["base".to_string()];
    names.extend(plan(&run.config).into_iter().filter_map(|t| match t {
        Task::Round { name, .. } => Some(name),
        _ => None,
    }));
    let decisions: Vec<KeptDecision> = read_jsonl_if_exists(&run.dir.join("kept.jsonl"))?;
    let mut rows = Vec::new();
    for name in names {
        let dir = if name == "base" {
            run.base_dir()
        } else {
            run.row_dir(&name)
        };
        let answers = heldout_answers(&dir)?;
        let cases: Vec<Case> = answers
            .iter()
            .map(|a| Case {
                id: a.id.clone(),
                scenario: String::new(),
                prompt: a.prompt.clone(),
                response: a.response.clone(),
                reference: a.reference.clone(),
            })
            .collect();
        let rb: Vec<f64> = answers
            .iter()
            .map(|a| a.evaluator_total.unwrap_or(0.0))
            .collect();
        let accuracy: Vec<f64> = answers
            .iter()
            .map(|a| f64::from(u8::from(a.correct)))
            .collect();
        let rf = totals(&run.judge.score(&run.state.live, &cases)?);
        let blind_spot = cases
            .iter()
            .zip(&answers)
            .filter(|(case, answer)| {
                let quality = true_quality(case);
                !answer.correct && quality["valid"] >= 1.0 && quality["grounded"] < 1.0
            })
            .count() as f64
            / answers.len().max(1) as f64;
        let membership = if run.config.mode == RoundMode::SftMembership && name != "base" {
            let items: Vec<SftItem> = read_jsonl(&dir.join("sft_selection.jsonl"))?;
            Some(MembershipTally::of(&items))
        } else {
            None
        };
        let ((rb, rb_ci), (rf, rf_ci), (accuracy, accuracy_ci)) =
            (interval(&rb), interval(&rf), interval(&accuracy));
        rows.push(Row {
            judge_revision: run.state.trained_with.get(&name).copied(),
            trigger_fired: run.state.fired.get(&name).copied(),
            rb,
            rb_ci,
            rf,
            rf_ci,
            accuracy,
            accuracy_ci,
            valid_ungrounded: blind_spot,
            membership,
            started_from: run.state.started_from.get(&name).cloned(),
            validation_rb: decisions
                .iter()
                .find(|d| d.row == name)
                .map(|d| d.validation_rb),
            name,
        });
    }
    let test: Vec<TestCase> = read_jsonl(&run.judge_dir().join("test.jsonl"))?;
    let test_cases: Vec<Case> = test.iter().map(|t| t.case.clone()).collect();
    let test_human: Vec<f64> = test.iter().map(|t| t.label.total).collect();
    let store = LabelStore::load(&run.judge_dir().join("labels.jsonl"))?;
    let set = run.accumulated(run.config.rounds, &store, run.labeller_name())?;
    let set_human: Vec<f64> = set.labels.iter().map(|l| l.total).collect();
    let mut judge = Vec::new();
    for revision in &run.state.revisions {
        let on_test: Alignment = alignment(
            &totals(&run.judge.score(revision, &test_cases)?),
            &test_human,
            &(0..test.len()).collect::<Vec<_>>(),
        );
        let on_set = alignment(
            &totals(&run.judge.score(revision, &set.cases)?),
            &set_human,
            &(0..set.cases.len()).collect::<Vec<_>>(),
        );
        judge.push(JudgeRow {
            revision: revision.number,
            pearson_test: on_test.pearson,
            mae_test: on_test.mae,
            pearson_accumulated: (on_set.n > 0).then_some(on_set.pearson),
            mae_accumulated: (on_set.n > 0).then_some(on_set.mae),
            origin: revision.origin.clone(),
            plugin: Some(run.judge.plugins(revision)?.rubric.provenance()),
        });
    }
    let loops = read_jsonl_if_exists(&run.judge_dir().join("loops.jsonl"))?;
    let kept = run.state.kept.as_ref().map(|k| k.row.clone());
    Ok(EvolveSummary {
        rows,
        judge,
        loops,
        kept,
    })
}

fn markdown(summary: &EvolveSummary) -> String {
    let mut out = String::from("# verifine evolve\n\n");
    out.push_str("Held-out policy test set. RB: the fixed reference-based evaluator; RF: the final judge revision; \
                  accuracy: correct final answers; valid but ungrounded: wrong answers whose steps all compute \
                  but do not follow the problem (the initial judge's blind spot). 95% bootstrap intervals.\n\n");
    out.push_str(
        "| row | from | judge | RB | RF | accuracy | valid but ungrounded | trigger fired |\n|---|---|---|---|---|---|---|---|\n",
    );
    let ci = |v: f64, c: [f64; 2]| format!("{v:.3} [{:.3}, {:.3}]", c[0], c[1]);
    for r in &summary.rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {:.3} | {} |",
            r.name,
            match (&r.started_from, r.validation_rb) {
                (Some(from), Some(v)) => format!("{from} (validation RB {v:.3})"),
                (Some(from), None) => from.clone(),
                (None, _) => "—".to_string(),
            },
            r.judge_revision
                .map_or("—".to_string(), |n| format!("r{n}")),
            ci(r.rb, r.rb_ci),
            ci(r.rf, r.rf_ci),
            ci(r.accuracy, r.accuracy_ci),
            r.valid_ungrounded,
            r.trigger_fired
                .map_or("—", |f| if f { "yes" } else { "no" }),
        );
    }
    if let Some(kept) = &summary.kept {
        let _ = writeln!(
            out,
            "\nThe loop delivers **{kept}**: the policy the validation set rated best after the last round."
        );
    }
    let members: Vec<(&str, MembershipTally)> = summary
        .rows
        .iter()
        .filter_map(|r| r.membership.map(|m| (r.name.as_str(), m)))
        .collect();
    if !members.is_empty() {
        out.push_str("\n## SFT membership\n\nWhat each round's judge let into its SFT data: the pool's targets and the \
                      policy's sampled answers, kept when the judge's total reaches `min_score`; wrong and right by \
                      the fixed evaluator (for the record only).\n\n");
        out.push_str("| row | candidates | kept | kept but wrong | dropped but right |\n|---|---|---|---|---|\n");
        for (name, m) in members {
            let _ = writeln!(
                out,
                "| {name} | {} | {} | {} ({:.1}%) | {} |",
                m.candidates,
                m.kept,
                m.kept_wrong,
                100.0 * m.kept_wrong as f64 / m.kept.max(1) as f64,
                m.dropped_right
            );
        }
    }
    out.push_str("\n## Judge alignment per revision\n\nAgainst the frozen test labels (an independent annotator, never used \
                  to accept anything) and the accumulated judge evaluation set.\n\n");
    out.push_str("| revision | Pearson (test) | MAE (test) | Pearson (accumulated) | MAE (accumulated) | origin |\n|---|---|---|---|---|---|\n");
    for j in &summary.judge {
        let _ = writeln!(
            out,
            "| r{} | {:.3} | {:.3} | {} | {} | {} |",
            j.revision,
            j.pearson_test,
            j.mae_test,
            j.pearson_accumulated
                .map_or("—".to_string(), |v| format!("{v:.3}")),
            j.mae_accumulated
                .map_or("—".to_string(), |v| format!("{v:.3}")),
            j.origin
        );
    }
    out.push_str(&crate::reading::reading(summary));
    out.push_str("\n## Judge loops\n\n");
    for l in &summary.loops {
        let _ = writeln!(
            out,
            "- loop {}: {} (labelled {}, accepted {}, live r{})",
            l.round, l.note, l.labelled, l.accepted, l.live
        );
    }
    out
}
