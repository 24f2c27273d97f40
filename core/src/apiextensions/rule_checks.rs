//! kube's checks of a schema's CEL rules when a CRD is written (apiextensions'
//! `ValidateCustomResourceDefinitionOpenAPISchema`, its `x-kubernetes-validations` part):
//! each entry's fields, its rule and message expression compiled and type-checked against
//! the schema's types (a rule gives a bool, a message expression a string), `oldSelf` only
//! where the old object can be correlated, and the estimated costs within kube's limits (each rule
//! times the most times it can run, and all rules together).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::structural::Structural;
use crate::cel::cost::{self, MAX_REQUEST_BYTES, RULE_LIMIT, Shape, TOTAL_LIMIT};
use crate::cel::{self, Expression, Type};
use crate::status::FieldError;

const REASONS: [&str; 4] = ["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"];

/// The errors of the rules of a structural schema at `at` (`spec.versions[0].schema.openAPIV3Schema`).
pub fn check_rules(schema: &Value, at: &str) -> Vec<FieldError> {
    let mut walk = Walk { fields: Vec::new(), cel: Vec::new(), costs: Vec::new() };
    walk.node(schema, &Structural::read(schema), at, Some(1), None, true);
    let total = walk.costs.iter().fold(0u64, |t, (_, c)| t.saturating_add(*c));
    if total > TOTAL_LIMIT {
        let mut largest: Vec<&(String, u64)> = walk.costs.iter().filter(|(_, c)| *c >= 1_000_000).collect();
        largest.sort_by_key(|(_, c)| std::cmp::Reverse(*c));
        for (path, _) in largest.into_iter().take(4) {
            walk.cel.push(FieldError::forbidden(path.as_str(), "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"));
        }
        walk.cel
            .push(FieldError::forbidden(at, over_budget("x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema", total, TOTAL_LIMIT)));
    }
    walk.fields.extend(walk.cel);
    walk.fields
}

struct Walk {
    /// Errors of the entries' fields (kube's `SchemaErrors`), reported first.
    fields: Vec<FieldError>,
    /// Errors of compiling and costing them (kube's `CELErrors`).
    cel: Vec<FieldError>,
    /// Each expression's estimated cost, by its path, toward the schema's total.
    costs: Vec<(String, u64)>,
}

impl Walk {
    /// A node at `at`, run at most `cardinality` times per object (`None`: a list or map
    /// above it is unbounded); `uncorrelatable`: the list (not a map list) it sits in, where
    /// old values cannot be found.
    fn node(&mut self, raw: &Value, s: &Structural, at: &str, cardinality: Option<u64>, uncorrelatable: Option<&str>, root: bool) {
        if let Some(entries) = raw.get("x-kubernetes-validations").and_then(Value::as_array) {
            let shape = shape_of(s, root);
            let ty = type_of(s, root).unwrap_or(Type::Dyn);
            // Unbounded: as many as a request can hold of the node's smallest value.
            let times = cardinality.unwrap_or((MAX_REQUEST_BYTES - 2) / (min_json_size(s) + 1));
            let before = self.fields.len();
            for (i, entry) in entries.iter().enumerate() {
                self.entry_fields(entry, s, &format!("{at}.x-kubernetes-validations[{i}]"));
            }
            if self.fields.len() == before {
                for (i, entry) in entries.iter().enumerate() {
                    self.compile(entry, &format!("{at}.x-kubernetes-validations[{i}]"), (&shape, &ty), times, uncorrelatable);
                }
            }
        }
        if let Some(props) = raw.get("properties").and_then(Value::as_object) {
            for (k, p) in props {
                if let Some(ps) = s.properties.get(k) {
                    self.node(p, ps, &format!("{at}.properties[{k}]"), cardinality, uncorrelatable, false);
                }
            }
        }
        if let (Some(a), Some(sa)) = (raw.get("additionalProperties").filter(|a| a.is_object()), s.additional.as_deref()) {
            let times = cardinality.zip(number(s, "maxProperties")).map(|(c, n)| c.saturating_mul(n));
            self.node(a, sa, &format!("{at}.additionalProperties"), times, uncorrelatable, false);
        }
        if let (Some(i), Some(si)) = (raw.get("items").filter(|i| i.is_object()), s.items.as_deref()) {
            let correlated = s.list_type == crate::schema::ListType::Map;
            let below = if correlated { uncorrelatable } else { uncorrelatable.or(Some(at)) };
            let times = cardinality.zip(number(s, "maxItems")).map(|(c, n)| c.saturating_mul(n));
            self.node(i, si, &format!("{at}.items"), times, below, false);
        }
    }

