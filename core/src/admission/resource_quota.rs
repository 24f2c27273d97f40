//! ResourceQuota: a write in a namespace is charged to the namespace's ResourceQuotas that
//! count it, and refused when it does not fit, with kube v1.33's checks and words (kube's
//! `CheckRequest`). The charge is the quotas' new `status.used`, which the registry writes in
//! the same transaction as the object, guarded by the quotas' revisions, so that two writes
//! never both take the last of a quota, and a write that fails takes nothing; a quota that
//! moved meanwhile is read again and the charge decided anew. Deletes give nothing back here:
//! the `resourcequota` controller recalculates what is used.
//!
//! Its configuration (`ResourceQuotaConfiguration`, `limitedResources`) makes some resources
//! or scopes need a quota: a write that uses them is refused unless a quota covers them.

use jiff::Timestamp;
use serde_json::Value;

use super::{Attributes, Charge, Lookup, Operation, Pending, Plugin};
use crate::config_file::{self, Decoder};
use crate::meta;
use crate::quota::{self, Evaluator, Resources, ScopeSelector};
use crate::status::ApiError;

const SCHEME: &str = "k8s.io/apiserver/pkg/admission/plugin/resourcequota/config.go:31";

#[derive(Debug, Default)]
pub struct ResourceQuota {
    limited: Vec<Limited>,
}

/// One of `limitedResources`: a resource whose usage, of the names containing one of
/// `match_contains`, and whose objects in the scopes of `match_scopes`, need a quota.
#[derive(Debug, Default, PartialEq)]
struct Limited {
    api_group: String,
    resource: String,
    match_contains: Vec<String>,
    match_scopes: Vec<ScopeSelector>,
}

impl ResourceQuota {
    /// The plugin with its configuration (`None`: kube's default, nothing limited), or kube's
    /// start-up error.
    pub fn new(config: Option<&[u8]>) -> Result<ResourceQuota, String> {
        let init = |e: String| format!("couldn't init admission plugin \"ResourceQuota\": {e}");
        let Some(data) = config.filter(|d| !d.iter().all(u8::is_ascii_whitespace)) else { return Ok(ResourceQuota::default()) };
        let peek: Value = serde_norway::from_slice(data).unwrap_or_default();
        let legacy = peek.get("apiVersion").and_then(Value::as_str).is_some_and(|v| v.starts_with("resourcequota.admission.k8s.io/"));
        let tree = match legacy {
            true => config_file::read(data, "Configuration", &["resourcequota.admission.k8s.io/v1beta1", "resourcequota.admission.k8s.io/v1alpha1"], SCHEME),
            false => config_file::read(data, "ResourceQuotaConfiguration", &["apiserver.config.k8s.io/v1"], SCHEME),
        }
        .map_err(init)?;
        let mut d = Decoder::new(&tree);
        let root = d.root(&tree, "Configuration", &["apiVersion", "kind", "limitedResources"]);
        let mut limited = Vec::new();
        let mut missing = Vec::new();
        for (i, (at, item)) in d.items(&root, "limitedResources", "[]LimitedResource").into_iter().enumerate() {
            let lr = d.object(Some(item), at, "Configuration", "LimitedResource", &["apiGroup", "resource", "matchContains", "matchScopes"]);
            let mut scopes = Vec::new();
            for (at, s) in d.items(&lr, "matchScopes", "[]ScopedResourceSelectorRequirement") {
                let s = d.object(Some(s), at, "LimitedResource", "ScopedResourceSelectorRequirement", &["scopeName", "operator", "values"]);
                scopes.push(ScopeSelector { scope_name: d.string(&s, "scopeName"), operator: d.string(&s, "operator"), values: d.strings(&s, "values") });
            }
            let entry = Limited {
                api_group: d.string(&lr, "apiGroup"),
                resource: d.string(&lr, "resource"),
                match_contains: d.strings(&lr, "matchContains"),
                match_scopes: scopes,
            };
            if entry.resource.is_empty() {
                missing.push(format!("limitedResources[{i}].resource: Required value"));
            }
            limited.push(entry);
        }
        d.finish_leniently().map_err(init)?;
        if !missing.is_empty() {
            return Err(init(crate::authz::rbac::aggregate(&missing)));
        }
        Ok(ResourceQuota { limited })
    }

