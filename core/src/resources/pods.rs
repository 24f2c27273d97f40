//! core/v1 pods: defaults, the pod update rules, graceful deletion, `/binding`, and the
//! `kubectl get pods` columns.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::podspec::{self, SpecOf};
use super::{info, serve, status_subresource};
use crate::catalog::{
    Backing, DeleteReturns, FieldName, GracefulDelete, Resource, Strategy, Subresource, bump_generation_on_spec_change, copy_all_but_status, field, keep_status,
};
use crate::meta;
use crate::schema::normalize::format_time;
use crate::status::{ApiError, FieldError};
use crate::table::{self, Column, Describe};

pub fn resource() -> Resource {
    let mut i = info("", "v1", "Pod", "pods", true);
    i.short_names = crate::catalog::names(&["po"]);
    i.categories = crate::catalog::names(&["all"]);
    let pod_update = |name: &str| Subresource::new(name, "", "v1", "Pod", &["get", "patch", "update"]);
    i.subresources = vec![
        status_subresource(&i),
        Subresource::new("binding", "", "v1", "Binding", &["create"]),
        Subresource::new("eviction", "policy", "v1", "Eviction", &["create"]),
        pod_update("ephemeralcontainers"),
        pod_update("resize"),
    ];
    i.delete_returns = DeleteReturns::Object;
    serve(i, Pods)
}

/// core/v1 bindings: a create binds the pod its Binding names, as `pods/binding` does.
pub fn bindings() -> Resource {
    let mut i = info("", "v1", "Binding", "bindings", true);
    i.verbs = crate::catalog::names(&["create"]);
    i.backing = Backing::ActionOn { resource: "pods", subresource: "binding" };
    serve(i, Bindings)
}

/// Nothing of its own: a binding is checked and applied by the pod's strategy.
struct Bindings;

impl Strategy for Bindings {}

struct Pods;

const POD_STATUS: &str = "io.k8s.api.core.v1.PodStatus";
const POD_SPEC: &str = "io.k8s.api.core.v1.PodSpec";

const COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Ready", "string", Describe::Text("The aggregate readiness state of this pod for accepting traffic.")),
    Column::new("Status", "string", Describe::Text("The aggregate status of the containers in this pod.")),
    Column::new(
        "Restarts",
        "string",
        Describe::Text("The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
    ),
    Column::AGE,
    Column::new("IP", "string", Describe::Field(POD_STATUS, "podIP")).wide(),
    Column::new("Node", "string", Describe::Field(POD_SPEC, "nodeName")).wide(),
    Column::new("Nominated Node", "string", Describe::Field(POD_STATUS, "nominatedNodeName")).wide(),
    Column::new("Readiness Gates", "string", Describe::Field(POD_SPEC, "readinessGates")).wide(),
];

/// What a pod update may change (`ValidatePodUpdate`).
const UPDATE_RULES: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

