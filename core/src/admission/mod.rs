//! Built-in admission: the plugins kube-apiserver enables by default that matter for the kinds
//! kapi serves (NamespaceLifecycle, ServiceAccount, Priority, DefaultTolerationSeconds,
//! TaintNodesByCondition).
//!
//! Plugins that read other objects declare what they need ([`lookups`]); the request pipeline
//! reads those keys from storage and hands them over in an [`Admission`], so admission itself
//! stays synchronous and runs inside the registry's transform.

mod pods;

use serde_json::{Value, json};

use crate::catalog::ResourceInfo;
use crate::meta;
use crate::rand::Rng;
use crate::status::{ApiError, GroupResource};

/// Namespaces that can never be deleted.
pub const IMMORTAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

/// An object a request needs to see: admission (a namespace, a service account), or the
/// validation of a service account token (its account, pod, secret or node).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    Namespace(String),
    ServiceAccount { namespace: String, name: String },
    Pod { namespace: String, name: String },
    Secret { namespace: String, name: String },
    Node(String),
}

/// The operation being admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

/// What lookups found: `None` for a missing object.
#[derive(Clone, Debug, Default)]
pub struct Admission {
    /// The namespace a create writes in, and its object if it exists.
    pub namespace: Option<(String, Option<Value>)>,
    pub service_account: Option<Option<Value>>,
}

/// The objects a request needs looked up before it is admitted.
pub fn lookups(info: &ResourceInfo, op: Operation, subresource: Option<&str>, namespace: Option<&str>, obj: Option<&Value>) -> Vec<Lookup> {
    let mut out = Vec::new();
    if let (Operation::Create, true, Some(ns)) = (op, info.namespaced, namespace) {
        out.push(Lookup::Namespace(ns.to_string()));
    }
    if info.group.is_empty()
        && info.resource == "pods"
        && op == Operation::Create
        && subresource.is_none()
        && let (Some(ns), Some(pod)) = (namespace, obj)
        && !pods::is_mirror(pod)
    {
        let sa = meta::str_at(pod, &["spec", "serviceAccountName"]).filter(|s| !s.is_empty()).unwrap_or("default");
        out.push(Lookup::ServiceAccount { namespace: ns.to_string(), name: sa.to_string() });
    }
    out
}

impl Admission {
    /// Notes what a lookup found (`None`: the object does not exist).
    pub fn record(&mut self, lookup: Lookup, found: Option<Value>) {
        match lookup {
            Lookup::Namespace(ns) => self.namespace = Some((ns, found)),
            Lookup::ServiceAccount { .. } => self.service_account = Some(found),
            // What tokens name; admission does not look for it.
            Lookup::Pod { .. } | Lookup::Secret { .. } | Lookup::Node(_) => {}
        }
    }

    /// NamespaceLifecycle: creates need a live namespace.
    pub fn check_namespace(&self, info: &ResourceInfo, name: &str) -> Result<(), ApiError> {
        let Some((ns_name, ns)) = &self.namespace else { return Ok(()) };
        match ns {
            None => Err(ApiError::not_found(&GroupResource::new("", "namespaces"), ns_name)),
            Some(n) if meta::str_at(n, &["status", "phase"]) == Some("Terminating") || meta::deletion_timestamp(n).is_some() => {
                let mut e = ApiError::forbidden(
                    &info.group_resource(),
                    name,
                    &format!("unable to create new content in namespace {} because it is being terminated", meta::name(n)),
                );
                if let Some(d) = e.details.as_mut() {
                    d.causes.push(crate::status::StatusCause {
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

    /// Mutating admission of an object about to be created or updated.
    pub fn mutate(&self, info: &ResourceInfo, op: Operation, subresource: Option<&str>, obj: &mut Value, rng: &mut Rng) -> Result<(), ApiError> {
        if subresource.is_some() {
            return Ok(());
        }
        match (info.group.as_str(), info.resource.as_str(), op) {
            ("", "pods", Operation::Create) => pods::admit_create(self, info, obj, rng),
            ("", "nodes", Operation::Create) => {
                taint_new_node(obj);
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// NamespaceLifecycle: the immortal namespaces cannot be deleted.
pub fn check_delete(info: &ResourceInfo, name: &str) -> Result<(), ApiError> {
    if info.group.is_empty() && info.resource == "namespaces" && IMMORTAL_NAMESPACES.contains(&name) {
        return Err(ApiError::forbidden(&info.group_resource(), name, "this namespace may not be deleted"));
    }
    Ok(())
}

/// TaintNodesByCondition: new nodes are not ready until their kubelet says so.
fn taint_new_node(node: &mut Value) {
    let taint = json!({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"});
    let spec = meta::object_at(node, &["spec"]);
    let taints = spec.entry("taints").or_insert_with(|| json!([]));
    if let Value::Array(a) = taints
        && !a.iter().any(|t| t.get("key") == taint.get("key") && t.get("effect") == taint.get("effect"))
    {
        a.push(taint);
    }
}
