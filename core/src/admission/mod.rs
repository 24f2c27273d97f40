//! Admission: kube-apiserver's chain of admission plugins ([`Chain`]), chosen by
//! `--enable-admission-plugins` and `--disable-admission-plugins` and run in kube's order,
//! every mutating plugin first (as an object is created, updated or deleted, before the
//! strategy's validation), then every validating one (on the final object). Each plugin is
//! one file of this folder implementing [`Plugin`].
//!
//! Plugins that read other objects declare what they need ([`Plugin::lookups`]); the request
//! pipeline reads those (from the watch caches, else storage) before the write and hands them
//! over in [`Found`], so admission itself stays synchronous and runs inside the registry's
//! transform.

mod always;
mod always_pull_images;
pub mod cel_authorizer;
mod certificates;
mod chain;
pub mod config;
mod default_class;
mod default_toleration_seconds;
mod deny_service_external_ips;
mod event_rate_limit;
mod extended_resource_toleration;
mod image_policy;
mod limit_pod_hard_anti_affinity_topology;
mod limit_ranger;
pub mod matching;
mod namespace_auto_provision;
mod namespace_exists;
mod namespace_lifecycle;
mod node_restriction;
mod owner_references;
mod persistent_volume_claim_resize;
mod pod_node_selector;
mod pod_security;
mod pod_toleration_restriction;
pub mod policies;
mod priority;
mod resource_quota;
mod runtime_class;
mod service_account;
mod storage_object_in_use_protection;
mod taint_nodes_by_condition;
mod tolerations;
pub mod webhooks;

use std::sync::Arc;

use serde_json::Value;

pub use chain::{Chain, DEFAULT_ON, ORDER, ReadFile, enabled, no_files};
pub use namespace_lifecycle::IMMORTAL_NAMESPACES;

use crate::admission::webhooks::dispatch::{AdmissionCall, Answers, Halt};
use crate::auth::UserInfo;
use crate::catalog::ResourceInfo;
use crate::rand::Rng;
use crate::status::ApiError;

/// A collection admission is configured by: the webhook configurations, the validating and
/// the mutating admission policies and their bindings. The server takes each one's objects in as they
/// change (`Served::with_admission`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    MutatingWebhooks,
    ValidatingWebhooks,
    Policies,
    PolicyBindings,
    MutatingPolicies,
    MutatingPolicyBindings,
}

/// Each source, with the group, version and resource it is read from.
pub const SOURCES: [(Source, (&str, &str, &str)); 6] = [
    (Source::MutatingWebhooks, ("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations")),
    (Source::ValidatingWebhooks, ("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")),
    (Source::Policies, ("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies")),
    (Source::PolicyBindings, ("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings")),
    (Source::MutatingPolicies, ("admissionregistration.k8s.io", "v1alpha1", "mutatingadmissionpolicies")),
    (Source::MutatingPolicyBindings, ("admissionregistration.k8s.io", "v1alpha1", "mutatingadmissionpolicybindings")),
];

/// Whether `catalog` serves the collection `source` is read from.
pub fn serves(catalog: &crate::catalog::Catalog, source: Source) -> bool {
    SOURCES.iter().any(|(s, (g, v, r))| *s == source && catalog.get(g, v, r).is_some())
}

/// An object a request needs to see: admission's (a namespace, a service account), or the
/// validation of a service account token's (its account, pod, secret or node).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    Namespace(String),
    ServiceAccount {
        namespace: String,
        name: String,
    },
    Pod {
        namespace: String,
        name: String,
    },
    Secret {
        namespace: String,
        name: String,
    },
    Node(String),
    /// Every LimitRange of a namespace (found as a JSON list).
    LimitRanges(String),
    /// Every StorageClass (a list).
    StorageClasses,
    /// Every IngressClass (a list).
    IngressClasses,
    RuntimeClass(String),
    /// Every pod of a namespace (a list).
    Pods(String),
    /// Every ResourceQuota of a namespace (a list).
    ResourceQuotas(String),
    /// A PersistentVolumeClaim a pod's volume names (NodeRestriction's audience check).
    Claim {
        namespace: String,
        name: String,
    },
    /// The PersistentVolume a claim is bound to.
    Volume(String),
    /// The CSIDriver a volume is served by.
    CsiDriver(String),
    /// What an admission policy's binding takes its parameters from: the object of the
    /// resource (group, version, resource) its `paramRef` names, or (no name) the objects of a
    /// namespace, or every object of a cluster-scoped resource, to select from (a list).
    Params {
        resource: (String, String, String),
        namespace: Option<String>,
        name: Option<String>,
    },
}

