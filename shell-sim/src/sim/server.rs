//! The simulated server: the core's request machines and watch caches, as the tokio shell runs
//! them, minus the sockets. Inputs: [`SimServer::request`], [`SimServer::store_reply`],
//! [`SimServer::store_watch`], [`SimServer::read`] and [`SimServer::hang_up`]; outputs are drained
//! with [`SimServer::poll`]; [`SimServer::poll_timeout`] is the next machine deadline, at which
//! [`SimServer::tick`] lets the machines act.
//!
//! [`SimServer::restart`] throws the server's memory away (caches, requests in flight, watch
//! connections, what it serves) and starts over from the store, as a crashed kube-apiserver does.
//!
//! What the authorizers read (the RBAC objects) is taken in likewise, each new state of their
//! caches making a new snapshot for the requests that start from then on; a request is
//! answered with the revisions of the caches its snapshot was made from ([`Policy`]).
//!
//! CustomResourceDefinitions are taken in as kapi's catalog task takes them in: each new state
//! of the CRD cache may change the catalog, which serves the requests that start from then on;
//! a changed catalog gets caches for its new resources, and the caches of resources it no
//! longer serves (or serves changed) are retired: new requests no longer reach them, and they
//! stop, closing their watches, once every request that started before is done (or a minute has
//! passed).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use jiff::SignedDuration;
use jiff::Timestamp;
use kapi_core::apiextensions::same_objects;
use kapi_core::authz::Source;
use kapi_core::cache::{CacheEffect, CacheEvent, Objects, ReadId, WatchCache, WatcherId};
use kapi_core::catalog::Catalog;
use kapi_core::catalog::Resource;
use kapi_core::kv::Revision;
use kapi_core::kv::{KvRequest, KvResult, WatchRequest, WatchResponse};
use kapi_core::pipeline::{Effect, Event, Head, Health, ProbeOutcome, Request, RequestMachine, Served, Server};
use kapi_core::status::ApiError;

use super::{ReqId, StreamId, Target, Ticket};
use crate::{Setup, SlotKey, slot_key, watch_caches};

#[derive(Debug)]
pub enum ServerOut {
    /// A request asks admission webhooks; their answers go to [`SimServer::called`].
    Calls {
        id: ReqId,
        calls: Vec<kapi_core::webhook::WebhookCall>,
    },
    Kv {
        ticket: Ticket,
        req: KvRequest,
    },
    Watch {
        stream: StreamId,
        req: WatchRequest,
    },
    Progress {
        stream: StreamId,
    },
    CancelWatch {
        stream: StreamId,
    },
    /// A whole response, and the catalogs and policy the request met.
    Response {
        id: ReqId,
        head: Head,
        body: Bytes,
        catalogs: Catalogs,
        policy: Policy,
    },
    /// A watch response's head; its frames follow.
    WatchOpened {
        id: ReqId,
        head: Head,
        catalogs: Catalogs,
        policy: Policy,
    },
    Frame {
        id: ReqId,
        frame: Bytes,
    },
    WatchClosed {
        id: ReqId,
    },
    /// The connection broke before the response (a restart).
    Disconnected {
        id: ReqId,
    },
}

struct InFlight {
    machine: RequestMachine,
    head: Option<Head>,
    body: Vec<u8>,
    slow: bool,
    /// The catalog the request started with.
    catalog: Option<Revision>,
    /// The cache it waits for a read from.
    reading: Option<usize>,
    /// The policy its authorizers' snapshot was made from.
    policy: Policy,
}

/// The revisions of the Role, ClusterRole, RoleBinding and ClusterRoleBinding caches (in
/// `authz::rbac::Kind::ALL`'s order) an authorizers' snapshot was made from; 0 for a kind not
/// taken in since the server started.
pub type Policy = [Revision; 4];

/// The catalogs a request met: the one it started with and the one served when it was
/// answered, each by the revision of the CRD cache it was made from (`None`: the CRDs were not
/// taken in yet, as after a restart).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Catalogs {
    pub start: Option<Revision>,
    pub end: Option<Revision>,
}

