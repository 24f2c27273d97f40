//! A custom resource checked against its version's structural schema, with the errors kube's
//! OpenAPI validator gives (`pkg/apiserver/validation`): at each node its type, then string
//! bounds (the first that fails), number bounds, items, enum, then object bounds, members and
//! required members. `format` and CEL rules are not checked yet.

use serde_json::Value;

use super::structural::Structural;
use crate::status::FieldError;

impl Structural {
    /// The errors of a custom resource (its `apiVersion`, `kind` and `metadata` are checked
    /// elsewhere).
    pub fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if let Value::Object(m) = obj {
            for (k, v) in m {
                if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") && !self.properties.contains_key(k) {
                    continue;
                }
                if let Some(s) = self.properties.get(k).or(self.additional.as_deref()) {
                    s.check(v, k, &mut errs);
                }
            }
            self.required(m, "", &mut errs);
        }
        errs
    }

    fn check(&self, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
        if v.is_null() && self.nullable {
            return;
        }
        if let Some(want) = self.type_error(v) {
            let detail = format!("{path} in body must be of type {want}: \"{}\"", type_name(v));
            errs.push(FieldError::invalid(path, v.clone(), detail));
            return;
        }
        match v {
            Value::String(s) => self.check_string(s, v, path, errs),
            Value::Number(_) => self.check_number(v, path, errs),
            Value::Array(items) => {
                if let Some(item) = &self.items {
                    for (i, x) in items.iter().enumerate() {
                        item.check(x, &format!("{path}[{i}]"), errs);
                    }
                }
                if let Some(min) = self.bound("minItems").filter(|min| (items.len() as u64) < *min) {
                    errs.push(FieldError::invalid(path, Value::from(items.len()), format!("{path} in body should have at least {min} items")));
                }
                if let Some(max) = self.bound("maxItems").filter(|max| items.len() as u64 > *max) {
                    errs.push(FieldError::too_many(path, items.len(), max as usize));
                }
            }
            _ => {}
        }
        if let Some(allowed) = self.raw.get("enum").and_then(Value::as_array)
            && !allowed.contains(v)
        {
            let names: Vec<String> = allowed.iter().map(|a| a.as_str().map_or_else(|| a.to_string(), str::to_string)).collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            errs.push(FieldError::not_supported(path, v.clone(), &names));
        }
        if let Value::Object(m) = v {
            if let Some(min) = self.bound("minProperties").filter(|min| (m.len() as u64) < *min) {
                errs.push(FieldError::invalid(path, Value::from(m.len()), format!("{path} in body should have at least {min} properties")));
            }
            if let Some(max) = self.bound("maxProperties").filter(|max| m.len() as u64 > *max) {
                errs.push(FieldError::too_many(path, m.len(), max as usize));
            }
            for (k, x) in m {
                if let Some(s) = self.properties.get(k).or(self.additional.as_deref()) {
                    s.check(x, &format!("{path}.{k}"), errs);
                }
            }
            self.required(m, path, errs);
        }
    }

    /// The type the value should have been, when it is not of the schema's type.
    fn type_error(&self, v: &Value) -> Option<String> {
        let int_or_string = self.raw.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true);
        if int_or_string {
            return (!(v.is_string() || is_integer(v))).then(|| "integer,string".to_string());
        }
        let fits = match self.ty.as_str() {
            "" => true,
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "integer" => is_integer(v),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            _ => true,
        };
        (!fits).then(|| self.ty.clone())
    }

    fn check_string(&self, s: &str, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
        let chars = s.chars().count() as u64;
        if let Some(max) = self.bound("maxLength").filter(|max| chars > *max) {
            errs.push(FieldError::too_long(path, max as usize));
        } else if let Some(min) = self.bound("minLength").filter(|min| chars < *min) {
            errs.push(FieldError::invalid(path, v.clone(), format!("{path} in body should be at least {min} chars long")));
        } else if let Some(pattern) = self.raw.get("pattern").and_then(Value::as_str)
            && regex::Regex::new(pattern).is_ok_and(|re| !re.is_match(s))
        {
            errs.push(FieldError::invalid(path, v.clone(), format!("{path} in body should match '{pattern}'")));
        }
    }

    fn check_number(&self, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
        let Some(x) = v.as_f64() else { return };
        let number = |k: &str| self.raw.get(k).and_then(Value::as_f64);
        let flag = |k: &str| self.raw.get(k).and_then(Value::as_bool) == Some(true);
        if let Some(m) = number("multipleOf").filter(|m| *m > 0.0 && (x / m).fract() != 0.0) {
            errs.push(FieldError::invalid(path, v.clone(), format!("{path} in body should be a multiple of {}", go_number(m))));
        }
        if let Some(min) = number("minimum") {
            let exclusive = flag("exclusiveMinimum");
            if x < min || (exclusive && x == min) {
                let how = if exclusive { "greater than" } else { "greater than or equal to" };
                errs.push(FieldError::invalid(path, v.clone(), format!("{path} in body should be {how} {}", go_number(min))));
            }
        }
        if let Some(max) = number("maximum") {
            let exclusive = flag("exclusiveMaximum");
            if x > max || (exclusive && x == max) {
                let how = if exclusive { "less than" } else { "less than or equal to" };
                errs.push(FieldError::invalid(path, v.clone(), format!("{path} in body should be {how} {}", go_number(max))));
            }
        }
    }

    fn required(&self, m: &serde_json::Map<String, Value>, path: &str, errs: &mut Vec<FieldError>) {
        for name in self.raw.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            if m.get(name).is_none_or(Value::is_null) {
                let at = if path.is_empty() { name.to_string() } else { format!("{path}.{name}") };
                errs.push(FieldError::required(at, ""));
            }
        }
    }

    fn bound(&self, k: &str) -> Option<u64> {
        self.raw.get(k).and_then(Value::as_u64)
    }
}

