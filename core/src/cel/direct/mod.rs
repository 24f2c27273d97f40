//! The expressions that only read: evaluated straight on the JSON they are given, without
//! the interpreter, which costs an admission policy several times more per expression (its
//! scopes, its lookups of overloads and qualified names, its boxed values).
//!
//! An expression is [`lowered`](Node::lower) when it is compiled, if every node of it is one
//! this evaluator knows: literals (but bytes and unsigned), variables, fields, `has()`,
//! indexing, list literals, `!`, `-`, `&&`, `||`, `?:`, comparisons, `+` and `-` of integers
//! and `+` of strings, `size`, `startsWith`, `endsWith`, `contains`, `in`, and the
//! `all`, `exists` and `exists_one` macros. Such an expression runs here first, on the
//! variables bound to JSON ([`super::Bindings::bind_json`]), and the answer is used only when
//! nothing went astray: any error, a type this evaluator does not compare (`1 == 1.0`, a list
//! with a list), a variable bound to anything but JSON, and the expression runs again in the
//! interpreter, whose answer (its error, in its words) is the one given. An answer given here
//! is the interpreter's for the same variables: `proptest`s in `tests.rs` hold the two
//! against each other.

use std::borrow::Cow;

use cel::common::ast::{Expr, IdedExpr, LiteralValue, operators};
use serde_json::Value as Json;

use super::Bindings;

/// The first names of the environment's qualified functions (`sets.contains`, `math.abs`,
/// `optional.of`), and of the other CEL libraries': a call whose target starts with one may be
/// such a function, which the interpreter calls instead of the method.
const FUNCTION_NAMESPACES: [&str; 11] = ["base64", "format", "ip", "jsonpatch", "lists", "math", "optional", "regex", "sets", "strings", "url"];

