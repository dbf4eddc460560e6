//! The report across seeds: its intervals, its checks, and refusing runs
//! of different configs.

use super::*;
use crate::summary::{JudgeRow, Row};

/// A summary whose rows have these RB values and whose judge these Pearsons.
fn summary(rows: &[(&str, f64)], pearson: &[f64]) -> EvolveSummary {
    EvolveSummary {
        rows: rows
            .iter()
            .map(|&(name, rb)| Row {
                name: name.into(),
                rb,
                rb_ci: [rb - 0.04, rb + 0.04],
                rf: rb,
                rf_ci: [rb, rb],
                accuracy: rb,
                accuracy_ci: [rb, rb],
                valid_ungrounded: 0.0,
                judge_revision: None,
                trigger_fired: None,
                membership: None,
                started_from: None,
                validation_rb: None,
            })
            .collect(),
        judge: pearson
            .iter()
            .enumerate()
            .map(|(i, &p)| JudgeRow {
                revision: i as u32,
                pearson_test: p,
                mae_test: 0.1,
                pearson_accumulated: None,
                mae_accumulated: None,
                origin: "test".into(),
                plugin: None,
            })
            .collect(),
        loops: Vec::new(),
        kept: None,
    }
}

fn run(seed: u64, rb: [f64; 6], pearson: &[f64]) -> SeedRun {
    let names = ["base", "random-initial", "guided-initial", "R1", "R2", "R3"];
    let rows: Vec<(&str, f64)> = names.iter().copied().zip(rb).collect();
    SeedRun {
        seed,
        summary: summary(&rows, pearson),
    }
}

fn check<'a>(report: &'a SeedReport, starts: &str) -> &'a Check {
    report
        .checks
        .iter()
        .find(|c| c.claim.starts_with(starts))
        .unwrap_or_else(|| panic!("no check starting {starts:?} in {:?}", report.checks))
}

#[test]
fn each_row_gets_the_mean_and_a_student_t_interval_across_seeds() {
    let runs = [
        run(0, [0.5, 0.2, 0.4, 0.6, 0.6, 0.5], &[0.8, 0.9]),
        run(1, [0.6, 0.2, 0.4, 0.6, 0.6, 0.6], &[0.8, 0.9]),
        run(2, [0.7, 0.2, 0.4, 0.6, 0.6, 0.7], &[0.8, 0.9]),
    ];
    let report = across(&runs).unwrap();
    let base = &report.rows[0];
    assert_eq!(base.rb_per_seed, vec![0.5, 0.6, 0.7]);
    assert!((base.rb_mean - 0.6).abs() < 1e-12);
    // sd 0.1 over three seeds: t(2) = 4.303, half-width 4.303 · 0.1 / √3.
    let half = 4.303 * 0.1 / 3f64.sqrt();
    assert!((base.rb_interval[0] - (0.6 - half)).abs() < 1e-9);
    assert!((base.rb_interval[1] - (0.6 + half)).abs() < 1e-9);
    // Identical values: a point interval.
    let [low, high] = report.rows[1].rb_interval;
    assert!((low - 0.2).abs() < 1e-12 && (high - 0.2).abs() < 1e-12);
}

#[test]
fn a_last_round_that_falls_back_below_its_first_fails_with_the_numbers() {
    // The other-machine run at seed 0: R1 0.658, R3 0.545.
    let runs = [
        run(0, [0.507, 0.168, 0.482, 0.658, 0.638, 0.545], &[0.87, 0.90]),
        run(1, [0.590, 0.608, 0.656, 0.725, 0.728, 0.732], &[0.89, 0.92]),
        run(2, [0.55, 0.40, 0.50, 0.70, 0.70, 0.71], &[0.88, 0.87]),
    ];
    let report = across(&runs).unwrap();
    let drop = check(&report, "no seed's R3");
    assert!(!drop.holds);
    assert!(drop.detail.contains("-0.113"), "{}", drop.detail);
    let judge = check(&report, "final judge's");
    assert!(!judge.holds, "seed 2's judge got worse");
    assert!(judge.detail.contains("-0.010"), "{}", judge.detail);
    // R3 − base per seed: +0.038, +0.142, +0.160; t(2) puts the interval's
    // low end below 0.
    let paired = check(&report, "R3 above base");
    assert!(!paired.holds, "{}", paired.detail);
    assert!(paired.detail.contains("+0.038"), "{}", paired.detail);
    // R3 − random-initial is positive everywhere; R3 − guided-initial too.
    assert!(check(&report, "R3 above random-initial").holds);
    let text = markdown(&report);
    assert!(
        text.contains("| R3 |") && text.contains("**fails**"),
        "{text}"
    );
}