fn is_integer(v: &Value) -> bool {
    v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0)
}

/// The type names of kube's OpenAPI validator.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) if is_integer(v) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A bound as Go's `%v` prints a float64 (`10`, `0.5`).
fn go_number(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e21 { format!("{}", f as i64) } else { format!("{f}") }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn messages(schema: Value, obj: Value) -> Vec<String> {
        Structural::read(&schema).validate(&obj).iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn kubes_messages() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["replicas"], "properties": {
            "size": {"type": "integer"}, "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
            "name": {"type": "string", "maxLength": 5, "pattern": "^[a-z]+$"}, "short": {"type": "string", "minLength": 3},
            "color": {"type": "string", "enum": ["red", "green"]}, "items": {"type": "array", "maxItems": 1, "items": {"type": "string"}},
            "port": {"x-kubernetes-int-or-string": true}, "maybe": {"type": "string", "nullable": true}}}}});
        assert_eq!(
            messages(schema.clone(), json!({"spec": {"size": "string"}})),
            vec!["spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\"", "spec.replicas: Required value",]
        );
        assert_eq!(
            messages(
                schema.clone(),
                json!({"spec": {"replicas": 11, "name": "toolong", "short": "ab", "color": "purple", "items": ["a", "b"], "port": true, "maybe": null}})
            ),
            vec![
                "spec.color: Unsupported value: \"purple\": supported values: \"red\", \"green\"",
                "spec.items: Too many: 2: must have at most 1 items",
                "spec.name: Too long: may not be more than 5 bytes",
                "spec.port: Invalid value: true: spec.port in body must be of type integer,string: \"boolean\"",
                "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
                "spec.short: Invalid value: \"ab\": spec.short in body should be at least 3 chars long",
            ]
        );
        assert_eq!(
            messages(schema, json!({"spec": {"replicas": 2, "name": "ABC", "items": [1]}})),
            vec![
                "spec.items[0]: Invalid value: 1: spec.items[0] in body must be of type string: \"integer\"",
                "spec.name: Invalid value: \"ABC\": spec.name in body should match '^[a-z]+$'",
            ]
        );
    }
}
