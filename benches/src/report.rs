//! What a scenario measured: latencies (an HDR histogram per operation), outcomes by status
//! code, bytes; printed as a table and written as JSON lines.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::client::Outcome;

/// Latencies and outcomes of one kind of operation.
#[derive(Clone)]
pub struct Recorder {
    /// Microseconds.
    pub latencies: Histogram<u64>,
    pub codes: BTreeMap<String, u64>,
    pub bytes: u64,
}

impl Default for Recorder {
    fn default() -> Recorder {
        Recorder {
            latencies: Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("1 µs to an hour, 3 significant digits"),
            codes: BTreeMap::new(),
            bytes: 0,
        }
    }
}

impl Recorder {
    pub fn latency(&mut self, d: Duration) {
        self.latencies.saturating_record(d.as_micros().max(1) as u64);
    }

    /// One request: its outcome, and its latency when it succeeded.
    pub fn record(&mut self, outcome: Outcome, d: Duration) {
        if outcome.is_some_and(|c| c < 300) {
            self.latency(d);
        }
        self.count(outcome);
    }

    pub fn count(&mut self, outcome: Outcome) {
        let code = outcome.map_or_else(|| "transport".to_string(), |c| c.to_string());
        *self.codes.entry(code).or_default() += 1;
    }

    pub fn merge(&mut self, other: &Recorder) {
        self.latencies.add(&other.latencies).expect("histograms of one shape");
        for (code, n) in &other.codes {
            *self.codes.entry(code.clone()).or_default() += n;
        }
        self.bytes += other.bytes;
    }

    pub fn errors(&self) -> BTreeMap<String, u64> {
        self.codes.iter().filter(|(c, _)| !c.starts_with('2')).map(|(c, n)| (c.clone(), *n)).collect()
    }
}

/// One row of results: an operation of a scenario.
#[derive(Serialize)]
pub struct Row {
    pub scenario: String,
    pub op: String,
    pub count: u64,
    pub seconds: f64,
    pub per_second: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub errors: BTreeMap<String, u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_per_second: Option<f64>,
    /// Scenario-specific figures: conflicts, missed and duplicated events, server RSS and CPU.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
    #[serde(skip)]
    pub histogram: Histogram<u64>,
}

impl Row {
    /// `count` operations in `elapsed`, their latencies in `rec`.
    pub fn new(scenario: &str, op: &str, rec: &Recorder, elapsed: Duration) -> Row {
        let h = &rec.latencies;
        let ms = |q: f64| if h.is_empty() { 0.0 } else { h.value_at_quantile(q) as f64 / 1000.0 };
        let count: u64 = rec.codes.values().sum::<u64>().max(h.len());
        let seconds = elapsed.as_secs_f64();
        Row {
            scenario: scenario.into(),
            op: op.into(),
            count,
            seconds,
            per_second: count as f64 / seconds.max(1e-9),
            p50_ms: ms(0.5),
            p90_ms: ms(0.9),
            p99_ms: ms(0.99),
            p999_ms: ms(0.999),
            max_ms: if h.is_empty() { 0.0 } else { h.max() as f64 / 1000.0 },
            errors: rec.errors(),
            bytes_per_second: (rec.bytes > 0).then(|| rec.bytes as f64 / seconds.max(1e-9)),
            extra: Map::new(),
            histogram: h.clone(),
        }
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Row {
        self.extra.insert(key.into(), value.into());
        self
    }
}

fn bytes_rate(b: f64) -> String {
    if b >= 1e9 { format!("{:.2} GB/s", b / 1e9) } else { format!("{:.1} MB/s", b / 1e6) }
}

/// Prints the rows as a table, then each row's extra figures.
pub fn print(rows: &[Row]) {
    println!(
        "{:<13} {:<18} {:>8} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>12}  errors",
        "scenario", "op", "count", "secs", "ops/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "bytes/s"
    );
    for r in rows {
        let errors = if r.errors.is_empty() { "-".to_string() } else { r.errors.iter().map(|(c, n)| format!("{c}:{n}")).collect::<Vec<_>>().join(" ") };
        println!(
            "{:<13} {:<18} {:>8} {:>8.2} {:>10.1} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>12}  {errors}",
            r.scenario,
            r.op,
            r.count,
            r.seconds,
            r.per_second,
            r.p50_ms,
            r.p90_ms,
            r.p99_ms,
            r.p999_ms,
            r.bytes_per_second.map(bytes_rate).unwrap_or_else(|| "-".into()),
        );
    }
    for r in rows.iter().filter(|r| !r.extra.is_empty()) {
        let extra: Vec<String> = r.extra.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("  {} {}: {}", r.scenario, r.op, extra.join(" "));
    }
}

/// Appends one JSON line per row to `path`.
pub fn append_json(path: &Path, rows: &[Row]) -> anyhow::Result<()> {
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    for r in rows {
        serde_json::to_writer(&mut f, r)?;
        f.write_all(b"\n")?;
    }
    Ok(())
}
