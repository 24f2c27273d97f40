//! Walks of JSON trees typed by the schema, as structured-merge-diff walks its typed values:
//! the set of fields an object sets, the comparison of two objects, the merge of an applied
//! configuration into a live object, and the removal of fields.
//!
//! Struct nodes never count as set themselves (Go's non-pointer structs always exist); map
//! entries, list items and leaves do.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde_json::{Map, Value};

use super::fieldpath::{Path, PathElement, Set, json_text};
use crate::apiextensions::structural::Structural;
use crate::schema::{DefName, Definition, ListType, Type, schema};

/// The type of a node walked, as structured-merge-diff's type converter has it.
#[derive(Clone, Copy)]
pub enum Ty<'a> {
    /// A built-in kind's, from the OpenAPI schema of the Go types.
    Go(&'a Type),
    /// A custom resource's, from its CRD version's structural schema.
    Schema(&'a Structural),
    /// A custom resource (or an embedded resource): the schema's fields, and kube's own
    /// `apiVersion`, `kind` and `metadata` (an `ObjectMeta`).
    Resource(&'a Structural),
    /// What no schema describes (structured-merge-diff's deduced type): objects are maps of
    /// it, lists atomic, the rest leaves.
    Deduced,
}

static ANY: Type = Type::Any;
static OBJECT_META: LazyLock<Type> = LazyLock::new(|| Type::Object(DefName::new("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")));

/// How a value of a type is walked.
enum Shape<'a> {
    Leaf,
    Struct(Fields<'a>),
    Map(Ty<'a>),
    Set,
    KeyedList(Ty<'a>, &'a [String]),
}

/// An object of declared fields: a Go struct, or a schema's `properties`.
enum Fields<'a> {
    Go(&'a Definition),
    Schema { schema: &'a Structural, resource: bool },
}

impl<'a> Fields<'a> {
    fn child(&self, key: &str) -> Ty<'a> {
        match self {
            Fields::Go(d) => Ty::Go(d.properties.get(key).map(|p| &p.ty).unwrap_or(&ANY)),
            Fields::Schema { resource: true, .. } if key == "metadata" => Ty::Go(&OBJECT_META),
            Fields::Schema { schema, .. } => schema.properties.get(key).or(schema.additional.as_deref()).map_or(Ty::Deduced, Ty::Schema),
        }
    }

    /// Whether `key` is one of its fields (a map entry otherwise, which counts as set).
    fn declared(&self, key: &str) -> bool {
        match self {
            Fields::Go(d) => d.properties.contains_key(key),
            Fields::Schema { schema, resource } => schema.properties.contains_key(key) || (*resource && matches!(key, "apiVersion" | "kind" | "metadata")),
        }
    }

    /// Whether the object itself counts as a field: not a Go struct, which a kind's empty object
    /// always has (kube compares a create with it), but any object of an unstructured custom
    /// resource, whose empty object has nothing.
    fn counts(&self) -> bool {
        matches!(self, Fields::Schema { .. })
    }
}

fn shape(ty: Ty<'_>) -> Shape<'_> {
    match ty {
        Ty::Go(ty) => match ty {
            Type::Object(name) => match schema().def(name) {
                Some(d) if !d.atomic => Shape::Struct(Fields::Go(d)),
                _ => Shape::Leaf,
            },
            Type::Map { values, atomic: false } => Shape::Map(Ty::Go(values)),
            Type::Array { list_type: ListType::Set, .. } => Shape::Set,
            Type::Array { items, list_type: ListType::Map, map_keys } if !map_keys.is_empty() => Shape::KeyedList(Ty::Go(items), map_keys),
            _ => Shape::Leaf,
        },
        Ty::Schema(s) if s.is_array() => match s.list_type {
            ListType::Set => Shape::Set,
            ListType::Map if !s.map_keys.is_empty() => Shape::KeyedList(s.items.as_deref().map_or(Ty::Deduced, Ty::Schema), &s.map_keys),
            _ => Shape::Leaf,
        },
        Ty::Schema(s) if s.atomic => Shape::Leaf,
        Ty::Schema(s) if s.embedded => Shape::Struct(Fields::Schema { schema: s, resource: true }),
        Ty::Schema(s) if !s.properties.is_empty() => Shape::Struct(Fields::Schema { schema: s, resource: false }),
        Ty::Schema(s) => match &s.additional {
            Some(values) => Shape::Map(Ty::Schema(values)),
            None if s.ty == "object" || s.preserve_unknown => Shape::Map(Ty::Deduced),
            None => Shape::Leaf,
        },
        Ty::Resource(s) => Shape::Struct(Fields::Schema { schema: s, resource: true }),
        // A value that is not an object is walked as a leaf by the walks below.
        Ty::Deduced => Shape::Map(Ty::Deduced),
    }
}

fn child_type<'a>(shape: &Shape<'a>, key: &str) -> Ty<'a> {
    match shape {
        Shape::Struct(fields) => fields.child(key),
        Shape::Map(values) => *values,
        _ => Ty::Go(&ANY),
    }
}

/// Whether a node is replaced whole (`x-kubernetes-map-type`/`-list-type: atomic`).
fn atomic(ty: Ty<'_>) -> bool {
    match ty {
        Ty::Go(Type::Object(name)) => schema().def(name).is_some_and(|d| d.atomic),
        Ty::Go(Type::Map { atomic, .. }) => *atomic,
        Ty::Go(Type::Array { list_type, .. }) => *list_type == ListType::Atomic,
        Ty::Schema(s) => s.atomic || (s.is_array() && s.list_type == ListType::Atomic),
        _ => false,
    }
}

/// The type of a list's items.
fn items_of(ty: Ty<'_>) -> Ty<'_> {
    match ty {
        Ty::Go(Type::Array { items, .. }) => Ty::Go(items),
        Ty::Schema(s) => s.items.as_deref().map_or(Ty::Deduced, Ty::Schema),
        _ => Ty::Go(&ANY),
    }
}

/// The value a missing list-map key field takes: its default. kube's OpenAPI declares
/// `protocol` keys (container, service and endpoint ports) with the default `TCP`; a schema
/// its properties' `default`s. structured-merge-diff keys items by their defaulted values.
fn key_default(items: Ty<'_>, field: &str) -> Option<Value> {
    match items {
        Ty::Schema(s) => s.properties.get(field).and_then(|p| p.default.clone()),
        _ => (field == "protocol").then(|| Value::String("TCP".into())),
    }
}

/// The path element of a keyed list item.
fn item_key(item: &Value, items: Ty<'_>, keys: &[String]) -> PathElement {
    let fields: Vec<(String, Value)> = keys.iter().filter_map(|k| item.get(k).cloned().or_else(|| key_default(items, k)).map(|v| (k.clone(), v))).collect();
    PathElement::key_of(&fields)
}

/// The items of a keyed list by key, the first of each key (the one structured-merge-diff
/// compares), in key order: every walk over a list is O(n log n), whatever its length.
fn by_key<'a>(items: &'a [Value], items_ty: Ty<'_>, keys: &[String]) -> BTreeMap<PathElement, &'a Value> {
    let mut out = BTreeMap::new();
    for item in items {
        out.entry(item_key(item, items_ty, keys)).or_insert(item);
    }
    out
}

/// The path elements of a set's items, sorted and without duplicates.
fn set_elements(items: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = items.iter().map(json_text).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The items of sorted `a` that sorted `b` lacks, in order.
fn sorted_difference<'a>(a: &'a [String], b: &[String]) -> impl Iterator<Item = &'a String> {
    a.iter().filter(move |x| b.binary_search(x).is_err())
}

fn is_empty_container(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        _ => false,
    }
}

/// Every field `v` sets (`ToFieldSet`).
pub fn to_set(v: &Value, ty: Ty<'_>) -> Set {
    let mut set = Set::default();
    walk_set(v, ty, &mut Vec::new(), &mut set);
    set
}

fn walk_set(v: &Value, ty: Ty<'_>, path: &mut Path, set: &mut Set) {
    let sh = shape(ty);
    match (&sh, v) {
        (Shape::Struct(fields), Value::Object(m)) => {
            for (k, child) in m {
                path.push(PathElement::Field(k.clone()));
                walk_set(child, child_type(&sh, k), path, set);
                if is_empty_container(Some(child)) || !fields.declared(k) {
                    set.insert(path);
                }
                path.pop();
            }
        }
        (Shape::Map(values), Value::Object(m)) => {
            for (k, child) in m {
                path.push(PathElement::Field(k.clone()));
                walk_set(child, *values, path, set);
                set.insert(path);
                path.pop();
            }
        }
        (Shape::Set, Value::Array(items)) => {
            for item in set_elements(items) {
                path.push(PathElement::Value(item));
                set.insert(path);
                path.pop();
            }
        }
        (Shape::KeyedList(items_ty, keys), Value::Array(items)) => {
            // In key order, so each item's path is appended to its parent rather than inserted.
            let mut keyed: Vec<(PathElement, &Value)> = items.iter().map(|i| (item_key(i, *items_ty, keys), i)).collect();
            keyed.sort_by(|a, b| a.0.cmp(&b.0));
            for (pe, item) in keyed {
                path.push(pe);
                walk_set(item, *items_ty, path, set);
                set.insert(path);
                path.pop();
            }
        }
        _ => set.insert(path),
    }
}

/// What changed from `lhs` to `rhs` (`typed.Compare`).
#[derive(Debug, Default)]
pub struct Comparison {
    pub added: Set,
    pub modified: Set,
    pub removed: Set,
}

pub fn compare(lhs: Option<&Value>, rhs: Option<&Value>, ty: Ty<'_>) -> Comparison {
    let mut c = Comparison::default();
    walk_compare(lhs, rhs, ty, &mut Vec::new(), &mut c);
    c
}

fn walk_compare(lhs: Option<&Value>, rhs: Option<&Value>, ty: Ty<'_>, path: &mut Path, c: &mut Comparison) {
    // A side that is absent makes the whole other side added or removed: built bottom-up in one
    // pass (a create's every field) rather than inserted path by path from the root.
    let one_sided = match (lhs, rhs) {
        (None, Some(r)) => Some((r, &mut c.added)),
        (Some(l), None) => Some((l, &mut c.removed)),
        _ => None,
    };
    if let Some((v, set)) = one_sided {
        let (itself, below) = subtree(v, ty);
        set.graft(path, itself && !path.is_empty(), below);
        return;
    }
    let sh = shape(ty);
    let container = match (&sh, lhs, rhs) {
        (Shape::Leaf, ..) => false,
        // Both sides empty: a leaf, so that `{}` versus absent is seen.
        _ if is_empty_container(lhs) && is_empty_container(rhs) => false,
        (Shape::Struct(_) | Shape::Map(_), l, r) => l.is_none_or(Value::is_object) && r.is_none_or(Value::is_object),
        (Shape::Set | Shape::KeyedList(..), l, r) => l.is_none_or(Value::is_array) && r.is_none_or(Value::is_array),
    };
    if !container {
        if !path.is_empty() {
            match (lhs, rhs) {
                (None, Some(_)) => c.added.insert(path),
                (Some(_), None) => c.removed.insert(path),
                (Some(a), Some(b)) if a != b => c.modified.insert(path),
                _ => {}
            }
        }
        return;
    }
    match &sh {
        Shape::Struct(_) | Shape::Map(_) => {
            let empty = Map::new();
            let lm = lhs.and_then(Value::as_object).unwrap_or(&empty);
            let rm = rhs.and_then(Value::as_object).unwrap_or(&empty);
            let mut keys: Vec<&String> = lm.keys().chain(rm.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                path.push(PathElement::Field(k.clone()));
                walk_compare(lm.get(k), rm.get(k), child_type(&sh, k), path, c);
                path.pop();
            }
        }
        Shape::Set => {
            let la = set_elements(lhs.and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]));
            let ra = set_elements(rhs.and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]));
            for (from, to, set) in [(&ra, &la, &mut c.added), (&la, &ra, &mut c.removed)] {
                for v in sorted_difference(from, to) {
                    path.push(PathElement::Value(v.clone()));
                    set.insert(path);
                    path.pop();
                }
            }
        }
        Shape::KeyedList(items_ty, keys) => {
            let lk = by_key(lhs.and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]), *items_ty, keys);
            let rk = by_key(rhs.and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]), *items_ty, keys);
            let mut pes: Vec<&PathElement> = lk.keys().chain(rk.keys()).collect();
            pes.sort();
            pes.dedup();
            for pe in pes {
                path.push(pe.clone());
                walk_compare(lk.get(pe).copied(), rk.get(pe).copied(), *items_ty, path, c);
                path.pop();
            }
        }
        Shape::Leaf => unreachable!("leaves return above"),
    }
    if !path.is_empty() && !matches!(&sh, Shape::Struct(fields) if !fields.counts()) {
        match (lhs, rhs) {
            (None, Some(_)) => c.added.insert(path),
            (Some(_), None) => c.removed.insert(path),
            _ => {}
        }
    }
}

