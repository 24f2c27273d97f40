//! Mutating admission policies of generated ApplyConfigurations and JSON patches (see
//! `kapi_sim::fuzzing::mutating_policies`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kapi_sim::fuzzing::mutating_policies(data);
});
