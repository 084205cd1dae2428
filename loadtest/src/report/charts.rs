//! PNG charts with plotters' bitmap backend. Text needs a font: plotters'
//! `ab_glyph` feature draws with a TrueType file read here at run time
//! (DejaVu Sans where distributions put it, or `--font`), so no font-kit or
//! fontconfig library is needed at build time.

use std::{
    path::{Path, PathBuf},
    sync::OnceLock,
};

use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use super::model::{ChurnRow, RssSeries, Target};

/// Where distributions install DejaVu Sans (Debian/Ubuntu, Fedora, Arch, Alpine).
const FONT_CANDIDATES: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// The font file registered, once per process.
static FONT: OnceLock<Result<PathBuf, String>> = OnceLock::new();

/// Registers `given` (or the first DejaVu Sans found) as plotters'
/// "sans-serif". Later calls return the first call's outcome.
pub fn load_font(given: Option<&Path>) -> Result<PathBuf> {
    FONT.get_or_init(|| {
        let path = match given {
            Some(p) => p.to_owned(),
            None => FONT_CANDIDATES
                .iter()
                .map(PathBuf::from)
                .find(|p| p.exists())
                .ok_or_else(|| {
                    format!(
                        "no DejaVuSans.ttf in {}: install fonts-dejavu-core or pass --font",
                        FONT_CANDIDATES.join(", ")
                    )
                })?,
        };
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        // plotters keeps fonts for the life of the process and wants 'static
        // bytes; this runs once per process (the OnceLock), so one font file leaks.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| format!("{}: not a TrueType font plotters can read", path.display()))?;
        Ok(path)
    })
    .clone()
    .map_err(|e| anyhow!(e))
}

/// Which percentile of a churn row a line draws.
type Pick = fn(&ChurnRow) -> std::time::Duration;

/// Latency p50/p99/p99.9 against the churn rate, proxy and direct, log-log.
pub fn latency_chart(path: &Path, rows: &[ChurnRow]) -> Result<()> {
    draw_latency(path, rows).map_err(|e| anyhow!("drawing {}: {e}", path.display()))
}

fn draw_latency(path: &Path, rows: &[ChurnRow]) -> Result<(), Box<dyn std::error::Error>> {
    let root = BitMapBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let (mut lo_x, mut hi_x) = (f64::MAX, f64::MIN);
    let (mut lo_y, mut hi_y) = (f64::MAX, f64::MIN);
    for r in rows {
        lo_x = lo_x.min(r.rate);
        hi_x = hi_x.max(r.rate);
        for v in [ms(r.latency.p50), ms(r.latency.p999)] {
            lo_y = lo_y.min(v.max(1e-3));
            hi_y = hi_y.max(v.max(1e-3));
        }
    }
    if rows.is_empty() {
        (lo_x, hi_x, lo_y, hi_y) = (1.0, 10.0, 0.01, 1.0);
    }
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Propagation latency, upstream write → watcher",
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (lo_x / 1.5..hi_x * 1.5).log_scale(),
            (lo_y / 2.0..hi_y * 2.0).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("changes/s")
        .y_desc("ms")
        .label_style(("sans-serif", 14))
        .draw()?;
    let lines: [(Target, &str, Pick, RGBColor); 6] = [
        (
            Target::Proxy,
            "p50",
            |r| r.latency.p50,
            RGBColor(230, 120, 100),
        ),
        (
            Target::Proxy,
            "p99",
            |r| r.latency.p99,
            RGBColor(200, 40, 30),
        ),
        (
            Target::Proxy,
            "p99.9",
            |r| r.latency.p999,
            RGBColor(120, 0, 0),
        ),
        (
            Target::Direct,
            "p50",
            |r| r.latency.p50,
            RGBColor(110, 160, 230),
        ),
        (
            Target::Direct,
            "p99",
            |r| r.latency.p99,
            RGBColor(30, 80, 200),
        ),
        (
            Target::Direct,
            "p99.9",
            |r| r.latency.p999,
            RGBColor(0, 20, 110),
        ),
    ];
    for (target, name, pick, color) in lines {
        let mut pts: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.target == target)
            .map(|r| (r.rate, ms(pick(r)).max(1e-3)))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let style = color.stroke_width(2);
        chart
            .draw_series(LineSeries::new(pts.clone(), style))?
            .label(format!("{} {name}", target.name()))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(())
}

/// The proxy's RSS over the run, one line per proxy process.
pub fn rss_chart(path: &Path, series: &[RssSeries]) -> Result<()> {
    draw_rss(path, series).map_err(|e| anyhow!("drawing {}: {e}", path.display()))
}

fn draw_rss(path: &Path, series: &[RssSeries]) -> Result<(), Box<dyn std::error::Error>> {
    let root = BitMapBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let pts = series.iter().flat_map(|s| s.points.iter());
    let max_x = pts.clone().map(|p| p.0).fold(1.0, f64::max);
    let max_y = pts.map(|p| p.1).fold(1.0, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption("sitegrid-proxy RSS over the run", ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..max_x * 1.02, 0.0..max_y * 1.15)?;
    chart
        .configure_mesh()
        .x_desc("seconds since start")
        .y_desc("MiB")
        .label_style(("sans-serif", 14))
        .draw()?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let style = color.stroke_width(2);
        chart
            .draw_series(LineSeries::new(s.points.clone(), style))?
            .label(s.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    if !series.is_empty() {
        chart
            .configure_series_labels()
            .label_font(("sans-serif", 14))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// Draws both charts into `dir` named `<stem>-latency.png` and
/// `<stem>-rss.png`; returns their file names.
pub fn draw_all(
    dir: &Path,
    stem: &str,
    churn: &[ChurnRow],
    rss: &[RssSeries],
) -> Result<(String, String)> {
    let latency = format!("{stem}-latency.png");
    let rss_name = format!("{stem}-rss.png");
    latency_chart(&dir.join(&latency), churn).context("latency chart")?;
    rss_chart(&dir.join(&rss_name), rss).context("RSS chart")?;
    Ok((latency, rss_name))
}
