//! `plot.png`: RB and accuracy per row with their intervals (top), and the
//! judge's agreement with the frozen test labels per revision (bottom);
//! `seeds.png`: RB per row across seeds; `selection.png`: each selector's
//! pick against the budget.

use crate::error::{EvolveError, Result};
use crate::summary::{EvolveSummary, SeedReport, Selection};
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use std::path::Path;
use verifine_train::plot::bundled_font;

/// Draws the plot into `path` through a temporary file and a rename.
pub fn draw(summary: &EvolveSummary, path: &Path) -> Result<()> {
    let font = bundled_font();
    render(path, (900, 620), |root| {
        let (top, bottom) = root.split_vertically(340);
        let names: Vec<String> = summary.rows.iter().map(|r| r.name.clone()).collect();
        let caption = "held-out policy test set (95% bootstrap intervals)";
        let mut chart = rows_chart(&top, caption, &names)?;
        for (label, offset, colour, pick) in [
            ("RB (fixed evaluator)", -0.1, BLUE, 0usize),
            ("accuracy", 0.1, RED, 1),
        ] {
            let points: Vec<(f64, f64, [f64; 2])> = summary
                .rows
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let (v, ci) = if pick == 0 {
                        (r.rb, r.rb_ci)
                    } else {
                        (r.accuracy, r.accuracy_ci)
                    };
                    (i as f64 + offset, v, ci)
                })
                .collect();
            chart
                .draw_series(points.iter().map(|&(x, v, ci)| {
                    ErrorBar::new_vertical(x, ci[0].min(v), v, ci[1].max(v), colour.filled(), 8)
                }))
                .map_err(plot_error)?
                .label(label)
                .legend(move |(x, y)| Circle::new((x + 10, y), 4, colour.filled()));
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;

        let revisions = summary.judge.len().max(1) as f64;
        let mut judge = ChartBuilder::on(&bottom)
            .caption("judge vs frozen test labels, per revision", (font, 18))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(-0.5..revisions - 0.5, -0.2..1.0)
            .map_err(plot_error)?;
        let labels: Vec<String> = summary
            .judge
            .iter()
            .map(|j| format!("r{}", j.revision))
            .collect();
        judge
            .configure_mesh()
            .x_labels(labels.len().max(1))
            .x_label_formatter(&|x| labels.get(x.round() as usize).cloned().unwrap_or_default())
            .label_style((font, 12))
            .draw()
            .map_err(plot_error)?;
        for (label, colour, pick) in [("Pearson", BLUE, 0usize), ("MAE", RED, 1)] {
            let points: Vec<(f64, f64)> = summary
                .judge
                .iter()
                .enumerate()
                .map(|(i, j)| {
                    (
                        i as f64,
                        if pick == 0 {
                            j.pearson_test
                        } else {
                            j.mae_test
                        },
                    )
                })
                .collect();
            judge
                .draw_series(LineSeries::new(points.clone(), colour))
                .map_err(plot_error)?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
            judge
                .draw_series(points.iter().map(|p| Circle::new(*p, 3, colour.filled())))
                .map_err(plot_error)?;
        }
        legend(&mut judge, SeriesLabelPosition::MiddleRight)?;
        Ok(())
    })
}

