//! Decoding a JSON tree into a built-in kind the way kube-apiserver's decoder does: type errors
//! with Go's messages, unknown fields pruned and reported (for `fieldValidation`), `null`s
//! dropped (Go leaves the zero value), and times in their canonical RFC 3339 form.

use serde_json::{Map, Value};

use super::{DefName, Definition, Schema, Type};

/// What decoding found besides type errors.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// Paths of fields the kind does not have (`spec.foo`, `spec.containers[0].bar`), pruned.
    pub unknown_fields: Vec<String>,
}

#[derive(Clone, Copy)]
enum Seg<'a> {
    Field(&'a str),
    Index(usize),
}

struct Walker<'s> {
    schema: &'s Schema,
    findings: Findings,
}

/// Checks and normalizes `value` as an object of definition `def`. The error is the text of Go's
/// `json.Unmarshal` error; callers wrap it in kube's "... cannot be handled as a ..." message.
pub fn normalize(schema: &Schema, def: &str, value: &mut Value) -> Result<Findings, String> {
    let mut w = Walker { schema, findings: Findings::default() };
    let mut path = Vec::new();
    match value {
        Value::Object(m) => {
            if let Some(def) = schema.get(def) {
                w.walk_object(def, m, &mut path)?
            }
        }
        other => return Err(w.type_error(other, &Type::Object(DefName::new(def)), &path, "")),
    }
    Ok(w.findings)
}

fn json_kind(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(_) => "bool".into(),
        Value::Number(n) if n.is_f64() => format!("number {n}"),
        Value::Number(_) => "number".into(),
        Value::String(_) => "string".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
    }
}

impl<'s> Walker<'s> {
    fn go_type(&self, ty: &Type) -> String {
        match ty {
            Type::String => "string".into(),
            Type::Bytes => "[]uint8".into(),
            Type::Time => "v1.Time".into(),
            Type::MicroTime => "v1.MicroTime".into(),
            Type::Int32 => "int32".into(),
            Type::Int64 => "int64".into(),
            Type::Number => "float64".into(),
            Type::Boolean => "bool".into(),
            Type::IntOrString => "intstr.IntOrString".into(),
            Type::Quantity => "resource.Quantity".into(),
            Type::Object(name) => self.schema.def(name).map(|d| d.go_name()).unwrap_or_else(|| name.to_string()),
            Type::Array { items, .. } => format!("[]{}", self.go_type(items)),
            Type::Map { values, .. } => format!("map[string]{}", self.go_type(values)),
            Type::Any => "interface {}".into(),
        }
    }

    fn type_error(&self, v: &Value, ty: &Type, path: &[Seg], owner: &str) -> String {
        let names: Vec<&str> = path
            .iter()
            .filter_map(|s| match s {
                Seg::Field(f) => Some(*f),
                Seg::Index(_) => None,
            })
            .collect();
        if owner.is_empty() {
            format!("json: cannot unmarshal {} into Go value of type {}", json_kind(v), self.go_type(ty))
        } else {
            format!("json: cannot unmarshal {} into Go struct field {}.{} of type {}", json_kind(v), owner, names.join("."), self.go_type(ty))
        }
    }

    fn walk(&mut self, ty: &Type, v: &mut Value, path: &mut Vec<Seg<'s>>, owner: &'s str) -> Result<(), String> {
        let ok = match (ty, &*v) {
            (Type::Any, _) => true,
            (Type::String, Value::String(_)) | (Type::Boolean, Value::Bool(_)) => true,
            (Type::Number, Value::Number(_)) => true,
            (Type::Int32, Value::Number(n)) => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
            (Type::Int64, Value::Number(n)) => n.as_i64().is_some(),
            (Type::IntOrString, Value::String(_)) => true,
            (Type::IntOrString, Value::Number(n)) => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
            (Type::Bytes, Value::String(s)) => return check_base64(s),
            (Type::Time | Type::MicroTime, Value::String(s)) => {
                let canonical = canonical_time(s, matches!(ty, Type::MicroTime))?;
                *v = Value::String(canonical);
                true
            }
            (Type::Quantity, Value::String(_) | Value::Number(_)) => {
                let text = match &*v {
                    Value::String(s) => s.trim().to_string(),
                    other => other.to_string(),
                };
                *v = Value::String(canonical_quantity(&text)?);
                true
            }
            (Type::Array { items, .. }, Value::Array(_)) => {
                let Value::Array(a) = v else { unreachable!() };
                for (i, item) in a.iter_mut().enumerate() {
                    path.push(Seg::Index(i));
                    let r = self.walk(items, item, path, owner);
                    path.pop();
                    r?;
                }
                true
            }
            (Type::Map { values, .. }, Value::Object(_)) => {
                let Value::Object(m) = v else { unreachable!() };
                m.retain(|_, x| !x.is_null());
                // Map keys are not struct fields: Go's messages name the map field, not the key.
                for item in m.values_mut() {
                    self.walk(values, item, path, owner)?;
                }
                true
            }
            (Type::Object(name), Value::Object(_)) => {
                let Value::Object(m) = v else { unreachable!() };
                let schema: &'s Schema = self.schema;
                return match schema.def(name) {
                    Some(def) => self.walk_object(def, m, path),
                    None => Ok(()),
                };
            }
            _ => false,
        };
        if ok { Ok(()) } else { Err(self.type_error(v, ty, path, owner)) }
    }

