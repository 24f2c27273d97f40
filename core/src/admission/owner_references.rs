//! OwnerReferencesPermissionEnforcement (off by default): who changes an object's
//! `metadata.ownerReferences` must be allowed to delete the object (on updates: a creator could
//! have not created it), and who sets `blockOwnerDeletion` on a reference must be allowed to
//! update the owner's `finalizers` (kube's `gc` plugin; it only validates). An authorization
//! webhook the chain needs is asked during the write (which waits for its answer).

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Answers, Attributes, Halt, Operation, Plugin};
use crate::authz::{Attributes as Asked, Decision};
use crate::meta;

#[derive(Debug)]
pub struct OwnerReferencesPermissionEnforcement;

fn owner_references(obj: Option<&Value>) -> &[Value] {
    obj.and_then(|o| meta::at(o, &["metadata", "ownerReferences"])).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn blocks(reference: &Value) -> bool {
    reference.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true)
}

fn field<'a>(reference: &'a Value, name: &str) -> &'a str {
    reference.get(name).and_then(Value::as_str).unwrap_or_default()
}

/// Go's `%v` of a decision's error: `<nil>` for none.
fn go_error(decision: &Decision) -> &str {
    if decision.error.is_empty() { "<nil>" } else { &decision.error }
}

/// The references that block their owner's deletion and did not before: new ones (by uid)
/// and those that did not block (kube's `newBlockingOwnerDeletionRefs`).
fn newly_blocking<'a>(new: &'a [Value], old: &[Value]) -> Vec<&'a Value> {
    let before: BTreeMap<&str, &Value> = old.iter().map(|r| (field(r, "uid"), r)).collect();
    new.iter().filter(|r| blocks(r) && before.get(field(r, "uid")).is_none_or(|o| !blocks(o))).collect()
}

/// What updating a reference's owner's `finalizers` is asked as: one question for each
/// resource the owner's kind is served as (kube's RESTMappings of its group and version), or
/// kube's `NoKindMatchError` for none.
fn finalizer_updates(a: &Attributes, reference: &Value) -> Result<Vec<Asked>, String> {
    let (api_version, kind) = (field(reference, "apiVersion"), field(reference, "kind"));
    let (group, version) = match api_version.split('/').collect::<Vec<_>>()[..] {
        [""] | ["", ""] => ("", ""),
        [version] => ("", version),
        [group, version] => (group, version),
        _ => return Err(format!("unexpected GroupVersion string: {api_version}")),
    };
    let resources = a.catalog.into_iter().flat_map(|c| c.resources());
    let mapped: Vec<Asked> = resources
        .filter(|r| r.info.group == group && r.info.kind == kind && (version.is_empty() || r.info.version == version))
        .map(|r| {
            let namespace = if r.info.namespaced { a.namespace } else { "" };
            Asked { version: r.info.version.clone(), ..Asked::resource("update", group, &r.info.resource, "finalizers", namespace, field(reference, "name")) }
        })
        .collect();
    if !mapped.is_empty() {
        return Ok(mapped);
    }
    Err(match version {
        "" => format!("no matches for kind {kind:?} in group {group:?}"),
        _ => format!("no matches for kind {kind:?} in version {api_version:?}"),
    })
}

impl Plugin for OwnerReferencesPermissionEnforcement {
    fn name(&self) -> &'static str {
        "OwnerReferencesPermissionEnforcement"
    }

    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Update)
    }

    fn validate_asking(&self, a: &Attributes, obj: Option<&mut Value>, _answers: &Answers, _warnings: &mut Vec<String>) -> Result<(), Halt> {
        let obj = obj.as_deref();
        // Old kubelets write pods' status with what they read; its strategy keeps the rest.
        if a.info.group.is_empty() && a.info.resource == "pods" && a.subresource == Some("status") {
            return Ok(());
        }
        let (new, old) = (owner_references(obj), owner_references(a.old));
        if obj.is_none() || (a.old.is_some() && new == old) || (a.old.is_none() && new.is_empty()) {
            return Ok(());
        }
        if a.operation == Operation::Update {
            let mut delete = Asked::resource("delete", &a.info.group, &a.info.resource, a.subresource.unwrap_or_default(), a.namespace, a.name);
            delete.version = a.info.version.clone();
            let decision = a.decide(&delete)?;
            if !decision.allowed {
                return Err(a
                    .forbidden(&format!("cannot set an ownerRef on a resource you can't delete: {}, {}", decision.reason, go_error(&decision)))
                    .into());
            }
        }
        let blocking = newly_blocking(new, old);
        if blocking.is_empty() {
            return Ok(());
        }
        // Who may update every resource's finalizers is not asked of each owner.
        let anything = Asked { version: "*".into(), ..Asked::resource("update", "*", "*", "finalizers", "", "*") };
        if a.decide(&anything)?.allowed {
            return Ok(());
        }
        for reference in blocking {
            let questions = finalizer_updates(a, reference).map_err(|e| {
                let (api_version, kind) = (field(reference, "apiVersion"), field(reference, "kind"));
                a.forbidden(&format!(
                    "cannot set blockOwnerDeletion in this case because cannot find RESTMapping for APIVersion {api_version} Kind {kind}: {e}"
                ))
            })?;
            for q in questions {
                let decision = a.decide(&q)?;
                if !decision.allowed {
                    return Err(a
                        .forbidden(&format!(
                            "cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: {}, {}",
                            decision.reason,
                            go_error(&decision)
                        ))
                        .into());
                }
            }
        }
        Ok(())
    }
}
