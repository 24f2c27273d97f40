//! kube's invariant of a custom resource's `x-kubernetes-list-type` `set` and `map` lists
//! (apiextensions-apiserver's `pkg/apiserver/schema/listtype`): no item of a set twice, no key
//! of a map twice; the second of each is reported as a duplicate.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::structural::Structural;
use crate::schema::ListType;
use crate::status::FieldError;

impl Structural {
    /// The duplicates in the object's set and map lists, at any depth.
    pub fn validate_list_types(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if let Value::Object(m) = obj {
            self.list_types_in(m, "", &mut errs);
        }
        errs
    }

    /// An object's members: those of `additionalProperties` (at `path[key]`), then properties.
    fn list_types_in(&self, m: &Map<String, Value>, path: &str, errs: &mut Vec<FieldError>) {
        if let Some(values) = &self.additional {
            for (k, v) in m {
                values.list_types(v, &format!("{path}[{k}]"), errs);
            }
        }
        for (k, v) in m {
            if let Some(p) = self.properties.get(k) {
                p.list_types(v, &if path.is_empty() { k.clone() } else { format!("{path}.{k}") }, errs);
            }
        }
    }

    fn list_types(&self, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
        match v {
            Value::Array(items) => {
                match self.list_type {
                    ListType::Set => {
                        for i in second_appearances(items.iter()) {
                            errs.push(duplicate(format!("{path}[{i}]"), &items[i]));
                        }
                    }
                    ListType::Map => errs.extend(self.map_duplicates(items, path)),
                    ListType::Atomic => {}
                }
                if let Some(item) = &self.items {
                    for (i, x) in items.iter().enumerate() {
                        item.list_types(x, &format!("{path}[{i}]"), errs);
                    }
                }
            }
            Value::Object(m) => self.list_types_in(m, path, errs),
            _ => {}
        }
    }

    /// A map list's items by their keys (an item without a key field is keyed without it).
    fn map_duplicates(&self, items: &[Value], path: &str) -> Vec<FieldError> {
        if let Some((i, x)) = items.iter().enumerate().find(|(_, x)| !(x.is_null() || x.is_object())) {
            return vec![FieldError::invalid(format!("{path}[{i}]"), x.clone(), "must be an object for an array of list-type map")];
        }
        let keys: Vec<Value> = items
            .iter()
            .map(|x| {
                let key: Map<String, Value> = self.map_keys.iter().filter_map(|k| Some((k.clone(), x.get(k)?.clone()))).collect();
                Value::Object(key)
            })
            .collect();
        second_appearances(keys.iter()).into_iter().map(|i| duplicate(format!("{path}[{i}]"), &keys[i])).collect()
    }
}

/// The indexes of the second appearance of each value that appears more than once.
fn second_appearances<'a>(values: impl Iterator<Item = &'a Value>) -> Vec<usize> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, v) in values.enumerate() {
        let times = seen.entry(v.to_string()).or_insert(0);
        *times += 1;
        if *times == 2 {
            out.push(i);
        }
    }
    out
}

/// `Duplicate value`, with the value as Go prints an unstructured one (`%#v` for maps and lists).
fn duplicate(field: String, v: &Value) -> FieldError {
    match v {
        Value::Object(_) | Value::Array(_) => FieldError::duplicate_go(field, go_syntax(v)),
        _ => FieldError::duplicate(field, v.clone()),
    }
}

/// Go's `%#v` of an unstructured value: `map[string]interface {}{"name":"http"}`.
pub(super) fn go_syntax(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".into(),
        Value::Object(m) => {
            let entries: Vec<String> = m.iter().map(|(k, x)| format!("{}:{}", Value::from(k.as_str()), go_syntax(x))).collect();
            format!("map[string]interface {{}}{{{}}}", entries.join(", "))
        }
        Value::Array(items) => format!("[]interface {{}}{{{}}}", items.iter().map(go_syntax).collect::<Vec<_>>().join(", ")),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_second_of_each_duplicate_is_reported() {
        let schema = Structural::read(&json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}}}}}}));
        let obj =
            json!({"spec": {"tags": ["a", "b", "a", "a"], "ports": [{"name": "http", "port": 80}, {"name": "http", "port": 81}, {"port": 1}, {"port": 2}]}});
        let got: Vec<String> = schema.validate_list_types(&obj).iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            vec![
                "spec.ports[1]: Duplicate value: map[string]interface {}{\"name\":\"http\"}",
                "spec.ports[3]: Duplicate value: map[string]interface {}{}",
                "spec.tags[2]: Duplicate value: \"a\"",
            ]
        );
    }
}
