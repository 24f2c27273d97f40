//! NodeRestriction (off by default, as in kube): a kubelet (`system:node:<name>` in
//! `system:nodes`) writes only what its node needs, in kube v1.33's words: mirror pods bound
//! to it and owned by its Node, the status of its pods, its own Node (no taints, no
//! configSource, and only the kubelet's labels), its lease, CSINode and resource slices, the
//! status of claims, and node CSRs for its own name; tokens only for its pods, and for the
//! audiences they name (`audience.rs`). Every other user is not restricted.

mod audience;

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Attributes, Found, Halt, Lookup, Operation, Pending, Plugin};
use crate::auth::UserInfo;
use crate::authz::graph::Vertex;
use crate::meta;
use crate::rand::Rng;
use crate::status::{ApiError, GroupResource, quote};

const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// The labels a kubelet may set on its Node, besides those of [`KUBELET_LABEL_NAMESPACES`].
const KUBELET_LABELS: [&str; 11] = [
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/instance-type",
    "beta.kubernetes.io/os",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "kubernetes.io/arch",
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
];
const KUBELET_LABEL_NAMESPACES: [&str; 2] = ["kubelet.kubernetes.io", "node.kubernetes.io"];

#[derive(Debug)]
pub struct NodeRestriction {
    /// kube's `ServiceAccountNodeAudienceRestriction` (beta, on by default in v1.33): a node
    /// asks tokens only for the audiences its pods' volumes name.
    pub audiences: bool,
}

/// The node a user is (kube's `NodeIdentity`): `Some("")` for `system:node:` itself.
fn node_of(a: &Attributes) -> Option<String> {
    node_of_user(a.user)
}

fn node_of_user(user: &UserInfo) -> Option<String> {
    let name = user.name.strip_prefix("system:node:")?;
    user.groups.iter().any(|g| g == "system:nodes").then(|| name.to_string())
}

/// Whether the request is a create of a service account's token.
fn is_token_request(info: &crate::catalog::ResourceInfo, subresource: Option<&str>, operation: Operation) -> bool {
    info.group.is_empty() && info.resource == "serviceaccounts" && subresource == Some("token") && operation == Operation::Create
}

/// Whether `ns` is `domain` or a subdomain of it.
fn within(ns: &str, domain: &str) -> bool {
    ns == domain || ns.ends_with(&format!(".{domain}"))
}

/// kube's `getForbiddenLabels`: kubernetes.io and k8s.io labels other than the kubelet's,
/// and any of node-restriction.kubernetes.io.
fn forbidden_labels<'a>(keys: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let forbidden = |key: &str| {
        let ns = key.split_once('/').map(|(ns, _)| ns).unwrap_or_default();
        let kubelets = KUBELET_LABELS.contains(&key) || KUBELET_LABEL_NAMESPACES.iter().any(|d| within(ns, d));
        within(ns, "node-restriction.kubernetes.io") || ((within(ns, "kubernetes.io") || within(ns, "k8s.io")) && !kubelets)
    };
    let set: BTreeSet<&str> = keys.filter(|k| forbidden(k)).collect();
    set.into_iter().collect()
}

fn labels(obj: &Value) -> serde_json::Map<String, Value> {
    obj.pointer("/metadata/labels").and_then(Value::as_object).cloned().unwrap_or_default()
}

/// The value at `path` with its empty lists and maps taken for absent (Go's semantic equality).
fn semantic(obj: &Value, path: &str) -> Value {
    match crate::authz::escalation::semantic(obj.pointer(path).unwrap_or(&Value::Null)) {
        Value::Array(items) if items.is_empty() => Value::Null,
        Value::Object(fields) if fields.is_empty() => Value::Null,
        v => v,
    }
}

/// The name a write asks for: the URL's, or on a create the object's own (not a name to be
/// generated).
fn requested_name<'a>(a: &Attributes<'a>, obj: Option<&'a Value>) -> &'a str {
    match (a.operation, obj) {
        (Operation::Create, Some(obj)) => meta::name(obj),
        _ => a.name,
    }
}

