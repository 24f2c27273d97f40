//! NamespaceLifecycle: nothing is created in a namespace that does not exist (kube's 404 for
//! it) or is being terminated (kube's 403 with its `NamespaceTerminating` cause), and the
//! namespaces kube needs cannot be deleted.

use serde_json::Value;

use super::{Attributes, Lookup, Operation, Pending, Plugin};
use crate::meta;
use crate::rand::Rng;
use crate::status::{ApiError, GroupResource, StatusCause};

/// Namespaces that can never be deleted.
pub const IMMORTAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

#[derive(Debug)]
pub struct NamespaceLifecycle;

impl Plugin for NamespaceLifecycle {
    fn name(&self) -> &'static str {
        "NamespaceLifecycle"
    }

    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Update | Operation::Delete)
    }

    fn lookups(&self, request: &Pending) -> Vec<Lookup> {
        match (request.operation, request.info.namespaced, request.namespace) {
            (Operation::Create, true, Some(ns)) => vec![Lookup::Namespace(ns.to_string())],
            _ => Vec::new(),
        }
    }

    fn admit(&self, a: &Attributes, _obj: Option<&mut Value>, _rng: &mut Rng) -> Result<(), ApiError> {
        let namespaces = a.info.group.is_empty() && a.info.resource == "namespaces";
        if a.operation == Operation::Delete && namespaces && IMMORTAL_NAMESPACES.contains(&a.name) {
            return Err(a.forbidden("this namespace may not be deleted"));
        }
        if a.operation != Operation::Create || namespaces {
            return Ok(());
        }
        let Some((ns_name, ns)) = &a.found.namespace else { return Ok(()) };
        match ns {
            None => Err(ApiError::not_found(&GroupResource::new("", "namespaces"), ns_name)),
            Some(n) if meta::str_at(n, &["status", "phase"]) == Some("Terminating") || meta::deletion_timestamp(n).is_some() => {
                let mut e = a.forbidden(&format!("unable to create new content in namespace {} because it is being terminated", meta::name(n)));
                if let Some(d) = e.details.as_mut() {
                    d.causes.push(StatusCause {
                        reason: "NamespaceTerminating".into(),
                        message: format!("namespace {} is being terminated", meta::name(n)),
                        field: "metadata.namespace".into(),
                    });
                }
                Err(e)
            }
            Some(_) => Ok(()),
        }
    }
}
