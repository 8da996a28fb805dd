//! The cohort's pictures for summary.md, drawn as SVG with plotters (its SVG backend only: no
//! fonts or bitmaps are needed, the viewer renders the text): the distribution of total scores
//! and the share of students who cleared each milestone.

use crate::result::{GradeResult, Status};
use plotters::prelude::*;

/// Score bins of the histogram: 0-10 %, 10-20 %, ..., 90-100 % (100 % falls in the last).
const BINS: u32 = 10;

/// Which bin a score falls in.
pub fn bin(score: f64, max: f64) -> u32 {
    if max <= 0.0 || !score.is_finite() {
        return 0;
    }
    let pct = (score / max * 100.0).clamp(0.0, 100.0);
    ((pct / 10.0).floor() as u32).min(BINS - 1)
}

/// Students per score bin.
pub fn histogram(results: &[GradeResult]) -> Vec<u32> {
    let mut counts = vec![0u32; BINS as usize];
    for r in results {
        counts[bin(r.score, r.max_score) as usize] += 1;
    }
    counts
}

/// A milestone is cleared when nothing in it failed or errored; a performance check skipped
/// because speed could not be measured does not count against the student.
pub fn cleared(status: Status) -> bool {
    matches!(status, Status::Pass | Status::Skipped)
}

/// One bar per segment, in order. (plotters' `Histogram` series collects bars through a
/// `HashMap`, so its SVG comes out in a different order on every run; the files must be
/// identical between a run and its `cugrade merge`.)
fn bars(
    heights: &[u32],
    color: RGBColor,
    margin: u32,
) -> impl Iterator<Item = Rectangle<(SegmentValue<u32>, u32)>> + '_ {
    heights.iter().enumerate().map(move |(i, &h)| {
        let i = i as u32;
        let mut r = Rectangle::new(
            [(SegmentValue::Exact(i), 0), (SegmentValue::Exact(i + 1), h)],
            color.filled(),
        );
        r.set_margin(0, 0, margin, margin);
        r
    })
}

/// What a chart's caption adds when some totals are provisional (speed not measured).
pub const PROVISIONAL: &str = "provisional: speed not measured";

fn caption(title: &str, provisional: bool) -> String {
    if provisional {
        format!("{title} ({PROVISIONAL})")
    } else {
        title.to_string()
    }
}

/// The label of score bin `b`: `0-10`, ..., `90-100` (100 % is in the last bin).
pub fn bin_label(b: u32) -> String {
    format!("{}-{}", b * 10, b * 10 + 10)
}

