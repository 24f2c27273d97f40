//! PersistentVolumeClaimResize: a claim's storage request grows only when the claim is bound
//! and its StorageClass allows volume expansion, as kube v1.33 checks it.

use serde_json::Value;

use super::{Attributes, Lookup, Operation, Pending, Plugin};
use crate::meta;
use crate::quantity::Quantity;
use crate::status::ApiError;

#[derive(Debug)]
pub struct PersistentVolumeClaimResize;

/// The storage a claim asks for (zero without a request).
fn size(claim: &Value) -> Quantity {
    meta::str_at(claim, &["spec", "resources", "requests", "storage"])
        .and_then(Quantity::parse)
        .unwrap_or(Quantity::from_i64(0, crate::quantity::Format::DecimalSI))
}

/// A claim's class: the beta annotation's, else `storageClassName`.
fn class(claim: &Value) -> &str {
    meta::str_at(claim, &["metadata", "annotations", "volume.beta.kubernetes.io/storage-class"])
        .or_else(|| meta::str_at(claim, &["spec", "storageClassName"]))
        .unwrap_or_default()
}

impl Plugin for PersistentVolumeClaimResize {
    fn name(&self) -> &'static str {
        "PersistentVolumeClaimResize"
    }

    fn handles(&self, op: Operation) -> bool {
        op == Operation::Update
    }

    fn lookups(&self, request: &Pending) -> Vec<Lookup> {
        let claims = request.info.group.is_empty() && request.info.resource == "persistentvolumeclaims" && request.subresource.is_none();
        if claims && request.operation == Operation::Update { vec![Lookup::StorageClasses] } else { Vec::new() }
    }

    fn validate(&self, a: &Attributes, obj: Option<&Value>, _warnings: &mut Vec<String>) -> Result<(), ApiError> {
        let (Some(claim), Some(old)) = (obj.filter(|_| a.is_core("persistentvolumeclaims")), a.old) else { return Ok(()) };
        if size(claim) <= size(old) {
            return Ok(());
        }
        if meta::str_at(old, &["status", "phase"]) != Some("Bound") {
            return Err(a.forbidden("Only bound persistent volume claims can be expanded"));
        }
        let name = class(claim);
        let expandable = !name.is_empty()
            && name == class(old)
            && a.found.storage_classes.iter().any(|c| meta::name(c) == name && c.get("allowVolumeExpansion").and_then(Value::as_bool) == Some(true));
        if !expandable {
            return Err(a.forbidden("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"));
        }
        Ok(())
    }
}
