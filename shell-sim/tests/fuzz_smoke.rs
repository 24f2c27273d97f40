//! The fuzz targets' checks on seeded random inputs, so every test run exercises them.

/// `count` inputs of up to `max_len` bytes from a seeded xorshift, each given to `target`.
fn random_inputs(count: usize, max_len: u64, target: fn(&[u8])) {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..count {
        // Drawn afresh for each input: an empty one must not leave the next ones empty too.
        let len = (next() % max_len) as usize;
        let mut data = Vec::with_capacity(len);
        for _ in 0..len {
            data.push(next() as u8);
        }
        target(&data);
    }
}

#[test]
fn random_requests_get_well_formed_answers() {
    random_inputs(3000, 512, kapi_sim::fuzzing::request);
}

#[test]
fn random_patches_get_well_formed_answers() {
    random_inputs(200, 512, kapi_sim::fuzzing::patch);
}

#[test]
fn random_applies_get_well_formed_answers() {
    random_inputs(100, 512, kapi_sim::fuzzing::apply);
}

/// The apply the fuzzer found slow (a warning for each of the many members of a list, each
/// looked for among those kept before): answered with its warnings kept in sets.
#[test]
fn an_apply_warned_for_every_member_of_a_long_list_is_answered() {
    let runs: [(u8, usize); 23] = [
        (10, 1),
        (39, 42),
        (0, 13),
        (99, 1),
        (114, 1),
        (158, 1),
        (97, 1),
        (116, 1),
        (105, 1),
        (111, 1),
        (110, 1),
        (84, 1),
        (0, 29),
        (38, 1),
        (0, 4),
        (88, 23),
        (59, 1),
        (88, 24),
        (0, 3),
        (1, 1),
        (128, 1),
        (0, 28),
        (39, 31),
    ];
    let data: Vec<u8> = runs.iter().flat_map(|&(b, n)| std::iter::repeat_n(b, n)).collect();
    kapi_sim::fuzzing::apply(&data);
}

#[test]
fn random_crd_schemas_and_their_custom_resources_get_well_formed_answers() {
    random_inputs(2000, 512, kapi_sim::fuzzing::custom_resources);
    random_inputs(40, 512, |data| kapi_sim::fuzzing::custom_resources(&[&[kapi_sim::fuzzing::THROUGH_THE_PIPELINE], data].concat()));
}

/// The JSON patch that once doubled the object 22 times (about 4 GiB) is refused at 3 MiB.
#[test]
fn the_doubling_json_patch_is_bounded() {
    let mut data = vec![0u8, 0, 0];
    data.extend([5u8; 30]);
    kapi_sim::fuzzing::patch(&data);
}

#[test]
fn random_api_services_and_extension_server_answers_get_well_formed_answers() {
    random_inputs(300, 1024, kapi_sim::fuzzing::aggregation);
}

#[test]
fn random_cel_rules_are_checked_and_run_without_panicking() {
    random_inputs(2000, 512, kapi_sim::fuzzing::cel_rules);
}

#[test]
fn random_conversion_webhook_answers_never_break_a_request() {
    random_inputs(300, 1024, kapi_sim::fuzzing::conversion);
}

#[test]
fn random_admission_webhook_answers_never_let_a_write_through_unallowed() {
    random_inputs(300, 1024, kapi_sim::fuzzing::admission_webhooks);
}

#[test]
fn random_admission_policies_never_let_a_refused_write_through() {
    random_inputs(300, 1024, kapi_sim::fuzzing::admission_policies);
}

#[test]
fn random_mutating_policies_never_corrupt_or_let_a_refused_write_through() {
    random_inputs(300, 1024, kapi_sim::fuzzing::mutating_policies);
}

#[test]
fn random_rbac_changes_are_decided_as_kubes_walk_decides() {
    random_inputs(2000, 1024, kapi_sim::fuzzing::rbac);
}

#[test]
fn random_rbac_changes_over_http_are_decided_by_the_server_as_kubes_walk_decides() {
    random_inputs(60, 1024, kapi_sim::fuzzing::rbac_served);
}

#[test]
fn random_pods_and_volumes_give_nodes_what_kubes_graph_gives_them() {
    random_inputs(2000, 1024, kapi_sim::fuzzing::node_graph);
}

#[test]
fn random_bearer_tokens_authenticate_only_as_the_server_signed_them() {
    random_inputs(2000, 512, kapi_sim::fuzzing::tokens);
}

#[test]
fn webhooks_that_answer_anything_never_let_in_what_they_did_not_vouch_for() {
    random_inputs(1000, 512, kapi_sim::fuzzing::auth_webhooks);
}

#[test]
fn random_namespaces_place_their_pods_as_their_annotations_say() {
    random_inputs(400, 256, kapi_sim::fuzzing::pod_placement);
}

#[test]
fn random_pods_are_admitted_consistently_across_pod_security_levels() {
    random_inputs(300, 256, kapi_sim::fuzzing::pod_security);
}
