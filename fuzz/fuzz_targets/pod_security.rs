//! Pods drawn from what the Pod Security Standards read, admitted consistently across levels
//! (see `kapi_sim::fuzzing::pod_security`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kapi_sim::fuzzing::pod_security(data);
});
