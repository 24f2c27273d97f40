//! kube's checks of a CRD version's `openAPIV3Schema` (apiextensions-apiserver's
//! `validateCustomResourceDefinitionValidation`), at kube's paths
//! (`spec.validation.openAPIV3Schema.properties[spec].type`): the root's own rules, the rules
//! that make a schema structural (`pkg/apiserver/schema/validation.go`, reported sorted by
//! their text), the defaults, then the OpenAPI checks of every node
//! (`ValidateCustomResourceDefinitionOpenAPISchema`), then the CEL rules of a structural
//! schema ([`super::rule_checks`]).

use serde_json::{Map, Value, json};

use super::listtype::go_syntax;
use super::pattern::Pattern;
use super::structural::Structural;
use crate::status::FieldError;

/// Where a node sits: kube's messages for a missing type differ by it.
#[derive(Clone, Copy, PartialEq)]
enum Level {
    Root,
    Item,
    Field,
}

/// The errors of the schema at `at`; `status`: the version has a `/status` subresource.
pub fn validate_schema(schema: &Value, at: &str, status: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ty = text(schema, "type");
    if status && !ty.is_empty() && ty != "object" {
        errs.push(FieldError::invalid(
            format!("{at}.type"),
            json!(ty),
            "only \"object\" is allowed as the type at the root of the schema if the status subresource is enabled",
        ));
    }
    if flag(schema, "nullable") {
        errs.push(FieldError::forbidden(format!("{at}.nullable"), "nullable cannot be true at the root"));
    }
    let mut structural = Vec::new();
    invariants(schema, Level::Root, at, &mut structural);
    completeness(schema, Some(schema), at, at, &mut structural);
    structural.sort_by_cached_key(FieldError::to_string);
    let is_structural = structural.is_empty();
    if is_structural {
        defaults(&Structural::read(schema), at, true, &mut structural);
    }
    errs.extend(structural);
    openapi(schema, at, &mut errs);
    if is_structural {
        errs.extend(super::rule_checks::check_rules(schema, at));
    }
    errs
}

fn text<'a>(s: &'a Value, k: &str) -> &'a str {
    s.get(k).and_then(Value::as_str).unwrap_or_default()
}

fn flag(s: &Value, k: &str) -> bool {
    s.get(k).and_then(Value::as_bool) == Some(true)
}

fn properties(s: &Value) -> impl Iterator<Item = (&String, &Value)> {
    s.get("properties").and_then(Value::as_object).into_iter().flatten()
}

fn schemas<'a>(s: &'a Value, k: &str) -> impl Iterator<Item = (usize, &'a Value)> {
    s.get(k).and_then(Value::as_array).into_iter().flatten().enumerate()
}

fn property_path(at: &str, k: &str) -> String {
    format!("{at}.properties[{k}]")
}

