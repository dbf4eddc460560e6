//! The report's reading: the figures against the loop's aims, in words.

use crate::summary::{EvolveSummary, Row};
use std::fmt::Write as _;

/// What the figures show against the loop's aims, in words: whether RB
/// rises across the judge-revised rounds, whether the last round's interval
/// clears the base's and the initial-judge rounds', and whether agreement
/// with the frozen test labels rises at every revision. Failures are named
/// with their figures, not hidden.
pub(crate) fn reading(summary: &EvolveSummary) -> String {
    let mut out = String::from("\n## Reading\n\n");
    let revised: Vec<&Row> = summary
        .rows
        .iter()
        .filter(|r| r.name.starts_with('R'))
        .collect();
    let falls: Vec<String> = revised
        .windows(2)
        .filter(|w| w[1].rb < w[0].rb)
        .map(|w| {
            format!(
                "{} {:.3} → {} {:.3}",
                w[0].name, w[0].rb, w[1].name, w[1].rb
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "- RB across the judge-revised rounds: {}.",
        if falls.is_empty() {
            "rises at every round".to_string()
        } else {
            format!("falls at {}", falls.join(", "))
        }
    );
    if let Some(last) = revised.last() {
        let overlapping: Vec<String> = summary
            .rows
            .iter()
            .filter(|r| !r.name.starts_with('R') && r.rb_ci[1] >= last.rb_ci[0])
            .map(|r| format!("{} (upper {:.3})", r.name, r.rb_ci[1]))
            .collect();
        let _ = writeln!(
            out,
            "- {} (RB lower bound {:.3}) against the base and the initial-judge rounds: {}.",
            last.name,
            last.rb_ci[0],
            if overlapping.is_empty() {
                "above all of them, intervals apart".to_string()
            } else {
                format!("intervals overlap with {}", overlapping.join(", "))
            }
        );
    }
    let dips: Vec<String> = summary
        .judge
        .windows(2)
        .filter(|w| w[1].pearson_test < w[0].pearson_test)
        .map(|w| {
            format!(
                "r{} {:.3} → r{} {:.3}",
                w[0].revision, w[0].pearson_test, w[1].revision, w[1].pearson_test
            )
        })
        .collect();
    if let (Some(first), Some(last)) = (summary.judge.first(), summary.judge.last()) {
        let _ = writeln!(
            out,
            "- Pearson on the frozen test labels r{} {:.3} → r{} {:.3}: {}.",
            first.revision,
            first.pearson_test,
            last.revision,
            last.pearson_test,
            if dips.is_empty() {
                "rises (or holds) at every revision".to_string()
            } else {
                format!(
                    "falls at {} (the accept rule sees only the accumulated labels, never these)",
                    dips.join(", ")
                )
            }
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::JudgeRow;

    fn row(name: &str, rb: f64, half_width: f64) -> Row {
        Row {
            name: name.into(),
            rb,
            rb_ci: [rb - half_width, rb + half_width],
            rf: 0.0,
            rf_ci: [0.0, 0.0],
            accuracy: 0.0,
            accuracy_ci: [0.0, 0.0],
            valid_ungrounded: 0.0,
            judge_revision: None,
            trigger_fired: None,
            membership: None,
            started_from: None,
            validation_rb: None,
        }
    }

    fn judge(revision: u32, pearson_test: f64) -> JudgeRow {
        JudgeRow {
            revision,
            pearson_test,
            mae_test: 0.1,
            pearson_accumulated: None,
            mae_accumulated: None,
            origin: String::new(),
            plugin: None,
        }
    }

    #[test]
    fn the_reading_names_every_shortfall_with_its_figures() {
        let summary = EvolveSummary {
            rows: vec![
                row("base", 0.5, 0.04),
                row("random-initial", 0.62, 0.04),
                row("guided-initial", 0.3, 0.04),
                row("R1", 0.7, 0.04),
                row("R2", 0.65, 0.04),
                row("R3", 0.68, 0.04),
            ],
            judge: vec![judge(0, 0.8), judge(1, 0.85), judge(2, 0.84)],
            loops: Vec::new(),
            kept: None,
        };
        let text = reading(&summary);
        assert!(text.contains("falls at R1 0.700 → R2 0.650"), "{text}");
        assert!(
            text.contains("intervals overlap with random-initial (upper 0.660)"),
            "{text}"
        );
        assert!(!text.contains("base (upper"), "{text}");
        assert!(text.contains("falls at r1 0.850 → r2 0.840"), "{text}");

        let good = EvolveSummary {
            rows: vec![
                row("base", 0.5, 0.04),
                row("R1", 0.6, 0.04),
                row("R2", 0.7, 0.04),
            ],
            judge: vec![judge(0, 0.8), judge(1, 0.85)],
            loops: Vec::new(),
            kept: None,
        };
        let text = reading(&good);
        assert!(text.contains("rises at every round"), "{text}");
        assert!(
            text.contains("R2 (RB lower bound 0.660)") && text.contains("intervals apart"),
            "{text}"
        );
        assert!(
            text.contains("rises (or holds) at every revision"),
            "{text}"
        );
    }
}
