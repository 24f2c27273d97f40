//! The `/scale` subresource of custom resources (`subresources.scale` of a CRD version):
//! replicas and a label selector read from and written to the paths the CRD names, as
//! apiextensions-apiserver's `ScaleREST` and its validator do.

use serde_json::{Map, Value, json};

use crate::catalog::ScaleOf;
use crate::meta;
use crate::status::{ApiError, FieldError};

/// `subresources.scale`: where a custom resource keeps what its Scale shows.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalePaths {
    /// `specReplicasPath`, as written (`.spec.replicas`).
    pub spec_replicas: String,
    /// `statusReplicasPath`.
    pub status_replicas: String,
    /// `labelSelectorPath`, when given.
    pub label_selector: Option<String>,
}

impl ScalePaths {
    /// The paths of a version's `subresources.scale`, when it has one.
    pub fn read(version: &Value) -> Option<ScalePaths> {
        let scale = meta::at(version, &["subresources", "scale"])?;
        let path = |k: &str| scale.get(k).and_then(Value::as_str).map(str::to_string);
        Some(ScalePaths { spec_replicas: path("specReplicasPath")?, status_replicas: path("statusReplicasPath")?, label_selector: path("labelSelectorPath") })
    }

    /// `scaleFromCustomResource`: the object's Scale; replicas not set read as 0. A value of
    /// another type than kube's accessors expect is a 500 with the accessor's error as its
    /// message, as kube answers an error that is not a Status.
    pub fn scale_of(&self, obj: &Value) -> Result<ScaleOf, ApiError> {
        let not_status = |e: String| ApiError::new(500, "", e);
        let spec = nested_int(obj, &self.spec_replicas).map_err(not_status)?;
        let status = nested_int(obj, &self.status_replicas).map_err(not_status)?.unwrap_or(0);
        let selector = match &self.label_selector {
            Some(path) => nested_str(obj, path).map_err(not_status)?.unwrap_or_default(),
            None => String::new(),
        };
        let mut m = Map::new();
        for k in ["name", "namespace", "uid", "resourceVersion", "creationTimestamp"] {
            if let Some(v) = meta::at(obj, &["metadata", k]) {
                m.insert(k.into(), v.clone());
            }
        }
        // Go's int32 conversion of what the paths hold.
        let scale = json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": m,
            "spec": {"replicas": spec.unwrap_or(0) as i32},
            "status": {"replicas": status as i32, "selector": selector},
        });
        Ok(ScaleOf { scale, replicas_set: spec.is_some(), replicas_path: self.spec_replicas.clone() })
    }

    /// Writes a Scale's replicas at `specReplicasPath`, making the objects on the way.
    pub fn set_replicas(&self, obj: &mut Value, replicas: i64) -> Result<(), ApiError> {
        let fields = split(&self.spec_replicas);
        let (last, parents) = fields.split_last().expect("split gives at least one field");
        let mut at = obj;
        for (i, f) in parents.iter().enumerate() {
            let Value::Object(m) = at else {
                return Err(ApiError::new(500, "", format!("value cannot be set because {} is not a map[string]interface {{}}", json_path(&fields[..i]))));
            };
            let next = m.entry(f.to_string()).or_insert_with(|| Value::Object(Map::new()));
            if !next.is_object() {
                *next = Value::Object(Map::new());
            }
            at = next;
        }
        match at {
            Value::Object(m) => {
                m.insert(last.to_string(), Value::from(replicas));
                Ok(())
            }
            _ => Err(ApiError::new(500, "", format!("value cannot be set because {} is not a map[string]interface {{}}", json_path(parents)))),
        }
    }

    /// `ValidateScaleSpec`: the spec replicas, when set, a non-negative int32.
    pub fn validate_spec(&self, obj: &Value) -> Vec<FieldError> {
        replicas_errors(obj, &self.spec_replicas)
    }

    /// `ValidateScaleStatus`: the status replicas likewise, and the label selector a string.
    pub fn validate_status(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = replicas_errors(obj, &self.status_replicas);
        if let Some(path) = &self.label_selector
            && let Err(e) = nested_str(obj, path)
        {
            errs.push(FieldError::invalid(path, json!(""), &e));
        }
        errs
    }
}

fn replicas_errors(obj: &Value, path: &str) -> Vec<FieldError> {
    match nested_int(obj, path) {
        Err(e) => vec![FieldError::invalid(path, json!(0), &e)],
        Ok(Some(n)) if n < 0 => vec![FieldError::invalid(path, json!(n), "should be a non-negative integer")],
        Ok(Some(n)) if n > i64::from(i32::MAX) => vec![FieldError::invalid(path, json!(n), format!("should be less than or equal to {}", i32::MAX))],
        Ok(_) => Vec::new(),
    }
}

/// The fields of a path, its leading period ignored.
fn split(path: &str) -> Vec<&str> {
    path.strip_prefix('.').unwrap_or(path).split('.').collect()
}

/// `jsonPath` of unstructured's accessors: the fields after a period each.
fn json_path(fields: &[&str]) -> String {
    fields.iter().map(|f| format!(".{f}")).collect()
}

/// What is at `fields`: `None` when a field on the way is missing or not an object.
fn nested<'a>(obj: &'a Value, fields: &[&str]) -> Option<&'a Value> {
    fields.iter().try_fold(obj, |at, f| at.as_object()?.get(*f))
}

/// `unstructured.NestedInt64`: an integer, nothing, or kube's accessor error for another type.
fn nested_int(obj: &Value, path: &str) -> Result<Option<i64>, String> {
    let fields = split(path);
    match nested(obj, &fields) {
        None => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| format!("{} accessor error: {} is of the type {}, expected int64", json_path(&fields), crate::registry::go_format(v), go_type(v))),
    }
}

/// `unstructured.NestedString`.
fn nested_str(obj: &Value, path: &str) -> Result<Option<String>, String> {
    let fields = split(path);
    match nested(obj, &fields) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(format!("{} accessor error: {} is of the type {}, expected string", json_path(&fields), crate::registry::go_format(v), go_type(v))),
    }
}

/// Go's `%T` of a decoded JSON value.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() || n.is_u64() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}
