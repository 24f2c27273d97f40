//! The worst-case cost of an expression, estimated before it runs, as cel-go's cost estimator
//! (`checker/cost.go`) and kube's (`library/cost.go`) estimate it: one unit per variable, field
//! selection and call; a tenth of a unit per character a string function or comparison reads
//! (a regex match that times a quarter per character of its pattern); one unit per element a
//! list function reads; ten per list literal; a comprehension's condition and step once per
//! element of what it ranges over. The sizes of values come from their [`Shape`], which a schema's `maxLength`,
//! `maxItems` and `maxProperties` bound; without them, the largest a request body can hold.
//!
//! kube refuses an expression whose estimate passes its limit; the estimate here never
//! exceeds kube's for the same expression (where they differ, this one is the lower), so what
//! kube accepts is accepted, and what is accepted runs in time bounded by the estimate.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use cel::common::ast::{ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue, operators};

use super::Expression;

/// The largest request body kube reads (3 MiB): the bound of every size no schema limits.
pub const MAX_REQUEST_BYTES: u64 = 3 * 1024 * 1024;

/// kube's limit of one rule's estimated cost, its cardinality included
/// (`StaticEstimatedCostLimit`).
pub const RULE_LIMIT: u64 = 10_000_000;

/// kube's limit of the estimated costs of all of a schema's rules together
/// (`StaticEstimatedCRDCostLimit`).
pub const TOTAL_LIMIT: u64 = 100_000_000;

/// kube's limit of one evaluation's cost (`PerCallLimit`): past it, the evaluation is cancelled.
pub const CALL_LIMIT: u64 = 1_000_000;

/// kube's budget of the costs of every rule run on one object (`RuntimeCELCostBudget`).
pub const OBJECT_BUDGET: u64 = 10_000_000;

/// What the estimate knows of a value.
/// Its parts are shared (`Arc`): a shape is cloned at every variable an expression names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape<'v> {
    /// Of any type, and any size a request allows.
    Unknown,
    /// A number, boolean, null, timestamp or duration.
    Scalar,
    /// A string (or bytes) of at most `max` characters.
    String { max: u64 },
    /// A list of at most `max` items.
    List { max: u64, items: Arc<Shape<'v>> },
    /// A map of at most `max` entries whose keys are strings of at most `key` characters.
    Map { max: u64, key: u64, values: Arc<Shape<'v>> },
    /// An object of known fields, by their CEL names.
    Object { fields: Arc<BTreeMap<String, Shape<'v>>> },
    /// An actual object or map ([`Shape::of`]): each of its members; one it does not have is
    /// never read (reading it fails at once). `key`: its longest key. Its widest member (what
    /// a key not known before it runs reads) is worked out only where an expression asks.
    Members { fields: Arc<BTreeMap<String, Shape<'v>>>, key: u64 },
    /// An actual JSON object or list, read in place ([`Shape::of_json`]): what `Members` or
    /// `List` of it would be, worked out when an expression first reads it and kept (the
    /// clones of a shape share it) for every estimate after.
    Json(Arc<Actual<'v>>),
}

/// A JSON object or list whose shape is worked out when first read.
#[derive(Debug)]
pub struct Actual<'v> {
    json: &'v serde_json::Value,
    made: OnceLock<Shape<'v>>,
}

impl PartialEq for Actual<'_> {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.json, other.json)
    }
}

impl Eq for Actual<'_> {}

impl<'v> Actual<'v> {
    /// An object's `Members` (its members' own shapes made, theirs not yet), a list's `List`.
    fn shape(&self) -> &Shape<'v> {
        self.made.get_or_init(|| match self.json {
            serde_json::Value::Object(m) => {
                let fields: BTreeMap<String, Shape<'v>> = m.iter().map(|(k, v)| (k.clone(), Shape::of_json(v))).collect();
                let key = fields.keys().map(|k| k.len() as u64).max().unwrap_or(0);
                Shape::Members { fields: Arc::new(fields), key }
            }
            serde_json::Value::Array(items) => {
                Shape::List { max: items.len() as u64, items: Arc::new(items.iter().map(Shape::of_json).fold(Shape::Scalar, wider)) }
            }
            other => Shape::of_json(other),
        })
    }
}

