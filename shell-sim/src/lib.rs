//! kapi-sim: the core's machines (request pipeline, registry, watch caches, storage protocol)
//! driven in one thread against `kv::Model`, with time passed in.
//!
//! [`World`] is the deterministic shell: it runs requests to completion, fans store events out
//! to the watch caches, and collects watch streams. The simulator binary and the core's
//! integration tests are built on it.

pub mod fuzzing;

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use jiff::{SignedDuration, Timestamp};
use kapi_core::bootstrap::{Bootstrap, BootstrapEffect};
use kapi_core::cache::{CacheEffect, CacheEvent, ReadId, ReadResult, WatchCache, WatcherId, DEFAULT_HISTORY};
use kapi_core::catalog::Resource;
use kapi_core::kv::{KvRequest, KvResult, Model, WatchRequest, WatchResponse};
use kapi_core::pipeline::{Effect, Event, Head, Health, Request, RequestMachine, Server};
use kapi_core::status::ApiError;

/// A resource's watch cache and the store watch feeding it.
struct Slot {
    cache: WatchCache,
    watch: Option<WatchRequest>,
}

/// A watch stream as a client sees it.
#[derive(Debug, Default)]
pub struct Stream {
    pub frames: Vec<Bytes>,
    pub closed: bool,
}

/// A response, read whole.
#[derive(Debug)]
pub struct Response {
    pub head: Head,
    pub body: Bytes,
    /// Set for watches: the stream to read with [`World::frames`].
    pub watch: Option<WatcherId>,
}

impl Response {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

pub struct World {
    pub now: Timestamp,
    pub model: Model,
    pub server: Arc<Server>,
    slots: BTreeMap<(String, String, String), Slot>,
    streams: BTreeMap<WatcherId, Stream>,
    reads: BTreeMap<ReadId, Result<ReadResult, ApiError>>,
    next_id: u64,
    seed: u64,
}

fn slot_key(res: &Resource) -> (String, String, String) {
    (res.info.group.to_string(), res.info.version.to_string(), res.info.resource.to_string())
}

impl World {
    /// A world with one watch cache per stored resource and kube-apiserver's bootstrap done.
    pub fn new(server: Arc<Server>, now: Timestamp, seed: u64) -> World {
        let mut w = World { now, model: Model::new(), server, slots: BTreeMap::new(), streams: BTreeMap::new(), reads: BTreeMap::new(), next_id: 1, seed };
        let resources: Vec<Arc<Resource>> = w.server.catalog.resources().filter(|r| !r.info.review).cloned().collect();
        for r in resources {
            let prefix = Bytes::from(format!("{}/", w.server.storage_root(&r)));
            w.slots.insert(slot_key(&r), Slot { cache: WatchCache::new(r, prefix, DEFAULT_HISTORY), watch: None });
        }
        w.pump();
        let mut b = Bootstrap::new(w.server.clone(), "127.0.0.1", 6443, "10.0.0.1", seed);
        loop {
            match b.poll(w.now) {
                Some(BootstrapEffect::Kv(req)) => {
                    let r = w.apply(&req);
                    b.handle(w.now, r);
                }
                Some(BootstrapEffect::Done(r)) => {
                    r.expect("bootstrap succeeds on an empty store");
                    break;
                }
                None => break,
            }
        }
        w
    }

