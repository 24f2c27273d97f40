//! A reflector, as client-go's: LIST a collection, then WATCH from the list's resource version,
//! re-watching from the last version seen when a watch ends and listing again when the version
//! is too old (410) or a request fails.
//!
//! Call order: when [`Reflector::next_request`] yields a request, send it and feed its answer
//! with [`Reflector::head`], [`Reflector::body`] (any chunking) and [`Reflector::end`]; drain
//! [`Reflector::poll_change`] after each. Ask for the next request at [`Reflector::wake_at`].

use std::collections::{BTreeSet, VecDeque};

use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use crate::meta;

/// How long a watch stays open before it is renewed.
const WATCH_SECONDS: u32 = 300;
/// How long to wait after a failed request.
const BACKOFF: SignedDuration = SignedDuration::from_secs(1);

/// An object's new state; `deleted` when it is gone.
#[derive(Debug, PartialEq)]
pub struct Change {
    pub object: Value,
    pub deleted: bool,
}

/// What the reflector asks for: a path and query on the collection.
#[derive(Debug, PartialEq)]
pub struct Get {
    pub path: String,
    pub query: String,
}

enum State {
    /// Send the next request at this time; `list` says which.
    Waiting {
        at: Timestamp,
        list: bool,
    },
    Listing {
        status: u16,
        body: Vec<u8>,
    },
    Watching {
        status: u16,
        pending: Vec<u8>,
        expired: bool,
    },
}

pub struct Reflector {
    path: String,
    /// Selectors every request carries (`fieldSelector=...`), or empty.
    selector: String,
    state: State,
    resource_version: String,
    /// What is present (namespace and name) after the last list and the events since, to
    /// report the deletions a relist reveals.
    known: BTreeSet<(String, String)>,
    changes: VecDeque<Change>,
}

impl Reflector {
    /// A reflector over the collection at `path` (`/api/v1/namespaces`, `/api/v1/configmaps`
    /// for every namespace's), limited by `selector` (a query such as
    /// `fieldSelector=metadata.name%3Ddefault`, or empty).
    pub fn new(path: &str, selector: &str, now: Timestamp) -> Reflector {
        Reflector {
            path: path.to_string(),
            selector: selector.to_string(),
            state: State::Waiting { at: now, list: true },
            resource_version: String::new(),
            known: BTreeSet::new(),
            changes: VecDeque::new(),
        }
    }

    pub fn wake_at(&self) -> Option<Timestamp> {
        match self.state {
            State::Waiting { at, .. } => Some(at),
            _ => None,
        }
    }

    /// The next request, once it is due; `None` while one is in flight.
    pub fn next_request(&mut self, now: Timestamp) -> Option<Get> {
        let State::Waiting { at, list } = self.state else { return None };
        if at > now {
            return None;
        }
        if list {
            self.state = State::Listing { status: 0, body: Vec::new() };
            return Some(Get { path: self.path.clone(), query: self.selector.clone() });
        }
        self.state = State::Watching { status: 0, pending: Vec::new(), expired: false };
        let mut query = format!("watch=true&allowWatchBookmarks=true&timeoutSeconds={WATCH_SECONDS}&resourceVersion={}", self.resource_version);
        if !self.selector.is_empty() {
            query = format!("{}&{query}", self.selector);
        }
        Some(Get { path: self.path.clone(), query })
    }

    pub fn head(&mut self, code: u16) {
        match &mut self.state {
            State::Listing { status, .. } | State::Watching { status, .. } => *status = code,
            State::Waiting { .. } => {}
        }
    }

    pub fn body(&mut self, chunk: &[u8]) {
        match &mut self.state {
            State::Listing { body, .. } => body.extend_from_slice(chunk),
            State::Watching { pending, .. } => {
                pending.extend_from_slice(chunk);
                let mut lines = Vec::new();
                while let Some(i) = pending.iter().position(|b| *b == b'\n') {
                    lines.push(pending.drain(..=i).collect::<Vec<u8>>());
                }
                for line in lines {
                    if let Ok(event) = serde_json::from_slice::<Value>(&line) {
                        self.watch_event(event);
                    }
                }
            }
            State::Waiting { .. } => {}
        }
    }

    fn watch_event(&mut self, event: Value) {
        let object = event.get("object").cloned().unwrap_or(Value::Null);
        let kind = event.get("type").and_then(Value::as_str).unwrap_or_default();
        if kind == "ERROR" {
            if let State::Watching { expired, .. } = &mut self.state {
                *expired = true;
            }
            return;
        }
        let rv = meta::resource_version(&object);
        if !rv.is_empty() {
            self.resource_version = rv.to_string();
        }
        let name = key(&object);
        match kind {
            "ADDED" | "MODIFIED" => {
                self.known.insert(name);
                self.changes.push_back(Change { object, deleted: false });
            }
            "DELETED" => {
                self.known.remove(&name);
                self.changes.push_back(Change { object, deleted: true });
            }
            _ => {}
        }
    }

