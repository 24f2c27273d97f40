//! Server-side apply through the core's request pipeline (see `kapi_sim::fuzzing::apply`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kapi_sim::fuzzing::apply(data);
});