    fn next(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Serves one KV request and delivers the events it caused.
    pub fn apply(&mut self, req: &KvRequest) -> KvResult {
        let (result, events) = self.model.apply(self.now, req);
        if !events.is_empty() {
            let header_revision = self.model.revision();
            for slot in self.slots.values_mut() {
                if let Some(w) = &slot.watch {
                    let mine: Vec<_> = events.iter().filter(|e| w.contains(&e.kv.key)).cloned().collect();
                    if !mine.is_empty() {
                        slot.cache.handle(self.now, CacheEvent::Watch(WatchResponse::Events { header_revision, events: mine }));
                    }
                }
            }
        }
        self.pump();
        result
    }

    /// Drains every cache's effects.
    pub fn pump(&mut self) {
        loop {
            let mut work = false;
            let keys: Vec<_> = self.slots.keys().cloned().collect();
            for k in keys {
                while let Some(e) = self.slots.get_mut(&k).expect("listed above").cache.poll(self.now) {
                    work = true;
                    self.cache_effect(&k, e);
                }
            }
            if !work {
                return;
            }
        }
    }

    fn cache_effect(&mut self, k: &(String, String, String), e: CacheEffect) {
        let now = self.now;
        match e {
            CacheEffect::Kv(req) => {
                let (r, _) = self.model.apply(now, &req);
                self.slots.get_mut(k).expect("slot").cache.handle(now, CacheEvent::Kv(r));
            }
            CacheEffect::StartWatch(w) => {
                let slot = self.slots.get_mut(k).expect("slot");
                match self.model.backlog(&w) {
                    Ok(events) => {
                        slot.watch = Some(w);
                        if !events.is_empty() {
                            let header_revision = self.model.revision();
                            slot.cache.handle(now, CacheEvent::Watch(WatchResponse::Events { header_revision, events }));
                        }
                    }
                    Err(compact_revision) => slot.cache.handle(now, CacheEvent::Watch(WatchResponse::Canceled { compact_revision })),
                }
            }
            CacheEffect::RequestProgress => {
                let revision = self.model.revision();
                self.slots.get_mut(k).expect("slot").cache.handle(now, CacheEvent::Watch(WatchResponse::Progress { revision }));
            }
            CacheEffect::Deliver { id, frame } => self.streams.entry(id).or_default().frames.push(frame),
            CacheEffect::Close { id } => self.streams.entry(id).or_default().closed = true,
            CacheEffect::ReadDone { id, result } => {
                self.reads.insert(id, result);
            }
        }
    }

    /// Lets time pass, firing the caches' timers.
    pub fn advance(&mut self, d: SignedDuration) {
        self.now += d;
        self.pump();
    }

    /// Runs a request to its response.
    pub fn request(&mut self, req: Request) -> Response {
        let seed = self.seed ^ self.next();
        let mut m = RequestMachine::new(self.server.clone(), req, Health::default(), self.now, seed);
        let mut head = None;
        let mut body = Vec::new();
        loop {
            match m.poll(self.now) {
                Some(Effect::Kv(req)) => {
                    let r = self.apply(&req);
                    m.handle(self.now, Event::Kv(r));
                }
                Some(Effect::Cache { resource, request }) => {
                    let id = ReadId(self.next());
                    let k = slot_key(&resource);
                    self.slots.get_mut(&k).expect("every stored resource has a cache").cache.handle(self.now, CacheEvent::Read { id, request });
                    self.pump();
                    let mut waited = SignedDuration::ZERO;
                    while !self.reads.contains_key(&id) && waited < SignedDuration::from_secs(10) {
                        self.advance(SignedDuration::from_secs(1));
                        waited += SignedDuration::from_secs(1);
                    }
                    let r = self.reads.remove(&id).expect("a cache read is answered or times out");
                    m.handle(self.now, Event::Cache(r));
                }
                Some(Effect::Watch { resource, params, head }) => {
                    let id = WatcherId(self.next());
                    self.streams.insert(id, Stream::default());
                    let k = slot_key(&resource);
                    self.slots.get_mut(&k).expect("every stored resource has a cache").cache.handle(self.now, CacheEvent::Register { id, params });
                    self.pump();
                    return Response { head, body: Bytes::new(), watch: Some(id) };
                }
                Some(Effect::Respond(h)) => head = Some(h),
                Some(Effect::Body(b)) => body.extend_from_slice(&b),
                Some(Effect::End) | None => break,
            }
        }
        Response { head: head.expect("every request is answered"), body: Bytes::from(body), watch: None }
    }

    /// The frames a watch received so far (taken), and whether it ended.
    pub fn frames(&mut self, id: WatcherId) -> (Vec<Bytes>, bool) {
        let s = self.streams.entry(id).or_default();
        (std::mem::take(&mut s.frames), s.closed)
    }
}
