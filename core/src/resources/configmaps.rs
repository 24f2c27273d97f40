//! core/v1 configmaps.

use serde_json::{Value, json};

use super::{info, serve};
use crate::catalog::{Resource, Strategy};
use crate::meta;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};
use crate::validation::config_map_key;

/// The total size of a ConfigMap's or Secret's data (`MaxSecretSize`, `MaxConfigMapSize`).
pub const MAX_DATA_SIZE: usize = 1024 * 1024;

pub fn resource() -> Resource {
    let mut i = info("", "v1", "ConfigMap", "configmaps", true);
    i.short_names = crate::catalog::names(&["cm"]);
    serve(i, ConfigMaps)
}

struct ConfigMaps;

const COLUMNS: &[Column] = &[Column::NAME, Column::new("Data", "integer", Describe::Field("io.k8s.api.core.v1.ConfigMap", "data")), Column::AGE];

/// Keys of `data` and `binaryData`, valid and not in both.
pub(super) fn validate_data_keys(obj: &Value, fields: &[&str], errs: &mut Vec<FieldError>) -> usize {
    let mut total = 0;
    let mut seen = std::collections::BTreeSet::<&str>::new();
    for field in fields {
        for (k, v) in obj.get(*field).and_then(Value::as_object).into_iter().flatten() {
            for msg in config_map_key(k) {
                errs.push(FieldError::invalid(format!("{field}[{k}]"), json!(k), msg));
            }
            if !seen.insert(k.as_str()) {
                errs.push(FieldError::invalid(format!("{field}[{k}]"), json!(k), format!("duplicate of key present in {}", fields[0])));
            }
            total += v.as_str().map_or(0, str::len);
        }
    }
    total
}

/// Once `immutable` is true, the data and the flag itself stay as they are.
pub(super) fn validate_immutable(new: &Value, old: &Value, data_fields: &[&str], errs: &mut Vec<FieldError>) {
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return;
    }
    if new.get("immutable").and_then(Value::as_bool) != Some(true) {
        errs.push(FieldError::forbidden("immutable", "field is immutable when `immutable` is set"));
    }
    for f in data_fields {
        if new.get(*f) != old.get(*f) {
            errs.push(FieldError::forbidden(*f, "field is immutable when `immutable` is set"));
        }
    }
}

impl Strategy for ConfigMaps {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let total = validate_data_keys(obj, &["data", "binaryData"], &mut errs);
        if total > MAX_DATA_SIZE {
            errs.push(FieldError::too_long("", MAX_DATA_SIZE));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        validate_immutable(new, old, &["data", "binaryData"], &mut errs);
        errs
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let count = |f: &str| obj.get(f).and_then(Value::as_object).map_or(0, |m| m.len());
        vec![json!(meta::name(obj)), json!(count("data") + count("binaryData")), table::age(obj, now)]
    }
}