impl NodeRestriction {
    fn pod(&self, a: &Attributes, node: &str, obj: Option<&Value>) -> Result<(), ApiError> {
        let nq = quote(node);
        let refuse = |why: String| Err(a.forbidden(&why));
        match (a.subresource, a.operation) {
            (None, Operation::Create) => mirror_pod(a, node, obj.unwrap_or(&Value::Null)),
            (None, Operation::Delete) => {
                let bound = a.old.and_then(|p| meta::str_at(p, &["spec", "nodeName"])).unwrap_or_default();
                if bound == node { Ok(()) } else { refuse(format!("node {nq} can only delete pods with spec.nodeName set to itself")) }
            }
            (None, op) => refuse(format!("unexpected operation {}, node {nq} can only create and delete mirror pods", operation(op))),
            (Some("status"), Operation::Update) => {
                let (Some(new), Some(old)) = (obj, a.old) else { return Ok(()) };
                if meta::str_at(old, &["spec", "nodeName"]).unwrap_or_default() != node {
                    return refuse(format!("node {nq} can only update pod status for pods with spec.nodeName set to itself"));
                }
                if labels(new) != labels(old) {
                    return refuse(format!("node {nq} cannot update labels through pod status"));
                }
                let claims = |p: &Value| {
                    p.pointer("/status/resourceClaimStatuses")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .map(|c| (c.get("name").cloned(), c.get("resourceClaimName").filter(|n| !n.is_null()).cloned()))
                        .collect::<Vec<_>>()
                };
                if claims(new) != claims(old) {
                    return refuse(format!("node {nq} cannot update resource claim statues"));
                }
                Ok(())
            }
            (Some("status"), op) => refuse(format!("unexpected operation {}", operation(op))),
            // A node may evict only the pods bound to it.
            (Some("eviction"), Operation::Create) => {
                let name = if a.name.is_empty() { obj.map(meta::name).unwrap_or_default() } else { a.name };
                if name.is_empty() {
                    return refuse("could not determine pod from request data".into());
                }
                match a.found.pod.as_ref() {
                    Some(Some(pod)) if meta::str_at(pod, &["spec", "nodeName"]).unwrap_or_default() == node => Ok(()),
                    Some(Some(_)) => refuse(format!("node {node} can only evict pods with spec.nodeName set to itself")),
                    // kube's lister names the resource `pod`.
                    _ => Err(ApiError::not_found(&crate::status::GroupResource::new("", "pod"), name)),
                }
            }
            (Some("eviction"), op) => refuse(format!("unexpected operation {}", operation(op))),
            (Some(sub), _) => refuse(format!("unexpected pod subresource {}, only 'status' and 'eviction' are allowed", quote(sub))),
        }
    }

    fn node(&self, a: &Attributes, node: &str, obj: Option<&Value>) -> Result<(), String> {
        let nq = quote(node);
        let requested = requested_name(a, obj);
        if requested != node {
            return Err(format!("node {nq} is not allowed to modify node {}", quote(requested)));
        }
        let Some(new) = obj else { return Ok(()) };
        let config_source = |n: &Value| n.pointer("/spec/configSource").filter(|c| !c.is_null()).cloned();
        let Some(old) = a.old.filter(|_| a.operation == Operation::Update) else {
            if config_source(new).is_some() {
                return Err(format!("node {nq} is not allowed to create pods with a non-nil configSource"));
            }
            let set = labels(new);
            let forbidden = forbidden_labels(set.keys().map(String::as_str));
            if !forbidden.is_empty() {
                return Err(format!("node {nq} is not allowed to set the following labels: {}", forbidden.join(", ")));
            }
            return Ok(());
        };
        if config_source(new).is_some() && config_source(new) != config_source(old) {
            return Err(format!("node {nq} is not allowed to update configSource to a new non-nil configSource"));
        }
        if semantic(new, "/spec/taints") != semantic(old, "/spec/taints") {
            return Err(format!("node {nq} is not allowed to modify taints"));
        }
        if semantic(new, "/metadata/ownerReferences") != semantic(old, "/metadata/ownerReferences") {
            return Err(format!("node {nq} is not allowed to modify ownerReferences"));
        }
        let (now, was) = (labels(new), labels(old));
        let modified = now.keys().chain(was.keys()).filter(|k| now.get(*k) != was.get(*k)).map(String::as_str);
        let forbidden = forbidden_labels(modified);
        if !forbidden.is_empty() {
            return Err(format!("is not allowed to modify labels: {}", forbidden.join(", ")));
        }
        Ok(())
    }
}