impl Lookup {
    /// The group, version and resource of what it looks for.
    pub fn resource(&self) -> (&str, &str, &str) {
        match self {
            Lookup::Params { resource: (g, v, r), .. } => (g, v, r),
            Lookup::Namespace(_) => ("", "v1", "namespaces"),
            Lookup::ServiceAccount { .. } => ("", "v1", "serviceaccounts"),
            Lookup::Pod { .. } => ("", "v1", "pods"),
            Lookup::Secret { .. } => ("", "v1", "secrets"),
            Lookup::Node(_) => ("", "v1", "nodes"),
            Lookup::LimitRanges(_) => ("", "v1", "limitranges"),
            Lookup::StorageClasses => ("storage.k8s.io", "v1", "storageclasses"),
            Lookup::IngressClasses => ("networking.k8s.io", "v1", "ingressclasses"),
            Lookup::RuntimeClass(_) => ("node.k8s.io", "v1", "runtimeclasses"),
            Lookup::Pods(_) => ("", "v1", "pods"),
            Lookup::ResourceQuotas(_) => ("", "v1", "resourcequotas"),
            Lookup::Claim { .. } => ("", "v1", "persistentvolumeclaims"),
            Lookup::Volume(_) => ("", "v1", "persistentvolumes"),
            Lookup::CsiDriver(_) => ("storage.k8s.io", "v1", "csidrivers"),
        }
    }

    /// Whether the object found stays parsed in its watch cache ([`CachedObject::shared`]): a
    /// namespace, service account or RuntimeClass, few and small and read for every write that
    /// names them; not pods, secrets, nodes or params, which may be many or large.
    ///
    /// [`CachedObject::shared`]: crate::cache::CachedObject::shared
    pub fn kept_parsed(&self) -> bool {
        matches!(self, Lookup::Namespace(_) | Lookup::ServiceAccount { .. } | Lookup::RuntimeClass(_))
    }

    /// The namespace and name of the one object it looks for; no name for a lookup of a
    /// namespace's objects (or of all, for a cluster-scoped resource).
    pub fn place(&self) -> (Option<&str>, Option<&str>) {
        match self {
            Lookup::Namespace(name) | Lookup::Node(name) | Lookup::RuntimeClass(name) | Lookup::Volume(name) | Lookup::CsiDriver(name) => (None, Some(name)),
            Lookup::StorageClasses | Lookup::IngressClasses => (None, None),
            Lookup::ServiceAccount { namespace, name }
            | Lookup::Pod { namespace, name }
            | Lookup::Secret { namespace, name }
            | Lookup::Claim { namespace, name } => (Some(namespace), Some(name)),
            Lookup::LimitRanges(namespace) | Lookup::Pods(namespace) | Lookup::ResourceQuotas(namespace) => (Some(namespace), None),
            Lookup::Params { namespace, name, .. } => (namespace.as_deref(), name.as_deref()),
        }
    }
}

/// The operation being admitted (kube's `admission.Operation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

