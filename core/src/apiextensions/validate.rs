//! A custom resource checked against its version's structural schema as kube's OpenAPI
//! validator checks it (kube-openapi's `validate` package, through apiextensions'
//! `pkg/apiserver/validation`): at each node, in this order, its type, `anyOf`, `oneOf`,
//! `allOf` and `not`, string bounds (the first that fails), `format`, number bounds, items,
//! `enum`, then object bounds, members and required members. Every check that applies runs;
//! an error is reported once. CEL rules are checked after these ([`super::rules`]).

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::formats;
use super::numbers::{GoNumber, is_json_integer};
use super::structural::Structural;
use crate::status::{FieldError, quote};

/// The field kube gives errors of the whole object (the junctors' messages): a nil path.
const ROOT_FIELD: &str = "<nil>";

impl Structural {
    /// The errors of a custom resource (its `apiVersion`, `kind` and `metadata`, unless the
    /// schema describes them, are checked elsewhere).
    pub fn validate(&self, obj: &Value) -> Vec<FieldError> {
        self.node(obj, "", true).errors
    }

    /// The errors of a value of this node that kube reports under the field `at` (a default in
    /// a CRD's schema: `...properties[size].default`); the messages keep the value's own paths.
    pub fn validate_under(&self, v: &Value, at: &str) -> Vec<FieldError> {
        let mut errs = self.node(v, "", false).errors;
        for e in &mut errs {
            e.field = if e.field.is_empty() || e.field == ROOT_FIELD { at.to_string() } else { format!("{at}.{}", e.field) };
        }
        errs
    }

    /// kube-openapi's `SchemaValidator.Validate` of the value `v` at `path`; `resource`: the
    /// value is the custom resource itself.
    fn node(&self, v: &Value, path: &str, resource: bool) -> Outcome {
        let mut out = Outcome::default();
        if v.is_null() {
            out.merge(self.check_type(v, path));
            out.merge(self.check_enum(v, path));
            return out;
        }
        // Each check that applies adds one to the count, besides what it counts itself.
        if !self.ty.is_empty() || self.int_or_string() || self.format.is_some() {
            out.merge_counted(self.check_type(v, path));
        }
        out.merge_counted(self.check_junctors(v, path));
        if let Value::String(s) = v {
            out.merge_counted(self.check_string(s, path));
            if let Some(format) = &self.format {
                let mut found = Outcome::default();
                if !formats::accepts(format, s) {
                    found.add(FieldError::type_invalid(path, Value::from(s.as_str()), format!("{path} in body must be of type {format}: {}", quote(s))));
                }
                out.merge_counted(found);
            }
        }
        if let Value::Number(_) = v {
            out.merge_counted(self.check_number(v, path));
        }
        if let Value::Array(items) = v {
            out.merge_counted(self.check_items(items, path));
        }
        out.merge_counted(self.check_enum(v, path));
        if let Value::Object(m) = v {
            out.merge_counted(self.check_members(m, path, resource));
        }
        out.count += 1;
        out
    }

