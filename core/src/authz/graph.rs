//! What each node's kubelet needs to reach: kube's node authorizer graph (`graph.go`,
//! `graph_populator.go`), kept as reverse indexes instead of a graph to walk.
//!
//! kube's graph has edges toward nodes: a pod bound to a node, and from the pod the secrets,
//! config maps, persistent volume claims, service account and resource claims it references;
//! a persistent volume to its claim, and the secrets a kubelet reads for it; a volume
//! attachment to its node. A node may reach an object when a path leads from it to the node.
//! kapi counts, for each object a pod references, the pods on each node that do, so a question
//! is a lookup; a persistent volume is reached through its claim. The indexes are persistent
//! (imbl): a pod's change makes a new graph sharing the rest, which a server swaps in like the
//! RBAC policy.

use std::sync::Arc;

use imbl::{OrdMap, OrdSet};
use serde_json::Value;

use crate::meta;

/// The kinds of object a node's access is decided on by the graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Vertex {
    ConfigMap,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    ResourceClaim,
    Secret,
    ServiceAccount,
    VolumeAttachment,
}

/// An object a pod references, by kind, namespace and name.
type Referenced = (Vertex, String, String);

/// What a pod bound to a node references (mirror pods reference nothing: their kubelet made
/// them from files).
#[derive(Clone, Debug, PartialEq, Eq)]
struct PodEdges {
    node: String,
    references: Vec<Referenced>,
}

/// A persistent volume bound to a claim, and the secrets a kubelet reads to mount it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PvEdges {
    claim: (String, String),
    secrets: Vec<(String, String)>,
}

/// The graph of the pods, persistent volumes and volume attachments taken in.
#[derive(Clone, Debug, Default)]
pub struct NodeGraph {
    /// Pods bound to a node, by namespace and name.
    pods: OrdMap<(String, String), Arc<PodEdges>>,
    /// For each object a bound pod references and each node: how many pods there reference it.
    referenced: OrdMap<(Referenced, String), u32>,
    /// Persistent volumes with a claim, by name.
    volumes: OrdMap<String, Arc<PvEdges>>,
    /// For each secret a persistent volume names for its kubelet: those volumes.
    volume_secrets: OrdMap<(String, String), OrdSet<String>>,
    /// Volume attachments, by name, with their node.
    attachments: OrdMap<String, String>,
}

impl NodeGraph {
    /// Whether `node` may reach the `vertex` object `namespace`/`name` (kube's `hasPathFrom`).
    pub fn reaches(&self, vertex: Vertex, namespace: &str, name: &str, node: &str) -> bool {
        match vertex {
            Vertex::Pod => self.pods.get(&(namespace.to_string(), name.to_string())).is_some_and(|p| p.node == node),
            Vertex::VolumeAttachment => self.attachments.get(name).is_some_and(|n| n == node),
            Vertex::PersistentVolume => self.volumes.get(name).is_some_and(|pv| self.claim_reached(&pv.claim, node)),
            Vertex::Secret => {
                self.referenced_on(vertex, namespace, name, node)
                    || self
                        .volume_secrets
                        .get(&(namespace.to_string(), name.to_string()))
                        .is_some_and(|pvs| pvs.iter().any(|pv| self.volumes.get(pv).is_some_and(|pv| self.claim_reached(&pv.claim, node))))
            }
            _ => self.referenced_on(vertex, namespace, name, node),
        }
    }

    fn referenced_on(&self, vertex: Vertex, namespace: &str, name: &str, node: &str) -> bool {
        self.referenced.contains_key(&((vertex, namespace.to_string(), name.to_string()), node.to_string()))
    }

    fn claim_reached(&self, (namespace, name): &(String, String), node: &str) -> bool {
        self.referenced_on(Vertex::PersistentVolumeClaim, namespace, name, node)
    }

    /// Takes in a pod as it is now (one not bound to a node takes nothing).
    pub fn put_pod(&mut self, pod: &Value) {
        let key = object_key(pod);
        self.remove_pod(&key.0, &key.1);
        let node = meta::str_at(pod, &["spec", "nodeName"]).unwrap_or_default();
        if node.is_empty() {
            return;
        }
        let edges = PodEdges { node: node.to_string(), references: pod_references(pod) };
        for r in &edges.references {
            *self.referenced.entry((r.clone(), edges.node.clone())).or_insert(0) += 1;
        }
        self.pods.insert(key, Arc::new(edges));
    }

