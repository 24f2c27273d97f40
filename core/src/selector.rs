//! Label and field selectors: the `labelSelector`/`fieldSelector` query syntax and
//! `metav1.LabelSelector` objects, with kube's parsing rules and error messages.

use serde_json::Value;

use crate::validation::{label_value, qualified_name};

#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    Equals(String),
    NotEquals(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    Gt(i64),
    Lt(i64),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Op,
}

impl Requirement {
    fn matches<'a>(&self, get: &impl Fn(&str) -> Option<&'a str>) -> bool {
        let v = get(&self.key);
        match &self.op {
            Op::Equals(x) => v == Some(x.as_str()),
            Op::NotEquals(x) => v != Some(x.as_str()),
            Op::In(set) => v.is_some_and(|v| set.iter().any(|x| x == v)),
            Op::NotIn(set) => v.is_none_or(|v| !set.iter().any(|x| x == v)),
            Op::Exists => v.is_some(),
            Op::DoesNotExist => v.is_none(),
            Op::Gt(n) => v.and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v > *n),
            Op::Lt(n) => v.and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v < *n),
        }
    }
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    reqs: Vec<Requirement>,
}

impl LabelSelector {
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// `labels.Parse`.
    pub fn parse(s: &str) -> Result<LabelSelector, String> {
        let mut p = Lexer { s: s.as_bytes(), i: 0 };
        let mut reqs = Vec::new();
        loop {
            p.skip_ws();
            if p.done() {
                break;
            }
            if !p.eat_peek(b'!') && !p.s.get(p.i).copied().is_some_and(Lexer::is_ident) {
                return Err(format!("found '{}', expected: !, identifier, or 'end of string'", p.peek_token()));
            }
            reqs.push(p.requirement().map_err(|e| format!("unable to parse requirement: {e}"))?);
            p.skip_ws();
            if p.done() {
                break;
            }
            if !p.eat(",") {
                return Err(format!("found '{}', expected: ',' or 'end of string'", p.peek_token()));
            }
        }
        Ok(LabelSelector { reqs })
    }

    /// A `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`).
    pub fn from_object(v: &Value) -> Result<LabelSelector, String> {
        let mut reqs = Vec::new();
        if let Some(m) = v.get("matchLabels").and_then(Value::as_object) {
            for (k, val) in m {
                reqs.push(Requirement { key: k.clone(), op: Op::Equals(val.as_str().unwrap_or_default().to_string()) });
            }
        }
        if let Some(exprs) = v.get("matchExpressions").and_then(Value::as_array) {
            for e in exprs {
                let key = e.get("key").and_then(Value::as_str).unwrap_or_default().to_string();
                let values: Vec<String> =
                    e.get("values").and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default();
                let op = match e.get("operator").and_then(Value::as_str).unwrap_or_default() {
                    "In" => Op::In(values),
                    "NotIn" => Op::NotIn(values),
                    "Exists" => Op::Exists,
                    "DoesNotExist" => Op::DoesNotExist,
                    other => return Err(format!("{other:?} is not a valid label selector operator")),
                };
                reqs.push(Requirement { key, op });
            }
        }
        Ok(LabelSelector { reqs })
    }

    /// The requirements as a SubjectAccessReview's `labelSelector.requirements` carries them
    /// (kube's webhook authorizer): by key, `=`, `==` and `in` as `In`, `!=` and `notin` as
    /// `NotIn` (values sorted, each once), `Exists` and `DoesNotExist` without values; `>` and
    /// `<` left out (requirements are AND'd: the review asks about more, never less).
    pub fn review_requirements(&self) -> Vec<Value> {
        let mut reqs: Vec<&Requirement> = self.reqs.iter().collect();
        reqs.sort_by(|a, b| a.key.cmp(&b.key));
        let set = |values: &[String]| values.iter().cloned().collect::<std::collections::BTreeSet<String>>().into_iter().collect::<Vec<_>>();
        reqs.into_iter()
            .filter_map(|r| {
                let (operator, values) = match &r.op {
                    Op::Equals(v) => ("In", vec![v.clone()]),
                    Op::In(values) => ("In", set(values)),
                    Op::NotEquals(v) => ("NotIn", vec![v.clone()]),
                    Op::NotIn(values) => ("NotIn", set(values)),
                    Op::Exists => ("Exists", Vec::new()),
                    Op::DoesNotExist => ("DoesNotExist", Vec::new()),
                    Op::Gt(_) | Op::Lt(_) => return None,
                };
                let mut requirement = serde_json::json!({"key": r.key, "operator": operator});
                if !values.is_empty() {
                    requirement["values"] = serde_json::json!(values);
                }
                Some(requirement)
            })
            .collect()
    }

