//! `kapi-sim`: runs the core in a simulated world. This first version drives one request
//! through the pipeline against `kv::Model`; the seeded simulator with faults and invariant
//! checkers is built on the same [`kapi_sim::World`].

use kapi_core::pipeline::Request;
use kapi_sim::{ADMIN_TOKEN, World, default_server, epoch};

fn main() {
    let mut world = World::new(default_server(), epoch(), 1);
    let resp = world.request(Request {
        method: "GET".into(),
        path: "/api/v1/namespaces".into(),
        headers: vec![("Authorization".into(), format!("Bearer {ADMIN_TOKEN}"))],
        ..Default::default()
    });
    let names: Vec<String> = resp.json()["items"].as_array().into_iter().flatten().filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string)).collect();
    println!("GET /api/v1/namespaces -> {} {:?}", resp.head.status, names);
    if resp.head.status != 200 {
        std::process::exit(1);
    }
}