/// What the lookups found: `None` for a missing object. One object is shared with the watch
/// cache that holds it (parsed once there).
#[derive(Clone, Debug, Default)]
pub struct Found {
    /// The namespace a create writes in, and its object if it exists.
    pub namespace: Option<(String, Option<Arc<Value>>)>,
    pub service_account: Option<Option<Arc<Value>>>,
    /// The LimitRanges of the namespace written in.
    pub limit_ranges: Vec<Value>,
    pub storage_classes: Vec<Value>,
    pub ingress_classes: Vec<Value>,
    /// The RuntimeClass a pod names.
    pub runtime_class: Option<Option<Arc<Value>>>,
    /// The pods of a namespace being updated.
    pub pods: Vec<Value>,
    /// The Node a mirror pod names as its owner.
    pub node: Option<Option<Arc<Value>>>,
    /// The pod an eviction names.
    pub pod: Option<Option<Arc<Value>>>,
    /// The ResourceQuotas of the namespace written in.
    pub resource_quotas: Vec<Value>,
    /// What the admission policies' parameters were looked up as, and what was found.
    pub params: Vec<(Lookup, Option<Arc<Value>>)>,
    /// The claims, volumes and CSI drivers a pod's volumes name, as they were looked up.
    pub storage: Vec<(Lookup, Option<Arc<Value>>)>,
}

impl Found {
    /// What `lookup` of the pod's storage found: not looked up; looked up, and the object
    /// if it exists.
    pub fn storage(&self, lookup: &Lookup) -> Option<Option<&Value>> {
        self.storage.iter().find(|(l, _)| l == lookup).map(|(_, found)| found.as_deref())
    }

    /// What `lookups` found.
    pub fn of(lookups: &[(Lookup, Option<Arc<Value>>)]) -> Found {
        let mut found = Found::default();
        for (lookup, object) in lookups {
            found.record(lookup.clone(), object.clone());
        }
        found
    }

    /// Notes what a lookup found (`None`: the object does not exist).
    pub fn record(&mut self, lookup: Lookup, found: Option<Arc<Value>>) {
        match lookup {
            Lookup::Namespace(ns) => self.namespace = Some((ns, found)),
            Lookup::ServiceAccount { .. } => self.service_account = Some(found),
            Lookup::LimitRanges(_) => self.limit_ranges = list(found),
            Lookup::StorageClasses => self.storage_classes = list(found),
            Lookup::IngressClasses => self.ingress_classes = list(found),
            Lookup::RuntimeClass(_) => self.runtime_class = Some(found),
            Lookup::Pods(_) => self.pods = list(found),
            Lookup::Node(_) => self.node = Some(found),
            Lookup::Pod { .. } => self.pod = Some(found),
            Lookup::ResourceQuotas(_) => self.resource_quotas = list(found),
            l @ Lookup::Params { .. } => self.params.push((l, found)),
            l @ (Lookup::Claim { .. } | Lookup::Volume(_) | Lookup::CsiDriver(_)) => self.storage.push((l, found)),
            // What tokens name; admission does not look for it.
            Lookup::Secret { .. } => {}
        }
    }
}

/// The objects a lookup of many found.
fn list(found: Option<Arc<Value>>) -> Vec<Value> {
    match found.map(Arc::unwrap_or_clone) {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    }
}

/// What a plugin is told of the request it admits (kube's `admission.Attributes`).
pub struct Attributes<'a> {
    pub operation: Operation,
    /// The resource written.
    pub info: &'a ResourceInfo,
    pub subresource: Option<&'a str>,
    /// The namespace of the request (empty for cluster-scoped resources).
    pub namespace: &'a str,
    /// The object's name (empty for a create whose name is to be generated).
    pub name: &'a str,
    pub dry_run: bool,
    pub user: &'a UserInfo,
    /// The object an update or delete replaces.
    pub old: Option<&'a Value>,
    /// What the lookups found.
    pub found: &'a Found,
    /// The authorizer chain (`None` for kapi's own writes).
    pub access: Option<&'a crate::authz::Access>,
    /// The resources served when the request came (kube's RESTMapper; `None` for kapi's own
    /// writes).
    pub catalog: Option<&'a crate::catalog::Catalog>,
    /// The time of the write.
    pub now: jiff::Timestamp,
    /// The audit annotations the admission adds ([`Attributes::annotate`]), for the write to
    /// take when it is done with these attributes.
    pub annotations: std::cell::RefCell<Vec<(String, String)>>,
}