/// The fields of `v` when the other side of a comparison has nothing there: whether `v`'s own
/// node counts (not for structs, as [`walk_compare`] has it) and the set of paths below it.
fn subtree(v: &Value, ty: Ty<'_>) -> (bool, Set) {
    let sh = shape(ty);
    let container = match (&sh, v) {
        (Shape::Leaf, _) => false,
        _ if is_empty_container(Some(v)) => false,
        (Shape::Struct(_) | Shape::Map(_), v) => v.is_object(),
        (Shape::Set | Shape::KeyedList(..), v) => v.is_array(),
    };
    if !container {
        return (true, Set::default());
    }
    let mut set = Set::default();
    match (&sh, v) {
        (Shape::Struct(_) | Shape::Map(_), Value::Object(m)) => {
            for (k, child) in m {
                let (itself, below) = subtree(child, child_type(&sh, k));
                set.add_child(PathElement::Field(k.clone()), itself, below);
            }
        }
        (Shape::Set, Value::Array(items)) => {
            for item in set_elements(items) {
                set.add_child(PathElement::Value(item), true, Set::default());
            }
        }
        (Shape::KeyedList(items_ty, keys), Value::Array(items)) => {
            // Items with the same key are one path; the first of them is the one compared.
            for (pe, item) in by_key(items, *items_ty, keys) {
                let (itself, below) = subtree(item, *items_ty);
                set.add_child(pe, itself, below);
            }
        }
        _ => unreachable!("containers are objects or arrays"),
    }
    (!matches!(&sh, Shape::Struct(fields) if !fields.counts()), set)
}