    pub fn end(&mut self, now: Timestamp) {
        let state = std::mem::replace(&mut self.state, State::Waiting { at: now + BACKOFF, list: true });
        match state {
            State::Listing { status: 200, body } => {
                let Ok(list) = serde_json::from_slice::<Value>(&body) else { return };
                let items = list.get("items").and_then(Value::as_array).cloned().unwrap_or_default();
                let listed: BTreeSet<(String, String)> = items.iter().map(key).collect();
                for (namespace, name) in self.known.difference(&listed) {
                    let object = serde_json::json!({"metadata": {"namespace": namespace, "name": name}});
                    self.changes.push_back(Change { object, deleted: true });
                }
                self.known = listed;
                self.changes.extend(items.into_iter().map(|object| Change { object, deleted: false }));
                self.resource_version = meta::str_at(&list, &["metadata", "resourceVersion"]).unwrap_or_default().to_string();
                self.state = State::Waiting { at: now, list: false };
            }
            State::Watching { status: 200, expired: false, .. } => self.state = State::Waiting { at: now, list: false },
            _ => {}
        }
    }

    /// Whether a list has been taken in (what it follows is known, not just changes to it).
    pub fn listed(&self) -> bool {
        !self.resource_version.is_empty()
    }

    pub fn poll_change(&mut self) -> Option<Change> {
        self.changes.pop_front()
    }
}

fn key(object: &Value) -> (String, String) {
    (meta::namespace(object).to_string(), meta::name(object).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap()
    }

    fn drain(r: &mut Reflector) -> Vec<(String, bool)> {
        std::iter::from_fn(|| r.poll_change()).map(|c| (meta::name(&c.object).to_string(), c.deleted)).collect()
    }

    #[test]
    fn lists_then_watches_from_the_list_version_and_relists_after_expiry() {
        let mut r = Reflector::new("/api/v1/namespaces", "", t(0));
        assert_eq!(r.next_request(t(0)), Some(Get { path: "/api/v1/namespaces".into(), query: String::new() }));
        assert_eq!(r.next_request(t(0)), None, "one request at a time");
        r.head(200);
        r.body(br#"{"metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}"#);
        r.end(t(0));
        assert_eq!(drain(&mut r), vec![("a".into(), false), ("b".into(), false)]);

        let watch = r.next_request(t(0)).unwrap();
        assert!(watch.query.contains("watch=true") && watch.query.ends_with("resourceVersion=7"), "{}", watch.query);
        r.head(200);
        let event = json!({"type": "DELETED", "object": {"metadata": {"name": "a", "resourceVersion": "9"}}}).to_string();
        let (first, second) = event.as_bytes().split_at(10);
        r.body(first);
        assert_eq!(drain(&mut r), vec![], "half an event is held back");
        r.body(second);
        r.body(b"\n");
        assert_eq!(drain(&mut r), vec![("a".into(), true)]);
        r.end(t(1));
        assert!(r.next_request(t(1)).unwrap().query.ends_with("resourceVersion=9"), "an ended watch resumes where it was");

        r.head(200);
        r.body(b"{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410}}\n");
        r.end(t(2));
        assert_eq!(r.next_request(t(2)), None, "back off before listing again");
        assert_eq!(r.wake_at(), Some(t(3)));
        assert_eq!(r.next_request(t(3)).unwrap().query, "", "an expired watch lists again");
        r.head(200);
        r.body(br#"{"metadata":{"resourceVersion":"20"},"items":[{"metadata":{"name":"c"}}]}"#);
        r.end(t(3));
        assert_eq!(drain(&mut r), vec![("b".into(), true), ("c".into(), false)], "a relist reports what went missing");
    }

    #[test]
    fn selectors_go_on_the_list_and_the_watch() {
        let mut r = Reflector::new("/api/v1/configmaps", "fieldSelector=metadata.name%3Dx", t(0));
        assert_eq!(r.next_request(t(0)).unwrap().query, "fieldSelector=metadata.name%3Dx");
        r.head(200);
        r.body(br#"{"metadata":{"resourceVersion":"3"},"items":[{"metadata":{"namespace":"a","name":"x"}},{"metadata":{"namespace":"b","name":"x"}}]}"#);
        r.end(t(0));
        assert_eq!(drain(&mut r).len(), 2, "the same name in two namespaces is two objects");
        assert!(r.next_request(t(0)).unwrap().query.starts_with("fieldSelector=metadata.name%3Dx&watch=true"));
    }
}
