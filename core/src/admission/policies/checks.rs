//! The checks kube makes of a policy's expressions (and of a webhook's match conditions) when
//! one is created or updated (`pkg/apis/admissionregistration/validation`): each is required,
//! compiles in the environment it will run in (the variables declared, `request` typed as
//! kube types it), and gives the type it must give. What kapi's check cannot type is `dyn`,
//! which passes, so nothing kube accepts is refused.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::cel::{Expression, Type};
use crate::status::FieldError;
use crate::validation::qualified_name;

/// kube's limit of the match conditions of a webhook or a policy.
const MAX_CONDITIONS: usize = 64;

/// kube's limit of a policy's audit annotations.
const MAX_AUDIT_ANNOTATIONS: usize = 20;

/// kube's limit of an audit annotation's value expression, in bytes.
const MAX_VALUE_EXPRESSION_BYTES: usize = 5 * 1024;

/// The type of `request` (kube's `kubernetes.AdmissionRequest`).
fn request_type() -> Type {
    let object = |fields: &[(&str, Type)]| Type::Object(Arc::new(fields.iter().map(|(k, t)| (k.to_string(), t.clone())).collect::<BTreeMap<_, _>>()));
    let kind = object(&[("group", Type::String), ("version", Type::String), ("kind", Type::String)]);
    let resource = object(&[("group", Type::String), ("version", Type::String), ("resource", Type::String)]);
    let strings = Type::list(Type::String);
    let user = object(&[("username", Type::String), ("uid", Type::String), ("groups", strings.clone()), ("extra", Type::map(Type::String, strings))]);
    object(&[
        ("kind", kind.clone()),
        ("resource", resource.clone()),
        ("subResource", Type::String),
        ("requestKind", kind),
        ("requestResource", resource),
        ("requestSubResource", Type::String),
        ("name", Type::String),
        ("namespace", Type::String),
        ("operation", Type::String),
        ("userInfo", user),
        ("dryRun", Type::Bool),
        ("options", Type::Dyn),
    ])
}

/// What an expression is given: always the objects and the request; the authorizer but to
/// message expressions; the namespace and `variables` where they are bound; `params` when the
/// policy has `paramKind`.
#[derive(Clone, Copy)]
pub struct Environment {
    pub params: bool,
    pub namespace: bool,
    pub variables: bool,
    pub authorizer: bool,
}

impl Environment {
    /// The variables declared, with the types kapi gives them.
    pub(super) fn declarations(self) -> Vec<(&'static str, Type)> {
        let mut d = vec![("object", Type::Dyn), ("oldObject", Type::Dyn), ("request", request_type())];
        if self.authorizer {
            d.push(("authorizer", Type::Dyn));
        }
        if self.namespace {
            d.push(("namespaceObject", Type::Dyn));
        }
        if self.params {
            d.push(("params", Type::Dyn));
        }
        if self.variables {
            d.push(("variables", Type::Dyn));
        }
        d
    }
}

/// What an expression must give.
#[derive(Clone, Copy)]
enum Gives {
    Bool,
    String,
    StringOrNull,
    Anything,
    /// A mutation's ApplyConfiguration: an `Object`.
    Object,
    /// A mutation's JSON patch: a `list(JSONPatch)`.
    JsonPatches,
}

/// The detail of kube's error for `source`, which does not compile or gives the wrong type.
fn check(source: &str, env: Environment, gives: Gives) -> Option<String> {
    let compiled = match gives {
        Gives::Object | Gives::JsonPatches => Expression::compile_mutation(source),
        _ => Expression::compile(source),
    };
    let compiled = match compiled {
        Ok(c) => c,
        Err(e) => return Some(format!("compilation failed: {e}")),
    };
    let checked = crate::cel::check(&compiled, &env.declarations());
    if !checked.errors.is_empty() {
        return Some(format!("compilation failed: {}", checked.errors.join("\n")));
    }
    let output = checked.output;
    match gives {
        _ if output == Type::Dyn => None,
        Gives::Bool if output != Type::Bool => Some(format!("must evaluate to bool but got {}", output.name())),
        Gives::String if output != Type::String => Some(format!("must evaluate to string but got {}", output.name())),
        Gives::StringOrNull if !matches!(output, Type::String | Type::Null) => {
            Some(format!("must evaluate to one of [string null_type] but got {}", output.name()))
        }
        Gives::Object if output.name() != "Object" => Some(format!("must evaluate to Object but got {}", output.name())),
        Gives::JsonPatches if !matches!(&output, Type::List(item) if matches!(&**item, Type::Dyn) || item.name() == crate::cel::mutation::JSON_PATCH) => {
            Some(format!("must evaluate to list(JSONPatch) but got {}", output.name()))
        }
        _ => None,
    }
}

