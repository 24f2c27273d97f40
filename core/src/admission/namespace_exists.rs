//! NamespaceExists (off by default): nothing is created, updated or deleted in a namespace
//! that does not exist (kube's 404 for the namespace).

use serde_json::Value;

use super::{Attributes, Lookup, Operation, Pending, Plugin};
use crate::status::{ApiError, GroupResource};

#[derive(Debug)]
pub struct NamespaceExists;

impl Plugin for NamespaceExists {
    fn name(&self) -> &'static str {
        "NamespaceExists"
    }

    fn handles(&self, _op: Operation) -> bool {
        true
    }

    fn lookups(&self, request: &Pending) -> Vec<Lookup> {
        match request.namespace {
            Some(ns) if request.info.namespaced && !ns.is_empty() => vec![Lookup::Namespace(ns.to_string())],
            _ => Vec::new(),
        }
    }

    fn validate(&self, a: &Attributes, _obj: Option<&Value>, _warnings: &mut Vec<String>) -> Result<(), ApiError> {
        if a.namespace.is_empty() {
            return Ok(());
        }
        // Deletes are not looked up: the object deleted was found, and its namespace with it.
        match &a.found.namespace {
            Some((name, None)) if name == a.namespace => Err(ApiError::not_found(&GroupResource::new("", "namespaces"), a.namespace)),
            _ => Ok(()),
        }
    }
}
