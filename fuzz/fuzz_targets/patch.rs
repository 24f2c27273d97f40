//! Patches of every type through the core's request pipeline (see `kapi_sim::fuzzing::patch`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kapi_sim::fuzzing::patch(data);
});
