//! kube's type check of a ValidatingAdmissionPolicy (`validating.TypeChecker`), whose
//! warnings the policy status controller writes into `status.typeChecking`: each validation's
//! `expression` and `messageExpression` is checked once for every kind the policy's
//! `matchConstraints` name exactly, with `object` and `oldObject` typed by that kind's schema,
//! `params` by the schema of `paramKind` (and not declared when it has none), and `variables`
//! by what each variable's expression gives. A kind kapi does not serve, or whose schema it
//! lacks, is skipped, as kube skips one its resolver does not find. The warnings never change
//! what the policy does.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Value, json};

use super::checks::Environment;
use crate::catalog::{Catalog, Resource};
use crate::cel::{self, Expression, Type};
use crate::meta;
use crate::schema;
use crate::ssa::Typing;

/// kube's bound on the kinds checked per rule (`maxTypesToCheck`).
const MAX_TYPES_TO_CHECK: usize = 10;

/// A kind to check against: its group, version and kind, and the type of its objects.
struct Kind {
    group: String,
    version: String,
    kind: String,
    object: Type,
}

impl Kind {
    /// As Go prints a `schema.GroupVersionKind` (`apps/v1, Kind=Deployment`, `/v1, Kind=Pod`).
    fn gvk(&self) -> String {
        format!("{}/{}, Kind={}", self.group, self.version, self.kind)
    }
}

/// The `status.typeChecking.expressionWarnings` of `policy` in the catalog `catalog`: one
/// `{fieldRef, warning}` per expression that fails the check for some kind, the warning
/// being each such kind's `<gvk>: <cel-go's errors>` line, in kube's order.
pub fn expression_warnings(policy: &Value, catalog: &Catalog) -> Vec<Value> {
    let kinds = kinds_to_check(policy, catalog);
    let params = param_type(policy, catalog);
    let spec = policy.get("spec");
    let variables: Vec<(&str, &str)> = spec
        .and_then(|s| s.get("variables"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| Some((v.get("name")?.as_str()?, v.get("expression")?.as_str()?)))
        .collect();
    // Each kind's environment, its variables typed as they check with its object.
    let environments: Vec<Vec<(&str, Type)>> = kinds.iter().map(|k| environment(&k.object, params.as_ref(), &variables)).collect();
    let mut warnings = Vec::new();
    let validations = spec.and_then(|s| s.get("validations")).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    for (i, validation) in validations.iter().enumerate() {
        for field in ["expression", "messageExpression"] {
            let Some(source) = validation.get(field).and_then(Value::as_str).filter(|s| !s.is_empty()) else { continue };
            let found: Vec<String> = kinds
                .iter()
                .zip(&environments)
                .filter_map(|(kind, env)| {
                    let errors = errors_of(source, env);
                    (!errors.is_empty()).then(|| format!("{}: {}\n", kind.gvk(), errors.join("\n")))
                })
                .collect();
            if !found.is_empty() {
                warnings.push(json!({"fieldRef": format!("spec.validations[{i}].{field}"), "warning": found.join("\n")}));
            }
        }
    }
    warnings
}

/// cel-go's errors of `source` in `env` (none when it checks); the output type is not asked.
fn errors_of(source: &str, env: &[(&str, Type)]) -> Vec<String> {
    match Expression::compile(source) {
        Ok(compiled) => cel::check(&compiled, env).errors,
        Err(e) => vec![e],
    }
}

/// The variables an expression of the policy is checked with for objects of type `object`:
/// kube's environment with `object`, `oldObject`, `params` and `variables` typed.
fn environment<'a>(object: &Type, params: Option<&Type>, variables: &[(&'a str, &str)]) -> Vec<(&'a str, Type)> {
    let env = Environment { params: params.is_some(), namespace: true, variables: true, authorizer: true };
    let mut declared: Vec<(&str, Type)> = env.declarations();
    for (name, t) in declared.iter_mut() {
        match *name {
            "object" | "oldObject" => *t = object.clone(),
            "params" => *t = params.cloned().unwrap_or(Type::Dyn),
            _ => {}
        }
    }
    // A variable sees those before it; one that does not check is `dyn`, as kube declares it.
    let mut typed: BTreeMap<String, Type> = BTreeMap::new();
    for (name, source) in variables {
        let scope = with_variables(&declared, &typed);
        let output = match Expression::compile(source) {
            Ok(compiled) => {
                let checked = cel::check(&compiled, &scope);
                if checked.errors.is_empty() { declared_type(&checked.output) } else { Type::Dyn }
            }
            Err(_) => Type::Dyn,
        };
        typed.insert(name.to_string(), output);
    }
    declared = with_variables(&declared, &typed);
    declared
}

/// The type a variable is declared with for what its expression gives (kube's
/// `convertCelTypeToDeclType`): a simple type, or a list or map of them; anything else `dyn`.
fn declared_type(t: &Type) -> Type {
    match t {
        Type::Bool | Type::Int | Type::Uint | Type::Double | Type::String | Type::Bytes | Type::Null | Type::Timestamp | Type::Duration => t.clone(),
        Type::List(item) => Type::list(declared_type(item)),
        Type::Map(key, value) => Type::map(declared_type(key), declared_type(value)),
        _ => Type::Dyn,
    }
}

fn with_variables<'a>(declared: &[(&'a str, Type)], typed: &BTreeMap<String, Type>) -> Vec<(&'a str, Type)> {
    let variables = Type::Object(Arc::new(typed.clone()));
    declared.iter().map(|(n, t)| (*n, if *n == "variables" { variables.clone() } else { t.clone() })).collect()
}

