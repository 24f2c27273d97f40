//! kube's checks of the parts of a CRD's versions that serving reads: the schema (see
//! [`validate_schema`]), `subresources.scale`, `additionalPrinterColumns` and `selectableFields`
//! (apiextensions-apiserver's `validateCustomResourceDefinitionVersion` and its top-level
//! counterparts).
//!
//! kube converts a v1 CRD to its internal form before validating it: a part that every version
//! has alike moves to the top of the spec (`spec.subresources`, `spec.additionalPrinterColumns`,
//! `spec.selectableFields`, the schema to `spec.validation`), and its errors are reported there;
//! parts that differ stay with their versions (`spec.versions[1].selectableFields[0]...`).

use serde_json::{Value, json};

use super::schema_rules::validate_schema;
use crate::status::FieldError;

/// The most selectable fields a version may declare.
const MAX_SELECTABLE_FIELDS: usize = 8;

/// The errors of the versions' scale paths, printer columns and selectable fields, at the paths
/// kube reports them, in its order: per version (parts that differ), then the shared ones.
pub fn validate_version_parts(spec: &Value) -> Vec<FieldError> {
    let versions: &[Value] = spec.get("versions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    let shared = |key: &str| !versions.is_empty() && versions.iter().all(|v| v.get(key) == versions[0].get(key));
    let schema_shared = shared("schema");
    let at = |key: &str, i: usize| if shared(key) { None } else { Some(format!("spec.versions[{i}].{key}")) };
    let has_status = |v: &Value| v.pointer("/subresources/status").is_some_and(|s| !s.is_null());
    let mut errs = Vec::new();
    if !(schema_shared && versions.first().and_then(schema_of).is_some()) {
        for (i, _) in versions.iter().enumerate().filter(|(_, v)| schema_of(v).is_none()) {
            errs.push(FieldError::required(format!("spec.versions[{i}].schema.openAPIV3Schema"), "schemas are required"));
        }
    }
    for (i, v) in versions.iter().enumerate() {
        if !schema_shared && let Some(schema) = schema_of(v) {
            errs.extend(validate_schema(schema, &format!("spec.versions[{i}].schema.openAPIV3Schema"), has_status(v)));
        }
        if let Some(path) = at("subresources", i) {
            scale(&mut errs, v.get("subresources"), &path);
        }
        if let Some(path) = at("additionalPrinterColumns", i) {
            columns(&mut errs, v.get("additionalPrinterColumns"), &path);
        }
        if let Some(path) = at("selectableFields", i) {
            // A schema every version shares is the spec's by then, no longer the version's.
            let schema = if schema_shared { None } else { schema_of(v) };
            selectable(&mut errs, v.get("selectableFields"), schema, &path, "version.schema.openAPIV3Schema is not included");
        }
    }
    if let Some(first) = versions.first() {
        if schema_shared && let Some(schema) = schema_of(first) {
            errs.extend(validate_schema(schema, "spec.validation.openAPIV3Schema", versions.iter().any(has_status)));
        }
        if shared("subresources") {
            scale(&mut errs, first.get("subresources"), "spec.subresources");
        }
        if shared("additionalPrinterColumns") {
            columns(&mut errs, first.get("additionalPrinterColumns"), "spec.additionalPrinterColumns");
        }
        if shared("selectableFields") {
            let schema = if schema_shared { schema_of(first) } else { None };
            selectable(&mut errs, first.get("selectableFields"), schema, "spec.selectableFields", "validations.schema is included");
        }
    }
    errs
}

fn schema_of(version: &Value) -> Option<&Value> {
    version.pointer("/schema/openAPIV3Schema")
}

/// `validateSimpleJSONPath`: only a path starting with a dot.
fn simple_path(errs: &mut Vec<FieldError>, path: &str, field: &str) -> bool {
    if path.starts_with('.') {
        return true;
    }
    errs.push(FieldError::invalid(field, json!(path), "must be a simple json path starting with ."));
    false
}

fn scale(errs: &mut Vec<FieldError>, subresources: Option<&Value>, at: &str) {
    let Some(scale) = subresources.and_then(|s| s.get("scale")) else { return };
    let text = |k: &str| scale.get(k).and_then(Value::as_str).unwrap_or_default();
    for (key, prefixes, detail) in [
        ("specReplicasPath", &[".spec."][..], "should be a json path under .spec"),
        ("statusReplicasPath", &[".status."][..], "should be a json path under .status"),
    ] {
        let field = format!("{at}.scale.{key}");
        let path = text(key);
        if path.is_empty() {
            errs.push(FieldError::required(field, ""));
        } else if simple_path(errs, path, &field) && !prefixes.iter().any(|p| path.starts_with(p)) {
            errs.push(FieldError::invalid(field, json!(path), detail));
        }
    }
    let selector = text("labelSelectorPath");
    let field = format!("{at}.scale.labelSelectorPath");
    if !selector.is_empty() && simple_path(errs, selector, &field) && !selector.starts_with(".spec.") && !selector.starts_with(".status.") {
        errs.push(FieldError::invalid(field, json!(selector), "should be a json path under either .spec or .status"));
    }
}

fn columns(errs: &mut Vec<FieldError>, columns: Option<&Value>, at: &str) {
    for (j, c) in columns.and_then(Value::as_array).into_iter().flatten().enumerate() {
        let text = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default();
        let field = |k: &str| format!("{at}[{j}].{k}");
        if text("name").is_empty() {
            errs.push(FieldError::required(field("name"), ""));
        }
        const TYPES: &str = "must be one of boolean,date,integer,number,string";
        match text("type") {
            "" => errs.push(FieldError::required(field("type"), TYPES)),
            "boolean" | "date" | "integer" | "number" | "string" => {}
            other => errs.push(FieldError::invalid(field("type"), json!(other), TYPES)),
        }
        let format = text("format");
        if !format.is_empty() && !matches!(format, "byte" | "date" | "date-time" | "double" | "float" | "int32" | "int64" | "password") {
            errs.push(FieldError::invalid(field("format"), json!(format), "must be one of byte,date,date-time,double,float,int32,int64,password"));
        }
        match text("jsonPath") {
            "" => errs.push(FieldError::required(field("JSONPath"), "")),
            path => {
                simple_path(errs, path, &field("JSONPath"));
            }
        }
    }
}

/// The type of the field a selectable field's path names, or why the path names none
/// (`cel.ValidFieldPath` without array notation).
fn field_type<'a>(schema: &'a Value, path: &str) -> Result<&'a str, String> {
    let mut node = schema;
    let mut rest = path;
    if rest.is_empty() {
        return Err("unexpected end of JSON path".into());
    }
    while !rest.is_empty() {
        let Some(after_dot) = rest.strip_prefix('.') else {
            return Err(if rest.starts_with('[') { "array notation is not allowed".into() } else { format!("expected [ or . but got: {rest}") });
        };
        let end = after_dot.find(['.', '[']).unwrap_or(after_dot.len());
        let (name, tail) = after_dot.split_at(end);
        if name.is_empty() {
            return Err("unexpected end of JSON path".into());
        }
        node = node.get("properties").and_then(|p| p.get(name)).ok_or("does not refer to a valid field")?;
        rest = tail;
    }
    Ok(node.get("type").and_then(Value::as_str).unwrap_or_default())
}