    /// kube's checks of `limitedResources` for a write of `obj` using `usage`, given the
    /// quotas that count it (`counting`: what they count) and every quota's matched scopes.
    fn check_limited(
        &self,
        a: &Attributes,
        evaluator: &Evaluator,
        obj: &Value,
        usage: &Resources,
        counted: &[String],
        scoped: &[ScopeSelector],
    ) -> Result<(), ApiError> {
        let mut needed: Vec<String> = Vec::new();
        for lr in self.limited.iter().filter(|lr| lr.api_group == a.info.group && lr.resource == a.info.resource) {
            for name in usage.iter().filter(|(_, q)| q.sign() > 0).map(|(k, _)| k) {
                if lr.match_contains.iter().any(|c| name.contains(c.as_str())) && !counted.contains(name) && !needed.contains(name) {
                    needed.push(name.clone());
                }
            }
        }
        needed.sort();
        if !needed.is_empty() {
            return Err(a.forbidden(&format!("insufficient quota to consume: {}", needed.join(","))));
        }
        let limited_scopes: Vec<&ScopeSelector> = self.limited.iter().flat_map(|lr| matching_scopes(evaluator, obj, &lr.match_scopes)).collect();
        let uncovered: Vec<String> = limited_scopes.iter().filter(|l| !scoped.iter().any(|s| s.scope_name == l.scope_name)).map(|s| s.go_format()).collect();
        if !uncovered.is_empty() {
            return Err(ApiError::new(500, "", format!("insufficient quota to match these scopes: [{}]", uncovered.join(" "))));
        }
        Ok(())
    }
}

/// The selectors among `selectors` that `obj` falls in (kube's `MatchingScopes`; one that
/// cannot be read matches nothing).
fn matching_scopes<'s>(evaluator: &Evaluator, obj: &Value, selectors: &'s [ScopeSelector]) -> Vec<&'s ScopeSelector> {
    selectors.iter().filter(|s| evaluator.matches_scope(s, obj).unwrap_or(false)).collect()
}

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
        let mut scoped: Vec<ScopeSelector> = Vec::new();
        for q in quotas {
            let name = meta::name(q);
            let selectors = quota::selectors(q);
            let scope_error = |(s, e): (&ScopeSelector, String)| {
                ApiError::new(500, "", format!("error matching scopes of quota {name}, err: error on matching scope {}: {e}", s.go_format()))
            };
            for s in &selectors {
                if evaluator.matches_scope(s, obj).map_err(|e| scope_error((s, e)))? {
                    scoped.push(s.clone());
                }
            }
            if !matches(&evaluator, q, obj).map_err(|e| ApiError::new(500, "", e))? {
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
        // Nothing counts it and nothing needs a quota: nothing to measure.
        if counting.is_empty() && self.limited.is_empty() {
            return Ok(Vec::new());
        }
        let usage = evaluator.usage(obj, now);
        let negative: Vec<String> = usage.iter().filter(|(_, q)| q.sign() < 0).map(|(k, _)| k.clone()).collect();
        if !negative.is_empty() {
            return Err(a.forbidden(&format!("quota usage is negative for resource(s): {}", negative.join(","))));
        }
        // An update is charged what it adds, to the quotas that counted the old object too.
        let previous = a.old.filter(|o| !meta::resource_version(o).is_empty()).map(|old| (old, evaluator.usage(old, now)));
        let nonzero = |d: Resources| -> Resources { d.into_iter().filter(|(_, v)| v.sign() != 0).collect() };
        let added = nonzero(previous.as_ref().map_or_else(|| usage.clone(), |(_, before)| quota::subtract_non_negative(&usage, before)));
        let deltas: Vec<Resources> = counting
            .iter()
            .map(|(q, _, _)| match &previous {
                Some((old, _)) if matches(&evaluator, q, old).unwrap_or(false) => added.clone(),
                _ => nonzero(usage.clone()),
            })
            .collect();
        // What adds nothing needs no quota.
        if (counting.is_empty() && added.is_empty()) || (!counting.is_empty() && deltas.iter().all(Resources::is_empty)) {
            return Ok(Vec::new());
        }
        let counted: Vec<String> = counting.iter().flat_map(|(_, hard, _)| evaluator.matching(&quota::names(hard))).collect();
        self.check_limited(a, &evaluator, obj, &usage, &counted, &scoped)?;
        let mut charges = Vec::new();
        for ((q, hard, used), delta) in counting.into_iter().zip(deltas) {
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
                // kube's plugin writes the quota's status through its loopback client, which
                // its managed fields name.
                crate::ssa::record_update(Some(q), &mut charged, crate::ssa::Typing::BuiltIn, crate::bootstrap::MANAGER, Some("status"), now);
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