/// The caches a catalog change no longer serves, until the requests that started before it
/// are done.
struct Retired {
    slots: Vec<usize>,
    /// The catalog it was retired from: held by those requests (through whichever state
    /// served them: a new snapshot of the authorizers' objects shares the catalog).
    catalog: Arc<Catalog>,
    at: Timestamp,
}

/// How long a retired cache waits for the requests that may still use it (kube-apiserver waits
/// twice its request timeout before it tears a CRD's storage down).
const DRAIN_LIMIT: SignedDuration = SignedDuration::from_secs(60);

/// Where the CRDs are cached.
const CRDS: (&str, &str, &str) = ("apiextensions.k8s.io", "v1", "customresourcedefinitions");

/// A watch connection: chunks of frames wait here until the client reads them. Like the
/// tokio shell's channel, it holds a bounded number of chunks; a start batch is one chunk.
struct Conn {
    slot: usize,
    slow: bool,
    queue: VecDeque<VecDeque<Bytes>>,
    closed: bool,
}

pub struct SimServer {
    server: Arc<Server>,
    served: Arc<Served>,
    /// The catalog of built-in resources, which CRDs add to.
    builtins: Catalog,
    /// What a restart starts from: the built-in catalog, the CRDs not taken in.
    initial: Arc<Served>,
    /// The revision of the CRD cache the catalog was made from.
    crds_seen: Revision,
    epoch: u64,
    /// Every running cache by its slot (slots are never reused within an incarnation).
    caches: BTreeMap<usize, WatchCache>,
    next_slot: usize,
    /// The cache each served resource's requests reach.
    slots: BTreeMap<SlotKey, usize>,
    retired: Vec<Retired>,
    /// What the last CRD change replaced, and whether it serves the next request (a planted
    /// bug).
    stale: Option<(Arc<Served>, Option<Revision>)>,
    pub stale_catalog: bool,
    /// What the authorizers read, each collection's objects as last taken in, and the policy
    /// they make.
    authz_seen: BTreeMap<SlotKey, Objects>,
    /// What admission is configured by (webhook configurations, policies, bindings) as last
    /// taken in.
    admission_seen: [Option<Objects>; kapi_core::admission::SOURCES.len()],
    policy: Policy,
    /// The last change of the RBAC objects (their kind's objects after and before it, and its
    /// revision before it), which serves every second request undone (a planted bug).
    stale_authz: Option<(Source, Objects, Objects, (usize, Revision))>,
    pub stale_policy: bool,
    /// A deletion of an RBAC object is never taken in, though its revision is (a planted bug).
    pub kept_rbac_deletes: bool,
    requests: BTreeMap<ReqId, InFlight>,
    conns: BTreeMap<ReqId, Conn>,
    dirty_caches: BTreeSet<usize>,
    dirty_requests: BTreeSet<ReqId>,
    out: VecDeque<ServerOut>,
    history: usize,
    buffer: usize,
}

impl SimServer {
    /// A server whose watch caches keep `history` events and whose watch connections buffer
    /// `buffer` frames before the watcher counts as slow.
    pub fn new(setup: Setup, history: usize, buffer: usize) -> SimServer {
        let mut s = SimServer {
            server: setup.server,
            builtins: Catalog::clone(&setup.served.catalog),
            initial: setup.served.clone(),
            // The world starts from a store bootstrapped without webhook configurations or
            // admission policies, so there are none to read yet; a restarted server reads
            // them again.
            served: kapi_core::admission::SOURCES.iter().fold(setup.served.clone(), |served, (source, _)| served.with_admission(*source, &[])),
            crds_seen: 0,
            epoch: 0,
            caches: BTreeMap::new(),
            next_slot: 0,
            slots: BTreeMap::new(),
            retired: Vec::new(),
            stale: None,
            stale_catalog: false,
            authz_seen: BTreeMap::new(),
            admission_seen: Default::default(),
            policy: Policy::default(),
            stale_authz: None,
            stale_policy: false,
            kept_rbac_deletes: false,
            requests: BTreeMap::new(),
            conns: BTreeMap::new(),
            dirty_caches: BTreeSet::new(),
            dirty_requests: BTreeSet::new(),
            out: VecDeque::new(),
            history,
            buffer,
        };
        s.start_caches();
        s
    }