impl<'v> Shape<'v> {
    /// What the estimate knows of an actual value: its exact sizes, each member of a map by
    /// itself, a list's items as the widest of them. An estimate at these shapes is what kapi
    /// charges a rule that runs on the value.
    pub fn of(v: &cel::Value) -> Shape<'v> {
        match v {
            cel::Value::String(s) => Shape::String { max: s.chars().count() as u64 },
            cel::Value::Bytes(b) => Shape::String { max: b.len() as u64 },
            cel::Value::List(items) => Shape::List { max: items.len() as u64, items: Arc::new(items.iter().map(Shape::of).fold(Shape::Scalar, wider)) },
            cel::Value::Map(m) => {
                let fields: BTreeMap<String, Shape> = m
                    .map
                    .iter()
                    .filter_map(|(k, v)| match k {
                        cel::objects::Key::String(k) => Some((k.to_string(), Shape::of(v))),
                        _ => None,
                    })
                    .collect();
                let key = fields.keys().map(|k| k.len() as u64).max().unwrap_or(0);
                Shape::Members { fields: Arc::new(fields), key }
            }
            _ => Shape::Scalar,
        }
    }

    /// [`Shape::of`] the value a JSON tree is given as ([`super::to_value`]); an object's or
    /// list's parts are looked at when read ([`Shape::Json`]).
    pub fn of_json(v: &'v serde_json::Value) -> Shape<'v> {
        match v {
            serde_json::Value::String(s) => Shape::String { max: s.chars().count() as u64 },
            serde_json::Value::Array(_) | serde_json::Value::Object(_) => Shape::Json(Arc::new(Actual { json: v, made: OnceLock::new() })),
            _ => Shape::Scalar,
        }
    }

    /// What the estimate reads of the shape: a [`Shape::Json`]'s worked out.
    fn resolved(&self) -> &Shape<'v> {
        match self {
            Shape::Json(actual) => actual.shape(),
            other => other,
        }
    }

    /// The most characters, items or entries the value has.
    fn size(&self) -> u64 {
        match self {
            Shape::Unknown => MAX_REQUEST_BYTES,
            Shape::Scalar => 1,
            Shape::String { max } | Shape::List { max, .. } | Shape::Map { max, .. } => *max,
            Shape::Object { fields } | Shape::Members { fields, .. } => fields.len() as u64,
            Shape::Json(actual) => actual.shape().size(),
        }
    }

    /// The value of the member `name` (a field, or a map's value).
    pub(super) fn member(&self, name: &str) -> Shape<'v> {
        match self {
            Shape::Object { fields } => fields.get(name).cloned().unwrap_or(Shape::Unknown),
            Shape::Members { fields, .. } => fields.get(name).cloned().unwrap_or(Shape::Scalar),
            Shape::Json(actual) => actual.shape().member(name),
            Shape::Map { values, .. } => (**values).clone(),
            _ => Shape::Unknown,
        }
    }

    /// What a comprehension over the value binds: a list's items, a map's or object's keys.
    pub(super) fn element(&self) -> Shape<'v> {
        match self {
            Shape::List { items, .. } => (**items).clone(),
            Shape::Map { key, .. } => Shape::String { max: *key },
            Shape::Object { fields } => Shape::String { max: fields.keys().map(|k| k.len() as u64).max().unwrap_or(0) },
            Shape::Members { key, .. } => Shape::String { max: *key },
            Shape::Json(actual) => actual.shape().element(),
            _ => Shape::Unknown,
        }
    }

    /// What indexing the value gives: a list's item or a map's value.
    pub(super) fn indexed(&self) -> Shape<'v> {
        match self {
            Shape::List { items, .. } => (**items).clone(),
            Shape::Map { values, .. } => (**values).clone(),
            Shape::Members { fields, .. } => fields.values().cloned().fold(Shape::Scalar, wider),
            Shape::Json(actual) => actual.shape().indexed(),
            _ => Shape::Unknown,
        }
    }

    fn is_sized(&self) -> bool {
        matches!(self.resolved(), Shape::String { .. } | Shape::List { .. } | Shape::Map { .. } | Shape::Unknown)
    }
}

/// The cost of reading `n` characters: a tenth of a unit each, rounded up.
fn traversal(n: u64) -> u64 {
    n.div_ceil(10)
}

