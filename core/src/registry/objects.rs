//! How objects are kept in storage: JSON without `metadata.resourceVersion`, which is the key's
//! `mod_revision` and is set again whenever an object is read.

use bytes::Bytes;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::catalog::Resource;
use crate::kv::KeyValue;
use crate::meta;
use crate::status::ApiError;

/// The bytes stored for an object.
pub fn encode_for_storage(res: &Resource, obj: &Value) -> Bytes {
    let converted = res.strategy.stored_from_served(obj);
    let obj = converted.as_ref().unwrap_or(obj);
    Bytes::from(serde_json::to_vec(&Stored::Object(obj)).expect("JSON trees always serialize"))
}

/// An object written as stored, without `metadata.resourceVersion` and `metadata.selfLink`,
/// without copying it first (a write's object is encoded for storage on every attempt).
enum Stored<'a> {
    Object(&'a Value),
    Metadata(&'a Value),
    Other(&'a Value),
}

impl Serialize for Stored<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Stored::Object(Value::Object(m)) => s.collect_map(m.iter().map(|(k, v)| (k, if k == "metadata" { Stored::Metadata(v) } else { Stored::Other(v) }))),
            Stored::Metadata(Value::Object(m)) => s.collect_map(m.iter().filter(|(k, _)| *k != "resourceVersion" && *k != "selfLink")),
            Stored::Object(v) | Stored::Metadata(v) | Stored::Other(v) => v.serialize(s),
        }
    }
}

/// The object stored in `kv`, as served, with its resourceVersion.
pub fn decode_stored(res: &Resource, kv: &KeyValue) -> Result<Value, ApiError> {
    let stored: Value = serde_json::from_slice(&kv.value)
        .map_err(|e| ApiError::internal(format!("stored object at {} is not valid JSON: {e}", String::from_utf8_lossy(&kv.key))))?;
    let mut obj = res.strategy.served_from_stored(stored);
    set_resource_version(&mut obj, kv.mod_revision);
    Ok(obj)
}

/// A stored object as served, read without building its whole tree (the watch cache reads
/// every object written and every object of its initial LIST).
pub struct Served {
    /// The stored bytes with `metadata.resourceVersion` added where serde_json's sorted map puts
    /// it, so for what kapi stored they are the bytes of `decode_stored`'s object.
    pub json: Vec<u8>,
    /// The object's parts at the paths asked for, and nothing else.
    pub parts: Value,
}

/// [`Served`] for the stored bytes of a resource that stores objects as served; `None` when
/// they are not a JSON object with one metadata object, or already hold a resourceVersion.
pub fn serve_stored(stored: &[u8], rv: i64, paths: &[&str]) -> Option<Served> {
    let top: Entries = serde_json::from_slice(stored).ok()?;
    let mut metas = top.0.iter().filter(|(k, _)| k.as_str() == "metadata");
    let (_, meta_raw) = metas.next()?;
    if metas.next().is_some() {
        return None;
    }
    let metadata: Entries = serde_json::from_str(meta_raw.get()).ok()?;
    if metadata.0.iter().any(|(k, _)| k.as_str() == "resourceVersion") {
        return None;
    }
    let offset = |raw: &str| raw.as_ptr() as usize - stored.as_ptr() as usize;
    let entry = format!("\"resourceVersion\":\"{rv}\"");
    let (at, insert) = match metadata.0.iter().take_while(|(k, _)| k.as_str() < "resourceVersion").last() {
        Some((_, before)) => (offset(before.get()) + before.get().len(), format!(",{entry}")),
        None if metadata.0.is_empty() => (offset(meta_raw.get()) + 1, entry),
        None => (offset(meta_raw.get()) + 1, format!("{entry},")),
    };
    let mut json = Vec::with_capacity(stored.len() + insert.len());
    json.extend_from_slice(&stored[..at]);
    json.extend_from_slice(insert.as_bytes());
    json.extend_from_slice(&stored[at..]);
    Some(Served { json, parts: pick(&top, paths) })
}

/// The parts of an object at `paths` (dotted, relative to it), decoded; nothing else.
fn pick(entries: &Entries, paths: &[&str]) -> Value {
    let mut out = Map::new();
    for (k, raw) in &entries.0 {
        let k = k.as_str();
        let below: Vec<&str> = paths
            .iter()
            .filter_map(|p| match p.split_once('.') {
                Some((head, rest)) if head == k => Some(rest),
                None if *p == k => Some(""),
                _ => None,
            })
            .collect();
        if below.is_empty() {
            continue;
        }
        let inner = if below.contains(&"") { None } else { serde_json::from_str::<Entries>(raw.get()).ok() };
        let value = match inner {
            Some(inner) => pick(&inner, &below),
            // The whole value, or one that is not an object: what a reader of the path sees.
            None => serde_json::from_str(raw.get()).unwrap_or(Value::Null),
        };
        out.insert(k.to_string(), value);
    }
    Value::Object(out)
}

/// A JSON object's members in order, their values left as text.
struct Entries<'a>(Vec<(Key<'a>, &'a RawValue)>);

/// An object member's name: borrowed unless it had escapes.
enum Key<'a> {
    Borrowed(&'a str),
    Owned(String),
}

impl Key<'_> {
    fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(s) => s,
            Key::Owned(s) => s,
        }
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::Borrowed(s))
            }
            fn visit_str<E>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key::Owned(s.to_string()))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for Entries<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries<'de>, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    out.push(entry);
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(V)
    }
}

pub fn set_resource_version(obj: &mut Value, rv: i64) {
    meta::set_meta(obj, "resourceVersion", Value::String(rv.to_string()));
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resources::{Settings, catalog};

    #[test]
    fn storage_drops_only_the_objects_own_resource_version_and_self_link() {
        let deployments = catalog(&Settings::default()).get("apps", "v1", "deployments").expect("built in").clone();
        let obj = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "resourceVersion": "7", "selfLink": "/x", "uid": "u"},
            "spec": {"template": {"metadata": {"resourceVersion": "kept", "labels": {"a": "b"}}}},
        });
        let stored: Value = serde_json::from_slice(&encode_for_storage(&deployments, &obj)).unwrap();
        let mut want = obj.clone();
        meta::remove_meta(&mut want, "resourceVersion");
        meta::remove_meta(&mut want, "selfLink");
        assert_eq!(stored, want);
        assert_eq!(encode_for_storage(&deployments, &obj), Bytes::from(serde_json::to_vec(&want).unwrap()), "the same bytes as the object without them");
    }
}
