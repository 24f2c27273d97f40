//! The admission target's creates (`hot_paths`' `create/pod_*`), counted in instructions
//! rather than timed: `benches/instructions` runs this under callgrind, whose counts are the
//! same from run to run whatever else the machine does, where this VM's timings vary by half.
//!
//! `admission_instructions <off|plugins|policies> <creates>`: sets the world up, creates 50
//! pods to warm it, then `creates` more (`off`: the pod as the default plugins leave it, with
//! no admission; `plugins`: through the default plugins; `policies`: and ten policies).

#[path = "../benches/creates/mod.rs"]
mod creates;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(setting), Some(Ok(count))) = (args.get(1), args.get(2).map(|n| n.parse::<u64>())) else {
        eprintln!("usage: admission_instructions <off|plugins|policies> <creates>");
        std::process::exit(2);
    };
    let (mut world, body): (kapi_sim::World, Box<creates::Body>) = match setting.as_str() {
        "off" => {
            let admitted = creates::admitted_pod(&mut creates::world_with_service_account());
            (creates::world_without_admission(), Box::new(move |name: &str| creates::renamed(&admitted, name)))
        }
        "plugins" => (creates::world_with_service_account(), Box::new(creates::pod)),
        "policies" => (creates::world_with_policies(), Box::new(creates::pod)),
        other => {
            eprintln!("unknown setting {other:?}: off, plugins or policies");
            std::process::exit(2);
        }
    };
    for i in 0..50 + count {
        creates::create(&mut world, &body(&format!("bench-{i:08}")));
    }
}
