//! The objects a scenario writes: pods with a realistic spec (about 2 KiB of JSON, like a
//! Deployment's pod with probes, resources, env and volumes) or configmaps of a chosen size.

use bytes::Bytes;
use serde_json::{Value, json};

#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum Kind {
    Pod,
    Configmap,
}

impl Kind {
    /// The collection's path in `namespace`.
    pub fn collection(self, namespace: &str) -> String {
        match self {
            Kind::Pod => format!("/api/v1/namespaces/{namespace}/pods"),
            Kind::Configmap => format!("/api/v1/namespaces/{namespace}/configmaps"),
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
        }
    }

    pub fn body(self, name: &str, size: usize) -> Bytes {
        Bytes::from(serde_json::to_vec(&self.object(name, size)).expect("JSON trees serialize"))
    }
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
