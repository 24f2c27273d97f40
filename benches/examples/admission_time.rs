//! The admission target in time: the creates of `admission_instructions` timed on this VM,
//! whose speed drifts by half from minute to minute. The worlds run in one process, in turns
//! of `batch` creates each, and what a setting costs over another is the median of the
//! differences between their turns of the same round, so that a drift of the machine between
//! rounds cancels out.
//!
//! `admission_time [rounds] [batch]` (150 and 20 unless given): prints each setting's time a
//! create (quartiles of its turns) and the paired differences. The settings are those of
//! `admission_instructions` (`off`: the pod as the default plugins leave it, no admission;
//! `plugins`; `policies`: and ten policies) and `bare`: no admission, the pod as sent. The
//! bodies are made before a turn is timed.

use std::time::Instant;

#[path = "../benches/creates/mod.rs"]
mod creates;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The first, middle and third quartiles of `v`.
fn quartiles(mut v: Vec<f64>) -> [f64; 3] {
    v.sort_by(f64::total_cmp);
    [v[v.len() / 4], v[v.len() / 2], v[3 * v.len() / 4]]
}

fn main() {
    let args: Result<Vec<usize>, _> = std::env::args().skip(1).map(|a| a.parse::<usize>()).collect();
    let (rounds, batch) = match args.as_deref() {
        Ok([]) => (150, 20),
        Ok([rounds]) => (*rounds, 20),
        Ok([rounds, batch]) => (*rounds, *batch),
        _ => {
            eprintln!("usage: admission_time [rounds] [batch]");
            std::process::exit(2);
        }
    };
    let (rounds, batch) = (rounds.max(1), batch.max(1));
    let admitted = creates::admitted_pod(&mut creates::world_with_service_account());
    let mut settings: Vec<(&str, kapi_sim::World, Box<creates::Body>)> = vec![
        ("off", creates::world_without_admission(), Box::new(move |name: &str| creates::renamed(&admitted, name))),
        ("bare", creates::world_without_admission(), Box::new(creates::pod)),
        ("plugins", creates::world_with_service_account(), Box::new(creates::pod)),
        ("policies", creates::world_with_policies(), Box::new(creates::pod)),
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); settings.len()];
    // Two rounds warm the worlds up untimed; each round starts from the next setting, so
    // that no setting always follows the same one.
    let count = settings.len();
    for round in 0..rounds + 2 {
        for k in (0..count).map(|i| (round + i) % count) {
            let (_, world, body) = &mut settings[k];
            let bodies: Vec<_> = (0..batch).map(|i| body(&format!("bench-{round:05}-{i:05}"))).collect();
            let start = Instant::now();
            for b in &bodies {
                creates::create(world, b);
            }
            if round >= 2 {
                times[k].push(start.elapsed().as_secs_f64() * 1e6 / batch as f64);
            }
        }
    }
    for ((name, _, _), t) in settings.iter().zip(&times) {
        let [q1, median, q3] = quartiles(t.clone());
        println!("{name}: {median:.1} µs a create (quartiles {q1:.1}, {q3:.1})");
    }
    for (k, base) in [(2, 0), (3, 0), (2, 1), (3, 1)] {
        let paired = times[k].iter().zip(&times[base]).map(|(a, b)| a - b).collect();
        let [q1, median, q3] = quartiles(paired);
        println!("{} over {}: {median:+.1} µs (quartiles {q1:+.1}, {q3:+.1})", settings[k].0, settings[base].0);
    }
}