#[test]
fn rounds_that_hold_at_every_seed_pass_every_check() {
    let runs = [
        run(0, [0.50, 0.20, 0.45, 0.68, 0.69, 0.70], &[0.87, 0.90]),
        run(1, [0.52, 0.22, 0.47, 0.70, 0.71, 0.72], &[0.88, 0.91]),
        run(2, [0.51, 0.21, 0.46, 0.69, 0.70, 0.71], &[0.86, 0.90]),
    ];
    let report = across(&runs).unwrap();
    assert_eq!(report.checks.len(), 5);
    assert!(report.checks.iter().all(|c| c.holds), "{:?}", report.checks);
}

#[test]
fn a_gain_at_every_seed_holds_paired_even_where_the_rows_intervals_overlap() {
    // The base spans 20 points across seeds, R3 sits 3–5 points above it at
    // each: the rows' intervals overlap, the per-seed differences do not
    // straddle 0.
    let runs = [
        run(0, [0.48, 0.30, 0.40, 0.50, 0.51, 0.52], &[0.87, 0.90]),
        run(1, [0.68, 0.50, 0.60, 0.70, 0.71, 0.73], &[0.88, 0.91]),
        run(2, [0.58, 0.40, 0.50, 0.60, 0.61, 0.61], &[0.86, 0.90]),
    ];
    let report = across(&runs).unwrap();
    let (base, last) = (&report.rows[0], &report.rows[5]);
    assert!(
        last.rb_interval[0] < base.rb_interval[1],
        "the rows overlap"
    );
    let paired = check(&report, "R3 above base");
    assert!(paired.holds, "{}", paired.detail);
    assert!(paired.detail.contains("+0.040"), "{}", paired.detail);
    // One seed where R3 is not above an initial-judge row fails that check.
    let mut runs = runs;
    runs[1].summary.rows[2].rb = 0.74;
    let report = across(&runs).unwrap();
    let guided = check(&report, "R3 above guided-initial");
    assert!(!guided.holds);
    assert!(guided.detail.contains("-0.010"), "{}", guided.detail);
}

#[test]
fn the_policies_the_loops_delivered_form_a_row_of_their_own() {
    let mut runs = [
        run(0, [0.57, 0.19, 0.28, 0.63, 0.65, 0.64], &[0.87, 0.90]),
        run(1, [0.57, 0.13, 0.15, 0.62, 0.53, 0.38], &[0.87, 0.90]),
    ];
    // Seed 1's R2 and R3 fell on validation: its loop delivers R1.
    runs[0].summary.kept = Some("R2".into());
    runs[1].summary.kept = Some("R1".into());
    let report = across(&runs).unwrap();
    assert_eq!(report.kept, ["R2", "R1"]);
    let kept = report.rows.last().unwrap();
    assert_eq!(kept.name, "kept");
    assert_eq!(kept.rb_per_seed, [0.65, 0.62]);
    let gain = report
        .paired
        .iter()
        .find(|p| p.name == "kept − base")
        .unwrap();
    assert!((gain.per_seed[0] - 0.08).abs() < 1e-9 && (gain.per_seed[1] - 0.05).abs() < 1e-9);
    // The checks stay about the last round.
    assert!(!check(&report, "R3 above base").holds);
    assert!(
        markdown(&report)
            .contains("delivered (the validation set's best after the last round): R2, R1")
    );
    // A seed that kept nothing (another round start) leaves the row out.
    runs[1].summary.kept = None;
    let report = across(&runs).unwrap();
    assert!(report.kept.is_empty() && report.rows.iter().all(|r| r.name != "kept"));
}

#[test]
fn runs_of_different_configs_are_refused() {
    let mut other = run(1, [0.5; 6], &[0.9]);
    other.summary.rows.pop();
    let err = across(&[run(0, [0.5; 6], &[0.9]), other]).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("seed 1") && text.contains("seed 0"), "{text}");
    assert!(across(&[]).is_err());
}

#[test]
fn the_report_is_written_as_json_markdown_and_a_plot() {
    let dir = verifine_test_support::scratch_dir("seeds");
    let runs = [
        run(0, [0.50, 0.20, 0.45, 0.68, 0.69, 0.70], &[0.87, 0.90]),
        run(1, [0.52, 0.22, 0.47, 0.70, 0.71, 0.72], &[0.88, 0.91]),
    ];
    write(&across(&runs).unwrap(), &dir).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("seeds.json")).unwrap()).unwrap();
    assert_eq!(json["seeds"], serde_json::json!([0, 1]));
    assert!(
        std::fs::read_to_string(dir.join("seeds.md"))
            .unwrap()
            .contains("| base |")
    );
    let png = std::fs::read(dir.join("seeds.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    std::fs::remove_dir_all(&dir).unwrap();
}