    fn start_caches(&mut self) {
        self.caches.clear();
        self.slots.clear();
        self.retired.clear();
        for (key, cache) in watch_caches(&self.server, &self.served.catalog, self.history) {
            self.start_cache(key, cache);
        }
    }

    fn start_cache(&mut self, key: SlotKey, cache: WatchCache) {
        let slot = self.next_slot;
        self.next_slot += 1;
        self.slots.insert(key, slot);
        self.dirty_caches.insert(slot);
        self.caches.insert(slot, cache);
    }

    /// Every cache has listed its resource, and the CRDs are taken in.
    pub fn ready(&self) -> bool {
        self.served.crds_synced() && self.caches.values().all(WatchCache::is_ready)
    }

    /// Whether the catalog serves `resource` in `group`/`version`.
    pub fn serves(&self, group: &str, version: &str, resource: &str) -> bool {
        self.served.catalog.get(group, version, resource).is_some()
    }

    /// The catalog served now, by the revision of the CRD cache it was made from.
    fn catalog(&self) -> Option<Revision> {
        self.served.crds_synced().then_some(self.crds_seen)
    }

    /// Takes in what the CRD cache holds now, as kapi's catalog task does (see the module's
    /// documentation).
    fn take_in_crds(&mut self, now: Timestamp) {
        let key: SlotKey = (CRDS.0.into(), CRDS.1.into(), CRDS.2.into());
        let Some(crds) = self.slots.get(&key).and_then(|s| self.caches[s].published()).filter(|p| p.revision != self.crds_seen) else { return };
        self.crds_seen = crds.revision;
        let Some(next) = self.served.with_crds(&self.builtins, &crds) else { return };
        let wanted: BTreeMap<SlotKey, Arc<Resource>> = next.catalog.resources().filter(|r| r.info.stored()).map(|r| (slot_key(r), r.clone())).collect();
        let stale: Vec<(SlotKey, usize)> = self
            .slots
            .iter()
            .filter(|(k, s)| wanted.get(*k).is_none_or(|r| !same_objects(r, self.caches[s].resource())))
            .map(|(k, s)| (k.clone(), *s))
            .collect();
        let previous_catalog = self.catalog();
        let previous = std::mem::replace(&mut self.served, next);
        for (k, _) in &stale {
            self.slots.remove(k);
        }
        if !stale.is_empty() {
            self.retired.push(Retired { slots: stale.into_iter().map(|(_, slot)| slot).collect(), catalog: previous.catalog.clone(), at: now });
        }
        if self.stale_catalog {
            self.stale = Some((previous, previous_catalog));
        }
        for (k, res) in wanted {
            if !self.slots.contains_key(&k) {
                let prefix = Bytes::from(format!("{}/", self.server.storage_root(&res)));
                self.start_cache(k, WatchCache::new(res, prefix, self.history));
            }
        }
    }

    /// Takes in what the caches of the collections the authorizers read hold now, as kapi's
    /// catalog task does, noting the revisions of the RBAC ones.
    fn take_in_authz(&mut self) {
        for source in self.server.authorizer.load().sources() {
            let (group, version, resource) = source.resource();
            let key: SlotKey = (group.into(), version.into(), resource.into());
            let Some(now) = self.slots.get(&key).and_then(|s| self.caches[s].published()) else { continue };
            let kind = kapi_core::authz::rbac::Kind::ALL.iter().position(|k| matches!(source, Source::Rbac(s) if s == *k));
            let seen = self.authz_seen.entry(key).or_default();
            let before = kind.map(|k| (k, std::mem::replace(&mut self.policy[k], now.revision)));
            if seen.ptr_eq(&now.objects) || self.kept_rbac_deletes && kind.is_some() && now.objects.len() < seen.len() {
                continue;
            }
            self.served = self.served.with_authz(source, seen, &now.objects);
            if let Some(before) = before.filter(|_| self.stale_policy) {
                self.stale_authz = Some((source, now.objects.clone(), seen.clone(), before));
            }
            *seen = now.objects;
        }
    }

