//! LimitRanger: the LimitRanges of a namespace give its new pods' containers their default
//! requests and limits (and say so in the `kubernetes.io/limit-ranger` annotation), and bound
//! what containers, pods and persistent volume claims may ask for (`min`, `max`,
//! `maxLimitRequestRatio`), as kube v1.33's plugin does: pods on create (and `pods/resize`),
//! claims on create and update; the first LimitRange a request breaks refuses it, 403 with
//! kube's words.

use serde_json::{Map, Value};

use super::{Attributes, Lookup, Operation, Pending, Plugin};
use crate::meta;
use crate::quantity::Quantity;
use crate::quota::{Resources, pod_total, read as resources};
use crate::rand::Rng;
use crate::status::ApiError;

const ANNOTATION: &str = "kubernetes.io/limit-ranger";

#[derive(Debug)]
pub struct LimitRanger;

/// What the plugin looks at: a pod (created, or resized) or a claim (created or updated).
#[derive(Clone, Copy, PartialEq)]
enum Subject {
    Pod,
    Claim,
}

fn subject(info: &crate::catalog::ResourceInfo, subresource: Option<&str>, op: Operation) -> Option<Subject> {
    if !info.group.is_empty() {
        return None;
    }
    match (info.resource.as_str(), subresource, op) {
        ("pods", Some("resize"), Operation::Update) | ("pods", None, Operation::Create) => Some(Subject::Pod),
        ("persistentvolumeclaims", None, Operation::Create | Operation::Update) => Some(Subject::Claim),
        _ => None,
    }
}

impl Plugin for LimitRanger {
    fn name(&self) -> &'static str {
        "LimitRanger"
    }

    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Update)
    }

    fn lookups(&self, request: &Pending) -> Vec<Lookup> {
        match (subject(request.info, request.subresource, request.operation), request.namespace) {
            (Some(_), Some(ns)) => vec![Lookup::LimitRanges(ns.to_string())],
            _ => Vec::new(),
        }
    }

    fn admit(&self, a: &Attributes, obj: Option<&mut Value>, _rng: &mut Rng) -> Result<(), ApiError> {
        let (Some(Subject::Pod), Some(pod)) = (self.applies(a), obj) else { return Ok(()) };
        for range in &a.found.limit_ranges {
            default_containers(range, pod);
        }
        Ok(())
    }

    fn validate(&self, a: &Attributes, obj: Option<&Value>, _warnings: &mut Vec<String>) -> Result<(), ApiError> {
        let (Some(subject), Some(obj)) = (self.applies(a), obj) else { return Ok(()) };
        for range in &a.found.limit_ranges {
            let errors = check(range, subject, obj);
            if !errors.is_empty() {
                return Err(a.forbidden(&crate::authz::rbac::aggregate(&errors)));
            }
        }
        Ok(())
    }
}

impl LimitRanger {
    /// What a request is to the plugin, if anything (an object being deleted is not).
    fn applies(&self, a: &Attributes) -> Option<Subject> {
        if a.old.is_some_and(|o| meta::deletion_timestamp(o).is_some()) {
            return None;
        }
        subject(a.info, a.subresource, a.operation)
    }
}

/// The items of a LimitRange of one type.
fn items<'a>(range: &'a Value, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    meta::at(range, &["spec", "limits"]).and_then(Value::as_array).into_iter().flatten().filter(move |i| i.get("type").and_then(Value::as_str) == Some(kind))
}

/// The defaults a LimitRange gives containers: its `Container` items' `defaultRequest` and
/// `default`, a later item's over an earlier one's.
fn container_defaults(range: &Value) -> (Map<String, Value>, Map<String, Value>) {
    let (mut requests, mut limits) = (Map::new(), Map::new());
    for item in items(range, "Container") {
        for (from, into) in [("defaultRequest", &mut requests), ("default", &mut limits)] {
            for (k, v) in item.get(from).and_then(Value::as_object).into_iter().flatten() {
                into.insert(k.clone(), v.clone());
            }
        }
    }
    (requests, limits)
}