/// The expression `key` of `item`, at `at`: required (`missing`, kube's detail), and checked.
fn expression(item: &Value, key: &str, at: &str, missing: &str, env: Environment, gives: Gives, errs: &mut Vec<FieldError>) {
    let path = format!("{at}.{key}");
    match item.get(key).and_then(Value::as_str).filter(|e| !e.trim().is_empty()) {
        None => errs.push(FieldError::required(path, missing)),
        Some(source) => {
            if let Some(detail) = check(source, env, gives) {
                errs.push(FieldError::invalid(path, json!(source), detail));
            }
        }
    }
}

/// `matchConditions` at `at` (a webhook's, or a policy's): at most 64, each named (a
/// qualified name, once) with an expression that gives a bool.
pub fn match_conditions(conditions: Option<&Value>, at: &str, env: Environment, errs: &mut Vec<FieldError>) {
    let Some(list) = conditions.and_then(Value::as_array) else { return };
    if list.len() > MAX_CONDITIONS {
        errs.push(FieldError::too_many(at, list.len(), MAX_CONDITIONS));
    }
    let mut names = Vec::new();
    for (i, c) in list.iter().enumerate() {
        let here = format!("{at}[{i}]");
        match c.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
            None => errs.push(FieldError::required(format!("{here}.name"), "")),
            Some(name) => {
                for detail in qualified_name(name) {
                    errs.push(FieldError::invalid(format!("{here}.name"), json!(name), detail));
                }
                if names.contains(&name) {
                    errs.push(FieldError::duplicate(format!("{here}.name"), json!(name)));
                }
                names.push(name);
            }
        }
        expression(c, "expression", &here, "", env, Gives::Bool, errs);
    }
}

/// Whether `name` is a CEL identifier kube takes as a variable's name.
fn is_identifier(name: &str) -> bool {
    const RESERVED: [&str; 8] = ["true", "false", "null", "in", "as", "break", "const", "continue"];
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_ascii_alphabetic()) && chars.all(|c| c == '_' || c.is_ascii_alphanumeric()) && !RESERVED.contains(&name)
}

/// A policy's match conditions and variables (each may use those before it); the
/// environment of its other expressions.
fn conditions_and_variables(spec: &Value, errs: &mut Vec<FieldError>) -> Environment {
    let params = spec.get("paramKind").is_some_and(Value::is_object);
    let conditions = Environment { params, namespace: true, variables: false, authorizer: true };
    match_conditions(spec.get("matchConditions"), "spec.matchConditions", conditions, errs);
    let evaluated = Environment { params, namespace: true, variables: true, authorizer: true };
    for (i, v) in spec.get("variables").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let at = format!("spec.variables[{i}]");
        match v.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
            None => errs.push(FieldError::required(format!("{at}.name"), "name is not specified")),
            Some(n) if !is_identifier(n) => errs.push(FieldError::invalid(format!("{at}.name"), json!(n), "name is not a valid CEL identifier")),
            Some(_) => {}
        }
        expression(v, "expression", &at, "expression is not specified", evaluated, Gives::Anything, errs);
    }
    evaluated
}