    /// A review's `labelSelector.requirements` as kube's `labelSelectorAsSelector` reads them:
    /// each that is no valid requirement (an unknown operator, values where there may be none
    /// or none where there must be some, a key that is no qualified name, a value that is no
    /// label value) dropped; the rest kept in order. Also how many were dropped.
    pub fn from_review_requirements(requirements: &[Value]) -> (LabelSelector, usize) {
        let mut reqs = Vec::new();
        for r in requirements {
            let key = r.get("key").and_then(Value::as_str).unwrap_or_default().to_string();
            let values: Vec<String> = r.get("values").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect();
            let op = match (r.get("operator").and_then(Value::as_str).unwrap_or_default(), values.is_empty()) {
                ("In", false) => Op::In(values.clone()),
                ("NotIn", false) => Op::NotIn(values.clone()),
                ("Exists", true) => Op::Exists,
                ("DoesNotExist", true) => Op::DoesNotExist,
                _ => continue,
            };
            if qualified_name(&key).is_empty() && values.iter().all(|v| label_value(v).is_empty()) {
                reqs.push(Requirement { key, op });
            }
        }
        let dropped = requirements.len() - reqs.len();
        (LabelSelector { reqs }, dropped)
    }

    pub fn matches<K: AsRef<str>, V: AsRef<str>>(&self, labels: &[(K, V)]) -> bool {
        let get = |k: &str| labels.iter().find(|(lk, _)| lk.as_ref() == k).map(|(_, v)| v.as_ref());
        self.reqs.iter().all(|r| r.matches(&get))
    }
}

struct Lexer<'a> {
    s: &'a [u8],
    i: usize,
}

