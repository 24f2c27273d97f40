//! node.k8s.io/v1 runtimeclasses: kube's `pkg/registry/node/runtimeclass`.

use serde_json::{Value, json};

use super::{info, serve};
use crate::catalog::{Resource, Strategy};
use crate::meta;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};
use crate::validation::{dns1123_label, immutable};

pub fn resource() -> Resource {
    let mut i = info("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses", false);
    i.singular = "runtimeclass".into();
    serve(i, RuntimeClasses)
}

struct RuntimeClasses;

/// kube describes the handler column with a field ObjectMeta does not have: an empty text.
const COLUMNS: &[Column] = &[Column::NAME, Column::new("Handler", "string", Describe::Text("")), Column::AGE];

impl Strategy for RuntimeClasses {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let handler = obj.get("handler").and_then(Value::as_str).unwrap_or_default();
        for msg in dns1123_label(handler) {
            errs.push(FieldError::invalid("handler", json!(handler), msg));
        }
        errs.extend(crate::validation::labels(meta::at(obj, &["scheduling", "nodeSelector"]), "scheduling.nodeSelector"));
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(immutable(new, old, &["handler"], "handler"));
        errs
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }

    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        vec![json!(meta::name(obj)), json!(table::str_or(obj, &["handler"], "")), table::age(obj, now)]
    }
}
