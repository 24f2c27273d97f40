//! policy/v1 poddisruptionbudgets (+`status`): kube's `pkg/registry/policy/poddisruptionbudget`
//! and `ValidatePodDisruptionBudget`. Evictions read them (`pods/eviction`).

use serde_json::{Value, json};

use super::{info, serve, status_subresource};
use crate::catalog::{Lifecycle, Resource, Strategy};
use crate::meta;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};
use crate::validation::{NameCheck, label_selector, path_segment_name, supported};

pub fn resource() -> Resource {
    let mut i = info("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", true);
    i.short_names = crate::catalog::names(&["pdb"]);
    i.subresources = vec![status_subresource(&i)];
    serve(i, Budgets)
}

/// policy/v1beta1, behind `--runtime-config`.
pub fn v1beta1() -> Resource {
    super::legacy::pod_disruption_budgets(&resource().info, Budgets)
}

struct Budgets;

const COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Min Available", "string", Describe::Text("The minimum number of pods that must be available.")),
    Column::new("Max Unavailable", "string", Describe::Text("The maximum number of pods that may be unavailable.")),
    Column::new("Allowed Disruptions", "integer", Describe::Text("Calculated number of pods that may be disrupted at this time.")),
    Column::AGE,
];

const PERCENT: &str =
    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";

/// `ValidatePositiveIntOrPercent` and `IsNotMoreThan100Percent`.
pub(crate) fn int_or_percent(v: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    match v {
        Some(Value::Number(n)) if n.as_i64().unwrap_or(0) < 0 => errs.push(FieldError::invalid(path, json!(n), "must be greater than or equal to 0")),
        Some(Value::String(s)) => match s.strip_suffix('%').filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())) {
            None => errs.push(FieldError::invalid(path, json!(s), PERCENT)),
            Some(d) if d.parse::<u64>().map_or(true, |p| p > 100) => errs.push(FieldError::invalid(path, json!(s), "must not be greater than 100%")),
            Some(_) => {}
        },
        _ => {}
    }
}

impl Strategy for Budgets {
    fn name_check(&self) -> NameCheck {
        path_segment_name
    }

    fn lifecycle(&self) -> Lifecycle {
        Lifecycle::StatusAndGeneration
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let (min, max) = (meta::at(obj, &["spec", "minAvailable"]), meta::at(obj, &["spec", "maxUnavailable"]));
        if min.is_some() && max.is_some() {
            errs.push(FieldError::invalid("spec", obj["spec"].clone(), "minAvailable and maxUnavailable cannot be both set"));
        }
        int_or_percent(min, "spec.minAvailable", &mut errs);
        int_or_percent(max, "spec.maxUnavailable", &mut errs);
        errs.extend(label_selector(meta::at(obj, &["spec", "selector"]), "spec.selector"));
        supported(&mut errs, meta::at(obj, &["spec", "unhealthyPodEvictionPolicy"]), "spec.unhealthyPodEvictionPolicy", &["AlwaysAllow", "IfHealthyBudget"]);
        errs
    }

    fn validate_subresource_update(&self, _subresource: &str, new: &Value, _old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        for field in ["disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"] {
            if let Some(n) = meta::at(new, &["status", field]).and_then(Value::as_i64)
                && n < 0
            {
                errs.push(FieldError::invalid(format!("status.{field}"), json!(n), "must be greater than or equal to 0"));
            }
        }
        errs
    }

    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let cell = |f: &str| match meta::at(obj, &["spec", f]) {
            Some(Value::Number(n)) => n.to_string(),
            Some(Value::String(s)) => s.clone(),
            _ => "N/A".into(),
        };
        vec![
            json!(meta::name(obj)),
            json!(cell("minAvailable")),
            json!(cell("maxUnavailable")),
            json!(table::int_at(obj, &["status", "disruptionsAllowed"])),
            table::age(obj, now),
        ]
    }
}
