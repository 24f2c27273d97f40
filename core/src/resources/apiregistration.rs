//! apiregistration.k8s.io/v1 apiservices (+`status`) as objects (kube-aggregator's
//! `pkg/registry/apiservice`). Proxying a group to an extension server is the aggregator's work.

use serde_json::{Value, json};

use super::{info, serve, status_subresource};
use crate::catalog::{Resource, Strategy, keep_status};
use crate::meta;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};
use crate::validation::{NameCheck, dns1035_label, dns1123_subdomain, path_segment_name};

pub fn resource() -> Resource {
    let mut i = info("apiregistration.k8s.io", "v1", "APIService", "apiservices", false);
    i.categories = crate::catalog::names(&["api-extensions"]);
    i.singular = "apiservice".into();
    // The aggregator stores under its group, as its own storage factory does.
    i.storage_prefix = "apiregistration.k8s.io/apiservices".into();
    i.subresources = vec![status_subresource(&i)];
    serve(i, ApiServices)
}

struct ApiServices;

const COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Service", "string", Describe::Text("The reference to the service that hosts this API endpoint.")),
    Column::new("Available", "string", Describe::Text("Whether this service is available.")),
    Column::AGE,
];

fn available_condition(now: &str) -> Value {
    json!({"type": "Available", "status": "True", "lastTransitionTime": now, "reason": "Local", "message": "Local APIServices are always available"})
}

impl Strategy for ApiServices {
    fn default(&self, obj: &mut Value) {
        if let Some(Value::Object(svc)) = obj.get_mut("spec").and_then(|s| s.get_mut("service")) {
            svc.entry("port").or_insert_with(|| json!(443));
        }
    }

    fn name_check(&self) -> NameCheck {
        path_segment_name
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(m) = obj.as_object_mut() {
            m.insert("status".into(), json!({}));
        }
    }

    /// A local APIService (no service) is available from its creation.
    fn finalize_create(&self, obj: &mut Value) {
        if meta::at(obj, &["spec", "service"]).is_none_or(Value::is_null) {
            let created = meta::str_at(obj, &["metadata", "creationTimestamp"]).unwrap_or_default().to_string();
            obj["status"] = json!({"conditions": [available_condition(&created)]});
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        keep_status(new, old);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let (group, version) = (meta::str_at(obj, &["spec", "group"]).unwrap_or_default(), meta::str_at(obj, &["spec", "version"]).unwrap_or_default());
        let expected = format!("{version}.{group}");
        if meta::name(obj) != expected {
            errs.push(FieldError::invalid("metadata.name", json!(meta::name(obj)), format!("must be `spec.version+\".\"+spec.group`: {expected:?}")));
        }
        if group.is_empty() && version != "v1" {
            errs.push(FieldError::required("spec.group", "only v1 may have an empty group and it better be legacy kube"));
        }
        if !group.is_empty() {
            for msg in dns1123_subdomain(group) {
                errs.push(FieldError::invalid("spec.group", json!(group), msg));
            }
        }
        for msg in dns1035_label(version) {
            errs.push(FieldError::invalid("spec.version", json!(version), msg));
        }
        let priority = |f: &str| meta::at(obj, &["spec", f]).and_then(Value::as_i64).unwrap_or(0);
        if !(1..=20000).contains(&priority("groupPriorityMinimum")) {
            errs.push(FieldError::invalid("spec.groupPriorityMinimum", json!(priority("groupPriorityMinimum")), "must be positive and less than 20000"));
        }
        if !(1..=1000).contains(&priority("versionPriority")) {
            errs.push(FieldError::invalid("spec.versionPriority", json!(priority("versionPriority")), "must be positive and less than 1000"));
        }
        let ca_bundle = meta::str_at(obj, &["spec", "caBundle"]).unwrap_or_default();
        let insecure = meta::at(obj, &["spec", "insecureSkipTLSVerify"]).and_then(Value::as_bool).unwrap_or(false);
        match meta::at(obj, &["spec", "service"]).filter(|s| !s.is_null()) {
            None => {
                if !ca_bundle.is_empty() {
                    errs.push(FieldError::invalid(
                        "spec.caBundle",
                        json!(format!("{} bytes", ca_bundle.len() * 3 / 4)),
                        "local APIServices may not have a caBundle",
                    ));
                }
                if insecure {
                    errs.push(FieldError::invalid("spec.insecureSkipTLSVerify", json!(insecure), "local APIServices may not have insecureSkipTLSVerify"));
                }
            }
            Some(svc) => {
                for field in ["namespace", "name"] {
                    if svc.get(field).and_then(Value::as_str).is_none_or(str::is_empty) {
                        errs.push(FieldError::required(format!("spec.service.{field}"), ""));
                    }
                }
                if let Some(p) = svc.get("port").and_then(Value::as_i64)
                    && !(1..=65535).contains(&p)
                {
                    errs.push(FieldError::invalid("spec.service.port", json!(p), "port is not valid: must be between 1 and 65535, inclusive"));
                }
                if insecure && !ca_bundle.is_empty() {
                    errs.push(FieldError::invalid("spec.insecureSkipTLSVerify", json!(insecure), "may not be true if caBundle is present"));
                }
            }
        }
        errs
    }

    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let service = match meta::at(obj, &["spec", "service"]).filter(|s| !s.is_null()) {
            None => "Local".to_string(),
            Some(s) => format!("{}/{}", meta::str_at(s, &["namespace"]).unwrap_or_default(), meta::str_at(s, &["name"]).unwrap_or_default()),
        };
        let available = meta::at(obj, &["status", "conditions"])
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|c| c.get("type").and_then(Value::as_str) == Some("Available"))
            .map_or("Unknown".to_string(), |c| {
                let status = c.get("status").and_then(Value::as_str).unwrap_or_default();
                match c.get("reason").and_then(Value::as_str).filter(|r| !r.is_empty()) {
                    Some(reason) if status != "True" => format!("{status} ({reason})"),
                    _ => status.to_string(),
                }
            });
        vec![json!(meta::name(obj)), json!(service), json!(available), table::age(obj, now)]
    }
}

