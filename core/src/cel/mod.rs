//! CEL as kube-apiserver offers it to its expressions (k8s.io/apiserver/pkg/cel): one
//! environment (cel-rust's standard library with optional values, its strings extension, and
//! kube's list, regex, set, quantity, IP, CIDR, URL, format and authorization libraries), built once and shared by every
//! expression: CRD validation rules now, admission policies later.
//!
//! An [`Expression`] is compiled once (when its CRD is read) and evaluated against variables
//! given as CEL values. Its worst-case cost is estimated before it is accepted ([`cost`]):
//! what kube's static cost check refuses is refused, so every accepted expression runs in
//! bounded time on an object no bigger than a request body.

pub mod authz;
mod check;
pub mod cost;
mod direct;
mod formats;
pub mod json;
mod library;
mod limits;
pub mod mutation;
mod names;
mod network;
mod quantity;
mod signatures;
mod types;

use std::sync::{Arc, LazyLock};

pub use cel::Value;
pub use cel::objects::{Key, OptionalValue};
pub use check::{Checked, check};
pub use names::escape;
pub use types::Type;

/// cel-go's limit of an expression's length, in code points.
const MAX_CODE_POINTS: usize = 100_000;

/// How deep an expression's operators may nest (cel-go allows 250; kapi's parser recurses
/// with more stack per level).
pub const MAX_NESTING: usize = 100;

/// The environment every expression is compiled and run in (but a mutation's, see
/// [`Expression::compile_mutation`]).
static ENVIRONMENT: LazyLock<Arc<cel::Env>> = LazyLock::new(|| Arc::new(environment()));

/// cel-rust's standard library with kube's libraries.
fn environment() -> cel::Env {
    let mut env = cel::Env::stdlib();
    cel::extensions::strings(&mut env).expect("the strings extension declares new overloads");
    library::extension(&mut env).expect("kube's list, regex and set libraries declare new overloads");
    quantity::extension(&mut env).expect("kube's quantity library declares new overloads");
    network::extension(&mut env).expect("kube's IP, CIDR and URL libraries declare new overloads");
    formats::extension(&mut env).expect("kube's format library declares new overloads");
    authz::extension(&mut env).expect("kube's authorization library declares new overloads");
    env
}

/// A compiled expression.
pub struct Expression {
    source: String,
    program: cel::Program,
    /// A mutation's own environment: the shared one with the types its struct literals build
    /// and `jsonpatch.escapeKey` ([`mutation`]).
    mutation: Option<Arc<cel::Env>>,
    /// The expression lowered for [`direct`] evaluation, when it can be.
    direct: Option<direct::Node>,
}

impl std::fmt::Debug for Expression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Expression").field("source", &self.source).field("mutation", &self.mutation.is_some()).finish()
    }
}

impl PartialEq for Expression {
    fn eq(&self, other: &Expression) -> bool {
        self.source == other.source
    }
}

impl Expression {
    /// Compiles `source`; the error is the parser's report. An expression longer than cel-go's
    /// limit (100,000 code points), or whose operators nest deeper than [`MAX_NESTING`], is
    /// refused before it is parsed: the parser, and whatever walks the tree it makes, recurse
    /// once per level.
    pub fn compile(source: &str) -> Result<Expression, String> {
        let size = source.chars().count();
        if size > MAX_CODE_POINTS {
            return Err(format!("ERROR: <input>:-1:0: expression code point size exceeds limit: size: {size}, limit {MAX_CODE_POINTS}"));
        }
        let nesting = limits::nesting(source);
        if nesting > MAX_NESTING {
            return Err(format!("ERROR: <input>:-1:0: expression recursion limit exceeded: {MAX_NESTING}"));
        }
        let program = ENVIRONMENT.compile(source).map_err(|e| e.to_string())?;
        let direct = direct::Node::lower(program.expression());
        Ok(Expression { source: source.to_string(), program, mutation: None, direct })
    }