    /// The checks of an entry's fields.
    fn entry_fields(&mut self, entry: &Value, s: &Structural, at: &str) {
        let text = |k: &str| entry.get(k).and_then(Value::as_str).unwrap_or_default();
        let (rule, message, field_path) = (text("rule"), text("message"), text("fieldPath"));
        if rule.trim().is_empty() {
            self.fields.push(FieldError::required(format!("{at}.rule"), "rule is not specified"));
        } else if !message.is_empty() && message.trim().is_empty() {
            self.fields.push(FieldError::invalid(format!("{at}.message"), json!(message), "message must be non-empty if specified"));
        } else if message.trim().contains('\n') {
            self.fields.push(FieldError::invalid(format!("{at}.message"), json!(message), "message must not contain line breaks"));
        } else if rule.trim().contains('\n') && message.trim().is_empty() {
            self.fields.push(FieldError::required(format!("{at}.message"), "message must be specified if rule contains line breaks"));
        }
        let message_expression = text("messageExpression");
        if !message_expression.is_empty() && message_expression.trim().is_empty() {
            self.fields.push(FieldError::required(format!("{at}.messageExpression"), "messageExpression must be non-empty if specified"));
        }
        if let Some(reason) = entry.get("reason").and_then(Value::as_str).filter(|r| !REASONS.contains(r)) {
            self.fields.push(FieldError::not_supported(format!("{at}.reason"), json!(reason), &REASONS));
        }
        if !field_path.is_empty() && field_path.trim().is_empty() {
            self.fields.push(FieldError::invalid(format!("{at}.fieldPath"), json!(field_path), "fieldPath must be non-empty if specified"));
        }
        if field_path.contains('\n') {
            self.fields.push(FieldError::invalid(format!("{at}.fieldPath"), json!(field_path), "fieldPath must not contain line breaks"));
        }
        if !field_path.trim().is_empty() && !path_valid(s, field_path) {
            self.fields.push(FieldError::invalid(format!("{at}.fieldPath"), json!(field_path), "fieldPath must be a valid path"));
        }
    }

    /// An entry's rule and message expression compiled and costed; the rule's cost times
    /// the most times it runs (`times`), the message's once.
    fn compile(&mut self, entry: &Value, at: &str, (shape, ty): (&Shape, &Type), times: u64, uncorrelatable: Option<&str>) {
        let text = |k: &str| entry.get(k).and_then(Value::as_str).unwrap_or_default();
        let (rule, message_expression) = (text("rule"), text("messageExpression"));
        if rule.trim().is_empty() {
            return;
        }
        let variables = [("self", shape.clone()), ("oldSelf", shape.clone())];
        let optional_old_self = entry.get("optionalOldSelf").and_then(Value::as_bool) == Some(true);
        let old_self = if optional_old_self { Type::optional(ty.clone()) } else { ty.clone() };
        let types = [("self", ty.clone()), ("oldSelf", old_self)];
        let compiled = match Expression::compile(rule) {
            Ok(compiled) => compiled,
            Err(e) => {
                self.cel.push(FieldError::invalid_go(format!("{at}.rule"), go_rule(entry), format!("compilation failed: {e}")));
                return;
            }
        };
        let rule_at = format!("{at}.rule");
        let checked = cel::check(&compiled, &types);
        if !checked.errors.is_empty() {
            self.cel.push(FieldError::invalid_go(rule_at, go_rule(entry), format!("compilation failed: {}", checked.errors.join("\n"))));
            return;
        }
        if !matches!(checked.output, Type::Bool | Type::Dyn) {
            self.cel.push(FieldError::invalid_go(rule_at, go_rule(entry), "cel expression must evaluate to a bool"));
            return;
        }
        let cost = cost::estimate(&compiled, &variables).saturating_mul(times);
        if cost > RULE_LIMIT {
            self.cel.push(FieldError::forbidden(rule_at.as_str(), over_budget("estimated rule cost", cost, RULE_LIMIT)));
        }
        self.costs.push((rule_at.clone(), cost));
        let old_self = compiled.uses("oldSelf");
        if old_self && let Some(within) = uncorrelatable {
            let detail = format!("oldSelf cannot be used on the uncorrelatable portion of the schema within {within}");
            self.cel.push(FieldError::invalid(rule_at, json!(rule), detail));
        }
        if !old_self && let Some(optional) = entry.get("optionalOldSelf").and_then(Value::as_bool) {
            self.cel.push(FieldError::invalid(format!("{at}.optionalOldSelf"), json!(optional), "may not be set if oldSelf is not used in rule"));
        }
        if message_expression.trim().is_empty() {
            return;
        }
        let message_at = format!("{at}.messageExpression");
        let compiled = Expression::compile(message_expression).map(|compiled| {
            let checked = cel::check(&compiled, &types);
            (compiled, checked)
        });
        match compiled {
            Ok((_, checked)) if !checked.errors.is_empty() => {
                let errors = checked.errors.join("\n");
                self.cel.push(FieldError::invalid_go(message_at, go_rule(entry), format!("messageExpression compilation failed: {errors}")));
            }
            Ok((_, checked)) if !matches!(checked.output, Type::String | Type::Dyn) => {
                self.cel.push(FieldError::invalid_go(message_at, go_rule(entry), "messageExpression must evaluate to a string"));
            }
            Ok((compiled, _)) => {
                let cost = cost::estimate(&compiled, &variables);
                if cost > RULE_LIMIT {
                    self.cel.push(FieldError::forbidden(message_at.as_str(), over_budget("estimated messageExpression cost", cost, RULE_LIMIT)));
                }
                self.costs.push((message_at, cost));
            }
            Err(e) => self.cel.push(FieldError::invalid_go(message_at, go_rule(entry), format!("messageExpression compilation failed: {e}"))),
        }
    }
}

