//! The simulator itself: it replays seeds exactly, passes on today's core, and bites when a
//! bug is planted.

use kapi_sim::sim::check::Invariant;
use kapi_sim::sim::{Config, Failure, Planted, Report, run};

fn config(seed: u64, steps: u64) -> Config {
    Config { seed, steps, planted: Planted::default() }
}

fn invariant(r: &Report) -> Option<Invariant> {
    match &r.failure {
        Some(Failure::Violation(v)) => Some(v.invariant),
        _ => None,
    }
}

/// The first seed in `0..seeds` whose run with `planted` fails, and how.
fn first_failure(planted: Planted, seeds: u64) -> Option<(u64, Report)> {
    (0..seeds).map(|seed| (seed, run(&Config { seed, steps: 1500, planted }))).find(|(_, r)| r.failure.is_some())
}

#[test]
fn a_seed_replays_identically() {
    let a = run(&config(7, 1500));
    let b = run(&config(7, 1500));
    assert!(a.failure.is_none(), "{:?}", a.failure);
    assert_eq!((a.digest, a.requests, a.simulated), (b.digest, b.requests, b.simulated));
    let c = run(&config(8, 1500));
    assert_ne!(a.digest, c.digest, "different seeds make different worlds");
}

#[test]
fn a_short_sweep_passes() {
    for seed in 100..110 {
        let r = run(&config(seed, 1500));
        assert!(r.failure.is_none(), "seed {seed}: {:?}\n{}", r.failure, r.trace.join("\n"));
    }
}

#[test]
fn a_store_that_drops_an_acknowledged_write_is_caught() {
    let (seed, r) = first_failure(Planted { drop_acked_write_after: Some(150), ..Planted::default() }, 10).expect("caught within 10 seeds");
    assert_eq!(invariant(&r), Some(Invariant::Durability), "seed {seed}: {:?}", r.failure);
}

#[test]
fn a_watch_cache_that_skips_an_event_is_caught() {
    let (seed, r) = first_failure(Planted { skip_watch_event_after: Some(40), ..Planted::default() }, 10).expect("caught within 10 seeds");
    assert!(matches!(invariant(&r), Some(Invariant::Watch | Invariant::List | Invariant::Liveness)), "seed {seed}: {:?}", r.failure);
}

#[test]
fn a_store_that_lets_a_stale_quota_charge_land_is_caught() {
    let (seed, r) = first_failure(Planted { unguarded_quotas: true, ..Planted::default() }, 30).expect("caught within 30 seeds");
    assert_eq!(invariant(&r), Some(Invariant::Quota), "seed {seed}: {:?}", r.failure);
}

#[test]
fn a_shell_that_lets_a_write_through_a_failed_webhook_is_caught() {
    let (seed, r) = first_failure(Planted { open_webhooks: true, ..Planted::default() }, 30).expect("caught within 30 seeds");
    assert_eq!(invariant(&r), Some(Invariant::Admission), "seed {seed}: {:?}", r.failure);
}

/// Seeds that found bugs, with the steps they ran: each must pass from now on.
const REGRESSIONS: &[(u64, u64, &str)] = &[
    (11, 2000, "a slow watcher was closed as slow while its initial events were sent, so it never caught up"),
    (15, 2000, "the same, for a watcher of a smaller collection"),
    (668, 5000, "the simulator's own: a world of users only goes quiet in the liveness phase, which is settled, not stuck"),
    (31, 2000, "a server-side apply created a widget while its CRD was being deleted, after the cleanup's last look: the CRD went, the widget stayed"),
    (306, 5000, "the simulator's own: the world counted as settled while a revision was on its way to the quota controller's watch, which has no client view"),
    (
        84,
        5000,
        "the simulator's own: a watch of a revision its cache could not reach while the store was out got kube's 504, which the watch check did not expect",
    ),
];

#[test]
fn regression_seeds_pass() {
    for &(seed, steps, bug) in REGRESSIONS {
        let r = run(&config(seed, steps));
        assert!(r.failure.is_none(), "seed {seed} ({bug}) fails again: {:?}\n{}", r.failure, r.trace.join("\n"));
    }
}

#[test]
fn a_server_that_serves_an_older_catalog_is_caught() {
    let (seed, r) = first_failure(Planted { stale_catalog: true, ..Planted::default() }, 20).expect("caught within 20 seeds");
    assert!(matches!(invariant(&r), Some(Invariant::Catalog | Invariant::Response)), "seed {seed}: {:?}", r.failure);
}

#[test]
fn a_cleanup_that_leaves_a_deleted_crds_resources_is_caught() {
    let (seed, r) = first_failure(Planted { blind_cleanup: true, ..Planted::default() }, 20).expect("caught within 20 seeds");
    assert_eq!(invariant(&r), Some(Invariant::Catalog), "seed {seed}: {:?}", r.failure);
}

#[test]
fn a_server_that_decides_by_an_older_policy_is_caught() {
    let (seed, r) = first_failure(Planted { stale_policy: true, ..Planted::default() }, 20).expect("caught within 20 seeds");
    assert_eq!(invariant(&r), Some(Invariant::Authorization), "seed {seed}: {:?}", r.failure);
}

#[test]
fn an_authorizer_that_misses_a_deleted_role_or_binding_is_caught() {
    let (seed, r) = first_failure(Planted { kept_rbac_deletes: true, ..Planted::default() }, 20).expect("caught within 20 seeds");
    assert_eq!(invariant(&r), Some(Invariant::Authorization), "seed {seed}: {:?}", r.failure);
}
