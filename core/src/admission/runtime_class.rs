//! RuntimeClass: a new pod that names a RuntimeClass gets the class's pod overhead and
//! scheduling (its node selector, which may not contradict the pod's, and its tolerations,
//! merged), and a class that does not exist refuses the pod, as kube v1.33's plugin does.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{Attributes, Lookup, Operation, Pending, Plugin};
use crate::meta;
use crate::quantity::Quantity;
use crate::rand::Rng;
use crate::status::ApiError;

const MISMATCH: &str = "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead";

#[derive(Debug)]
pub struct RuntimeClass;

fn class_name(pod: &Value) -> Option<&str> {
    meta::str_at(pod, &["spec", "runtimeClassName"])
}

/// Two resource lists that say the same quantities (kube's semantic equality).
fn same_resources(a: &Map<String, Value>, b: &Map<String, Value>) -> bool {
    let parsed =
        |m: &Map<String, Value>| -> BTreeMap<String, Option<Quantity>> { m.iter().map(|(k, v)| (k.clone(), v.as_str().and_then(Quantity::parse))).collect() };
    let (a, b) = (parsed(a), parsed(b));
    a.len() == b.len()
        && a.iter().all(|(k, q)| {
            b.get(k).is_some_and(|r| match (q, r) {
                (Some(q), Some(r)) => q.partial_cmp(r) == Some(std::cmp::Ordering::Equal),
                _ => false,
            })
        })
}

impl RuntimeClass {
    /// The RuntimeClass the pod names, if it names one; kube's 403 when it does not exist.
    fn class<'a>(&self, a: &'a Attributes, pod: &Value) -> Result<Option<&'a Value>, ApiError> {
        let Some(name) = class_name(pod) else { return Ok(None) };
        match &a.found.runtime_class {
            Some(Some(class)) => Ok(Some(class)),
            _ => Err(a.forbidden(&format!("pod rejected: RuntimeClass {} not found", crate::status::quote(name)))),
        }
    }
}

impl Plugin for RuntimeClass {
    fn name(&self) -> &'static str {
        "RuntimeClass"
    }

    fn handles(&self, op: Operation) -> bool {
        op == Operation::Create
    }

    fn lookups(&self, request: &Pending) -> Vec<Lookup> {
        let pods = request.info.group.is_empty() && request.info.resource == "pods" && request.subresource.is_none();
        match request.object.and_then(class_name) {
            Some(name) if pods => vec![Lookup::RuntimeClass(name.to_string())],
            _ => Vec::new(),
        }
    }

    fn admit(&self, a: &Attributes, obj: Option<&mut Value>, _rng: &mut Rng) -> Result<(), ApiError> {
        let Some(pod) = obj.filter(|_| a.is_core("pods")) else { return Ok(()) };
        let Some(class) = self.class(a, pod)? else { return Ok(()) };
        if let Some(fixed) = overhead(class) {
            let own = meta::at(pod, &["spec", "overhead"]).and_then(Value::as_object);
            if own.is_some_and(|o| !o.is_empty() && !same_resources(o, &fixed)) {
                return Err(a.forbidden(MISMATCH));
            }
            let spec = meta::object_at(pod, &["spec"]);
            if fixed.is_empty() {
                spec.remove("overhead")
            } else {
                spec.insert("overhead".into(), Value::Object(fixed))
            };
        }
        let Some(scheduling) = class.get("scheduling") else { return Ok(()) };
        if let Some(selector) = scheduling.get("nodeSelector").and_then(Value::as_object) {
            let own = meta::object_at(pod, &["spec", "nodeSelector"]);
            for (k, v) in selector {
                match own.get(k) {
                    Some(mine) if mine != v => {
                        let text = |x: &Value| x.as_str().unwrap_or_default().to_string();
                        return Err(a.forbidden(&format!(
                            "conflict: runtimeClass.scheduling.nodeSelector[{k}] = {}; pod.spec.nodeSelector[{k}] = {}",
                            text(v),
                            text(mine)
                        )));
                    }
                    _ => {
                        own.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        if let Some(Value::Array(theirs)) = scheduling.get("tolerations") {
            let spec = meta::object_at(pod, &["spec"]);
            let mine = spec.get("tolerations").and_then(Value::as_array).cloned().unwrap_or_default();
            let merged = super::tolerations::merge(&mine, theirs);
            if !merged.is_empty() {
                spec.insert("tolerations".into(), Value::Array(merged));
            }
        }
        Ok(())
    }

    fn validate(&self, a: &Attributes, obj: Option<&Value>, _warnings: &mut Vec<String>) -> Result<(), ApiError> {
        let Some(pod) = obj.filter(|_| a.is_core("pods")) else { return Ok(()) };
        let Some(own) = meta::at(pod, &["spec", "overhead"]).and_then(Value::as_object).filter(|o| !o.is_empty()) else { return Ok(()) };
        match self.class(a, pod)?.and_then(overhead) {
            Some(fixed) if !same_resources(own, &fixed) => Err(a.forbidden(MISMATCH)),
            Some(_) => Ok(()),
            None => Err(a.forbidden("pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead")),
        }
    }
}

/// The pod overhead a class defines, where it has `overhead` (its `podFixed`, maybe none).
fn overhead(class: &Value) -> Option<Map<String, Value>> {
    class.get("overhead").map(|o| o.get("podFixed").and_then(Value::as_object).cloned().unwrap_or_default())
}