/// `without_schema`: how kube words the want of a schema there (its version's words say "not
/// included" where they mean the opposite).
fn selectable(errs: &mut Vec<FieldError>, fields: Option<&Value>, schema: Option<&Value>, at: &str, without_schema: &str) {
    let Some(fields) = fields.and_then(Value::as_array).filter(|f| !f.is_empty()) else { return };
    let Some(schema) = schema else {
        errs.push(FieldError::invalid(at, json!(""), format!("selectableFields may only be set when {without_schema}")));
        return;
    };
    let mut seen: Vec<&str> = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        let field = format!("{at}[{i}].jsonPath");
        let path = f.get("jsonPath").and_then(Value::as_str).unwrap_or_default();
        if path.is_empty() {
            errs.push(FieldError::required(field, ""));
            continue;
        }
        let ty = match field_type(schema, path) {
            Ok(ty) => ty,
            Err(e) => {
                errs.push(FieldError::invalid(&field, json!(path), format!("is an invalid path: {e}")));
                continue;
            }
        };
        if path.trim_start_matches('.').split(['.', '[']).next() == Some("metadata") {
            errs.push(FieldError::invalid(&field, json!(path), "must not point to fields in metadata"));
        }
        if !matches!(ty, "string" | "boolean" | "integer") {
            errs.push(FieldError::invalid(
                &field,
                json!(path),
                "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            ));
        }
        if seen.contains(&path) {
            errs.push(FieldError::duplicate(&field, json!(path)));
        } else {
            seen.push(path);
        }
    }
    if seen.len() > MAX_SELECTABLE_FIELDS {
        errs.push(FieldError::too_many(at, seen.len(), MAX_SELECTABLE_FIELDS));
    }
}
