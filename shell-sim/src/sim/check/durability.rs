//! Invariant 1: no acknowledged write is lost. A write the server acknowledged at revision `r`
//! must be a change the store committed at `r`; at the end, the store must still hold every
//! key's latest committed version.

use bytes::Bytes;
use kapi_core::kv::{KvRequest, KvResponse, RangeRequest, Revision};

use super::{Call, Checked, Invariant, identity, violation};
use crate::sim::oracle::Oracle;

#[derive(Default)]
pub struct Durability {
    /// The newest revision acknowledged to any client.
    pub max_acked: Revision,
    /// Every acknowledged write: the key and the revision it was acknowledged at.
    acked: Vec<(Bytes, Revision)>,
}

impl Durability {
    /// Observes a successful response.
    pub fn answered(&mut self, call: &Call, object: &serde_json::Value, oracle: &Oracle) -> Checked {
        // A delete of a collection acknowledges no one object (the oracle has each delete).
        let collection_delete = call.method == "DELETE" && call.target.as_ref().is_some_and(|t| t.name.is_none());
        if call.method == "GET" || call.dry_run() || object["kind"] == "Status" || collection_delete {
            return Ok(());
        }
        let Some((key, rv)) = call.target.as_ref().and_then(|t| identity(t.kind, object)) else {
            return violation(Invariant::Durability, format!("{} acknowledged without an object identity: {object}", call.method));
        };
        match oracle.change(&key, rv) {
            None => violation(
                Invariant::Durability,
                format!(
                    "{} of {} acknowledged at revision {rv}, but the store committed no change of that key there",
                    call.method,
                    String::from_utf8_lossy(&key)
                ),
            ),
            Some(c) if c.cur.is_none() && call.method != "DELETE" => violation(
                Invariant::Durability,
                format!("{} of {} acknowledged at revision {rv}, where the store deleted it", call.method, String::from_utf8_lossy(&key)),
            ),
            Some(_) => {
                self.max_acked = self.max_acked.max(rv);
                self.acked.push((key, rv));
                Ok(())
            }
        }
    }

    /// At the end: the store holds, for every key ever acknowledged, the newest version the
    /// oracle recorded (the acknowledged one or a later write).
    pub fn finish(&self, oracle: &Oracle, store: &mut kapi_core::kv::Model, now: jiff::Timestamp) -> Checked {
        for (key, rv) in &self.acked {
            let (result, _) = store.apply(now, &KvRequest::Range(RangeRequest::key(key.clone())));
            let held = match result {
                Ok(KvResponse::Range(r)) => r.kvs.first().map(|kv| kv.mod_revision),
                other => return violation(Invariant::Durability, format!("the final store cannot be read: {other:?}")),
            };
            let latest = oracle.at(key, oracle.revision()).map(|f| f.mod_revision);
            if held != latest || held.is_some_and(|h| h < *rv) {
                return violation(
                    Invariant::Durability,
                    format!(
                        "{} was acknowledged at {rv}; the store ends holding {held:?}, the newest committed version is {latest:?}",
                        String::from_utf8_lossy(key)
                    ),
                );
            }
        }
        Ok(())
    }
}
