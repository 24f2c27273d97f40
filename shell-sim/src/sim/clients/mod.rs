//! Simulated clients. Each speaks HTTP requests to the server as a real client would and is
//! driven by the world: [`Client::wake`] when its timer fires, [`Client::reply`] with each
//! response, watch head, frame and stream end. A client asks for requests and its next wake-up
//! through [`Cx`].

pub mod controllers;
pub mod crd_admin;
pub mod informer;
pub mod rbac;
pub mod user;

use std::collections::BTreeMap;

use bytes::Bytes;
use jiff::{SignedDuration, Timestamp};
use kapi_core::pipeline::Request;

use super::check::selector::Selector;
use super::rng::SimRng;
use crate::ADMIN_TOKEN;

/// What reaches a client about one of its requests.
#[derive(Debug)]
pub enum Reply {
    Response {
        status: u16,
        body: Bytes,
    },
    /// A watch stream began; frames follow.
    WatchOpened,
    Frame(Bytes),
    WatchClosed,
    /// The connection broke before a response (the server restarted).
    Disconnected,
}

/// A client's window on the world while it acts.
pub struct Cx<'a> {
    pub now: Timestamp,
    pub rng: &'a mut SimRng,
    /// The liveness phase: users stop writing, everyone else settles.
    pub calm: bool,
    pub(crate) sends: Vec<(u64, Request)>,
    pub(crate) hang_ups: Vec<u64>,
    pub(crate) wake: Option<Timestamp>,
}

impl Cx<'_> {
    pub fn new(now: Timestamp, rng: &mut SimRng, calm: bool) -> Cx<'_> {
        Cx { now, rng, calm, sends: Vec::new(), hang_ups: Vec::new(), wake: None }
    }

    /// Sends `req`; its replies come back with `tag`.
    pub fn send(&mut self, tag: u64, req: Request) {
        self.sends.push((tag, req));
    }

    /// Closes the watch sent with `tag`.
    pub fn hang_up(&mut self, tag: u64) {
        self.hang_ups.push(tag);
    }

    /// Wakes the client again after `d` (the earliest asked for wins).
    pub fn wake_in(&mut self, d: SignedDuration) {
        let at = self.now + d;
        self.wake = Some(self.wake.map_or(at, |w| w.min(at)));
    }

    /// A random think time of up to `max_ms` milliseconds.
    pub fn think(&mut self, max_ms: u64) {
        let d = SignedDuration::from_micros(self.rng.between(100, max_ms * 1000) as i64);
        self.wake_in(d);
    }
}

/// What a client believes a collection holds, to compare with the store once all is quiet.
pub struct View {
    pub prefix: Bytes,
    pub selector: Selector,
    pub objects: BTreeMap<Bytes, i64>,
}

pub trait Client {
    fn name(&self) -> String;
    /// Reads its watch streams slowly: frames wait in the server's buffer.
    fn slow(&self) -> bool {
        false
    }
    fn wake(&mut self, cx: &mut Cx);
    fn reply(&mut self, tag: u64, reply: Reply, cx: &mut Cx);
    /// The client's view of the objects, if it keeps one.
    fn view(&self) -> Option<View> {
        None
    }
}

/// A request as the administrator, with a JSON body.
pub fn request(method: &str, path: &str, query: &str, body: Option<&serde_json::Value>, content_type: &str) -> Request {
    request_as(ADMIN_TOKEN, method, path, query, body, content_type)
}

/// A request with this bearer token, with a JSON body.
pub fn request_as(token: &str, method: &str, path: &str, query: &str, body: Option<&serde_json::Value>, content_type: &str) -> Request {
    let mut headers = vec![("Authorization".to_string(), format!("Bearer {token}")), ("Accept".into(), "application/json".into())];
    if body.is_some() {
        headers.push(("Content-Type".into(), content_type.into()));
    }
    let body = body.map(|b| Bytes::from(serde_json::to_vec(b).expect("JSON trees serialize"))).unwrap_or_default();
    Request { method: method.into(), path: path.into(), query: query.into(), headers, body, ..Default::default() }
}

/// The path of a namespace's configmaps, or of all configmaps.
pub fn collection(namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => format!("/api/v1/namespaces/{ns}/configmaps"),
        None => "/api/v1/configmaps".into(),
    }
}

/// Random labels: `app` most of the time, `tier` half of the time.
pub fn labels(rng: &mut SimRng) -> serde_json::Value {
    let mut l = serde_json::Map::new();
    if rng.chance(0.8) {
        l.insert("app".into(), rng.pick(&["a", "b", "c"]).to_string().into());
    }
    if rng.chance(0.5) {
        l.insert("tier".into(), "x".into());
    }
    serde_json::Value::Object(l)
}
