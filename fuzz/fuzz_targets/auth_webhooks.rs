//! Authentication and authorization webhooks that answer anything (see
//! `kapi_sim::fuzzing::auth_webhooks`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kapi_sim::fuzzing::auth_webhooks(data);
});