impl Lexer<'_> {
    fn done(&self) -> bool {
        self.i >= self.s.len()
    }

    fn skip_ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    /// Whether the next byte is `c` (not consumed).
    fn eat_peek(&self, c: u8) -> bool {
        self.s.get(self.i) == Some(&c)
    }

    fn eat(&mut self, t: &str) -> bool {
        if self.s[self.i..].starts_with(t.as_bytes()) {
            self.i += t.len();
            true
        } else {
            false
        }
    }

    fn is_ident(c: u8) -> bool {
        !(c.is_ascii_whitespace() || b",=!()<>".contains(&c))
    }

    fn ident(&mut self) -> String {
        let start = self.i;
        while self.i < self.s.len() && Self::is_ident(self.s[self.i]) {
            self.i += 1;
        }
        String::from_utf8_lossy(&self.s[start..self.i]).into_owned()
    }

    fn peek_token(&self) -> String {
        let rest = &self.s[self.i..];
        let end = rest.iter().position(|c| c.is_ascii_whitespace()).unwrap_or(rest.len());
        String::from_utf8_lossy(&rest[..end.max(1).min(rest.len())]).into_owned()
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let negated = self.eat("!");
        self.skip_ws();
        let key = self.ident();
        if key.is_empty() {
            return Err(format!("found '{}', expected: identifier", self.peek_token()));
        }
        if let Some(msg) = qualified_name(&key).into_iter().next() {
            return Err(format!("key: Invalid value: {}: {msg}", crate::status::quote(&key)));
        }
        if negated {
            return Ok(Requirement { key, op: Op::DoesNotExist });
        }
        self.skip_ws();
        if self.done() || self.s[self.i] == b',' {
            return Ok(Requirement { key, op: Op::Exists });
        }
        let op = if self.eat("==") || self.eat("=") {
            Op::Equals(self.value()?)
        } else if self.eat("!=") {
            Op::NotEquals(self.value()?)
        } else if self.eat(">") {
            Op::Gt(self.number()?)
        } else if self.eat("<") {
            Op::Lt(self.number()?)
        } else {
            let word = self.ident();
            match word.as_str() {
                "in" => Op::In(self.set()?),
                "notin" => Op::NotIn(self.set()?),
                _ => return Err(format!("found '{word}', expected: in, notin, =, ==, !=, gt, lt")),
            }
        };
        Ok(Requirement { key, op })
    }

    fn value(&mut self) -> Result<String, String> {
        self.skip_ws();
        let v = self.ident();
        if let Some(msg) = label_value(&v).into_iter().next() {
            return Err(format!("values[0][{}]: Invalid value: {}: {msg}", "value", crate::status::quote(&v)));
        }
        Ok(v)
    }

    fn number(&mut self) -> Result<i64, String> {
        self.skip_ws();
        let v = self.ident();
        v.parse().map_err(|_| format!("for 'Gt', 'Lt' operators, the value must be an integer, got {v:?}"))
    }

    fn set(&mut self) -> Result<Vec<String>, String> {
        self.skip_ws();
        if !self.eat("(") {
            return Err(format!("found '{}' expected: '('", self.peek_token()));
        }
        let mut values = Vec::new();
        loop {
            self.skip_ws();
            if self.eat(")") {
                break;
            }
            values.push(self.value()?);
            self.skip_ws();
            if self.eat(")") {
                break;
            }
            if !self.eat(",") {
                return Err(format!("found '{}', expected: ',', ')' or identifier", self.peek_token()));
            }
        }
        Ok(values)
    }
}

/// A parsed field selector: `a=b`, `a==b`, `a!=b` terms joined by commas.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<(String, bool, String)>,
}

impl FieldSelector {
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// `fields.ParseSelector`: terms split at unescaped commas (and sorted, so the first error
    /// is kube's), each split at the first `!=`, `==` or `=` (the field as written), the value
    /// unescaped (`\\`, `\,` and `\=` only; an unescaped `,` or `=` in it is an error).
    pub fn parse(s: &str) -> Result<FieldSelector, String> {
        let mut parts = split_unescaped(s, ',');
        parts.sort();
        let mut terms = Vec::new();
        for part in parts.iter().filter(|p| !p.is_empty()) {
            let split = part.char_indices().find_map(|(i, _)| ["!=", "==", "="].into_iter().find(|op| part[i..].starts_with(op)).map(|op| (i, op)));
            let Some((i, op)) = split else {
                return Err(format!("invalid selector: '{s}'; can't understand '{part}'"));
            };
            terms.push((part[..i].to_string(), op != "!=", unescape_value(&part[i + op.len()..])?));
        }
        Ok(FieldSelector { terms })
    }

    /// The terms: a field, whether it must equal (else differ from) the value, and the value.
    /// A review's `fieldSelector.requirements` as kube's `fieldSelectorAsSelector` reads them:
    /// `In` and `NotIn` with one value being `=` and `!=`, each other requirement dropped; the
    /// rest kept in order. Also how many were dropped.
    pub fn from_review_requirements(requirements: &[Value]) -> (FieldSelector, usize) {
        let mut terms = Vec::new();
        for r in requirements {
            let values: Vec<&str> = r.get("values").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
            let equal = match r.get("operator").and_then(Value::as_str) {
                Some("In") => true,
                Some("NotIn") => false,
                _ => continue,
            };
            if let [value] = values[..] {
                terms.push((r.get("key").and_then(Value::as_str).unwrap_or_default().to_string(), equal, value.to_string()));
            }
        }
        let dropped = requirements.len() - terms.len();
        (FieldSelector { terms }, dropped)
    }

