//! The Node authorizer's graph under fuzzing: pods (bound or not, mirror or not, referencing
//! secrets, config maps, claims and service accounts from any of the places a pod may name
//! them) and persistent volumes put and removed in any order, with names drawn from small sets
//! so that they meet. After each change, every question a node may ask of the graph is
//! answered by kapi's index and by kube's definition written plainly here (a path from the
//! object to the node through the pods and volumes as they are now): they must agree.

use std::collections::BTreeMap;

use arbitrary::Unstructured;
use kapi_core::authz::NodeGraph;
use kapi_core::authz::graph::Vertex;
use serde_json::{Value, json};

const NAMES: &[&str] = &["a", "b", "c"];
const NAMESPACES: &[&str] = &["dev", "prod"];
const NODES: &[&str] = &["n1", "n2"];

fn pick<'a>(u: &mut Unstructured, from: &[&'a str]) -> arbitrary::Result<&'a str> {
    Ok(from[u.choose_index(from.len())?])
}

/// A pod as drawn: where it runs and what it references, as kube's graph reads them.
#[derive(Debug)]
struct Pod {
    node: Option<&'static str>,
    mirror: bool,
    references: Vec<(Vertex, String)>,
}

/// A persistent volume as drawn: its claim and the secrets its kubelet reads.
#[derive(Debug)]
struct Volume {
    claim: Option<(String, String)>,
    secrets: Vec<(String, String)>,
}

/// A reference put in one of the places a pod may make it, and what it references.
fn reference(u: &mut Unstructured, pod: &mut Value, pod_name: &str) -> arbitrary::Result<(Vertex, String)> {
    let name = pick(u, NAMES)?;
    let container = ["initContainers", "containers", "ephemeralContainers"][u.choose_index(3)?];
    let push = |pod: &mut Value, path: &[&str], item: Value| {
        let mut at = &mut pod["spec"];
        for p in path {
            at = &mut at[*p];
        }
        if !at.is_array() {
            *at = json!([]);
        }
        at.as_array_mut().expect("an array").push(item);
    };
    Ok(match u.int_in_range(0u8..=10)? {
        0 => {
            push(pod, &["imagePullSecrets"], json!({"name": name}));
            (Vertex::Secret, name.into())
        }
        1 => {
            push(pod, &[container], json!({"name": "c", "envFrom": [{"secretRef": {"name": name}}]}));
            (Vertex::Secret, name.into())
        }
        2 => {
            push(pod, &[container], json!({"name": "c", "env": [{"name": "E", "valueFrom": {"configMapKeyRef": {"name": name, "key": "k"}}}]}));
            (Vertex::ConfigMap, name.into())
        }
        3 => {
            push(pod, &["volumes"], json!({"name": "v", "secret": {"secretName": name}}));
            (Vertex::Secret, name.into())
        }
        4 => {
            push(pod, &["volumes"], json!({"name": "v", "projected": {"sources": [{"configMap": {"name": name}}]}}));
            (Vertex::ConfigMap, name.into())
        }
        5 => {
            push(pod, &["volumes"], json!({"name": "v", "rbd": {"monitors": ["m"], "image": "i", "secretRef": {"name": name}}}));
            (Vertex::Secret, name.into())
        }
        6 => {
            push(pod, &["volumes"], json!({"name": "v", "persistentVolumeClaim": {"claimName": name}}));
            (Vertex::PersistentVolumeClaim, name.into())
        }
        7 => {
            push(pod, &["volumes"], json!({"name": name, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}));
            (Vertex::PersistentVolumeClaim, format!("{pod_name}-{name}"))
        }
        8 => {
            push(pod, &["resourceClaims"], json!({"name": "r", "resourceClaimName": name}));
            (Vertex::ResourceClaim, name.into())
        }
        9 => {
            push(pod, &["volumes"], json!({"name": "v", "csi": {"driver": "d", "nodePublishSecretRef": {"name": name}}}));
            (Vertex::Secret, name.into())
        }
        _ => {
            pod["spec"]["serviceAccountName"] = json!(name);
            (Vertex::ServiceAccount, name.into())
        }
    })
}

pub fn node_graph(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let mut graph = NodeGraph::default();
    let mut pods: BTreeMap<(String, String), Pod> = BTreeMap::new();
    let mut volumes: BTreeMap<String, Volume> = BTreeMap::new();
    while !u.is_empty() {
        if change(&mut u, &mut graph, &mut pods, &mut volumes).is_err() {
            return;
        }
        check(&graph, &pods, &volumes);
    }
}

