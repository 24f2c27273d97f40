//! AlwaysPullImages (off by default): every container of a pod created, or updated with an
//! image it did not have, pulls its image always, so a node's cached image is not used by a
//! pod that could not pull it.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::{Attributes, Operation, Plugin};
use crate::meta;
use crate::rand::Rng;
use crate::status::{ApiError, FieldError};

const LISTS: [&str; 3] = ["initContainers", "containers", "ephemeralContainers"];

#[derive(Debug)]
pub struct AlwaysPullImages;

fn images(pod: &Value) -> BTreeSet<&str> {
    LISTS
        .iter()
        .flat_map(|l| meta::at(pod, &["spec", l]).and_then(Value::as_array).into_iter().flatten())
        .filter_map(|c| c.get("image").and_then(Value::as_str))
        .collect()
}

impl AlwaysPullImages {
    /// Whether the request is not the plugin's: not a pod, a subresource, or an update that
    /// brings no image the pod did not have.
    fn ignores(&self, a: &Attributes, pod: &Value) -> bool {
        !a.is_core("pods") || a.operation == Operation::Update && a.old.is_some_and(|old| images(pod).is_subset(&images(old)))
    }
}

impl Plugin for AlwaysPullImages {
    fn name(&self) -> &'static str {
        "AlwaysPullImages"
    }

    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Update)
    }

    fn admit(&self, a: &Attributes, obj: Option<&mut Value>, _rng: &mut Rng) -> Result<(), ApiError> {
        let Some(pod) = obj.filter(|p| !self.ignores(a, p)) else { return Ok(()) };
        for list in LISTS {
            if let Some(Value::Array(cs)) = meta::object_at(pod, &["spec"]).get_mut(list) {
                for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                    c.insert("imagePullPolicy".into(), json!("Always"));
                }
            }
        }
        Ok(())
    }

    fn validate(&self, a: &Attributes, obj: Option<&Value>, _warnings: &mut Vec<String>) -> Result<(), ApiError> {
        let Some(pod) = obj.filter(|p| !self.ignores(a, p)) else { return Ok(()) };
        let mut errors = Vec::new();
        for list in LISTS {
            for (i, c) in meta::at(pod, &["spec", list]).and_then(Value::as_array).into_iter().flatten().enumerate() {
                let policy = c.get("imagePullPolicy").and_then(Value::as_str).unwrap_or_default();
                if policy != "Always" {
                    let field = FieldError::not_supported(format!("spec.{list}[{i}].imagePullPolicy"), json!(policy), &["Always"]);
                    errors.push(a.forbidden(&field.to_string()).message);
                }
            }
        }
        // kube returns these aggregated, not as a status: a 500.
        if errors.is_empty() { Ok(()) } else { Err(ApiError::new(500, "", crate::authz::rbac::aggregate(&errors))) }
    }
}
