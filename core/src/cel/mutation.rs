//! What kube gives the expressions of a MutatingAdmissionPolicy's mutations on top of the
//! shared environment (`compile.go`'s patch types, `pkg/cel/mutation`): the object types
//! `Object` and `Object.<field>...` (any field, of any type), whose values an
//! ApplyConfiguration is written in; `JSONPatch` (`op`, `path`, `from`: strings; `value`:
//! anything), the operations of a JSON patch; and `jsonpatch.escapeKey`.
//!
//! cel-rust finds a struct type by its exact name, so an expression that builds objects is
//! given an environment of its own, with a type for each name its struct literals use.

use std::collections::{BTreeMap, BTreeSet};

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::common::types::{CelStruct, STRING_TYPE, Type};
use cel::common::value::{CowVal, Val};
use cel::{Env, ExecutionError, StructType, Value};

/// The type of a JSON patch's operations.
pub const JSON_PATCH: &str = "JSONPatch";

/// The fields of a `JSONPatch` and whether each must be a string (`value` is anything).
pub const JSON_PATCH_FIELDS: [(&str, bool); 4] = [("op", true), ("path", true), ("from", true), ("value", false)];

/// Whether `name` is one of the object types (`Object`, `Object.spec`, ...).
pub fn is_object_type(name: &str) -> bool {
    name == "Object" || name.starts_with("Object.")
}

/// The names the struct literals of `e` build.
pub fn struct_names(e: &IdedExpr, names: &mut BTreeSet<String>) {
    let entries = |entries: &[cel::common::ast::IdedEntryExpr], names: &mut BTreeSet<String>| {
        for entry in entries {
            match &entry.expr {
                EntryExpr::MapEntry(m) => {
                    struct_names(&m.key, names);
                    struct_names(&m.value, names);
                }
                EntryExpr::StructField(f) => struct_names(&f.value, names),
            }
        }
    };
    match &e.expr {
        Expr::Struct(s) => {
            names.insert(s.type_name.clone());
            entries(&s.entries, names);
        }
        Expr::Select(s) => struct_names(&s.operand, names),
        Expr::Call(c) => {
            c.target.iter().for_each(|t| struct_names(t, names));
            c.args.iter().for_each(|x| struct_names(x, names));
        }
        Expr::List(l) => l.elements.iter().for_each(|x| struct_names(x, names)),
        Expr::Map(m) => entries(&m.entries, names),
        Expr::Comprehension(c) => [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result].into_iter().for_each(|x| struct_names(x, names)),
        _ => {}
    }
}

