//! core/v1 podtemplates: kube's `pkg/registry/core/podtemplate`.

use serde_json::{Value, json};

use super::apps::{default_template, validate_template};
use super::{info, serve};
use crate::catalog::{Lifecycle, Resource, Strategy};
use crate::meta;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};

pub fn resource() -> Resource {
    serve(info("", "v1", "PodTemplate", "podtemplates", true), PodTemplates)
}

struct PodTemplates;

const COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Containers", "string", Describe::Text("Names of each container in the template.")),
    Column::new("Images", "string", Describe::Text("Images referenced by each container in the template.")),
    Column::new("Pod Labels", "string", Describe::Text("The labels for the pod template.")),
];

/// Every restart policy a pod may have is allowed in a bare template.
const RESTART_POLICIES: &[&str] = &["Always", "OnFailure", "Never"];

impl Strategy for PodTemplates {
    fn default(&self, obj: &mut Value) {
        if obj.get("template").is_some() {
            default_template(obj, &["template"]);
        }
    }

    fn lifecycle(&self) -> Lifecycle {
        Lifecycle::Generation("template")
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = validate_template(obj, &["template"], RESTART_POLICIES);
        if meta::at(obj, &["template", "spec", "ephemeralContainers"]).and_then(Value::as_array).is_some_and(|e| !e.is_empty()) {
            errs.push(FieldError::forbidden("template.spec.ephemeralContainers", "ephemeral containers not allowed in pod template"));
        }
        errs
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn row(&self, obj: &Value, _now: jiff::Timestamp) -> Vec<Value> {
        let (containers, images) = table::containers_and_images(meta::at(obj, &["template", "spec"]));
        vec![json!(meta::name(obj)), containers, images, json!(table::format_labels(meta::at(obj, &["template", "metadata", "labels"])))]
    }
}