    fn walk_object(&mut self, def: &'s Definition, m: &mut Map<String, Value>, path: &mut Vec<Seg<'s>>) -> Result<(), String> {
        let owner = def.short_name();
        m.retain(|_, x| !x.is_null());
        let keys: Vec<String> = m.keys().cloned().collect();
        for key in keys {
            match def.properties.get(&key) {
                Some(prop) => {
                    let item = m.get_mut(&key).expect("key listed above");
                    path.push(Seg::Field(&prop.name));
                    let r = self.walk(&prop.ty, item, path, owner);
                    path.pop();
                    r?;
                }
                None if path.is_empty() && (key == "apiVersion" || key == "kind") => {}
                None => {
                    self.findings.unknown_fields.push(field_path(path, &key));
                    m.remove(&key);
                }
            }
        }
        Ok(())
    }
}

fn field_path(path: &[Seg], last: &str) -> String {
    let mut out = String::new();
    for s in path {
        match s {
            Seg::Field(f) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(f);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    if !out.is_empty() {
        out.push('.');
    }
    out.push_str(last);
    out
}

fn check_base64(s: &str) -> Result<(), String> {
    use base64::Engine;
    match base64::engine::general_purpose::STANDARD.decode(s) {
        Ok(_) => Ok(()),
        Err(base64::DecodeError::InvalidByte(at, _)) | Err(base64::DecodeError::InvalidLastSymbol(at, _)) => {
            Err(format!("illegal base64 data at input byte {at}"))
        }
        Err(_) => Err(format!("illegal base64 data at input byte {}", s.len())),
    }
}

/// Removes the `null` members of a built-in kind's fields, at any depth: Go reads a `null` as
/// the zero value, so an object read back from storage (where kube writes e.g. a template's
/// `creationTimestamp: null`) compares equal to the same object sent without them. Free-form
/// values (`RawExtension`, such as a ControllerRevision's data) are kept byte for byte, and
/// objects of no known kind are left as they are.
pub fn drop_nulls(value: &mut Value) {
    let s = super::schema();
    let api_version = value.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or_default();
    if let Some(def) = s.for_gvk(group, version, kind) {
        let ty = Type::Object(DefName::new(def.name.as_str()));
        drop_typed_nulls(s, &ty, value);
    }
}

fn drop_typed_nulls(s: &Schema, ty: &Type, v: &mut Value) {
    match (ty, v) {
        (Type::Object(name), Value::Object(m)) => {
            let Some(def) = s.def(name) else { return };
            m.retain(|_, x| !x.is_null());
            for (k, x) in m.iter_mut() {
                if let Some(p) = def.properties.get(k) {
                    drop_typed_nulls(s, &p.ty, x);
                }
            }
        }
        (Type::Array { items, .. }, Value::Array(a)) => a.iter_mut().for_each(|x| drop_typed_nulls(s, items, x)),
        (Type::Map { values, .. }, Value::Object(m)) => m.values_mut().for_each(|x| drop_typed_nulls(s, values, x)),
        _ => {}
    }
}

/// The canonical form of a quantity, or `resource.ParseQuantity`'s error.
pub fn canonical_quantity(s: &str) -> Result<String, String> {
    crate::quantity::Quantity::parse(s)
        .map(|q| q.canonical())
        .ok_or_else(|| "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'".into())
}

/// A time in the form kube writes it: UTC, seconds precision (`micro`: microseconds).
pub fn canonical_time(s: &str, micro: bool) -> Result<String, String> {
    let ts: jiff::Timestamp = s.parse().map_err(|_| format!("parsing time \"{s}\" as \"2006-01-02T15:04:05Z07:00\": cannot parse \"{s}\" as \"2006\""))?;
    Ok(format_time(ts, micro))
}

/// Formats a timestamp as `metav1.Time` (`micro = false`) or `metav1.MicroTime` does.
pub fn format_time(ts: jiff::Timestamp, micro: bool) -> String {
    if micro { ts.strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string() } else { ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string() }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::schema;

    const DEPLOYMENT: &str = "io.k8s.api.apps.v1.Deployment";

    #[test]
    fn prunes_and_reports_unknown_fields_with_paths() {
        let mut v = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x", "bogus": 1},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i", "colour": "red"}]}}}, "top": true});
        let f = normalize(schema(), DEPLOYMENT, &mut v).unwrap();
        assert_eq!(f.unknown_fields, vec!["metadata.bogus", "spec.template.spec.containers[0].colour", "top"]);
        assert!(v["metadata"].get("bogus").is_none());
        assert_eq!(v["spec"]["template"]["spec"]["containers"][0]["image"], "i");
    }

    #[test]
    fn type_errors_read_like_go() {
        let mut v = json!({"spec": {"replicas": "three"}});
        assert_eq!(
            normalize(schema(), DEPLOYMENT, &mut v).unwrap_err(),
            "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"
        );
        let mut v = json!({"spec": {"template": {"spec": {"containers": {}}}}});
        assert_eq!(
            normalize(schema(), DEPLOYMENT, &mut v).unwrap_err(),
            "json: cannot unmarshal object into Go struct field PodSpec.spec.template.spec.containers of type []v1.Container"
        );
    }

    #[test]
    fn canonicalizes_times_and_drops_nulls() {
        let mut v = json!({"metadata": {"creationTimestamp": "2024-05-01T10:00:00.123+02:00", "labels": null}});
        normalize(schema(), DEPLOYMENT, &mut v).unwrap();
        assert_eq!(v, json!({"metadata": {"creationTimestamp": "2024-05-01T08:00:00Z"}}));
        let mut v = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": 0.5, "memory": "1024Mi"}}}]}}}});
        normalize(schema(), DEPLOYMENT, &mut v).unwrap();
        assert_eq!(v["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"], json!({"cpu": "500m", "memory": "1Gi"}));
    }
}