    /// Compiles `source` as a mutation of a MutatingAdmissionPolicy: it may build the objects
    /// of an ApplyConfiguration and the operations of a JSON patch, and escape a JSON pointer's
    /// keys.
    pub fn compile_mutation(source: &str) -> Result<Expression, String> {
        let mut e = Expression::compile(source)?;
        let mut names = std::collections::BTreeSet::new();
        mutation::struct_names(e.root(), &mut names);
        let mut env = environment();
        mutation::extend(&mut env, &names).map_err(|e| e.to_string())?;
        e.mutation = Some(Arc::new(env));
        Ok(e)
    }

    /// Whether the expression is a mutation's ([`Expression::compile_mutation`]).
    pub fn is_mutation(&self) -> bool {
        self.mutation.is_some()
    }

    fn context<'p, 'v>(&self) -> cel::Context<'p, 'v> {
        cel::Context::with_env(Arc::clone(self.mutation.as_ref().unwrap_or(&ENVIRONMENT)))
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the expression names the variable `name`.
    pub fn uses(&self, name: &str) -> bool {
        self.program.references().has_variable(name)
    }

    /// Evaluates the expression with `variables` bound.
    pub fn evaluate(&self, variables: Vec<(&str, Value)>) -> Result<Value, String> {
        let mut context = self.context();
        for (name, value) in variables {
            context.add_variable_from_value(name, value);
        }
        self.program.execute(&context).map_err(|e| go_style(&e.to_string()))
    }

    /// Evaluates the expression with the variables of `layers` bound (a name bound in more
    /// than one is the first's) [`direct`]ly on their JSON, counting its cost as it runs and
    /// stopping once it passes `limit`: its value and cost, or `Err` when it passed the limit.
    /// `None`: the expression is not one to evaluate so, or it went astray; it is the
    /// interpreter's ([`Expression::evaluate_in`]), and its cost the estimate's.
    pub fn evaluate_directly(&self, layers: &[&Bindings<'_>], limit: u64) -> Option<Result<(Value, u64), ()>> {
        match direct::evaluate(self.direct.as_ref()?, layers, limit) {
            Ok(counted) => Some(Ok(counted)),
            Err(direct::Stop::Spent) => Some(Err(())),
            Err(direct::Stop::Astray) => None,
        }
    }

    /// Evaluates the expression with the variables of `layers` bound: a name bound in more
    /// than one is the first's.
    pub fn evaluate_in(&self, layers: &[&Bindings<'_>]) -> Result<Value, String> {
        let resolver = Layered(layers);
        let mut context = self.context();
        context.set_variable_resolver(&resolver);
        self.program.execute(&context).map_err(|e| go_style(&e.to_string()))
    }

    /// Whether the expression selects `field` of the variable `variable` anywhere
    /// (`claims.email`, `claims.?email`, `has(claims.email)`; not `claims["email"]`), as
    /// kube's syntactic checks look for it.
    pub fn selects(&self, variable: &str, field: &str) -> bool {
        use cel::common::ast::{EntryExpr, Expr, LiteralValue, operators};
        fn is_variable(e: &cel::IdedExpr, variable: &str) -> bool {
            matches!(&e.expr, Expr::Ident(name) if name == variable)
        }
        fn any(e: &cel::IdedExpr, variable: &str, field: &str) -> bool {
            let entries = |entries: &[cel::common::ast::IdedEntryExpr]| {
                entries.iter().any(|entry| match &entry.expr {
                    EntryExpr::MapEntry(m) => any(&m.key, variable, field) || any(&m.value, variable, field),
                    EntryExpr::StructField(f) => any(&f.value, variable, field),
                })
            };
            match &e.expr {
                Expr::Select(s) => (s.field == field && is_variable(&s.operand, variable)) || any(&s.operand, variable, field),
                Expr::Call(c) if c.func_name == operators::OPT_SELECT => {
                    let named = matches!(c.args.get(1).map(|a| &a.expr), Some(Expr::Literal(LiteralValue::String(f))) if f.inner() == field);
                    (named && c.args.first().is_some_and(|a| is_variable(a, variable))) || c.args.iter().any(|a| any(a, variable, field))
                }
                Expr::Call(c) => c.target.iter().any(|t| any(t, variable, field)) || c.args.iter().any(|a| any(a, variable, field)),
                Expr::List(l) => l.elements.iter().any(|x| any(x, variable, field)),
                Expr::Map(m) => entries(&m.entries),
                Expr::Struct(s) => entries(&s.entries),
                Expr::Comprehension(c) => [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result].into_iter().any(|x| any(x, variable, field)),
                _ => false,
            }
        }
        any(self.root(), variable, field)
    }

    /// Whether the whole expression reads a value out of its variables (a name, a field, an
    /// index: `claims.admin`, `claims['a']`), whose type is that of the data.
    pub fn is_access(&self) -> bool {
        use cel::common::ast::{Expr, operators};
        match &self.root().expr {
            Expr::Ident(_) => true,
            Expr::Select(s) => !s.test,
            Expr::Call(c) => [operators::INDEX, operators::OPT_SELECT, operators::OPT_INDEX].contains(&c.func_name.as_str()),
            _ => false,
        }
    }

    pub(crate) fn root(&self) -> &cel::IdedExpr {
        self.program.expression()
    }

    /// Where the node `id` starts in the source, in bytes (at a character's start).
    fn offset_of(&self, id: u64) -> Option<usize> {
        let start = (self.program.source_info().offset_for(id)?.0 as usize).min(self.source.len());
        (0..=start).rev().find(|i| self.source.is_char_boundary(*i))
    }
}

/// Values bound to names, made once into what evaluations read, so that many evaluations
/// share them (the object of a write, read by every admission policy's expressions). `'v`:
/// the JSON they borrow ([`Bindings::bind_json`]).
#[derive(Debug, Default)]
pub struct Bindings<'v> {
    values: Vec<(&'static str, Bound<'v>)>,
}

/// A value bound: what it was given as, and what the interpreter reads of it, made when it
/// first does (an expression evaluated [`direct`]ly reads the JSON).
#[derive(Debug)]
struct Bound<'v> {
    given: Given<'v>,
    interpreted: std::sync::OnceLock<Box<dyn cel::common::value::Val + 'v>>,
}

#[derive(Debug)]
enum Given<'v> {
    Json(&'v serde_json::Value),
    Value(Value),
}

impl<'v> Bound<'v> {
    fn interpreted(&self) -> &(dyn cel::common::value::Val + 'v) {
        self.interpreted
            .get_or_init(|| match &self.given {
                Given::Json(json) => json::val(json),
                Given::Value(value) => interpreted(value),
            })
            .as_ref()
    }
}

impl<'v> Bindings<'v> {
    pub fn new(values: impl IntoIterator<Item = (&'static str, Value)>) -> Bindings<'v> {
        let mut b = Bindings::default();
        for (name, value) in values {
            b.bind(name, value);
        }
        b
    }

    /// Binds `name` to `value` (in place of what it was bound to).
    pub fn bind(&mut self, name: &'static str, value: Value) {
        self.put(name, Given::Value(value));
    }

    /// Binds `name` to `json` as [`to_value`] would convert it, read in place ([`json::val`]).
    pub fn bind_json(&mut self, name: &'static str, json: &'v serde_json::Value) {
        self.put(name, Given::Json(json));
    }

    fn put(&mut self, name: &'static str, given: Given<'v>) {
        let bound = Bound { given, interpreted: std::sync::OnceLock::new() };
        match self.values.iter_mut().find(|(n, _)| *n == name) {
            Some((_, b)) => *b = bound,
            None => self.values.push((name, bound)),
        }
    }

    fn get(&self, name: &str) -> Option<&Bound<'v>> {
        self.values.iter().find(|(n, _)| *n == name).map(|(_, b)| b)
    }

    /// Whether `name` is bound here (`None`: it is not), and to what JSON (`Some(None)`: to a
    /// value not made of JSON; `null` is).
    fn json_of(&self, name: &str) -> Option<Option<&'v serde_json::Value>> {
        static NULL: serde_json::Value = serde_json::Value::Null;
        self.get(name).map(|b| match &b.given {
            Given::Json(json) => Some(*json),
            Given::Value(Value::Null) => Some(&NULL),
            Given::Value(_) => None,
        })
    }
}

/// `value` in the interpreter's form, made from it by reference (cel-rust's own conversion
/// copies each map whole before it converts its members).
fn interpreted(value: &Value) -> Box<dyn cel::common::value::Val> {
    use cel::common::types::{CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt};
    match value {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Int(i) => Box::new(CelInt::from(*i)),
        Value::UInt(u) => Box::new(CelUInt::from(*u)),
        Value::Float(f) => Box::new(CelDouble::from(*f)),
        Value::String(s) => Box::new(CelString::from(s.as_str().to_string())),
        Value::List(items) => Box::new(CelList::from(items.iter().map(interpreted).collect::<Vec<_>>())),
        Value::Map(m) => {
            Box::new(CelMap::from(m.map.iter().map(|(k, v)| (CelMapKey::from(k.clone()), interpreted(v))).collect::<std::collections::HashMap<_, _>>()))
        }
        other => other.clone().try_into().expect("every value converts"),
    }
}

/// Bindings looked up in order.
struct Layered<'a, 'v>(&'a [&'a Bindings<'v>]);

impl cel::context::VariableResolver for Layered<'_, '_> {
    fn resolve<'b>(&'b self, name: &str) -> Option<cel::common::value::CowVal<'b, 'b>> {
        self.0.iter().find_map(|b| b.get(name)).map(|b| cel::common::value::CowVal::Borrowed(b.interpreted()))
    }
}

/// A JSON tree as a CEL value, as kube hands decoded JSON to CEL without a schema: integers
/// as `int` (beyond an int64, `double`), other numbers as `double`, objects as maps.
pub fn to_value(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => n.as_i64().map_or_else(|| Value::Float(n.as_f64().unwrap_or_default()), Value::Int),
        serde_json::Value::String(s) => Value::String(Arc::new(s.clone())),
        serde_json::Value::Array(items) => Value::List(Arc::new(items.iter().map(to_value).collect())),
        serde_json::Value::Object(m) => {
            Value::Map(m.iter().map(|(k, x)| (Key::from(k.as_str()), to_value(x))).collect::<std::collections::HashMap<_, _>>().into())
        }
    }
}