/// kube's `typesToCheck`: the kinds of the group, version and resource triples of each
/// resource rule, a rule with a wildcard group or version contributing none, wildcard and
/// subresource entries skipped; a rule stops adding at the tenth kind; sorted by group,
/// version and kind. Kinds kapi has no schema for are dropped. A resource is found as
/// kube's discovery RESTMapper finds it: by its plural or singular name, and the core group
/// `""` standing for every group that serves the version and resource.
fn kinds_to_check(policy: &Value, catalog: &Catalog) -> Vec<Kind> {
    let rules = meta::at(policy, &["spec", "matchConstraints", "resourceRules"]).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let mut found: BTreeSet<(String, String, String)> = BTreeSet::new();
    let mut resources: BTreeMap<(String, String, String), Arc<Resource>> = BTreeMap::new();
    'rules: for rule in rules {
        let list = |key: &str| -> BTreeSet<&str> { rule.get(key).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect() };
        let (groups, versions) = (list("apiGroups"), list("apiVersions"));
        if groups.iter().chain(&versions).any(|s| s.contains('*')) {
            continue;
        }
        let names: BTreeSet<&str> = list("resources").into_iter().filter(|r| !r.contains(['*', '/'])).collect();
        let mut count = 0;
        for group in &groups {
            for version in &versions {
                for name in &names {
                    let name = name.to_lowercase();
                    let matched = catalog.resources().filter(|r| {
                        let i = &r.info;
                        i.version == *version && (group.is_empty() || i.group == *group) && (i.resource == name || i.singular == name)
                    });
                    for resource in matched {
                        let key = (resource.info.group.clone(), version.to_string(), resource.info.kind.clone());
                        found.insert(key.clone());
                        resources.insert(key, resource.clone());
                        count += 1;
                        if count == MAX_TYPES_TO_CHECK {
                            break 'rules;
                        }
                    }
                }
            }
        }
    }
    found
        .into_iter()
        .filter_map(|key| {
            let object = object_type(&resources[&key])?;
            let (group, version, kind) = key;
            Some(Kind { group, version, kind, object })
        })
        .collect()
}

/// The type of `params`: that of `paramKind`'s objects, `None` without one or a schema.
fn param_type(policy: &Value, catalog: &Catalog) -> Option<Type> {
    let api_version = meta::str_at(policy, &["spec", "paramKind", "apiVersion"])?;
    let kind = meta::str_at(policy, &["spec", "paramKind", "kind"])?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let resource = catalog.resources_of(group, version).into_iter().find(|r| r.info.kind == kind)?.clone();
    object_type(&resource)
}

/// The type of a resource's objects as its OpenAPI v3 schema gives it (kube's
/// `SchemaDeclType` of the resolved schema): a built-in kind's from its Go types, a custom
/// resource's from its structural schema with `apiVersion`, `kind` and the whole
/// `metadata`. `None` when there is no schema.
fn object_type(resource: &Resource) -> Option<Type> {
    match resource.strategy.typing() {
        Typing::BuiltIn => {
            let def = schema::schema().for_gvk(&resource.info.group, &resource.info.version, &resource.info.kind)?;
            Some(BuiltIn::default().definition(&def.name))
        }
        Typing::Custom { schema, .. } => {
            let Type::Object(fields) = crate::apiextensions::cel_type(schema?)? else { return Some(Type::Dyn) };
            let mut fields = (*fields).clone();
            fields.insert("apiVersion".into(), Type::String);
            fields.insert("kind".into(), Type::String);
            fields.insert("metadata".into(), BuiltIn::default().definition("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
            Some(Type::Object(Arc::new(fields)))
        }
    }
}

/// Built-in definitions made into types, each once; a definition met again inside itself
/// (`JSONSchemaProps`) is `dyn` there.
#[derive(Default)]
struct BuiltIn {
    made: BTreeMap<String, Type>,
    making: BTreeSet<String>,
}

impl BuiltIn {
    fn definition(&mut self, name: &str) -> Type {
        if let Some(t) = self.made.get(name) {
            return t.clone();
        }
        let Some(def) = schema::schema().get(name).cloned() else { return Type::Dyn };
        if let Some(scalar) = &def.scalar {
            return self.property(scalar);
        }
        if !self.making.insert(name.to_string()) {
            return Type::Dyn;
        }
        let fields = def.properties.values().filter_map(|p| Some((cel::escape(&p.name)?, self.property(&p.ty)))).collect::<BTreeMap<_, _>>();
        self.making.remove(name);
        let made = Type::Object(Arc::new(fields));
        self.made.insert(name.to_string(), made.clone());
        made
    }

    /// The type of a property of type `ty`. What the OpenAPI schema leaves untyped or a union
    /// (int-or-string, quantities, raw JSON) is `dyn`.
    fn property(&mut self, ty: &schema::Type) -> Type {
        match ty {
            schema::Type::String => Type::String,
            schema::Type::Bytes => Type::Bytes,
            schema::Type::Time | schema::Type::MicroTime => Type::Timestamp,
            schema::Type::Int32 | schema::Type::Int64 => Type::Int,
            schema::Type::Number => Type::Double,
            schema::Type::Boolean => Type::Bool,
            schema::Type::IntOrString | schema::Type::Quantity | schema::Type::Any => Type::Dyn,
            schema::Type::Object(name) => self.definition(name),
            schema::Type::Array { items, .. } => Type::list(self.property(items)),
            schema::Type::Map { values, .. } => Type::map(Type::String, self.property(values)),
        }
    }
}