/// kube's `getCostErrorMessage`.
fn over_budget(what: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// The entry as Go's `%#v` prints kube's `ValidationRule`.
fn go_rule(entry: &Value) -> String {
    let text = |k: &str| entry.get(k).and_then(Value::as_str).unwrap_or_default();
    let reason = match entry.get("reason").and_then(Value::as_str) {
        Some(r) => format!("\"{r}\""),
        None => "(*apiextensions.FieldValueErrorReason)(nil)".to_string(),
    };
    let optional = match entry.get("optionalOldSelf").and_then(Value::as_bool) {
        Some(b) => format!("(*bool)({b})"),
        None => "(*bool)(nil)".to_string(),
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{:?}, Message:{:?}, MessageExpression:{:?}, Reason:{reason}, FieldPath:{:?}, OptionalOldSelf:{optional}}}",
        text("rule"),
        text("message"),
        text("messageExpression"),
        text("fieldPath")
    )
}

/// Whether `path` (`.a.b`, `.m['key']`) names a node of the schema (list items cannot be named).
fn path_valid(s: &Structural, path: &str) -> bool {
    let mut node = s;
    let mut rest = path.trim();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let name = &after[..end];
            match node.properties.get(name).or(node.additional.as_deref()) {
                Some(next) if !name.is_empty() => node = next,
                _ => return false,
            }
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let Some(end) = after.find(']') else { return false };
            let key = &after[..end];
            let next = key.strip_prefix('\'').and_then(|k| k.strip_suffix('\'')).and_then(|quoted| node.properties.get(quoted).or(node.additional.as_deref()));
            match next {
                Some(n) => node = n,
                None => return false,
            }
            rest = &after[end + 1..];
        } else {
            return false;
        }
    }
    true
}

fn number(s: &Structural, key: &str) -> Option<u64> {
    s.raw.get(key).and_then(Value::as_u64)
}

/// The least bytes a JSON value of the node can take (kube's `MinSerializedSize`): an
/// object's required members without defaults included.
fn min_json_size(s: &Structural) -> u64 {
    match (s.ty.as_str(), s.format.as_deref()) {
        _ if s.int_or_string() => 1,
        ("string", Some("duration")) => 3,
        ("string", Some("date")) => 12,
        ("string", Some("date-time")) => 21,
        ("string", _) => 2,
        ("boolean", _) => 4,
        ("integer" | "number", _) => 1,
        ("object", _) if s.additional.is_none() => {
            let required = s.raw.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str);
            required
                .filter_map(|k| Some((k, s.properties.get(k)?)))
                .filter(|(_, p)| p.default.is_none())
                .fold(2u64, |total, (k, p)| total.saturating_add(k.len() as u64 + min_json_size(p) + 4))
        }
        _ => 2,
    }
}