fn change(
    u: &mut Unstructured,
    graph: &mut NodeGraph,
    pods: &mut BTreeMap<(String, String), Pod>,
    volumes: &mut BTreeMap<String, Volume>,
) -> arbitrary::Result<()> {
    let name = pick(u, NAMES)?;
    if u.ratio(1, 4)? {
        // A persistent volume, put or removed.
        if u.ratio(1, 3)? {
            graph.remove_volume(name);
            volumes.remove(name);
            return Ok(());
        }
        let mut pv = json!({"metadata": {"name": name}, "spec": {}});
        let claim = if u.ratio(3, 4)? { Some((pick(u, NAMESPACES)?.to_string(), pick(u, NAMES)?.to_string())) } else { None };
        let mut secrets = Vec::new();
        if let Some((ns, claim_name)) = &claim {
            pv["spec"]["claimRef"] = json!({"namespace": ns, "name": claim_name});
            let secret = pick(u, NAMES)?;
            match u.int_in_range(0u8..=2)? {
                0 => {
                    pv["spec"]["cephfs"] = json!({"monitors": ["m"], "secretRef": {"name": secret}});
                    secrets.push((ns.clone(), secret.to_string()));
                }
                1 => {
                    let other = pick(u, NAMESPACES)?;
                    pv["spec"]["csi"] = json!({"driver": "d", "volumeHandle": "h", "nodeStageSecretRef": {"name": secret, "namespace": other}});
                    secrets.push((other.to_string(), secret.to_string()));
                }
                _ => pv["spec"]["csi"] = json!({"driver": "d", "volumeHandle": "h", "controllerPublishSecretRef": {"name": secret, "namespace": ns}}),
            }
        }
        graph.put_volume(&pv);
        volumes.insert(name.to_string(), Volume { claim, secrets });
        return Ok(());
    }
    let namespace = pick(u, NAMESPACES)?;
    let key = (namespace.to_string(), name.to_string());
    if u.ratio(1, 4)? {
        graph.remove_pod(namespace, name);
        pods.remove(&key);
        return Ok(());
    }
    let mut pod = json!({"metadata": {"namespace": namespace, "name": name}, "spec": {"containers": []}});
    let node = if u.ratio(3, 4)? { Some(NODES[u.choose_index(NODES.len())?]) } else { None };
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    let mirror = u.ratio(1, 6)?;
    if mirror {
        pod["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "x"});
    }
    let mut references = Vec::new();
    for _ in 0..u.int_in_range(0u8..=3)? {
        let (vertex, named) = reference(u, &mut pod, name)?;
        if vertex == Vertex::ServiceAccount {
            // A pod has one service account: the last named.
            references.retain(|(v, _)| *v != Vertex::ServiceAccount);
        }
        references.push((vertex, named));
    }
    graph.put_pod(&pod);
    pods.insert(key, Pod { node, mirror, references });
    Ok(())
}

/// Every question of the small sets, answered by the graph and by kube's definition.
fn check(graph: &NodeGraph, pods: &BTreeMap<(String, String), Pod>, volumes: &BTreeMap<String, Volume>) {
    let referenced = |vertex: Vertex, ns: &str, name: &str, node: &str| {
        pods.iter().any(|((pod_ns, _), p)| p.node == Some(node) && !p.mirror && pod_ns == ns && p.references.iter().any(|(v, n)| *v == vertex && n == name))
    };
    let volume_reached = |pv: &Volume, node: &str| pv.claim.as_ref().is_some_and(|(ns, claim)| referenced(Vertex::PersistentVolumeClaim, ns, claim, node));
    let mut names: Vec<String> = NAMES.iter().map(|n| n.to_string()).collect();
    names.extend(NAMES.iter().flat_map(|p| NAMES.iter().map(move |v| format!("{p}-{v}"))));
    for node in NODES {
        for ns in NAMESPACES {
            for name in &names {
                for vertex in [Vertex::Secret, Vertex::ConfigMap, Vertex::PersistentVolumeClaim, Vertex::ResourceClaim, Vertex::ServiceAccount] {
                    let mut expected = referenced(vertex, ns, name, node);
                    if vertex == Vertex::Secret {
                        expected |= volumes.values().any(|pv| volume_reached(pv, node) && pv.secrets.contains(&(ns.to_string(), name.clone())));
                    }
                    assert_eq!(graph.reaches(vertex, ns, name, node), expected, "{vertex:?} {ns}/{name} from {node}: {pods:?} {volumes:?}");
                }
                let pod = pods.get(&(ns.to_string(), name.clone())).is_some_and(|p| p.node == Some(*node));
                assert_eq!(graph.reaches(Vertex::Pod, ns, name, node), pod, "pod {ns}/{name} from {node}");
            }
        }
        for name in NAMES {
            let expected = volumes.get(*name).is_some_and(|pv| volume_reached(pv, node));
            assert_eq!(graph.reaches(Vertex::PersistentVolume, "", name, node), expected, "pv {name} from {node}: {pods:?} {volumes:?}");
        }
    }
}
