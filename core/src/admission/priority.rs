//! Priority: a new pod's priority is its PriorityClass's (0 without one), and a priority the
//! pod states must be that one.

use serde_json::{Value, json};

use super::{Attributes, Operation, Plugin};
use crate::meta;
use crate::rand::Rng;
use crate::status::ApiError;

#[derive(Debug)]
pub struct Priority;

impl Plugin for Priority {
    fn name(&self) -> &'static str {
        "Priority"
    }

    fn handles(&self, op: Operation) -> bool {
        op == Operation::Create
    }

    fn admit(&self, a: &Attributes, obj: Option<&mut Value>, _rng: &mut Rng) -> Result<(), ApiError> {
        let Some(pod) = obj.filter(|_| a.is_core("pods")) else { return Ok(()) };
        let spec = meta::object_at(pod, &["spec"]);
        let class = spec.get("priorityClassName").and_then(Value::as_str).unwrap_or("").to_string();
        let value = if class.is_empty() {
            0
        } else {
            match crate::resources::scheduling::SYSTEM_CLASSES.iter().find(|(n, ..)| *n == class) {
                Some((_, v, _)) => *v,
                None => return Err(a.forbidden(&format!("no PriorityClass with name {class} was found"))),
            }
        };
        if let Some(given) = spec.get("priority").and_then(Value::as_i64)
            && given != value
        {
            return Err(a.forbidden(&format!(
                "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {value} from the given PriorityClass name"
            )));
        }
        spec.insert("priority".into(), json!(value));
        spec.entry("preemptionPolicy").or_insert_with(|| json!("PreemptLowerPriority"));
        Ok(())
    }
}
