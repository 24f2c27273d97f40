//! A schema's CEL validation rules (`x-kubernetes-validations`), run on custom resources as
//! kube's apiextensions server runs them (`pkg/apiserver/schema/cel/validation.go`): at each
//! node that has rules, `self` is the node's value; a transition rule (one that names
//! `oldSelf`) runs only on an update, where the old object has a value at the same place
//! (object members by name, `x-kubernetes-list-type: map` items by their keys), unless
//! `optionalOldSelf` makes `oldSelf` an optional.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::structural::{Structural, UNDESCRIBED};
use crate::cel::cost::{self, Shape};
use crate::cel::{self, Expression};
use crate::schema::ListType;
use crate::status::FieldError;

/// One entry of `x-kubernetes-validations`.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub rule: Arc<Expression>,
    /// `message`, trimmed.
    pub message: String,
    pub message_expression: Option<Arc<Expression>>,
    /// `fieldPath`: where a failure is reported, below the rule's node.
    pub field_path: String,
    /// `reason`: `FieldValueInvalid` (the default), `FieldValueForbidden`,
    /// `FieldValueRequired` or `FieldValueDuplicate`.
    pub reason: String,
    pub optional_old_self: bool,
}

impl Rule {
    /// The rules of a schema node; an entry that does not compile is left out (the CRD's
    /// validation refuses it).
    pub fn read_all(schema: &Value) -> Vec<Rule> {
        let entries = schema.get("x-kubernetes-validations").and_then(Value::as_array);
        entries.into_iter().flatten().filter_map(Rule::read).collect()
    }

    fn read(entry: &Value) -> Option<Rule> {
        let text = |k: &str| entry.get(k).and_then(Value::as_str).unwrap_or_default();
        let rule = Arc::new(Expression::compile(text("rule")).ok()?);
        let message_expression = match text("messageExpression") {
            "" => None,
            source => Some(Arc::new(Expression::compile(source).ok()?)),
        };
        Some(Rule {
            rule,
            message: text("message").trim().to_string(),
            message_expression,
            field_path: text("fieldPath").to_string(),
            reason: text("reason").to_string(),
            optional_old_self: entry.get("optionalOldSelf").and_then(Value::as_bool) == Some(true),
        })
    }

    /// Whether the rule names `oldSelf`.
    pub fn is_transition(&self) -> bool {
        self.rule.uses("oldSelf")
    }

    /// kube's `ruleErrorString`: the message, or the rule.
    fn error_string(&self) -> &str {
        if self.message.is_empty() { self.rule.source().trim() } else { &self.message }
    }

    /// kube's `ruleMessageOrDefault`.
    fn message_or_default(&self) -> String {
        if self.message.is_empty() { format!("failed rule: {}", self.rule.source().trim()) } else { self.message.clone() }
    }
}

impl Structural {
    /// Whether this node or one below it has rules.
    pub fn has_rules(&self) -> bool {
        self.rules_below
    }

    /// The errors of the rules of this schema and every node below it, on `new` (the custom
    /// resource, whose root `self` shows `apiVersion`, `kind` and `metadata.name` and
    /// `metadata.generateName`); `old`: the stored object of an update.
    ///
    /// On an update, a rule that is not a transition rule and fails at a node whose value did
    /// not change (or, where the old value cannot be found, whose nearest found ancestor did
    /// not) is not an error: kube's validation ratcheting (which warns instead).
    ///
    /// Every rule run is charged its cost (see [`Budget`]); past kube's limit of one rule, or
    /// of all the rules on one object, no further rule runs.
    pub fn validate_rules(&self, new: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut errs = Vec::new();
        self.rules_at(new, old, Ratchet::new(old == Some(new)), "", true, &mut Budget::new(), &mut errs);
        errs
    }

    /// The errors of the rules of this node and those below on `v`, a default in a CRD's
    /// schema, reported under `at` (`...properties[size].default`); a transition rule sees the
    /// default as its old value too.
    pub fn validate_rules_under(&self, v: &Value, at: &str) -> Vec<FieldError> {
        let mut errs = Vec::new();
        self.rules_at(v, Some(v), Ratchet::Never, at, self.embedded, &mut Budget::new(), &mut errs);
        errs
    }