/// A lowered expression.
#[derive(Debug)]
pub(super) enum Node {
    Null,
    Bool(bool),
    Int(i64),
    Double(f64),
    String(String),
    Var(String),
    Field(Box<Node>, String),
    Has(Box<Node>, String),
    Index(Box<Node>, Box<Node>),
    List(Vec<Node>),
    Not(Box<Node>),
    Negate(Box<Node>),
    /// `@not_strictly_false`, which a macro's loop condition is: here its operand is a bool.
    NotStrictlyFalse(Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Conditional(Box<[Node; 3]>),
    Compare(Comparison, Box<Node>, Box<Node>),
    Add(Box<Node>, Box<Node>),
    Subtract(Box<Node>, Box<Node>),
    Size(Box<Node>),
    Text(Text, Box<Node>, Box<Node>),
    In(Box<Node>, Box<Node>),
    Loop(Box<Loop>),
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Comparison {
    Equal,
    NotEqual,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Text {
    StartsWith,
    EndsWith,
    Contains,
}

/// A comprehension whose accumulator is a bool or an int (what `all`, `exists` and
/// `exists_one` make).
#[derive(Debug)]
pub(super) struct Loop {
    range: Node,
    var: String,
    accumulator: String,
    init: Node,
    condition: Node,
    step: Node,
    result: Node,
}

/// A value while evaluating: a list or object is the JSON it was read from.
#[derive(Clone, Debug)]
enum Val<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Double(f64),
    Str(Cow<'a, str>),
    Json(&'a Json),
    List(Vec<Val<'a>>),
}

/// Why an evaluation here stopped.
#[derive(Debug, PartialEq)]
pub enum Stop {
    /// Something this evaluator leaves to the interpreter, which is asked instead.
    Astray,
    /// The evaluation cost more than its limit.
    Spent,
}

type Result<T> = std::result::Result<T, Stop>;

impl Node {
    /// `e` lowered, or `None` when some node of it is not one this evaluator knows.
    pub(super) fn lower(e: &IdedExpr) -> Option<Node> {
        let lowered = |e: &IdedExpr| Node::lower(e).map(Box::new);
        Some(match &e.expr {
            Expr::Literal(literal) => match literal {
                LiteralValue::Null => Node::Null,
                LiteralValue::Boolean(b) => Node::Bool(*b.inner()),
                LiteralValue::Int(i) => Node::Int(*i.inner()),
                LiteralValue::Double(d) => Node::Double(*d.inner()),
                LiteralValue::String(s) => Node::String(s.inner().to_string()),
                LiteralValue::Bytes(_) | LiteralValue::UInt(_) => return None,
            },
            Expr::Ident(name) => Node::Var(name.clone()),
            Expr::Select(s) if s.test => Node::Has(lowered(&s.operand)?, s.field.clone()),
            Expr::Select(s) => Node::Field(lowered(&s.operand)?, s.field.clone()),
            Expr::List(l) if l.optional_indices.is_empty() => Node::List(l.elements.iter().map(Node::lower).collect::<Option<_>>()?),
            Expr::Comprehension(c) if c.iter_var2.is_none() => {
                let init = Node::lower(&c.accu_init)?;
                if !matches!(init, Node::Bool(_) | Node::Int(_)) {
                    return None;
                }
                Node::Loop(Box::new(Loop {
                    range: Node::lower(&c.iter_range)?,
                    var: c.iter_var.clone(),
                    accumulator: c.accu_var.clone(),
                    init,
                    condition: Node::lower(&c.loop_cond)?,
                    step: Node::lower(&c.loop_step)?,
                    result: Node::lower(&c.result)?,
                }))
            }
            Expr::Call(call) => {
                let args: Vec<Node> = call.args.iter().map(Node::lower).collect::<Option<_>>()?;
                let target = match &call.target {
                    // `sets.contains(x)` is the function `sets.contains` for the interpreter,
                    // even where `sets` is a comprehension's variable.
                    Some(t) if qualified_root(t).is_some_and(|root| FUNCTION_NAMESPACES.contains(&root)) => return None,
                    Some(t) => Some(lowered(t)?),
                    None => None,
                };
                let name = call.func_name.as_str();
                match (target, <[Node; 1]>::try_from(args).map(|[x]| [Box::new(x)])) {
                    (None, Ok([x])) => match name {
                        operators::LOGICAL_NOT => Node::Not(x),
                        operators::NEGATE => Node::Negate(x),
                        operators::NOT_STRICTLY_FALSE => Node::NotStrictlyFalse(x),
                        "size" => Node::Size(x),
                        _ => return None,
                    },
                    (Some(t), Ok([x])) => match name {
                        "startsWith" => Node::Text(Text::StartsWith, t, x),
                        "endsWith" => Node::Text(Text::EndsWith, t, x),
                        "contains" => Node::Text(Text::Contains, t, x),
                        _ => return None,
                    },
                    (Some(t), Err(args)) if args.is_empty() && name == "size" => Node::Size(t),
                    (None, Err(args)) => binary(name, args)?,
                    _ => return None,
                }
            }
            _ => return None,
        })
    }
}

/// The first name of a qualified name (`a` of `a.b.c`), if `e` is one.
fn qualified_root(e: &IdedExpr) -> Option<&str> {
    match &e.expr {
        Expr::Ident(name) => Some(name),
        Expr::Select(s) if !s.test => qualified_root(&s.operand),
        _ => None,
    }
}

/// A call of two or three operands.
fn binary(name: &str, args: Vec<Node>) -> Option<Node> {
    let mut args = args.into_iter().map(Box::new);
    let (a, b) = (args.next()?, args.next()?);
    if let Some(c) = args.next() {
        return (name == operators::CONDITIONAL && args.next().is_none()).then(|| Node::Conditional(Box::new([*a, *b, *c])));
    }
    let comparison = match name {
        operators::EQUALS => Comparison::Equal,
        operators::NOT_EQUALS => Comparison::NotEqual,
        operators::LESS => Comparison::Less,
        operators::LESS_EQUALS => Comparison::LessOrEqual,
        operators::GREATER => Comparison::Greater,
        operators::GREATER_EQUALS => Comparison::GreaterOrEqual,
        operators::LOGICAL_AND => return Some(Node::And(a, b)),
        operators::LOGICAL_OR => return Some(Node::Or(a, b)),
        operators::ADD => return Some(Node::Add(a, b)),
        operators::SUBSTRACT => return Some(Node::Subtract(a, b)),
        operators::INDEX => return Some(Node::Index(a, b)),
        operators::IN => return Some(Node::In(a, b)),
        _ => return None,
    };
    Some(Node::Compare(comparison, a, b))
}

/// Evaluates `node` with the variables of `layers` (a name bound in more than one is the
/// first's): its value and its cost, or why it stopped. The cost is counted by the rules of
/// kapi's estimate ([`super::cost`], cel-go's) on the values and the iterations of this run
/// (so it is never more than the estimate), and the evaluation stops once it passes `limit`.
pub(super) fn evaluate(node: &Node, layers: &[&Bindings<'_>], limit: u64) -> Result<(super::Value, u64)> {
    let mut loops = Vec::new();
    let mut scope = Scope { layers, loops: &mut loops, cost: 0, limit };
    let value = eval(node, &mut scope)?;
    Ok((value.into_value(), scope.cost))
}

/// The variables in reach: the comprehensions' (innermost last), then the bound ones; and
/// the cost so far.
struct Scope<'s, 'a, 'v> {
    layers: &'s [&'s Bindings<'v>],
    loops: &'s mut Vec<(&'a str, Val<'a>)>,
    cost: u64,
    limit: u64,
}

impl<'a, 'v: 'a> Scope<'_, 'a, 'v> {
    fn lookup(&self, name: &str) -> Result<Val<'a>> {
        if let Some((_, v)) = self.loops.iter().rev().find(|(n, _)| *n == name) {
            return Ok(v.clone());
        }
        let bound = self.layers.iter().find_map(|b| b.json_of(name)).ok_or(Stop::Astray)?;
        bound.map(Val::of).ok_or(Stop::Astray)
    }

    fn charge(&mut self, cost: u64) -> Result<()> {
        self.cost = self.cost.saturating_add(cost);
        match self.cost > self.limit {
            true => Err(Stop::Spent),
            false => Ok(()),
        }
    }
}

/// The cost of reading `n` characters: a tenth of a unit each, rounded up.
fn traversal(n: usize) -> u64 {
    (n as u64).div_ceil(10)
}

fn eval<'a, 'v: 'a>(node: &'a Node, scope: &mut Scope<'_, 'a, 'v>) -> Result<Val<'a>> {
    let own = match node {
        Node::Var(_) | Node::Field(..) | Node::Index(..) | Node::Not(_) | Node::NotStrictlyFalse(_) | Node::Negate(_) | Node::Size(_) => 1,
        Node::Subtract(..) => 1,
        Node::List(_) => 10,
        _ => 0,
    };
    scope.charge(own)?;
    Ok(match node {
        Node::Null => Val::Null,
        Node::Bool(b) => Val::Bool(*b),
        Node::Int(i) => Val::Int(*i),
        Node::Double(d) => Val::Double(*d),
        Node::String(s) => Val::Str(Cow::Borrowed(s)),
        Node::Var(name) => scope.lookup(name)?,
        Node::Field(operand, field) => match eval(operand, scope)? {
            Val::Json(Json::Object(m)) => Val::of(m.get(field).ok_or(Stop::Astray)?),
            _ => return Err(Stop::Astray),
        },
        Node::Has(operand, field) => match eval(operand, scope)? {
            Val::Json(Json::Object(m)) => Val::Bool(m.contains_key(field)),
            _ => return Err(Stop::Astray),
        },
        Node::Index(operand, index) => match (eval(operand, scope)?, eval(index, scope)?) {
            (Val::Json(Json::Array(items)), Val::Int(i)) => Val::of(usize::try_from(i).ok().and_then(|i| items.get(i)).ok_or(Stop::Astray)?),
            (Val::List(mut items), Val::Int(i)) => match usize::try_from(i) {
                Ok(i) if i < items.len() => items.swap_remove(i),
                _ => return Err(Stop::Astray),
            },
            (Val::Json(Json::Object(m)), Val::Str(key)) => Val::of(m.get(key.as_ref()).ok_or(Stop::Astray)?),
            _ => return Err(Stop::Astray),
        },
        Node::List(items) => Val::List(items.iter().map(|x| eval(x, scope)).collect::<Result<_>>()?),
        Node::Not(x) => Val::Bool(!eval(x, scope)?.as_bool()?),
        Node::NotStrictlyFalse(x) => Val::Bool(eval(x, scope)?.as_bool()?),
        Node::Negate(x) => match eval(x, scope)? {
            Val::Int(i) => Val::Int(i.checked_neg().ok_or(Stop::Astray)?),
            Val::Double(d) => Val::Double(-d),
            _ => return Err(Stop::Astray),
        },
        // As the interpreter: the left first, the right only when the left does not decide.
        Node::And(a, b) => Val::Bool(eval(a, scope)?.as_bool()? && eval(b, scope)?.as_bool()?),
        Node::Or(a, b) => Val::Bool(eval(a, scope)?.as_bool()? || eval(b, scope)?.as_bool()?),
        Node::Conditional(branches) => {
            let [condition, then, otherwise] = &**branches;
            match eval(condition, scope)?.as_bool()? {
                true => eval(then, scope)?,
                false => eval(otherwise, scope)?,
            }
        }
        Node::Compare(c, a, b) => {
            let (a, b) = (eval(a, scope)?, eval(b, scope)?);
            scope.charge(traversal(Val::smaller_size(&a, &b)))?;
            Val::Bool(compare(*c, &a, &b)?)
        }
        Node::Add(a, b) => match (eval(a, scope)?, eval(b, scope)?) {
            (Val::Int(x), Val::Int(y)) => {
                scope.charge(1)?;
                Val::Int(x.checked_add(y).ok_or(Stop::Astray)?)
            }
            (Val::Str(x), Val::Str(y)) => {
                scope.charge(traversal(x.chars().count() + y.chars().count()))?;
                Val::Str(Cow::Owned(x.into_owned() + &y))
            }
            _ => return Err(Stop::Astray),
        },
        Node::Subtract(a, b) => match (eval(a, scope)?, eval(b, scope)?) {
            (Val::Int(x), Val::Int(y)) => Val::Int(x.checked_sub(y).ok_or(Stop::Astray)?),
            _ => return Err(Stop::Astray),
        },
        Node::Size(x) => {
            let n = match eval(x, scope)? {
                Val::Str(s) => s.chars().count(),
                Val::Json(Json::Array(items)) => items.len(),
                Val::Json(Json::Object(m)) => m.len(),
                Val::List(items) => items.len(),
                _ => return Err(Stop::Astray),
            };
            Val::Int(i64::try_from(n).map_err(|_| Stop::Astray)?)
        }
        Node::Text(test, target, arg) => match (eval(target, scope)?, eval(arg, scope)?) {
            (Val::Str(s), Val::Str(x)) => {
                let read = traversal(x.chars().count());
                scope.charge(match test {
                    Text::Contains if read > 0 => traversal(s.chars().count()).saturating_mul(read),
                    Text::Contains | Text::StartsWith | Text::EndsWith => read,
                })?;
                Val::Bool(match test {
                    Text::StartsWith => s.starts_with(x.as_ref()),
                    Text::EndsWith => s.ends_with(x.as_ref()),
                    Text::Contains => s.contains(x.as_ref()),
                })
            }
            _ => return Err(Stop::Astray),
        },
        Node::In(x, container) => {
            let x = eval(x, scope)?;
            let container = eval(container, scope)?;
            scope.charge(match &container {
                Val::Json(Json::Array(items)) => 1 + items.len() as u64,
                Val::List(items) => 1 + items.len() as u64,
                _ => 1,
            })?;
            match container {
                Val::Json(Json::Object(m)) => match &x {
                    Val::Str(key) => Val::Bool(m.contains_key(key.as_ref())),
                    _ => return Err(Stop::Astray),
                },
                Val::Json(Json::Array(items)) => Val::Bool(any_equal(&x, items.iter().map(Val::of))?),
                Val::List(items) => Val::Bool(any_equal(&x, items.into_iter())?),
                _ => return Err(Stop::Astray),
            }
        }
        Node::Loop(l) => run_loop(l, scope)?,
    })
}

/// A comprehension over a list's items or an object's keys, read one at a time (an inner
/// loop that stops early reads no more of its range than it ran).
fn run_loop<'a, 'v: 'a>(l: &'a Loop, scope: &mut Scope<'_, 'a, 'v>) -> Result<Val<'a>> {
    let items = match eval(&l.range, scope)? {
        Val::Json(Json::Array(items)) => Items::Json(items.iter()),
        Val::Json(Json::Object(m)) => Items::Keys(m.keys()),
        Val::List(items) => Items::Owned(items.into_iter()),
        _ => return Err(Stop::Astray),
    };
    let init = eval(&l.init, scope)?;
    let depth = scope.loops.len();
    scope.loops.push((&l.accumulator, init));
    let mut result = Ok(());
    for item in items {
        scope.loops.truncate(depth + 1);
        match eval(&l.condition, scope).and_then(|c| c.as_bool()) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                result = Err(e);
                break;
            }
        }
        scope.loops.push((&l.var, item));
        match eval(&l.step, scope) {
            Ok(next) => scope.loops[depth].1 = next,
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    scope.loops.truncate(depth + 1);
    let out = result.and_then(|()| eval(&l.result, scope));
    scope.loops.truncate(depth);
    out
}

/// What a comprehension ranges over.
enum Items<'a> {
    Json(std::slice::Iter<'a, Json>),
    Keys(serde_json::map::Keys<'a>),
    Owned(std::vec::IntoIter<Val<'a>>),
}

impl<'a> Iterator for Items<'a> {
    type Item = Val<'a>;

    fn next(&mut self) -> Option<Val<'a>> {
        match self {
            Items::Json(items) => items.next().map(Val::of),
            Items::Keys(keys) => keys.next().map(|k| Val::Str(Cow::Borrowed(k.as_str()))),
            Items::Owned(items) => items.next(),
        }
    }
}

/// Whether `x` equals one of `items`.
fn any_equal<'a>(x: &Val<'a>, mut items: impl Iterator<Item = Val<'a>>) -> Result<bool> {
    items.try_fold(false, |found, item| Ok(found || compare(Comparison::Equal, x, &item)?))
}

/// Two scalars of the same type compared (strings by their bytes, as the interpreter
/// compares them); any other pair is left to the interpreter.
fn compare(c: Comparison, a: &Val<'_>, b: &Val<'_>) -> Result<bool> {
    use std::cmp::Ordering;
    let order: Ordering = match (a, b) {
        (Val::Null, Val::Null) => match c {
            Comparison::Equal => return Ok(true),
            Comparison::NotEqual => return Ok(false),
            _ => return Err(Stop::Astray),
        },
        (Val::Bool(x), Val::Bool(y)) => x.cmp(y),
        (Val::Int(x), Val::Int(y)) => x.cmp(y),
        (Val::Str(x), Val::Str(y)) => x.as_ref().cmp(y.as_ref()),
        (Val::Double(x), Val::Double(y)) => x.partial_cmp(y).ok_or(Stop::Astray)?,
        _ => return Err(Stop::Astray),
    };
    Ok(match c {
        Comparison::Equal => order.is_eq(),
        Comparison::NotEqual => order.is_ne(),
        Comparison::Less => order.is_lt(),
        Comparison::LessOrEqual => order.is_le(),
        Comparison::Greater => order.is_gt(),
        Comparison::GreaterOrEqual => order.is_ge(),
    })
}

impl<'a> Val<'a> {
    /// JSON as [`super::to_value`] converts it.
    fn of(json: &'a Json) -> Val<'a> {
        match json {
            Json::Null => Val::Null,
            Json::Bool(b) => Val::Bool(*b),
            Json::Number(n) => n.as_i64().map_or_else(|| Val::Double(n.as_f64().unwrap_or_default()), Val::Int),
            Json::String(s) => Val::Str(Cow::Borrowed(s)),
            Json::Array(_) | Json::Object(_) => Val::Json(json),
        }
    }

    /// The smaller of what the estimate takes as two values' sizes (a string's characters, a
    /// list's items; 0 for any other value), worked out in time proportional to it: no string
    /// has more characters than bytes, so neither is counted past the other's bytes.
    fn smaller_size(a: &Val<'_>, b: &Val<'_>) -> usize {
        let bound = [a, b].map(|v| match v {
            Val::Str(s) => s.len(),
            Val::Json(Json::Array(items)) => items.len(),
            Val::List(items) => items.len(),
            _ => 0,
        });
        let most = bound[0].min(bound[1]);
        let size = |v: &Val<'_>, bound: usize| match v {
            Val::Str(s) => s.chars().take(most).count(),
            _ => bound,
        };
        size(a, bound[0]).min(size(b, bound[1]))
    }

    fn as_bool(&self) -> Result<bool> {
        match self {
            Val::Bool(b) => Ok(*b),
            _ => Err(Stop::Astray),
        }
    }

    fn into_value(self) -> super::Value {
        use std::sync::Arc;
        match self {
            Val::Null => super::Value::Null,
            Val::Bool(b) => super::Value::Bool(b),
            Val::Int(i) => super::Value::Int(i),
            Val::Double(d) => super::Value::Float(d),
            Val::Str(s) => super::Value::String(Arc::new(s.into_owned())),
            Val::Json(json) => super::to_value(json),
            Val::List(items) => super::Value::List(Arc::new(items.into_iter().map(Val::into_value).collect())),
        }
    }
}

#[cfg(test)]
mod tests;
