//! Namespaces' node selectors and tolerations, well formed or not, and the pods created in
//! them (see `kapi_sim::fuzzing::pod_placement`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kapi_sim::fuzzing::pod_placement(data);
});