    pub fn terms(&self) -> &[(String, bool, String)] {
        &self.terms
    }

    /// The fields named, to check them against what a kind supports.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().map(|(k, _, _)| k.as_str())
    }

    /// The value required by an `=` term on `field`, if any (e.g. `metadata.name` for GETs).
    pub fn required_value(&self, field: &str) -> Option<&str> {
        self.terms.iter().find(|(k, eq, _)| *eq && k == field).map(|(_, _, v)| v.as_str())
    }

    /// Whether an `=` term requires `field` to be `value` (as an authorizer reads a selector).
    pub fn requires(&self, field: &str, value: &str) -> bool {
        self.terms.iter().any(|(k, eq, v)| *eq && k == field && v == value)
    }

    pub fn matches<K: AsRef<str>>(&self, fields: &[(K, String)]) -> bool {
        self.terms.iter().all(|(k, eq, v)| {
            let actual = fields.iter().find(|(f, _)| f.as_ref() == k).map(|(_, x)| x.as_str()).unwrap_or("");
            (actual == v) == *eq
        })
    }
}

fn split_unescaped(s: &str, sep: char) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            out.last_mut().expect("never empty").push('\\');
            out.last_mut().expect("never empty").push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            out.push(String::new());
        } else {
            out.last_mut().expect("never empty").push(c);
        }
    }
    // A backslash at the very end stays, for the value's unescaping to refuse.
    if escaped {
        out.last_mut().expect("never empty").push('\\');
    }
    out
}

/// kube's `fields.UnescapeValue`.
fn unescape_value(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => out.push(e),
                Some(e) => return Err(format!("invalid field selector: invalid escape sequence: \\{e}")),
                None => return Err("invalid field selector: invalid escape sequence: \\".to_string()),
            },
            // Go's %v of a rune: its number.
            ',' | '=' => return Err(format!("invalid field selector: unescaped character in value: {}", c as u32)),
            c => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_selector_syntax() {
        let s = LabelSelector::parse("app=web, tier in (front,back),!legacy,env!=prod,release").unwrap();
        assert!(s.matches(&[("app", "web"), ("tier", "front"), ("release", "1")]));
        assert!(!s.matches(&[("app", "web"), ("tier", "front"), ("release", "1"), ("legacy", "")]));
        assert!(!s.matches(&[("app", "web"), ("tier", "mid"), ("release", "1")]));
        assert!(LabelSelector::parse("a b").is_err());
        assert!(LabelSelector::parse("x>3").unwrap().matches(&[("x", "4")]));
        assert!(LabelSelector::parse("").unwrap().matches::<&str, &str>(&[]));
    }

    #[test]
    fn field_selector_syntax() {
        let s = FieldSelector::parse("metadata.name=a\\,b,status.phase!=Running").unwrap();
        assert!(s.matches(&[("metadata.name", "a,b".into()), ("status.phase", "Pending".into())]));
        assert!(!s.matches(&[("metadata.name", "a,b".into()), ("status.phase", "Running".into())]));
        assert_eq!(s.required_value("metadata.name"), Some("a,b"));
        assert!(FieldSelector::parse("nonsense").is_err());
        // kube's splitTerm and UnescapeValue: the first operator splits, the field is as written.
        assert_eq!(FieldSelector::parse("a=b!=c").unwrap_err(), "invalid field selector: unescaped character in value: 61");
        assert_eq!(FieldSelector::parse("a=b\\x").unwrap_err(), "invalid field selector: invalid escape sequence: \\x");
        assert!(FieldSelector::parse("spec.nodeName =n1").unwrap().required_value("spec.nodeName").is_none());
        assert_eq!(FieldSelector::parse("metadata.name=foo\\").unwrap_err(), "invalid field selector: invalid escape sequence: \\");
        assert_eq!(FieldSelector::parse("a==x\\=y").unwrap().required_value("a"), Some("x=y"));
    }
}
