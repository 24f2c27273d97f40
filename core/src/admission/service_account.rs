//! ServiceAccount: a new pod (not a kubelet's mirror pod) runs as a service account that
//! exists (`default` unless it names one), and, unless it or the account opts out, gets the
//! projected volume of the account's token, the cluster's CA and its namespace
//! (`kube-api-access-<random>`), mounted in every container, as kube v1.33 builds it.

use serde_json::{Value, json};

use super::{Attributes, Lookup, Operation, Pending, Plugin};
use crate::meta;
use crate::rand::Rng;
use crate::status::ApiError;

const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

fn is_mirror(pod: &Value) -> bool {
    meta::at(pod, &["metadata", "annotations", MIRROR_ANNOTATION]).is_some()
}

/// The account a pod names (`default` when none).
fn account_of(pod: &Value) -> &str {
    meta::str_at(pod, &["spec", "serviceAccountName"]).filter(|s| !s.is_empty()).unwrap_or("default")
}

#[derive(Debug)]
pub struct ServiceAccount;

impl Plugin for ServiceAccount {
    fn name(&self) -> &'static str {
        "ServiceAccount"
    }

    fn handles(&self, op: Operation) -> bool {
        op == Operation::Create
    }

    fn lookups(&self, request: &Pending) -> Vec<Lookup> {
        let pods = request.info.group.is_empty() && request.info.resource == "pods" && request.subresource.is_none();
        match (pods, request.namespace, request.object) {
            (true, Some(ns), Some(pod)) if !is_mirror(pod) => vec![Lookup::ServiceAccount { namespace: ns.to_string(), name: account_of(pod).to_string() }],
            _ => Vec::new(),
        }
    }

    fn admit(&self, a: &Attributes, obj: Option<&mut Value>, rng: &mut Rng) -> Result<(), ApiError> {
        let Some(pod) = obj.filter(|p| a.is_core("pods") && !is_mirror(p)) else { return Ok(()) };
        let sa_name = account_of(pod).to_string();
        let spec = meta::object_at(pod, &["spec"]);
        spec.insert("serviceAccountName".into(), json!(sa_name));
        spec.insert("serviceAccount".into(), json!(sa_name));
        let Some(Some(sa)) = &a.found.service_account else {
            let ns = meta::namespace(pod).to_string();
            return Err(a.forbidden(&format!("error looking up service account {ns}/{sa_name}: serviceaccount {} not found", crate::status::quote(&sa_name))));
        };
        let pod_says = meta::at(pod, &["spec", "automountServiceAccountToken"]).and_then(Value::as_bool);
        let sa_says = sa.get("automountServiceAccountToken").and_then(Value::as_bool);
        if pod_says == Some(false) || (pod_says.is_none() && sa_says == Some(false)) {
            return Ok(());
        }
        let already_mounted = ["containers", "initContainers"].iter().any(|list| {
            meta::at(pod, &["spec", list]).and_then(Value::as_array).into_iter().flatten().any(|c| {
                c.get("volumeMounts")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .any(|m| m.get("mountPath").and_then(Value::as_str) == Some(TOKEN_MOUNT_PATH))
            })
        });
        if already_mounted {
            return Ok(());
        }
        let volume_name = format!("kube-api-access-{}", rng.name_suffix(5));
        let volume = json!({
            "name": volume_name,
            "projected": {
                "defaultMode": 420,
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
                ],
            },
        });
        let spec = meta::object_at(pod, &["spec"]);
        if let Value::Array(v) = spec.entry("volumes").or_insert_with(|| json!([])) {
            v.push(volume);
        }
        let mount = json!({"name": volume_name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH});
        for list in ["initContainers", "containers"] {
            if let Some(Value::Array(cs)) = spec.get_mut(list) {
                for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                    if let Value::Array(m) = c.entry("volumeMounts").or_insert_with(|| json!([])) {
                        m.push(mount.clone());
                    }
                }
            }
        }
        Ok(())
    }
}
