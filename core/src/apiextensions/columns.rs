//! A CRD version's `additionalPrinterColumns` as table columns and cells, as kube's
//! `tableconvertor` makes them: each cell is the first value its JSONPath finds, as the column's
//! type says (`integer`, `number`, `boolean`, `date` as an age, `string` as Go prints it).

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::table;

/// One printer column.
#[derive(Clone, Debug, PartialEq)]
pub struct PrinterColumn {
    pub name: String,
    pub ty: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub path: Vec<Step>,
}

/// A step of a JSONPath: the subset printer columns use.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    Field(String),
    Index(usize),
    All,
    /// `[?(@.a.b=="v")]` (`equal`) or `[?(@.a.b!="v")]`.
    Filter {
        path: Vec<String>,
        value: String,
        equal: bool,
    },
}

impl PrinterColumn {
    /// Reads one entry of `additionalPrinterColumns`; `None` when its path is not understood.
    pub fn read(v: &Value) -> Option<PrinterColumn> {
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let json_path = text("jsonPath");
        let description = match text("description") {
            d if d.is_empty() => format!("Custom resource definition column (in JSONPath format): {json_path}"),
            d => d,
        };
        Some(PrinterColumn {
            name: text("name"),
            ty: text("type"),
            format: text("format"),
            description,
            priority: v.get("priority").and_then(Value::as_i64).unwrap_or(0),
            path: parse(&json_path)?,
        })
    }

    pub fn definition(&self) -> Value {
        json!({"name": self.name, "type": self.ty, "format": self.format, "description": self.description, "priority": self.priority})
    }

    /// The column's cell for `obj`: `null` when the path finds nothing or a value of another
    /// type.
    pub fn cell(&self, obj: &Value, now: Timestamp) -> Value {
        let Some(v) = find(obj, &self.path) else { return Value::Null };
        match self.ty.as_str() {
            "string" => Value::String(match v {
                Value::String(s) => s.clone(),
                other => crate::registry::go_format(other),
            }),
            "integer" => v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)).map_or(Value::Null, Value::from),
            "number" => v.as_f64().map_or(Value::Null, Value::from),
            "boolean" => v.as_bool().map_or(Value::Null, Value::from),
            "date" => match v.as_str() {
                Some(s) => match s.parse::<Timestamp>() {
                    Ok(t) => Value::from(table::human_duration(now.duration_since(t).as_secs())),
                    Err(_) => Value::from("<invalid>"),
                },
                None => Value::Null,
            },
            _ => Value::Null,
        }
    }
}

/// Parses `.a.b[0].c`, `.a[*].b`, `.a[?(@.type=="Ready")].status`; `None` for anything else.
fn parse(path: &str) -> Option<Vec<Step>> {
    let mut rest = path.trim().trim_start_matches('{').trim_end_matches('}').strip_prefix('.')?;
    let mut steps = Vec::new();
    loop {
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        if end > 0 {
            steps.push(Step::Field(rest[..end].to_string()));
        }
        rest = &rest[end..];
        if let Some(r) = rest.strip_prefix('.') {
            if r.is_empty() || r.starts_with('.') {
                return None;
            }
            rest = r;
        } else if let Some(r) = rest.strip_prefix('[') {
            let close = r.find(']')?;
            let inside = &r[..close];
            steps.push(match inside {
                "*" => Step::All,
                _ if inside.starts_with("?(@.") && inside.ends_with(')') => {
                    let cond = &inside[4..inside.len() - 1];
                    let (lhs, rhs, equal) = match cond.split_once("==") {
                        Some((l, r)) => (l, r, true),
                        None => cond.split_once("!=").map(|(l, r)| (l, r, false))?,
                    };
                    let value = rhs.trim().trim_matches(['"', '\'']).to_string();
                    Step::Filter { path: lhs.trim().split('.').map(str::to_string).collect(), value, equal }
                }
                _ => Step::Index(inside.parse().ok()?),
            });
            rest = &r[close + 1..];
            if let Some(r) = rest.strip_prefix('.') {
                rest = r;
            }
        } else {
            return Some(steps);
        }
    }
}

/// The first value the path finds.
fn find<'a>(v: &'a Value, steps: &[Step]) -> Option<&'a Value> {
    let Some((step, rest)) = steps.split_first() else { return Some(v) };
    match step {
        Step::Field(f) => find(v.get(f)?, rest),
        Step::Index(i) => find(v.get(*i)?, rest),
        Step::All => v.as_array()?.iter().find_map(|x| find(x, rest)),
        Step::Filter { path, value, equal } => v.as_array()?.iter().filter(|x| matches_filter(x, path, value) == *equal).find_map(|x| find(x, rest)),
    }
}

fn matches_filter(item: &Value, path: &[String], value: &str) -> bool {
    let found = path.iter().try_fold(item, |v, k| v.get(k));
    match found {
        Some(Value::String(s)) => s == value,
        Some(other) => serde_json::to_string(other).is_ok_and(|text| text == value),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(path: &str, ty: &str) -> PrinterColumn {
        PrinterColumn::read(&json!({"name": "C", "type": ty, "jsonPath": path})).expect("a path understood")
    }

    #[test]
    fn cells_follow_the_path_and_the_type() {
        let now: Timestamp = "2024-01-01T01:00:00Z".parse().unwrap();
        let obj = json!({"spec": {"replicas": 3, "ratio": 1.5, "on": true, "tags": ["a", "b"]},
            "status": {"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]},
            "metadata": {"creationTimestamp": "2024-01-01T00:00:00Z"}});
        assert_eq!(column(".spec.replicas", "integer").cell(&obj, now), json!(3));
        assert_eq!(column(".spec.replicas", "string").cell(&obj, now), json!("3"));
        assert_eq!(column(".spec.ratio", "number").cell(&obj, now), json!(1.5));
        assert_eq!(column(".spec.on", "boolean").cell(&obj, now), json!(true));
        assert_eq!(column(".spec.tags", "string").cell(&obj, now), json!("[a b]"));
        assert_eq!(column(".spec.tags[1]", "string").cell(&obj, now), json!("b"));
        assert_eq!(column(".status.conditions[?(@.type==\"Ready\")].status", "string").cell(&obj, now), json!("True"));
        assert_eq!(column(".metadata.creationTimestamp", "date").cell(&obj, now), json!("60m"));
        assert_eq!(column(".spec.missing", "string").cell(&obj, now), Value::Null);
        assert_eq!(column(".spec.on", "integer").cell(&obj, now), Value::Null);
        assert_eq!(column(".spec.replicas", "integer").definition()["description"], "Custom resource definition column (in JSONPath format): .spec.replicas");
    }
}
