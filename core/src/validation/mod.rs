//! Validation shared by every kind: names, labels, annotations and object metadata, with
//! kube-apiserver's messages (`k8s.io/apimachinery/pkg/util/validation` and
//! `apimachinery/pkg/api/validation`).

pub mod names;
mod selector;

pub use names::*;
pub use selector::label_selector;

use serde_json::Value;

use crate::meta;
use crate::status::FieldError;

/// How a kind's names are checked (kube's `ValidateNameFunc`).
pub type NameCheck = fn(&str) -> Vec<String>;

pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// `ValidateObjectMeta`: name or generateName, namespace presence, labels, annotations,
/// owner references and finalizers.
pub fn object_meta(obj: &Value, namespaced: bool, check_name: NameCheck) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = meta::name(obj);
    let generate_name = meta::str_at(obj, &["metadata", "generateName"]).unwrap_or_default();
    if !generate_name.is_empty() {
        // generateName gets random characters appended; validate it as if they were there.
        for msg in check_name(&format!("{generate_name}a")) {
            errs.push(FieldError::invalid("metadata.generateName", Value::from(generate_name), msg));
        }
    }
    if name.is_empty() {
        errs.push(FieldError::required("metadata.name", "name or generateName is required"));
    } else {
        for msg in check_name(name) {
            errs.push(FieldError::invalid("metadata.name", Value::from(name), msg));
        }
    }
    let namespace = meta::namespace(obj);
    if namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required("metadata.namespace", ""));
        } else {
            for msg in dns1123_label(namespace) {
                errs.push(FieldError::invalid("metadata.namespace", Value::from(namespace), msg));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden("metadata.namespace", "not allowed on this type"));
    }
    errs.extend(labels(meta::at(obj, &["metadata", "labels"]), "metadata.labels"));
    errs.extend(annotations(meta::at(obj, &["metadata", "annotations"]), "metadata.annotations"));
    errs.extend(owner_references(obj));
    for (i, f) in meta::finalizers(obj).iter().enumerate() {
        for msg in qualified_name(f) {
            errs.push(FieldError::invalid(format!("metadata.finalizers[{i}]"), Value::from(f.as_str()), msg));
        }
    }
    errs
}

/// `ValidateLabels` for a map at `path`.
pub fn labels(labels: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (k, v) in meta::string_map(labels) {
        for msg in qualified_name(k) {
            errs.push(FieldError::invalid(path, Value::from(k), msg));
        }
        for msg in label_value(v) {
            errs.push(FieldError::invalid(path, Value::from(v), msg));
        }
    }
    errs
}

/// `ValidateAnnotations`: qualified keys and a total size limit.
pub fn annotations(annotations: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut total = 0;
    for (k, v) in meta::string_map(annotations) {
        for msg in qualified_name(&k.to_lowercase()) {
            errs.push(FieldError::invalid(path, Value::from(k), msg));
        }
        total += k.len() + v.len();
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
    errs
}

fn owner_references(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(refs) = meta::at(obj, &["metadata", "ownerReferences"]).and_then(Value::as_array) else {
        return errs;
    };
    let mut controllers = 0;
    for (i, r) in refs.iter().enumerate() {
        let path = format!("metadata.ownerReferences[{i}]");
        let get = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default();
        let api_version = get("apiVersion");
        if api_version.is_empty() {
            errs.push(FieldError::invalid(format!("{path}.apiVersion"), Value::from(api_version), "version must not be empty"));
        }
        if get("kind").is_empty() {
            errs.push(FieldError::invalid(format!("{path}.kind"), Value::from(""), "must not be empty"));
        }
        if get("name").is_empty() {
            errs.push(FieldError::invalid(format!("{path}.name"), Value::from(""), "must not be empty"));
        }
        if get("uid").is_empty() {
            errs.push(FieldError::invalid(format!("{path}.uid"), Value::from(""), "must not be empty"));
        }
        if r.get("controller").and_then(Value::as_bool) == Some(true) {
            controllers += 1;
        }
    }
    if controllers > 1 {
        errs.push(FieldError::invalid("metadata.ownerReferences", Value::from(refs.len()), "Only one reference can have Controller set to true"));
    }
    errs
}

/// `ValidateObjectMetaUpdate`: what may not change once an object exists.
pub fn object_meta_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for key in ["name", "namespace", "uid", "creationTimestamp"] {
        let n = meta::at(new, &["metadata", key]);
        let o = meta::at(old, &["metadata", key]);
        if n != o {
            errs.push(FieldError::invalid(format!("metadata.{key}"), n.cloned().unwrap_or(Value::from("")), "field is immutable"));
        }
    }
    if meta::deletion_timestamp(old).is_some() && meta::deletion_timestamp(new) != meta::deletion_timestamp(old) {
        errs.push(FieldError::invalid(
            "metadata.deletionTimestamp",
            meta::at(new, &["metadata", "deletionTimestamp"]).cloned().unwrap_or(Value::Null),
            "field is immutable; may only be changed via deletion",
        ));
    }
    errs
}

/// `v`, when present, must be one of `allowed` (an empty string included: kube's required
/// checks come before these for the fields that have them).
pub fn supported(errs: &mut Vec<FieldError>, v: Option<&Value>, path: &str, allowed: &[&str]) {
    if let Some(v) = v.filter(|v| !v.is_null()) {
        let s = v.as_str().unwrap_or_default();
        if !allowed.contains(&s) {
            errs.push(FieldError::not_supported(path, v.clone(), allowed));
        }
    }
}

/// A field that may not change on update (`field is immutable`).
pub fn immutable(new: &Value, old: &Value, path: &[&str], field: &str) -> Option<FieldError> {
    let n = meta::at(new, path);
    (n != meta::at(old, path)).then(|| FieldError::invalid(field, n.cloned().unwrap_or(Value::Null), "field is immutable"))
}
