//! How objects are kept in storage: JSON without `metadata.resourceVersion`, which is the key's
//! `mod_revision` and is set again whenever an object is read.

use bytes::Bytes;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::apiextensions::Converted;
use crate::catalog::Resource;
use crate::codec::json;
use crate::kv::KeyValue;
use crate::meta;
use crate::status::ApiError;

/// The bytes stored for an object and, when the resource stores objects as served, where its
/// resourceVersion goes in them to serve it (found while writing, so serving the object just
/// written reads nothing back).
pub fn encode_stored(res: &Resource, obj: &Value) -> (Bytes, Option<Splice>) {
    match res.strategy.stored_from_served(obj) {
        Some(converted) => (write_stored(&converted).0, None),
        None => write_stored(obj),
    }
}

/// `obj` as kube writes it without `metadata.resourceVersion` and `metadata.selfLink`, written
/// without copying it first (a write's object is encoded for storage on every attempt); and where
/// the resourceVersion would go.
pub(super) fn write_stored(obj: &Value) -> (Bytes, Option<Splice>) {
    let mut out = Vec::with_capacity(4096);
    let gap = json::write_without_version(&mut out, obj);
    (Bytes::from(out), gap.map(|g| Splice { at: g.at, comma_before: g.after_member, comma_after: g.before_member }))
}

/// Where `metadata.resourceVersion` goes in an object's stored bytes: at byte `at`, after a
/// member (a comma before it) or before one (a comma after it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Splice {
    at: usize,
    comma_before: bool,
    comma_after: bool,
}

impl Splice {
    /// `stored` with `"resourceVersion":"<rv>"` in place: the served object's JSON.
    pub fn apply(&self, stored: &[u8], rv: i64) -> Vec<u8> {
        let entry = format!("{}\"resourceVersion\":\"{rv}\"{}", if self.comma_before { "," } else { "" }, if self.comma_after { "," } else { "" });
        let mut json = Vec::with_capacity(stored.len() + entry.len());
        json.extend_from_slice(&stored[..self.at]);
        json.extend_from_slice(entry.as_bytes());
        json.extend_from_slice(&stored[self.at..]);
        json
    }
}

/// The object stored in `kv`, as served, with its resourceVersion. For a resource whose
/// objects a webhook converts, only an object stored at the served version: the others need
/// [`decode_converted`].
pub fn decode_stored(res: &Resource, kv: &KeyValue) -> Result<Value, ApiError> {
    decode_converted(res, kv, &Converted::default())?.map_err(|_| ApiError::internal("the object needs its conversion webhook"))
}

/// An object that needs the conversion webhook before it can be read or stored: the bytes
/// [`Converted`] knows it by, and the object.
#[derive(Debug)]
pub struct Unconverted {
    pub input: Bytes,
    pub object: Value,
}

/// The object stored in `kv`, as served, with its resourceVersion; where a webhook converts
/// it, with the answer `converted` holds, or the object to ask the webhook for.
pub fn decode_converted(res: &Resource, kv: &KeyValue, converted: &Converted) -> Result<Result<Value, Unconverted>, ApiError> {
    let mut stored: Value = serde_json::from_slice(&kv.value)
        .map_err(|e| ApiError::internal(format!("stored object at {} is not valid JSON: {e}", String::from_utf8_lossy(&kv.key))))?;
    crate::schema::normalize::drop_nulls(&mut stored);
    let stored = match by_webhook(res, stored, &kv.value, &res.info.api_version(), converted)? {
        Ok(v) => v,
        Err(u) => return Ok(Err(u)),
    };
    let mut obj = res.strategy.served_from_stored(stored);
    set_resource_version(&mut obj, kv.mod_revision);
    Ok(Ok(obj))
}

