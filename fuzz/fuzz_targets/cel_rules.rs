//! CEL validation rules on generated schemas, checked and run (see `kapi_sim::fuzzing::cel_rules`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kapi_sim::fuzzing::cel_rules(data);
});
