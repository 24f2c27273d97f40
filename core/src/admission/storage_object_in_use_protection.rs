//! StorageObjectInUseProtection: a new persistent volume or claim carries the finalizer that
//! keeps it until nothing uses it (`kubernetes.io/pv-protection`, `kubernetes.io/pvc-protection`).

use serde_json::{Value, json};

use super::{Attributes, Operation, Plugin};
use crate::meta;
use crate::rand::Rng;
use crate::status::ApiError;

#[derive(Debug)]
pub struct StorageObjectInUseProtection;

impl Plugin for StorageObjectInUseProtection {
    fn name(&self) -> &'static str {
        "StorageObjectInUseProtection"
    }

    fn handles(&self, op: Operation) -> bool {
        op == Operation::Create
    }

    fn admit(&self, a: &Attributes, obj: Option<&mut Value>, _rng: &mut Rng) -> Result<(), ApiError> {
        let finalizer = if a.is_core("persistentvolumes") {
            "kubernetes.io/pv-protection"
        } else if a.is_core("persistentvolumeclaims") {
            "kubernetes.io/pvc-protection"
        } else {
            return Ok(());
        };
        let Some(obj) = obj else { return Ok(()) };
        if let Value::Array(finalizers) = meta::object_at(obj, &["metadata"]).entry("finalizers").or_insert_with(|| json!([]))
            && !finalizers.iter().any(|f| f == finalizer)
        {
            finalizers.push(json!(finalizer));
        }
        Ok(())
    }
}
