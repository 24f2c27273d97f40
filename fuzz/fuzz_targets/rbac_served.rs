//! RBAC objects changing over HTTP, each answer of the server checked against kube's walk of
//! what it holds (see `kapi_sim::fuzzing::rbac_served`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kapi_sim::fuzzing::rbac_served(data);
});