    pub(super) fn int_or_string(&self) -> bool {
        self.raw.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true)
    }

    /// The types a value may have: `type`, or integer and string for
    /// `x-kubernetes-int-or-string`.
    fn types(&self) -> Vec<&str> {
        if self.int_or_string() {
            vec!["integer", "string"]
        } else if self.ty.is_empty() {
            Vec::new()
        } else {
            vec![self.ty.as_str()]
        }
    }

    /// kube-openapi's type check, with its treatment of a kept `format`: a value that is
    /// neither a string nor an array must then be of the type or carry the format, and a
    /// string or an array passes a schema of no numeric type.
    fn check_type(&self, v: &Value, path: &str) -> Outcome {
        let types = self.types();
        let format = self.format.as_deref();
        let (kind, go_format) = go_kind(v);
        let fail = |want: &str, got: &str| {
            let mut found = Outcome::default();
            found.add(FieldError::type_invalid(path, Value::from(got), format!("{path} in body must be of type {want}: {}", quote(got))));
            found
        };
        if v.is_null() {
            let nullable = self.nullable || types.contains(&"null");
            return if types.is_empty() || nullable { Outcome::counted(1) } else { fail(&types.join(","), "null") };
        }
        let float_int = kind == "number" && v.as_f64().is_some_and(is_json_integer) && types.contains(&"integer");
        let int_float = kind == "integer" && types.contains(&"number");
        let fits = types.contains(&kind) || float_int || int_float;
        let string_or_array = v.is_string() || v.is_array();
        if let Some(format) = format {
            if !(string_or_array || fits || go_format == format) {
                return fail(format, go_format);
            }
            if string_or_array && !types.contains(&"number") && !types.contains(&"integer") {
                return Outcome::counted(1);
            }
        }
        if fits { Outcome::counted(1) } else { fail(&types.join(","), kind) }
    }

    /// `anyOf`, `oneOf`, `allOf` and `not`, each sub-schema checked at the same path; of the
    /// failing alternatives of `anyOf` and `oneOf`, the errors of the one that got furthest
    /// (the highest count, the first of equals) are kept.
    fn check_junctors(&self, v: &Value, path: &str) -> Outcome {
        let mut out = Outcome::default();
        if !self.any_of.is_empty() {
            let mut best: Option<Outcome> = None;
            let mut success = None;
            for s in &self.any_of {
                let found = s.node(v, path, false);
                if found.errors.is_empty() {
                    success = Some(found);
                    best = None;
                    break;
                }
                if best.as_ref().is_none_or(|b| found.count > b.count) {
                    best = Some(found);
                }
            }
            if success.is_none() {
                out.add(composite(format!("{} must validate at least one schema (anyOf)", quote(path))));
            }
            out.merge(best.or(success).unwrap_or_default());
        }
        if !self.one_of.is_empty() {
            let mut best: Option<Outcome> = None;
            let mut success = None;
            let mut valid = 0;
            for s in &self.one_of {
                let found = s.node(v, path, false);
                if found.errors.is_empty() {
                    valid += 1;
                    best = None;
                    success.get_or_insert(found);
                } else if valid == 0 && best.as_ref().is_none_or(|b| found.count > b.count) {
                    best = Some(found);
                }
            }
            if valid == 1 {
                out.merge(success.unwrap_or_default());
            } else {
                let found = if valid == 0 { "Found none valid".to_string() } else { format!("Found {valid} valid alternatives") };
                out.add(composite(format!("{} must validate one and only one schema (oneOf). {found}", quote(path))));
                out.merge(best.unwrap_or_default());
            }
        }
        if !self.all_of.is_empty() {
            let mut valid = 0;
            for s in &self.all_of {
                let found = s.node(v, path, false);
                valid += usize::from(found.errors.is_empty());
                out.merge(found);
            }
            if valid < self.all_of.len() {
                let none = if valid == 0 { ". None validated" } else { "" };
                out.add(composite(format!("{} must validate all the schemas (allOf){none}", quote(path))));
            }
        }
        if let Some(not) = &self.not
            && not.node(v, path, false).errors.is_empty()
        {
            out.add(composite(format!("{} must not validate the schema (not)", quote(path))));
        }
        out.count += 1;
        out
    }

    /// `maxLength`, `minLength` (in characters) and `pattern`: the first that fails.
    fn check_string(&self, s: &str, path: &str) -> Outcome {
        let mut out = Outcome::default();
        let chars = s.chars().count() as u64;
        if let Some(max) = self.bound("maxLength").filter(|max| chars > *max) {
            out.add(FieldError::too_long(path, max as usize));
        } else if let Some(min) = self.bound("minLength").filter(|min| chars < *min) {
            out.add(FieldError::invalid(path, Value::from(s), format!("{path} in body should be at least {min} chars long")));
        } else if let Some(pattern) = &self.pattern
            && !pattern.is_match(s)
        {
            out.add(FieldError::invalid(path, Value::from(s), format!("{path} in body should match '{}'", pattern.source())));
        }
        out
    }

    /// `multipleOf`, `minimum` and `maximum`, as kube-openapi checks them for the value's Go
    /// type: an integer against the bounds truncated to integers, a float as a float.
    fn check_number(&self, v: &Value, path: &str) -> Outcome {
        let mut out = Outcome::counted(1);
        let Some(x) = GoNumber::of(v) else { return out };
        let number = |k: &str| self.raw.get(k).and_then(Value::as_f64);
        let flag = |k: &str| self.raw.get(k).and_then(Value::as_bool) == Some(true);
        if let Some(factor) = number("multipleOf") {
            let factor = x.like(factor);
            if !factor.is_positive() {
                out.add(FieldError::invalid(path, factor.value(), format!("factor MultipleOf declared for {path} must be positive: {factor}")));
            } else if !x.is_multiple_of(factor) {
                out.add(FieldError::invalid(path, v.clone(), format!("{path} in body should be a multiple of {factor}")));
            }
        }
        if let Some(min) = number("minimum").map(|m| x.like(m)) {
            let exclusive = flag("exclusiveMinimum");
            if x < min || (exclusive && x == min) {
                let how = if exclusive { "greater than" } else { "greater than or equal to" };
                out.add(FieldError::invalid(path, v.clone(), format!("{path} in body should be {how} {min}")));
            }
        }
        if let Some(max) = number("maximum").map(|m| x.like(m)) {
            let exclusive = flag("exclusiveMaximum");
            if x > max || (exclusive && x == max) {
                let how = if exclusive { "less than" } else { "less than or equal to" };
                out.add(FieldError::invalid(path, v.clone(), format!("{path} in body should be {how} {max}")));
            }
        }
        out
    }

    /// Each item (`path[i]`), then `minItems` and `maxItems`.
    fn check_items(&self, items: &[Value], path: &str) -> Outcome {
        let mut out = Outcome::counted(1);
        if let Some(item) = &self.items {
            for (i, x) in items.iter().enumerate() {
                out.merge(item.node(x, &format!("{path}[{i}]"), false));
            }
        }
        if let Some(min) = self.bound("minItems").filter(|min| (items.len() as u64) < *min) {
            out.add(FieldError::invalid(path, Value::from(items.len()), format!("{path} in body should have at least {min} items")));
        }
        if let Some(max) = self.bound("maxItems").filter(|max| items.len() as u64 > *max) {
            out.add(FieldError::too_many(path, items.len(), max as usize));
        }
        out
    }

    /// `enum`: the value equals one of its (non-null) values as Go converts one to the other.
    fn check_enum(&self, v: &Value, path: &str) -> Outcome {
        let mut out = Outcome::default();
        let Some(allowed) = self.raw.get("enum").and_then(Value::as_array).filter(|a| !a.is_empty()) else { return out };
        if !allowed.iter().any(|a| enum_matches(v, a)) {
            let names: Vec<String> = allowed.iter().map(|a| a.as_str().map_or_else(|| a.to_string(), str::to_string)).collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            out.add(FieldError::not_supported(path, v.clone(), &names));
        }
        out
    }

    /// `minProperties` and `maxProperties` (a failure ends the check), then each member, then
    /// `required`.
    fn check_members(&self, m: &Map<String, Value>, path: &str, resource: bool) -> Outcome {
        let mut out = Outcome::default();
        if let Some(min) = self.bound("minProperties").filter(|min| (m.len() as u64) < *min) {
            out.add(FieldError::invalid(path, Value::from(m.len()), format!("{path} in body should have at least {min} properties")));
            return out;
        }
        if let Some(max) = self.bound("maxProperties").filter(|max| m.len() as u64 > *max) {
            out.add(FieldError::too_many(path, m.len(), max as usize));
            return out;
        }
        for (k, x) in m {
            if resource && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") && !self.properties.contains_key(k) {
                continue;
            }
            if let Some(s) = self.properties.get(k).or(self.additional.as_deref()) {
                out.merge(s.node(x, &member_path(path, k), false));
            }
        }
        for name in self.raw.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            if !m.contains_key(name) {
                out.add(FieldError::required(member_path(path, name), ""));
            }
        }
        out
    }

    fn bound(&self, k: &str) -> Option<u64> {
        self.raw.get(k).and_then(Value::as_u64)
    }
}

