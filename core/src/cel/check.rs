//! The part of cel-go's type check kapi makes when an expression is accepted: every field an
//! expression selects from a value of known fields (an object a schema describes) must be one
//! of them, reported as cel-go reports it (`ERROR: <input>:1:5: undefined field 'foo'`, the
//! line and a caret under the selecting dot). Values of unknown type are not checked, so
//! nothing kube accepts is refused.

use cel::common::ast::{EntryExpr, Expr, IdedExpr};

use super::Expression;
use super::cost::Shape;

/// CEL's reserved words that kube (since v1.31) also takes as field names unescaped.
const KEYWORD_FIELDS: [&str; 17] =
    ["as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"];

/// The errors of `expr` with `variables` of the given shapes, one line each as cel-go writes
/// them; empty when it checks.
pub fn undefined_fields(expr: &Expression, variables: &[(&str, Shape)]) -> Vec<String> {
    let mut scopes: Vec<(String, Shape)> = variables.iter().map(|(n, s)| (n.to_string(), s.clone())).collect();
    let mut found = Vec::new();
    walk(expr.root(), &mut scopes, &mut found);
    found.into_iter().map(|(id, field)| report(expr, id, &field)).collect()
}

/// cel-go's report of an error at the node `id`: its place, the source line and a caret.
fn report(expr: &Expression, id: u64, field: &str) -> String {
    let source = expr.source();
    let start = expr.offset_of(id).unwrap_or(0);
    let before = &source[..start];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = source[line_start..start].chars().count() + 1;
    let text = source[line_start..].lines().next().unwrap_or_default();
    format!("ERROR: <input>:{line}:{column}: undefined field '{field}'\n | {text}\n | {}^", ".".repeat(column - 1))
}

/// The shape of `e`, recording undefined fields (node and name) on the way.
fn walk(e: &IdedExpr, scopes: &mut Vec<(String, Shape)>, found: &mut Vec<(u64, String)>) -> Shape {
    match &e.expr {
        Expr::Ident(name) => scopes.iter().rev().find(|(n, _)| n == name).map_or(Shape::Unknown, |(_, s)| s.clone()),
        Expr::Select(select) => {
            let operand = walk(&select.operand, scopes, found);
            match &operand {
                Shape::Object { fields } => match fields.get(&select.field) {
                    Some(s) => s.clone(),
                    None if KEYWORD_FIELDS.contains(&select.field.as_str()) && fields.contains_key(&format!("__{}__", select.field)) => {
                        fields[&format!("__{}__", select.field)].clone()
                    }
                    None => {
                        found.push((e.id, select.field.clone()));
                        Shape::Unknown
                    }
                },
                other => other.member(&select.field),
            }
        }
        Expr::Comprehension(c) => {
            let range = walk(&c.iter_range, scopes, found);
            let init = walk(&c.accu_init, scopes, found);
            let depth = scopes.len();
            scopes.push((c.accu_var.clone(), if matches!(init, Shape::List { .. }) { Shape::Unknown } else { init }));
            scopes.push((c.iter_var.clone(), range.element()));
            if let Some(second) = &c.iter_var2 {
                scopes.push((second.clone(), range.indexed()));
            }
            walk(&c.loop_cond, scopes, found);
            walk(&c.loop_step, scopes, found);
            scopes.truncate(depth + 1);
            walk(&c.result, scopes, found);
            scopes.truncate(depth);
            Shape::Unknown
        }
        Expr::Call(call) => {
            if let Some(t) = &call.target {
                walk(t, scopes, found);
            }
            for a in &call.args {
                walk(a, scopes, found);
            }
            Shape::Unknown
        }
        Expr::List(list) => {
            for x in &list.elements {
                walk(x, scopes, found);
            }
            Shape::Unknown
        }
        Expr::Map(m) => {
            entries(&m.entries, scopes, found);
            Shape::Unknown
        }
        Expr::Struct(s) => {
            entries(&s.entries, scopes, found);
            Shape::Unknown
        }
        Expr::Literal(_) | Expr::Unspecified => Shape::Unknown,
    }
}

fn entries(entries: &[cel::common::ast::IdedEntryExpr], scopes: &mut Vec<(String, Shape)>, found: &mut Vec<(u64, String)>) {
    for entry in entries {
        match &entry.expr {
            EntryExpr::MapEntry(m) => {
                walk(&m.key, scopes, found);
                walk(&m.value, scopes, found);
            }
            EntryExpr::StructField(f) => {
                walk(&f.value, scopes, found);
            }
        }
    }
}
