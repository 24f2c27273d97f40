//! core/v1 namespaces: `Active` on create with the `kubernetes` finalizer, `Terminating` on
//! delete until their finalizers are gone.

use serde_json::{Value, json};

use super::{info, serve, status_subresource};
use crate::catalog::{DeleteReturns, FieldName, Resource, Strategy, Subresource, copy_all_but_status, field, keep_status};
use crate::meta;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};

/// The namespaces kube-apiserver creates at first start.
pub const DEFAULT_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

pub const KUBERNETES_FINALIZER: &str = "kubernetes";
const NAME_LABEL: &str = "kubernetes.io/metadata.name";

pub fn resource() -> Resource {
    let mut i = info("", "v1", "Namespace", "namespaces", false);
    i.short_names = crate::catalog::names(&["ns"]);
    i.verbs = crate::catalog::names(&["create", "delete", "get", "list", "patch", "update", "watch"]);
    i.subresources = vec![status_subresource(&i), Subresource::new("finalize", "", "v1", "Namespace", &["update"])];
    i.delete_returns = DeleteReturns::Object;
    serve(i, Namespaces)
}

struct Namespaces;

const COLUMNS: &[Column] = &[Column::NAME, Column::new("Status", "string", Describe::Text("The status of the namespace")), Column::AGE];

impl Strategy for Namespaces {
    fn name_check(&self) -> crate::validation::NameCheck {
        crate::validation::dns1123_label
    }

    fn default(&self, obj: &mut Value) {
        let name = meta::name(obj).to_string();
        if !name.is_empty() {
            meta::object_at(obj, &["metadata", "labels"]).insert(NAME_LABEL.into(), json!(name));
        }
        meta::default_at(obj, &["status"], "phase", json!("Active"));
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Active"});
        let spec = meta::object_at(obj, &["spec"]);
        let finalizers = spec.entry("finalizers").or_insert_with(|| json!([]));
        if let Value::Array(f) = finalizers
            && !f.iter().any(|x| x == KUBERNETES_FINALIZER)
        {
            f.push(json!(KUBERNETES_FINALIZER));
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        for (i, f) in meta::at(obj, &["spec", "finalizers"]).and_then(Value::as_array).into_iter().flatten().enumerate() {
            let name = f.as_str().unwrap_or_default();
            if !name.contains('/') && name != KUBERNETES_FINALIZER {
                errs.push(FieldError::invalid(
                    format!("spec.finalizers[{i}]"),
                    f.clone(),
                    "name is neither a standard finalizer name nor is it fully qualified",
                ));
            }
        }
        errs
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let finalizers = meta::at(old, &["spec", "finalizers"]).cloned();
        match finalizers {
            Some(f) => {
                meta::object_at(new, &["spec"]).insert("finalizers".into(), f);
            }
            None => {
                if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
                    spec.remove("finalizers");
                }
            }
        }
        keep_status(new, old);
    }

    fn prepare_for_subresource_update(&self, subresource: &str, new: &mut Value, old: &Value) {
        match subresource {
            "status" => copy_all_but_status(new, old),
            "finalize" => {
                let finalizers = meta::at(new, &["spec", "finalizers"]).cloned();
                copy_all_but_status(new, old);
                keep_status(new, old);
                let spec = meta::object_at(new, &["spec"]);
                match finalizers {
                    Some(f) => spec.insert("finalizers".into(), f),
                    None => spec.remove("finalizers"),
                };
            }
            _ => {}
        }
    }

    fn prepare_for_delete(&self, obj: &mut Value, _now: jiff::Timestamp) {
        meta::object_at(obj, &["status"]).insert("phase".into(), json!("Terminating"));
    }

    fn marks_own_delete(&self) -> bool {
        true
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        vec![json!(meta::name(obj)), json!(table::str_or(obj, &["status", "phase"], "")), table::age(obj, now)]
    }

    fn selectable_fields(&self) -> &[FieldName] {
        const { &[field("status.phase")] }
    }
}
