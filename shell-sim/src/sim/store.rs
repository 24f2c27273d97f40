//! The simulated store: `kv::Model` behind a fault layer. It is a machine like the core's:
//! [`Store::submit`], [`Store::watch`], [`Store::progress`] and [`Store::cancel`] feed it;
//! [`Store::poll`] drains what is due at `now`; [`Store::poll_timeout`] says when next.
//!
//! Each operation is served after a random latency, in any order; a write may fail before it
//! commits, or time out before or after committing (an ambiguous result). Watch streams carry
//! the events of each commit in order, with latency, and may break; a store outage breaks every
//! stream and fails every operation until it ends. Every commit is recorded in the [`Oracle`].

use std::collections::{BTreeMap, VecDeque};

use jiff::{SignedDuration, Timestamp};
use kapi_core::kv::{KvError, KvRequest, KvResult, Model, WatchRequest, WatchResponse};

use super::oracle::Oracle;
use super::rng::SimRng;
use super::swarm::Swarm;
use super::{StreamId, Ticket};

/// Bugs a test plants in the world to show the checkers catch them; never set in a real run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Planted {
    /// Acknowledge one write of a configmap (the first after this revision) without keeping it.
    pub drop_acked_write_after: Option<i64>,
    /// Never deliver one configmap event (the first after this revision) to the watch caches.
    pub skip_watch_event_after: Option<i64>,
    /// The server serves every second request with the catalog its last CRD change replaced.
    pub stale_catalog: bool,
    /// The controllers' cleanup of a deleted CRD's resources finds none left to delete.
    pub blind_cleanup: bool,
    /// The server serves every second request with the authorizers' snapshot its last change
    /// of the RBAC objects replaced.
    pub stale_policy: bool,
    /// The server never takes in a deletion of an RBAC object, though it takes in the revision.
    pub kept_rbac_deletes: bool,
    /// The store ignores what a transaction compares of ResourceQuotas (a quota charged on a
    /// stale read still lands).
    pub unguarded_quotas: bool,
    /// A call to an admission webhook that fails is answered as if the webhook allowed the
    /// write (a shell that fails open).
    pub open_webhooks: bool,
}

pub enum StoreOut {
    Reply {
        ticket: Ticket,
        result: KvResult,
    },
    Watch {
        stream: StreamId,
        resp: WatchResponse,
    },
    /// The stream ended without a cancellation: the watcher must start a new one.
    Broken {
        stream: StreamId,
    },
}

enum Item {
    Resp(WatchResponse),
    Broken,
}

struct Stream {
    req: WatchRequest,
    queue: VecDeque<(Timestamp, Item)>,
}

/// How long a refused watch takes to report failure (a client's dial timeout), so a watcher
/// that retries during an outage does not spin.
const REFUSED_WATCH: SignedDuration = SignedDuration::from_millis(100);

pub struct Store {
    pub model: Model,
    pub oracle: Oracle,
    pub planted: Planted,
    faults: Swarm,
    rng: SimRng,
    /// Operations in flight, by the time they are served.
    ops: BTreeMap<(Timestamp, u64), (Ticket, KvRequest)>,
    streams: BTreeMap<StreamId, Stream>,
    down_until: Option<Timestamp>,
    seq: u64,
}

impl Store {
    pub fn new(faults: Swarm, seed: u64) -> Store {
        Store {
            model: Model::new(),
            oracle: Oracle::default(),
            planted: Planted::default(),
            faults,
            rng: SimRng::new(seed),
            ops: BTreeMap::new(),
            streams: BTreeMap::new(),
            down_until: None,
            seq: 0,
        }
    }

    /// Serves `req` at once and without faults (for setting the world up).
    pub fn apply_now(&mut self, now: Timestamp, req: &KvRequest) -> KvResult {
        let (result, events) = self.model.apply(now, req);
        self.commit(now, events);
        result
    }

    pub fn set_faults(&mut self, faults: Swarm) {
        self.faults = faults;
    }

    pub fn pending(&self) -> usize {
        self.ops.len() + self.streams.values().map(|s| s.queue.len()).sum::<usize>()
    }

    pub fn is_down(&self, now: Timestamp) -> bool {
        self.down_until.is_some_and(|t| now < t)
    }

    fn latency(&mut self) -> SignedDuration {
        let mean = self.faults.store_latency.as_micros() as u64;
        let tail = if self.rng.chance(0.01) { 20 } else { 1 };
        SignedDuration::from_micros((self.rng.below(4 * mean + 1) * tail) as i64)
    }

    pub fn submit(&mut self, now: Timestamp, ticket: Ticket, req: KvRequest) {
        self.seq += 1;
        let at = now + self.latency();
        self.ops.insert((at, self.seq), (ticket, req));
    }

    /// Starts (or restarts) a watch stream.
    pub fn watch(&mut self, now: Timestamp, stream: StreamId, req: WatchRequest) {
        let at = now + self.latency();
        let first = if self.is_down(now) {
            (now + REFUSED_WATCH, Item::Broken)
        } else {
            match self.model.backlog(&req) {
                Ok(events) if events.is_empty() => {
                    self.streams.insert(stream, Stream { req, queue: VecDeque::new() });
                    return;
                }
                Ok(events) => (at, Item::Resp(WatchResponse::Events { header_revision: self.model.revision(), events })),
                Err(compact_revision) => (at, Item::Resp(WatchResponse::Canceled { compact_revision })),
            }
        };
        self.streams.insert(stream, Stream { req, queue: VecDeque::from([first]) });
    }