/// `scores.svg`: students per 10 % band of the total score; `provisional` adds "provisional:
/// speed not measured" to the caption (some totals lack their speed points).
pub fn scores_svg(results: &[GradeResult], provisional: bool) -> Result<String, String> {
    let counts = histogram(results);
    let top = counts.iter().copied().max().unwrap_or(0).max(1) + 1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (640, 320)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        // A discrete range includes its end: 0..BINS-1 is BINS segments, the last 90-100 %.
        let mut chart = ChartBuilder::on(&root)
            .caption(caption("Total score", provisional), ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(40)
            .build_cartesian_2d((0u32..BINS - 1).into_segmented(), 0u32..top)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc("% of the maximum")
            .y_desc("students")
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(b) if *b < BINS => bin_label(*b),
                _ => String::new(),
            })
            .draw()
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(bars(&counts, RGBColor(0x3b, 0x6e, 0xa8), 3))
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// `milestones.svg`: per milestone, the percentage of students who cleared it; `provisional`
/// as for [`scores_svg`].
pub fn milestones_svg(
    ids: &[String],
    cleared_pct: &[f64],
    provisional: bool,
) -> Result<String, String> {
    let n = ids.len().max(1) as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (640, 320)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                caption("Milestones cleared", provisional),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(40)
            .build_cartesian_2d((0u32..n - 1).into_segmented(), 0u32..101u32)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .y_desc("% of students")
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => ids.get(*i as usize).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .draw()
            .map_err(|e| e.to_string())?;
        let heights: Vec<u32> = cleared_pct
            .iter()
            .map(|p| p.round().clamp(0.0, 100.0) as u32)
            .collect();
        chart
            .draw_series(bars(&heights, RGBColor(0x2e, 0x8b, 0x57), 8))
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_cover_the_edges() {
        assert_eq!(bin(0.0, 100.0), 0);
        assert_eq!(bin(9.99, 100.0), 0);
        assert_eq!(bin(10.0, 100.0), 1);
        assert_eq!(bin(100.0, 100.0), 9);
        assert_eq!(bin(150.0, 100.0), 9);
        assert_eq!(bin(5.0, 0.0), 0);
        assert_eq!(bin(f64::NAN, 10.0), 0);
    }

    /// The labels drawn under the x axis, in order (plotters writes each as a `<text>`).
    fn texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| t.split_once('>').and_then(|(_, r)| r.split_once("</text>")))
            .map(|(t, _)| t.trim().to_string())
            .collect()
    }

    /// Widths of the filled bars (`<rect ... fill="#3B6EA8"`), left to right.
    fn bars_x(svg: &str, colour: &str) -> Vec<(f64, f64)> {
        svg.split("<rect")
            .skip(1)
            .filter(|r| r.to_ascii_uppercase().contains(colour))
            .filter_map(|r| {
                let num = |k: &str| {
                    r.split(&format!(" {k}=\""))
                        .nth(1)?
                        .split('"')
                        .next()?
                        .parse::<f64>()
                        .ok()
                };
                Some((num("x")?, num("width")?))
            })
            .collect()
    }

    #[test]
    fn score_bins_end_at_100_and_fill_the_axis() {
        let svg = scores_svg(&[], false).unwrap();
        let labels = texts(&svg);
        for b in 0..BINS {
            assert!(labels.contains(&bin_label(b)), "{labels:?}");
        }
        assert!(!labels.iter().any(|l| l.starts_with("100-")), "{labels:?}");
        // Ten bars of equal width, the last ending where the axis ends.
        let bars = bars_x(&svg, "3B6EA8");
        assert_eq!(bars.len(), BINS as usize, "{bars:?}");
        let step = bars[1].0 - bars[0].0;
        let axis_end = svg
            .split("<line")
            .filter_map(|l| {
                l.split(" x2=\"")
                    .nth(1)?
                    .split('"')
                    .next()?
                    .parse::<f64>()
                    .ok()
            })
            .fold(0.0, f64::max);
        let last_end = bars[9].0 + bars[9].1 + 3.0;
        assert!(
            (axis_end - last_end).abs() <= step / 2.0,
            "{axis_end} vs {last_end}"
        );
        assert!(!svg.contains(PROVISIONAL));
        let svg = scores_svg(&[], true).unwrap();
        assert!(svg.contains("Total score (provisional: speed not measured)"));
        let svg = milestones_svg(&["a".into()], &[100.0], true).unwrap();
        assert!(svg.contains("Milestones cleared (provisional: speed not measured)"));
    }

    #[test]
    fn charts_are_svg_with_their_labels() {
        let svg = milestones_svg(
            &["reduce_naive".into(), "a<b".into()],
            &[50.0, 100.0],
            false,
        )
        .unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40.min(svg.len())]);
        assert!(svg.contains("reduce_naive"));
        // Student-free, but milestone ids come from the rubric: markup in them is escaped.
        assert!(!svg.contains("a<b"));
        let svg = scores_svg(&[], false).unwrap();
        assert!(svg.contains("Total score"));
        let twice = (0..8)
            .map(|_| {
                milestones_svg(
                    &["a".into(), "b".into(), "c".into()],
                    &[1.0, 50.0, 99.0],
                    false,
                )
            })
            .collect::<Result<std::collections::BTreeSet<_>, _>>()
            .unwrap();
        assert_eq!(twice.len(), 1, "the same data draws the same bytes");
    }
}
