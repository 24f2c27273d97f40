//! Swarm options: each seed draws its own mix of clients, fault rates and sizes, so a sweep
//! covers many different worlds rather than one world many times.

use std::fmt;

use jiff::SignedDuration;

use super::rng::SimRng;

/// The shape of one run, drawn from its seed and printed with it.
#[derive(Clone, Debug)]
pub struct Swarm {
    /// CRUD users.
    pub users: usize,
    /// Informer-style controllers: list + watch + update.
    pub controllers: usize,
    /// Plain watchers with selectors and bookmarks.
    pub watchers: usize,
    /// Watchers that read slower than events arrive.
    pub slow_watchers: usize,
    /// Names each user draws from; small sets make clients collide.
    pub names: u64,
    /// Namespaces the objects spread over.
    pub namespaces: usize,
    /// Mean store latency; each operation takes up to four times it.
    pub store_latency: SignedDuration,
    /// Store operations failing before they commit.
    pub store_errors: f64,
    /// Store writes that time out after committing (the client cannot know).
    pub ambiguous_commits: f64,
    /// Store operations that time out without committing.
    pub ambiguous_failures: f64,
    /// Store watch streams breaking, per delivery.
    pub watch_drops: f64,
    /// Compaction of all but the newest revisions, this often (none if `None`).
    pub compaction: Option<SignedDuration>,
    /// Revisions a compaction keeps.
    pub compaction_keep: i64,
    /// Windows in which the store is unavailable.
    pub outages: usize,
    /// Server restarts (caches and requests in flight thrown away).
    pub restarts: usize,
    /// Events each watch cache keeps for resuming watches.
    pub cache_history: usize,
    /// Frames a watch connection buffers before its watcher counts as slow.
    pub watch_buffer: usize,
    /// An administrator changes and deletes the widgets' CRD while they are used.
    pub crd_churn: bool,
    /// The server authorizes with RBAC; members work under a policy an administrator keeps
    /// changing (this many members, none for a server that allows everything).
    pub rbac_members: usize,
    /// Every namespace has a ResourceQuota of this many configmaps (`count/configmaps`),
    /// kept by kapi's resourcequota controller; none if `None`.
    pub quota: Option<u64>,
    /// Admission webhooks (`sim::webhooks`) guard and stamp configmaps, with this
    /// `timeoutSeconds`; none if `None`.
    pub webhooks: Option<i64>,
    /// A validating admission policy (`check::webhooks::POLICY`) refuses configmaps whose `v`
    /// is a multiple of seven, and a mutating one of the same name stamps them.
    pub policy: bool,
}

impl Swarm {
    /// The options of `seed`'s world, drawn from `rng`; those added since the regression seeds
    /// were kept draw from a stream of their own (salted so that those seeds draw none of
    /// them), so that a world without them is the one its seed made before.
    pub fn draw(rng: &mut SimRng, seed: u64) -> Swarm {
        let mut added = SimRng::new(seed ^ 0x5eed_0009);
        let mut quotas = SimRng::new(seed ^ 0x5eed_0016);
        let mut webhooks = SimRng::new(seed ^ 0x5eed_0017);
        let mut policies = SimRng::new(seed ^ 0x5eed_0019);
        let compaction = rng.chance(0.6).then(|| SignedDuration::from_millis(rng.between(500, 30_000) as i64));
        Swarm {
            users: rng.between(1, 8) as usize,
            controllers: rng.between(0, 4) as usize,
            watchers: rng.between(0, 6) as usize,
            slow_watchers: rng.between(0, 2) as usize,
            names: rng.between(3, 60),
            namespaces: rng.between(1, 3) as usize,
            store_latency: SignedDuration::from_micros(rng.between(50, 20_000) as i64),
            store_errors: rng.rate(0.05),
            ambiguous_commits: rng.rate(0.03),
            ambiguous_failures: rng.rate(0.03),
            watch_drops: rng.rate(0.01),
            compaction,
            compaction_keep: rng.between(1, 200) as i64,
            outages: rng.below(3) as usize,
            restarts: rng.below(4) as usize,
            cache_history: *rng.pick(&[8, 64, 512, 2048]),
            watch_buffer: *rng.pick(&[4, 32, 1024]),
            crd_churn: rng.chance(0.5),
            rbac_members: if added.chance(0.5) { added.between(1, 3) as usize } else { 0 },
            quota: quotas.chance(0.4).then(|| quotas.between(1, 12)),
            webhooks: webhooks.chance(0.3).then(|| webhooks.between(1, 3) as i64),
            policy: policies.chance(0.3),
        }
    }

    /// The same world without faults: what setup and the liveness phase run with.
    pub fn calm(&self) -> Swarm {
        Swarm {
            store_errors: 0.0,
            ambiguous_commits: 0.0,
            ambiguous_failures: 0.0,
            watch_drops: 0.0,
            store_latency: self.store_latency.min(SignedDuration::from_millis(1)),
            ..self.clone()
        }
    }
}

impl fmt::Display for Swarm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let compaction = self.compaction.map_or("off".to_string(), |d| format!("every {}ms keeping {}", d.as_millis(), self.compaction_keep));
        write!(
            f,
            "users={} controllers={} watchers={} slow_watchers={} names={} namespaces={} latency={}us errors={:.3} ambiguous_commits={:.3} ambiguous_failures={:.3} watch_drops={:.4} compaction={} outages={} restarts={} cache_history={} watch_buffer={} crd_churn={} rbac_members={} quota={:?} webhooks={:?} policy={}",
            self.users,
            self.controllers,
            self.watchers,
            self.slow_watchers,
            self.names,
            self.namespaces,
            self.store_latency.as_micros(),
            self.store_errors,
            self.ambiguous_commits,
            self.ambiguous_failures,
            self.watch_drops,
            compaction,
            self.outages,
            self.restarts,
            self.cache_history,
            self.watch_buffer,
            self.crd_churn,
            self.rbac_members,
            self.quota,
            self.webhooks,
            self.policy
        )
    }
}
