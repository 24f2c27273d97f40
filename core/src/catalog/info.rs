//! The API identity of a resource: names, verbs, subresources, where its objects are kept.

use crate::status::{GroupKind, GroupResource};

/// A subresource served under a resource (`pods/status`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subresource {
    pub name: String,
    /// The kind the subresource reads and writes: the parent's kind, or e.g. `Scale`.
    pub group: String,
    pub version: String,
    pub kind: String,
    pub verbs: Vec<String>,
}

impl Subresource {
    pub fn new(name: &str, group: &str, version: &str, kind: &str, verbs: &[&str]) -> Subresource {
        Subresource { name: name.into(), group: group.into(), version: version.into(), kind: kind.into(), verbs: names(verbs) }
    }
}

/// What a successful DELETE answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteReturns {
    /// `metav1.Status` with details (most kinds).
    Status,
    /// The deleted object (pods and a few others, `ReturnDeletedObject`).
    Object,
}

/// Owned copies of names written in the code.
pub fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

pub const ALL_VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

/// Where a resource's objects come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// Kept in storage under `storage_prefix`, with a watch cache (nearly every resource).
    Stored,
    /// Create-only: a create answers a question and stores nothing (access reviews).
    Review,
    /// Create-only: a create is a create on `subresource` of the `resource` object the body
    /// names, in the same group and version (`bindings` are `pods/binding`).
    ActionOn { resource: &'static str, subresource: &'static str },
    /// Read-only: each read probes what the objects describe (componentstatuses).
    Probed,
}

/// The API identity of one resource at one version.
#[derive(Clone, Debug)]
pub struct ResourceInfo {
    pub group: String,
    pub version: String,
    pub kind: String,
    /// Plural, lower case (`deployments`).
    pub resource: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub verbs: Vec<String>,
    pub subresources: Vec<Subresource>,
    /// The storage key prefix under `--etcd-prefix` (`pods`, `services/specs`, `minions`).
    pub storage_prefix: String,
    /// The schema definition of the kind as served.
    pub definition: String,
    /// Objects are stored as another group/version of the same kind (events.k8s.io/v1 Events
    /// are stored as core/v1 Events) and converted on the way in and out.
    pub stored_as: Option<(String, String)>,
    pub delete_returns: DeleteReturns,
    pub backing: Backing,
    /// The warning every request for a deprecated resource gets, as kube's
    /// `<group/version> <Kind> is deprecated in v<x.y>+; use <replacement>`.
    pub deprecation: Option<String>,
    /// For a resource a CustomResourceDefinition defines: what of the CRD it was made from
    /// (its uid, spec and accepted names); `None` for a built-in resource.
    pub defined_by: Option<String>,
    /// The CRD that defines it is being deleted: discovery shows no `create`, `patch` and
    /// `update`, a create is refused, and updates and patches are still served (as kube).
    pub terminating: bool,
}

impl ResourceInfo {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.to_string() } else { format!("{}/{}", self.group, self.version) }
    }

    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.resource)
    }

    pub fn group_kind(&self) -> GroupKind {
        GroupKind { group: self.group.to_string(), kind: self.kind.to_string() }
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    pub fn subresource(&self, name: &str) -> Option<&Subresource> {
        self.subresources.iter().find(|s| s.name == name)
    }

    pub fn has_verb(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }

    /// Whether objects of this resource are kept in storage (and watched in a cache).
    pub fn stored(&self) -> bool {
        self.backing == Backing::Stored
    }
}