    /// Takes in what the caches of what admission is configured by hold now, as kapi's catalog
    /// task does.
    fn take_in_admission(&mut self) {
        for (i, (source, (group, version, resource))) in kapi_core::admission::SOURCES.into_iter().enumerate() {
            let key: SlotKey = (group.into(), version.into(), resource.into());
            let Some(now) = self.slots.get(&key).and_then(|s| self.caches[s].published()) else { continue };
            if !self.admission_seen[i].as_ref().is_some_and(|seen| seen.ptr_eq(&now.objects)) {
                let objects: Vec<serde_json::Value> = now.objects.values().map(|o| o.value()).collect();
                self.served = self.served.with_admission(source, &objects);
                self.admission_seen[i] = Some(now.objects);
            }
        }
    }

    /// Stops the retired caches no request can reach any more: their watches close, their
    /// store watches end, and a read still waiting (past the limit) is answered as a request
    /// arriving now would be.
    fn stop_retired(&mut self, now: Timestamp) {
        let (done, kept): (Vec<Retired>, Vec<Retired>) =
            std::mem::take(&mut self.retired).into_iter().partition(|r| Arc::strong_count(&r.catalog) == 1 || now >= r.at + DRAIN_LIMIT);
        self.retired = kept;
        for slot in done.into_iter().flat_map(|r| r.slots) {
            self.caches.remove(&slot);
            self.out.push_back(ServerOut::CancelWatch { stream: StreamId { epoch: self.epoch, slot } });
            let closed: Vec<ReqId> = self.conns.iter().filter(|(_, c)| c.slot == slot).map(|(id, _)| *id).collect();
            for id in closed {
                self.conns.remove(&id);
                self.out.push_back(ServerOut::WatchClosed { id });
            }
            for (id, req) in self.requests.iter_mut().filter(|(_, q)| q.reading == Some(slot)) {
                req.reading = None;
                req.machine.handle(now, Event::Cache(Err(ApiError::path_not_found())));
                self.dirty_requests.insert(*id);
            }
        }
    }

    pub fn in_flight(&self) -> usize {
        self.requests.len()
    }

    /// The deepest watch connection buffer.
    pub fn deepest_buffer(&self) -> usize {
        self.conns.values().map(|c| c.queue.len()).max().unwrap_or(0)
    }

    /// Throws away every cache, request and connection and what is served, and starts again
    /// from the store.
    pub fn restart(&mut self) {
        for id in std::mem::take(&mut self.requests).into_keys() {
            self.out.push_back(ServerOut::Disconnected { id });
        }
        for id in std::mem::take(&mut self.conns).into_keys() {
            self.out.push_back(ServerOut::WatchClosed { id });
        }
        for &slot in self.caches.keys() {
            self.out.push_back(ServerOut::CancelWatch { stream: StreamId { epoch: self.epoch, slot } });
        }
        self.dirty_requests.clear();
        self.dirty_caches.clear();
        self.epoch += 1;
        self.served = self.initial.clone();
        self.crds_seen = 0;
        self.stale = None;
        self.authz_seen.clear();
        self.admission_seen = Default::default();
        self.policy = Policy::default();
        self.stale_authz = None;
        self.start_caches();
    }

