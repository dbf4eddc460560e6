//! `plot.png`: GRPO reward and held-out accuracy over steps, drawn from
//! `metrics.jsonl` so a resumed run plots its whole history.

use crate::error::{Result, TrainError};
use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

/// Bundled so the plot needs no system font library.
const FONT: &[u8] = verifine_base::PLOT_FONT;
const FAMILY: &str = "verifine-mono";

/// The series a plot shows, as (step, value) points.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Series {
    /// Mean reward of each GRPO step.
    pub reward: Vec<(f64, f64)>,
    /// Greedy held-out accuracy (pure run) at each evaluation.
    pub accuracy: Vec<(f64, f64)>,
    /// Held-out accuracy with final verification, when measured.
    pub accuracy_fv: Vec<(f64, f64)>,
}

impl Series {
    /// Picks the series out of metrics lines.
    pub fn from_metrics(lines: &[serde_json::Value]) -> Self {
        let point = |line: &serde_json::Value, field: &str| {
            Some((line["step"].as_f64()?, line[field].as_f64()?))
        };
        let mut series = Series::default();
        for line in lines {
            match line["phase"].as_str() {
                Some("grpo") => series.reward.extend(point(line, "reward_mean")),
                Some("eval") => {
                    series.accuracy.extend(point(line, "heldout_accuracy"));
                    series
                        .accuracy_fv
                        .extend(point(line, "heldout_accuracy_fv"));
                }
                _ => {}
            }
        }
        series
    }

    /// The reward as a trailing mean over `window` steps, so the trend shows
    /// through the per-step noise.
    pub fn smoothed_reward(&self, window: usize) -> Vec<(f64, f64)> {
        let window = window.max(1);
        let mut sum = 0.0;
        self.reward
            .iter()
            .enumerate()
            .map(|(i, &(step, value))| {
                sum += value;
                if i >= window {
                    sum -= self.reward[i - window].1;
                }
                (step, sum / (i + 1).min(window) as f64)
            })
            .collect()
    }
}

/// Steps the reward is smoothed over: a twentieth of the run, at least 5.
fn smoothing_window(points: usize) -> usize {
    (points / 20).max(5)
}

/// Points are marked with dots only up to this many per line.
const DOTS_UP_TO: usize = 60;

/// Draws the plot into `path` through a temporary file and a rename.
pub fn draw(series: &Series, path: &Path) -> Result<()> {
    bundled_font();
    // plotters picks the encoder from the extension: keep `.png` last.
    let tmp = verifine_base::temporary_sibling(path).with_extension("png");
    {
        let root = BitMapBackend::new(&tmp, (900, 600)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let (top, bottom) = root.split_vertically(300);
        let steps = series
            .reward
            .iter()
            .chain(&series.accuracy)
            .map(|p| p.0)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
                (lo.min(x), hi.max(x))
            });
        let (lo, hi) = if steps.0.is_finite() {
            (steps.0, steps.1.max(steps.0 + 1.0))
        } else {
            (0.0, 1.0)
        };
        let window = smoothing_window(series.reward.len());
        let smoothed = series.smoothed_reward(window);
        let smoothed_label = format!("trailing mean of {window} steps");
        panel(
            &top,
            "GRPO reward",
            lo..hi,
            &[
                ("mean per step", &series.reward, RGBColor(150, 170, 235)),
                (&smoothed_label, &smoothed, BLUE),
            ],
        )?;
        let mut accuracy = vec![("pure run (PR)", &series.accuracy, RED)];
        if !series.accuracy_fv.is_empty() {
            accuracy.push(("final verification (FV)", &series.accuracy_fv, GREEN));
        }
        panel(&bottom, "held-out accuracy (greedy)", lo..hi, &accuracy)?;
        root.present().map_err(plot_error)?;
    }
    std::fs::rename(&tmp, path).map_err(|e| TrainError::io("renaming into", path, e))
}

/// Registers the bundled font (once) and returns its family name, for
/// other plots of verifine (the co-evolution report) to use.
pub fn bundled_font() -> &'static str {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // The bundled font is a valid TrueType file; a failure would show as
        // missing text, not as a crash.
        let _ = plotters::style::register_font(FAMILY, FontStyle::Normal, FONT);
    });
    FAMILY
}

/// A named line: label, points, colour.
type Line<'a> = (&'a str, &'a Vec<(f64, f64)>, RGBColor);

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;

fn panel(
    area: &Area<'_>,
    title: &str,
    steps: std::ops::Range<f64>,
    lines: &[Line<'_>],
) -> Result<()> {
    let (y_lo, y_hi) = lines
        .iter()
        .flat_map(|(_, points, _)| points.iter().map(|p| p.1))
        .fold((0.0f64, 1.0f64), |(lo, hi), y| (lo.min(y), hi.max(y)));
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FAMILY, 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(steps, y_lo..y_hi)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc("step")
        .x_label_formatter(&|x| format!("{}", x.round() as i64))
        .label_style((FAMILY, 12))
        .draw()
        .map_err(plot_error)?;
    for (label, points, color) in lines {
        let color = *color;
        chart
            .draw_series(LineSeries::new(points.iter().copied(), color))
            .map_err(plot_error)?
            .label(*label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        if points.len() <= DOTS_UP_TO {
            chart
                .draw_series(points.iter().map(|p| Circle::new(*p, 2, color.filled())))
                .map_err(plot_error)?;
        }
    }
    chart
        .configure_series_labels()
        .label_font((FAMILY, 12))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(plot_error)?;
    Ok(())
}

fn plot_error(e: impl std::fmt::Display) -> TrainError {
    TrainError::Invalid(format!("drawing the plot: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn series_come_from_metrics_and_the_png_is_written() {
        let lines = vec![
            json!({"phase": "sft", "step": 0, "loss": 2.0}),
            json!({"phase": "eval", "step": 1, "heldout_accuracy": 0.25}),
            json!({"phase": "grpo", "step": 1, "reward_mean": 0.5}),
            json!({"phase": "grpo", "step": 2, "reward_mean": 0.75}),
            json!({"phase": "eval", "step": 3, "heldout_accuracy": 0.5, "heldout_accuracy_fv": 0.6}),
        ];
        let series = Series::from_metrics(&lines);
        assert_eq!(series.reward, vec![(1.0, 0.5), (2.0, 0.75)]);
        assert_eq!(series.accuracy, vec![(1.0, 0.25), (3.0, 0.5)]);
        assert_eq!(series.accuracy_fv, vec![(3.0, 0.6)]);
        assert_eq!(series.smoothed_reward(2), vec![(1.0, 0.5), (2.0, 0.625)]);
        let long = Series {
            reward: (0..10).map(|i| (i as f64, i as f64)).collect(),
            ..Series::default()
        };
        let smoothed = long.smoothed_reward(4);
        assert_eq!(smoothed[3], (3.0, 1.5));
        assert_eq!(smoothed[9], (9.0, 7.5));

        let dir = verifine_test_support::scratch_dir("plot");
        let path = dir.join("plot.png");
        draw(&series, &path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        draw(&Series::default(), &path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
