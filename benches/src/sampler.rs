//! Samples a server process's resident memory and CPU time from /proc while a scenario runs
//! (`--server-pid`): the memory figures are the server's, not the load generator's.

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Linux reports CPU times in clock ticks of 1/100 s (USER_HZ) on every architecture kapi runs on.
const TICKS_PER_SECOND: f64 = 100.0;

/// Resident set size in bytes.
pub fn rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// User plus system CPU seconds the process has used.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; the fields after it are space-separated.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_SECOND)
}

/// A running sampler; `finish` stops it and returns its figures.
pub struct Sampler {
    stop: watch::Sender<bool>,
    task: JoinHandle<Map<String, Value>>,
}

const MIB: f64 = 1024.0 * 1024.0;

impl Sampler {
    pub fn start(pid: u32) -> Sampler {
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let (start, cpu0, rss0) = (Instant::now(), cpu_seconds(pid).unwrap_or(0.0), rss(pid).unwrap_or(0));
            let mut peak = rss0;
            let mut tick = tokio::time::interval(Duration::from_millis(50));
            loop {
                tokio::select! {
                    _ = tick.tick() => peak = peak.max(rss(pid).unwrap_or(0)),
                    _ = stopped.changed() => break,
                }
            }
            let rss1 = rss(pid).unwrap_or(0);
            let cpu = cpu_seconds(pid).unwrap_or(cpu0) - cpu0;
            let secs = start.elapsed().as_secs_f64();
            let peak = peak.max(rss1);
            let mut m = Map::new();
            for (k, v) in [
                ("server_rss_start_mib", rss0 as f64 / MIB),
                ("server_rss_peak_mib", peak as f64 / MIB),
                ("server_rss_end_mib", rss1 as f64 / MIB),
                ("server_rss_growth_mib", peak.saturating_sub(rss0) as f64 / MIB),
                ("server_cpu_seconds", cpu),
                ("server_cpu_cores", cpu / secs.max(1e-9)),
            ] {
                m.insert(k.into(), json!((v * 100.0).round() / 100.0));
            }
            m
        });
        Sampler { stop, task }
    }

    pub async fn finish(self) -> Map<String, Value> {
        let _ = self.stop.send(true);
        self.task.await.unwrap_or_default()
    }
}