    pub fn remove_pod(&mut self, namespace: &str, name: &str) {
        let Some(old) = self.pods.remove(&(namespace.to_string(), name.to_string())) else { return };
        for r in &old.references {
            let key = (r.clone(), old.node.clone());
            match self.referenced.get_mut(&key) {
                Some(n) if *n > 1 => *n -= 1,
                _ => drop(self.referenced.remove(&key)),
            }
        }
    }

    /// Takes in a persistent volume as it is now (one without a claim reaches nothing).
    pub fn put_volume(&mut self, pv: &Value) {
        let name = object_key(pv).1;
        self.remove_volume(&name);
        let Some(claim) = pv.pointer("/spec/claimRef") else { return };
        let text = |k: &str| claim.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let claim = (text("namespace"), text("name"));
        let secrets = volume_secrets(pv, &claim.0);
        for s in &secrets {
            self.volume_secrets.entry(s.clone()).or_default().insert(name.clone());
        }
        self.volumes.insert(name, Arc::new(PvEdges { claim, secrets }));
    }

    pub fn remove_volume(&mut self, name: &str) {
        let Some(old) = self.volumes.remove(name) else { return };
        for s in &old.secrets {
            if let Some(pvs) = self.volume_secrets.get_mut(s) {
                pvs.remove(name);
                if pvs.is_empty() {
                    self.volume_secrets.remove(s);
                }
            }
        }
    }

    /// Takes in a volume attachment as it is now.
    pub fn put_attachment(&mut self, va: &Value) {
        let name = object_key(va).1;
        match meta::str_at(va, &["spec", "nodeName"]).filter(|n| !n.is_empty()) {
            Some(node) => drop(self.attachments.insert(name, node.to_string())),
            None => drop(self.attachments.remove(&name)),
        }
    }

    pub fn remove_attachment(&mut self, name: &str) {
        self.attachments.remove(name);
    }
}

fn object_key(obj: &Value) -> (String, String) {
    let text = |k: &str| meta::str_at(obj, &["metadata", k]).unwrap_or_default().to_string();
    (text("namespace"), text("name"))
}

/// The objects a pod bound to a node references, each once (kube's `AddPod`).
fn pod_references(pod: &Value) -> Vec<Referenced> {
    let namespace = meta::str_at(pod, &["metadata", "namespace"]).unwrap_or_default();
    if meta::at(pod, &["metadata", "annotations", "kubernetes.io/config.mirror"]).is_some() {
        return Vec::new();
    }
    let spec = &pod["spec"];
    let mut names = named_in_spec(spec);
    let pod_name = meta::str_at(pod, &["metadata", "name"]).unwrap_or_default();
    let ephemeral = spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.get("ephemeral").is_some_and(Value::is_object))
        .map(|v| format!("{pod_name}-{}", str_at(v, "/name").unwrap_or_default()));
    let ephemeral: Vec<String> = ephemeral.collect();
    let statuses = pod.pointer("/status/resourceClaimStatuses").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    for claim in spec.get("resourceClaims").and_then(Value::as_array).into_iter().flatten() {
        let named = str_at(claim, "/resourceClaimName").or_else(|| {
            let name = str_at(claim, "/name")?;
            statuses.iter().find(|s| str_at(s, "/name") == Some(name)).and_then(|s| str_at(s, "/resourceClaimName"))
        });
        names.extend(named.filter(|n| !n.is_empty()).map(|n| (Vertex::ResourceClaim, n)));
    }
    let mut out: Vec<Referenced> = names.into_iter().map(|(v, n)| (v, namespace.to_string(), n.to_string())).collect();
    out.extend(ephemeral.into_iter().map(|n| (Vertex::PersistentVolumeClaim, namespace.to_string(), n)));
    out.sort();
    out.dedup();
    out
}