/// The expressions of a MutatingAdmissionPolicy's `spec`: its match conditions, variables
/// and mutations (at least one; each of its `patchType`, with the expression of that type
/// only, which gives an `Object` or a `list(JSONPatch)`).
pub fn mutating_policy(spec: &Value, errs: &mut Vec<FieldError>) {
    let evaluated = conditions_and_variables(spec, errs);
    let mutations = spec.get("mutations").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    if mutations.is_empty() {
        errs.push(FieldError::required("spec.mutations", "mutations must contain at least one item"));
    }
    for (i, m) in mutations.iter().enumerate() {
        let at = format!("spec.mutations[{i}]");
        let set = |k: &str| m.get(k).is_some_and(|v| !v.is_null());
        let (apply, patch) = ("applyConfiguration", "jsonPatch");
        let (own, other, gives) = match m.get("patchType").and_then(Value::as_str).unwrap_or_default() {
            "" => {
                errs.push(FieldError::required(format!("{at}.patchType"), ""));
                continue;
            }
            "ApplyConfiguration" => (apply, patch, Gives::Object),
            "JSONPatch" => (patch, apply, Gives::JsonPatches),
            t => {
                errs.push(FieldError::not_supported(format!("{at}.patchType"), json!(t), &["ApplyConfiguration", "JSONPatch"]));
                continue;
            }
        };
        let patch_type = if own == apply { "ApplyConfiguration" } else { "JSONPatch" };
        match m.get(own).filter(|v| !v.is_null()) {
            None => errs.push(FieldError::required(format!("{at}.{own}"), format!("must be specified when patchType is {patch_type}"))),
            Some(e) => match e.get("expression").and_then(Value::as_str).map(str::trim).filter(|x| !x.is_empty()) {
                None => errs.push(FieldError::required(format!("{at}.{own}.expression"), "")),
                Some(source) => {
                    if let Some(detail) = check(source, evaluated, gives) {
                        errs.push(FieldError::invalid(format!("{at}.{own}.expression"), json!(source), detail));
                    }
                }
            },
        }
        if set(other) {
            errs.push(FieldError::invalid(
                format!("{at}.{other}"),
                json!(format!("{{{other}}}")),
                format!("must not be specified when patchType is {patch_type}"),
            ));
        }
    }
}

/// The expressions of a policy's `spec`: its match conditions, variables, validations (and
/// their message expressions) and audit annotations (`name`: the policy's, which prefixes
/// each annotation's key).
pub fn policy(name: &str, spec: &Value, errs: &mut Vec<FieldError>) {
    let evaluated = conditions_and_variables(spec, errs);
    let messages = Environment { authorizer: false, ..evaluated };
    for (i, v) in spec.get("validations").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let at = format!("spec.validations[{i}]");
        expression(v, "expression", &at, "expression is not specified", evaluated, Gives::Bool, errs);
        if let Some(m) = v.get("messageExpression").and_then(Value::as_str) {
            let path = format!("{at}.messageExpression");
            if m.trim().is_empty() {
                errs.push(FieldError::invalid(path, json!(m), "must be non-empty if specified"));
            } else if let Some(detail) = check(m, messages, Gives::String) {
                errs.push(FieldError::invalid(path, json!(m), detail));
            }
        }
    }
    let audits = spec.get("auditAnnotations").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    if audits.len() > MAX_AUDIT_ANNOTATIONS {
        errs.push(FieldError::invalid(
            "spec.auditAnnotations",
            json!(audits.len()),
            format!("must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations"),
        ));
    }
    let mut keys = Vec::new();
    for (i, a) in audits.iter().enumerate() {
        let at = format!("spec.auditAnnotations[{i}]");
        let key = a.get("key").and_then(Value::as_str).unwrap_or_default();
        if name.is_empty() {
            errs.push(FieldError::invalid(format!("{at}.key"), json!(key), "requires metadata.name be non-empty"));
        } else {
            for detail in qualified_name(&format!("{name}/{key}")) {
                errs.push(FieldError::invalid(format!("{at}.key"), json!(key), detail));
            }
        }
        if keys.contains(&key) {
            errs.push(FieldError::duplicate(format!("{at}.key"), json!(key)));
        }
        keys.push(key);
        match a.get("valueExpression").and_then(Value::as_str) {
            Some(e) if e.len() > MAX_VALUE_EXPRESSION_BYTES => {
                errs.push(FieldError::required(format!("{at}.valueExpression"), format!("must not exceed {MAX_VALUE_EXPRESSION_BYTES} bytes in length")))
            }
            _ => expression(a, "valueExpression", &at, "valueExpression is not specified", evaluated, Gives::StringOrNull, errs),
        }
    }
}
