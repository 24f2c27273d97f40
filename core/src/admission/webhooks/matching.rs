//! Whether a webhook is called for a write, in kube's order (`ShouldCallHook`): the namespace
//! selector, the object selector and the rules are matched; a webhook none of whose rules
//! matches is skipped whatever its selectors; a selector that does not parse is then an error
//! (500, whatever the failure policy); last, `matchConditions`, whose errors go to the failure
//! policy (a 403 when it is `Fail`).

use serde_json::Value;

use std::sync::Arc;

use super::{Hook, Rule};
use crate::admission::{Attributes, Operation};
use crate::catalog::{Resource, ResourceInfo};
use crate::cel::cost::{self, Shape};
use crate::meta;
use crate::status::ApiError;

/// kube's names of the operations.
pub fn operation_name(op: Operation) -> &'static str {
    match op {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
    }
}

/// Whether the write is of core/v1 namespaces themselves.
fn is_namespaces(a: &Attributes) -> bool {
    a.info.group.is_empty() && a.info.resource == "namespaces"
}

/// The namespace kube's admission attributes carry: a namespace's own name for a write of a
/// namespace (its request path names it), the request's otherwise.
pub fn namespace_of<'a>(a: &'a Attributes, obj: Option<&'a Value>) -> &'a str {
    if !is_namespaces(a) {
        return a.namespace;
    }
    if a.name.is_empty() { obj.map(meta::name).unwrap_or_default() } else { a.name }
}

/// Whether one rule covers the write (`rules.Matcher`): the operation, group, version, the
/// resource with its subresource (`*` is every resource but no subresource, `pods/*` is pods
/// and each of its subresources, `*/*` everything), and the scope.
fn rule_matches(rule: &Rule, a: &Attributes, info: &ResourceInfo, namespace: &str) -> bool {
    let any_or = |items: &[String], wanted: &str| items.iter().any(|i| i == "*" || i == wanted);
    let subresource = a.subresource.unwrap_or_default();
    let resource = rule.resources.iter().any(|r| {
        let (res, sub) = r.split_once('/').unwrap_or((r, ""));
        (res == "*" || res == info.resource) && (sub == "*" || sub == subresource)
    });
    let cluster = is_namespaces(a) || namespace.is_empty();
    let scope = match rule.scope.as_str() {
        "*" | "" => true,
        "Cluster" => cluster,
        "Namespaced" => !cluster,
        _ => false,
    };
    scope && any_or(&rule.operations, operation_name(a.operation)) && any_or(&rule.groups, &info.group) && any_or(&rule.versions, &info.version) && resource
}

/// The labels of the namespace a write is in, as kube's namespace matcher reads them: those
/// of the namespace written itself (a create or update of a namespace), else of the namespace
/// looked up (404 when it does not exist).
fn namespace_labels<'a>(a: &'a Attributes, obj: Option<&'a Value>, namespace: &str) -> Result<Vec<(&'a str, &'a str)>, ApiError> {
    if is_namespaces(a) {
        let own = match a.operation {
            Operation::Create | Operation::Update if a.subresource.is_none() => obj,
            _ => a.old.or(obj),
        };
        return Ok(own.map(meta::labels).unwrap_or_default());
    }
    match &a.found.namespace {
        Some((ns, Some(found))) if ns == namespace => Ok(meta::labels(found)),
        _ => Err(ApiError::not_found(&crate::status::GroupResource::new("", "namespaces"), namespace)),
    }
}

/// Which resource a webhook is asked about: the one written, or (`matchPolicy: Equivalent`)
/// another version of it its rules name, the objects converted to that version.
#[derive(Clone, Copy, Debug)]
pub enum Invocation<'r> {
    Exact,
    Equivalent(&'r Arc<Resource>),
}

