//! NamespaceAutoProvision (off by default): a create in a namespace that does not exist first
//! has the server create that namespace, as kube's plugin does through the server's loopback
//! client, when the create's mutating admission starts. The namespace's create is a request of
//! its own (`system:apiserver`, through the namespace's own admission); the create waits for
//! it, goes on if the namespace was created or already exists, and is refused with kube's 403
//! otherwise (see [`Plugin::provision`]). A dry run creates nothing.

use serde_json::json;

use super::{Found, Lookup, Operation, Pending, Plugin, Provision};

#[derive(Debug)]
pub struct NamespaceAutoProvision;

impl Plugin for NamespaceAutoProvision {
    fn name(&self) -> &'static str {
        "NamespaceAutoProvision"
    }

    fn handles(&self, op: Operation) -> bool {
        op == Operation::Create
    }

    fn lookups(&self, request: &Pending) -> Vec<Lookup> {
        match namespace(request) {
            Some(ns) => vec![Lookup::Namespace(ns.to_string())],
            None => Vec::new(),
        }
    }

    fn provision(&self, request: &Pending, found: &Found) -> Option<Provision> {
        let ns = namespace(request).filter(|_| !request.dry_run)?;
        match &found.namespace {
            Some((name, Some(_))) if name == ns => None,
            _ => Some(Provision {
                path: "/api/v1/namespaces".into(),
                resource: "namespaces".into(),
                name: ns.to_string(),
                lookup: Lookup::Namespace(ns.to_string()),
                object: json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            }),
        }
    }
}

/// The namespace a create writes in (only namespaced objects have one, so never a Namespace).
fn namespace<'a>(request: &Pending<'a>) -> Option<&'a str> {
    request.namespace.filter(|ns| request.operation == Operation::Create && request.info.namespaced && !ns.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{Settings, catalog};

    fn pending<'a>(info: &'a crate::catalog::ResourceInfo, operation: Operation, namespace: Option<&'a str>, dry_run: bool) -> Pending<'a> {
        Pending { operation, info, subresource: None, namespace, name: None, object: None, dry_run }
    }

    #[test]
    fn a_create_in_a_missing_namespace_has_it_created_first() {
        let catalog = catalog(&Settings::default());
        let pods = &catalog.get("", "v1", "pods").unwrap().info;
        let namespaces = &catalog.get("", "v1", "namespaces").unwrap().info;
        let p = NamespaceAutoProvision;
        let create = pending(pods, Operation::Create, Some("team"), false);
        assert_eq!(p.lookups(&create), vec![Lookup::Namespace("team".into())]);
        let missing = Found { namespace: Some(("team".into(), None)), ..Default::default() };
        let wanted = p.provision(&create, &missing).unwrap();
        assert_eq!((wanted.path.as_str(), wanted.resource.as_str(), wanted.name.as_str()), ("/api/v1/namespaces", "namespaces", "team"));
        assert_eq!(wanted.lookup, Lookup::Namespace("team".into()));
        assert_eq!(wanted.object, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}));
        let there = Found { namespace: Some(("team".into(), Some(std::sync::Arc::new(json!({"metadata": {"name": "team"}}))))), ..Default::default() };
        assert_eq!(p.provision(&create, &there), None);
        // A dry run creates nothing; nor do other operations, or writes of what has no namespace.
        assert_eq!(p.provision(&pending(pods, Operation::Create, Some("team"), true), &missing), None);
        assert_eq!(p.provision(&pending(pods, Operation::Update, Some("team"), false), &missing), None);
        assert!(p.lookups(&pending(pods, Operation::Update, Some("team"), false)).is_empty());
        assert_eq!(p.provision(&pending(namespaces, Operation::Create, None, false), &Found::default()), None);
    }
}
