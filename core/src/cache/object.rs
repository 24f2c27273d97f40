//! One object as the watch cache keeps it: encoded once, with what selectors need at hand.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::Value;

use crate::apiextensions::Converted;
use crate::catalog::{FieldName, Resource, field};
use crate::kv::{KeyValue, Revision};
use crate::meta;
use crate::registry::objects::{Unconverted, decode_converted, serve_stored, set_resource_version};
use crate::schema::schema;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;

/// The largest object [`CachedObject::shared`] keeps parsed, in bytes of JSON.
const KEPT_PARSED_BELOW: usize = 64 * 1024;

#[derive(Debug)]
pub struct CachedObject {
    pub key: Bytes,
    pub rv: Revision,
    pub namespace: String,
    pub name: String,
    pub labels: Vec<(String, String)>,
    /// Values of the resource's selectable fields.
    pub fields: Vec<(FieldName, String)>,
    /// The object as served, `resourceVersion` included: the bytes every JSON reader shares.
    pub json: Bytes,
    /// The object in kube's protobuf envelope, encoded on first use.
    proto: OnceLock<Result<Bytes, String>>,
    /// The object as [`Self::value`] gives it, parsed on first use of [`Self::shared`].
    parsed: OnceLock<Arc<Value>>,
}

impl CachedObject {
    /// The object stored in `kv`, as the resource serves it. Where storage holds objects as
    /// served, the stored bytes are served with the resourceVersion spliced in, and only what
    /// selectors read is decoded. An object a webhook has to convert first is an error: see
    /// [`Self::from_kv_converted`].
    pub fn from_kv(res: &Resource, kv: &KeyValue) -> Result<CachedObject, String> {
        Self::from_kv_converted(res, kv, &Converted::default()).map_err(|e| e.message)?.map_err(|_| "the object needs its conversion webhook".to_string())
    }

    /// [`Self::from_kv`] where a webhook converts the resource's objects: with its answers in
    /// `converted`, or the object to ask it for.
    pub fn from_kv_converted(res: &Resource, kv: &KeyValue, converted: &Converted) -> Result<Result<CachedObject, Unconverted>, ApiError> {
        if res.strategy.stored_as_served() {
            let mut paths = vec!["apiVersion", "metadata.name", "metadata.namespace", "metadata.labels"];
            paths.extend(res.strategy.selectable_fields().iter().map(|f| res.strategy.field_path(f)));
            // An object stored at another version (a CRD's storage version changed) is
            // converted.
            if let Some(s) =
                serve_stored(&kv.value, kv.mod_revision, &paths).filter(|s| s.parts.get("apiVersion").and_then(Value::as_str) == Some(&res.info.api_version()))
            {
                return Ok(Ok(Self::with_json(res, kv.key.clone(), kv.mod_revision, &s.parts, s.json)));
            }
        }
        Ok(decode_converted(res, kv, converted)?.map(|obj| Self::new(res, kv.key.clone(), kv.mod_revision, &obj)))
    }

    pub fn new(res: &Resource, key: Bytes, rv: Revision, obj: &Value) -> CachedObject {
        Self::with_json(res, key, rv, obj, crate::codec::json::to_vec(obj))
    }

    /// The object encoded as `json`, with what selectors need taken from `obj` (the object, or
    /// just the parts selectors read).
    fn with_json(res: &Resource, key: Bytes, rv: Revision, obj: &Value, json: Vec<u8>) -> CachedObject {
        let labels = meta::labels(obj).into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut fields = vec![(field("metadata.name"), meta::name(obj).to_string())];
        if res.info.namespaced {
            fields.push((field("metadata.namespace"), meta::namespace(obj).to_string()));
        }
        for f in res.strategy.selectable_fields() {
            fields.push((f.clone(), res.strategy.field_value(obj, f).unwrap_or_default()));
        }
        CachedObject {
            key,
            rv,
            namespace: meta::namespace(obj).to_string(),
            name: meta::name(obj).to_string(),
            labels,
            fields,
            json: Bytes::from(exact(json)),
            proto: OnceLock::new(),
            parsed: OnceLock::new(),
        }
    }

    /// The same object at another resourceVersion (the last state of a deleted object carries
    /// the deletion's revision).
    pub fn at_revision(&self, res: &Resource, rv: Revision) -> CachedObject {
        let mut obj = self.value();
        set_resource_version(&mut obj, rv);
        Self::new(res, self.key.clone(), rv, &obj)
    }

    /// The object, without the `null`s kube writes for zero values.
    pub fn value(&self) -> Value {
        let mut v = serde_json::from_slice(&self.json).expect("cached JSON was encoded from a JSON tree");
        crate::schema::normalize::drop_nulls(&mut v);
        v
    }

