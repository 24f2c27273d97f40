//! Invariant 2: every watcher receives every event matching its selector, in resourceVersion
//! order, with no gap and no duplicate, from where it started, or is ended with a 410 error.
//!
//! A session's expected events come from the oracle: each change under the watched prefix
//! becomes ADDED, MODIFIED or DELETED by whether the object matched the selector before and
//! after it (kube sends DELETED when an object stops matching, ADDED when it starts).

use std::collections::BTreeMap;

use bytes::Bytes;
use kapi_core::kv::Revision;

use super::selector::Selector;
use super::{Call, Checked, Invariant, identity, violation};
use crate::sim::kinds::Kind;
use crate::sim::oracle::{Change, Oracle};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Every matching change after `through` arrives next.
    After(Revision),
    /// `resourceVersion=0`: synthetic ADDED events of some recent state, then its changes;
    /// checked when the session ends, since only the whole stream shows where the state was.
    Current,
    /// `sendInitialEvents=true`: ADDED events until the bookmark that ends them.
    Initial,
}

#[derive(Clone, Debug)]
struct Ev {
    kind: String,
    key: Bytes,
    rv: Revision,
}

struct Session {
    what: String,
    /// The collection watched, at the version asked for.
    kind: Kind,
    prefix: Bytes,
    selector: Selector,
    mode: Mode,
    /// Events not yet checked (`Current` and `Initial` modes).
    held: Vec<Ev>,
    /// An ERROR event ended the session.
    errored: bool,
    /// Faults were possible while it ran: a cache the store could not feed may give up on
    /// the revision asked for.
    faulty: bool,
}

#[derive(Default)]
pub struct Watches {
    sessions: BTreeMap<u64, Session>,
}

fn expected_kind(c: &Change, selector: &Selector) -> Option<&'static str> {
    let was = c.prev.as_ref().is_some_and(|f| selector.matches(&f.labels));
    let is = c.cur.as_ref().is_some_and(|f| selector.matches(&f.labels));
    match (was, is) {
        (false, true) => Some("ADDED"),
        (true, true) => Some("MODIFIED"),
        (true, false) => Some("DELETED"),
        (false, false) => None,
    }
}

impl Session {
    fn fail(&self, m: String) -> Checked {
        violation(Invariant::Watch, format!("{}: {m}", self.what))
    }

    /// The matching changes in `(after, upto]`, as the events a watcher must get.
    fn expected(&self, oracle: &Oracle, after: Revision, upto: Revision) -> Vec<Ev> {
        oracle
            .changes(&self.prefix, after, upto)
            .into_iter()
            .filter_map(|c| expected_kind(&c, &self.selector).map(|k| Ev { kind: k.to_string(), key: c.key, rv: c.revision }))
            .collect()
    }

    /// The matching objects at `revision`, as (key, version) in key order.
    fn state(&self, oracle: &Oracle, revision: Revision) -> Vec<(Bytes, Revision)> {
        oracle.state(&self.prefix, revision).into_iter().filter(|(_, f)| self.selector.matches(&f.labels)).map(|(k, f)| (k, f.mod_revision)).collect()
    }

    /// Checks one event of a session that knows where it is.
    fn live(&mut self, through: Revision, ev: &Ev, oracle: &Oracle) -> Checked {
        if ev.kind == "BOOKMARK" {
            let missed = self.expected(oracle, through, ev.rv);
            if let Some(m) = missed.first() {
                return self.fail(format!(
                    "bookmark at {} after {through}, but {} {} at {} was never sent",
                    ev.rv,
                    m.kind,
                    String::from_utf8_lossy(&m.key),
                    m.rv
                ));
            }
        } else {
            let expected = self.expected(oracle, through, ev.rv);
            match expected.as_slice() {
                [e] if e.key == ev.key && e.kind == ev.kind => {}
                _ => {
                    let exp: Vec<String> = expected.iter().map(|e| format!("{} {} at {}", e.kind, String::from_utf8_lossy(&e.key), e.rv)).collect();
                    return self.fail(format!(
                        "after {through} got {} {} at {}; the store's changes call for {exp:?}",
                        ev.kind,
                        String::from_utf8_lossy(&ev.key),
                        ev.rv
                    ));
                }
            }
        }
        self.mode = Mode::After(ev.rv.max(through));
        Ok(())
    }

    /// Finds the state a `Current` session's synthetic events showed (in key order) and checks
    /// the rest from there. `upto` is how far the stream must have got if it is `complete`; an
    /// incomplete stream (closed early, e.g. as slow) may show only the start of that state.
    fn resolve(&mut self, oracle: &Oracle, upto: Revision, complete: bool) -> Checked {
        let held = std::mem::take(&mut self.held);
        let added = held.iter().take_while(|e| e.kind == "ADDED").count();
        for k in (0..=added).rev() {
            let initial: Vec<(Bytes, Revision)> = held[..k].iter().map(|e| (e.key.clone(), e.rv)).collect();
            let lower = held[..k].iter().map(|e| e.rv).max().unwrap_or(0);
            let (upper, exact) = match held.get(k) {
                Some(e) if e.kind == "BOOKMARK" => (e.rv, true),
                Some(e) => (e.rv - 1, true),
                None => (upto, complete),
            };
            if lower > upper {
                continue;
            }
            let fits = if exact {
                self.state(oracle, upper) == initial
            } else {
                std::iter::once(lower).chain(self.expected(oracle, lower, upper).iter().map(|e| e.rv)).any(|r| self.state(oracle, r).starts_with(&initial))
            };
            if fits {
                self.mode = Mode::After(upper);
                for ev in &held[k..] {
                    let Mode::After(through) = self.mode else { unreachable!("live() keeps the mode After") };
                    self.live(through, ev, oracle)?;
                }
                return Ok(());
            }
        }
        let evs: Vec<String> = held.iter().take(12).map(|e| format!("{} {} {}", e.kind, String::from_utf8_lossy(&e.key), e.rv)).collect();
        self.fail(format!("no state of the store up to revision {upto} explains the stream {evs:?}"))
    }
}

