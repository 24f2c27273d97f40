//! Service account tokens as bearer credentials (see `kapi_sim::fuzzing::tokens`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kapi_sim::fuzzing::tokens(data);
});