fn member_path(path: &str, name: &str) -> String {
    if path.is_empty() { name.to_string() } else { format!("{path}.{name}") }
}

/// A junctor's message, which kube reports for the whole object.
fn composite(message: String) -> FieldError {
    FieldError::invalid(ROOT_FIELD, Value::from(""), message)
}

/// The JSON type kube-openapi names a value by, and the Go type it decoded to (`int64`,
/// `float64`, or nothing) that a schema's `format` is compared with.
fn go_kind(v: &Value) -> (&'static str, &'static str) {
    match v {
        Value::Null => ("null", ""),
        Value::Bool(_) => ("boolean", ""),
        Value::Number(n) if n.is_i64() => ("integer", "int64"),
        Value::Number(_) => ("number", "float64"),
        Value::String(_) => ("string", ""),
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
    }
}

/// Go's enum check: the value converted to the enum value's type, then compared (a float
/// converts to an integer by truncation, an integer to a string as the character it codes).
fn enum_matches(v: &Value, allowed: &Value) -> bool {
    match (v, allowed) {
        (_, Value::Null) | (Value::Null, _) => false,
        (Value::Number(x), Value::Number(a)) => match (GoNumber::of(v), GoNumber::of(allowed)) {
            (Some(x), Some(a)) => x.like_value(a) == a,
            _ => x == a,
        },
        (Value::Number(x), Value::String(a)) => {
            x.as_i64().map(|i| u32::try_from(i).ok().and_then(char::from_u32).unwrap_or('\u{fffd}').to_string()).as_deref() == Some(a.as_str())
        }
        _ => v == allowed,
    }
}

