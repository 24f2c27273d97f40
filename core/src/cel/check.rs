//! The part of cel-go's type check kapi makes when an expression is accepted, reported as
//! cel-go reports it (`ERROR: <input>:1:5: undefined field 'foo'`, the line and a caret under
//! the node): every field selected from an object a schema describes is one of its fields;
//! every name is declared; a call of an operator or of a function kapi fully declares
//! matches one of its overloads; a comprehension ranges over a list or a map; and the type
//! of the result. What kapi cannot type is `dyn`, which passes every check, so nothing
//! kube accepts is refused.

use cel::common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue};

use super::signatures::result_of;
use super::types::Type;
use super::{Expression, mutation};

/// CEL's reserved words that kube (since v1.31) also takes as field names unescaped.
const KEYWORD_FIELDS: [&str; 17] =
    ["as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"];

/// The names of types, which are values of type `type`.
const TYPE_NAMES: [&str; 11] = ["bool", "int", "uint", "double", "string", "bytes", "list", "map", "null_type", "type", "dyn"];

/// Qualified names of types kapi's environment declares (`type(x) == net.IP`).
const QUALIFIED_TYPES: [&str; 6] = ["net.IP", "net.CIDR", "kubernetes.URL", "kubernetes.Quantity", "kubernetes.NamedFormat", "kubernetes.Semver"];

/// The dotted name `e` spells (`a.b.c`: selections down to a name) when it names a type.
fn qualified_type(e: &IdedExpr) -> Option<String> {
    let mut parts = Vec::new();
    let mut at = e;
    loop {
        match &at.expr {
            Expr::Select(s) if !s.test => {
                parts.push(s.field.clone());
                at = &s.operand;
            }
            Expr::Ident(name) => {
                parts.push(name.clone());
                break;
            }
            _ => return None,
        }
    }
    parts.reverse();
    let name = parts.join(".");
    (QUALIFIED_TYPES.contains(&name.as_str()) || name.starts_with("google.protobuf.")).then_some(name)
}

/// What the check found: its errors, one line each as cel-go writes them (empty when the
/// expression checks), and the type of its result.
pub struct Checked {
    pub errors: Vec<String>,
    pub output: Type,
}

/// The check of `expr` with `variables` of the given types.
pub fn check(expr: &Expression, variables: &[(&str, Type)]) -> Checked {
    let scopes = variables.iter().map(|(n, t)| (n.to_string(), t.clone())).collect();
    let mut checker = Checker { scopes, found: Vec::new(), mutation: expr.is_mutation() };
    let output = checker.infer(expr.root());
    Checked { errors: checker.found.into_iter().map(|(id, message)| report(expr, id, &message)).collect(), output }
}

/// cel-go's report of an error at the node `id`: its place, the source line and a caret.
fn report(expr: &Expression, id: u64, message: &str) -> String {
    let source = expr.source();
    let start = expr.offset_of(id).unwrap_or(0);
    let before = &source[..start];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = source[line_start..start].chars().count() + 1;
    let text = source[line_start..].lines().next().unwrap_or_default();
    format!("ERROR: <input>:{line}:{column}: {message}\n | {text}\n | {}^", ".".repeat(column - 1))
}

struct Checker {
    /// The names in scope, innermost last.
    scopes: Vec<(String, Type)>,
    /// The errors, by the node they are at.
    found: Vec<(u64, String)>,
    /// A mutation's expression: the object types, `JSONPatch` and `jsonpatch.escapeKey` are
    /// declared ([`super::mutation`]).
    mutation: bool,
}

impl Checker {
    fn lookup(&self, name: &str) -> Option<Type> {
        self.scopes.iter().rev().find(|(n, _)| n == name).map(|(_, t)| t.clone())
    }