/// What a pod's spec names, by kind (kube's `VisitPodSecretNames` and `VisitPodConfigmapNames`,
/// its service account and its volumes' claims), empty names left out.
pub fn named_in_spec(spec: &Value) -> Vec<(Vertex, &str)> {
    let mut names: Vec<(Vertex, &str)> = Vec::new();
    names.extend(str_at(spec, "/serviceAccountName").map(|n| (Vertex::ServiceAccount, n)));
    for s in spec.get("imagePullSecrets").and_then(Value::as_array).into_iter().flatten() {
        names.extend(str_at(s, "/name").map(|n| (Vertex::Secret, n)));
    }
    for kind in ["initContainers", "containers", "ephemeralContainers"] {
        for c in spec.get(kind).and_then(Value::as_array).into_iter().flatten() {
            for from in c.get("envFrom").and_then(Value::as_array).into_iter().flatten() {
                names.extend(str_at(from, "/secretRef/name").map(|n| (Vertex::Secret, n)));
                names.extend(str_at(from, "/configMapRef/name").map(|n| (Vertex::ConfigMap, n)));
            }
            for env in c.get("env").and_then(Value::as_array).into_iter().flatten() {
                names.extend(str_at(env, "/valueFrom/secretKeyRef/name").map(|n| (Vertex::Secret, n)));
                names.extend(str_at(env, "/valueFrom/configMapKeyRef/name").map(|n| (Vertex::ConfigMap, n)));
            }
        }
    }
    for v in spec.get("volumes").and_then(Value::as_array).into_iter().flatten() {
        names.extend(str_at(v, "/secret/secretName").map(|n| (Vertex::Secret, n)));
        names.extend(str_at(v, "/configMap/name").map(|n| (Vertex::ConfigMap, n)));
        for source in v.pointer("/projected/sources").and_then(Value::as_array).into_iter().flatten() {
            names.extend(str_at(source, "/secret/name").map(|n| (Vertex::Secret, n)));
            names.extend(str_at(source, "/configMap/name").map(|n| (Vertex::ConfigMap, n)));
        }
        names.extend(str_at(v, "/azureFile/secretName").map(|n| (Vertex::Secret, n)));
        for plugin in ["cephfs", "cinder", "flexVolume", "rbd", "scaleIO", "iscsi", "storageos"] {
            names.extend(v.get(plugin).and_then(|p| str_at(p, "/secretRef/name")).map(|n| (Vertex::Secret, n)));
        }
        names.extend(str_at(v, "/csi/nodePublishSecretRef/name").map(|n| (Vertex::Secret, n)));
        names.extend(str_at(v, "/persistentVolumeClaim/claimName").map(|n| (Vertex::PersistentVolumeClaim, n)));
    }
    names.retain(|(_, n)| !n.is_empty());
    names
}

fn str_at<'v>(v: &'v Value, path: &str) -> Option<&'v str> {
    v.pointer(path).and_then(Value::as_str)
}