/// Adds to `env` the types of `names` kube declares (the object types and `JSONPatch`; an
/// expression naming another is refused by the check) and `jsonpatch.escapeKey`.
pub fn extend(env: &mut Env, names: &BTreeSet<String>) -> Result<(), cel::DeclarationError> {
    for name in names.iter().filter(|n| is_object_type(n) || *n == JSON_PATCH) {
        env.add_type(Literal { r#type: Type::new_struct(name.clone()), patch: name == JSON_PATCH })?;
    }
    env.add_overload("jsonpatch.escapeKey", "string_jsonpatch_escape_key", vec![STRING_TYPE], escape_key)?;
    Ok(())
}

/// A struct type of a mutation: its literals make a struct of the fields given (an optional
/// field, `?f: x`, only when `x` has a value); a `JSONPatch`'s fields are checked.
struct Literal {
    r#type: Type,
    patch: bool,
}

impl StructType for Literal {
    fn get_type(&self) -> &Type {
        &self.r#type
    }

    fn new_value<'b, 'v>(&self, fields: BTreeMap<String, CowVal<'b, 'v>>) -> Result<Box<dyn Val + 'v>, ExecutionError> {
        let mut s = CelStruct::new(self.r#type.name().to_string());
        for (name, value) in fields {
            if self.patch {
                let string = match JSON_PATCH_FIELDS.iter().find(|(f, _)| *f == name) {
                    None => return Err(ExecutionError::function_error(JSON_PATCH, format!("unexpected JSONPatchType field: {name}"))),
                    Some((_, string)) => *string,
                };
                if string && !matches!(Value::try_from(value.as_ref()), Ok(Value::String(_))) {
                    let got = Value::try_from(value.as_ref()).map(|v| super::type_name(&v)).unwrap_or_default();
                    return Err(ExecutionError::function_error(JSON_PATCH, format!("unexpected type {got} for JSONPatchType '{name}' field")));
                }
            }
            s.add_field_value(name, value);
        }
        Ok(Box::new(s))
    }
}

/// `jsonpatch.escapeKey(k)`: `k` as a JSON pointer's segment (`~` as `~0`, `/` as `~1`).
fn escape_key<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [key] = super::library::values::<1>(args)?;
    let Value::String(key) = key else { return Err(ExecutionError::function_error("jsonpatch.escapeKey", "not a string")) };
    super::library::answer(Value::String(std::sync::Arc::new(key.replace('~', "~0").replace('/', "~1"))))
}

/// What a field of a struct value holds, as JSON: an optional's value (`None` for an empty
/// one, a field not written).
fn field_json(v: &dyn Val) -> Result<Option<serde_json::Value>, String> {
    let value = Value::try_from(v).map_err(|e| e.to_string())?;
    match value {
        Value::Opaque(o) => match o.downcast_ref::<super::OptionalValue>() {
            Some(optional) => optional.value().map(to_json).transpose(),
            None => to_json(&Value::Opaque(o)).map(Some),
        },
        other => to_json(&other).map(Some),
    }
}

/// A mutation's result as JSON: structs (objects, JSON patch operations) as objects of their
/// fields, maps as objects, lists as arrays; kube's error for a value JSON cannot hold.
pub fn to_json(v: &Value) -> Result<serde_json::Value, String> {
    use serde_json::Value as Json;
    Ok(match v {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::from(*i),
        Value::UInt(u) => Json::from(*u),
        Value::Float(f) => serde_json::Number::from_f64(*f).map_or(Json::Null, Json::Number),
        Value::String(s) => Json::String(s.to_string()),
        Value::List(items) => Json::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        Value::Map(m) => {
            let mut out = serde_json::Map::new();
            for (k, x) in m.map.iter() {
                let key = match k {
                    cel::objects::Key::String(s) => s.to_string(),
                    other => return Err(format!("unsupported map key type: {other:?}")),
                };
                out.insert(key, to_json(x)?);
            }
            Json::Object(out)
        }
        Value::Struct(s) => {
            let mut out = serde_json::Map::new();
            for (name, field) in s.field_values() {
                if let Some(json) = field_json(field.as_ref())? {
                    out.insert(name, json);
                }
            }
            Json::Object(out)
        }
        other => return Err(format!("unsupported type: {}", super::type_name(other))),
    })
}

/// The names of the struct values in `v`, each with the path of fields it is at (a list's
/// items and a map's values at the list's or map's own), for kube's check that an object's
/// type names its place (`Object.spec.containers` for a container).
pub fn struct_paths(v: &Value, at: &str, out: &mut Vec<(String, String)>) {
    match v {
        Value::Struct(s) => {
            out.push((s.name().to_string(), at.to_string()));
            for (name, field) in s.field_values() {
                if let Ok(value) = Value::try_from(field.as_ref()) {
                    let value = match &value {
                        Value::Opaque(o) => o.downcast_ref::<super::OptionalValue>().and_then(|x| x.value().cloned()),
                        _ => Some(value.clone()),
                    };
                    value.iter().for_each(|x| struct_paths(x, &format!("{at}.{name}"), out));
                }
            }
        }
        Value::List(items) => items.iter().for_each(|x| struct_paths(x, at, out)),
        Value::Map(m) => m.map.values().for_each(|x| struct_paths(x, at, out)),
        _ => {}
    }
}