/// `obj` (known by `input`) at apiVersion `desired`: itself where no webhook converts the
/// resource's objects or it is at that version already, else the webhook's answer in
/// `converted`, or the object to ask it for.
pub fn by_webhook(res: &Resource, obj: Value, input: &Bytes, desired: &str, converted: &Converted) -> Result<Result<Value, Unconverted>, ApiError> {
    if res.strategy.conversion_webhook().is_none() || meta::str_at(&obj, &["apiVersion"]) == Some(desired) {
        return Ok(Ok(obj));
    }
    match converted.get(input, desired) {
        Some(Ok(v)) => Ok(Ok(v.clone())),
        // kube passes the converter's error on as it is: a 500 without a reason.
        Some(Err(e)) => Err(ApiError::new(500, "", e.clone())),
        None => Ok(Err(Unconverted { input: input.clone(), object: obj })),
    }
}

/// A stored object as served, read without building its whole tree (the watch cache reads
/// every object written and every object of its initial LIST).
pub struct Served {
    /// The stored bytes with `metadata.resourceVersion` added where kube writes it, so for what
    /// kapi stored they are the bytes of `decode_stored`'s object as `codec::json` writes it.
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
    // kube writes a built-in kind's `kind` first; an object of no known kind has sorted keys.
    let typed = top.0.first().is_some_and(|(k, _)| k.as_str() == "kind");
    let splice = match metadata.0.iter().take_while(|(k, _)| json::precedes_resource_version(typed, k.as_str())).last() {
        Some((_, before)) => Splice { at: offset(before.get()) + before.get().len(), comma_before: true, comma_after: false },
        None => Splice { at: offset(meta_raw.get()) + 1, comma_before: false, comma_after: !metadata.0.is_empty() },
    };
    Some(Served { json: splice.apply(stored, rv), parts: pick(&top, paths) })
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
        let mut stored: Value = serde_json::from_slice(&encode_stored(&deployments, &obj).0).unwrap();
        crate::schema::normalize::drop_nulls(&mut stored);
        let mut want = obj.clone();
        meta::remove_meta(&mut want, "resourceVersion");
        meta::remove_meta(&mut want, "selfLink");
        assert_eq!(stored, want);
        assert_eq!(encode_stored(&deployments, &obj).0, Bytes::from(json::to_vec(&want)), "the same bytes as the object without them");
    }

    /// The place for the resourceVersion found while writing an object is the one a reader of
    /// its bytes finds, and serving from it gives the object's own JSON, wherever its
    /// metadata's members fall around `resourceVersion`.
    #[test]
    fn an_object_just_stored_is_served_by_splicing_its_resource_version_in() {
        let configmaps = catalog(&Settings::default()).get("", "v1", "configmaps").expect("built in").clone();
        for metadata in [
            json!({}),
            json!({"name": "c"}),
            json!({"uid": "u"}),
            json!({"name": "c", "namespace": "n", "uid": "u", "selfLink": "/x"}),
            json!({"annotations": {"resourceVersion": "no"}, "labels": {"a": "b"}, "name": "c"}),
        ] {
            let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"metadata": "{}"}});
            let (bytes, splice) = encode_stored(&configmaps, &obj);
            let served = splice.expect("configmaps are stored as served").apply(&bytes, 42);
            meta::remove_meta(&mut obj, "selfLink");
            set_resource_version(&mut obj, 42);
            assert_eq!(String::from_utf8(served.clone()).unwrap(), String::from_utf8(json::to_vec(&obj)).unwrap());
            assert_eq!(serve_stored(&bytes, 42, &[]).unwrap().json, served);
        }
    }

    /// Objects of no known kind (kube's unstructured objects) keep sorted keys, and the
    /// resourceVersion goes where sorting puts it.
    #[test]
    fn an_object_of_no_known_kind_is_stored_with_sorted_keys() {
        let configmaps = catalog(&Settings::default()).get("", "v1", "configmaps").expect("built in").clone();
        for metadata in [json!({}), json!({"name": "c", "uid": "u"}), json!({"annotations": {}, "uid": "u"}), json!({"labels": {}})] {
            let mut obj = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": metadata, "spec": {"b": 1, "a": 2}});
            let (bytes, splice) = encode_stored(&configmaps, &obj);
            let served = splice.expect("stored as served").apply(&bytes, 42);
            set_resource_version(&mut obj, 42);
            assert_eq!(String::from_utf8(served.clone()).unwrap(), serde_json::to_string(&obj).unwrap());
            assert_eq!(serve_stored(&bytes, 42, &[]).unwrap().json, served);
        }
    }
}