/// The applied configuration merged into the live object (`typed.Merge`).
pub fn merge(live: Option<&Value>, config: Option<&Value>, ty: Ty<'_>) -> Option<Value> {
    let (l, c) = match (live, config) {
        (l, None) => return l.cloned(),
        (None, c) => return c.cloned(),
        (Some(l), Some(c)) => (l, c),
    };
    let sh = shape(ty);
    match (&sh, l, c) {
        (Shape::Struct(_) | Shape::Map(_), Value::Object(lm), Value::Object(cm)) => {
            let mut out = lm.clone();
            for (k, cv) in cm {
                if let Some(v) = merge(lm.get(k), Some(cv), child_type(&sh, k)) {
                    out.insert(k.clone(), v);
                }
            }
            Some(Value::Object(out))
        }
        (Shape::Set, Value::Array(la), Value::Array(ca)) => Some(Value::Array(merge_list(la, ca, |v| PathElement::Value(json_text(v)), |_, c| c.clone()))),
        (Shape::KeyedList(items_ty, keys), Value::Array(la), Value::Array(ca)) => {
            Some(Value::Array(merge_list(la, ca, |v| item_key(v, *items_ty, keys), |l, c| merge(Some(l), Some(c), *items_ty).unwrap_or_else(|| c.clone()))))
        }
        _ => Some(c.clone()),
    }
}

