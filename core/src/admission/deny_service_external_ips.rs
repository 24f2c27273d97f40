//! DenyServiceExternalIPs (off by default): no Service gains `externalIPs`; an update may
//! keep or drop those it had.

use serde_json::Value;

use super::{Attributes, Operation, Plugin};
use crate::status::ApiError;

#[derive(Debug)]
pub struct DenyServiceExternalIPs;

fn external_ips(service: &Value) -> Vec<&str> {
    service.pointer("/spec/externalIPs").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect()
}

impl Plugin for DenyServiceExternalIPs {
    fn name(&self) -> &'static str {
        "DenyServiceExternalIPs"
    }

    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Update)
    }

    fn validate(&self, a: &Attributes, obj: Option<&Value>, _warnings: &mut Vec<String>) -> Result<(), ApiError> {
        let Some(service) = obj.filter(|_| a.is_core("services")) else { return Ok(()) };
        let had = a.old.map(external_ips).unwrap_or_default();
        if external_ips(service).iter().all(|ip| had.contains(ip)) {
            return Ok(());
        }
        Err(a.forbidden("Use of external IPs is denied by admission control"))
    }
}
