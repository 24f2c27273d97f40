//! RBAC objects changing, each decision checked against kube's walk (see `kapi_sim::fuzzing::rbac`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kapi_sim::fuzzing::rbac(data);
});
