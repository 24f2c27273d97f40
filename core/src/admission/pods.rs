//! Admission of new pods: ServiceAccount (default account, API access volume), Priority and
//! DefaultTolerationSeconds.

use serde_json::{Value, json};

use super::Admission;
use crate::catalog::ResourceInfo;
use crate::meta;
use crate::rand::Rng;
use crate::status::ApiError;

const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

pub(super) fn is_mirror(pod: &Value) -> bool {
    meta::at(pod, &["metadata", "annotations", MIRROR_ANNOTATION]).is_some()
}

pub(super) fn admit_create(adm: &Admission, info: &ResourceInfo, pod: &mut Value, rng: &mut Rng) -> Result<(), ApiError> {
    let name = meta::name(pod).to_string();
    if !is_mirror(pod) {
        service_account(adm, info, &name, pod, rng)?;
    }
    priority(info, &name, pod)?;
    default_tolerations(pod);
    Ok(())
}

fn service_account(adm: &Admission, info: &ResourceInfo, name: &str, pod: &mut Value, rng: &mut Rng) -> Result<(), ApiError> {
    let spec = meta::object_at(pod, &["spec"]);
    let sa_name = spec.get("serviceAccountName").and_then(Value::as_str).filter(|s| !s.is_empty()).unwrap_or("default").to_string();
    spec.insert("serviceAccountName".into(), json!(sa_name));
    spec.insert("serviceAccount".into(), json!(sa_name));
    let sa = match &adm.service_account {
        Some(Some(sa)) => sa,
        _ => {
            let ns = meta::namespace(pod).to_string();
            return Err(ApiError::forbidden(
                &info.group_resource(),
                name,
                &format!("error looking up service account {ns}/{sa_name}: serviceaccount {} not found", crate::status::quote(&sa_name)),
            ));
        }
    };
    let pod_says = meta::at(pod, &["spec", "automountServiceAccountToken"]).and_then(Value::as_bool);
    let sa_says = sa.get("automountServiceAccountToken").and_then(Value::as_bool);
    if pod_says == Some(false) || (pod_says.is_none() && sa_says == Some(false)) {
        return Ok(());
    }
    let already_mounted = ["containers", "initContainers"].iter().any(|list| {
        meta::at(pod, &["spec", list]).and_then(Value::as_array).into_iter().flatten().any(|c| {
            c.get("volumeMounts").and_then(Value::as_array).into_iter().flatten().any(|m| m.get("mountPath").and_then(Value::as_str) == Some(TOKEN_MOUNT_PATH))
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

fn priority(info: &ResourceInfo, name: &str, pod: &mut Value) -> Result<(), ApiError> {
    let spec = meta::object_at(pod, &["spec"]);
    let class = spec.get("priorityClassName").and_then(Value::as_str).unwrap_or("").to_string();
    let value = if class.is_empty() {
        0
    } else {
        match crate::resources::scheduling::SYSTEM_CLASSES.iter().find(|(n, ..)| *n == class) {
            Some((_, v, _)) => *v,
            None => {
                return Err(ApiError::forbidden(&info.group_resource(), name, &format!("no PriorityClass with name {class} was found")));
            }
        }
    };
    if let Some(given) = spec.get("priority").and_then(Value::as_i64)
        && given != value
    {
        return Err(ApiError::forbidden(
            &info.group_resource(),
            name,
            &format!(
                "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {value} from the given PriorityClass name"
            ),
        ));
    }
    spec.insert("priority".into(), json!(value));
    spec.entry("preemptionPolicy").or_insert_with(|| json!("PreemptLowerPriority"));
    Ok(())
}

fn default_tolerations(pod: &mut Value) {
    let spec = meta::object_at(pod, &["spec"]);
    let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
    let Value::Array(ts) = tolerations else { return };
    for key in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
        let tolerated = ts.iter().any(|t| {
            let k = t.get("key").and_then(Value::as_str).unwrap_or("");
            let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
            let op = t.get("operator").and_then(Value::as_str).unwrap_or("Equal");
            (k == key || (k.is_empty() && op == "Exists")) && (effect.is_empty() || effect == "NoExecute")
        });
        if !tolerated {
            ts.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
        }
    }
    if ts.is_empty() {
        spec.remove("tolerations");
    }
}
