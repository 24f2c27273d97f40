//! One object as the watch cache keeps it: encoded once, with what selectors need at hand.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::Value;

use crate::catalog::Resource;
use crate::kv::{KeyValue, Revision};
use crate::meta;
use crate::registry::objects::set_resource_version;
use crate::schema::schema;
use crate::selector::{FieldSelector, LabelSelector};

#[derive(Debug)]
pub struct CachedObject {
    pub key: Bytes,
    pub rv: Revision,
    pub namespace: String,
    pub name: String,
    pub labels: Vec<(String, String)>,
    /// Values of the resource's selectable fields.
    pub fields: Vec<(&'static str, String)>,
    /// The object as served, `resourceVersion` included: the bytes every JSON reader shares.
    pub json: Bytes,
    /// The object in kube's protobuf envelope, encoded on first use.
    proto: OnceLock<Result<Bytes, String>>,
}

impl CachedObject {
    /// The object stored in `kv`, as the resource serves it.
    pub fn from_kv(res: &Resource, kv: &KeyValue) -> Result<CachedObject, String> {
        let stored: Value = serde_json::from_slice(&kv.value).map_err(|e| format!("stored object is not JSON: {e}"))?;
        let mut obj = res.strategy.served_from_stored(stored);
        set_resource_version(&mut obj, kv.mod_revision);
        Ok(Self::new(res, kv.key.clone(), kv.mod_revision, &obj))
    }

    pub fn new(res: &Resource, key: Bytes, rv: Revision, obj: &Value) -> CachedObject {
        let labels = meta::labels(obj).into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut fields = vec![("metadata.name", meta::name(obj).to_string())];
        if res.info.namespaced {
            fields.push(("metadata.namespace", meta::namespace(obj).to_string()));
        }
        for f in res.strategy.selectable_fields() {
            fields.push((f, res.strategy.field_value(obj, f).unwrap_or_default()));
        }
        CachedObject {
            key,
            rv,
            namespace: meta::namespace(obj).to_string(),
            name: meta::name(obj).to_string(),
            labels,
            fields,
            json: Bytes::from(exact(serde_json::to_vec(obj).expect("JSON trees serialize"))),
            proto: OnceLock::new(),
        }
    }

    /// The same object at another resourceVersion (the last state of a deleted object carries
    /// the deletion's revision).
    pub fn at_revision(&self, res: &Resource, rv: Revision) -> CachedObject {
        let mut obj = self.value();
        set_resource_version(&mut obj, rv);
        Self::new(res, self.key.clone(), rv, &obj)
    }

    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.json).expect("cached JSON was encoded from a JSON tree")
    }

    pub fn proto(&self) -> Result<Bytes, String> {
        self.proto.get_or_init(|| crate::codec::protobuf::encode(schema(), &self.value()).map(Bytes::from)).clone()
    }

    /// Whether the object passes a label and a field selector (without allocating: this runs
    /// for every watcher of every event and every object of a filtered LIST).
    pub fn matches(&self, labels: &LabelSelector, fields: &FieldSelector) -> bool {
        labels.matches(&self.labels) && fields.matches(&self.fields)
    }
}

pub type Shared = Arc<CachedObject>;

/// `v` without its spare capacity: an encoder's buffer grows by doubling, and a cached object
/// keeps its bytes for as long as it lives (up to 1.6x the JSON's size across 50,000 pods).
fn exact(mut v: Vec<u8>) -> Vec<u8> {
    v.shrink_to_fit();
    v
}