    /// A client sends a request; a `slow` client reads watch frames only when it calls [`read`](Self::read).
    pub fn request(&mut self, now: Timestamp, id: ReqId, req: Request, seed: u64, slow: bool) {
        let (served, catalog, policy) = match (&self.stale, &self.stale_authz) {
            (Some((served, catalog)), _) if self.stale_catalog && id.0.is_multiple_of(2) => (served.clone(), *catalog, self.policy),
            (_, Some((source, after, before, (k, revision)))) if id.0.is_multiple_of(2) => {
                let mut policy = self.policy;
                policy[*k] = *revision;
                (self.served.with_authz(*source, after, before), self.catalog(), policy)
            }
            _ => (self.served.clone(), self.catalog(), self.policy),
        };
        let machine = RequestMachine::new(self.server.clone(), served, req, now, seed);
        self.requests.insert(id, InFlight { machine, head: None, body: Vec::new(), slow, catalog, reading: None, policy });
        self.dirty_requests.insert(id);
        self.pump(now);
    }

    /// The admission webhooks a request asked answered (a request a restart threw away is
    /// gone).
    pub fn called(&mut self, now: Timestamp, id: ReqId, answers: Vec<Result<kapi_core::webhook::WebhookAnswer, String>>) {
        if let Some(r) = self.requests.get_mut(&id) {
            r.machine.handle(now, Event::CalledAll(answers));
            self.dirty_requests.insert(id);
            self.pump(now);
        }
    }

    /// Whether the admission policy `name` and a binding of it are read.
    pub fn admits_by_policy(&self, name: &str) -> bool {
        let has = |p: &kapi_core::admission::policies::Policies| p.hooks.iter().any(|h| h.policy.name == name);
        has(&self.served.policies) && has(&self.served.mutating_policies)
    }

    /// Whether the admission webhooks' configurations are read and name webhooks of both kinds.
    pub fn admits_by_webhooks(&self) -> bool {
        let hooks = &self.served.webhooks;
        !hooks.mutating.is_empty() && !hooks.validating.is_empty()
    }

    pub fn store_reply(&mut self, now: Timestamp, ticket: Ticket, result: KvResult) {
        if ticket.epoch != self.epoch {
            return;
        }
        match ticket.to {
            Target::Request(id) => {
                if let Some(r) = self.requests.get_mut(&id) {
                    r.machine.handle(now, Event::Kv(result));
                    self.dirty_requests.insert(id);
                }
            }
            Target::Cache(slot) => {
                if let Some(cache) = self.caches.get_mut(&slot) {
                    cache.handle(now, CacheEvent::Kv(result));
                    self.dirty_caches.insert(slot);
                }
            }
        }
        self.pump(now);
    }

    /// A store watch stream delivers (`Some`) or breaks (`None`).
    pub fn store_watch(&mut self, now: Timestamp, stream: StreamId, resp: Option<WatchResponse>) {
        if stream.epoch != self.epoch {
            return;
        }
        let Some(cache) = self.caches.get_mut(&stream.slot) else { return };
        cache.handle(now, resp.map_or(CacheEvent::WatchFailed, CacheEvent::Watch));
        self.dirty_caches.insert(stream.slot);
        self.pump(now);
    }

    /// A slow client reads up to `max` frames of its watch; returns them and whether the
    /// stream has ended.
    pub fn read(&mut self, now: Timestamp, id: ReqId, max: usize) -> (Vec<Bytes>, bool) {
        let Some(c) = self.conns.get_mut(&id) else { return (Vec::new(), true) };
        let mut frames = Vec::new();
        while frames.len() < max
            && let Some(chunk) = c.queue.front_mut()
        {
            match chunk.pop_front() {
                Some(f) => frames.push(f),
                None => {
                    c.queue.pop_front();
                }
            }
        }
        while c.queue.front().is_some_and(VecDeque::is_empty) {
            c.queue.pop_front();
        }
        let ended = c.closed && c.queue.is_empty();
        if ended {
            self.conns.remove(&id);
        }
        self.pump(now);
        (frames, ended)
    }

    /// The client closes its watch connection.
    pub fn hang_up(&mut self, now: Timestamp, id: ReqId) {
        if let Some(c) = self.conns.remove(&id)
            && let Some(cache) = self.caches.get_mut(&c.slot)
        {
            cache.handle(now, CacheEvent::Unregister { id: WatcherId(id.0) });
            self.dirty_caches.insert(c.slot);
            self.pump(now);
        }
    }