    /// The object as [`Self::value`] gives it, parsed once and kept as long as this revision
    /// is: for the few small objects read for every request that names them (a namespace and
    /// a service account are looked up for every write in them, an account for every request
    /// its tokens make), not for what may be many or large.
    pub fn shared(&self) -> Arc<Value> {
        // A large one (an account with many annotations) is parsed for each reader instead.
        if self.json.len() > KEPT_PARSED_BELOW {
            return Arc::new(self.value());
        }
        self.parsed.get_or_init(|| Arc::new(self.value())).clone()
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

/// The same key at the same revision is the same object (what compares two states of a
/// cache without reading the objects).
impl PartialEq for CachedObject {
    fn eq(&self, other: &Self) -> bool {
        self.rv == other.rv && self.key == other.key
    }
}

impl Eq for CachedObject {}

/// `v` without its spare capacity: an encoder's buffer grows by doubling, and a cached object
/// keeps its bytes for as long as it lives (up to 1.6x the JSON's size across 50,000 pods).
fn exact(mut v: Vec<u8>) -> Vec<u8> {
    v.shrink_to_fit();
    v
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::registry::{decode_stored, encode_stored};
    use crate::resources::{Settings, catalog};

    fn stored_kv(value: &[u8]) -> KeyValue {
        KeyValue {
            key: Bytes::from_static(b"/registry/x/ns/a"),
            value: Bytes::copy_from_slice(value),
            create_revision: 3,
            mod_revision: 42,
            version: 1,
            lease: 0,
        }
    }

    /// What the cache would hold had it decoded the stored object whole.
    fn decoded(res: &Resource, kv: &KeyValue) -> CachedObject {
        CachedObject::new(res, kv.key.clone(), kv.mod_revision, &decode_stored(res, kv).expect("decodes"))
    }

    fn assert_same(fast: &CachedObject, slow: &CachedObject) {
        assert_eq!(String::from_utf8_lossy(&fast.json), String::from_utf8_lossy(&slow.json));
        assert_eq!((&fast.name, &fast.namespace, &fast.labels, &fast.fields), (&slow.name, &slow.namespace, &slow.labels, &slow.fields));
    }

    #[test]
    fn stored_objects_are_served_with_their_resource_version_spliced_in() {
        let cat = catalog(&Settings::default());
        let managed = json!([{"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]);
        let objects = [
            (
                "",
                "v1",
                "pods",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "ns", "labels": {"app": "x"}, "managedFields": managed, "uid": "u"},
                "spec": {"nodeName": "n1", "restartPolicy": "Always", "hostNetwork": true, "containers": [{"name": "c", "image": "i"}]}, "status": {"phase": "Running", "podIP": "10.0.0.1"}}),
            ),
            ("", "v1", "nodes", json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {"unschedulable": true}})),
            ("batch", "v1", "jobs", json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns"}, "status": {"succeeded": 2}})),
            (
                "",
                "v1",
                "events",
                json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "ns"}, "involvedObject": {"kind": "Pod", "name": "a"}, "reason": "Started", "source": {"component": "kubelet"}, "type": "Normal"}),
            ),
            (
                "",
                "v1",
                "secrets",
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "ns"}, "type": "Opaque", "data": {"k": "dg=="}}),
            ),
            (
                "",
                "v1",
                "services",
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "ns", "annotations": {"a\"b": "c"}}, "spec": {"clusterIP": "10.0.0.10", "type": "ClusterIP"}}),
            ),
            ("", "v1", "configmaps", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}, "data": {"k": "v"}})),
            ("", "v1", "configmaps", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"uid": "u"}})),
        ];
        for (group, version, resource, obj) in objects {
            let res = cat.get(group, version, resource).expect("built in");
            let kv = stored_kv(&encode_stored(res, &obj).0);
            assert_same(&CachedObject::from_kv(res, &kv).unwrap(), &decoded(res, &kv));
        }
    }

    #[test]
    fn stored_bytes_from_other_writers_are_served_as_the_same_object() {
        let res = catalog(&Settings::default()).get("", "v1", "configmaps").expect("built in").clone();
        // Indented, unsorted, with escapes: only the key order and spacing may differ.
        let stored =
            b"{ \"metadata\" : { \"uid\": \"u\", \"name\": \"a\\u0062\", \"labels\": {\"k\": \"v\"} },\n \"kind\": \"ConfigMap\", \"apiVersion\": \"v1\" }";
        let kv = stored_kv(stored);
        let (fast, slow) = (CachedObject::from_kv(&res, &kv).unwrap(), decoded(&res, &kv));
        assert_eq!(fast.value(), slow.value());
        assert_eq!((&fast.name, &fast.labels), (&slow.name, &slow.labels));
        // A stored resourceVersion, or no metadata, and the object is decoded whole.
        for stored in [&b"{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"7\"}}"[..], b"{\"data\":{}}", b"[1]"] {
            assert!(serve_stored(stored, 42, &[]).is_none(), "{}", String::from_utf8_lossy(stored));
        }
        let with_rv = stored_kv(b"{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"7\"}}");
        assert_eq!(CachedObject::from_kv(&res, &with_rv).unwrap().value()["metadata"]["resourceVersion"], "42");
    }
}