#[cfg(test)]
impl<'a> Attributes<'a> {
    /// A write's attributes in tests: no subresource, no dry run, no authorizer (kapi's own
    /// write), at the epoch.
    pub fn of(
        operation: Operation,
        info: &'a ResourceInfo,
        namespace: &'a str,
        name: &'a str,
        user: &'a UserInfo,
        old: Option<&'a Value>,
        found: &'a Found,
    ) -> Self {
        Attributes {
            operation,
            info,
            subresource: None,
            namespace,
            name,
            dry_run: false,
            user,
            old,
            found,
            access: None,
            catalog: None,
            now: jiff::Timestamp::UNIX_EPOCH,
            annotations: Default::default(),
        }
    }
}

impl Attributes<'_> {
    /// An audit annotation (kube's `AddAnnotation`): the request's audit events carry it; a key
    /// that is not a qualified name with a prefix is dropped, as kube drops it.
    pub fn annotate(&self, key: String, value: String) {
        if key.matches('/').count() == 1 && crate::validation::names::qualified_name(&key).is_empty() {
            self.annotations.borrow_mut().push((key, value));
        }
    }

    /// Whether the request writes `resource` of the core group itself (not a subresource).
    pub fn is_core(&self, resource: &str) -> bool {
        self.info.group.is_empty() && self.info.resource == resource && self.subresource.is_none()
    }

    /// Whether the chain allows the requester `q` (see [`Attributes::decide`]).
    pub fn allows(&self, q: &crate::authz::Attributes) -> Result<bool, Halt> {
        Ok(self.decide(q)?.allowed)
    }

    /// The chain's decision on the requester doing `q`, with its reason and error (kapi's
    /// own writes may do anything). As kube's plugins ask the authorizer during admission, an
    /// authorization webhook's answer the chain needs and the write does not have yet stops
    /// the write ([`Halt::Ask`]) until it has it.
    pub fn decide(&self, q: &crate::authz::Attributes) -> Result<crate::authz::Decision, Halt> {
        match self.access {
            Some(access) => access.decide_or_ask(self.user, q).map_err(|ask| Halt::Ask(vec![AdmissionCall::authorizer(ask)])),
            None => Ok(crate::authz::Decision { allowed: true, ..Default::default() }),
        }
    }

    /// kube's `admission.NewForbidden` of an error another request met: a forbidden one
    /// (`IsForbidden`: its reason `Forbidden`, or a 403 with none of kube's reasons) as it is,
    /// anything else as [`Attributes::forbidden`] with its message.
    pub fn refused_by(&self, e: ApiError) -> ApiError {
        match e.reason == "Forbidden" || (e.code == 403 && matches!(e.reason, "" | "Unknown")) {
            true => e,
            false => self.forbidden(&e.message),
        }
    }

    /// kube's `admission.NewForbidden`: 403, `<resource> "<name>" is forbidden: <why>`.
    pub fn forbidden(&self, why: &str) -> ApiError {
        let name = if self.name.is_empty() { "Unknown" } else { self.name };
        ApiError::forbidden(&self.info.group_resource(), name, why)
    }
}

/// What a request is, before its lookups: enough for the plugins to say what to read.
pub struct Pending<'a> {
    pub operation: Operation,
    pub info: &'a ResourceInfo,
    pub subresource: Option<&'a str>,
    pub namespace: Option<&'a str>,
    /// The name in the request's path (updates, patches, deletes).
    pub name: Option<&'a str>,
    /// The object a create writes.
    pub object: Option<&'a Value>,
    /// The request writes nothing (`dryRun=All`).
    pub dry_run: bool,
}

impl Pending<'_> {
    /// The namespace a pod's own write (not a subresource's) is in, to look up.
    pub fn pods_namespace(&self) -> Vec<Lookup> {
        let pods = self.info.group.is_empty() && self.info.resource == "pods" && self.subresource.is_none();
        match self.namespace {
            Some(ns) if pods && !ns.is_empty() => vec![Lookup::Namespace(ns.to_string())],
            _ => Vec::new(),
        }
    }
}

/// One admission plugin. A plugin that mutates implements [`Plugin::admit`] (kube's
/// `MutationInterface`), one that validates [`Plugin::validate`]; some do both.
pub trait Plugin: Send + Sync + std::fmt::Debug {
    /// Its name, as the flags name it.
    fn name(&self) -> &'static str;

