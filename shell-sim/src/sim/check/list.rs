//! Invariant 3: a LIST shows the store's state at the revision it reports, filtered by its
//! selector, across all its pages; a consistent LIST (no resourceVersion) is not older than any
//! write acknowledged before it started, and `Exact`/`NotOlderThan` reads honour their revision.

use std::collections::BTreeMap;

use bytes::Bytes;
use kapi_core::kv::Revision;

use super::selector::Selector;
use super::{Call, Checked, Invariant, identity, violation};
use crate::sim::oracle::Oracle;

/// A paginated LIST in progress: what its pages showed so far.
struct Paging {
    prefix: Bytes,
    selector: Selector,
    revision: Revision,
    last: Bytes,
    count: usize,
}

#[derive(Default)]
pub struct Lists {
    /// Paginated LISTs by client and the continue token of their last page (two clients may
    /// get the same token).
    pages: BTreeMap<(usize, String), Paging>,
}

impl Lists {
    pub fn answered(&mut self, call: &Call, list: &serde_json::Value, oracle: &Oracle) -> Checked {
        let Some(target) = call.target.as_ref().filter(|t| t.name.is_none() && call.method == "GET") else { return Ok(()) };
        let fail = |m: String| violation(Invariant::List, format!("LIST {target:?} {:?}: {m}", call.query));
        if list["apiVersion"] != target.kind.api_version() {
            return fail(format!("a list of apiVersion {}", list["apiVersion"]));
        }
        let Some(revision) = list["metadata"]["resourceVersion"].as_str().and_then(|r| r.parse::<Revision>().ok()) else {
            return fail(format!("no resourceVersion in {}", list["metadata"]));
        };
        let mut paging = match call.param("continue") {
            Some(token) => match self.pages.remove(&(call.caller, token.to_string())) {
                Some(p) if p.revision != revision => return fail(format!("a continued page is at revision {revision}, its first page was at {}", p.revision)),
                Some(p) => p,
                None => return Ok(()),
            },
            None => {
                let requested = call.param("resourceVersion").and_then(|r| r.parse::<Revision>().ok());
                let fresh = match (requested, call.param("resourceVersionMatch")) {
                    (None, _) => revision >= call.acked_before,
                    (Some(0), _) => true,
                    (Some(n), Some("Exact")) => revision == n,
                    (Some(n), _) => revision >= n,
                };
                if !fresh {
                    return fail(format!("answered at revision {revision}; writes up to {} were acknowledged before it was sent", call.acked_before));
                }
                Paging { prefix: target.prefix(), selector: Selector::parse(call.param("labelSelector").unwrap_or("")), revision, last: Bytes::new(), count: 0 }
            }
        };
        if revision > oracle.revision() {
            return fail(format!("answered at revision {revision}, which the store has not reached ({})", oracle.revision()));
        }
        for item in list["items"].as_array().into_iter().flatten() {
            let Some((key, rv)) = identity(target.kind, item) else { return fail(format!("an item without identity: {item}")) };
            if let Some(why) = target.kind.misshapen(item) {
                return fail(format!("item not in the version asked for ({why}): {item}"));
            }
            if key <= paging.last || !key.starts_with(&paging.prefix) {
                return fail(format!("item {} out of order or out of the collection", String::from_utf8_lossy(&key)));
            }
            match oracle.at(&key, revision) {
                Some(f) if f.mod_revision == rv && paging.selector.matches(&f.labels) => {}
                held => {
                    return fail(format!(
                        "item {} at version {rv}, but at revision {revision} the store held {:?}",
                        String::from_utf8_lossy(&key),
                        held.map(|f| (f.mod_revision, f.labels.clone()))
                    ));
                }
            }
            paging.last = key;
            paging.count += 1;
        }
        match list["metadata"]["continue"].as_str().filter(|c| !c.is_empty()) {
            Some(token) => {
                self.pages.insert((call.caller, token.to_string()), paging);
            }
            None => {
                let expected = oracle.state(&paging.prefix, revision).iter().filter(|(_, f)| paging.selector.matches(&f.labels)).count();
                if paging.count != expected {
                    return fail(format!("{} items over all pages, the store held {expected} matching ones at revision {revision}", paging.count));
                }
            }
        }
        Ok(())
    }
}