    #[allow(clippy::too_many_arguments)]
    fn rules_at(&self, v: &Value, old: Option<&Value>, ratchet: Ratchet, path: &str, root: bool, budget: &mut Budget, errs: &mut Vec<FieldError>) {
        if v.is_null() || budget.stopped {
            return;
        }
        if !self.rules.is_empty() {
            self.run_rules(v, old.filter(|o| !o.is_null()), ratchet == Ratchet::Unchanged, path, root, budget, errs);
        }
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let Some(s) = self.properties.get(k).or(self.additional.as_deref()).filter(|s| s.rules_below) else { continue };
                    if root && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                        continue;
                    }
                    // A member not found in the old object is as changed as its parent is.
                    let (old_member, at) = match old {
                        Some(o) => {
                            let member = o.get(k);
                            (member, ratchet.at(member == Some(x)))
                        }
                        None => (None, ratchet),
                    };
                    s.rules_at(x, old_member, at, &child(path, k), false, budget, errs);
                }
            }
            Value::Array(items) => {
                let Some(s) = self.items.as_deref().filter(|s| s.rules_below) else { return };
                let old_items = old.and_then(|o| self.old_items_by_key(o));
                for (i, x) in items.iter().enumerate() {
                    let correlated = old_items.as_ref().and_then(|by_key| by_key.get(&self.map_key(x)?).copied());
                    let at = match correlated {
                        Some(o) => ratchet.at(o == x),
                        None => ratchet,
                    };
                    s.rules_at(x, correlated, at, &format!("{path}[{i}]"), false, budget, errs);
                }
            }
            _ => {}
        }
    }

    /// The items of an old `x-kubernetes-list-type: map` list by their keys (kube's
    /// `makeMapList`): items of other lists are not correlated.
    fn old_items_by_key<'o>(&self, old: &'o Value) -> Option<HashMap<String, &'o Value>> {
        if self.list_type != ListType::Map || self.map_keys.is_empty() {
            return None;
        }
        Some(old.as_array()?.iter().filter_map(|o| Some((self.map_key(o)?, o))).collect())
    }

    /// An item's map keys as one string; `None` where one is missing or not a scalar.
    fn map_key(&self, item: &Value) -> Option<String> {
        let values: Option<Vec<&Value>> = self.map_keys.iter().map(|k| item.get(k).filter(|v| !v.is_object() && !v.is_array())).collect();
        serde_json::to_string(&values?).ok()
    }

    #[allow(clippy::too_many_arguments)]
    fn run_rules(&self, v: &Value, old: Option<&Value>, unchanged: bool, path: &str, root: bool, budget: &mut Budget, errs: &mut Vec<FieldError>) {
        let at = if path.is_empty() { "<nil>" } else { path };
        let invalid = |detail: String| FieldError::invalid(at, Value::from(self.ty.as_str()), detail);
        if budget.left == 0 {
            errs.push(invalid(OUT_OF_BUDGET.to_string()));
            budget.stopped = true;
            return;
        }
        let this = to_cel(v, self, root);
        let old_value = old.map(|o| to_cel(o, self, root));
        let shapes = [("self", Shape::of(&this)), ("oldSelf", old_value.as_ref().map_or(Shape::Scalar, Shape::of))];
        for rule in &self.rules {
            let transition = rule.is_transition();
            let mut variables = vec![("self", this.clone())];
            if transition {
                match (&old_value, rule.optional_old_self) {
                    (Some(o), false) => variables.push(("oldSelf", o.clone())),
                    (None, false) => continue,
                    (o, true) => variables.push(("oldSelf", optional(o.clone()))),
                }
            }
            if let Err(over) = budget.charge(&rule.rule, &shapes) {
                errs.push(invalid(match over {
                    Over::Budget => OUT_OF_BUDGET.to_string(),
                    Over::Call => {
                        format!("'{CANCELLED}': no further validation rules will be run due to call cost exceeds limit for rule: {}", rule.error_string())
                    }
                }));
                return;
            }
            let failed_at = if rule.field_path.is_empty() { at.to_string() } else { join_field_path(path, &rule.field_path) };
            match rule.rule.evaluate(variables.clone()) {
                Ok(cel::Value::Bool(true)) => {}
                Ok(cel::Value::Bool(false)) if unchanged && !transition => {}
                Ok(cel::Value::Bool(false)) => {
                    let detail = match &rule.message_expression {
                        Some(m) => match budget.charge(m, &shapes) {
                            Err(over) => {
                                errs.push(invalid(match over {
                                    Over::Budget => {
                                        "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run"
                                            .to_string()
                                    }
                                    Over::Call => format!(
                                        "no further validation rules will be run due to call cost exceeds limit for messageExpression: {:?}",
                                        m.source()
                                    ),
                                }));
                                return;
                            }
                            Ok(()) => match m.evaluate(variables) {
                                Ok(cel::Value::String(s)) if is_usable_message(&s) => s.trim().to_string(),
                                _ => rule.message_or_default(),
                            },
                        },
                        None => rule.message_or_default(),
                    };
                    errs.push(failure(&failed_at, &self.ty, &rule.reason, detail));
                }
                Ok(other) => errs.push(invalid(format!("rule did not evaluate to a bool ({other:?}) for rule: {}", rule.error_string()))),
                Err(e) if e.starts_with("No such overload") || e.contains("no such overload") => errs.push(invalid(format!(
                    "'{e}': call arguments did not match a supported operator, function or macro signature for rule: {}",
                    rule.error_string()
                ))),
                Err(e) => errs.push(invalid(format!("{e} evaluating rule: {}", rule.error_string()))),
            }
        }
    }
}

