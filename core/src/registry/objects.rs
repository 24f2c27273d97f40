//! How objects are kept in storage: JSON without `metadata.resourceVersion`, which is the key's
//! `mod_revision` and is set again whenever an object is read.

use bytes::Bytes;
use serde_json::Value;

use crate::catalog::Resource;
use crate::kv::KeyValue;
use crate::meta;
use crate::status::ApiError;

/// The bytes stored for an object.
pub fn encode_for_storage(res: &Resource, obj: &Value) -> Bytes {
    let mut obj = res.strategy.stored_from_served(obj.clone());
    meta::remove_meta(&mut obj, "resourceVersion");
    meta::remove_meta(&mut obj, "selfLink");
    Bytes::from(serde_json::to_vec(&obj).expect("JSON trees always serialize"))
}

/// The object stored in `kv`, as served, with its resourceVersion.
pub fn decode_stored(res: &Resource, kv: &KeyValue) -> Result<Value, ApiError> {
    let stored: Value = serde_json::from_slice(&kv.value)
        .map_err(|e| ApiError::internal(format!("stored object at {} is not valid JSON: {e}", String::from_utf8_lossy(&kv.key))))?;
    let mut obj = res.strategy.served_from_stored(stored);
    set_resource_version(&mut obj, kv.mod_revision);
    Ok(obj)
}

pub fn set_resource_version(obj: &mut Value, rv: i64) {
    meta::set_meta(obj, "resourceVersion", Value::String(rv.to_string()));
}
