//! The end of a run, and its bounds: the liveness phase, in which every request completes and
//! every client's view settles to the store, and the queues' bounds checked after every step.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use bytes::Bytes;
use jiff::SignedDuration;
use kapi_core::kv::Revision;

use super::check::{self, Invariant, Violation, fail};
use super::{CONTROLLER_REQUESTS, LIVENESS_LIMIT, Simulation};

impl Simulation {
    /// Invariant 6: the server's and the store's queues stay within their bounds.
    pub(super) fn bounded(&self) -> Result<(), Violation> {
        let clients = self.clients.len() + 1;
        let caches = 64;
        // kapi's controllers keep a few requests in flight: one per reflector and per CRD or
        // APIService they work on.
        if self.server.in_flight() > 2 * clients + CONTROLLER_REQUESTS {
            return Err(fail(Invariant::Bounded, format!("{} requests in flight for {clients} clients", self.server.in_flight())));
        }
        if self.store.pending() > 4 * (2 * clients + caches) {
            return Err(fail(Invariant::Bounded, format!("{} store operations and deliveries queued", self.store.pending())));
        }
        if self.server.deepest_buffer() > self.swarm.watch_buffer {
            return Err(fail(
                Invariant::Bounded,
                format!("a watch buffer holds {} frames, over its bound {}", self.server.deepest_buffer(), self.swarm.watch_buffer),
            ));
        }
        Ok(())
    }

    /// The liveness phase: with faults off, every request completes and every client's view
    /// converges to the store.
    pub(super) fn liveness(&mut self) -> Result<(), Violation> {
        if !self.calm {
            self.calm_down();
        }
        let deadline = self.now + LIVENESS_LIMIT;
        let mut checked = self.now;
        loop {
            let idle = !self.step()?;
            // Looked at between requests: a client that keeps asking (an administrator waiting
            // for a CRD its finalizers hold) does not keep the world from settling.
            let between = self.outstanding.values().all(|s| s.call.is_watch());
            if idle || (self.now >= checked && between) {
                checked = self.now + SignedDuration::from_secs(1);
                if self.settled().is_none() && self.server.ready() {
                    break;
                }
            }
            if idle || self.now >= deadline {
                let why = self.settled().unwrap_or_default();
                return Err(fail(Invariant::Liveness, format!("not settled {}s after faults stopped: {why}", LIVENESS_LIMIT.as_secs())));
            }
        }
        let revision = self.store.oracle.revision();
        self.watches.caught_up(&self.store.oracle, revision)?;
        check::crds::deleted_crds_left_nothing(&self.store.oracle)?;
        self.durability.finish(&self.store.oracle, &mut self.store.model, self.now)
    }

    /// Why the world has not settled yet, if it has not.
    pub(super) fn settled(&self) -> Option<String> {
        let waiting: Vec<u64> = self.outstanding.iter().filter(|(_, s)| !s.call.is_watch()).map(|(id, _)| id.0).collect();
        if !waiting.is_empty() {
            return Some(format!("requests {waiting:?} unanswered"));
        }
        let revision = self.store.oracle.revision();
        // Watches with no client view (kapi's controllers') must have caught up too.
        if let Some(behind) = self.watches.lagging(&self.store.oracle, revision) {
            return Some(behind);
        }
        let mut why = String::new();
        for c in &self.clients {
            let Some(view) = c.view() else { continue };
            let truth: BTreeMap<Bytes, Revision> = self
                .store
                .oracle
                .state(&view.prefix, revision)
                .into_iter()
                .filter(|(_, f)| view.selector.matches(&f.labels))
                .map(|(k, f)| (k, f.mod_revision))
                .collect();
            if truth != view.objects {
                let wrong = truth.iter().find(|(k, v)| view.objects.get(*k) != Some(*v)).map(|(k, v)| (k.clone(), *v, view.objects.get(k).copied()));
                let extra = view.objects.iter().find(|(k, _)| !truth.contains_key(*k)).map(|(k, v)| (k.clone(), *v));
                let _ =
                    write!(why, "{} sees {} objects, the store holds {} (first difference: {wrong:?} {extra:?}); ", c.name(), view.objects.len(), truth.len());
            }
        }
        (!why.is_empty()).then_some(why)
    }
}
