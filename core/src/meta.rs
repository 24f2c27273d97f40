//! Reading and writing the common parts of objects held as JSON trees (`metadata`, type meta).

use serde_json::{Map, Value};

/// `obj[k1][k2]...` as a string, if present.
pub fn str_at<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(obj, path)?.as_str()
}

pub fn at<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut v = obj;
    for k in path {
        v = v.get(*k)?;
    }
    Some(v)
}

/// The object at `path`, created (and replacing non-objects) on the way.
pub fn object_at<'a>(obj: &'a mut Value, path: &[&str]) -> &'a mut Map<String, Value> {
    let mut v = obj;
    for k in path {
        if !v.is_object() {
            *v = Value::Object(Map::new());
        }
        v = v.as_object_mut().expect("made an object above").entry(k.to_string()).or_insert_with(|| Value::Object(Map::new()));
    }
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    v.as_object_mut().expect("made an object above")
}

/// Sets `obj[path..][key] = value` unless present (defaulting).
pub fn default_at(obj: &mut Value, path: &[&str], key: &str, value: Value) {
    object_at(obj, path).entry(key.to_string()).or_insert(value);
}

pub fn name(obj: &Value) -> &str {
    str_at(obj, &["metadata", "name"]).unwrap_or_default()
}

pub fn namespace(obj: &Value) -> &str {
    str_at(obj, &["metadata", "namespace"]).unwrap_or_default()
}

pub fn uid(obj: &Value) -> &str {
    str_at(obj, &["metadata", "uid"]).unwrap_or_default()
}

pub fn resource_version(obj: &Value) -> &str {
    str_at(obj, &["metadata", "resourceVersion"]).unwrap_or_default()
}

pub fn generation(obj: &Value) -> i64 {
    at(obj, &["metadata", "generation"]).and_then(Value::as_i64).unwrap_or(0)
}

pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    object_at(obj, &["metadata"])
}

pub fn set_meta(obj: &mut Value, key: &str, value: Value) {
    metadata_mut(obj).insert(key.to_string(), value);
}

pub fn remove_meta(obj: &mut Value, key: &str) {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove(key);
    }
}

/// Labels as pairs (empty when absent).
pub fn labels(obj: &Value) -> Vec<(&str, &str)> {
    string_map(at(obj, &["metadata", "labels"]))
}

pub fn string_map(v: Option<&Value>) -> Vec<(&str, &str)> {
    v.and_then(Value::as_object).map(|m| m.iter().filter_map(|(k, v)| Some((k.as_str(), v.as_str()?))).collect()).unwrap_or_default()
}

/// The strings of a JSON array (what is not a string left out).
pub fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    strings(at(obj, &["metadata", "finalizers"]))
}

pub fn set_finalizers(obj: &mut Value, finalizers: &[String]) {
    if finalizers.is_empty() {
        remove_meta(obj, "finalizers");
    } else {
        set_meta(obj, "finalizers", Value::from(finalizers.to_vec()));
    }
}

pub fn deletion_timestamp(obj: &Value) -> Option<&str> {
    str_at(obj, &["metadata", "deletionTimestamp"])
}

/// Sets `apiVersion` and `kind`, keeping them first in the object as kube writes them.
pub fn set_type_meta(obj: &mut Value, api_version: &str, kind: &str) {
    if let Value::Object(m) = obj {
        if m.get("apiVersion").and_then(Value::as_str) == Some(api_version) && m.get("kind").and_then(Value::as_str) == Some(kind) {
            return;
        }
        m.insert("apiVersion".into(), Value::String(api_version.to_string()));
        m.insert("kind".into(), Value::String(kind.to_string()));
    }
}

/// The parts of an object's JSON without the named top-level fields, for "did X change" tests.
pub fn without<'a>(obj: &'a Value, skip: &[&str]) -> Vec<(&'a String, &'a Value)> {
    obj.as_object().map(|m| m.iter().filter(|(k, _)| !skip.contains(&k.as_str())).collect()).unwrap_or_default()
}
