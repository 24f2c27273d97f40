//! core/v1 replicationcontrollers (+`status`, `scale`): kube's `pkg/registry/core/replicationcontroller`.

use serde_json::{Value, json};

use super::apps::{default_template, validate_template};
use super::{info, scale_subresource, serve, status_subresource};
use crate::catalog::{FieldName, Lifecycle, Resource, ScaleOf, Strategy, field};
use crate::meta;
use crate::status::{ApiError, FieldError};
use crate::table::{self, Column, Describe};

pub fn resource() -> Resource {
    let mut i = info("", "v1", "ReplicationController", "replicationcontrollers", true);
    i.short_names = crate::catalog::names(&["rc"]);
    i.categories = crate::catalog::names(&["all"]);
    i.subresources = vec![scale_subresource(), status_subresource(&i)];
    serve(i, ReplicationControllers)
}

struct ReplicationControllers;

const SPEC: &str = "io.k8s.api.core.v1.ReplicationControllerSpec";
const STATUS: &str = "io.k8s.api.core.v1.ReplicationControllerStatus";
const COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Desired", "integer", Describe::Field(SPEC, "replicas")),
    Column::new("Current", "integer", Describe::Field(STATUS, "replicas")),
    Column::new("Ready", "integer", Describe::Field(STATUS, "readyReplicas")),
    Column::AGE,
    Column::CONTAINERS,
    Column::IMAGES,
    Column::new("Selector", "string", Describe::Field(SPEC, "selector")).wide(),
];

fn non_negative(obj: &Value, path: &[&str], errs: &mut Vec<FieldError>) {
    if let Some(n) = meta::at(obj, path).and_then(Value::as_i64)
        && n < 0
    {
        errs.push(FieldError::invalid(path.join("."), json!(n), "must be greater than or equal to 0"));
    }
}

impl Strategy for ReplicationControllers {
    fn default(&self, obj: &mut Value) {
        if let Some(labels) = meta::at(obj, &["spec", "template", "metadata", "labels"]).filter(|l| l.is_object()).cloned() {
            let spec = meta::object_at(obj, &["spec"]);
            if spec.get("selector").and_then(Value::as_object).is_none_or(|s| s.is_empty()) {
                spec.insert("selector".into(), labels.clone());
            }
            if meta::at(obj, &["metadata", "labels"]).and_then(Value::as_object).is_none_or(|l| l.is_empty()) {
                meta::set_meta(obj, "labels", labels);
            }
        }
        meta::object_at(obj, &["spec"]).entry("replicas").or_insert_with(|| json!(1));
        if meta::at(obj, &["spec", "template"]).is_some() {
            default_template(obj, &["spec", "template"]);
        }
    }

    fn lifecycle(&self) -> Lifecycle {
        Lifecycle::StatusAndGeneration
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        non_negative(obj, &["spec", "minReadySeconds"], &mut errs);
        non_negative(obj, &["spec", "replicas"], &mut errs);
        let selector = meta::string_map(meta::at(obj, &["spec", "selector"]));
        if selector.is_empty() {
            errs.push(FieldError::required("spec.selector", ""));
        } else {
            errs.extend(crate::validation::labels(meta::at(obj, &["spec", "selector"]), "spec.selector"));
        }
        let Some(template) = meta::at(obj, &["spec", "template"]).filter(|t| !t.is_null()) else {
            errs.push(FieldError::required("spec.template", ""));
            return errs;
        };
        let labels = meta::string_map(meta::at(template, &["metadata", "labels"]));
        if !selector.is_empty() && !selector.iter().all(|s| labels.contains(s)) {
            errs.push(FieldError::invalid_string_map(
                "spec.template.metadata.labels",
                meta::at(template, &["metadata", "labels"]),
                "`selector` does not match template `labels`",
            ));
        }
        errs.extend(validate_template(obj, &["spec", "template"], &["Always"]));
        if meta::at(template, &["spec", "activeDeadlineSeconds"]).is_some_and(|v| !v.is_null()) {
            errs.push(FieldError::forbidden("spec.template.spec.activeDeadlineSeconds", "activeDeadlineSeconds in ReplicationController is not Supported"));
        }
        errs
    }

    fn validate_subresource_update(&self, subresource: &str, new: &Value, _old: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if subresource != "status" {
            return errs;
        }
        for field in ["replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas", "observedGeneration"] {
            non_negative(new, &["status", field], &mut errs);
        }
        let at = |f: &str| table::int_at(new, &["status", f]);
        for field in ["fullyLabeledReplicas", "readyReplicas", "availableReplicas"] {
            if at(field) > at("replicas") {
                errs.push(FieldError::invalid(format!("status.{field}"), json!(at(field)), "cannot be greater than status.replicas"));
            }
        }
        if at("availableReplicas") > at("readyReplicas") {
            errs.push(FieldError::invalid("status.availableReplicas", json!(at("availableReplicas")), "cannot be greater than readyReplicas"));
        }
        errs
    }

    fn default_propagation(&self) -> &'static str {
        "Orphan"
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let i = |p: &[&str]| json!(table::int_at(obj, p));
        let (containers, images) = table::containers_and_images(meta::at(obj, &["spec", "template", "spec"]));
        vec![
            json!(meta::name(obj)),
            i(&["spec", "replicas"]),
            i(&["status", "replicas"]),
            i(&["status", "readyReplicas"]),
            table::age(obj, now),
            containers,
            images,
            json!(table::format_labels(meta::at(obj, &["spec", "selector"]))),
        ]
    }

    fn selectable_fields(&self) -> &[FieldName] {
        const { &[field("status.replicas")] }
    }

    fn scale_of(&self, obj: &Value) -> Result<ScaleOf, ApiError> {
        let mut pairs = meta::string_map(meta::at(obj, &["spec", "selector"]));
        pairs.sort();
        let selector = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
        Ok(super::scale(obj, &selector))
    }
}