/// kube's `mergeContainerResources` over the pod's containers and init containers, and the
/// annotation that says what was set.
fn default_containers(range: &Value, pod: &mut Value) {
    let (requests, limits) = container_defaults(range);
    if requests.is_empty() && limits.is_empty() {
        return;
    }
    let mut said = Vec::new();
    for (list, prefix) in [("containers", "container"), ("initContainers", "init container")] {
        let Some(Value::Array(containers)) = meta::object_at(pod, &["spec"]).get_mut(list) else { continue };
        for c in containers.iter_mut() {
            let name = c.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
            let mut set = |field: &str, defaults: &Map<String, Value>| {
                let own = meta::object_at(c, &["resources", field]);
                let mut added: Vec<&str> = defaults.iter().filter(|(k, _)| !own.contains_key(*k)).map(|(k, _)| k.as_str()).collect();
                for k in &added {
                    own.insert(k.to_string(), defaults[*k].clone());
                }
                if own.is_empty() {
                    meta::object_at(c, &["resources"]).remove(field);
                }
                added.sort();
                added.iter().map(|s| s.to_string()).collect::<Vec<_>>()
            };
            let (req, lim) = (set("requests", &requests), set("limits", &limits));
            if !req.is_empty() {
                said.push(format!("{} request for {prefix} {name}", req.join(", ")));
            }
            if !lim.is_empty() {
                said.push(format!("{} limit for {prefix} {name}", lim.join(", ")));
            }
        }
    }
    if !said.is_empty() {
        meta::object_at(pod, &["metadata", "annotations"]).insert(ANNOTATION.into(), Value::String(format!("LimitRanger plugin set: {}", said.join("; "))));
    }
}

/// The errors of an object against one LimitRange, in the order of its items.
fn check(range: &Value, subject: Subject, obj: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    match subject {
        Subject::Pod => {
            for item in items(range, "Container") {
                for list in ["containers", "initContainers"] {
                    for c in meta::at(obj, &["spec", list]).and_then(Value::as_array).into_iter().flatten() {
                        let (req, lim) = (resources(meta::at(c, &["resources", "requests"])), resources(meta::at(c, &["resources", "limits"])));
                        bounds(item, "Container", &req, &lim, false, &mut errors);
                    }
                }
            }
            for item in items(range, "Pod") {
                // What the pod's containers ask for together, from the spec (kube's `podRequests`/`podLimits`).
                let of = |field: &'static str| move |c: &Value| resources(meta::at(c, &["resources", field]));
                let (req, lim) = (pod_total(obj, of("requests")), pod_total(obj, of("limits")));
                bounds(item, "Pod", &req, &lim, false, &mut errors);
            }
        }
        Subject::Claim => {
            for item in items(range, "PersistentVolumeClaim") {
                let req = resources(meta::at(obj, &["spec", "resources", "requests"]));
                bounds(item, "PersistentVolumeClaim", &req, &Resources::new(), true, &mut errors);
            }
        }
    }
    errors
}

/// kube's `minConstraint`, `maxConstraint` (`maxRequestConstraint` for a claim, `request_only`)
/// and `limitRequestRatioConstraint` of one item.
fn bounds(item: &Value, kind: &str, req: &Resources, lim: &Resources, request_only: bool, errors: &mut Vec<String>) {
    let s = |q: &Quantity| q.canonical();
    for (k, min) in resources(item.get("min")) {
        let prefix = format!("minimum {k} usage per {kind} is {}", s(&min));
        match (req.get(&k), lim.get(&k)) {
            (None, _) => errors.push(format!("{prefix}.  No request is specified")),
            (Some(r), _) if *r < min => errors.push(format!("{prefix}, but request is {}", s(r))),
            (_, Some(l)) if *l < min => errors.push(format!("{prefix}, but limit is {}", s(l))),
            _ => {}
        }
    }
    for (k, max) in resources(item.get("max")) {
        let prefix = format!("maximum {k} usage per {kind} is {}", s(&max));
        if request_only {
            match req.get(&k) {
                None => errors.push(format!("{prefix}.  No request is specified")),
                Some(r) if *r > max => errors.push(format!("{prefix}, but request is {}", s(r))),
                _ => {}
            }
            continue;
        }
        match (req.get(&k), lim.get(&k)) {
            (_, None) => errors.push(format!("{prefix}.  No limit is specified")),
            (_, Some(l)) if *l > max => errors.push(format!("{prefix}, but limit is {}", s(l))),
            (Some(r), _) if *r > max => errors.push(format!("{prefix}, but request is {}", s(r))),
            _ => {}
        }
    }
    if request_only {
        return;
    }
    for (k, ratio) in resources(item.get("maxLimitRequestRatio")) {
        let prefix = format!("{k} max limit to request ratio per {kind} is {}", s(&ratio));
        let (r, l) = (req.get(&k).map_or(0, Quantity::milli_value), lim.get(&k).map_or(0, Quantity::milli_value));
        if r == 0 {
            errors.push(format!("{prefix}, but no request is specified or request is 0"));
        } else if l == 0 {
            errors.push(format!("{prefix}, but no limit is specified or limit is 0"));
        } else {
            let observed = l as f64 / r as f64;
            if observed * 1000.0 > ratio.milli_value() as f64 {
                errors.push(format!("{prefix}, but provided ratio is {observed:.6}"));
            }
        }
    }
}

#[cfg(test)]
mod tests;