fn operation(op: Operation) -> &'static str {
    match op {
        Operation::Create => "\"CREATE\"",
        Operation::Update => "\"UPDATE\"",
        Operation::Delete => "\"DELETE\"",
    }
}

/// kube's `admitPodCreate`: a mirror pod of this node, owned by its Node, referencing nothing
/// the node may not read (a Node that is not found: its 404).
fn mirror_pod(a: &Attributes, node: &str, pod: &Value) -> Result<(), ApiError> {
    mirror_pod_refusal(a, node, pod).map_err(|why| match why {
        Some(why) => a.forbidden(&why),
        None => ApiError::not_found(&GroupResource::new("", "node"), node),
    })
}

/// Why a mirror pod is refused (`None`: its Node is not found).
fn mirror_pod_refusal(a: &Attributes, node: &str, pod: &Value) -> Result<(), Option<String>> {
    let nq = quote(node);
    let refuse = |why: String| Err(Some(why));
    if meta::at(pod, &["metadata", "annotations", MIRROR_ANNOTATION]).is_none() {
        return refuse(format!("pod does not have {} annotation, node {nq} can only create mirror pods", quote(MIRROR_ANNOTATION)));
    }
    if meta::str_at(pod, &["spec", "nodeName"]).unwrap_or_default() != node {
        return refuse(format!("node {nq} can only create pods with spec.nodeName set to itself"));
    }
    let owners = pod.pointer("/metadata/ownerReferences").and_then(Value::as_array).cloned().unwrap_or_default();
    let owner = match owners.as_slice() {
        [one] => one,
        [] => return refuse(format!("node {nq} can only create pods with an owner reference set to itself")),
        _ => return refuse(format!("node {nq} can only create pods with a single owner reference set to itself")),
    };
    let field = |f: &str| owner.get(f).and_then(Value::as_str).unwrap_or_default();
    if field("apiVersion") != "v1" || field("kind") != "Node" || field("name") != node {
        return refuse(format!("node {nq} can only create pods with an owner reference set to itself"));
    }
    if owner.get("controller") != Some(&Value::Bool(true)) {
        return refuse(format!("node {nq} can only create pods with a controller owner reference set to itself"));
    }
    if owner.get("blockOwnerDeletion") == Some(&Value::Bool(true)) {
        return refuse(format!("node {nq} must not set blockOwnerDeletion on an owner reference"));
    }
    match &a.found.node {
        Some(Some(n)) if meta::uid(n) == field("uid") => {}
        Some(Some(n)) => return refuse(format!("node {node} UID mismatch: expected {} got {}", field("uid"), meta::uid(n))),
        _ => return Err(None),
    }
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let account = |f: &str| meta::str_at(pod, &["spec", f]).unwrap_or_default();
    if !account("serviceAccountName").is_empty() || !account("serviceAccount").is_empty() {
        return refuse(format!("node {nq} can not create pods that reference a service account"));
    }
    let named = crate::authz::graph::named_in_spec(spec);
    for (vertex, what) in [(Vertex::Secret, "secrets"), (Vertex::ConfigMap, "configmaps")] {
        if named.iter().any(|(v, _)| *v == vertex) {
            return refuse(format!("node {nq} can not create pods that reference {what}"));
        }
    }
    let volumes: Vec<&Value> = spec.get("volumes").and_then(Value::as_array).into_iter().flatten().collect();
    let bundles = volumes
        .iter()
        .flat_map(|v| v.pointer("/projected/sources").and_then(Value::as_array).into_iter().flatten())
        .any(|s| s.get("clusterTrustBundle").is_some_and(|b| !b.is_null()));
    if bundles {
        return refuse(format!("node {nq} can not create pods that reference clustertrustbundles"));
    }
    if volumes.iter().any(|v| v.get("persistentVolumeClaim").is_some_and(|c| !c.is_null())) {
        return refuse(format!("node {nq} can not create pods that reference persistentvolumeclaims"));
    }
    if spec.get("resourceClaims").and_then(Value::as_array).is_some_and(|c| !c.is_empty()) {
        return refuse(format!("node {nq} can not create pods that reference resourceclaims"));
    }
    Ok(())
}

