//! `ValidateLabelSelector` (apimachinery `metav1/validation`): operators, keys and values of a
//! `metav1.LabelSelector`, with kube's paths and messages.

use serde_json::Value;

use super::{label_value, labels, qualified_name};
use crate::status::FieldError;

/// The checks of the label selector `sel` at `path` (nothing for an absent selector).
pub fn label_selector(sel: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(sel) = sel.filter(|s| !s.is_null()) else { return errs };
    for (i, req) in sel.get("matchExpressions").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let at = format!("{path}.matchExpressions[{i}]");
        let values = req.get("values").and_then(Value::as_array).map_or(0, Vec::len);
        match req.get("operator").and_then(Value::as_str).unwrap_or_default() {
            "In" | "NotIn" if values == 0 => errs.push(FieldError::required(format!("{at}.values"), "must be specified when `operator` is 'In' or 'NotIn'")),
            "In" | "NotIn" => {}
            "Exists" | "DoesNotExist" if values > 0 => {
                errs.push(FieldError::forbidden(format!("{at}.values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
            }
            "Exists" | "DoesNotExist" => {}
            _ => errs.push(FieldError::invalid(format!("{at}.operator"), req.get("operator").cloned().unwrap_or_default(), "not a valid selector operator")),
        }
        let key = req.get("key").and_then(Value::as_str).unwrap_or_default();
        for msg in qualified_name(key) {
            errs.push(FieldError::invalid(format!("{at}.key"), Value::from(key), msg));
        }
        for (j, v) in req.get("values").and_then(Value::as_array).into_iter().flatten().enumerate() {
            for msg in label_value(v.as_str().unwrap_or_default()) {
                errs.push(FieldError::invalid(format!("{at}.values[{j}]"), v.clone(), msg));
            }
        }
    }
    errs.extend(labels(sel.get("matchLabels"), &format!("{path}.matchLabels")));
    errs
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn operators_and_values() {
        let sel = json!({"matchExpressions": [
            {"key": "a", "operator": "In"},
            {"key": "b", "operator": "Exists", "values": ["x"]},
            {"key": "c", "operator": "Near", "values": ["x"]},
            {"key": "d", "operator": "NotIn", "values": ["ok"]}]});
        let errs: Vec<String> = label_selector(Some(&sel), "spec.selector").iter().map(|e| format!("{} {}", e.field, e.detail)).collect();
        assert_eq!(
            errs,
            [
                "spec.selector.matchExpressions[0].values must be specified when `operator` is 'In' or 'NotIn'",
                "spec.selector.matchExpressions[1].values may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                "spec.selector.matchExpressions[2].operator not a valid selector operator",
            ]
        );
    }
}