/// `seeds.png`: each seed's RB per row (a line per seed) and the mean
/// across seeds with its 95% interval.
pub fn draw_seeds(report: &SeedReport, path: &Path) -> Result<()> {
    render(path, (900, 400), |root| {
        let names: Vec<String> = report.rows.iter().map(|r| r.name.clone()).collect();
        let caption = "RB per row: each seed, and the mean with its 95% interval";
        let mut chart = rows_chart(root, caption, &names)?;
        for (k, seed) in report.seeds.iter().enumerate() {
            let colour = Palette99::pick(k).to_rgba();
            let points: Vec<(f64, f64)> = report
                .rows
                .iter()
                .enumerate()
                .map(|(i, r)| (i as f64, r.rb_per_seed[k]))
                .collect();
            chart
                .draw_series(LineSeries::new(points, colour))
                .map_err(plot_error)?
                .label(format!("seed {seed}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
        }
        chart
            .draw_series(report.rows.iter().enumerate().map(|(i, r)| {
                let [low, high] = r.rb_interval;
                let (low, high) = (low.max(0.0), high.min(1.0));
                ErrorBar::new_vertical(i as f64, low, r.rb_mean, high, BLACK.filled(), 10)
            }))
            .map_err(plot_error)?
            .label("mean, 95% t interval")
            .legend(|(x, y)| Circle::new((x + 10, y), 4, BLACK.filled()));
        legend(&mut chart, SeriesLabelPosition::LowerRight)?;
        Ok(())
    })
}

/// A chart whose x axis is the table's rows, by name, and y axis 0–1.
fn rows_chart<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    caption: &str,
    names: &[String],
) -> Result<ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>> {
    let font = bundled_font();
    let n = names.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (font, 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(-0.5..n - 0.5, 0.0..1.0)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_labels(names.len().max(1))
        .x_label_formatter(&|x| names.get(x.round() as usize).cloned().unwrap_or_default())
        .label_style((font, 12))
        .disable_x_mesh()
        .draw()
        .map_err(plot_error)?;
    Ok(chart)
}

/// Draws a white `size` canvas with `draw` into `path`, through a temporary
/// file and a rename.
fn render(
    path: &Path,
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<BitMapBackend<'_>, Shift>) -> Result<()>,
) -> Result<()> {
    let tmp = verifine_base::temporary_sibling(path).with_extension("png");
    {
        let root = BitMapBackend::new(&tmp, size).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        draw(&root)?;
        root.present().map_err(plot_error)?;
    }
    std::fs::rename(&tmp, path)
        .map_err(|e| EvolveError::File(verifine_base::FileError::io("renaming into", path, e)))
}

/// The series' legend, boxed, at `position`.
fn legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    position: SeriesLabelPosition,
) -> Result<()> {
    chart
        .configure_series_labels()
        .label_font((bundled_font(), 12))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(position)
        .draw()
        .map_err(plot_error)
}

fn plot_error(e: impl std::fmt::Display) -> EvolveError {
    EvolveError::Invalid(format!("drawing the plot: {e}"))
}

/// `selection.png`: the annotator's mean score of each selector's pick
/// against the budget.
pub fn draw_selection(selection: &Selection, path: &Path) -> Result<()> {
    let font = bundled_font();
    render(path, (900, 420), |root| {
        let n = selection.candidates.max(1) as f64;
        let mut chart = ChartBuilder::on(root)
            .caption(
                "test-time selection: annotator score of the pick",
                (font, 18),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(0.5..n + 0.5, 0.0..1.0)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc("budget (candidates seen)")
            .x_labels(selection.candidates.max(1))
            .x_label_formatter(&|x| format!("{}", x.round() as i64))
            .label_style((font, 12))
            .draw()
            .map_err(plot_error)?;
        let colours = [RGBColor(150, 150, 150), BLUE, GREEN, MAGENTA, RED];
        for (curve, colour) in selection.curves.iter().zip(colours.iter().cycle()) {
            let colour = *colour;
            let points: Vec<(f64, f64)> = curve
                .mean
                .iter()
                .enumerate()
                .map(|(i, m)| (i as f64 + 1.0, *m))
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), colour))
                .map_err(plot_error)?
                .label(curve.selector.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
            chart
                .draw_series(curve.ci.iter().zip(&points).map(|(c, &(x, m))| {
                    ErrorBar::new_vertical(x, c[0].min(m), m, c[1].max(m), colour.filled(), 6)
                }))
                .map_err(plot_error)?;
        }
        legend(&mut chart, SeriesLabelPosition::LowerRight)?;
        Ok(())
    })
}
