//! core/v1 secrets: `stringData` folded into `data`, type checks, immutability.

use base64::Engine;
use serde_json::{Value, json};

use super::configmaps::{MAX_DATA_SIZE, validate_data_keys, validate_immutable};
use super::{info, serve};
use crate::catalog::{FieldName, Resource, Strategy, field};
use crate::meta;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};

pub fn resource() -> Resource {
    serve(info("", "v1", "Secret", "secrets", true), Secrets)
}

struct Secrets;

const COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Type", "string", Describe::Field("io.k8s.api.core.v1.Secret", "type")),
    Column::new("Data", "integer", Describe::Field("io.k8s.api.core.v1.Secret", "data")),
    Column::AGE,
];

/// Keys a secret of a type must carry.
fn required_keys(ty: &str) -> &'static [&'static str] {
    match ty {
        "kubernetes.io/dockercfg" => &[".dockercfg"],
        "kubernetes.io/dockerconfigjson" => &[".dockerconfigjson"],
        "kubernetes.io/tls" => &["tls.crt", "tls.key"],
        "kubernetes.io/ssh-auth" => &["ssh-privatekey"],
        _ => &[],
    }
}

impl Strategy for Secrets {
    fn default(&self, obj: &mut Value) {
        // `stringData` is write-only: its values land in `data`, base64-encoded.
        if let Some(Value::Object(sd)) = obj.as_object_mut().and_then(|m| m.remove("stringData")) {
            let data = meta::object_at(obj, &["data"]);
            for (k, v) in sd {
                let text = v.as_str().unwrap_or_default();
                data.insert(k, json!(base64::engine::general_purpose::STANDARD.encode(text)));
            }
        }
        if obj.get("type").and_then(Value::as_str).is_none_or(str::is_empty) {
            obj["type"] = json!("Opaque");
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        validate_data_keys(obj, &["data"], &mut errs);
        let size: usize = obj
            .get("data")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(_, v)| base64::engine::general_purpose::STANDARD.decode(v.as_str().unwrap_or_default()).map_or(0, |b| b.len()))
            .sum();
        if size > MAX_DATA_SIZE {
            errs.push(FieldError::too_long("data", MAX_DATA_SIZE));
        }
        let ty = obj.get("type").and_then(Value::as_str).unwrap_or_default();
        for key in required_keys(ty) {
            if obj.get("data").and_then(|d| d.get(*key)).is_none() {
                errs.push(FieldError::required(format!("data[{key}]"), ""));
            }
        }
        let account = meta::str_at(obj, &["metadata", "annotations", "kubernetes.io/service-account.name"]);
        if ty == "kubernetes.io/service-account-token" && account.is_none_or(str::is_empty) {
            errs.push(FieldError::required("metadata.annotations[kubernetes.io/service-account.name]", ""));
        }
        if ty == "kubernetes.io/basic-auth" {
            let d = obj.get("data");
            if d.and_then(|d| d.get("username")).is_none() && d.and_then(|d| d.get("password")).is_none() {
                errs.push(FieldError::required("data[username]", ""));
                errs.push(FieldError::required("data[password]", ""));
            }
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if let Some(e) = crate::validation::immutable(new, old, &["type"], "type") {
            errs.push(e);
        }
        validate_immutable(new, old, &["data"], &mut errs);
        errs
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let data = obj.get("data").and_then(Value::as_object).map_or(0, |m| m.len());
        vec![json!(meta::name(obj)), json!(table::str_or(obj, &["type"], "")), json!(data), table::age(obj, now)]
    }

    fn selectable_fields(&self) -> &[FieldName] {
        const { &[field("type")] }
    }
}