/// `validateStructuralInvariants`: the structural part of a node and what it nests.
fn invariants(s: &Value, level: Level, at: &str, errs: &mut Vec<FieldError>) {
    let ty = text(s, "type");
    let (int_or_string, preserve, embedded) =
        (flag(s, "x-kubernetes-int-or-string"), flag(s, "x-kubernetes-preserve-unknown-fields"), flag(s, "x-kubernetes-embedded-resource"));
    if ty == "array" && s.get("items").is_none() {
        errs.push(FieldError::required(format!("{at}.items"), "must be specified"));
    }
    if let Some(items) = s.get("items").filter(|i| i.is_object()) {
        invariants(items, Level::Item, &format!("{at}.items"), errs);
    }
    for (k, p) in properties(s) {
        invariants(p, Level::Field, &property_path(at, k), errs);
    }
    if let Some(additional) = s.get("additionalProperties") {
        if level == Level::Root {
            errs.push(FieldError::forbidden(format!("{at}.additionalProperties"), "must not be used at the root"));
        }
        if additional.is_object() {
            invariants(additional, Level::Field, &format!("{at}.additionalProperties"), errs);
        }
    }
    if int_or_string && preserve {
        errs.push(FieldError::invalid(
            format!("{at}.x-kubernetes-preserve-unknown-fields"),
            json!(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if int_or_string && embedded {
        errs.push(FieldError::invalid(format!("{at}.x-kubernetes-embedded-resource"), json!(true), "must be false if x-kubernetes-int-or-string is true"));
    }
    let int_or_string_any_of = |v: &Value| v.get("anyOf") == Some(&json!([{"type": "integer"}, {"type": "string"}]));
    let skip_first_all_of = s.get("allOf").and_then(|a| a.get(0)).is_some_and(int_or_string_any_of);
    value_validation(s, int_or_string_any_of(s), skip_first_all_of, level, at, errs);
    let type_at = format!("{at}.type");
    if embedded && ty != "object" {
        let detail = "must be object if x-kubernetes-embedded-resource is true";
        errs.push(if ty.is_empty() { FieldError::required(type_at, detail) } else { FieldError::invalid(type_at, json!(ty), detail) });
    } else if ty.is_empty() && !int_or_string && !preserve {
        let detail = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(FieldError::required(type_at, detail));
    }
    if embedded && s.get("additionalProperties").is_some() {
        errs.push(FieldError::forbidden(format!("{at}.additionalProperties"), "must not be used if x-kubernetes-embedded-resource is set"));
    }
    if level == Level::Root && !ty.is_empty() && ty != "object" {
        errs.push(FieldError::invalid(format!("{at}.type"), json!(ty), "must be object at the root"));
    }
    let props = s.get("properties").and_then(Value::as_object);
    if level == Level::Root || embedded {
        for (name, want) in [("kind", "string"), ("apiVersion", "string"), ("metadata", "object")] {
            if let Some(p) = props.and_then(|m| m.get(name))
                && text(p, "type") != want
            {
                errs.push(FieldError::invalid(format!("{}.type", property_path(at, name)), json!(text(p, "type")), format!("must be {want}")));
            }
        }
    }
    if level == Level::Root
        && let Some(metadata) = props.and_then(|m| m.get("metadata"))
        && restricts_more_than_names(metadata)
    {
        errs.push(FieldError::forbidden(
            property_path(at, "metadata"),
            "must not specify anything other than name and generateName, but metadata is implicitly specified",
        ));
    }
    if embedded && !preserve && props.is_none_or(Map::is_empty) {
        errs.push(FieldError::required(
            format!("{at}.properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// Whether the root's `metadata` schema says more than its type, its default and the schemas
/// of `name` and `generateName`. Keywords a structural schema does not keep (`example`,
/// `externalDocs`) and zero values say nothing.
fn restricts_more_than_names(metadata: &Value) -> bool {
    let Some(m) = metadata.as_object() else { return false };
    m.iter().any(|(k, v)| match k.as_str() {
        "type" | "default" | "example" | "externalDocs" => false,
        "properties" => v.as_object().is_some_and(|p| !p.is_empty() && !p.keys().all(|n| n == "name" || n == "generateName")),
        _ => !matches!(v, Value::Bool(false) | Value::Null) && v.as_str() != Some("") && v.as_array().is_none_or(|a| !a.is_empty()),
    })
}

/// `validateValueValidation`: the junctors of a node (the int-or-string `anyOf` patterns
/// excepted) and its `pattern`.
fn value_validation(s: &Value, skip_any_of: bool, skip_first_all_of_any_of: bool, level: Level, at: &str, errs: &mut Vec<FieldError>) {
    if !skip_any_of {
        for (i, v) in schemas(s, "anyOf") {
            nested(v, false, level, &format!("{at}.anyOf[{i}]"), errs);
        }
    }
    for (i, v) in schemas(s, "allOf") {
        nested(v, skip_first_all_of_any_of && i == 0, level, &format!("{at}.allOf[{i}]"), errs);
    }
    for (i, v) in schemas(s, "oneOf") {
        nested(v, false, level, &format!("{at}.oneOf[{i}]"), errs);
    }
    if let Some(not) = s.get("not") {
        nested(not, false, level, &format!("{at}.not"), errs);
    }
    if let Some(pattern) = s.get("pattern").and_then(Value::as_str)
        && let Some(problem) = Pattern::new(pattern).problem()
    {
        errs.push(FieldError::invalid(format!("{at}.pattern"), json!(pattern), format!("must be a valid regular expression, but isn't: {problem}")));
    }
}

/// `validateNestedValueValidation`: a schema under a junctor may only check values, not
/// describe them.
fn nested(v: &Value, skip_any_of: bool, level: Level, at: &str, errs: &mut Vec<FieldError>) {
    value_validation(v, skip_any_of, false, level, at, errs);
    if let Some(items) = v.get("items") {
        nested(items, false, level, &format!("{at}.items"), errs);
    }
    for (k, p) in properties(v) {
        nested(p, false, Level::Field, &property_path(at, k), errs);
    }
    let present = |k: &str| match v.get(k) {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(_) => true,
    };
    for (key, detail) in [
        ("type", "must be empty to be structural"),
        ("additionalProperties", "must be undefined to be structural"),
        ("default", "must be undefined to be structural"),
        ("title", "must be empty to be structural"),
        ("description", "must be empty to be structural"),
        ("nullable", "must be false to be structural"),
        ("x-kubernetes-preserve-unknown-fields", "must be false to be structural"),
        ("x-kubernetes-embedded-resource", "must be false to be structural"),
        ("x-kubernetes-int-or-string", "must be false to be structural"),
        ("x-kubernetes-list-map-keys", "must be empty to be structural"),
        ("x-kubernetes-list-type", "must be undefined to be structural"),
        ("x-kubernetes-map-type", "must be undefined to be structural"),
        ("x-kubernetes-validations", "must be empty to be structural"),
    ] {
        let defined = if key == "additionalProperties" || key == "default" || key == "x-kubernetes-list-type" || key == "x-kubernetes-map-type" {
            v.get(key).is_some_and(|x| !x.is_null())
        } else {
            present(key)
        };
        if defined {
            errs.push(FieldError::forbidden(format!("{at}.{key}"), detail));
        }
    }
    if v.get("properties").and_then(|p| p.get("metadata")).is_some() {
        errs.push(FieldError::forbidden(property_path(at, "metadata"), "must not be specified in a nested context"));
    }
}

/// kube's checks of the defaults (`defaulting/validation.go`), where the schema is structural:
/// a default is what pruning by its node leaves of it, valid by that node, and then by its
/// CEL rules (the default its own old value). `root`: the
/// node is the schema's root, whose `apiVersion`, `kind` and `metadata` take no default.
fn defaults(s: &Structural, at: &str, root: bool, errs: &mut Vec<FieldError>) {
    if let Some(default) = s.default.as_ref().filter(|d| !d.is_null()) {
        let mut pruned = default.clone();
        if s.prune_value(&mut pruned) {
            let (field, detail) = (format!("{at}.default"), "must not have unknown fields");
            errs.push(match default {
                Value::Object(_) | Value::Array(_) => FieldError::invalid_go(field, go_syntax(default), detail),
                scalar => FieldError::invalid(field, scalar.clone(), detail),
            });
        }
        let invalid = s.validate_under(default, &format!("{at}.default"));
        if invalid.is_empty() {
            errs.extend(s.validate_rules_under(default, &format!("{at}.default")));
        }
        errs.extend(invalid);
    }
    if let Some(items) = &s.items {
        defaults(items, &format!("{at}.items"), false, errs);
    }
    for (k, p) in &s.properties {
        if root && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") && p.default.as_ref().is_some_and(|d| !d.is_null()) {
            errs.push(FieldError::forbidden(format!("{}.default", property_path(at, k)), format!("must not be set in top-level {k}")));
            continue;
        }
        defaults(p, &property_path(at, k), false, errs);
    }
}

/// `validateStructuralCompleteness`: what the root's junctors mention (properties, items) the
/// schema must describe itself. `v`: a junctor's schema; `s`: the schema's node at the same
/// place, if it has one.
fn completeness(v: &Value, s: Option<&Value>, s_at: &str, v_at: &str, errs: &mut Vec<FieldError>) {
    let Some(s) = s else {
        errs.push(FieldError::required(s_at, format!("because it is defined in {v_at}")));
        return;
    };
    if let Some(not) = v.get("not") {
        nested_completeness(not, s, s_at, &format!("{v_at}.not"), errs);
    }
    for junctor in ["allOf", "anyOf", "oneOf"] {
        for (i, branch) in schemas(v, junctor) {
            nested_completeness(branch, s, s_at, &format!("{v_at}.{junctor}[{i}]"), errs);
        }
    }
}

fn nested_completeness(v: &Value, s: &Value, s_at: &str, v_at: &str, errs: &mut Vec<FieldError>) {
    completeness(v, Some(s), s_at, v_at, errs);
    if let Some(items) = v.get("items").filter(|i| i.is_object()) {
        match s.get("items").filter(|i| i.is_object()) {
            Some(s_items) => nested_completeness(items, s_items, &format!("{s_at}.items"), &format!("{v_at}.items"), errs),
            None => errs.push(FieldError::required(format!("{s_at}.items"), format!("because it is defined in {v_at}.items"))),
        }
    }
    for (k, p) in properties(v) {
        let (s_prop, v_prop) = (property_path(s_at, k), property_path(v_at, k));
        match s.get("properties").and_then(|m| m.get(k)) {
            Some(sp) => nested_completeness(p, sp, &s_prop, &v_prop, errs),
            None => errs.push(FieldError::required(s_prop, format!("because it is defined in {v_prop}"))),
        }
    }
}

/// `ValidateCustomResourceDefinitionOpenAPISchema` of a node and, in kube's order, what it nests.
fn openapi(s: &Value, at: &str, errs: &mut Vec<FieldError>) {
    let ty = text(s, "type");
    if !ty.is_empty() && !["array", "boolean", "integer", "number", "object", "string"].contains(&ty) {
        errs.push(FieldError::not_supported(format!("{at}.type"), json!(ty), &["array", "boolean", "integer", "number", "object", "string"]));
    }
    for (key, detail) in [
        ("id", "id is not supported"),
        ("additionalItems", "additionalItems is not supported"),
        ("patternProperties", "patternProperties is not supported"),
        ("definitions", "definitions is not supported"),
        ("dependencies", "dependencies is not supported"),
        ("$ref", "$ref is not supported"),
    ] {
        if s.get(key).is_some_and(|v| !v.is_null() && v.as_str() != Some("") && v.as_object().is_none_or(|m| !m.is_empty())) {
            errs.push(FieldError::forbidden(format!("{at}.{key}"), detail));
        }
    }
    if ty == "null" {
        errs.push(FieldError::forbidden(format!("{at}.type"), "type cannot be set to null, use nullable as an alternative"));
    }
    if s.get("items").is_some_and(Value::is_array) {
        errs.push(FieldError::forbidden(format!("{at}.items"), "items must be a schema object and not an array"));
    }
    if flag(s, "uniqueItems") {
        errs.push(FieldError::forbidden(format!("{at}.uniqueItems"), "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"));
    }
    let has_properties = s.get("properties").and_then(Value::as_object).is_some_and(|p| !p.is_empty());
    if has_properties && s.get("additionalProperties").is_some_and(|a| a.is_object() || *a == Value::Bool(false)) {
        errs.push(FieldError::forbidden(format!("{at}.additionalProperties"), "additionalProperties and properties are mutual exclusive"));
    }
    if let Some(additional) = s.get("additionalProperties").filter(|a| a.is_object()) {
        openapi(additional, &format!("{at}.additionalProperties"), errs);
    }
    for (k, p) in properties(s) {
        openapi(p, &property_path(at, k), errs);
    }
    if let Some(not) = s.get("not").filter(|n| n.is_object()) {
        openapi(not, &format!("{at}.not"), errs);
    }
    for junctor in ["allOf", "oneOf", "anyOf"] {
        for (i, v) in schemas(s, junctor) {
            openapi(v, &format!("{at}.{junctor}[{i}]"), errs);
        }
    }
    if let Some(items) = s.get("items").filter(|i| i.is_object()) {
        openapi(items, &format!("{at}.items"), errs);
    }
    if s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        errs.push(FieldError::invalid(format!("{at}.x-kubernetes-preserve-unknown-fields"), json!(false), "must be true or undefined"));
    }
    list_and_map_types(s, at, errs);
}

/// `x-kubernetes-map-type`, `x-kubernetes-list-type` and `x-kubernetes-list-map-keys`.
fn list_and_map_types(s: &Value, at: &str, errs: &mut Vec<FieldError>) {
    let ty = text(s, "type");
    let wrong_type = |want: &str, key: &str, errs: &mut Vec<FieldError>| {
        let detail = format!("must be {want} if x-kubernetes-{key}-type is specified");
        errs.push(if ty.is_empty() {
            FieldError::required(format!("{at}.type"), detail)
        } else {
            FieldError::invalid(format!("{at}.type"), json!(ty), detail)
        });
    };
    if let Some(map_type) = s.get("x-kubernetes-map-type").and_then(Value::as_str) {
        if ty != "object" {
            wrong_type("object", "map", errs);
        }
        if map_type != "atomic" && map_type != "granular" {
            errs.push(FieldError::not_supported(format!("{at}.x-kubernetes-map-type"), json!(map_type), &["atomic", "granular"]));
        }
    }
    let list_type = s.get("x-kubernetes-list-type").and_then(Value::as_str);
    if let Some(list_type) = list_type {
        if ty != "array" {
            wrong_type("array", "list", errs);
        }
        if !["atomic", "set", "map"].contains(&list_type) {
            errs.push(FieldError::not_supported(format!("{at}.x-kubernetes-list-type"), json!(list_type), &["atomic", "set", "map"]));
        }
    }
    let items = s.get("items").filter(|i| i.is_object());
    if list_type == Some("set")
        && let Some(items) = items
    {
        let item_list_type = items.get("x-kubernetes-list-type").and_then(Value::as_str);
        if text(items, "type") == "array" && item_list_type.is_some_and(|t| t != "atomic") {
            errs.push(FieldError::invalid(
                format!("{at}.items.x-kubernetes-list-type"),
                json!(item_list_type),
                "must be atomic as item of a list with x-kubernetes-list-type=set",
            ));
        }
        if text(items, "type") == "object" && text(items, "x-kubernetes-map-type") != "atomic" {
            errs.push(FieldError::invalid(
                format!("{at}.items.x-kubernetes-map-type"),
                json!(item_list_type),
                "must be atomic as item of a list with x-kubernetes-list-type=set",
            ));
        }
    }
    let keys: Vec<&str> = s.get("x-kubernetes-list-map-keys").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let keys_go = || format!("[]string{{{}}}", keys.iter().map(|k| crate::status::quote(k)).collect::<Vec<_>>().join(", "));
    if !keys.is_empty() && list_type != Some("map") {
        let detail = "must be map if x-kubernetes-list-map-keys is non-empty";
        errs.push(match list_type {
            None => FieldError::required(format!("{at}.x-kubernetes-list-type"), detail),
            Some(t) => FieldError::invalid(format!("{at}.x-kubernetes-list-type"), json!(t), detail),
        });
    }
    if list_type == Some("map") {
        if keys.is_empty() {
            errs.push(FieldError::required(format!("{at}.x-kubernetes-list-map-keys"), "must not be empty if x-kubernetes-list-type is map"));
        }
        match s.get("items") {
            None => errs.push(FieldError::required(format!("{at}.items"), "must have a schema if x-kubernetes-list-type is map")),
            Some(Value::Array(_)) => {
                errs.push(FieldError::invalid(format!("{at}.items"), Value::from(""), "must only have a single schema if x-kubernetes-list-type is map"))
            }
            Some(items) => {
                let item_type = text(items, "type");
                if item_type != "object" {
                    errs.push(FieldError::invalid(
                        format!("{at}.items.type"),
                        json!(item_type),
                        "must be object if parent array's x-kubernetes-list-type is map",
                    ));
                } else {
                    for k in &keys {
                        if let Some(p) = items.get("properties").and_then(|p| p.get(*k))
                            && matches!(text(p, "type"), "array" | "object")
                        {
                            errs.push(FieldError::invalid(
                                format!("{}.type", property_path(&format!("{at}.items"), k)),
                                json!(item_type),
                                "must be a scalar type if parent array's x-kubernetes-list-type is map",
                            ));
                        }
                    }
                }
                for _ in keys.iter().filter(|k| items.get("properties").and_then(|p| p.get(**k)).is_none()) {
                    errs.push(FieldError::invalid_go(format!("{at}.x-kubernetes-list-map-keys"), keys_go(), "entries must all be names of item properties"));
                }
                let mut sorted = keys.clone();
                sorted.sort_unstable();
                if sorted.windows(2).any(|w| w[0] == w[1]) {
                    errs.push(FieldError::invalid_go(format!("{at}.x-kubernetes-list-map-keys"), keys_go(), "must not contain duplicate entries"));
                }
            }
        }
    }
    if let (Some(t @ ("set" | "map")), Some(items)) = (list_type, items) {
        if flag(items, "nullable") {
            errs.push(FieldError::forbidden(format!("{at}.items.nullable"), format!("cannot be nullable when x-kubernetes-list-type is {t}")));
        }
        if t == "map" {
            let required: Vec<&str> = items.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
            for k in &keys {
                let Some(p) = items.get("properties").and_then(|p| p.get(*k)) else { continue };
                let at = property_path(&format!("{at}.items"), k);
                if p.get("default").is_none() && !required.contains(k) {
                    errs.push(FieldError::required(
                        format!("{at}.default"),
                        "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                    ));
                }
                if flag(p, "nullable") {
                    errs.push(FieldError::forbidden(format!("{at}.nullable"), "this property is in x-kubernetes-list-map-keys, so it cannot be nullable"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: &str = "spec.validation.openAPIV3Schema";

    #[test]
    fn defaults_must_be_pruned_and_valid() {
        let schema = json!({"type": "object", "properties": {"metadata": {"type": "object", "default": {}},
            "spec": {"type": "object", "properties": {"size": {"type": "integer", "default": "big"}, "n": {"type": "integer", "minimum": 2, "default": 1},
                "mode": {"type": "object", "properties": {"a": {"type": "string"}}, "default": {"a": "x", "b": 1}},
                "sub": {"type": "object", "properties": {"a": {"type": "string", "maxLength": 1}}, "default": {"a": "long"}}}}}});
        assert_eq!(
            messages(schema),
            vec![
                format!("{AT}.properties[metadata].default: Forbidden: must not be set in top-level metadata"),
                format!(
                    "{AT}.properties[spec].properties[mode].default: Invalid value: map[string]interface {{}}{{\"a\":\"x\", \"b\":1}}: must not have unknown fields"
                ),
                format!("{AT}.properties[spec].properties[n].default: Invalid value: 1:  in body should be greater than or equal to 2"),
                format!("{AT}.properties[spec].properties[size].default: Invalid value: \"string\":  in body must be of type integer: \"string\""),
                format!("{AT}.properties[spec].properties[sub].default.a: Too long: may not be more than 1 bytes"),
            ]
        );
    }

    fn messages(schema: Value) -> Vec<String> {
        validate_schema(&schema, AT, false).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_structural_schema_passes() {
        let schema = json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}}},
            "spec": {"type": "object", "properties": {"port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}},
                "free": {"x-kubernetes-preserve-unknown-fields": true}, "size": {"type": "integer", "default": 1, "allOf": [{"minimum": 1}]},
                "mode": {"type": "object", "default": {"a": "x"}, "properties": {"a": {"type": "string"}}}}}}});
        assert_eq!(messages(schema), Vec::<String>::new());
    }

    #[test]
    fn non_structural_schemas_are_refused_with_kubes_messages() {
        let schema = json!({"allOf": [{"properties": {"spec": {"properties": {"a": {"maxLength": 1}, "nope": {"minimum": 1}}}}}],
            "properties": {"spec": {"type": "object", "properties": {"a": {}, "list": {"type": "array"},
            "b": {"type": "string", "anyOf": [{"type": "string", "description": "x"}]}, "p": {"type": "string", "pattern": "a("}}},
            "metadata": {"type": "object", "description": "mine"}}, "additionalProperties": true});
        assert_eq!(
            messages(schema),
            vec![
                format!("{AT}.additionalProperties: Forbidden: must not be used at the root"),
                format!(
                    "{AT}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
                ),
                format!("{AT}.properties[spec].properties[a].type: Required value: must not be empty for specified object fields"),
                format!("{AT}.properties[spec].properties[b].anyOf[0].description: Forbidden: must be empty to be structural"),
                format!("{AT}.properties[spec].properties[b].anyOf[0].type: Forbidden: must be empty to be structural"),
                format!("{AT}.properties[spec].properties[list].items: Required value: must be specified"),
                format!("{AT}.properties[spec].properties[nope]: Required value: because it is defined in {AT}.allOf[0].properties[spec].properties[nope]"),
                format!(
                    "{AT}.properties[spec].properties[p].pattern: Invalid value: \"a(\": must be a valid regular expression, but isn't: error parsing regexp: missing closing ): `a(`"
                ),
                format!("{AT}.type: Required value: must not be empty at the root"),
            ]
        );
    }

    #[test]
    fn openapi_checks_follow_the_structural_ones() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "tags": {"type": "array", "uniqueItems": true, "items": {"type": "string"}},
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "port"],
                "items": {"type": "object", "properties": {"port": {"type": "integer", "nullable": true}}}},
            "mode": {"type": "string", "x-kubernetes-map-type": "atomic"}, "n": {"type": "null"},
            "keep": {"type": "object", "x-kubernetes-preserve-unknown-fields": false}}}}});
        assert_eq!(
            messages(schema),
            vec![
                format!("{AT}.properties[spec].properties[keep].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"),
                format!("{AT}.properties[spec].properties[mode].type: Invalid value: \"string\": must be object if x-kubernetes-map-type is specified"),
                format!(
                    "{AT}.properties[spec].properties[n].type: Unsupported value: \"null\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\""
                ),
                format!("{AT}.properties[spec].properties[n].type: Forbidden: type cannot be set to null, use nullable as an alternative"),
                format!(
                    "{AT}.properties[spec].properties[ports].x-kubernetes-list-map-keys: Invalid value: []string{{\"port\", \"port\"}}: must not contain duplicate entries"
                ),
                format!(
                    "{AT}.properties[spec].properties[ports].items.properties[port].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"
                ),
                format!(
                    "{AT}.properties[spec].properties[ports].items.properties[port].nullable: Forbidden: this property is in x-kubernetes-list-map-keys, so it cannot be nullable"
                ),
                // Once per entry, as kube reports them, the duplicate included.
                format!(
                    "{AT}.properties[spec].properties[ports].items.properties[port].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"
                ),
                format!(
                    "{AT}.properties[spec].properties[ports].items.properties[port].nullable: Forbidden: this property is in x-kubernetes-list-map-keys, so it cannot be nullable"
                ),
                format!(
                    "{AT}.properties[spec].properties[tags].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
                ),
            ]
        );
    }
}