/// Whether the selectors and rules of `hook` cover the write (`obj`: the object as the hook
/// would see it), and as which resource: the written one if a rule names it, else the first
/// of `equivalents` (the resources stored alike) a rule names, rule by rule. Conditions are
/// checked apart ([`conditions_hold`]).
pub fn matches<'r>(hook: &Hook, a: &Attributes, obj: Option<&Value>, equivalents: &'r [Arc<Resource>]) -> Result<Option<Invocation<'r>>, ApiError> {
    let namespace = namespace_of(a, obj);
    let namespace_match = match &hook.namespace_selector {
        _ if namespace.is_empty() && !is_namespaces(a) => Ok(true),
        Err(e) => Err(ApiError::internal(e)),
        Ok(s) if s.is_empty() => Ok(true),
        Ok(s) => namespace_labels(a, obj, namespace).map(|labels| s.matches(&labels)),
    };
    if matches!(namespace_match, Ok(false)) {
        return Ok(None);
    }
    let object_match = match &hook.object_selector {
        Err(e) => Err(ApiError::internal(e)),
        Ok(s) if s.is_empty() => Ok(true),
        Ok(s) => {
            let labelled = |o: Option<&Value>| o.filter(|o| o.get("metadata").is_some_and(Value::is_object)).is_some_and(|o| s.matches(&meta::labels(o)));
            Ok(labelled(obj) || labelled(a.old))
        }
    };
    if matches!(object_match, Ok(false)) {
        return Ok(None);
    }
    let invocation = if hook.rules.iter().any(|r| rule_matches(r, a, a.info, namespace)) {
        Invocation::Exact
    } else {
        let equivalents = equivalents.iter().filter(|_| hook.equivalent);
        let mut found = hook.rules.iter().flat_map(|r| equivalents.clone().map(move |e| (r, e)));
        match found.find(|(r, e)| rule_matches(r, a, &e.info, namespace)) {
            Some((_, e)) => Invocation::Equivalent(e),
            None => return Ok(None),
        }
    };
    namespace_match?;
    object_match?;
    Ok(Some(invocation))
}

/// kube's evaluation of `matchConditions` over `object`, `oldObject` (as the webhook sees
/// them) and `request` (the
/// review's request without its uid and objects): false at the first that is false; the
/// errors of the others, to the failure policy: with `Fail` a 403, with `Ignore` the webhook
/// is skipped.
pub fn conditions_hold(hook: &Hook, a: &Attributes, (obj, old): (Option<&Value>, Option<&Value>), request: &Value) -> Result<bool, ApiError> {
    if hook.conditions.is_empty() {
        return Ok(true);
    }
    let variables = [("object", obj.cloned().unwrap_or(Value::Null)), ("oldObject", old.cloned().unwrap_or(Value::Null)), ("request", request.clone())];
    let shape: Vec<(&str, Shape)> = variables.iter().map(|(n, v)| (*n, Shape::of(&crate::cel::to_value(v)))).collect();
    let mut errors = Vec::new();
    for (source, condition) in &hook.conditions {
        let failed = |why: String| (source.clone(), why);
        let compiled = condition.as_ref().map_err(|e| failed(format!("compilation error: {e}")));
        let outcome = compiled.and_then(|c| {
            if cost::estimate(c, &shape) > cost::CALL_LIMIT {
                return Err(failed("operation cancelled: actual cost limit exceeded".into()));
            }
            match c.evaluate(variables.iter().map(|(n, v)| (*n, crate::cel::to_value(v))).collect()) {
                Ok(crate::cel::Value::Bool(b)) => Ok(b),
                Ok(other) => Err(failed(format!("expected bool, got {:?}", other.type_of()))),
                Err(e) => Err(failed(e)),
            }
        });
        match outcome {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err((source, why)) => errors.push(format!("expression '{source}' resulted in error: {why}")),
        }
    }
    match errors.is_empty() {
        true => Ok(true),
        false if hook.ignore_failures => Ok(false),
        false => Err(ApiError::forbidden(&a.info.group_resource(), super::review::request_name(a, obj), &crate::authz::rbac::aggregate(&errors))),
    }
}