/// The most characters a string of the node can have: `maxLength` (four bytes each), the
/// longest `enum` value, a format's longest, or what a request holds.
fn string_size(s: &Structural) -> u64 {
    match s.format.as_deref() {
        Some("duration") | Some("date-time") => return 32,
        Some("date") => return 12,
        _ => {}
    }
    if let Some(max) = number(s, "maxLength") {
        return if s.format.as_deref() == Some("byte") { max } else { max.saturating_mul(4) };
    }
    let longest = s.raw.get("enum").and_then(Value::as_array).and_then(|e| e.iter().filter_map(Value::as_str).map(|x| x.len() as u64).max());
    longest.unwrap_or(MAX_REQUEST_BYTES - 2)
}

/// The most items a list of `items` can have.
fn list_size(s: &Structural, items: &Structural) -> u64 {
    number(s, "maxItems").unwrap_or((MAX_REQUEST_BYTES - 2) / (min_json_size(items) + 1))
}

/// The most entries a map of `values` can have.
fn map_size(s: &Structural, values: &Structural) -> u64 {
    number(s, "maxProperties").unwrap_or((MAX_REQUEST_BYTES - 2) / (min_json_size(values) + 6))
}

/// The type of a custom resource's objects as its schema declares them (kube's
/// `SchemaDeclType` of a field, not a resource root): `None` for a schema of no type.
pub fn cel_type(s: &Structural) -> Option<Type> {
    type_of(s, false)
}

/// The type of a node's values (kube's `SchemaDeclType`): `None` for a node of no type (it
/// is no field of its object). `resource`: the node is a resource (the root).
fn type_of(s: &Structural, resource: bool) -> Option<Type> {
    if s.int_or_string() {
        return Some(Type::Dyn);
    }
    if let Some(items) = s.items.as_deref() {
        return Some(Type::list(type_of(items, false)?));
    }
    if let Some(values) = s.additional.as_deref() {
        return Some(Type::map(Type::String, type_of(values, false)?));
    }
    Some(match (s.ty.as_str(), s.format.as_deref()) {
        ("string", Some("byte")) => Type::Bytes,
        ("string", Some("duration")) => Type::Duration,
        ("string", Some("date" | "date-time")) => Type::Timestamp,
        ("string", _) => Type::String,
        ("integer", _) => Type::Int,
        ("number", _) => Type::Double,
        ("boolean", _) => Type::Bool,
        ("object", _) => {
            let mut fields: BTreeMap<String, Type> = s.properties.iter().filter_map(|(k, p)| Some((cel::escape(k)?, type_of(p, false)?))).collect();
            if resource || s.embedded {
                // kube's `WithTypeAndObjectMeta`.
                fields.insert("apiVersion".into(), Type::String);
                fields.insert("kind".into(), Type::String);
                let meta = BTreeMap::from([("name".into(), Type::String), ("generateName".into(), Type::String)]);
                fields.insert("metadata".into(), Type::Object(std::sync::Arc::new(meta)));
            }
            Type::Object(std::sync::Arc::new(fields))
        }
        _ => return None,
    })
}

/// What the cost estimate knows of the node's values; `resource`: the root, whose
/// `apiVersion`, `kind` and `metadata` (`name`, `generateName`) rules may read.
pub fn shape_of(s: &Structural, resource: bool) -> Shape<'static> {
    let string = |s: &Structural| Shape::String { max: string_size(s) };
    if let Some(items) = s.items.as_deref() {
        return Shape::List { max: list_size(s, items), items: std::sync::Arc::new(shape_of(items, false)) };
    }
    if let Some(values) = s.additional.as_deref() {
        return Shape::Map { max: map_size(s, values), key: MAX_REQUEST_BYTES, values: std::sync::Arc::new(shape_of(values, false)) };
    }
    match s.ty.as_str() {
        "string" => string(s),
        "integer" | "number" | "boolean" => Shape::Scalar,
        _ if s.int_or_string() => string(s),
        "object" if !s.properties.is_empty() || resource || s.embedded => {
            let mut fields: BTreeMap<String, Shape> = s.properties.iter().filter_map(|(k, p)| Some((cel::escape(k)?, shape_of(p, false)))).collect();
            if resource || s.embedded {
                // kube's `WithTypeAndObjectMeta`: whatever the schema says of them.
                let name = Shape::String { max: 253 };
                fields.insert("apiVersion".into(), Shape::String { max: 316 });
                fields.insert("kind".into(), Shape::String { max: 63 });
                let meta = BTreeMap::from([("name".into(), name.clone()), ("generateName".into(), name)]);
                fields.insert("metadata".into(), Shape::Object { fields: std::sync::Arc::new(meta) });
            }
            Shape::Object { fields: std::sync::Arc::new(fields) }
        }
        "object" => Shape::Object { fields: Default::default() },
        _ => Shape::Unknown,
    }
}
