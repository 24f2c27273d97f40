//! ExtendedResourceToleration (off by default): a pod that requests an extended resource
//! (`example.com/gpu`: a name with a domain other than `kubernetes.io`'s) tolerates the
//! `NoSchedule` taint of that name, so that it may run on the nodes tainted for it (kube's
//! `{key: <resource>, operator: Exists, effect: NoSchedule}`, replacing those that differ only
//! in `tolerationSeconds`).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::{Attributes, Operation, Plugin};
use crate::meta;
use crate::rand::Rng;
use crate::status::ApiError;

#[derive(Debug)]
pub struct ExtendedResourceToleration;

/// kube's `IsExtendedResourceName`: not native (a name with a domain, not `kubernetes.io`'s),
/// not a quota's `requests.` name, and a qualified name with that prefix.
fn is_extended(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    !native && !name.starts_with("requests.") && crate::validation::qualified_name(&format!("requests.{name}")).is_empty()
}

impl Plugin for ExtendedResourceToleration {
    fn name(&self) -> &'static str {
        "ExtendedResourceToleration"
    }

    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Update)
    }

    fn admit(&self, a: &Attributes, obj: Option<&mut Value>, _rng: &mut Rng) -> Result<(), ApiError> {
        let Some(pod) = obj.filter(|_| a.is_core("pods")) else { return Ok(()) };
        let mut resources: BTreeSet<String> = BTreeSet::new();
        for list in ["containers", "initContainers"] {
            for container in meta::at(pod, &["spec", list]).and_then(Value::as_array).into_iter().flatten() {
                let requests = meta::at(container, &["resources", "requests"]).and_then(Value::as_object);
                resources.extend(requests.into_iter().flatten().map(|(name, _)| name).filter(|n| is_extended(n)).cloned());
            }
        }
        if resources.is_empty() {
            return Ok(());
        }
        let spec = meta::object_at(pod, &["spec"]);
        let Value::Array(tolerations) = spec.entry("tolerations").or_insert_with(|| json!([])) else { return Ok(()) };
        for resource in resources {
            let wanted = json!({"key": resource, "operator": "Exists", "effect": "NoSchedule"});
            // kube's `MatchToleration`: the same key, operator, value and effect.
            let same = |t: &Value| {
                ["key", "operator", "value", "effect"].iter().all(|f| t.get(*f).and_then(Value::as_str).unwrap_or("") == wanted[*f].as_str().unwrap_or(""))
            };
            let mut replaced = false;
            for t in tolerations.iter_mut().filter(|t| same(t)) {
                *t = wanted.clone();
                replaced = true;
            }
            if !replaced {
                tolerations.push(wanted);
            }
        }
        Ok(())
    }
}