    pub fn poll_timeout(&self) -> Option<Timestamp> {
        let caches = self.caches.values().filter_map(WatchCache::poll_timeout);
        let requests = self.requests.values().filter_map(|r| r.machine.poll_timeout());
        let retired = self.retired.iter().map(|r| r.at + DRAIN_LIMIT);
        caches.chain(requests).chain(retired).min()
    }

    /// Lets every machine whose deadline has come act.
    pub fn tick(&mut self, now: Timestamp) {
        for (i, c) in &self.caches {
            if c.poll_timeout().is_some_and(|t| t <= now) {
                self.dirty_caches.insert(*i);
            }
        }
        for (id, r) in &self.requests {
            if r.machine.poll_timeout().is_some_and(|t| t <= now) {
                self.dirty_requests.insert(*id);
            }
        }
        self.pump(now);
    }

    pub fn poll(&mut self) -> Option<ServerOut> {
        self.out.pop_front()
    }

    /// Drains the machines that have work until none has; then takes in the CRDs, and stops
    /// the retired caches nothing reaches.
    fn pump(&mut self, now: Timestamp) {
        loop {
            if let Some(slot) = self.dirty_caches.pop_first() {
                while let Some(e) = self.caches.get_mut(&slot).and_then(|c| c.poll(now)) {
                    self.cache_effect(now, slot, e);
                }
            } else if let Some(id) = self.dirty_requests.pop_first() {
                self.drive(now, id);
            } else {
                let before = (Arc::as_ptr(&self.served), self.retired.len());
                self.take_in_crds(now);
                self.take_in_authz();
                self.take_in_admission();
                self.stop_retired(now);
                if before == (Arc::as_ptr(&self.served), self.retired.len()) && self.dirty_caches.is_empty() && self.dirty_requests.is_empty() {
                    return;
                }
            }
        }
    }

    fn cache_effect(&mut self, now: Timestamp, slot: usize, e: CacheEffect) {
        let stream = StreamId { epoch: self.epoch, slot };
        match e {
            CacheEffect::Kv(req) => self.out.push_back(ServerOut::Kv { ticket: Ticket { epoch: self.epoch, to: Target::Cache(slot) }, req }),
            CacheEffect::StartWatch(req) => self.out.push_back(ServerOut::Watch { stream, req }),
            CacheEffect::RequestProgress => self.out.push_back(ServerOut::Progress { stream }),
            CacheEffect::Deliver { ids, frame } => {
                for id in ids {
                    self.deliver(now, slot, id, VecDeque::from([frame.clone()]));
                }
            }
            CacheEffect::Backlog { id, frames } => self.deliver(now, slot, id, frames.collect()),
            CacheEffect::Close { id } => {
                let rid = ReqId(id.0);
                if let Some(c) = self.conns.get_mut(&rid) {
                    c.closed = true;
                    if !c.slow {
                        self.conns.remove(&rid);
                        self.out.push_back(ServerOut::WatchClosed { id: rid });
                    }
                }
            }
            // No webhook can be reached: the cache asks again later.
            CacheEffect::Convert(c) => {
                if let Some(cache) = self.caches.get_mut(&slot) {
                    cache.handle(now, CacheEvent::Called { uid: c.uid, answer: Err("dial tcp: connect: connection refused".into()) });
                    self.dirty_caches.insert(slot);
                }
            }
            CacheEffect::ReadDone { id, result } => {
                let rid = ReqId(id.0);
                if let Some(r) = self.requests.get_mut(&rid) {
                    r.reading = None;
                    r.machine.handle(now, Event::Cache(result));
                    self.dirty_requests.insert(rid);
                }
            }
        }
    }

    /// Hands a chunk to a watch connection: at once to a fast reader, into the bounded buffer
    /// of a slow one, whose watcher is slow when the buffer is full.
    fn deliver(&mut self, now: Timestamp, slot: usize, id: WatcherId, chunk: VecDeque<Bytes>) {
        let rid = ReqId(id.0);
        let Some(c) = self.conns.get_mut(&rid) else { return };
        if !c.slow {
            self.out.extend(chunk.into_iter().map(|frame| ServerOut::Frame { id: rid, frame }));
        } else if c.queue.len() < self.buffer {
            c.queue.push_back(chunk);
        } else if let Some(cache) = self.caches.get_mut(&slot) {
            cache.handle(now, CacheEvent::Slow { id });
        }
    }

