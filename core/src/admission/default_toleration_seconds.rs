//! DefaultTolerationSeconds: a new pod tolerates a node that is not ready or unreachable for
//! 300 seconds, unless it says otherwise.

use serde_json::{Value, json};

use super::{Attributes, Operation, Plugin};
use crate::meta;
use crate::rand::Rng;
use crate::status::ApiError;

#[derive(Debug)]
pub struct DefaultTolerationSeconds;

impl Plugin for DefaultTolerationSeconds {
    fn name(&self) -> &'static str {
        "DefaultTolerationSeconds"
    }

    fn handles(&self, op: Operation) -> bool {
        op == Operation::Create
    }

    fn admit(&self, a: &Attributes, obj: Option<&mut Value>, _rng: &mut Rng) -> Result<(), ApiError> {
        let Some(pod) = obj.filter(|_| a.is_core("pods")) else { return Ok(()) };
        let spec = meta::object_at(pod, &["spec"]);
        let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
        let Value::Array(ts) = tolerations else { return Ok(()) };
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
        Ok(())
    }
}