    /// Whether it looks at requests of this operation.
    fn handles(&self, op: Operation) -> bool;

    /// The objects it needs to read before the request is admitted.
    fn lookups(&self, _request: &Pending) -> Vec<Lookup> {
        Vec::new()
    }

    /// What it needs to read besides, given what was found so far (asked until nothing new
    /// comes): the objects that what it read names. Only a token request's (NodeRestriction's
    /// audience check, which follows a pod's claims to their volumes and drivers).
    fn lookups_after(&self, _request: &Pending, _user: &UserInfo, _found: &Found) -> Vec<Lookup> {
        Vec::new()
    }

    /// Mutating admission that may first need the authorizer's answer (an authorization
    /// webhook's, [`Halt::Ask`]). By default, [`Plugin::admit`].
    fn admit_asking(&self, a: &Attributes, obj: Option<&mut Value>, rng: &mut Rng) -> Result<(), Halt> {
        Ok(self.admit(a, obj, rng)?)
    }

    /// Mutating admission: may change `obj` (`None` for a delete) or refuse the request.
    fn admit(&self, _a: &Attributes, _obj: Option<&mut Value>, _rng: &mut Rng) -> Result<(), ApiError> {
        Ok(())
    }

    /// Validating admission of the final object (`None` for a delete); what it warns of goes
    /// to `warnings` (the client's `Warning` headers, refused or not).
    fn validate(&self, _a: &Attributes, _obj: Option<&Value>, _warnings: &mut Vec<String>) -> Result<(), ApiError> {
        Ok(())
    }

    /// Validating admission that may first need a webhook's answer (ImagePolicyWebhook's
    /// review): `answers` holds those the write has; one it lacks stops the write
    /// ([`Halt::Ask`]) until it has it. As kube's validating plugins, which hold the object
    /// itself, it may annotate the final object. By default, [`Plugin::validate`].
    fn validate_asking(&self, a: &Attributes, obj: Option<&mut Value>, _answers: &Answers, warnings: &mut Vec<String>) -> Result<(), Halt> {
        Ok(self.validate(a, obj.as_deref(), warnings)?)
    }

    /// Whether [`Plugin::validate_asking`] may change an object of `info`'s resource
    /// (ImagePolicyWebhook's annotation of a pod when it fails open).
    fn annotates(&self, _info: &ResourceInfo) -> bool {
        false
    }

    /// An object the server must create, as a request of its own, before a create is
    /// admitted (kube's plugins that write through the server's loopback client:
    /// NamespaceAutoProvision's namespace), given what the lookups found. Asked where kube's
    /// mutating plugins start; the create waits for that request: if the object was created
    /// or already exists, it goes on with the object as it now is in its lookups; any other
    /// answer refuses it ([`Attributes::refused_by`]).
    fn provision(&self, _request: &Pending, _found: &Found) -> Option<Provision> {
        None
    }

    /// After every validating plugin: what the final object is charged to (quotas), or the
    /// refusal when it does not fit; `now` as the write sees it.
    fn charge(&self, _a: &Attributes, _obj: Option<&Value>, _now: jiff::Timestamp) -> Result<Vec<Charge>, ApiError> {
        Ok(Vec::new())
    }
}

/// An object a plugin has the server create before a request is admitted ([`Plugin::provision`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Provision {
    /// The path of its collection (`/api/v1/namespaces`).
    pub path: String,
    /// Its resource (`namespaces`), as client-go names it in an error.
    pub resource: String,
    /// Its name (to read it if it already exists).
    pub name: String,
    /// The lookup that finds it, which then holds it.
    pub lookup: Lookup,
    /// The object, as a client sends it.
    pub object: Value,
}

/// A ResourceQuota with what a write adds to its `status.used`: the registry writes it with
/// the object, if the quota is still at the revision it was read at (its resourceVersion).
#[derive(Clone, Debug, PartialEq)]
pub struct Charge {
    pub quota: Value,
}

#[cfg(test)]
mod tests;
