//! The simulated server: the core's request machines and watch caches, as the tokio shell runs
//! them, minus the sockets. Inputs: [`SimServer::request`], [`SimServer::store_reply`],
//! [`SimServer::store_watch`], [`SimServer::read`] and [`SimServer::hang_up`]; outputs are drained
//! with [`SimServer::poll`]; [`SimServer::poll_timeout`] is the next machine deadline, at which
//! [`SimServer::tick`] lets the machines act.
//!
//! [`SimServer::restart`] throws the server's memory away (caches, requests in flight, watch
//! connections) and starts over from the store, as a crashed kube-apiserver does.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use jiff::Timestamp;
use kapi_core::cache::{CacheEffect, CacheEvent, ReadId, WatchCache, WatcherId};
use kapi_core::catalog::Catalog;
use kapi_core::kv::{KvRequest, KvResult, WatchRequest, WatchResponse};
use kapi_core::pipeline::{Effect, Event, Head, Health, ProbeOutcome, Request, RequestMachine, Served, Server};

use super::{ReqId, StreamId, Target, Ticket};
use crate::{Setup, SlotKey, slot_key, watch_caches};

#[derive(Debug)]
pub enum ServerOut {
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
    /// A whole response.
    Response {
        id: ReqId,
        head: Head,
        body: Bytes,
    },
    /// A watch response's head; its frames follow.
    WatchOpened {
        id: ReqId,
        head: Head,
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
}

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
    epoch: u64,
    caches: Vec<WatchCache>,
    slots: BTreeMap<SlotKey, usize>,
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
            builtins: setup.served.catalog.clone(),
            served: setup.served,
            epoch: 0,
            caches: Vec::new(),
            slots: BTreeMap::new(),
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
        for (key, cache) in watch_caches(&self.server, &self.served.catalog, self.history) {
            self.slots.insert(key, self.caches.len());
            self.dirty_caches.insert(self.caches.len());
            self.caches.push(cache);
        }
    }

    /// Every cache has listed its resource.
    pub fn ready(&self) -> bool {
        self.caches.iter().all(WatchCache::is_ready)
    }

    pub fn in_flight(&self) -> usize {
        self.requests.len()
    }

    /// The deepest watch connection buffer.
    pub fn deepest_buffer(&self) -> usize {
        self.conns.values().map(|c| c.queue.len()).max().unwrap_or(0)
    }

    /// Throws away every cache, request and connection and starts again from the store.
    /// Serves the built-in resources and those of `crds` (stored CRDs) from now on: the caches
    /// start again from the store, with those of the new resources.
    pub fn serve_crds(&mut self, crds: &[serde_json::Value]) {
        let catalog = kapi_core::apiextensions::catalog_with(&self.builtins, &self.served.catalog, crds);
        self.served = Served::new(catalog);
        self.restart();
    }

    pub fn restart(&mut self) {
        for id in std::mem::take(&mut self.requests).into_keys() {
            self.out.push_back(ServerOut::Disconnected { id });
        }
        for id in std::mem::take(&mut self.conns).into_keys() {
            self.out.push_back(ServerOut::WatchClosed { id });
        }
        for slot in 0..self.caches.len() {
            self.out.push_back(ServerOut::CancelWatch { stream: StreamId { epoch: self.epoch, slot } });
        }
        self.dirty_requests.clear();
        self.dirty_caches.clear();
        self.epoch += 1;
        self.start_caches();
    }

    /// A client sends a request; a `slow` client reads watch frames only when it calls [`read`](Self::read).
    pub fn request(&mut self, now: Timestamp, id: ReqId, req: Request, seed: u64, slow: bool) {
        let machine = RequestMachine::new(self.server.clone(), self.served.clone(), req, now, seed);
        self.requests.insert(id, InFlight { machine, head: None, body: Vec::new(), slow });
        self.dirty_requests.insert(id);
        self.pump(now);
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
                self.caches[slot].handle(now, CacheEvent::Kv(result));
                self.dirty_caches.insert(slot);
            }
        }
        self.pump(now);
    }

    /// A store watch stream delivers (`Some`) or breaks (`None`).
    pub fn store_watch(&mut self, now: Timestamp, stream: StreamId, resp: Option<WatchResponse>) {
        if stream.epoch != self.epoch {
            return;
        }
        let event = resp.map_or(CacheEvent::WatchFailed, CacheEvent::Watch);
        self.caches[stream.slot].handle(now, event);
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
        if let Some(c) = self.conns.remove(&id) {
            self.caches[c.slot].handle(now, CacheEvent::Unregister { id: WatcherId(id.0) });
            self.dirty_caches.insert(c.slot);
            self.pump(now);
        }
    }

    pub fn poll_timeout(&self) -> Option<Timestamp> {
        let caches = self.caches.iter().filter_map(WatchCache::poll_timeout);
        let requests = self.requests.values().filter_map(|r| r.machine.poll_timeout());
        caches.chain(requests).min()
    }

    /// Lets every machine whose deadline has come act.
    pub fn tick(&mut self, now: Timestamp) {
        for (i, c) in self.caches.iter().enumerate() {
            if c.poll_timeout().is_some_and(|t| t <= now) {
                self.dirty_caches.insert(i);
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

    /// Drains the machines that have work until none has.
    fn pump(&mut self, now: Timestamp) {
        loop {
            if let Some(slot) = self.dirty_caches.pop_first() {
                while let Some(e) = self.caches[slot].poll(now) {
                    self.cache_effect(now, slot, e);
                }
            } else if let Some(id) = self.dirty_requests.pop_first() {
                self.drive(now, id);
            } else {
                return;
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
                self.caches[slot].handle(now, CacheEvent::Called { uid: c.uid, answer: Err("dial tcp: connect: connection refused".into()) });
                self.dirty_caches.insert(slot);
            }
            CacheEffect::ReadDone { id, result } => {
                let rid = ReqId(id.0);
                if let Some(r) = self.requests.get_mut(&rid) {
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
        } else {
            self.caches[slot].handle(now, CacheEvent::Slow { id });
        }
    }

    /// Runs a request machine until it waits or finishes.
    fn drive(&mut self, now: Timestamp, id: ReqId) {
        let Some(r) = self.requests.get_mut(&id) else { return };
        while let Some(e) = r.machine.poll(now) {
            match e {
                Effect::Kv(req) => self.out.push_back(ServerOut::Kv { ticket: Ticket { epoch: self.epoch, to: Target::Request(id) }, req }),
                Effect::Cache { resource, request } => {
                    let slot = self.slots[&slot_key(&resource)];
                    self.caches[slot].handle(now, CacheEvent::Read { id: ReadId(id.0), request });
                    self.dirty_caches.insert(slot);
                }
                Effect::Watch { resource, params, head } => {
                    let slot = self.slots[&slot_key(&resource)];
                    let slow = r.slow;
                    self.requests.remove(&id);
                    self.conns.insert(id, Conn { slot, slow, queue: VecDeque::new(), closed: false });
                    self.out.push_back(ServerOut::WatchOpened { id, head });
                    self.caches[slot].handle(now, CacheEvent::Register { id: WatcherId(id.0), params });
                    self.dirty_caches.insert(slot);
                    return;
                }
                // The simulated server is always healthy: its faults are the store's.
                Effect::Health => r.machine.handle(now, Event::Health(Health::default())),
                Effect::Probe(probes) => r.machine.handle(now, Event::Probed(probes.iter().map(|_| ProbeOutcome::Refused).collect())),
                // Nor does it run extension servers: none can be reached.
                Effect::Proxy(_) => r.machine.handle(now, Event::Proxied(Err("dial tcp: connect: connection refused".into()))),
                // Nor webhooks.
                Effect::Call(_) => r.machine.handle(now, Event::Called(Err("dial tcp: connect: connection refused".into()))),
                Effect::Respond(h) => r.head = Some(h),
                Effect::Body(b) => r.body.extend_from_slice(&b),
                // (No extension server answers, so nothing is relayed.)
                Effect::End | Effect::Relay => {
                    let r = self.requests.remove(&id).expect("driven above");
                    let head = r.head.unwrap_or_else(|| Head::new(500, "application/json"));
                    self.out.push_back(ServerOut::Response { id, head, body: Bytes::from(r.body) });
                    return;
                }
            }
        }
    }
}