/// The paths (`.spec.selector`, `.spec.containers[0].args`) of the atomic maps, structs and
/// lists `v` sets, walking only what it sets (structured-merge-diff's `findAtomics`, which a
/// mutating admission policy's ApplyConfiguration may not set).
pub fn atomics(v: &Value, ty: Ty<'_>, at: &str, out: &mut Vec<String>) {
    let sh = shape(ty);
    match (&sh, v) {
        (Shape::Struct(_) | Shape::Map(_), Value::Object(m)) => {
            for (k, x) in m {
                let (child, here) = (child_type(&sh, k), format!("{at}.{k}"));
                if matches!(x, Value::Object(_) | Value::Array(_)) && atomic(child) {
                    out.push(here);
                } else {
                    atomics(x, child, &here, out);
                }
            }
        }
        (Shape::KeyedList(items, _), Value::Array(list)) => {
            for (i, x) in list.iter().enumerate() {
                let here = format!("{at}[{i}]");
                if matches!(x, Value::Object(_) | Value::Array(_)) && atomic(*items) {
                    out.push(here);
                } else {
                    atomics(x, *items, &here, out);
                }
            }
        }
        _ => {}
    }
}

/// structured-merge-diff's list merge: the configuration's items in its order, with items only
/// the live list has kept where they were.
fn merge_list(live: &[Value], config: &[Value], key: impl Fn(&Value) -> PathElement, both: impl Fn(&Value, &Value) -> Value) -> Vec<Value> {
    let lk: Vec<PathElement> = live.iter().map(&key).collect();
    let rk: Vec<PathElement> = config.iter().map(&key).collect();
    let first_index = |keys: &[PathElement]| {
        let mut m: BTreeMap<PathElement, usize> = BTreeMap::new();
        for (i, k) in keys.iter().enumerate() {
            m.entry(k.clone()).or_insert(i);
        }
        m
    };
    let (live_index, config_index) = (first_index(&lk), first_index(&rk));
    let in_live = |pe: &PathElement| live_index.get(pe).copied();
    let in_config = |pe: &PathElement| config_index.get(pe).copied();
    let mut shared: std::collections::VecDeque<&PathElement> = rk.iter().filter(|pe| in_live(pe).is_some()).collect();
    let mut next_shared = shared.pop_front();
    let mut merged_config: std::collections::BTreeSet<&PathElement> = std::collections::BTreeSet::new();
    let mut out = Vec::with_capacity(live.len().max(config.len()));
    let (mut li, mut ri) = (0, 0);
    while li < lk.len() || ri < rk.len() {
        if li < lk.len() && ri < rk.len() {
            let pe = &lk[li];
            if *pe == rk[ri] {
                merged_config.insert(pe);
                out.push(both(&live[li], &config[ri]));
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if in_config(pe).is_some() && next_shared.is_some_and(|n| n != pe) {
                li += 1;
                continue;
            }
        }
        if li < lk.len() {
            let pe = &lk[li];
            if in_config(pe).is_none() {
                out.push(live[li].clone());
                li += 1;
                continue;
            } else if merged_config.contains(&pe) {
                li += 1;
                continue;
            }
        }
        if ri < rk.len() {
            let pe = &rk[ri];
            merged_config.insert(pe);
            out.push(match in_live(pe) {
                Some(i) => both(&live[i], &config[ri]),
                None => config[ri].clone(),
            });
            ri += 1;
            if next_shared == Some(pe) {
                next_shared = shared.pop_front();
            }
        }
    }
    out
}

/// Removes every path of `doomed` (fields, map entries, list items) from `v`, the paths below
/// a node before the node, each list filtered once however many of its items go.
/// Nothing is removed from inside an atomic value (structured-merge-diff's removing walker
/// leaves atomic maps and lists whole): a manager that owned `.spec.scaleTargetRef.kind` at a
/// version where the reference is granular and applies it at one where it is atomic keeps it.
pub fn remove_all(v: &mut Value, doomed: &Set, ty: Ty<'_>) {
    if atomic(ty) {
        return;
    }
    let sh = shape(ty);
    match v {
        Value::Object(m) => {
            for (pe, below) in doomed.children() {
                if let (PathElement::Field(k), false) = (pe, below.is_empty())
                    && let Some(child) = m.get_mut(k)
                {
                    remove_all(child, below, child_type(&sh, k));
                }
            }
            for pe in doomed.members() {
                if let PathElement::Field(k) = pe {
                    m.remove(k);
                }
            }
        }
        Value::Array(items) => {
            let items_ty = items_of(ty);
            let keys: &[String] = match sh {
                Shape::KeyedList(_, keys) => keys,
                _ => &[],
            };
            let mut first_with_key: BTreeMap<PathElement, usize> = BTreeMap::new();
            if doomed.children().any(|(pe, _)| matches!(pe, PathElement::Key(_))) && !keys.is_empty() {
                for (i, item) in items.iter().enumerate() {
                    first_with_key.entry(item_key(item, items_ty, keys)).or_insert(i);
                }
            }
            for (pe, below) in doomed.children() {
                let at = match pe {
                    PathElement::Key(_) => first_with_key.get(pe).copied(),
                    PathElement::Index(i) => Some(*i),
                    _ => None,
                };
                if let Some(item) = at.and_then(|i| items.get_mut(i)) {
                    remove_all(item, below, items_ty);
                }
            }
            let mut values = std::collections::BTreeSet::new();
            let mut item_keys = std::collections::BTreeSet::new();
            let mut indexes = std::collections::BTreeSet::new();
            for pe in doomed.members() {
                match pe {
                    PathElement::Value(text) => values.extend(serde_json::from_str::<Value>(text).ok().map(|v| json_text(&v))),
                    PathElement::Key(_) if !keys.is_empty() => {
                        item_keys.insert(pe);
                    }
                    PathElement::Index(i) => {
                        indexes.insert(*i);
                    }
                    _ => {}
                }
            }
            if values.is_empty() && item_keys.is_empty() && indexes.is_empty() {
                return;
            }
            let mut i = 0;
            items.retain(|item| {
                let doomed = indexes.contains(&i)
                    || (!values.is_empty() && values.contains(&json_text(item)))
                    || (!item_keys.is_empty() && item_keys.contains(&item_key(item, items_ty, keys)));
                i += 1;
                !doomed
            });
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    static DEPLOYMENT: LazyLock<Type> = LazyLock::new(|| Type::Object(DefName::new("io.k8s.api.apps.v1.Deployment")));

    fn deployment() -> Ty<'static> {
        Ty::Go(&DEPLOYMENT)
    }

    #[test]
    fn field_sets_of_objects() {
        let d = json!({"metadata": {"labels": {"app": "x"}}, "spec": {"replicas": 2,
            "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let s = to_set(&d, deployment());
        assert_eq!(
            s.to_fields_v1(),
            json!({"f:metadata": {"f:labels": {"f:app": {}}}, "f:spec": {"f:replicas": {},
                "f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}})
        );
    }

    #[test]
    fn compare_sees_added_modified_removed() {
        let a = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"replicas": 1}});
        let b = json!({"metadata": {"labels": {"a": "1", "c": "3"}}, "spec": {"replicas": 2}});
        let c = compare(Some(&a), Some(&b), deployment());
        assert_eq!(c.added.to_fields_v1(), json!({"f:metadata": {"f:labels": {"f:c": {}}}}));
        assert_eq!(c.removed.to_fields_v1(), json!({"f:metadata": {"f:labels": {"f:b": {}}}}));
        assert_eq!(c.modified.to_fields_v1(), json!({"f:spec": {"f:replicas": {}}}));
        let created = compare(None, Some(&b), deployment());
        assert_eq!(created.added.to_fields_v1(), json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}, "f:c": {}}}, "f:spec": {"f:replicas": {}}}));
    }

    #[test]
    fn defaulted_key_fields_match() {
        let live = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}}}});
        let cfg = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80}]}]}}}});
        let m = merge(Some(&live), Some(&cfg), deployment()).unwrap();
        assert_eq!(m["spec"]["template"]["spec"]["containers"][0]["ports"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn merge_keeps_live_only_items_in_place() {
        let live = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "side"}, {"name": "b"}]}}}});
        let cfg = json!({"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "2"}, {"name": "a", "image": "3"}]}}}});
        let m = merge(Some(&live), Some(&cfg), deployment()).unwrap();
        let names: Vec<&str> = m["spec"]["template"]["spec"]["containers"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, vec!["side", "b", "a"]);
        assert_eq!(m["spec"]["template"]["spec"]["containers"][2]["image"], "3");
    }
}
