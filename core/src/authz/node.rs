//! kube's Node authorizer (`--authorization-mode=Node`): what a kubelet, as
//! `system:node:<name>` in `system:nodes`, may do. It allows or has no opinion, never denies:
//! reads of secrets, config maps, claims, volumes and service account tokens only for what
//! pods bound to its node need (the [`NodeGraph`]); its own Node, lease and CSINode; pods
//! with a `spec.nodeName=<node>` field selector; and the rest of the `system:node` rules of
//! kube's bootstrap policy, read from kapi's copy of it (as kube reads its own, so that an
//! edit of the stored ClusterRole changes nothing here). Reasons are kube's, word for word.

use std::sync::OnceLock;

use super::graph::{NodeGraph, Vertex};
use super::rbac::{Kind, Rule};
use super::{Attributes, Verdict};
use crate::auth::UserInfo;
use crate::status::quote;

/// The group every node's user is in (`user.NodesGroup`).
pub const NODES_GROUP: &str = "system:nodes";
const NODE_USER_PREFIX: &str = "system:node:";

/// The node a user is, when it is one: its name starts `system:node:` and it is in
/// `system:nodes` (kube's default `NodeIdentifier`); the name may be empty.
pub fn node_of(user: &UserInfo) -> Option<&str> {
    let name = user.name.strip_prefix(NODE_USER_PREFIX)?;
    user.groups.iter().any(|g| g == NODES_GROUP).then_some(name)
}

/// The rules of the `system:node` ClusterRole of the bootstrap policy (kube's `NodeRules()`).
fn node_rules() -> &'static [Rule] {
    static RULES: OnceLock<Vec<Rule>> = OnceLock::new();
    RULES.get_or_init(|| {
        super::bootstrap::policy()
            .into_iter()
            .find(|o| o.kind == Kind::ClusterRole && o.object["metadata"]["name"] == "system:node")
            .and_then(|o| o.object.get("rules").and_then(|r| r.as_array()).map(|r| r.iter().map(Rule::read).collect()))
            .unwrap_or_default()
    })
}

type Said = (Verdict, String);

fn allow() -> Said {
    (Verdict::Allow, String::new())
}

fn no(reason: impl Into<String>) -> Said {
    (Verdict::NoOpinion, reason.into())
}

/// The Node authorizer's answer on `user` doing `a`, with `graph` as it is now.
pub fn authorize(graph: &NodeGraph, user: &UserInfo, a: &Attributes) -> Said {
    let Some(node) = node_of(user) else { return no("") };
    if node.is_empty() {
        return no(format!("unknown node for user {}", quote(&user.name)));
    }
    if !a.resource_request {
        return no("");
    }
    let graph = Graph { graph, node, a };
    match (a.group.as_str(), a.resource.as_str()) {
        ("", "secrets") => graph.read_namespaced(Vertex::Secret),
        ("", "configmaps") => graph.read_namespaced(Vertex::ConfigMap),
        ("", "persistentvolumeclaims") if a.subresource == "status" => match a.verb.as_str() {
            "update" | "patch" => graph.path(Vertex::PersistentVolumeClaim),
            _ => no("can only get/update/patch this type"),
        },
        ("", "persistentvolumeclaims") => graph.get(Vertex::PersistentVolumeClaim),
        ("", "persistentvolumes") => graph.get(Vertex::PersistentVolume),
        ("resource.k8s.io", "resourceclaims") => graph.get(Vertex::ResourceClaim),
        ("storage.k8s.io", "volumeattachments") => graph.get(Vertex::VolumeAttachment),
        ("", "serviceaccounts") => service_account(&graph),
        ("coordination.k8s.io", "leases") => lease(node, a),
        ("storage.k8s.io", "csinodes") => csi_node(node, a),
        ("resource.k8s.io", "resourceslices") => resource_slice(node, a),
        ("", "nodes") => own_node(node, a),
        ("", "pods") => pods(&graph),
        _ if node_rules().iter().any(|r| r.allows(a)) => allow(),
        _ => no(""),
    }
}

/// A question the graph answers, for one node.
struct Graph<'a> {
    graph: &'a NodeGraph,
    node: &'a str,
    a: &'a Attributes,
}

