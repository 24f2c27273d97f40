//! ResourceQuota: a write in a namespace is charged to the namespace's ResourceQuotas that
//! count it, and refused when it does not fit, with kube v1.33's checks and words (kube's
//! `CheckRequest`). The charge is the quotas' new `status.used`, which the registry writes in
//! the same transaction as the object, guarded by the quotas' revisions, so that two writes
//! never both take the last of a quota, and a write that fails takes nothing; a quota that
//! moved meanwhile is read again and the charge decided anew. Deletes give nothing back here:
//! the `resourcequota` controller recalculates what is used.

use jiff::Timestamp;
use serde_json::Value;

use super::{Attributes, Charge, Lookup, Operation, Pending, Plugin};
use crate::meta;
use crate::quota::{self, Evaluator, Resources};
use crate::status::ApiError;

#[derive(Debug)]
pub struct ResourceQuota;

impl Plugin for ResourceQuota {
    fn name(&self) -> &'static str {
        "ResourceQuota"
    }

    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Update)
    }

    fn lookups(&self, request: &Pending) -> Vec<Lookup> {
        let Some(ns) = request.namespace.filter(|_| request.info.namespaced) else { return Vec::new() };
        match Evaluator::of(&request.info.group, &request.info.resource) {
            Some(e) if e.may_handle(request.operation, request.subresource) => vec![Lookup::ResourceQuotas(ns.to_string())],
            _ => Vec::new(),
        }
    }

    fn charge(&self, a: &Attributes, obj: Option<&Value>, now: Timestamp) -> Result<Vec<Charge>, ApiError> {
        let (Some(obj), Some(evaluator)) = (obj, Evaluator::of(&a.info.group, &a.info.resource)) else { return Ok(Vec::new()) };
        if a.namespace.is_empty() || !a.info.namespaced || !evaluator.handles(a.operation, a.subresource, a.old, Some(obj)) {
            return Ok(Vec::new());
        }
        let mut quotas: Vec<&Value> = a.found.resource_quotas.iter().collect();
        quotas.sort_by(|x, y| meta::name(x).cmp(meta::name(y)));
        let mut counting = Vec::new();
        for q in quotas {
            let name = meta::name(q);
            if !matches(&evaluator, q, obj).map_err(|e| ApiError::internal(format!("error matching scopes of quota {name}, err: {e}")))? {
                continue;
            }
            let (hard, used) = (quota::hard(q), quota::used(q));
            let restricted = evaluator.matching(&quota::names(&hard));
            evaluator.constraints(&restricted, obj).map_err(|e| a.forbidden(&format!("failed quota: {name}: {e}")))?;
            if restricted.iter().any(|r| !used.contains_key(r)) {
                return Err(a.forbidden(&format!("status unknown for quota: {name}, resources: {}", restricted.join(","))));
            }
            counting.push((q, hard, used));
        }
        // Nothing counts it: nothing to measure (kube measures only for the quotas that match).
        if counting.is_empty() {
            return Ok(Vec::new());
        }
        let usage = evaluator.usage(obj, now);
        let negative: Vec<String> = usage.iter().filter(|(_, q)| q.sign() < 0).map(|(k, _)| k.clone()).collect();
        if !negative.is_empty() {
            return Err(a.forbidden(&format!("quota usage is negative for resource(s): {}", negative.join(","))));
        }
        // An update is charged what it adds, to the quotas that counted the old object too.
        let previous = a.old.filter(|o| !meta::resource_version(o).is_empty()).map(|old| (old, evaluator.usage(old, now)));
        let mut charges = Vec::new();
        for (q, hard, used) in counting {
            let delta: Resources = match &previous {
                Some((old, before)) if matches(&evaluator, q, old).unwrap_or(false) => quota::subtract_non_negative(&usage, before),
                _ => usage.clone(),
            };
            let delta: Resources = delta.into_iter().filter(|(_, v)| v.sign() != 0).collect();
            if delta.is_empty() {
                continue;
            }
            let requested = quota::mask(&delta, &quota::names(&hard));
            let new_used = quota::add(&used, &requested);
            if a.subresource != Some("status") {
                let exceeded = quota::exceeding(&quota::mask(&new_used, &quota::names(&requested)), &hard);
                if !exceeded.is_empty() {
                    return Err(a.forbidden(&format!(
                        "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                        meta::name(q),
                        quota::pretty(&quota::mask(&requested, &exceeded)),
                        quota::pretty(&quota::mask(&used, &exceeded)),
                        quota::pretty(&quota::mask(&hard, &exceeded)),
                    )));
                }
            }
            if !quota::equal(&new_used, &used) {
                let mut charged = q.clone();
                if let Some(status) = charged.get_mut("status").and_then(Value::as_object_mut) {
                    status.insert("used".into(), quota::write(&new_used));
                }
                charges.push(Charge { quota: charged });
            }
        }
        Ok(charges)
    }
}

/// kube's `generic.Matches`: the quota counts some of what the evaluator counts (by its
/// `status.hard`) and `obj` falls in all its scopes.
fn matches(evaluator: &Evaluator, q: &Value, obj: &Value) -> Result<bool, String> {
    if evaluator.matching(&quota::names(&quota::hard(q))).is_empty() {
        return Ok(false);
    }
    for s in quota::selectors(q) {
        if !evaluator.matches_scope(&s, obj)? {
            return Ok(false);
        }
    }
    Ok(true)
}
