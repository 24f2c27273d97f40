//! Pods and volumes changing, the Node authorizer's graph checked against kube's paths (see
//! `kapi_sim::fuzzing::node_graph`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kapi_sim::fuzzing::node_graph(data);
});