    /// Asks for a progress notification on `stream`: it follows every event already sent.
    pub fn progress(&mut self, now: Timestamp, stream: StreamId) {
        let revision = self.model.revision();
        let at = now + self.latency();
        if let Some(s) = self.streams.get_mut(&stream) {
            let at = s.queue.back().map_or(at, |(t, _)| at.max(*t));
            s.queue.push_back((at, Item::Resp(WatchResponse::Progress { revision })));
        }
    }

    pub fn cancel(&mut self, stream: StreamId) {
        self.streams.remove(&stream);
    }

    /// The store goes away until `until`: every stream breaks.
    pub fn outage(&mut self, now: Timestamp, until: Timestamp) {
        self.down_until = Some(until);
        for s in self.streams.values_mut() {
            s.queue.clear();
            s.queue.push_back((now, Item::Broken));
        }
    }

    /// Compacts all but the newest `keep` revisions.
    pub fn compact(&mut self, now: Timestamp, keep: i64) {
        let revision = self.model.revision() - keep;
        if revision > self.model.compact_revision() && !self.is_down(now) {
            let _ = self.model.apply(now, &KvRequest::Compact { revision });
        }
    }

    pub fn poll_timeout(&self) -> Option<Timestamp> {
        let op = self.ops.keys().next().map(|(t, _)| *t);
        let streams = self.streams.values().filter_map(|s| s.queue.front().map(|(t, _)| *t));
        op.into_iter().chain(streams).min()
    }

    pub fn poll(&mut self, now: Timestamp) -> Option<StoreOut> {
        if let Some(entry) = self.ops.first_entry().filter(|e| e.key().0 <= now) {
            let (ticket, req) = entry.remove();
            let result = self.serve(now, &req);
            return Some(StoreOut::Reply { ticket, result });
        }
        let due = self.streams.iter().filter(|(_, s)| s.queue.front().is_some_and(|(t, _)| *t <= now)).map(|(id, _)| *id).next()?;
        let s = self.streams.get_mut(&due).expect("found above");
        let (_, item) = s.queue.pop_front().expect("found above");
        match item {
            Item::Resp(resp) if !(matches!(resp, WatchResponse::Events { .. }) && self.rng.chance(self.faults.watch_drops)) => {
                if matches!(resp, WatchResponse::Canceled { .. }) {
                    self.streams.remove(&due);
                }
                Some(StoreOut::Watch { stream: due, resp })
            }
            _ => {
                self.streams.remove(&due);
                Some(StoreOut::Broken { stream: due })
            }
        }
    }

    /// Serves one operation, with the faults of this run.
    fn serve(&mut self, now: Timestamp, req: &KvRequest) -> KvResult {
        if self.is_down(now) {
            return Err(KvError::Unavailable("etcdserver: no leader (simulated outage)".into()));
        }
        if self.rng.chance(self.faults.store_errors) {
            return Err(KvError::Unavailable("etcdserver: request failed (simulated)".into()));
        }
        let write = matches!(req, KvRequest::Txn(_));
        if write && self.rng.chance(self.faults.ambiguous_failures) {
            return Err(KvError::Timeout("etcdserver: request timed out (simulated, not committed)".into()));
        }
        if write && self.planted.drop_acked_write_after.is_some_and(|r| self.model.revision() > r) {
            let mut scratch = self.model.clone();
            let (result, events) = scratch.apply(now, req);
            if events.iter().any(|e| e.kv.key.starts_with(b"/registry/configmaps/")) {
                self.planted.drop_acked_write_after = None;
                return result;
            }
        }
        let unguarded = match req {
            KvRequest::Txn(t) if self.planted.unguarded_quotas => {
                let mut t = t.clone();
                t.compare.retain(|c| !c.key.starts_with(b"/registry/resourcequotas/"));
                Some(KvRequest::Txn(t))
            }
            _ => None,
        };
        let (result, events) = self.model.apply(now, unguarded.as_ref().unwrap_or(req));
        let committed = !events.is_empty();
        self.commit(now, events);
        if committed && self.rng.chance(self.faults.ambiguous_commits) {
            return Err(KvError::Timeout("etcdserver: request timed out (simulated, committed)".into()));
        }
        result
    }

    /// Records a commit's events and queues them on every stream that watches their keys.
    fn commit(&mut self, now: Timestamp, mut events: Vec<kapi_core::kv::Event>) {
        if events.is_empty() {
            return;
        }
        let header_revision = self.model.revision();
        self.oracle.record(&events, header_revision);
        if let Some(after) = self.planted.skip_watch_event_after
            && header_revision > after
            && let Some(i) = events.iter().position(|e| e.kv.key.starts_with(b"/registry/configmaps/"))
        {
            events.remove(i);
            self.planted.skip_watch_event_after = None;
        }
        for s in self.streams.values_mut() {
            let mine: Vec<_> = events.iter().filter(|e| s.req.contains(&e.kv.key)).cloned().collect();
            if mine.is_empty() {
                continue;
            }
            let at = now + SignedDuration::from_micros((self.rng.below(2 * self.faults.store_latency.as_micros() as u64 + 1)) as i64);
            let at = s.queue.back().map_or(at, |(t, _)| at.max(*t));
            s.queue.push_back((at, Item::Resp(WatchResponse::Events { header_revision, events: mine })));
        }
    }
}
