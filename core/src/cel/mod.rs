//! CEL as kube-apiserver offers it to its expressions (k8s.io/apiserver/pkg/cel): one
//! environment (cel-rust's standard library with optional values, its strings extension, and
//! kube's list, regex, set, quantity, IP, CIDR, URL and format libraries), built once and shared by every
//! expression: CRD validation rules now, admission policies later.
//!
//! An [`Expression`] is compiled once (when its CRD is read) and evaluated against variables
//! given as CEL values. Its worst-case cost is estimated before it is accepted ([`cost`]):
//! what kube's static cost check refuses is refused, so every accepted expression runs in
//! bounded time on an object no bigger than a request body.

mod check;
pub mod cost;
mod formats;
mod library;
mod limits;
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

/// The environment every expression is compiled and run in.
static ENVIRONMENT: LazyLock<Arc<cel::Env>> = LazyLock::new(|| {
    let mut env = cel::Env::stdlib();
    cel::extensions::strings(&mut env).expect("the strings extension declares new overloads");
    library::extension(&mut env).expect("kube's list, regex and set libraries declare new overloads");
    quantity::extension(&mut env).expect("kube's quantity library declares new overloads");
    network::extension(&mut env).expect("kube's IP, CIDR and URL libraries declare new overloads");
    formats::extension(&mut env).expect("kube's format library declares new overloads");
    Arc::new(env)
});

/// A compiled expression.
#[derive(Debug)]
pub struct Expression {
    source: String,
    program: cel::Program,
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
        Ok(Expression { source: source.to_string(), program })
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
        let mut context = cel::Context::with_env(Arc::clone(&ENVIRONMENT));
        for (name, value) in variables {
            context.add_variable_from_value(name, value);
        }
        self.program.execute(&context).map_err(|e| go_style(&e.to_string()))
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

/// An error as cel-go words it: lowercase (`no such key: x`).
fn go_style(message: &str) -> String {
    let mut chars = message.chars();
    chars.next().map(|c| c.to_lowercase().chain(chars).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests;