    /// The type of `e`, recording the errors on the way.
    fn infer(&mut self, e: &IdedExpr) -> Type {
        match &e.expr {
            Expr::Literal(literal) => literal_type(literal),
            Expr::Ident(name) => match self.lookup(name) {
                Some(t) => t,
                None if TYPE_NAMES.contains(&name.as_str()) => Type::Type,
                None => {
                    self.found.push((e.id, format!("undeclared reference to '{name}' (in container '')")));
                    Type::Dyn
                }
            },
            Expr::Select(select) => {
                if qualified_type(e).is_some_and(|name| self.lookup(name.split('.').next().unwrap_or_default()).is_none()) {
                    return Type::Type;
                }
                let operand = self.infer(&select.operand);
                let field = self.select(e.id, &operand, &select.field);
                if select.test { Type::Bool } else { field }
            }
            Expr::Call(call) => self.call(e.id, call),
            Expr::Comprehension(c) => self.comprehension(c),
            Expr::List(list) => {
                let items: Vec<Type> = list.elements.iter().map(|x| self.infer(x)).collect();
                Type::list(common(items))
            }
            Expr::Map(m) => {
                let (mut keys, mut values) = (Vec::new(), Vec::new());
                for entry in &m.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        keys.push(self.infer(&entry.key));
                        values.push(self.infer(&entry.value));
                    }
                }
                Type::map(common(keys), common(values))
            }
            Expr::Struct(s) => self.create_struct(e.id, &s.type_name, &s.entries),
            Expr::Unspecified => Type::Dyn,
        }
    }

    /// The type of a struct literal of `name` at node `id`: a mutation's object types take
    /// any field, a `JSONPatch` its four; no other struct type is declared.
    fn create_struct(&mut self, id: u64, name: &str, entries: &[cel::common::ast::IdedEntryExpr]) -> Type {
        let declared = self.mutation && (mutation::is_object_type(name) || name == mutation::JSON_PATCH);
        if !declared {
            self.found.push((id, format!("undeclared reference to '{name}' (in container '')")));
        }
        for entry in entries {
            let EntryExpr::StructField(f) = &entry.expr else { continue };
            let given = self.infer(&f.value);
            if !declared || name != mutation::JSON_PATCH {
                continue;
            }
            match mutation::JSON_PATCH_FIELDS.iter().find(|(n, _)| *n == f.field) {
                None => self.found.push((entry.id, format!("undefined field '{}'", f.field))),
                Some((_, true)) if !matches!(given, Type::String | Type::Dyn) => {
                    self.found.push((entry.id, format!("expected type of field '{}' is 'string' but provided type is '{}'", f.field, given.name())))
                }
                Some(_) => {}
            }
        }
        if declared { Type::Struct(name.into()) } else { Type::Dyn }
    }

    /// The type of the field `field` of a value of type `operand`, selected at node `id`.
    fn select(&mut self, id: u64, operand: &Type, field: &str) -> Type {
        match operand {
            Type::Object(fields) => match fields.get(field) {
                Some(t) => t.clone(),
                None if KEYWORD_FIELDS.contains(&field) && fields.contains_key(&format!("__{field}__")) => fields[&format!("__{field}__")].clone(),
                None => {
                    self.found.push((id, format!("undefined field '{field}'")));
                    Type::Dyn
                }
            },
            Type::Map(_, value) => (**value).clone(),
            Type::Struct(name) if **name == *mutation::JSON_PATCH => match mutation::JSON_PATCH_FIELDS.iter().find(|(n, _)| *n == field) {
                Some((_, true)) => Type::String,
                Some((_, false)) => Type::Dyn,
                None => {
                    self.found.push((id, format!("undefined field '{field}'")));
                    Type::Dyn
                }
            },
            Type::Struct(_) => Type::Dyn,
            // cel-go selects through an optional and keeps the result optional.
            Type::Optional(inner) => Type::optional(self.select(id, inner, field)),
            Type::Dyn | Type::Null | Type::Opaque(_) | Type::Param(_) => Type::Dyn,
            other => {
                self.found.push((id, format!("type '{}' does not support field selection", other.name())));
                Type::Dyn
            }
        }
    }

    fn call(&mut self, id: u64, call: &CallExpr) -> Type {
        // A call on a name that is no variable is a namespace's function (`optional.of`,
        // `sets.contains`): kapi does not type those.
        if let Some(target) = &call.target
            && let Expr::Ident(name) = &target.expr
            && self.lookup(name).is_none()
        {
            for a in &call.args {
                self.infer(a);
            }
            if name == "jsonpatch" && call.func_name == "escapeKey" {
                if self.mutation {
                    return Type::String;
                }
                self.found.push((id, "undeclared reference to 'jsonpatch.escapeKey' (in container '')".to_string()));
            }
            return Type::Dyn;
        }
        // `x.?field` names the field as a string.
        if call.func_name == "_?._"
            && let [operand, field] = call.args.as_slice()
            && let Expr::Literal(LiteralValue::String(name)) = &field.expr
        {
            let operand = self.infer(operand);
            // Selecting through an optional is optional already.
            return match self.select(id, &operand, name.as_ref()) {
                optional @ Type::Optional(_) => optional,
                field => Type::optional(field),
            };
        }
        let mut args: Vec<Type> = call.target.iter().map(|t| self.infer(t)).collect();
        args.extend(call.args.iter().map(|a| self.infer(a)));
        let member = call.target.is_some();
        result_of(&call.func_name, member, &args).unwrap_or_else(|()| {
            let names: Vec<String> = args.iter().map(Type::name).collect();
            let signature = match names.split_first() {
                Some((receiver, rest)) if member => format!("{receiver}.({})", rest.join(", ")),
                _ => format!("({})", names.join(", ")),
            };
            self.found.push((id, format!("found no matching overload for '{}' applied to '{signature}'", call.func_name)));
            Type::Dyn
        })
    }

    fn comprehension(&mut self, c: &ComprehensionExpr) -> Type {
        let range = self.infer(&c.iter_range);
        let element = range.element().unwrap_or_else(|| {
            let message = format!("expression of type '{}' cannot be range of a comprehension (must be list, map, or dynamic)", range.name());
            self.found.push((c.iter_range.id, message));
            Type::Dyn
        });
        let init = self.infer(&c.accu_init);
        let depth = self.scopes.len();
        self.scopes.push((c.accu_var.clone(), init));
        match &c.iter_var2 {
            // Two variables: a list's index and item, a map's key and value.
            Some(second) => {
                let (first_type, second_type) = match &range {
                    Type::List(item) => (Type::Int, (**item).clone()),
                    Type::Map(key, value) => ((**key).clone(), (**value).clone()),
                    _ => (Type::Dyn, Type::Dyn),
                };
                self.scopes.push((c.iter_var.clone(), first_type));
                self.scopes.push((second.clone(), second_type));
            }
            None => self.scopes.push((c.iter_var.clone(), element)),
        }
        self.infer(&c.loop_cond);
        self.infer(&c.loop_step);
        self.scopes.truncate(depth + 1);
        let result = self.infer(&c.result);
        self.scopes.truncate(depth);
        result
    }
}

fn literal_type(literal: &LiteralValue) -> Type {
    match literal {
        LiteralValue::Boolean(_) => Type::Bool,
        LiteralValue::Bytes(_) => Type::Bytes,
        LiteralValue::Double(_) => Type::Double,
        LiteralValue::Int(_) => Type::Int,
        LiteralValue::Null => Type::Null,
        LiteralValue::String(_) => Type::String,
        LiteralValue::UInt(_) => Type::Uint,
    }
}

/// The type of a list's items or a map's keys or values: theirs if they agree, else `dyn`.
fn common(types: Vec<Type>) -> Type {
    let mut types = types.into_iter();
    let Some(first) = types.next() else { return Type::Dyn };
    if types.all(|t| t == first) { first } else { Type::Dyn }
}