/// kube's error once the rules run on an object have spent its budget.
const OUT_OF_BUDGET: &str = "validation failed due to running out of cost budget, no further validation rules will be run";

/// cel-go's error of an evaluation cancelled at the limit of one call.
const CANCELLED: &str = "operation cancelled: actual cost limit exceeded";

/// What the rules run on one object have left to spend, as kube's validator keeps it: each
/// rule (and message expression) run is charged its cost, at most a little over the limit of
/// one call (where kube cancels it); past either, no further rule runs.
///
/// kube counts a rule's cost as it runs; kapi charges the rule's estimate at the exact sizes
/// of `self` and `oldSelf` ([`Shape::of`]) before it runs, so that no rule runs past the
/// limit: a rule that stops early (an `exists` that finds its element first, a `&&` whose
/// left side is false) is charged as if it did not.
struct Budget {
    left: u64,
    stopped: bool,
}

/// Which limit a charge passed.
enum Over {
    /// The object's budget.
    Budget,
    /// One call's limit.
    Call,
}

impl Budget {
    fn new() -> Budget {
        Budget { left: cost::OBJECT_BUDGET, stopped: false }
    }

    /// Charges an evaluation of `expr` at `shapes`; on an error, no further rule runs.
    fn charge(&mut self, expr: &Expression, shapes: &[(&str, Shape)]) -> Result<(), Over> {
        let cost = cost::estimate(expr, shapes);
        let charged = cost.min(cost::CALL_LIMIT + 1);
        let over = if charged > self.left {
            Over::Budget
        } else if cost > cost::CALL_LIMIT {
            Over::Call
        } else {
            self.left -= charged;
            return Ok(());
        };
        self.stopped = true;
        Err(over)
    }
}

/// Whether a failing rule (not a transition rule) is let through at a value.
#[derive(Clone, Copy, PartialEq)]
enum Ratchet {
    /// Never (a CRD's defaults).
    Never,
    /// The value is what it was.
    Unchanged,
    /// The value changed, or is new.
    Changed,
}

impl Ratchet {
    fn new(unchanged: bool) -> Ratchet {
        if unchanged { Ratchet::Unchanged } else { Ratchet::Changed }
    }

    /// At a value below, found in the old object (`unchanged`: equal to it there).
    fn at(self, unchanged: bool) -> Ratchet {
        if self == Ratchet::Never { self } else { Ratchet::new(unchanged) }
    }
}

/// The most bytes of a message expression's message kube uses
/// (`MaxEvaluatedMessageExpressionSizeBytes`).
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// Whether a message expression's message is used: one line, not blank, not too long (else
/// the rule's message is).
fn is_usable_message(s: &str) -> bool {
    let trimmed = s.trim();
    !trimmed.is_empty() && trimmed.len() <= MAX_MESSAGE_BYTES && !trimmed.contains('\n')
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_string() } else { format!("{path}.{key}") }
}

/// A rule's `fieldPath` (`.spec.replicas`, `.items['a.b']`) below the rule's node, as kube
/// reports it: members joined with dots, map keys in brackets.
fn join_field_path(path: &str, field_path: &str) -> String {
    let mut out = path.to_string();
    let mut rest = field_path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            out = child(&out, &after[..end]);
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']').map_or(after.len(), |e| e + 1);
            out.push('[');
            out.push_str(after[..end].trim_matches(['\'', ']']).trim_matches('\''));
            out.push(']');
            rest = &after[end..];
        } else {
            return out;
        }
    }
    out
}