impl Graph<'_> {
    /// kube's `authorize`: whether a path leads from the named object to the node.
    fn path(&self, vertex: Vertex) -> Said {
        if self.a.name.is_empty() {
            return no("No Object name found");
        }
        if self.graph.reaches(vertex, &self.a.namespace, &self.a.name, self.node) {
            return allow();
        }
        no(format!("no relationship found between node '{}' and this object", self.node))
    }

    /// kube's `authorizeGet`.
    fn get(&self, vertex: Vertex) -> Said {
        if self.a.verb != "get" {
            return no("can only get individual resources of this type");
        }
        if !self.a.subresource.is_empty() {
            return no("cannot get subresource");
        }
        self.path(vertex)
    }

    /// kube's `authorizeReadNamespacedObject`.
    fn read_namespaced(&self, vertex: Vertex) -> Said {
        if !matches!(self.a.verb.as_str(), "get" | "list" | "watch") {
            return no("can only read resources of this type");
        }
        if !self.a.subresource.is_empty() {
            return no("cannot read subresource");
        }
        if self.a.namespace.is_empty() {
            return no("can only read namespaced object of this type");
        }
        self.path(vertex)
    }
}

/// kube's `authorizeServiceAccount` (its credential-provider gate off: a node gets no service
/// account, and creates tokens only for those of its pods).
fn service_account(graph: &Graph) -> Said {
    let a = graph.a;
    if a.verb == "get" && a.subresource.is_empty() {
        return no("not allowed to get service accounts");
    }
    if a.verb != "create" || a.name.is_empty() {
        return no("can only create tokens for individual service accounts");
    }
    if a.subresource != "token" {
        return no("can only create token subresource of serviceaccount");
    }
    graph.path(Vertex::ServiceAccount)
}

const LEASE_VERBS: [&str; 5] = ["get", "create", "update", "patch", "delete"];

fn lease(node: &str, a: &Attributes) -> Said {
    if !LEASE_VERBS.contains(&a.verb.as_str()) {
        return no("can only get, create, update, patch, or delete a node lease");
    }
    if a.namespace != "kube-node-lease" {
        return no("can only access leases in the \"kube-node-lease\" system namespace");
    }
    if a.verb != "create" && a.name != node {
        return no("can only access node lease with the same name as the requesting node");
    }
    allow()
}

fn csi_node(node: &str, a: &Attributes) -> Said {
    if !LEASE_VERBS.contains(&a.verb.as_str()) {
        return no("can only get, create, update, patch, or delete a CSINode");
    }
    if !a.subresource.is_empty() {
        return no("cannot authorize CSINode subresources");
    }
    if a.verb != "create" && a.name != node {
        return no("can only access CSINode with the same name as the requesting node");
    }
    allow()
}

/// kube's `authorizeResourceSlice`: kapi serves no `resource.k8s.io`, so no slice is in the
/// graph; the answers that do not read it are kube's.
fn resource_slice(node: &str, a: &Attributes) -> Said {
    if !a.subresource.is_empty() {
        return no("cannot authorize ResourceSlice subresources");
    }
    match a.verb.as_str() {
        "create" => allow(),
        "get" | "update" | "patch" | "delete" => {
            no(if a.name.is_empty() { "No Object name found".to_string() } else { format!("no relationship found between node '{node}' and this object") })
        }
        "list" | "watch" | "deletecollection" if a.field_selector.requires("spec.nodeName", node) => allow(),
        "list" | "watch" | "deletecollection" => no("can only list/watch/deletecollection resourceslices with nodeName field selector"),
        _ => no("only the following verbs are allowed for a ResourceSlice: get, watch, list, create, update, patch, delete, deletecollection"),
    }
}

/// kube's `authorizeNode` (with `AuthorizeNodeWithSelectors`): its own Node only.
fn own_node(node: &str, a: &Attributes) -> Said {
    match (a.subresource.as_str(), a.verb.as_str()) {
        ("", "create" | "update" | "patch") | ("status", "update" | "patch") => allow(),
        ("", "get" | "list" | "watch") if a.name == node => allow(),
        ("", "get" | "list" | "watch") if a.name.is_empty() => no(format!("node '{node}' cannot read all nodes, only its own Node object")),
        ("", "get" | "list" | "watch") => no(format!("node '{node}' cannot read '{}', only its own Node object", a.name)),
        _ => no(""),
    }
}

/// kube's `authorizePod` (with `AuthorizeNodeWithSelectors`): the pods bound to it.
fn pods(graph: &Graph) -> Said {
    let a = graph.a;
    match (a.subresource.as_str(), a.verb.as_str()) {
        ("", "get") => graph.get(Vertex::Pod),
        ("", "list" | "watch") if a.field_selector.requires("spec.nodeName", graph.node) => allow(),
        ("", "list" | "watch") if !a.name.is_empty() => graph.path(Vertex::Pod),
        ("", "list" | "watch") => no("can only list/watch pods with spec.nodeName field selector"),
        ("", "create" | "delete") | ("status", "update" | "patch") | ("eviction", "create") => allow(),
        _ => no(""),
    }
}