/// The secrets a kubelet reads for a persistent volume (kube's `VisitPVSecretNames`, those
/// visible to kubelets), each with its namespace: the reference's own, or for some plugins the
/// claim's when it names none.
fn volume_secrets(pv: &Value, claim_namespace: &str) -> Vec<(String, String)> {
    let spec = &pv["spec"];
    let mut out = Vec::new();
    let mut add = |reference: Option<&Value>, name_key: &str, namespace_key: &str, fallback: bool| {
        let Some(r) = reference else { return };
        let name = r.get(name_key).and_then(Value::as_str).unwrap_or_default();
        let namespace = r.get(namespace_key).and_then(Value::as_str).filter(|n| !n.is_empty());
        let namespace = namespace.or(fallback.then_some(claim_namespace)).unwrap_or_default();
        if !name.is_empty() {
            out.push((namespace.to_string(), name.to_string()));
        }
    };
    add(spec.get("azureFile"), "secretName", "secretNamespace", true);
    for (plugin, fallback) in
        [("cephfs", true), ("cinder", false), ("flexVolume", true), ("rbd", true), ("scaleIO", true), ("iscsi", true), ("storageos", false)]
    {
        add(spec.get(plugin).and_then(|p| p.get("secretRef")), "name", "namespace", fallback);
    }
    for secret in ["nodePublishSecretRef", "nodeStageSecretRef", "nodeExpandSecretRef"] {
        add(spec.get("csi").and_then(|p| p.get(secret)), "name", "namespace", false);
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str, node: &str, spec: Value) -> Value {
        let mut spec = spec;
        spec["nodeName"] = json!(node);
        json!({"metadata": {"namespace": "ns", "name": name}, "spec": spec})
    }

    #[test]
    fn an_object_stays_reachable_while_a_pod_on_the_node_references_it() {
        let mut g = NodeGraph::default();
        let spec = json!({"imagePullSecrets": [{"name": "pull"}], "ephemeralContainers": [{"env": [{"valueFrom": {"secretKeyRef": {"name": "debug"}}}]}]});
        g.put_pod(&pod("a", "n1", spec.clone()));
        g.put_pod(&pod("b", "n1", spec));
        assert!(g.reaches(Vertex::Secret, "ns", "pull", "n1") && g.reaches(Vertex::Secret, "ns", "debug", "n1"));
        assert!(!g.reaches(Vertex::Secret, "ns", "pull", "n2") && !g.reaches(Vertex::Secret, "other", "pull", "n1"));
        g.remove_pod("ns", "a");
        assert!(g.reaches(Vertex::Secret, "ns", "pull", "n1"), "b still references it");
        g.put_pod(&pod("b", "n2", json!({"imagePullSecrets": [{"name": "pull"}]})));
        assert!(!g.reaches(Vertex::Secret, "ns", "pull", "n1") && g.reaches(Vertex::Secret, "ns", "pull", "n2"), "b moved");
        g.put_pod(&json!({"metadata": {"namespace": "ns", "name": "b"}, "spec": {}}));
        assert!(!g.reaches(Vertex::Secret, "ns", "pull", "n2") && !g.reaches(Vertex::Pod, "ns", "b", "n2"), "unbound, it reaches nothing");
    }

    #[test]
    fn claims_of_ephemeral_volumes_and_resource_claims_and_the_secrets_of_volumes() {
        let mut g = NodeGraph::default();
        let spec = json!({"volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}, {"name": "fixed", "resourceClaimName": "shared"}]});
        let mut p = pod("web", "n1", spec);
        p["status"] = json!({"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "web-gpu-x"}]});
        g.put_pod(&p);
        assert!(g.reaches(Vertex::PersistentVolumeClaim, "ns", "web-scratch", "n1"));
        assert!(g.reaches(Vertex::ResourceClaim, "ns", "web-gpu-x", "n1") && g.reaches(Vertex::ResourceClaim, "ns", "shared", "n1"));

        // An rbd volume's secret without a namespace is in the claim's; a cinder one's is not.
        g.put_volume(&json!({"metadata": {"name": "pv1"}, "spec": {"claimRef": {"namespace": "ns", "name": "web-scratch"},
            "rbd": {"secretRef": {"name": "ceph"}}}}));
        g.put_volume(&json!({"metadata": {"name": "pv2"}, "spec": {"claimRef": {"namespace": "ns", "name": "web-scratch"},
            "cinder": {"secretRef": {"name": "openstack"}}, "csi": {"controllerPublishSecretRef": {"name": "ctl", "namespace": "ns"}}}}));
        assert!(g.reaches(Vertex::PersistentVolume, "", "pv1", "n1") && g.reaches(Vertex::Secret, "ns", "ceph", "n1"));
        assert!(!g.reaches(Vertex::Secret, "ns", "openstack", "n1") && g.reaches(Vertex::Secret, "", "openstack", "n1"));
        assert!(!g.reaches(Vertex::Secret, "ns", "ctl", "n1"), "a controller's secret is not the kubelet's");
        g.remove_volume("pv1");
        assert!(!g.reaches(Vertex::Secret, "ns", "ceph", "n1"));
        g.remove_pod("ns", "web");
        assert!(!g.reaches(Vertex::PersistentVolume, "", "pv2", "n1"));
        assert!(g.referenced.is_empty() && g.pods.is_empty(), "nothing left behind");
    }
}