/// The estimated worst-case cost of `expr` with `variables` of the given shapes.
pub fn estimate(expr: &Expression, variables: &[(&str, Shape<'_>)]) -> u64 {
    let mut scopes: Vec<(&str, Shape<'_>)> = variables.iter().map(|(n, s)| (*n, s.clone())).collect();
    walk(expr.root(), &mut scopes).0
}

fn walk<'e, 'v>(e: &'e IdedExpr, scopes: &mut Vec<(&'e str, Shape<'v>)>) -> (u64, Shape<'v>) {
    match &e.expr {
        Expr::Unspecified => (0, Shape::Unknown),
        Expr::Literal(LiteralValue::String(s)) => (0, Shape::String { max: s.inner().chars().count() as u64 }),
        Expr::Literal(LiteralValue::Bytes(b)) => (0, Shape::String { max: b.inner().len() as u64 }),
        Expr::Literal(_) => (0, Shape::Scalar),
        Expr::Ident(name) => (1, scopes.iter().rev().find(|(n, _)| *n == name).map_or(Shape::Unknown, |(_, s)| s.clone())),
        Expr::Select(select) => {
            let (cost, operand) = walk(&select.operand, scopes);
            if select.test {
                return (cost, Shape::Scalar);
            }
            (cost.saturating_add(1), operand.member(&select.field))
        }
        Expr::List(list) => {
            let (mut cost, mut items) = (10u64, Shape::Scalar);
            for x in &list.elements {
                let (c, s) = walk(x, scopes);
                cost = cost.saturating_add(c);
                items = wider(items, s);
            }
            (cost, Shape::List { max: list.elements.len() as u64, items: Arc::new(items) })
        }
        Expr::Map(map) => (entries_cost(&map.entries, scopes).saturating_add(30), Shape::Unknown),
        Expr::Struct(s) => (entries_cost(&s.entries, scopes).saturating_add(40), Shape::Unknown),
        Expr::Comprehension(c) => comprehension(c, scopes),
        Expr::Call(call) => {
            let mut cost = 0u64;
            let target = call.target.as_ref().map(|t| {
                let (c, s) = walk(t, scopes);
                cost = cost.saturating_add(c);
                s
            });
            let mut args = Vec::with_capacity(call.args.len());
            for a in &call.args {
                let (c, s) = walk(a, scopes);
                args.push((c, s));
            }
            if call.func_name == operators::OPT_SELECT
                && let (Some((c, operand)), Some(Expr::Literal(LiteralValue::String(field)))) = (args.first(), call.args.get(1).map(|a| &a.expr))
            {
                return (c.saturating_add(1), operand.member(field.inner()));
            }
            if call.func_name == operators::CONDITIONAL && args.len() == 3 {
                let (then, otherwise) = (&args[1], &args[2]);
                return (args[0].0.saturating_add(then.0.max(otherwise.0)), wider(then.1.clone(), otherwise.1.clone()));
            }
            for (c, _) in &args {
                cost = cost.saturating_add(*c);
            }
            let shapes: Vec<Shape> = args.into_iter().map(|(_, s)| s).collect();
            let (own, shape) = call_cost(&call.func_name, target.as_ref(), &shapes);
            (cost.saturating_add(own), shape)
        }
    }
}

fn entries_cost<'e>(entries: &'e [cel::common::ast::IdedEntryExpr], scopes: &mut Vec<(&'e str, Shape<'_>)>) -> u64 {
    entries.iter().fold(0u64, |cost, entry| match &entry.expr {
        EntryExpr::MapEntry(m) => cost.saturating_add(walk(&m.key, scopes).0).saturating_add(walk(&m.value, scopes).0),
        EntryExpr::StructField(f) => cost.saturating_add(walk(&f.value, scopes).0),
    })
}

/// A comprehension (what `all`, `exists`, `exists_one`, `map` and `filter` expand to): its
/// range, then its condition and step once per element.
fn comprehension<'e, 'v>(c: &'e ComprehensionExpr, scopes: &mut Vec<(&'e str, Shape<'v>)>) -> (u64, Shape<'v>) {
    let (range_cost, range) = walk(&c.iter_range, scopes);
    let n = range.size();
    let (init_cost, init) = walk(&c.accu_init, scopes);
    // `map` and `filter` start from an empty list and grow it by an item a step; any other
    // accumulator (what `optMap` binds its target to) is what it was made of.
    let accumulated = match (&c.accu_init.expr, init) {
        (Expr::List(l), Shape::List { .. }) if l.elements.is_empty() => Shape::List { max: n, items: Arc::new(Shape::Unknown) },
        (_, other) => other,
    };
    let depth = scopes.len();
    scopes.push((&c.accu_var, accumulated));
    scopes.push((&c.iter_var, range.element()));
    if let Some(second) = &c.iter_var2 {
        scopes.push((second, range.indexed()));
    }
    let (cond, _) = walk(&c.loop_cond, scopes);
    let (step, _) = walk(&c.loop_step, scopes);
    scopes.truncate(depth + 1);
    let (result_cost, result) = walk(&c.result, scopes);
    scopes.truncate(depth);
    let cost = range_cost.saturating_add(init_cost).saturating_add(n.saturating_mul(cond.saturating_add(step))).saturating_add(result_cost);
    (cost, result)
}

/// The larger of two shapes, where they differ; of two of different kinds, the one of more
/// characters, items or members. `a`, when not shared, is widened in place (so that the items
/// of a long list are joined in time proportional to their sizes).
fn wider<'v>(a: Shape<'v>, b: Shape<'v>) -> Shape<'v> {
    match (a, b) {
        (Shape::Json(actual), b) => wider(actual.shape().clone(), b),
        (a, Shape::Json(actual)) => wider(a, actual.shape().clone()),
        (Shape::Scalar, b) => b,
        (a, Shape::Scalar) => a,
        (Shape::String { max: x }, Shape::String { max: y }) => Shape::String { max: x.max(y) },
        (Shape::List { max: x, items: a }, Shape::List { max: y, items: b }) => Shape::List { max: x.max(y), items: wider_arc(a, &b) },
        (Shape::Map { max: x, key: ka, values: va }, Shape::Map { max: y, key: kb, values: vb }) => {
            Shape::Map { max: x.max(y), key: ka.max(kb), values: wider_arc(va, &vb) }
        }
        (Shape::Object { fields: a }, Shape::Object { fields: b }) => Shape::Object { fields: wider_fields(a, &b) },
        (Shape::Members { fields: a, key: ka }, Shape::Members { fields: b, key: kb }) => Shape::Members { fields: wider_fields(a, &b), key: ka.max(kb) },
        (a, b) if a == b => a,
        (a, b) => {
            if a.size() >= b.size() {
                a
            } else {
                b
            }
        }
    }
}

/// Each member widened by the other's of its name.
fn wider_fields<'v>(mut a: Arc<BTreeMap<String, Shape<'v>>>, b: &BTreeMap<String, Shape<'v>>) -> Arc<BTreeMap<String, Shape<'v>>> {
    let into = Arc::make_mut(&mut a);
    for (k, s) in b {
        match into.get_mut(k) {
            Some(mine) => *mine = wider(std::mem::replace(mine, Shape::Scalar), s.clone()),
            None => {
                into.insert(k.clone(), s.clone());
            }
        }
    }
    a
}

fn wider_arc<'v>(a: Arc<Shape<'v>>, b: &Arc<Shape<'v>>) -> Arc<Shape<'v>> {
    if Arc::ptr_eq(&a, b) {
        return a;
    }
    Arc::new(wider(Arc::unwrap_or_clone(a), (**b).clone()))
}

/// A call's own cost (its arguments' excluded) and the shape of what it returns.
fn call_cost<'v>(function: &str, target: Option<&Shape<'v>>, args: &[Shape<'v>]) -> (u64, Shape<'v>) {
    let target = target.map(Shape::resolved);
    let args: Vec<Shape<'v>> = args.iter().map(|a| a.resolved().clone()).collect();
    let first = target.or(args.first());
    let size = first.map_or(0, Shape::size);
    match function {
        operators::LOGICAL_AND | operators::LOGICAL_OR => (0, Shape::Scalar),
        operators::LOGICAL_NOT | operators::NOT_STRICTLY_FALSE | "size" => (1, Shape::Scalar),
        operators::ADD => match (args.first(), args.get(1)) {
            (Some(Shape::String { max: a }), Some(Shape::String { max: b })) => (traversal(a.saturating_add(*b)), Shape::String { max: a.saturating_add(*b) }),
            (Some(Shape::List { max: a, items: x }), Some(Shape::List { max: b, items: y })) => {
                (1, Shape::List { max: a.saturating_add(*b), items: Arc::new(wider((**x).clone(), (**y).clone())) })
            }
            (Some(Shape::Scalar), Some(Shape::Scalar)) => (1, Shape::Scalar),
            // A string or list of any size: what a request holds.
            (a, b) => (traversal(a.map_or(0, Shape::size).saturating_add(b.map_or(0, Shape::size))), Shape::Unknown),
        },
        operators::EQUALS | operators::NOT_EQUALS | operators::LESS | operators::LESS_EQUALS | operators::GREATER | operators::GREATER_EQUALS => {
            let least = args.iter().map(|a| if a.is_sized() { a.size() } else { 0 }).min().unwrap_or(0);
            (traversal(least), Shape::Scalar)
        }
        operators::IN => match args.get(1) {
            Some(Shape::Map { .. } | Shape::Object { .. } | Shape::Members { .. }) => (1, Shape::Scalar),
            other => (1u64.saturating_add(other.map_or(0, Shape::size)), Shape::Scalar),
        },
        operators::INDEX | operators::OPT_INDEX => (1, args.first().map_or(Shape::Unknown, Shape::indexed)),
        // An optional holds what it was made of.
        "value" => (1, target.cloned().unwrap_or(Shape::Unknown)),
        "orValue" | "or" => (1, wider(target.cloned().unwrap_or(Shape::Unknown), args.first().cloned().unwrap_or(Shape::Unknown))),
        "of" | "ofNonZeroValue" => (1, args.first().cloned().unwrap_or(Shape::Unknown)),
        "hasValue" | "none" => (1, Shape::Scalar),
        "contains" => (traversal(size).saturating_mul(traversal(args.first().map_or(0, Shape::size))), Shape::Scalar),
        "startsWith" | "endsWith" => (traversal(args.first().map_or(0, Shape::size)), Shape::Scalar),
        "lowerAscii" | "upperAscii" | "trim" | "substring" | "quote" => (traversal(size), Shape::String { max: size }),
        "charAt" => (1, Shape::String { max: 1 }),
        "indexOf" | "lastIndexOf" | "isSorted" | "sum" | "min" | "max" => match first {
            Some(list @ Shape::List { max, .. }) => {
                let per_item = match list.element() {
                    Shape::String { max } => 1 + traversal(max),
                    _ => 1,
                };
                (max.saturating_mul(per_item), list.element())
            }
            _ => (traversal(size), Shape::Scalar),
        },
        "matches" | "find" | "findAll" => {
            let pattern = args.first().map_or(0, Shape::size);
            let cost = traversal(size.saturating_add(1)).saturating_mul(pattern.div_ceil(4).max(1));
            (cost, if function == "findAll" { Shape::List { max: size, items: Arc::new(Shape::String { max: size }) } } else { Shape::String { max: size } })
        }
        "split" => (traversal(size.saturating_mul(2)), Shape::List { max: size, items: Arc::new(Shape::String { max: size }) }),
        "replace" => {
            let grown = args.get(1).map_or(1, |r| r.size().max(1));
            (traversal(size.saturating_mul(2)), Shape::String { max: size.saturating_mul(grown) })
        }
        "join" => {
            let item = first.map_or(Shape::Unknown, Shape::element).size();
            let total = size.saturating_mul(item.saturating_add(args.first().map_or(0, Shape::size)));
            (traversal(total), Shape::String { max: total })
        }
        "sets.contains" | "sets.equivalent" | "sets.intersects" => (size.saturating_mul(args.get(1).map_or(0, Shape::size)), Shape::Scalar),
        "validate" => (traversal(args.first().map_or(0, Shape::size)).saturating_mul(32), Shape::Unknown),
        "quantity" | "isQuantity" | "ip" | "isIP" | "ip.isCanonical" | "cidr" | "isCIDR" | "url" | "isURL" => {
            (traversal(args.first().map_or(0, Shape::size)), if function.starts_with("is") { Shape::Scalar } else { Shape::Unknown })
        }
        "check" => (super::authz::CHECK_COST, Shape::Scalar),
        // kube charges 1; kapi copies the strings a check is built of, and charges their reading.
        "path" | "group" | "serviceAccount" | "resource" | "subresource" | "namespace" | "name" => {
            (1u64.saturating_add(traversal(args.iter().fold(0, |n, a| n.saturating_add(a.size())))), Shape::Unknown)
        }
        // kube's cost of parsing a selector into its requirements.
        "fieldSelector" | "labelSelector" => {
            let length = args.first().map_or(0, Shape::size);
            (traversal(length).saturating_add(length.div_ceil(2).saturating_mul(50)).saturating_add(10), Shape::Unknown)
        }
        "string" | "bytes" => (1, Shape::String { max: size.max(20) }),
        "int" | "uint" | "double" | "bool" | "timestamp" | "duration" => (1, Shape::Scalar),
        _ => (1, Shape::Unknown),
    }
}