/// kube-apiserver's `apiVersionPriorities` for the group versions v1.33 serves by default, and
/// the v1beta1 versions of v1.24 kapi serves behind `--runtime-config`: group, version,
/// `groupPriorityMinimum`, `versionPriority`.
const PRIORITIES: &[(&str, &str, i64, i64)] = &[
    ("", "v1", 18000, 1),
    ("apps", "v1", 17800, 15),
    ("events.k8s.io", "v1", 17750, 15),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("autoscaling", "v2", 17500, 30),
    ("autoscaling", "v1", 17500, 15),
    ("batch", "v1", 17400, 15),
    ("batch", "v1beta1", 17400, 9),
    ("certificates.k8s.io", "v1", 17300, 15),
    ("networking.k8s.io", "v1", 17200, 15),
    ("policy", "v1", 17100, 15),
    ("policy", "v1beta1", 17100, 9),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    ("storage.k8s.io", "v1", 16800, 15),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("scheduling.k8s.io", "v1", 16600, 15),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("node.k8s.io", "v1", 16300, 15),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("discovery.k8s.io", "v1beta1", 16200, 12),
    ("flowcontrol.apiserver.k8s.io", "v1", 16100, 21),
];

/// The `groupPriorityMinimum` and `versionPriority` of a group version the server serves: kube's
/// for its own, 1000 and 100 for a CRD's (as kube's CRD registration controller gives them),
/// and the highest for the aggregator's own group, which kube lists first.
pub fn priority(group: &str, version: &str) -> (i64, i64) {
    if group == "apiregistration.k8s.io" {
        return (i64::MAX, 0);
    }
    PRIORITIES.iter().find(|(g, v, ..)| *g == group && *v == version).map_or((1000, 100), |(_, _, gp, vp)| (*gp, *vp))
}

/// The APIService kube's autoregister controller keeps for each served group version it has a
/// priority for (the aggregator's own group has none).
pub fn local_api_services(catalog: &crate::catalog::Catalog) -> Vec<Value> {
    PRIORITIES
        .iter()
        .filter(|(g, v, ..)| catalog.versions(g).contains(v))
        .map(|(group, version, group_priority, version_priority)| {
            json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": format!("{version}.{group}"), "labels": {"kube-aggregator.kubernetes.io/automanaged": "onstart"}},
                "spec": {"group": group, "version": version, "groupPriorityMinimum": group_priority, "versionPriority": version_priority}})
        })
        .collect()
}
