//! core/v1 nodes (stored under `minions`, as kube-apiserver keeps them).

use serde_json::{Value, json};

use super::{info, serve, status_subresource};
use crate::catalog::{FieldName, Resource, Strategy, field, keep_status};
use crate::meta;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};

pub fn resource() -> Resource {
    let mut i = info("", "v1", "Node", "nodes", false);
    i.short_names = crate::catalog::names(&["no"]);
    i.storage_prefix = "minions".into();
    i.subresources = vec![status_subresource(&i)];
    serve(i, Nodes)
}

struct Nodes;

const INFO: &str = "io.k8s.api.core.v1.NodeSystemInfo";
const COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Status", "string", Describe::Text("The status of the node")),
    Column::new("Roles", "string", Describe::Text("The roles of the node")),
    Column::AGE,
    Column::new("Version", "string", Describe::Field(INFO, "kubeletVersion")),
    Column::new("Internal-IP", "string", Describe::Field("io.k8s.api.core.v1.NodeStatus", "addresses")).wide(),
    Column::new("External-IP", "string", Describe::Field("io.k8s.api.core.v1.NodeStatus", "addresses")).wide(),
    Column::new("OS-Image", "string", Describe::Field(INFO, "osImage")).wide(),
    Column::new("Kernel-Version", "string", Describe::Field(INFO, "kernelVersion")).wide(),
    Column::new("Container-Runtime", "string", Describe::Field(INFO, "containerRuntimeVersion")).wide(),
];

impl Strategy for Nodes {
    fn default(&self, obj: &mut Value) {
        if let Some(capacity) = meta::at(obj, &["status", "capacity"]).cloned() {
            meta::default_at(obj, &["status"], "allocatable", capacity);
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        for (i, t) in meta::at(obj, &["spec", "taints"]).and_then(Value::as_array).into_iter().flatten().enumerate() {
            let effect = t.get("effect").cloned().unwrap_or(json!(""));
            if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect.as_str().unwrap_or_default()) {
                errs.push(FieldError::not_supported(format!("spec.taints[{i}].effect"), effect, &["NoSchedule", "PreferNoSchedule", "NoExecute"]));
            }
            let key = t.get("key").and_then(Value::as_str).unwrap_or_default();
            for msg in crate::validation::qualified_name(key) {
                errs.push(FieldError::invalid(format!("spec.taints[{i}].key"), json!(key), msg));
            }
        }
        errs
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        keep_status(new, old);
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let ready = meta::at(obj, &["status", "conditions"])
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"));
        let mut status = vec![match ready {
            Some(c) if c.get("status").and_then(Value::as_str) == Some("True") => "Ready".to_string(),
            Some(_) => "NotReady".to_string(),
            None => "Unknown".to_string(),
        }];
        if meta::at(obj, &["spec", "unschedulable"]).and_then(Value::as_bool) == Some(true) {
            status.push("SchedulingDisabled".into());
        }
        let mut roles: Vec<String> = Vec::new();
        for (k, v) in meta::labels(obj) {
            if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                if !role.is_empty() {
                    roles.push(role.to_string());
                }
            } else if k == "kubernetes.io/role" && !v.is_empty() {
                roles.push(v.to_string());
            }
        }
        roles.sort();
        roles.dedup();
        let address = |ty: &str| {
            meta::at(obj, &["status", "addresses"])
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|a| a.get("type").and_then(Value::as_str) == Some(ty))
                .and_then(|a| a.get("address").and_then(Value::as_str))
                .unwrap_or("<none>")
                .to_string()
        };
        let info = |k: &str| table::str_or(obj, &["status", "nodeInfo", k], "<unknown>");
        vec![
            json!(meta::name(obj)),
            json!(status.join(",")),
            json!(if roles.is_empty() { "<none>".to_string() } else { roles.join(",") }),
            table::age(obj, now),
            json!(table::str_or(obj, &["status", "nodeInfo", "kubeletVersion"], "")),
            json!(address("InternalIP")),
            json!(address("ExternalIP")),
            json!(info("osImage")),
            json!(info("kernelVersion")),
            json!(info("containerRuntimeVersion")),
        ]
    }

    fn selectable_fields(&self) -> &[FieldName] {
        const { &[field("spec.unschedulable")] }
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        match field {
            "spec.unschedulable" => Some(meta::at(obj, &["spec", "unschedulable"]).and_then(Value::as_bool).unwrap_or(false).to_string()),
            _ => None,
        }
    }
}
