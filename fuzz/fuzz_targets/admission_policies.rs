//! Validating admission policies of generated CEL expressions (see
//! `kapi_sim::fuzzing::admission_policies`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kapi_sim::fuzzing::admission_policies(data);
});
