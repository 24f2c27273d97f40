//! `kapi-sim`: runs the core in a seeded, simulated world and checks its invariants.
//!
//! Exit codes: 0 all runs passed, 1 usage, 2 crash (a panic), 3 correctness violation,
//! 4 liveness violation, 5 a seed did not replay identically.

use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use clap::Parser;
use kapi_sim::sim::{Config, Planted, Report, run};

#[derive(Parser)]
#[command(name = "kapi-sim", about = "kapi's deterministic simulator: seeded worlds, faults, invariant checks")]
struct Args {
    /// Replay this seed (drawn at random and printed when neither --seed nor --seeds is given).
    #[arg(long, conflicts_with = "seeds")]
    seed: Option<u64>,
    /// Sweep the seeds A..B (B excluded).
    #[arg(long, value_name = "A..B")]
    seeds: Option<String>,
    /// Requests the clients send in each run's safety phase.
    #[arg(long, default_value_t = 5000)]
    steps: u64,
    /// Run every seed twice and compare the digests of all they did (always on for one seed).
    #[arg(long)]
    determinism: bool,
    /// Parallel runs in a sweep (default: one per core).
    #[arg(long)]
    jobs: Option<usize>,
    /// Print every run's swarm options, not only a failing one's.
    #[arg(long)]
    verbose: bool,
}

fn seeds(args: &Args) -> Result<Vec<u64>, String> {
    if let Some(range) = &args.seeds {
        let (a, b) = range.split_once("..").ok_or("--seeds takes A..B")?;
        let a: u64 = a.parse().map_err(|_| format!("bad seed {a:?}"))?;
        let b: u64 = b.parse().map_err(|_| format!("bad seed {b:?}"))?;
        return Ok((a..b).collect());
    }
    let seed = args.seed.unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
        t ^ u64::from(std::process::id()).rotate_left(32)
    });
    Ok(vec![seed])
}

/// Runs a seed (twice when checking determinism); the exit code and what to print.
fn one(seed: u64, args: &Args, twice: bool) -> (i32, Report, String) {
    let config = Config { seed, steps: args.steps, planted: Planted::default() };
    let report = run(&config);
    let mut out = String::new();
    if let Some(f) = &report.failure {
        out.push_str(&format!("seed {seed} FAILED: {f:?}\n  swarm: {}\n  last events:\n", report.swarm));
        for line in &report.trace {
            out.push_str(&format!("    {line}\n"));
        }
        out.push_str(&format!("  replay: kapi-sim --seed {seed} --steps {}\n", args.steps));
        return (f.exit_code(), report, out);
    }
    if args.verbose || !twice || args.seeds.is_none() {
        out.push_str(&format!("seed {seed}: {}\n", report.swarm));
    }
    if twice {
        let again = run(&config);
        if again.digest != report.digest || again.requests != report.requests {
            out.push_str(&format!("seed {seed} NOT DETERMINISTIC: digests {:016x} and {:016x}\n", report.digest, again.digest));
            return (5, report, out);
        }
    }
    out.push_str(&format!(
        "seed {seed} ok: {} requests, {:.1}s simulated, digest {:016x}{}\n",
        report.requests,
        report.simulated.as_secs_f64(),
        report.digest,
        if twice { " (replayed identically)" } else { "" }
    ));
    (0, report, out)
}

fn main() -> ExitCode {
    let args = Args::parse();
    let seeds = match seeds(&args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kapi-sim: {e}");
            return ExitCode::from(1);
        }
    };
    if args.seeds.is_none() {
        println!("seed {}", seeds[0]);
    }
    let twice = args.determinism || args.seeds.is_none();
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    let started = Instant::now();
    let next = AtomicU64::new(0);
    let results: Mutex<Vec<(u64, i32, u64, f64)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                    let Some(&seed) = seeds.get(i) else { return };
                    let (code, report, out) = one(seed, &args, twice);
                    print!("{out}");
                    results.lock().expect("no run panics while holding the lock").push((seed, code, report.requests, report.simulated.as_secs_f64()));
                }
            });
        }
    });
    let mut results = results.into_inner().expect("the sweep's threads are done");
    results.sort_by_key(|r| r.0);
    let requests: u64 = results.iter().map(|r| r.2).sum();
    let simulated: f64 = results.iter().map(|r| r.3).sum();
    let wall = started.elapsed().as_secs_f64();
    let failed: Vec<u64> = results.iter().filter(|r| r.1 != 0).map(|r| r.0).collect();
    println!(
        "{} seeds, {} failed {failed:?}; {requests} requests, {simulated:.0}s simulated in {wall:.1}s ({:.0} simulated requests/s on {jobs} threads)",
        results.len(),
        failed.len(),
        requests as f64 / wall.max(1e-9)
    );
    ExitCode::from(results.iter().map(|r| r.1).find(|c| *c != 0).unwrap_or(0) as u8)
}
