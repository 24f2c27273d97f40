//! The objects a scenario writes: pods with a realistic spec (about 2 KiB of JSON, like a
//! Deployment's pod with probes, resources, env and volumes), configmaps of a chosen size, and
//! the objects a cluster writes most after pods: node leases (each kubelet renews one every
//! 10 s) and endpoint slices (a service's ready pods, 50 endpoints here); and custom resources
//! shaped as the configmaps (`benchwidgets.kapi.dev`, a CRD kapi-bench installs).

use bytes::Bytes;
use serde_json::{Value, json};

#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum Kind {
    Pod,
    Configmap,
    Lease,
    Endpointslice,
    Widget,
}

/// The CRD of [`Kind::Widget`]: its objects are kept as they come.
pub fn widget_crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "benchwidgets.kapi.dev"},
        "spec": {"group": "kapi.dev", "scope": "Namespaced", "names": {"plural": "benchwidgets", "kind": "BenchWidget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})
}

impl Kind {
    /// The collection's path in `namespace`.
    pub fn collection(self, namespace: &str) -> String {
        match self {
            Kind::Pod => format!("/api/v1/namespaces/{namespace}/pods"),
            Kind::Configmap => format!("/api/v1/namespaces/{namespace}/configmaps"),
            Kind::Lease => format!("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"),
            Kind::Endpointslice => format!("/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"),
            Kind::Widget => format!("/apis/kapi.dev/v1/namespaces/{namespace}/benchwidgets"),
        }
    }

    /// The object's JSON; `size` is the configmap's payload in bytes (pods have their own size).
    pub fn object(self, name: &str, size: usize) -> Value {
        match self {
            Kind::Pod => pod(name),
            Kind::Configmap => json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "labels": {"app": "kapi-bench"}},
                "data": {"payload": "x".repeat(size)},
            }),
            Kind::Lease => json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": "2026-01-01T00:00:00.000000Z"},
            }),
            Kind::Endpointslice => endpoint_slice(name),
            Kind::Widget => json!({
                "apiVersion": "kapi.dev/v1",
                "kind": "BenchWidget",
                "metadata": {"name": name, "labels": {"app": "kapi-bench"}},
                "data": {"payload": "x".repeat(size)},
            }),
        }
    }

    pub fn body(self, name: &str, size: usize) -> Bytes {
        Bytes::from(serde_json::to_vec(&self.object(name, size)).expect("JSON trees serialize"))
    }
}

fn endpoint_slice(name: &str) -> Value {
    let endpoints: Vec<Value> = (0..50)
        .map(|i| {
            json!({"addresses": [format!("10.{}.{}.{}", i / 250, i % 250, 7)], "conditions": {"ready": true, "serving": true, "terminating": false},
                "nodeName": format!("node-{}", i % 20), "zone": "zone-a",
                "targetRef": {"kind": "Pod", "namespace": "kapi-bench", "name": format!("web-7d9f8b6c5d-{i:05}"), "uid": format!("00000000-0000-4000-8000-{i:012}")}})
        })
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": name, "labels": {"kubernetes.io/service-name": "web", "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    })
}

fn pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"app": "kapi-bench", "tier": "backend", "pod-template-hash": "7d9f8b6c5d"},
            "annotations": {"kapi.dev/bench": "density", "prometheus.io/scrape": "true", "prometheus.io/port": "9102"},
        },
        "spec": {
            "containers": [{
                "name": "server",
                "image": "registry.k8s.io/e2e-test-images/agnhost:2.52",
                "args": ["netexec", "--http-port=8080", "--udp-port=8081"],
                "ports": [
                    {"name": "http", "containerPort": 8080, "protocol": "TCP"},
                    {"name": "udp", "containerPort": 8081, "protocol": "UDP"},
                ],
                "env": [
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "LOG_LEVEL", "value": "info"},
                    {"name": "GOMAXPROCS", "value": "2"},
                ],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
                "volumeMounts": [
                    {"name": "config", "mountPath": "/etc/bench", "readOnly": true},
                    {"name": "cache", "mountPath": "/var/cache/bench"},
                ],
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "initialDelaySeconds": 10, "periodSeconds": 10},
                "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8080}, "periodSeconds": 5, "failureThreshold": 3},
                "securityContext": {"allowPrivilegeEscalation": false, "runAsNonRoot": true, "runAsUser": 1000, "capabilities": {"drop": ["ALL"]}},
            }],
            "volumes": [
                {"name": "config", "configMap": {"name": "bench-config"}},
                {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}},
            ],
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "terminationGracePeriodSeconds": 30,
            "priority": 0,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bench_pod_is_about_two_kib() {
        let n = Kind::Pod.body("bench-000001", 0).len();
        assert!((1500..2600).contains(&n), "{n} bytes");
        assert_eq!(Kind::Configmap.object("c", 100)["data"]["payload"].as_str().unwrap().len(), 100);
    }
}
