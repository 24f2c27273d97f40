//! Field paths and sets of them, and their `FieldsV1` form (structured-merge-diff's `fieldpath`).

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

/// A value's JSON text, as `PathElement`s hold values (written straight into bytes: `Display`
/// goes through the formatting machinery, which costs several times more).
pub fn json_text(v: &Value) -> String {
    String::from_utf8(serde_json::to_vec(v).expect("values serialize")).expect("JSON is UTF-8")
}

impl PathElement {
    pub fn key_of(fields: &[(String, Value)]) -> PathElement {
        let mut k: Vec<(String, String)> = fields.iter().map(|(n, v)| (n.clone(), json_text(v))).collect();
        k.sort();
        PathElement::Key(k)
    }

    /// The `FieldsV1` spelling.
    fn encode(&self) -> String {
        match self {
            PathElement::Field(f) => Self::spelled("f:", f),
            PathElement::Key(k) => {
                let mut s = String::with_capacity(4 + k.iter().map(|(n, v)| n.len() + v.len() + 4).sum::<usize>());
                s.push_str("k:{");
                for (i, (n, v)) in k.iter().enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    if n.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
                        s.push_str(&json_text(&Value::String(n.clone())));
                    } else {
                        s.push('"');
                        s.push_str(n);
                        s.push('"');
                    }
                    s.push(':');
                    s.push_str(v);
                }
                s.push('}');
                s
            }
            PathElement::Value(v) => Self::spelled("v:", v),
            PathElement::Index(i) => Self::spelled("i:", &i.to_string()),
        }
    }

    /// `prefix` and `rest`, in a string of their length.
    fn spelled(prefix: &str, rest: &str) -> String {
        let mut s = String::with_capacity(prefix.len() + rest.len());
        s.push_str(prefix);
        s.push_str(rest);
        s
    }

    fn decode(s: &str) -> Option<PathElement> {
        let (kind, rest) = s.split_at_checked(2)?;
        Some(match kind {
            "f:" => PathElement::Field(rest.to_string()),
            "v:" => {
                let v: Value = serde_json::from_str(rest).ok()?;
                PathElement::Value(json_text(&v))
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

/// A set of paths, as a trie: `members` end here, `children` go deeper. Both are sorted
/// vectors, and no child is empty: the nodes of an object's field set hold a handful of
/// entries each, and sorted vectors build, merge and compare them as walks, where trees of
/// nodes cost an allocation and a search per entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Set {
    members: Vec<PathElement>,
    children: Vec<(PathElement, Set)>,
}

/// `a` ∪ `b`, both sorted without duplicates.
fn union(a: &mut Vec<PathElement>, b: &[PathElement]) {
    if b.is_empty() {
        return;
    }
    if a.is_empty() {
        a.extend_from_slice(b);
        return;
    }
    let mut out = Vec::with_capacity(a.len() + b.len());
    let mut mine = std::mem::take(a).into_iter().peekable();
    let mut theirs = b.iter().peekable();
    loop {
        match (mine.peek(), theirs.peek()) {
            (Some(x), Some(y)) => match x.cmp(y) {
                std::cmp::Ordering::Less => out.extend(mine.next()),
                std::cmp::Ordering::Greater => out.extend(theirs.next().cloned()),
                std::cmp::Ordering::Equal => {
                    out.extend(mine.next());
                    theirs.next();
                }
            },
            (Some(_), None) => out.extend(mine.by_ref()),
            (None, Some(_)) => out.extend(theirs.by_ref().cloned()),
            (None, None) => break,
        }
    }
    *a = out;
}

impl Set {
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.iter().all(|(_, c)| c.is_empty())
    }

    /// The paths of one element that end here, sorted.
    pub fn members(&self) -> &[PathElement] {
        &self.members
    }

    /// The sets below each element that has paths under it, sorted by element.
    pub fn children(&self) -> impl Iterator<Item = (&PathElement, &Set)> {
        self.children.iter().map(|(k, c)| (k, c))
    }

    fn is_member(&self, pe: &PathElement) -> bool {
        self.members.binary_search(pe).is_ok()
    }

    fn child_at(&self, pe: &PathElement) -> Result<usize, usize> {
        self.children.binary_search_by(|(k, _)| k.cmp(pe))
    }

    fn child(&self, pe: &PathElement) -> Option<&Set> {
        self.child_at(pe).ok().map(|i| &self.children[i].1)
    }

    fn add_member(&mut self, pe: &PathElement) {
        if let Err(i) = self.members.binary_search(pe) {
            self.members.insert(i, pe.clone());
        }
    }

    /// The child at `pe`, made (empty, for the caller to fill) if there is none.
    fn child_mut(&mut self, pe: &PathElement) -> &mut Set {
        let i = match self.child_at(pe) {
            Ok(i) => i,
            Err(i) => {
                self.children.insert(i, (pe.clone(), Set::default()));
                i
            }
        };
        &mut self.children[i].1
    }

    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => self.add_member(last),
            [first, rest @ ..] => self.child_mut(first).insert(rest),
        }
    }

    /// Adds `pe` below the root: as a member if `member`, with the paths of `below` under it.
    pub fn add_child(&mut self, pe: PathElement, member: bool, below: Set) {
        if member {
            self.add_member(&pe);
        }
        if !below.is_empty() {
            match self.child_at(&pe) {
                Ok(i) => self.children[i].1.extend(&below),
                Err(i) => self.children.insert(i, (pe, below)),
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
                if member || !below.is_empty() {
                    self.child_mut(first).graft(rest, member, below);
                }
            }
        }
    }

    pub fn contains(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.is_member(last),
            [first, rest @ ..] => self.child(first).is_some_and(|c| c.contains(rest)),
        }
    }

    /// Whether some path of the set starts with `prefix` (or is it).
    pub fn has_prefix(&self, prefix: &[PathElement]) -> bool {
        match prefix {
            [] => !self.is_empty(),
            [last] => self.is_member(last) || self.child(last).is_some_and(|c| !c.is_empty()),
            [first, rest @ ..] => self.child(first).is_some_and(|c| c.has_prefix(rest)),
        }
    }

    /// Adds every path of `other` (an in-place union).
    pub fn extend(&mut self, other: &Set) {
        union(&mut self.members, &other.members);
        for (k, c) in &other.children {
            match self.child_at(k) {
                Ok(i) => self.children[i].1.extend(c),
                Err(i) => self.children.insert(i, (k.clone(), c.clone())),
            }
        }
    }

    pub fn difference(&self, other: &Set) -> Set {
        let members = self.members.iter().filter(|m| !other.is_member(m)).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(k, c)| {
                let d = match other.child(k) {
                    Some(o) => c.difference(o),
                    None => c.clone(),
                };
                (!d.is_empty()).then(|| (k.clone(), d))
            })
            .collect();
        Set { members, children }
    }

    pub fn intersection(&self, other: &Set) -> Set {
        let members = self.members.iter().filter(|m| other.is_member(m)).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(k, c)| {
                let i = c.intersection(other.child(k)?);
                (!i.is_empty()).then(|| (k.clone(), i))
            })
            .collect();
        Set { members, children }
    }

    /// Every member path, in order.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        let mut keys: Vec<&PathElement> = self.members.iter().chain(self.children.iter().map(|(k, _)| k)).collect();
        keys.sort();
        keys.dedup();
        for k in keys {
            prefix.push(k.clone());
            if self.is_member(k) {
                out.push(prefix.clone());
            }
            if let Some(c) = self.child(k) {
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
                if let Ok(i) = self.members.binary_search(last) {
                    self.members.remove(i);
                }
                if subtree && let Ok(i) = self.child_at(last) {
                    self.children.remove(i);
                }
            }
            [first, rest @ ..] => {
                if let Ok(i) = self.child_at(first) {
                    let c = &mut self.children[i].1;
                    c.remove_at(rest, subtree);
                    if c.is_empty() {
                        self.children.remove(i);
                    }
                }
            }
        }
    }

    /// Only the subtree at `path` (with `path` itself).
    pub fn only_prefix(&self, path: &[PathElement]) -> Set {
        let mut out = Set::default();
        match path {
            [] => return self.clone(),
            [last] => {
                if self.is_member(last) {
                    out.members.push(last.clone());
                }
                if let Some(c) = self.child(last) {
                    out.children.push((last.clone(), c.clone()));
                }
            }
            [first, rest @ ..] => {
                if let Some(c) = self.child(first) {
                    let inner = c.only_prefix(rest);
                    if !inner.is_empty() {
                        out.children.push((first.clone(), inner));
                    }
                }
            }
        }
        out
    }

    /// The `FieldsV1` JSON of the set.
    pub fn to_fields_v1(&self) -> Value {
        let leaf = || Value::Object(Map::new());
        let mut entries: Vec<(String, Value)> = Vec::with_capacity(self.members.len() + self.children.len());
        for e in &self.members {
            if self.child(e).is_none_or(Set::is_empty) {
                entries.push((e.encode(), leaf()));
            }
        }
        for (e, c) in &self.children {
            if c.is_empty() {
                continue;
            }
            let mut inner = match c.to_fields_v1() {
                Value::Object(o) => o,
                _ => Map::new(),
            };
            if self.is_member(e) {
                inner.insert(".".into(), leaf());
            }
            entries.push((e.encode(), Value::Object(inner)));
        }
        // Collected whole, the map is built from its sorted entries at once rather than by an
        // insert (and a search) per entry.
        Value::Object(entries.into_iter().collect())
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
            set.add_child(pe, is_member, c);
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
