//! TaintNodesByCondition: a new node is tainted `node.kubernetes.io/not-ready:NoSchedule`
//! until its kubelet says it is ready.

use serde_json::{Value, json};

use super::{Attributes, Operation, Plugin};
use crate::meta;
use crate::rand::Rng;
use crate::status::ApiError;

#[derive(Debug)]
pub struct TaintNodesByCondition;

impl Plugin for TaintNodesByCondition {
    fn name(&self) -> &'static str {
        "TaintNodesByCondition"
    }

    fn handles(&self, op: Operation) -> bool {
        op == Operation::Create
    }

    fn admit(&self, a: &Attributes, obj: Option<&mut Value>, _rng: &mut Rng) -> Result<(), ApiError> {
        let Some(node) = obj.filter(|_| a.is_core("nodes")) else { return Ok(()) };
        let taint = json!({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"});
        let spec = meta::object_at(node, &["spec"]);
        let taints = spec.entry("taints").or_insert_with(|| json!([]));
        if let Value::Array(a) = taints
            && !a.iter().any(|t| t.get("key") == taint.get("key") && t.get("effect") == taint.get("effect"))
        {
            a.push(taint);
        }
        Ok(())
    }
}