impl Strategy for Pods {
    fn default(&self, obj: &mut Value) {
        let spec = meta::object_at(obj, &["spec"]);
        podspec::default_spec(spec);
        podspec::default_pod_only(spec);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        let qos = podspec::qos_class(obj.get("spec").unwrap_or(&Value::Null));
        obj["status"] = json!({"phase": "Pending", "qosClass": qos});
        meta::set_meta(obj, "generation", json!(1));
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = podspec::validate_spec(obj.get("spec").unwrap_or(&Value::Null), "spec", SpecOf::Pod);
        if meta::at(obj, &["spec", "ephemeralContainers"]).and_then(Value::as_array).is_some_and(|e| !e.is_empty()) {
            errs.push(FieldError::forbidden("spec.ephemeralContainers", "cannot be set on create"));
        }
        errs
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        keep_status(new, old);
        bump_generation_on_spec_change(new, old);
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = podspec::validate_spec(new.get("spec").unwrap_or(&Value::Null), "spec", SpecOf::Pod);
        let mut a = new.get("spec").cloned().unwrap_or(Value::Null);
        let mut b = old.get("spec").cloned().unwrap_or(Value::Null);
        for spec in [&mut a, &mut b] {
            for list in ["containers", "initContainers"] {
                if let Some(Value::Array(cs)) = spec.get_mut(list) {
                    for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                        c.remove("image");
                    }
                }
            }
            if let Some(s) = spec.as_object_mut() {
                s.remove("activeDeadlineSeconds");
                s.remove("terminationGracePeriodSeconds");
            }
        }
        // Tolerations may only grow.
        let old_tol = b.get("tolerations").and_then(Value::as_array).cloned().unwrap_or_default();
        let new_tol = a.get("tolerations").and_then(Value::as_array).cloned().unwrap_or_default();
        let only_added = old_tol.iter().all(|t| new_tol.contains(t));
        for spec in [&mut a, &mut b] {
            if let Some(s) = spec.as_object_mut() {
                s.remove("tolerations");
            }
        }
        if a != b || !only_added {
            errs.push(FieldError::forbidden("spec", UPDATE_RULES));
        }
        errs
    }

    /// `status` changes only status; `ephemeralcontainers` only the ephemeral containers;
    /// `resize` only the containers' resources (and resize policies).
    fn prepare_for_subresource_update(&self, subresource: &str, new: &mut Value, old: &Value) {
        match subresource {
            "ephemeralcontainers" => {
                let ephemeral = meta::at(new, &["spec", "ephemeralContainers"]).cloned();
                copy_all_but_status(new, old);
                keep_status(new, old);
                let spec = meta::object_at(new, &["spec"]);
                match ephemeral {
                    Some(e) => spec.insert("ephemeralContainers".into(), e),
                    None => spec.remove("ephemeralContainers"),
                };
            }
            "resize" => {
                let wanted = |list: &str| meta::at(new, &["spec", list]).and_then(Value::as_array).cloned().unwrap_or_default();
                let (containers, init) = (wanted("containers"), wanted("initContainers"));
                copy_all_but_status(new, old);
                keep_status(new, old);
                for (list, from) in [("containers", containers), ("initContainers", init)] {
                    for c in meta::object_at(new, &["spec"]).get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
                        let Some(w) = from.iter().find(|w| w.get("name") == c.get("name")) else { continue };
                        for field in ["resources", "resizePolicy"] {
                            match (w.get(field), c.as_object_mut()) {
                                (Some(v), Some(m)) => m.insert(field.into(), v.clone()),
                                (None, Some(m)) => m.remove(field),
                                _ => None,
                            };
                        }
                    }
                }
            }
            // kube's podStatusStrategy: the spec and the owner references stay as they were
            // (old kubelets corrupt them); the rest of the metadata is the client's.
            "status" => {
                let obj = meta::object_at(new, &[]);
                match old.get("spec") {
                    Some(spec) => obj.insert("spec".into(), spec.clone()),
                    None => obj.remove("spec"),
                };
                match meta::at(old, &["metadata", "ownerReferences"]) {
                    Some(refs) => meta::set_meta(new, "ownerReferences", refs.clone()),
                    None => meta::remove_meta(new, "ownerReferences"),
                }
                // The QoS class is set at creation: one a status leaves out is kept.
                if meta::str_at(new, &["status", "qosClass"]).is_none_or(str::is_empty)
                    && let Some(class) = meta::at(old, &["status", "qosClass"]).cloned()
                {
                    meta::object_at(new, &["status"]).insert("qosClass".into(), class);
                }
            }
            _ => copy_all_but_status(new, old),
        }
    }

    fn validate_subresource_update(&self, subresource: &str, new: &Value, old: &Value) -> Vec<FieldError> {
        match subresource {
            "ephemeralcontainers" => super::pod_updates::validate_ephemeral_update(new, old),
            "resize" => super::pod_updates::validate_resize(new, old),
            _ => Vec::new(),
        }
    }

    fn subresource_create(&self, subresource: &str, pod: &mut Value, body: &Value, now: Timestamp) -> Result<(), ApiError> {
        match subresource {
            "binding" => bind(pod, body, now),
            other => Err(ApiError::method_not_supported(&crate::status::GroupResource::new("", &format!("pods/{other}")), "create")),
        }
    }

    fn graceful_delete(&self, obj: &Value, grace: Option<i64>) -> GracefulDelete {
        let mut period = grace.or_else(|| meta::at(obj, &["spec", "terminationGracePeriodSeconds"]).and_then(Value::as_i64)).unwrap_or(0);
        if meta::str_at(obj, &["spec", "nodeName"]).is_none_or(str::is_empty) {
            period = 0;
        }
        if matches!(meta::str_at(obj, &["status", "phase"]), Some("Failed" | "Succeeded")) {
            period = 0;
        }
        if period < 0 {
            period = 1;
        }
        GracefulDelete::After(period)
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn row(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        pod_row(obj, now)
    }

    fn selectable_fields(&self) -> &[FieldName] {
        const {
            &[
                field("spec.nodeName"),
                field("spec.restartPolicy"),
                field("spec.schedulerName"),
                field("spec.serviceAccountName"),
                field("spec.hostNetwork"),
                field("status.phase"),
                field("status.podIP"),
                field("status.nominatedNodeName"),
            ]
        }
    }

    fn field_value(&self, obj: &Value, field: &str) -> Option<String> {
        match field {
            "spec.hostNetwork" => Some(meta::at(obj, &["spec", "hostNetwork"]).and_then(Value::as_bool).unwrap_or(false).to_string()),
            _ => {
                let path: Vec<&str> = field.split('.').collect();
                meta::str_at(obj, &path).map(str::to_string)
            }
        }
    }
}

