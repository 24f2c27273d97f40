//! Admission webhooks that answer anything (see `kapi_sim::fuzzing::admission_webhooks`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kapi_sim::fuzzing::admission_webhooks(data);
});