/// What checking a value found: its errors, each once and in order, and how many checks
/// applied, by which kube-openapi picks among failing alternatives.
#[derive(Default)]
struct Outcome {
    errors: Vec<FieldError>,
    seen: HashSet<String>,
    count: u32,
}

impl Outcome {
    fn counted(count: u32) -> Outcome {
        Outcome { count, ..Outcome::default() }
    }

    fn add(&mut self, e: FieldError) {
        if self.seen.insert(e.to_string()) {
            self.errors.push(e);
        }
    }

    fn merge(&mut self, other: Outcome) {
        self.count += other.count;
        for e in other.errors {
            self.add(e);
        }
    }

    /// Merges the outcome of a check that applied.
    fn merge_counted(&mut self, other: Outcome) {
        self.merge(other);
        self.count += 1;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn messages(schema: Value, obj: Value) -> Vec<String> {
        Structural::read(&schema).validate(&obj).iter().map(|e| e.to_string()).collect()
    }

    fn spec(spec_schema: Value, spec: Value) -> Vec<String> {
        messages(json!({"type": "object", "properties": {"spec": spec_schema}}), json!({"spec": spec}))
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
                "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
                "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
                "spec.short: Invalid value: \"ab\": spec.short in body should be at least 3 chars long",
            ]
        );
        assert_eq!(
            messages(schema, json!({"spec": {"replicas": 2, "name": "ABC", "items": [1]}})),
            vec![
                "spec.items[0]: Invalid value: \"integer\": spec.items[0] in body must be of type string: \"integer\"",
                "spec.name: Invalid value: \"ABC\": spec.name in body should match '^[a-z]+$'",
            ]
        );
    }

    #[test]
    fn formats_kube_keeps_are_checked_and_others_ignored() {
        let schema = json!({"type": "object", "properties": {"ip": {"type": "string", "format": "ipv4"}, "at": {"type": "string", "format": "date-time"},
            "n": {"type": "integer", "format": "int32"}, "d": {"type": "string", "format": "date"}, "any": {"type": "string", "format": "no-such-format"}}});
        assert_eq!(
            spec(schema.clone(), json!({"ip": "300.1.1.1", "at": "yesterday", "n": 9999999999i64, "any": "x"})),
            vec![
                "spec.at: Invalid value: \"yesterday\": spec.at in body must be of type date-time: \"yesterday\"",
                "spec.ip: Invalid value: \"300.1.1.1\": spec.ip in body must be of type ipv4: \"300.1.1.1\"",
            ]
        );
        assert_eq!(spec(schema.clone(), json!({"d": 5})), vec!["spec.d: Invalid value: \"int64\": spec.d in body must be of type date: \"int64\""]);
        assert!(spec(schema, json!({"ip": "10.0.0.1", "at": "2024-01-01T00:00:00Z", "d": "2024-02-29"})).is_empty());
    }

    #[test]
    fn any_of_reports_the_alternative_that_got_furthest() {
        let any_of = json!({"type": "object", "anyOf": [{"required": ["a"]}, {"required": ["b"]}]});
        assert_eq!(spec(any_of, json!({})), vec!["<nil>: Invalid value: \"\": \"spec\" must validate at least one schema (anyOf)", "spec.a: Required value"]);
        let deeper = json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "anyOf": [{"required": ["a"]}, {"properties": {"b": {"minLength": 3}}}]});
        assert_eq!(
            spec(deeper.clone(), json!({"b": "x"})),
            vec![
                "<nil>: Invalid value: \"\": \"spec\" must validate at least one schema (anyOf)",
                "spec.b: Invalid value: \"x\": spec.b in body should be at least 3 chars long"
            ]
        );
        assert!(spec(deeper, json!({"a": "x"})).is_empty());
    }

    #[test]
    fn one_of_all_of_and_not() {
        let one_of = json!({"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]});
        assert_eq!(
            spec(one_of.clone(), json!({"a": 1, "b": 2})),
            vec!["<nil>: Invalid value: \"\": \"spec\" must validate one and only one schema (oneOf). Found 2 valid alternatives"]
        );
        assert_eq!(
            spec(one_of.clone(), json!({})),
            vec!["<nil>: Invalid value: \"\": \"spec\" must validate one and only one schema (oneOf). Found none valid", "spec.a: Required value"]
        );
        assert!(spec(one_of, json!({"b": 1})).is_empty());
        let not = json!({"type": "object", "not": {"required": ["a"]}});
        assert_eq!(spec(not, json!({"a": 1})), vec!["<nil>: Invalid value: \"\": \"spec\" must not validate the schema (not)"]);
        let all_of = json!({"type": "object", "allOf": [{"required": ["a"]}, {"required": ["b"]}]});
        assert_eq!(
            spec(all_of.clone(), json!({})),
            vec![
                "spec.a: Required value",
                "spec.b: Required value",
                "<nil>: Invalid value: \"\": \"spec\" must validate all the schemas (allOf). None validated"
            ]
        );
        assert_eq!(spec(all_of, json!({"a": 1})), vec!["spec.b: Required value", "<nil>: Invalid value: \"\": \"spec\" must validate all the schemas (allOf)"]);
    }

    #[test]
    fn int_or_string_with_its_any_of_reports_as_kube() {
        let field = json!({"x-kubernetes-int-or-string": true, "nullable": true, "anyOf": [{"type": "integer"}, {"type": "string"}]});
        let got = messages(json!({"type": "object", "properties": {"field": field}}), json!({"field": true}));
        assert_eq!(
            got,
            vec![
                "field: Invalid value: \"boolean\": field in body must be of type integer,string: \"boolean\"",
                "<nil>: Invalid value: \"\": \"field\" must validate at least one schema (anyOf)",
                "field: Invalid value: \"boolean\": field in body must be of type integer: \"boolean\"",
            ]
        );
    }

    #[test]
    fn numbers_are_checked_in_their_go_type() {
        let bounded = json!({"type": "object", "properties": {"n": {"type": "number", "minimum": 1.5, "maximum": 1000000, "multipleOf": 0.5}}});
        assert_eq!(
            spec(bounded.clone(), json!({"n": 1})),
            vec!["spec.n: Invalid value: 0: factor MultipleOf declared for spec.n must be positive: 0"],
            "an integer is checked against the bounds truncated to integers: 1 is within 1.5 and 1e6, a multiple of 0.5 is no check"
        );
        assert_eq!(
            spec(bounded.clone(), json!({"n": 1.25})),
            vec![
                "spec.n: Invalid value: 1.25: spec.n in body should be a multiple of 0.5",
                "spec.n: Invalid value: 1.25: spec.n in body should be greater than or equal to 1.5"
            ]
        );
        assert_eq!(spec(bounded, json!({"n": 2000000.5})), vec!["spec.n: Invalid value: 2000000.5: spec.n in body should be less than or equal to 1e+06"]);
        let whole = json!({"type": "object", "properties": {"n": {"type": "integer"}, "e": {"type": "integer", "enum": [1, 2]}}});
        assert!(spec(whole.clone(), json!({"n": 3.0})).is_empty());
        assert_eq!(spec(whole.clone(), json!({"n": 3.5})), vec!["spec.n: Invalid value: \"number\": spec.n in body must be of type integer: \"number\""]);
        assert_eq!(spec(whole, json!({"e": 3})), vec!["spec.e: Unsupported value: 3: supported values: \"1\", \"2\""]);
    }

    #[test]
    fn object_bounds_end_the_check_of_an_object_and_present_nulls_are_no_missing_members() {
        let schema = json!({"type": "object", "maxProperties": 1, "required": ["a"], "properties": {"a": {"type": "string", "nullable": true}, "b": {"type": "string"}}});
        assert_eq!(spec(schema.clone(), json!({"b": 1, "c": 2})), vec!["spec: Too many: 2: must have at most 1 items"]);
        assert!(spec(schema, json!({"a": null})).is_empty());
    }
}