/// The error of a rule that evaluated to false, of the kind its `reason` names.
fn failure(at: &str, ty: &str, reason: &str, detail: String) -> FieldError {
    match reason {
        "FieldValueForbidden" => FieldError::forbidden(at, detail),
        "FieldValueRequired" => FieldError::required(at, detail),
        "FieldValueDuplicate" => FieldError::duplicate(at, Value::from(ty)),
        _ => FieldError::invalid(at, Value::from(ty), detail),
    }
}

fn optional(v: Option<cel::Value>) -> cel::Value {
    let wrapped = match v {
        Some(v) => cel::OptionalValue::of(v),
        None => cel::OptionalValue::none(),
    };
    cel::Value::Opaque(Arc::new(wrapped))
}

/// A value as the rules see it (kube's `UnstructuredToVal`): integers as `int` (as `double`
/// where the schema says `number`), `date-time` and `date` strings as timestamps, Go `duration`s as durations, `byte`
/// strings as bytes; an object's described properties by their escaped names (a reserved
/// word's also by itself, as kube reads it since v1.31), without those that are null or
/// typeless; a map (`additionalProperties`) by its own keys; an object of unknown fields as
/// an empty one. `resource`: the value is a resource (the root, an embedded one): its
/// `apiVersion`, `kind`, `metadata.name` and `metadata.generateName` show.
pub fn to_cel(v: &Value, s: &Structural, resource: bool) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) if s.ty == "number" => cel::Value::Float(n.as_f64().unwrap_or_default()),
        Value::Number(n) => n.as_i64().map_or_else(|| cel::Value::Float(n.as_f64().unwrap_or_default()), cel::Value::Int),
        Value::String(text) => string_value(text, s.format.as_deref()),
        Value::Array(items) => {
            let item = s.items.as_deref().unwrap_or(&UNDESCRIBED);
            cel::Value::List(Arc::new(items.iter().map(|x| to_cel(x, item, false)).collect()))
        }
        Value::Object(m) => {
            if let Some(values) = s.additional.as_deref() {
                return cel::Value::Map(m.iter().map(|(k, x)| (cel::Key::from(k.as_str()), to_cel(x, values, false))).collect::<HashMap<_, _>>().into());
            }
            let resource = resource || s.embedded;
            let mut out: HashMap<cel::Key, cel::Value> = HashMap::with_capacity(m.len());
            for (k, x) in m.iter().filter(|(_, x)| !x.is_null()) {
                // kube's `WithTypeAndObjectMeta`: a resource's own fields, whatever the schema says.
                if resource && matches!(k.as_str(), "apiVersion" | "kind") {
                    out.insert(cel::Key::from(k.as_str()), to_cel(x, &UNDESCRIBED, false));
                    continue;
                }
                if resource && k == "metadata" {
                    let shown = ["name", "generateName"].into_iter().filter_map(|f| Some((cel::Key::from(f), to_cel(x.get(f)?, &UNDESCRIBED, false))));
                    out.insert(cel::Key::from("metadata"), cel::Value::Map(HashMap::from_iter(shown).into()));
                    continue;
                }
                match s.properties.get(k) {
                    Some(p) if !p.ty.is_empty() || p.int_or_string() => {
                        let Some(name) = cel::escape(k) else { continue };
                        if name != *k && !matches!(k.as_str(), "in" | "true" | "false" | "null") && !k.contains(['.', '-', '/']) && !k.contains("__") {
                            out.insert(cel::Key::from(k.as_str()), to_cel(x, p, false));
                        }
                        out.insert(cel::Key::from(name), to_cel(x, p, false));
                    }
                    _ => {}
                }
            }
            cel::Value::Map(out.into())
        }
    }
}

/// A string as its `format` makes it: a timestamp, bytes, or (also where it does not parse,
/// which validation reports) the string.
fn string_value(text: &str, format: Option<&str>) -> cel::Value {
    let parsed = match format {
        Some("date-time") => chrono::DateTime::parse_from_rfc3339(text).ok().map(cel::Value::Timestamp),
        Some("date") => chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|t| cel::Value::Timestamp(t.and_utc().fixed_offset())),
        Some("duration") => super::formats::go_duration(text).map(|n| cel::Value::Duration(chrono::Duration::nanoseconds(n))),
        Some("byte") => base64::Engine::decode(&base64::engine::general_purpose::STANDARD, text).ok().map(|b| cel::Value::Bytes(Arc::new(b))),
        _ => None,
    };
    parsed.unwrap_or_else(|| cel::Value::String(Arc::new(text.to_string())))
}