    /// Runs a request machine until it waits or finishes.
    fn drive(&mut self, now: Timestamp, id: ReqId) {
        let Some(r) = self.requests.get_mut(&id) else { return };
        while let Some(e) = r.machine.poll(now) {
            match e {
                Effect::Kv(req) => self.out.push_back(ServerOut::Kv { ticket: Ticket { epoch: self.epoch, to: Target::Request(id) }, req }),
                // A resource no longer served (its CRD went while the request was under way)
                // is answered as a request arriving now is: the path is not found.
                Effect::Cache { resource, request } => match self.slots.get(&slot_key(&resource)) {
                    Some(&slot) => {
                        r.reading = Some(slot);
                        self.caches.get_mut(&slot).expect("a slot's cache runs").handle(now, CacheEvent::Read { id: ReadId(id.0), request });
                        self.dirty_caches.insert(slot);
                    }
                    None => r.machine.handle(now, Event::Cache(Err(ApiError::path_not_found()))),
                },
                Effect::Watch { resource, params, head } => {
                    let catalogs = Catalogs { start: r.catalog, end: self.served.crds_synced().then_some(self.crds_seen) };
                    let (slow, policy) = (r.slow, r.policy);
                    self.requests.remove(&id);
                    let Some(&slot) = self.slots.get(&slot_key(&resource)) else {
                        let e = ApiError::path_not_found();
                        let body = Bytes::from(serde_json::to_vec(&e.to_status()).expect("JSON trees serialize"));
                        self.out.push_back(ServerOut::Response { id, head: Head::new(e.code, "application/json"), body, catalogs, policy });
                        return;
                    };
                    self.conns.insert(id, Conn { slot, slow, queue: VecDeque::new(), closed: false });
                    self.out.push_back(ServerOut::WatchOpened { id, head, catalogs, policy });
                    self.caches.get_mut(&slot).expect("a slot's cache runs").handle(now, CacheEvent::Register { id: WatcherId(id.0), params });
                    self.dirty_caches.insert(slot);
                    return;
                }
                // The simulated server is always healthy: its faults are the store's.
                Effect::Health => r.machine.handle(now, Event::Health(Health::default())),
                Effect::Probe(probes) => r.machine.handle(now, Event::Probed(probes.iter().map(|_| ProbeOutcome::Refused).collect())),
                // Nor does it run extension servers: none can be reached.
                Effect::Proxy(_) => r.machine.handle(now, Event::Proxied(Err("dial tcp: connect: connection refused".into()))),
                // Nor conversion webhooks.
                Effect::Call(_) => r.machine.handle(now, Event::Called(Err("dial tcp: connect: connection refused".into()))),
                // Admission webhooks are the world's to answer, in time.
                Effect::Calls(calls) => self.out.push_back(ServerOut::Calls { id, calls }),
                // The server's own writes follow only legacy service account tokens, which
                // the swarm's clients never present.
                Effect::Loopback(_) => {}
                // The swarm's server audits nothing (it is given no policy).
                Effect::Audit(_) => {}
                Effect::Respond(h) => r.head = Some(h),
                Effect::Body(b) => r.body.extend_from_slice(&b),
                // (No extension server answers, so nothing is relayed.)
                Effect::End | Effect::Relay => {
                    let catalogs = Catalogs { start: r.catalog, end: self.served.crds_synced().then_some(self.crds_seen) };
                    let r = self.requests.remove(&id).expect("driven above");
                    let head = r.head.unwrap_or_else(|| Head::new(500, "application/json"));
                    self.out.push_back(ServerOut::Response { id, head, body: Bytes::from(r.body), catalogs, policy: r.policy });
                    return;
                }
            }
        }
    }
}