impl Plugin for NodeRestriction {
    fn name(&self) -> &'static str {
        "NodeRestriction"
    }

    fn handles(&self, _op: Operation) -> bool {
        true
    }

    fn lookups(&self, request: &Pending) -> Vec<Lookup> {
        let on_pods = request.info.group.is_empty() && request.info.resource == "pods";
        if on_pods && request.subresource == Some("eviction") && request.operation == Operation::Create {
            // The pod evicted, to see which node it is bound to.
            let name = request.name.filter(|n| !n.is_empty()).or_else(|| request.object.map(meta::name)).unwrap_or_default();
            let namespace = request.namespace.unwrap_or_default();
            return vec![Lookup::Pod { namespace: namespace.to_string(), name: name.to_string() }];
        }
        let token = request.info.group.is_empty() && request.info.resource == "serviceaccounts" && request.subresource == Some("token");
        if let Some(pod) = request.object.filter(|_| token).and_then(bound_pod) {
            // The pod a token is bound to, to see which node it runs on.
            return vec![Lookup::Pod { namespace: request.namespace.unwrap_or_default().to_string(), name: pod.to_string() }];
        }
        let pods = on_pods && request.subresource.is_none();
        let Some(pod) = request.object.filter(|_| pods && request.operation == Operation::Create) else { return Vec::new() };
        let owner = pod.pointer("/metadata/ownerReferences/0").filter(|o| o.get("kind").and_then(Value::as_str) == Some("Node"));
        owner.and_then(|o| o.get("name")).and_then(Value::as_str).map(|n| vec![Lookup::Node(n.to_string())]).unwrap_or_default()
    }

    fn lookups_after(&self, request: &Pending, user: &UserInfo, found: &Found) -> Vec<Lookup> {
        let token = is_token_request(request.info, request.subresource, request.operation);
        match request.object.filter(|_| self.audiences && token && node_of_user(user).is_some_and(|n| !n.is_empty())) {
            Some(object) => audience::lookups(object, found),
            None => Vec::new(),
        }
    }

    fn admit_asking(&self, a: &Attributes, mut obj: Option<&mut Value>, rng: &mut Rng) -> Result<(), Halt> {
        self.admit(a, obj.as_deref_mut(), rng)?;
        // A node's token request that passed is bound to its own pod, found.
        let token = is_token_request(a.info, a.subresource, a.operation) && node_of(a).is_some();
        let (Some(request), Some(Some(pod))) = (obj.filter(|_| self.audiences && token), a.found.pod.as_ref()) else { return Ok(()) };
        Ok(audience::check(a, request, pod)?.map_err(|why| a.forbidden(&why))?)
    }

    fn admit(&self, a: &Attributes, obj: Option<&mut Value>, _rng: &mut Rng) -> Result<(), ApiError> {
        let Some(node) = node_of(a) else { return Ok(()) };
        if node.is_empty() {
            return Err(a.forbidden(&format!("could not determine node from user {}", quote(&a.user.name))));
        }
        let obj = obj.map(|o| &*o);
        let nq = quote(&node);
        let requested = requested_name(a, obj);
        let same_name = |what: &str| if requested == node { Ok(()) } else { Err(format!("can only access {what} with the same name as the requesting node")) };
        let checked = match (a.info.group.as_str(), a.info.resource.as_str()) {
            ("", "pods") => return self.pod(a, &node, obj),
            ("", "nodes") => self.node(a, &node, obj),
            ("", "serviceaccounts") => return token_request(a, &node, obj),
            ("", "persistentvolumeclaims") => match (a.subresource, a.operation) {
                (Some("status"), Operation::Update) => pvc_status(&nq, obj, a.old),
                (Some("status"), op) => Err(format!("unexpected operation {}", operation(op))),
                _ => Err("may only update PVC status".to_string()),
            },
            ("coordination.k8s.io", "leases") if a.namespace != "kube-node-lease" => {
                Err("can only access leases in the \"kube-node-lease\" system namespace".into())
            }
            ("coordination.k8s.io", "leases") => same_name("node lease"),
            ("storage.k8s.io", "csinodes") => same_name("CSINode"),
            ("resource.k8s.io", "resourceslices") => {
                let slice_node = |s: Option<&Value>| s.and_then(|s| meta::str_at(s, &["spec", "nodeName"])).unwrap_or_default() == node;
                match a.operation {
                    Operation::Create if !slice_node(obj) => Err("can only create ResourceSlice with the same NodeName as the requesting node".into()),
                    Operation::Delete if !slice_node(a.old) => Err("can only delete ResourceSlice with the same NodeName as the requesting node".into()),
                    _ => Ok(()),
                }
            }
            ("certificates.k8s.io", "certificatesigningrequests") if a.operation == Operation::Create => node_csr(&node, obj),
            _ => Ok(()),
        };
        checked.map_err(|why| a.forbidden(&why))
    }
}

