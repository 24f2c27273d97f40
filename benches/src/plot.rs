//! `--plot FILE.svg`: each operation's latency by percentile, the way HdrHistogram plots it:
//! percentiles on a scale that spreads the tail (50%, 90%, 99%, 99.9% ... equally spaced),
//! latency on a log scale, one colour per operation. Plain SVG, no fonts needed.

use std::fmt::Write;

use crate::report::Row;

const W: f64 = 960.0;
const H: f64 = 520.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 300.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
/// The x axis ends at the 99.99th percentile: log10(1 / (1 - 0.9999)).
const NINES: f64 = 4.0;
const COLOURS: [&str; 8] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

/// How far along the tail a quantile is: 0 at 0%, 1 at 90%, 2 at 99%, ...
fn nines(q: f64) -> f64 {
    (1.0 / (1.0 - q).max(1e-9)).log10().min(NINES)
}

/// The SVG document for `rows` (rows with no latencies are left out).
pub fn svg(title: &str, rows: &[Row]) -> String {
    let rows: Vec<&Row> = rows.iter().filter(|r| !r.histogram.is_empty()).collect();
    let lo = rows.iter().map(|r| r.histogram.value_at_quantile(0.01)).min().unwrap_or(1).max(1) as f64 / 1000.0;
    let hi = rows.iter().map(|r| r.histogram.max()).max().unwrap_or(1000).max(2) as f64 / 1000.0;
    // Whole decades around the data, so the grid lines are 0.1, 1, 10 ... ms.
    let (d0, d1) = (lo.log10().floor(), hi.log10().ceil().max(lo.log10().floor() + 1.0));
    let x = |q: f64| LEFT + nines(q) / NINES * (W - LEFT - RIGHT);
    let y = |ms: f64| H - BOTTOM - (ms.max(lo).log10() - d0) / (d1 - d0) * (H - TOP - BOTTOM);

    let mut s = String::new();
    let _ = write!(s, r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">"#);
    let _ = write!(
        s,
        r#"<rect width="{W}" height="{H}" fill="white"/><text x="{}" y="24" font-size="16" text-anchor="middle">{}</text>"#,
        (W - RIGHT + LEFT) / 2.0,
        escape(title)
    );
    for d in d0 as i32..=d1 as i32 {
        let ms = 10f64.powi(d);
        let py = y(ms);
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" y1="{py:.1}" x2="{}" y2="{py:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            W - RIGHT,
            LEFT - 6.0,
            py + 4.0,
            label(ms)
        );
    }
    for (q, name) in [(0.0, "0%"), (0.9, "90%"), (0.99, "99%"), (0.999, "99.9%"), (0.9999, "99.99%")] {
        let px = x(q);
        let _ = write!(
            s,
            r##"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{}" stroke="#ddd"/><text x="{px:.1}" y="{}" text-anchor="middle">{name}</text>"##,
            H - BOTTOM,
            H - BOTTOM + 16.0
        );
    }
    let _ = write!(s, r#"<text x="{}" y="{}" text-anchor="middle">percentile</text>"#, (W - RIGHT + LEFT) / 2.0, H - 16.0);
    let _ = write!(s, r#"<text x="16" y="{}" transform="rotate(-90 16 {})" text-anchor="middle">latency (ms, log scale)</text>"#, H / 2.0, H / 2.0);
    for (i, r) in rows.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let mut points = String::new();
        for v in r.histogram.iter_quantiles(20) {
            let _ = write!(points, "{:.1},{:.1} ", x(v.quantile_iterated_to()), y(v.value_iterated_to() as f64 / 1000.0));
        }
        let _ = write!(s, r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>"#);
        let ly = TOP + 20.0 * i as f64;
        let _ = write!(
            s,
            r#"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{colour}" stroke-width="3"/><text x="{}" y="{}">{} {} (p99 {:.2} ms)</text>"#,
            W - RIGHT + 10.0,
            W - RIGHT + 30.0,
            W - RIGHT + 36.0,
            ly + 4.0,
            escape(&r.scenario),
            escape(&r.op),
            r.p99_ms
        );
    }
    s.push_str("</svg>\n");
    s
}

fn label(ms: f64) -> String {
    if ms >= 1.0 { format!("{ms:.0}") } else { format!("{ms}") }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
