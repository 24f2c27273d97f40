//! Informer-style clients, as client-go's reflector behaves: keep a view of one collection's
//! objects (configmaps, or horizontalpodautoscalers at v2 or v1) matching a selector by LIST then WATCH from the list's resourceVersion, resume a broken
//! watch from the last resourceVersion seen (bookmarks included), and start over on 410.
//!
//! The same client serves as a controller (it also updates objects from its view, meeting
//! conflicts with other writers) and as a plain watcher (no LIST: a watch from
//! `resourceVersion=0` or with `sendInitialEvents=true`, possibly reading slowly).

use std::collections::BTreeMap;

use bytes::Bytes;
use jiff::SignedDuration;
use serde_json::Value;

use super::{Client, Cx, Reply, View, request};
use crate::sim::check::selector::Selector;
use crate::sim::check::{encode, identity};
use crate::sim::kinds::Kind;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// LIST + WATCH, and updates objects from its view.
    Controller,
    /// WATCH only, from `resourceVersion=0` or with initial events.
    Watcher,
    /// A watcher that reads its stream slowly.
    SlowWatcher,
}

#[derive(Debug, PartialEq, Eq)]
enum State {
    /// Waiting to (re)start from scratch.
    Idle,
    Listing(u64),
    Watching(u64),
}

pub struct Informer {
    id: usize,
    role: Role,
    kind: Kind,
    namespace: Option<String>,
    selector: Selector,
    /// Watchers: start with `sendInitialEvents=true` rather than `resourceVersion=0`.
    initial_events: bool,
    state: State,
    /// Where to resume; empty when the next watch starts from scratch.
    rv: String,
    view: BTreeMap<Bytes, (i64, Value)>,
    tag: u64,
    writing: bool,
}

impl Informer {
    pub fn new(id: usize, role: Role, kind: Kind, namespace: Option<String>, selector: Selector, initial_events: bool) -> Informer {
        Informer { id, role, kind, namespace, selector, initial_events, state: State::Idle, rv: String::new(), view: BTreeMap::new(), tag: 0, writing: false }
    }

    fn next_tag(&mut self) -> u64 {
        self.tag += 1;
        self.tag
    }

    fn selector_query(&self) -> String {
        let s = self.selector.query();
        if s.is_empty() { String::new() } else { format!("labelSelector={}", encode(&s)) }
    }

    fn start(&mut self, cx: &mut Cx) {
        let tag = self.next_tag();
        let path = self.kind.path(self.namespace.as_deref());
        if self.role == Role::Controller {
            self.state = State::Listing(tag);
            cx.send(tag, request("GET", &path, &self.selector_query(), None, ""));
        } else {
            self.rv.clear();
            self.view.clear();
            self.watch(cx);
        }
    }

    fn watch(&mut self, cx: &mut Cx) {
        let tag = self.next_tag();
        let mut q = vec!["watch=1".to_string(), format!("timeoutSeconds={}", cx.rng.between(1, 120)), "allowWatchBookmarks=true".into()];
        if self.rv.is_empty() && self.initial_events {
            q.push("sendInitialEvents=true".into());
            q.push("resourceVersionMatch=NotOlderThan".into());
        } else {
            q.push(format!("resourceVersion={}", if self.rv.is_empty() { "0" } else { &self.rv }));
        }
        let sel = self.selector_query();
        if !sel.is_empty() {
            q.push(sel);
        }
        self.state = State::Watching(tag);
        cx.send(tag, request("GET", &self.kind.path(self.namespace.as_deref()), &q.join("&"), None, ""));
    }

    fn event(&mut self, frame: &[u8]) {
        let Ok(e) = serde_json::from_slice::<Value>(frame) else { return };
        let object = &e["object"];
        match e["type"].as_str() {
            Some("ERROR") if object["code"] == 410 => self.rv.clear(),
            Some("ERROR") => {}
            Some("BOOKMARK") => {
                if let Some(rv) = object["metadata"]["resourceVersion"].as_str() {
                    self.rv = rv.to_string();
                }
            }
            Some(kind) => {
                let Some((key, rv)) = identity(self.kind, object) else { return };
                if kind == "DELETED" {
                    self.view.remove(&key);
                } else {
                    self.view.insert(key, (rv, object.clone()));
                }
                self.rv = rv.to_string();
            }
            None => {}
        }
    }

    /// A controller's work: bump a counter in one object it knows, from its (maybe stale) view.
    fn write(&mut self, cx: &mut Cx) {
        if self.view.is_empty() {
            return;
        }
        let i = cx.rng.below(self.view.len() as u64) as usize;
        let Some((_, (_, obj))) = self.view.iter().nth(i) else { return };
        let mut obj = obj.clone();
        let (Some(ns), Some(name)) = (obj["metadata"]["namespace"].as_str().map(str::to_string), obj["metadata"]["name"].as_str().map(str::to_string)) else {
            return;
        };
        let by = self.name();
        self.kind.change(&mut obj, cx.rng, &by);
        self.writing = true;
        let tag = self.next_tag();
        cx.send(tag, request("PUT", &format!("{}/{name}", self.kind.path(Some(&ns))), "", Some(&obj), "application/json"));
    }
}

impl Client for Informer {
    fn name(&self) -> String {
        format!("{:?}-{:?}-{}", self.role, self.kind, self.id).to_lowercase()
    }

    fn slow(&self) -> bool {
        self.role == Role::SlowWatcher
    }

    fn wake(&mut self, cx: &mut Cx) {
        if self.state == State::Idle {
            if self.rv.is_empty() { self.start(cx) } else { self.watch(cx) }
        }
        if self.role == Role::Controller && matches!(self.state, State::Watching(_)) && !self.writing && !cx.calm {
            self.write(cx);
        }
        cx.think(if self.slow() { 50 } else { 200 });
    }

    fn reply(&mut self, tag: u64, reply: Reply, cx: &mut Cx) {
        let current = matches!(self.state, State::Listing(t) | State::Watching(t) if t == tag);
        if !current {
            // An update's answer: conflicts and errors are expected; the watch brings the truth.
            self.writing = false;
            return;
        }
        match reply {
            Reply::Response { status: 200, body } if matches!(self.state, State::Listing(_)) => {
                let list: Value = serde_json::from_slice(&body).unwrap_or_default();
                self.view.clear();
                for item in list["items"].as_array().into_iter().flatten() {
                    if let Some((key, rv)) = identity(self.kind, item) {
                        self.view.insert(key, (rv, item.clone()));
                    }
                }
                self.rv = list["metadata"]["resourceVersion"].as_str().unwrap_or("").to_string();
                self.watch(cx);
            }
            Reply::WatchOpened => {}
            Reply::Frame(f) => self.event(&f),
            Reply::Response { status, .. } => {
                // The LIST or WATCH failed; after a 410 the resume point is gone.
                if status == 410 {
                    self.rv.clear();
                }
                self.state = State::Idle;
                cx.wake_in(SignedDuration::from_millis(100));
            }
            Reply::WatchClosed | Reply::Disconnected => {
                self.state = State::Idle;
                cx.wake_in(SignedDuration::from_millis(1));
            }
        }
    }

    fn view(&self) -> Option<View> {
        let prefix = crate::sim::check::prefix(self.kind, self.namespace.as_deref());
        Some(View { prefix, selector: self.selector.clone(), objects: self.view.iter().map(|(k, (rv, _))| (k.clone(), *rv)).collect() })
    }
}
