//! `kapi-sim`: runs the core in a simulated world. This first version drives one request
//! through the pipeline against `kv::Model`; the seeded simulator with faults and invariant
//! checkers is built on the same [`kapi_sim::World`].

use std::sync::Arc;

use kapi_core::auth::{Authenticator, Authorizer, TokenFile};
use kapi_core::pipeline::{Request, Server};
use kapi_core::resources::{Settings, catalog};
use kapi_sim::World;

fn main() {
    let tokens = TokenFile::parse("sim-token,sim-admin,0,system:masters\n").expect("a valid token line");
    let server = Arc::new(Server::new(catalog(&Settings::default()), Authenticator { tokens: Some(tokens) }, Authorizer::AlwaysAllow, "/registry", "127.0.0.1:6443"));
    let now: jiff::Timestamp = "2024-01-01T00:00:00Z".parse().expect("a valid timestamp");
    let mut world = World::new(server, now, 1);
    let resp = world.request(Request {
        method: "GET".into(),
        path: "/api/v1/namespaces".into(),
        headers: vec![("Authorization".into(), "Bearer sim-token".into())],
        ..Default::default()
    });
    let names: Vec<String> = resp.json()["items"].as_array().into_iter().flatten().filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string)).collect();
    println!("GET /api/v1/namespaces -> {} {:?}", resp.head.status, names);
    if resp.head.status != 200 {
        std::process::exit(1);
    }
}
