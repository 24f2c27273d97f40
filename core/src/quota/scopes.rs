//! The scopes a quota is limited to: `spec.scopes` and `spec.scopeSelector`, and which pods
//! fall in them (kube's `podMatchesScopeFunc`).

use serde_json::Value;

use crate::meta;

/// One of a quota's scopes (kube's `ScopedResourceSelectorRequirement`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeSelector {
    pub scope_name: String,
    pub operator: String,
    pub values: Vec<String>,
}

/// A quota's scopes: each of `spec.scopes` (as `Exists`), then `spec.scopeSelector`'s
/// expressions.
pub fn selectors(quota: &Value) -> Vec<ScopeSelector> {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    let scopes = meta::at(quota, &["spec", "scopes"]).and_then(Value::as_array).into_iter().flatten();
    let mut out: Vec<ScopeSelector> =
        scopes.filter_map(Value::as_str).map(|name| ScopeSelector { scope_name: name.to_string(), operator: "Exists".into(), values: Vec::new() }).collect();
    for e in meta::at(quota, &["spec", "scopeSelector", "matchExpressions"]).and_then(Value::as_array).into_iter().flatten() {
        let values = e.get("values").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect();
        out.push(ScopeSelector { scope_name: s(e, "scopeName"), operator: s(e, "operator"), values });
    }
    out
}

impl ScopeSelector {
    /// As Go's `%v` prints it: `{PriorityClass In [high low]}`.
    pub fn go_format(&self) -> String {
        format!("{{{} {} [{}]}}", self.scope_name, self.operator, self.values.join(" "))
    }

    /// Whether a pod falls in this scope.
    pub(super) fn matches_pod(&self, pod: &Value) -> Result<bool, String> {
        Ok(match self.scope_name.as_str() {
            "Terminating" => super::evaluators::terminating(pod),
            "NotTerminating" => !super::evaluators::terminating(pod),
            "BestEffort" => best_effort(pod),
            "NotBestEffort" => !best_effort(pod),
            "PriorityClass" => {
                let class = meta::str_at(pod, &["spec", "priorityClassName"]).filter(|c| !c.is_empty());
                match self.operator.as_str() {
                    "Exists" => class.is_some(),
                    "DoesNotExist" => class.is_none(),
                    "In" => class.is_some_and(|c| self.values.iter().any(|v| v == c)),
                    "NotIn" => class.is_none_or(|c| !self.values.iter().any(|v| v == c)),
                    other => return Err(format!("failed to parse and convert selector: {other:?} is not a valid scope selector operator")),
                }
            }
            "CrossNamespacePodAffinity" => cross_namespace_affinity(pod),
            _ => false,
        })
    }
}

/// kube's `GetPodQOS` is `BestEffort`: the pod's `status.qosClass`, else no container asks
/// for or is limited to any cpu or memory.
fn best_effort(pod: &Value) -> bool {
    if let Some(class) = meta::str_at(pod, &["status", "qosClass"]).filter(|c| !c.is_empty()) {
        return class == "BestEffort";
    }
    let containers =
        ["containers", "initContainers"].into_iter().flat_map(|f| meta::at(pod, &["spec", f]).and_then(Value::as_array).cloned().unwrap_or_default());
    !containers.into_iter().any(|c| {
        ["requests", "limits"].iter().any(|f| {
            let list = super::read(meta::at(&c, &["resources", f]));
            ["cpu", "memory"].iter().any(|r| list.get(*r).is_some_and(|q| q.sign() != 0))
        })
    })
}

/// Whether any of a pod's affinity terms reaches other namespaces (`namespaces` or a
/// `namespaceSelector`, even an empty one).
fn cross_namespace_affinity(pod: &Value) -> bool {
    let crosses =
        |t: &Value| t.get("namespaces").and_then(Value::as_array).is_some_and(|n| !n.is_empty()) || t.get("namespaceSelector").is_some_and(|s| !s.is_null());
    ["podAffinity", "podAntiAffinity"].iter().any(|kind| {
        let Some(a) = meta::at(pod, &["spec", "affinity", kind]) else { return false };
        let required = a.get("requiredDuringSchedulingIgnoredDuringExecution").and_then(Value::as_array).into_iter().flatten();
        let preferred =
            a.get("preferredDuringSchedulingIgnoredDuringExecution").and_then(Value::as_array).into_iter().flatten().filter_map(|w| w.get("podAffinityTerm"));
        required.chain(preferred).any(crosses)
    })
}
