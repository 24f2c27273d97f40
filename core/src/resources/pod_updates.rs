//! What the pod subresources that change a running pod may change: `ephemeralcontainers`
//! (debug containers, added only) and `resize` (cpu and memory in place).

use serde_json::{Value, json};

use super::podspec::qos_class;
use crate::status::FieldError;

fn named<'a>(spec: &'a Value, list: &str) -> Vec<(&'a str, &'a Value)> {
    spec.get(list).and_then(Value::as_array).into_iter().flatten().map(|c| (c.get("name").and_then(Value::as_str).unwrap_or_default(), c)).collect()
}

/// An update of `pods/ephemeralcontainers`: containers may be added, never changed or removed,
/// and each needs a name no other container has and an image.
pub fn validate_ephemeral_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let (new_spec, old_spec) = (new.get("spec").unwrap_or(&Value::Null), old.get("spec").unwrap_or(&Value::Null));
    let current = named(new_spec, "ephemeralContainers");
    for (name, c) in named(old_spec, "ephemeralContainers") {
        match current.iter().find(|(n, _)| *n == name) {
            None => errs.push(FieldError::forbidden("spec.ephemeralContainers", format!("existing ephemeral containers {name:?} may not be removed"))),
            Some((_, now)) if *now != c => {
                errs.push(FieldError::forbidden("spec.ephemeralContainers", format!("existing ephemeral containers {name:?} may not be changed")))
            }
            Some(_) => {}
        }
    }
    let mut names: Vec<&str> = named(new_spec, "initContainers").into_iter().chain(named(new_spec, "containers")).map(|(n, _)| n).collect();
    for (i, (name, c)) in current.iter().enumerate() {
        let at = format!("spec.ephemeralContainers[{i}]");
        if name.is_empty() {
            errs.push(FieldError::required(format!("{at}.name"), ""));
        } else if names.contains(name) {
            errs.push(FieldError::duplicate(format!("{at}.name"), json!(name)));
        }
        names.push(name);
        if c.get("image").and_then(Value::as_str).is_none_or(str::is_empty) {
            errs.push(FieldError::required(format!("{at}.image"), ""));
        }
        for field in ["ports", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle", "resources"] {
            if c.get(field).is_some_and(|v| !v.is_null() && v != &json!({}) && v != &json!([])) {
                errs.push(FieldError::forbidden(format!("{at}.{field}"), "cannot be set for an Ephemeral Container"));
            }
        }
    }
    errs
}

/// An update of `pods/resize` (`ValidatePodResize`): only containers' cpu and memory change,
/// and the pod's QoS class stays as it is.
pub fn validate_resize(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let without_cpu_memory = |pod: &Value| {
        let mut spec = pod.get("spec").cloned().unwrap_or_default();
        for list in ["containers", "initContainers"] {
            for c in spec.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
                if let Some(Value::Object(r)) = c.get_mut("resources") {
                    for kind in ["requests", "limits"] {
                        if let Some(Value::Object(q)) = r.get_mut(kind) {
                            q.remove("cpu");
                            q.remove("memory");
                            if q.is_empty() {
                                r.remove(kind);
                            }
                        }
                    }
                }
                if let Some(m) = c.as_object_mut() {
                    m.remove("resizePolicy");
                    if m.get("resources").is_some_and(|r| r == &json!({})) {
                        m.remove("resources");
                    }
                }
            }
        }
        spec
    };
    if without_cpu_memory(new) != without_cpu_memory(old) {
        errs.push(FieldError::forbidden("spec", "only cpu and memory resources are mutable"));
    }
    let (before, after) = (qos_class(old.get("spec").unwrap_or(&Value::Null)), qos_class(new.get("spec").unwrap_or(&Value::Null)));
    if before != after {
        errs.push(FieldError::invalid("metadata", json!(after), "Pod QOS Class may not change as a result of resizing"));
    }
    errs
}
