//! scheduling.k8s.io/v1 priorityclasses, and the two system classes kube-apiserver creates at
//! start (`pkg/apis/scheduling/v1/helpers.go`).

use serde_json::{Value, json};

use super::{info, serve};
use crate::catalog::{Resource, Strategy};
use crate::meta;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};
use crate::validation::supported;

pub fn resource() -> Resource {
    let mut i = info("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", false);
    i.short_names = crate::catalog::names(&["pc"]);
    i.singular = "priorityclass".into();
    serve(i, PriorityClasses)
}

/// The largest value a class a user creates may have (`HighestUserDefinablePriority`).
const HIGHEST_USER_PRIORITY: i64 = 1_000_000_000;

/// The system classes: name, value, description.
pub const SYSTEM_CLASSES: &[(&str, i64, &str)] = &[
    ("system-node-critical", 2_000_001_000, "Used for system critical pods that must not be moved from their current node."),
    ("system-cluster-critical", 2_000_000_000, "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."),
];

/// A system class as kube-apiserver creates it.
pub fn system_class((name, value, description): (&str, i64, &str)) -> Value {
    json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value, "description": description})
}

struct PriorityClasses;

const DEF: &str = "io.k8s.api.scheduling.v1.PriorityClass";
const COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Value", "integer", Describe::Field(DEF, "value")),
    Column::new("Global-Default", "boolean", Describe::Field(DEF, "globalDefault")),
    Column::AGE,
    Column::new("PreemptionPolicy", "string", Describe::Field(DEF, "preemptionPolicy")),
];

impl Strategy for PriorityClasses {
    fn default(&self, obj: &mut Value) {
        if let Some(m) = obj.as_object_mut() {
            m.entry("preemptionPolicy").or_insert_with(|| json!("PreemptLowerPriority"));
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        meta::set_meta(obj, "generation", json!(1));
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let name = meta::name(obj);
        let value = obj.get("value").and_then(Value::as_i64).unwrap_or(0);
        let global = obj.get("globalDefault").and_then(Value::as_bool).unwrap_or(false);
        if name.starts_with("system-") {
            let why = match SYSTEM_CLASSES.iter().find(|(n, ..)| *n == name) {
                None => Some(format!("{name} is not a known system priority class")),
                Some((_, v, _)) if *v != value => Some(format!("value of {name} PriorityClass must be {v}")),
                Some(_) if global => Some(format!("globalDefault of {name} PriorityClass must be false")),
                Some(_) => None,
            };
            if let Some(why) = why {
                errs.push(FieldError::forbidden(
                    "metadata.name",
                    format!("priority class names with 'system-' prefix are reserved for system use only. error: {why}"),
                ));
            }
        } else if value > HIGHEST_USER_PRIORITY {
            errs.push(FieldError::forbidden("value", format!("maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}")));
        }
        match obj.get("preemptionPolicy") {
            Some(Value::String(s)) if s.is_empty() => errs.push(FieldError::required("preemptionPolicy", "")),
            p => supported(&mut errs, p, "preemptionPolicy", &["Never", "PreemptLowerPriority"]),
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if new.get("value") != old.get("value") {
            errs.push(FieldError::forbidden("value", "may not be changed in an update."));
        }
        errs.extend(crate::validation::immutable(new, old, &["preemptionPolicy"], "preemptionPolicy"));
        errs
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        vec![
            json!(meta::name(obj)),
            json!(table::int_at(obj, &["value"])),
            json!(obj.get("globalDefault").and_then(Value::as_bool).unwrap_or(false)),
            table::age(obj, now),
            json!(table::str_or(obj, &["preemptionPolicy"], "")),
        ]
    }
}
