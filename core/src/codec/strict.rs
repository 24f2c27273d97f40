//! JSON decoding that notices what kube's strict decoder (`sigs.k8s.io/json`) notices: a key
//! given twice in one object. Each is reported by its path as kube writes paths
//! (`spec.template.spec.containers[0].image`, `[1].path` in an array at the top) and by its
//! place in the document, so that kube's order (document order) can be kept when these are
//! reported together with unknown fields.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};

/// A key given more than once in one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Duplicate {
    pub path: String,
    /// How many keys come before this one in the document.
    pub ordinal: usize,
}

/// A JSON body decoded, with the keys it repeats in document order. The last value of a
/// repeated key is kept, as Go's decoder keeps it.
pub fn decode(body: &[u8]) -> Result<(Value, Vec<Duplicate>), serde_json::Error> {
    let report = Report::default();
    let value = walk(body, &report)?;
    Ok((value, report.duplicates.into_inner()))
}

/// The place in the document (keys before it) of each of `paths` that the body has.
pub fn ordinals(body: &[u8], paths: &BTreeSet<String>) -> BTreeMap<String, usize> {
    let report = Report { wanted: Some(paths.clone()), ..Report::default() };
    match walk(body, &report) {
        Ok(_) => report.found.into_inner(),
        Err(_) => BTreeMap::new(),
    }
}

fn walk(body: &[u8], report: &Report) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = Seed { at: At::Root, report }.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

#[derive(Default)]
struct Report {
    keys: Cell<usize>,
    duplicates: RefCell<Vec<Duplicate>>,
    wanted: Option<BTreeSet<String>>,
    found: RefCell<BTreeMap<String, usize>>,
}

/// Where a value is: a chain of keys and indexes up to the document's root.
#[derive(Clone, Copy)]
enum At<'a> {
    Root,
    Key(&'a At<'a>, &'a str),
    Index(&'a At<'a>, usize),
}

impl At<'_> {
    fn path(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            At::Root => {}
            At::Key(parent, key) => {
                parent.write(out);
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            At::Index(parent, i) => {
                parent.write(out);
                out.push_str(&format!("[{i}]"));
            }
        }
    }
}

struct Seed<'a, 'r> {
    at: At<'a>,
    report: &'r Report,
}

impl<'de> DeserializeSeed<'de> for Seed<'_, '_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Seed { at: At::Index(&self.at, items.len()), report: self.report })? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let ordinal = self.report.keys.get();
            self.report.keys.set(ordinal + 1);
            let value = {
                let at = At::Key(&self.at, &key);
                if let Some(wanted) = &self.report.wanted {
                    let path = at.path();
                    if wanted.contains(&path) {
                        self.report.found.borrow_mut().entry(path).or_insert(ordinal);
                    }
                }
                map.next_value_seed(Seed { at, report: self.report })?
            };
            match object.entry(key) {
                Entry::Occupied(mut seen) => {
                    let path = At::Key(&self.at, seen.key()).path();
                    self.report.duplicates.borrow_mut().push(Duplicate { path, ordinal });
                    seen.insert(value);
                }
                Entry::Vacant(new) => {
                    new.insert(value);
                }
            }
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_as_serde_json_does_keeping_the_last_of_repeated_keys() {
        let body = br#"{"a":1,"b":[true,null,-2,1.5,"x",{"c":{}}],"a":18446744073709551615}"#;
        let (value, dups) = decode(body).unwrap();
        let mut plain: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(value, plain);
        plain["a"] = Value::from(u64::MAX);
        assert_eq!(value, plain);
        assert_eq!(dups, vec![Duplicate { path: "a".into(), ordinal: 3 }]);
    }

    #[test]
    fn repeated_keys_are_reported_with_kube_paths_in_document_order() {
        let body = br#"{"metadata":{"name":"a","name":"b"},"spec":{"containers":[{"image":"x","image":"y"}],"paused":true,"paused":false}}"#;
        let paths: Vec<String> = decode(body).unwrap().1.into_iter().map(|d| d.path).collect();
        assert_eq!(paths, ["metadata.name", "spec.containers[0].image", "spec.paused"]);
        let top: Vec<String> = decode(br#"[{"op":"add"},{"path":"/a","path":"/b"}]"#).unwrap().1.into_iter().map(|d| d.path).collect();
        assert_eq!(top, ["[1].path"]);
    }

    #[test]
    fn ordinals_place_paths_in_the_document() {
        let body = br#"{"z":{"y":1},"a":2}"#;
        let wanted = BTreeSet::from(["a".to_string(), "z.y".to_string(), "q".to_string()]);
        assert_eq!(ordinals(body, &wanted), BTreeMap::from([("z.y".to_string(), 1), ("a".to_string(), 2)]));
    }

    #[test]
    fn bad_json_and_deep_nesting_are_errors() {
        assert!(decode(b"{\"a\":").is_err());
        assert!(decode(b"{} x").is_err());
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(decode(deep.as_bytes()).is_err());
    }
}
