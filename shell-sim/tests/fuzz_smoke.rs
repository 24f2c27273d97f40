//! The fuzz target's checks on seeded random inputs, so every test run exercises them.

#[test]
fn random_requests_get_well_formed_answers() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..3000 {
        let len = (state % 512) as usize;
        let mut data = Vec::with_capacity(len);
        for _ in 0..len {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            data.push(state as u8);
        }
        kapi_sim::fuzzing::request(&data);
    }
}