/// The name of the pod a TokenRequest is bound to, if it names one.
fn bound_pod(request: &Value) -> Option<&str> {
    let r = request.pointer("/spec/boundObjectRef")?;
    let is = |k: &str, v: &str| r.get(k).and_then(Value::as_str) == Some(v);
    (is("apiVersion", "v1") && is("kind", "Pod")).then(|| meta::str_at(r, &["name"])).flatten().filter(|n| !n.is_empty())
}

/// kube's `admitServiceAccount`: a node requests only tokens bound to a pod (by its uid) that
/// runs on it.
fn token_request(a: &Attributes, node: &str, obj: Option<&Value>) -> Result<(), ApiError> {
    let refuse = |why: String| Err(a.forbidden(&why));
    // Its other writes of service accounts are the authorizer's business.
    if a.operation != Operation::Create || a.subresource != Some("token") {
        return Ok(());
    }
    let Some(name) = obj.and_then(bound_pod) else { return refuse("node requested token not bound to a pod".into()) };
    let uid = obj.and_then(|o| o.pointer("/spec/boundObjectRef/uid")).and_then(Value::as_str).unwrap_or_default();
    if uid.is_empty() {
        return refuse("node requested token with a pod binding without a uid".into());
    }
    let Some(Some(pod)) = a.found.pod.as_ref() else { return Err(ApiError::not_found(&crate::status::GroupResource::new("", "pod"), name)) };
    if meta::uid(pod) != uid {
        return refuse(format!(
            "the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
        ));
    }
    if meta::str_at(pod, &["spec", "nodeName"]).unwrap_or_default() != node {
        return refuse("node requested token bound to a pod scheduled on a different node".into());
    }
    Ok(())
}

/// kube's `admitPVCStatus`: only the capacity, conditions and allocation of the status change.
fn pvc_status(nq: &str, new: Option<&Value>, old: Option<&Value>) -> Result<(), String> {
    let (Some(new), Some(old)) = (new, old) else { return Ok(()) };
    let strip = |c: &Value| {
        let mut c = c.clone();
        for (parent, field) in [
            ("metadata", "resourceVersion"),
            ("metadata", "managedFields"),
            ("status", "capacity"),
            ("status", "conditions"),
            ("status", "allocatedResourceStatuses"),
            ("status", "allocatedResources"),
        ] {
            if let Some(Value::Object(m)) = c.get_mut(parent) {
                m.remove(field);
            }
        }
        crate::authz::escalation::semantic(&c)
    };
    if strip(new) == strip(old) {
        return Ok(());
    }
    Err(format!("node {nq} is not allowed to update fields other than status.quantity and status.conditions"))
}

/// kube's `admitCSR`: a kubelet's CSR is for its own node's name.
fn node_csr(node: &str, csr: Option<&Value>) -> Result<(), String> {
    let Some(csr) = csr else { return Ok(()) };
    let signer = meta::str_at(csr, &["spec", "signerName"]).unwrap_or_default();
    if signer != "kubernetes.io/kubelet-serving" && signer != "kubernetes.io/kube-apiserver-client-kubelet" {
        return Ok(());
    }
    let cn = crate::resources::certificates::requested_common_name(csr).map_err(|e| format!("unable to parse csr: {e}"))?;
    if cn != format!("system:node:{node}") {
        return Err(format!("can only create a node CSR with CN=system:node:{node}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
