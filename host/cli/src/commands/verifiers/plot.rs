//! `pareto.png`: each verifier's cost per 1 000 tasks against its accuracy
//! with the golden majority; the candidates' Pareto frontier (no cheaper
//! candidate is as accurate) as a line, the threshold as a dashed rule.

use super::report::{ScreenSummary, VerifierRow};
use anyhow::{Result, anyhow};
use plotters::prelude::*;
use std::path::Path;

const FAMILY: &str = "verifine-plot";

fn font() -> &'static str {
    static REGISTER: std::sync::Once = std::sync::Once::new();
    REGISTER.call_once(|| {
        let _ = plotters::style::register_font(FAMILY, FontStyle::Normal, verifine_base::PLOT_FONT);
    });
    FAMILY
}

/// The candidates no cheaper candidate matches in accuracy, cheapest first.
pub fn frontier(rows: &[VerifierRow]) -> Vec<(f64, f64)> {
    let mut points: Vec<(f64, f64)> = rows
        .iter()
        .map(|r| (r.cost.usd_per_1000_tasks, r.versus_majority.accuracy))
        .filter(|(c, a)| c.is_finite() && a.is_finite())
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
    let mut best = f64::NEG_INFINITY;
    points
        .into_iter()
        .filter(|(_, a)| {
            let better = *a > best;
            best = best.max(*a);
            better
        })
        .collect()
}

/// Draws the plot into `path` through a temporary file and a rename.
pub fn draw(summary: &ScreenSummary, path: &Path) -> Result<()> {
    let e = |err: &dyn std::fmt::Display| anyhow!("drawing {}: {err}", path.display());
    let font = font();
    let all: Vec<&VerifierRow> = summary.candidates.iter().chain(&summary.goldens).collect();
    let max_cost = all
        .iter()
        .map(|r| r.cost.usd_per_1000_tasks)
        .filter(|c| c.is_finite())
        .fold(0.0, f64::max);
    let x_max = if max_cost > 0.0 { max_cost * 1.25 } else { 1.0 };
    let tmp = verifine_base::temporary_sibling(path).with_extension("png");
    {
        let root = BitMapBackend::new(&tmp, (860, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "cost against agreement with the golden majority",
                (font, 18),
            )
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(-x_max * 0.03..x_max, 0.0..1.05)
            .map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .x_desc("USD per 1 000 tasks")
            .y_desc("accuracy")
            .label_style((font, 12))
            .draw()
            .map_err(|x| e(&x))?;
        let threshold = summary.threshold;
        chart
            .draw_series(DashedLineSeries::new(
                [(-x_max * 0.03, threshold), (x_max, threshold)],
                6,
                4,
                RGBColor(120, 120, 120).into(),
            ))
            .map_err(|x| e(&x))?
            .label(format!("threshold {threshold:.2}"))
            .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], RGBColor(120, 120, 120)));
        chart
            .draw_series(LineSeries::new(
                frontier(&summary.candidates),
                BLUE.stroke_width(2),
            ))
            .map_err(|x| e(&x))?
            .label("candidates' Pareto frontier")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], BLUE));
        for (rows, colour, label) in [
            (&summary.candidates, BLUE, "candidate"),
            (
                &summary.goldens,
                RED,
                "golden (vs the majority it votes in)",
            ),
        ] {
            chart
                .draw_series(
                    rows.iter()
                        .filter(|r| r.versus_majority.accuracy.is_finite())
                        .map(|r| {
                            let at = (r.cost.usd_per_1000_tasks, r.versus_majority.accuracy);
                            EmptyElement::at(at)
                                + Circle::new((0, 0), 5, colour.filled())
                                + Text::new(r.name.clone(), (8, -14), (font, 12))
                        }),
                )
                .map_err(|x| e(&x))?
                .label(label)
                .legend(move |(x, y)| Circle::new((x + 9, y), 5, colour.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font((font, 12))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|x| e(&x))?;
        root.present().map_err(|x| e(&x))?;
    }
    std::fs::rename(&tmp, path).map_err(|x| anyhow!("renaming into {}: {x}", path.display()))
}
