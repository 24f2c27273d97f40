//! CRDs of generated schemas and their custom resources through the core's request pipeline
//! (see `kapi_sim::fuzzing::custom_resources`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kapi_sim::fuzzing::custom_resources(data);
});
