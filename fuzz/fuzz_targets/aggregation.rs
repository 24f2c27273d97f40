//! APIServices and what extension servers answer, through the core's request pipeline and
//! availability controller (see `kapi_sim::fuzzing::aggregation`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kapi_sim::fuzzing::aggregation(data);
});
