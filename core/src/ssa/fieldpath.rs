//! Field paths and sets of them, and their `FieldsV1` form (structured-merge-diff's `fieldpath`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use serde_json::{Map, Value};

/// One step into a value.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathElement {
    /// A struct field or map key (`f:name`).
    Field(String),
    /// A list item by its key fields, sorted by name (`k:{"name":"c"}`); values as JSON text.
    Key(Vec<(String, String)>),
    /// A set item by its value, as JSON text (`v:"a"`).
    Value(String),
    /// A list item by position (`i:0`), for lists without keys.
    Index(usize),
}

impl PathElement {
    pub fn key_of(fields: &[(String, Value)]) -> PathElement {
        let mut k: Vec<(String, String)> = fields.iter().map(|(n, v)| (n.clone(), v.to_string())).collect();
        k.sort();
        PathElement::Key(k)
    }

    /// The `FieldsV1` spelling.
    fn encode(&self) -> String {
        match self {
            PathElement::Field(f) => {
                let mut s = String::with_capacity(f.len() + 2);
                s.push_str("f:");
                s.push_str(f);
                s
            }
            PathElement::Key(k) => {
                let mut s = String::from("k:{");
                for (i, (n, v)) in k.iter().enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    let _ = write!(s, "{}:{v}", Value::String(n.clone()));
                }
                s.push('}');
                s
            }
            PathElement::Value(v) => format!("v:{v}"),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    fn decode(s: &str) -> Option<PathElement> {
        let (kind, rest) = s.split_at_checked(2)?;
        Some(match kind {
            "f:" => PathElement::Field(rest.to_string()),
            "v:" => {
                let v: Value = serde_json::from_str(rest).ok()?;
                PathElement::Value(v.to_string())
            }
            "i:" => PathElement::Index(rest.parse().ok()?),
            "k:" => {
                let m: Map<String, Value> = serde_json::from_str(rest).ok()?;
                let fields: Vec<(String, Value)> = m.into_iter().collect();
                PathElement::key_of(&fields)
            }
            _ => return None,
        })
    }
}

impl std::fmt::Display for PathElement {
    /// structured-merge-diff's `PathElement.String()`: `.spec`, `[name="c"]`, `[="a"]`, `[0]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathElement::Field(n) => write!(f, ".{n}"),
            PathElement::Key(k) => {
                let parts: Vec<String> = k.iter().map(|(n, v)| format!("{n}={v}")).collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={v}]"),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

pub type Path = Vec<PathElement>;

pub fn path_string(p: &[PathElement]) -> String {
    p.iter().map(ToString::to_string).collect()
}

/// A set of paths, as a trie: `members` end here, `children` go deeper.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Set {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, Set>,
}

impl Set {
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(Set::is_empty)
    }

    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                if !self.members.contains(last) {
                    self.members.insert(last.clone());
                }
            }
            // Most inserts go down existing branches: look up before cloning the element.
            [first, rest @ ..] => match self.children.get_mut(first) {
                Some(c) => c.insert(rest),
                None => self.children.entry(first.clone()).or_default().insert(rest),
            },
        }
    }

    /// Adds `pe` below the root: as a member if `member`, with the paths of `below` under it.
    pub fn add_child(&mut self, pe: PathElement, member: bool, below: Set) {
        let empty = below.is_empty();
        match (member, empty) {
            (true, true) => {
                self.members.insert(pe);
            }
            (true, false) => {
                self.members.insert(pe.clone());
                self.merge_child(pe, below);
            }
            (false, false) => self.merge_child(pe, below),
            (false, true) => {}
        }
    }

    fn merge_child(&mut self, pe: PathElement, below: Set) {
        match self.children.get_mut(&pe) {
            Some(c) => c.extend(&below),
            None => {
                self.children.insert(pe, below);
            }
        }
    }

    /// Adds `path` (if `member`) and the paths of `below` under it.
    pub fn graft(&mut self, path: &[PathElement], member: bool, below: Set) {
        match path {
            [] if self.is_empty() => *self = below,
            [] => self.extend(&below),
            [last] => self.add_child(last.clone(), member, below),
            [first, rest @ ..] => {
                if !member && below.is_empty() {
                    return;
                }
                match self.children.get_mut(first) {
                    Some(c) => c.graft(rest, member, below),
                    None => self.children.entry(first.clone()).or_default().graft(rest, member, below),
                }
            }
        }
    }

    pub fn contains(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.contains(rest)),
        }
    }

    /// Whether some path of the set starts with `prefix` (or is it).
    pub fn has_prefix(&self, prefix: &[PathElement]) -> bool {
        match prefix {
            [] => !self.is_empty(),
            [last] => self.members.contains(last) || self.children.get(last).is_some_and(|c| !c.is_empty()),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has_prefix(rest)),
        }
    }

    /// Adds every path of `other` (an in-place union).
    pub fn extend(&mut self, other: &Set) {
        for m in &other.members {
            if !self.members.contains(m) {
                self.members.insert(m.clone());
            }
        }
        for (k, c) in &other.children {
            match self.children.get_mut(k) {
                Some(mine) => mine.extend(c),
                None => {
                    self.children.insert(k.clone(), c.clone());
                }
            }
        }
    }

    pub fn difference(&self, other: &Set) -> Set {
        let mut out = Set { members: self.members.difference(&other.members).cloned().collect(), children: BTreeMap::new() };
        for (k, c) in &self.children {
            let d = match other.children.get(k) {
                Some(o) => c.difference(o),
                None => c.clone(),
            };
            if !d.is_empty() {
                out.children.insert(k.clone(), d);
            }
        }
        out
    }

    pub fn intersection(&self, other: &Set) -> Set {
        let mut out = Set { members: self.members.intersection(&other.members).cloned().collect(), children: BTreeMap::new() };
        for (k, c) in &self.children {
            if let Some(o) = other.children.get(k) {
                let i = c.intersection(o);
                if !i.is_empty() {
                    out.children.insert(k.clone(), i);
                }
            }
        }
        out
    }

    /// Every member path, in order.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        let mut keys: BTreeSet<&PathElement> = self.members.iter().collect();
        keys.extend(self.children.keys());
        for k in keys {
            prefix.push(k.clone());
            if self.members.contains(k) {
                out.push(prefix.clone());
            }
            if let Some(c) = self.children.get(k) {
                c.collect(prefix, out);
            }
            prefix.pop();
        }
    }

    /// Removes the subtree at `path` (and `path` itself).
    pub fn remove_prefix(&mut self, path: &[PathElement]) {
        self.remove_at(path, true);
    }

    /// Removes `path` itself, keeping the paths below it.
    pub fn remove(&mut self, path: &[PathElement]) {
        self.remove_at(path, false);
    }

    fn remove_at(&mut self, path: &[PathElement], subtree: bool) {
        match path {
            [] => {
                if subtree {
                    *self = Set::default();
                }
            }
            [last] => {
                self.members.remove(last);
                if subtree {
                    self.children.remove(last);
                }
            }
            [first, rest @ ..] => {
                if let Some(c) = self.children.get_mut(first) {
                    c.remove_at(rest, subtree);
                    if c.is_empty() {
                        self.children.remove(first);
                    }
                }
            }
        }
    }

    /// Only the subtree at `path` (with `path` itself).
    pub fn only_prefix(&self, path: &[PathElement]) -> Set {
        match path {
            [] => self.clone(),
            [last] => {
                let mut out = Set::default();
                if self.members.contains(last) {
                    out.members.insert(last.clone());
                }
                if let Some(c) = self.children.get(last) {
                    out.children.insert(last.clone(), c.clone());
                }
                out
            }
            [first, rest @ ..] => {
                let mut out = Set::default();
                if let Some(c) = self.children.get(first) {
                    let inner = c.only_prefix(rest);
                    if !inner.is_empty() {
                        out.children.insert(first.clone(), inner);
                    }
                }
                out
            }
        }
    }

    /// The `FieldsV1` JSON of the set.
    pub fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        for e in &self.members {
            if !self.children.contains_key(e) {
                m.insert(e.encode(), Value::Object(Map::new()));
            }
        }
        for (e, c) in &self.children {
            if c.is_empty() {
                if self.members.contains(e) {
                    m.insert(e.encode(), Value::Object(Map::new()));
                }
                continue;
            }
            let mut inner = match c.to_fields_v1() {
                Value::Object(o) => o,
                _ => Map::new(),
            };
            if self.members.contains(e) {
                inner.insert(".".into(), Value::Object(Map::new()));
            }
            m.insert(e.encode(), Value::Object(inner));
        }
        Value::Object(m)
    }

    pub fn from_fields_v1(v: &Value) -> Result<Set, String> {
        let mut set = Set::default();
        let Some(m) = v.as_object() else { return Err("FieldsV1 must be an object".into()) };
        for (k, child) in m {
            if k == "." {
                continue;
            }
            let pe = PathElement::decode(k).ok_or_else(|| format!("invalid field path element {k:?}"))?;
            let c = Set::from_fields_v1(child)?;
            let is_member = child.as_object().is_some_and(|o| o.is_empty() || o.contains_key("."));
            if is_member {
                set.members.insert(pe.clone());
            }
            if !c.is_empty() {
                set.children.insert(pe, c);
            }
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn f(s: &str) -> PathElement {
        PathElement::Field(s.into())
    }

    #[test]
    fn fields_v1_round_trip_and_display() {
        let v = json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}}}}});
        let s = Set::from_fields_v1(&v).unwrap();
        assert_eq!(s.to_fields_v1(), v);
        assert!(s.contains(&[f("metadata"), f("labels")]));
        assert!(s.contains(&[f("metadata"), f("labels"), f("app")]));
        let key = PathElement::key_of(&[("name".into(), json!("c"))]);
        assert_eq!(path_string(&[f("spec"), f("containers"), key, f("image")]), ".spec.containers[name=\"c\"].image");
    }

    #[test]
    fn set_algebra() {
        let mut a = Set::default();
        a.insert(&[f("a"), f("b")]);
        a.insert(&[f("a"), f("c")]);
        let mut b = Set::default();
        b.insert(&[f("a"), f("c")]);
        assert_eq!(a.difference(&b).paths(), vec![vec![f("a"), f("b")]]);
        assert_eq!(a.intersection(&b), b);
        let mut u = b.clone();
        u.extend(&a);
        assert_eq!(u, a);
        let mut m = a.clone();
        m.insert(&[f("a")]);
        m.remove(&[f("a")]);
        assert_eq!(m, a, "removing a path keeps the paths below it");
        m.remove_prefix(&[f("a")]);
        assert!(m.is_empty());
    }
}