/// `pods/binding`: assigns an unscheduled pod to a node.
pub fn bind(pod: &mut Value, binding: &Value, now: Timestamp) -> Result<(), ApiError> {
    let name = meta::name(pod).to_string();
    let node = meta::str_at(binding, &["target", "name"]).unwrap_or_default().to_string();
    if node.is_empty() {
        return Err(ApiError::invalid(
            &crate::status::GroupKind { group: String::new(), kind: "Binding".into() },
            &name,
            &[FieldError::required("target.name", "")],
        ));
    }
    if let Some(current) = meta::str_at(pod, &["spec", "nodeName"]).filter(|n| !n.is_empty()) {
        return Err(ApiError::conflict(
            &crate::status::GroupResource::new("", "pods/binding"),
            &name,
            &format!("pod {name} is already assigned to node {}", crate::status::quote(current)),
        ));
    }
    if meta::deletion_timestamp(pod).is_some() {
        return Err(ApiError::conflict(
            &crate::status::GroupResource::new("", "pods/binding"),
            &name,
            &format!("pod {name} is being deleted, cannot be assigned to a host"),
        ));
    }
    meta::object_at(pod, &["spec"]).insert("nodeName".into(), json!(node));
    let status = meta::object_at(pod, &["status"]);
    let conditions = status.entry("conditions").or_insert_with(|| json!([]));
    if let Value::Array(c) = conditions {
        c.retain(|x| x.get("type").and_then(Value::as_str) != Some("PodScheduled"));
        c.push(json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": format_time(now, false)}));
    }
    Ok(())
}

fn pod_row(pod: &Value, now: Timestamp) -> Vec<Value> {
    let status = pod.get("status").unwrap_or(&Value::Null);
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let arr = |v: &Value, k: &str| v.get(k).and_then(Value::as_array).cloned().unwrap_or_default();
    let s = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
    let int = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_i64).unwrap_or(0);

    let init_specs = arr(spec, "initContainers");
    let restartable = |name: &str| {
        init_specs.iter().any(|c| c.get("name").and_then(Value::as_str) == Some(name) && c.get("restartPolicy").and_then(Value::as_str) == Some("Always"))
    };
    let total = arr(spec, "containers").len() + init_specs.iter().filter(|c| c.get("restartPolicy").and_then(Value::as_str) == Some("Always")).count();
    let mut ready = 0;
    let mut restarts = 0;
    let mut restartable_restarts = 0;
    let mut last_restart: Option<Timestamp> = None;
    let mut last_restartable_restart: Option<Timestamp> = None;
    let phase = s(status, "/phase");
    let mut reason = if s(status, "/reason").is_empty() { phase.clone() } else { s(status, "/reason") };
    for c in arr(status, "conditions") {
        if c.get("type").and_then(Value::as_str) == Some("PodScheduled") && c.get("reason").and_then(Value::as_str) == Some("SchedulingGated") {
            reason = "SchedulingGated".into();
        }
    }
    let finished_at = |c: &Value| c.pointer("/lastTerminationState/terminated/finishedAt").and_then(Value::as_str).and_then(|t| t.parse::<Timestamp>().ok());
    let init_statuses = arr(status, "initContainerStatuses");
    let mut initializing = false;
    for (i, c) in init_statuses.iter().enumerate() {
        let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
        restarts += int(c, "/restartCount");
        if let Some(t) = finished_at(c) {
            last_restart = last_restart.max(Some(t));
        }
        if restartable(name) {
            restartable_restarts += int(c, "/restartCount");
            if let Some(t) = finished_at(c) {
                last_restartable_restart = last_restartable_restart.max(Some(t));
            }
        }
        let terminated = c.pointer("/state/terminated");
        let waiting_reason = s(c, "/state/waiting/reason");
        if terminated.is_some_and(|t| t.get("exitCode").and_then(Value::as_i64) == Some(0)) {
            continue;
        }
        if restartable(name) && c.get("started").and_then(Value::as_bool) == Some(true) {
            if c.get("ready").and_then(Value::as_bool) == Some(true) {
                ready += 1;
            }
            continue;
        }
        if let Some(t) = terminated {
            let r = t.get("reason").and_then(Value::as_str).unwrap_or_default();
            reason = if !r.is_empty() {
                format!("Init:{r}")
            } else if int(t, "/signal") != 0 {
                format!("Init:Signal:{}", int(t, "/signal"))
            } else {
                format!("Init:ExitCode:{}", int(t, "/exitCode"))
            };
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            reason = format!("Init:{waiting_reason}");
        } else {
            reason = format!("Init:{i}/{}", init_specs.len());
        }
        initializing = true;
        break;
    }
    let initialized = arr(status, "conditions")
        .iter()
        .any(|c| c.get("type").and_then(Value::as_str) == Some("Initialized") && c.get("status").and_then(Value::as_str) == Some("True"));
    if !initializing || initialized {
        restarts = restartable_restarts;
        last_restart = last_restartable_restart;
        let mut has_running = false;
        for c in arr(status, "containerStatuses").iter().rev() {
            restarts += int(c, "/restartCount");
            if let Some(t) = finished_at(c) {
                last_restart = last_restart.max(Some(t));
            }
            let waiting = s(c, "/state/waiting/reason");
            let terminated = c.pointer("/state/terminated");
            if !waiting.is_empty() {
                reason = waiting;
            } else if let Some(t) = terminated {
                let r = t.get("reason").and_then(Value::as_str).unwrap_or_default();
                reason = if !r.is_empty() {
                    r.to_string()
                } else if int(t, "/signal") != 0 {
                    format!("Signal:{}", int(t, "/signal"))
                } else {
                    format!("ExitCode:{}", int(t, "/exitCode"))
                };
            } else if c.get("ready").and_then(Value::as_bool) == Some(true) && c.pointer("/state/running").is_some() {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = arr(status, "conditions")
                .iter()
                .any(|c| c.get("type").and_then(Value::as_str) == Some("Ready") && c.get("status").and_then(Value::as_str) == Some("True"));
            reason = if pod_ready { "Running".into() } else { "NotReady".into() };
        }
    }
    if meta::deletion_timestamp(pod).is_some() {
        if s(status, "/reason") == "NodeLost" {
            reason = "Unknown".into();
        } else if phase != "Succeeded" && phase != "Failed" {
            reason = "Terminating".into();
        }
    }
    let restarts_cell = match last_restart {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", table::human_duration(now.duration_since(t).as_secs())),
        _ => restarts.to_string(),
    };
    let or_none = |v: String| if v.is_empty() { "<none>".to_string() } else { v };
    let pod_ip = arr(status, "podIPs").first().and_then(|p| p.get("ip")).and_then(Value::as_str).unwrap_or_default().to_string();
    let gates = arr(spec, "readinessGates");
    let gates_cell = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let conditions = arr(status, "conditions");
        let true_count = gates
            .iter()
            .filter(|g| {
                let t = g.get("conditionType");
                conditions.iter().any(|c| c.get("type") == t && c.get("status").and_then(Value::as_str) == Some("True"))
            })
            .count();
        format!("{true_count}/{}", gates.len())
    };
    vec![
        json!(meta::name(pod)),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts_cell),
        table::age(pod, now),
        json!(or_none(pod_ip)),
        json!(or_none(s(spec, "/nodeName"))),
        json!(or_none(s(status, "/nominatedNodeName"))),
        json!(gates_cell),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_read_like_kubectl() {
        let now: Timestamp = "2024-01-01T00:10:00Z".parse().unwrap();
        let pod = json!({"metadata": {"name": "p", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
            "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.5"}],
                "containerStatuses": [
                    {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}},
                     "lastTerminationState": {"terminated": {"finishedAt": "2024-01-01T00:05:00Z"}}},
                    {"name": "b", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        let row = pod_row(&pod, now);
        assert_eq!(
            row,
            vec![
                json!("p"),
                json!("1/2"),
                json!("CrashLoopBackOff"),
                json!("2 (5m ago)"),
                json!("10m"),
                json!("10.0.0.5"),
                json!("n1"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        let pending = json!({"metadata": {"name": "q", "creationTimestamp": "2024-01-01T00:09:30Z"}, "spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Pending"}});
        assert_eq!(pod_row(&pending, now)[1..5], [json!("0/1"), json!("Pending"), json!("0"), json!("30s")]);
    }
}