/// The name cel-go gives the type of `v` (`int`, `map`, `null_type`, `kubernetes.Quantity`).
pub fn type_name(v: &Value) -> String {
    match v {
        Value::List(_) => "list".into(),
        Value::Map(_) => "map".into(),
        Value::Function(..) => "function".into(),
        Value::Int(_) => "int".into(),
        Value::UInt(_) => "uint".into(),
        Value::Float(_) => "double".into(),
        Value::String(_) => "string".into(),
        Value::Bytes(_) => "bytes".into(),
        Value::Bool(_) => "bool".into(),
        Value::Duration(_) => "google.protobuf.Duration".into(),
        Value::Timestamp(_) => "google.protobuf.Timestamp".into(),
        Value::Opaque(o) => o.runtime_type_name().to_string(),
        Value::Struct(_) => v.type_of().to_string(),
        Value::Null => "null_type".into(),
    }
}

/// An error as cel-go words it: lowercase (`no such key: x`); a function's error is its own
/// words.
fn go_style(message: &str) -> String {
    if let Some(own) = message.strip_prefix("Error executing function '").and_then(|rest| rest.split_once("': ")).map(|(_, own)| own) {
        return own.to_string();
    }
    let mut chars = message.chars();
    chars.next().map(|c| c.to_lowercase().chain(chars).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests;
