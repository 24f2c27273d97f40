//! LimitPodHardAntiAffinityTopology (off by default): a pod's required anti-affinity may only
//! keep it from nodes, `topologyKey: kubernetes.io/hostname`; any other key is refused with
//! kube's 403.

use serde_json::Value;

use super::{Attributes, Operation, Plugin};
use crate::meta;
use crate::status::ApiError;

const HOSTNAME: &str = "kubernetes.io/hostname";

#[derive(Debug)]
pub struct LimitPodHardAntiAffinityTopology;

impl Plugin for LimitPodHardAntiAffinityTopology {
    fn name(&self) -> &'static str {
        "LimitPodHardAntiAffinityTopology"
    }

    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Update)
    }

    fn validate(&self, a: &Attributes, obj: Option<&Value>, _warnings: &mut Vec<String>) -> Result<(), ApiError> {
        let Some(pod) = obj.filter(|_| a.is_core("pods")) else { return Ok(()) };
        let terms = meta::at(pod, &["spec", "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution"]).and_then(Value::as_array);
        for term in terms.into_iter().flatten() {
            let key = term.get("topologyKey").and_then(Value::as_str).unwrap_or_default();
            if key != HOSTNAME {
                let why = format!("affinity.PodAntiAffinity.RequiredDuringScheduling has TopologyKey {key} but only key {HOSTNAME} is allowed");
                return Err(ApiError::forbidden(&a.info.group_resource(), meta::name(pod), &why));
            }
        }
        Ok(())
    }
}
