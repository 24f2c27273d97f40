//! The embedded resources of a custom resource (`x-kubernetes-embedded-resource`) checked as
//! kube's `schema/objectmeta.Validate` checks them: `apiVersion` and `kind` there and well
//! formed, `metadata` valid object metadata.

use serde_json::{Map, Value, json};

use super::structural::Structural;
use crate::status::FieldError;
use crate::validation::{dns1035_label, object_meta, path_segment_name};

impl Structural {
    /// The errors of the embedded resources in `obj`, a custom resource of this schema.
    pub fn validate_embedded(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        self.embedded_in(obj, "", &mut errs);
        errs
    }

    fn embedded_in(&self, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
        match v {
            Value::Object(m) => {
                if self.embedded {
                    embedded_resource(m, path, errs);
                }
                for (k, x) in m {
                    if let Some(p) = self.properties.get(k) {
                        p.embedded_in(x, &if path.is_empty() { k.clone() } else { format!("{path}.{k}") }, errs);
                    } else if let Some(a) = &self.additional {
                        a.embedded_in(x, &format!("{path}[{k}]"), errs);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item) = &self.items {
                    for (i, x) in items.iter().enumerate() {
                        item.embedded_in(x, &format!("{path}[{i}]"), errs);
                    }
                }
            }
            _ => {}
        }
    }
}

/// `validateEmbeddedResource`: an embedded object's type meta and metadata.
fn embedded_resource(m: &Map<String, Value>, path: &str, errs: &mut Vec<FieldError>) {
    let at = |k: &str| if path.is_empty() { k.to_string() } else { format!("{path}.{k}") };
    for key in ["apiVersion", "kind"] {
        if !m.contains_key(key) {
            errs.push(FieldError::required(at(key), ""));
        }
    }
    for (k, v) in m {
        match (k.as_str(), v) {
            ("apiVersion" | "kind", v) if !v.is_string() => errs.push(FieldError::invalid(at(k), v.clone(), "must be a string")),
            ("apiVersion" | "kind", Value::String(s)) if s.is_empty() => errs.push(FieldError::invalid(at(k), json!(""), "must not be empty")),
            ("apiVersion", Value::String(s)) if s.matches('/').count() > 1 => {
                errs.push(FieldError::invalid(at(k), v.clone(), format!("unexpected GroupVersion string: {s}")));
            }
            ("kind", Value::String(s)) => {
                let problems = dns1035_label(&s.to_lowercase());
                if !problems.is_empty() {
                    errs.push(FieldError::invalid(at(k), v.clone(), format!("may have mixed case, but should otherwise match: {}", problems.join(","))));
                }
            }
            ("metadata", Value::Object(meta)) => {
                // kube checks a metadata without a name as if it had one.
                let mut meta = meta.clone();
                if meta.get("name").and_then(Value::as_str).is_none_or(str::is_empty) {
                    meta.insert("name".into(), json!("fakename"));
                }
                let namespaced = meta.get("namespace").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
                for mut e in object_meta(&json!({"metadata": meta}), namespaced, path_segment_name) {
                    e.field = at(&e.field);
                    errs.push(e);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_resources_need_type_meta_and_valid_metadata() {
        let schema = Structural::read(&json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
            "others": {"type": "array", "items": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}}}}}}));
        let obj = json!({"spec": {"template": {"metadata": {"labels": {"a": "b"}}}, "others": [
            {"apiVersion": "a/b/c", "kind": "Not_A_Kind", "metadata": {"name": "UPPER", "labels": {"-x": "y"}}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fine"}}]}});
        let got: Vec<String> = schema.validate_embedded(&obj).iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            vec![
                "spec.others[0].apiVersion: Invalid value: \"a/b/c\": unexpected GroupVersion string: a/b/c",
                "spec.others[0].kind: Invalid value: \"Not_A_Kind\": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
                "spec.others[0].metadata.labels: Invalid value: \"-x\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "spec.template.apiVersion: Required value",
                "spec.template.kind: Required value",
            ]
        );
    }
}
