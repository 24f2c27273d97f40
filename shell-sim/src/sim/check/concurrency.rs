//! Invariant 4: optimistic concurrency. A write that carried a resourceVersion precondition
//! (an update's `metadata.resourceVersion`, a delete's `preconditions.resourceVersion`) and
//! succeeded must have replaced exactly that version.

use super::{Call, Checked, Invariant, identity, violation};
use crate::sim::oracle::Oracle;

pub fn answered(call: &Call, object: &serde_json::Value, oracle: &Oracle) -> Checked {
    let precondition = match call.method.as_str() {
        "PUT" => call.body["metadata"]["resourceVersion"].as_str(),
        "DELETE" => call.body["preconditions"]["resourceVersion"].as_str(),
        _ => None,
    };
    let identified = call.target.as_ref().and_then(|t| identity(t.kind, object));
    let (Some(expected), Some((key, rv))) = (precondition.and_then(|p| p.parse::<i64>().ok()), identified) else { return Ok(()) };
    // An update that changes nothing, or a delete of an object already terminating, writes
    // nothing and returns the object as it is: it must have been that version then.
    if rv == expected && oracle.versions_between(&key, call.start, call.end).iter().any(|v| v.as_ref().is_some_and(|f| f.mod_revision == rv)) {
        return Ok(());
    }
    if call.dry_run() {
        return Ok(());
    }
    let replaced = oracle.change(&key, rv).and_then(|c| c.prev).map(|p| p.mod_revision);
    if replaced != Some(expected) {
        return violation(
            Invariant::Concurrency,
            format!(
                "{} of {} based on resourceVersion {expected} succeeded at {rv}, replacing version {replaced:?}",
                call.method,
                String::from_utf8_lossy(&key)
            ),
        );
    }
    Ok(())
}