impl Watches {
    /// A watch request was answered with a stream.
    pub fn opened(&mut self, id: u64, call: &Call) {
        let Some(target) = &call.target else { return };
        let mode = match call.param("resourceVersion") {
            _ if call.param("sendInitialEvents") == Some("true") => Mode::Initial,
            None | Some("0") | Some("") => Mode::Current,
            Some(n) => Mode::After(n.parse().unwrap_or(0)),
        };
        self.sessions.insert(
            id,
            Session {
                what: format!("watch #{id} of {:?} {:?}", target, call.query),
                kind: target.kind,
                prefix: target.prefix(),
                selector: Selector::parse(call.param("labelSelector").unwrap_or("")),
                mode,
                held: Vec::new(),
                errored: false,
                faulty: call.faulty,
            },
        );
    }

    pub fn frame(&mut self, id: u64, frame: &[u8], oracle: &Oracle) -> Checked {
        let Some(s) = self.sessions.get_mut(&id) else { return Ok(()) };
        let Ok(event) = serde_json::from_slice::<serde_json::Value>(frame) else {
            return s.fail(format!("a frame that is not JSON: {:?}", String::from_utf8_lossy(frame)));
        };
        let kind = event["type"].as_str().unwrap_or("").to_string();
        let object = &event["object"];
        if s.errored {
            return s.fail(format!("an event after the ERROR that ended the stream: {event}"));
        }
        if kind == "ERROR" {
            s.errored = true;
            // kube's 504 for a revision its cache did not reach within 3 s, as when the store
            // is out.
            let too_large = s.faulty && object["code"] == 504 && object["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge";
            let expired = object["code"] == 410 && matches!(object["reason"].as_str(), Some("Expired" | "Gone"));
            if object["kind"] != "Status" || !(expired || too_large) {
                return s.fail(format!("an ERROR event that is not 410 Expired (nor, under faults, 504 for a revision too large): {object}"));
            }
            return Ok(());
        }
        let ev = if kind == "BOOKMARK" {
            let rv = object["metadata"]["resourceVersion"].as_str().and_then(|r| r.parse().ok());
            let Some(rv) = rv else { return s.fail(format!("a bookmark without resourceVersion: {event}")) };
            Ev { kind, key: Bytes::new(), rv }
        } else {
            let Some((key, rv)) = identity(s.kind, object) else { return s.fail(format!("an event without identity: {event}")) };
            if object["apiVersion"] != s.kind.api_version() || s.kind.misshapen(object).is_some() {
                return s.fail(format!("an event's object not in the version watched: {event}"));
            }
            if !matches!(kind.as_str(), "ADDED" | "MODIFIED" | "DELETED") {
                return s.fail(format!("an event of unknown type: {event}"));
            }
            Ev { kind, key, rv }
        };
        match s.mode {
            Mode::After(through) => s.live(through, &ev, oracle),
            Mode::Current => {
                s.held.push(ev);
                Ok(())
            }
            Mode::Initial if ev.kind == "BOOKMARK" && object["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true" => {
                let initial: Vec<(Bytes, Revision)> = s.held.drain(..).map(|e| (e.key, e.rv)).collect();
                let state = s.state(oracle, ev.rv);
                if initial != state {
                    return s.fail(format!("initial events {initial:?} differ from the store's matching objects at {}: {state:?}", ev.rv));
                }
                s.mode = Mode::After(ev.rv);
                Ok(())
            }
            Mode::Initial if ev.kind == "ADDED" => {
                s.held.push(ev);
                Ok(())
            }
            Mode::Initial => s.fail(format!("{} {} at {} before the initial events ended", ev.kind, String::from_utf8_lossy(&ev.key), ev.rv)),
        }
    }

    /// The stream ended; `revision` is the store's revision then.
    pub fn closed(&mut self, id: u64, oracle: &Oracle, revision: Revision) -> Checked {
        let Some(mut s) = self.sessions.remove(&id) else { return Ok(()) };
        if s.mode == Mode::Current { s.resolve(oracle, revision, false) } else { Ok(()) }
    }

    /// With the world quiet: every open stream has received everything up to `revision`.
    /// A watch that has not yet had every event up to `revision` (what [`Self::caught_up`]
    /// will hold it to), while there is time to wait for it.
    pub fn lagging(&self, oracle: &Oracle, revision: Revision) -> Option<String> {
        self.sessions.values().filter(|s| !s.errored).find_map(|s| match s.mode {
            Mode::After(through) => s.expected(oracle, through, revision).first().map(|m| format!("{} is at {through}, behind {}", s.what, m.rv)),
            _ => None,
        })
    }

    pub fn caught_up(&mut self, oracle: &Oracle, revision: Revision) -> Checked {
        for s in self.sessions.values_mut().filter(|s| !s.errored) {
            match s.mode {
                Mode::Current => s.resolve(oracle, revision, true)?,
                Mode::Initial => return violation(Invariant::Liveness, format!("{}: the initial events never ended", s.what)),
                Mode::After(_) => {}
            }
            if let Mode::After(through) = s.mode
                && let Some(m) = s.expected(oracle, through, revision).first()
            {
                return violation(
                    Invariant::Liveness,
                    format!("{}: {} {} at {} never arrived (got through {through})", s.what, m.kind, String::from_utf8_lossy(&m.key), m.rv),
                );
            }
        }
        Ok(())
    }
}
