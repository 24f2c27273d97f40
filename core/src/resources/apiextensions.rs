//! apiextensions.k8s.io/v1 customresourcedefinitions (+`status`) as objects
//! (apiextensions-apiserver's `pkg/registry/customresourcedefinition` strategy and the main
//! rules of its validation). Serving the resources they define is the apiextensions server's
//! work.

use serde_json::{Value, json};

use super::{info, serve, status_subresource};
use crate::apiextensions::naming::set_condition;
use crate::catalog::{Lifecycle, Resource, Strategy};
use crate::controllers::CLEANUP_FINALIZER;
use crate::meta;
use crate::status::FieldError;
use crate::validation::{dns1035_label, dns1123_label, dns1123_subdomain, supported};

pub fn resource() -> Resource {
    let mut i = info("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", false);
    i.short_names = crate::catalog::names(&["crd", "crds"]);
    i.categories = crate::catalog::names(&["api-extensions"]);
    i.singular = "customresourcedefinition".into();
    // The apiextensions server stores under its group, as its own storage factory does.
    i.storage_prefix = "apiextensions.k8s.io/customresourcedefinitions".into();
    i.subresources = vec![status_subresource(&i)];
    serve(i, Crds)
}

struct Crds;

fn storage_version(obj: &Value) -> Option<Value> {
    meta::at(obj, &["spec", "versions"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .and_then(|v| v.get("name").cloned())
}

/// `status.storedVersions` only grows: the current storage version is added when missing.
fn record_storage_version(obj: &mut Value) {
    let Some(version) = storage_version(obj) else { return };
    let status = meta::object_at(obj, &["status"]);
    let Value::Array(stored) = status.entry("storedVersions").or_insert_with(|| json!([])) else { return };
    if !stored.contains(&version) {
        stored.push(version);
    }
}

fn name_field(errs: &mut Vec<FieldError>, obj: &Value, field: &str, check: fn(&str) -> Vec<String>, required: bool) {
    let v = meta::str_at(obj, &["spec", "names", field]).unwrap_or_default();
    if v.is_empty() {
        if required {
            errs.push(FieldError::required(format!("spec.names.{field}"), ""));
        }
        return;
    }
    for msg in check(v) {
        errs.push(FieldError::invalid(format!("spec.names.{field}"), json!(v), msg));
    }
}

impl Strategy for Crds {
    /// kube's v1 defaults of a CRD's conversion: the `None` strategy when none is given, port
    /// 443 for a webhook's Service.
    fn default(&self, obj: &mut Value) {
        let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else { return };
        let conversion = spec.entry("conversion").or_insert(Value::Null);
        if conversion.is_null() {
            *conversion = json!({"strategy": "None"});
        }
        if let Some(service) = conversion.pointer_mut("/webhook/clientConfig/service").and_then(Value::as_object_mut) {
            service.entry("port").or_insert(json!(443));
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        Lifecycle::StatusAndGeneration.prepare_for_create(obj);
        if let Some(m) = obj.as_object_mut() {
            m.insert("status".into(), json!({}));
        }
        record_storage_version(obj);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        Lifecycle::StatusAndGeneration.prepare_for_update(new, old);
        record_storage_version(new);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let group = meta::str_at(obj, &["spec", "group"]).unwrap_or_default();
        let plural = meta::str_at(obj, &["spec", "names", "plural"]).unwrap_or_default();
        if meta::name(obj) != format!("{plural}.{group}") {
            errs.push(FieldError::invalid("metadata.name", json!(meta::name(obj)), "must be spec.names.plural+\".\"+spec.group"));
        }
        if group.is_empty() {
            errs.push(FieldError::required("spec.group", ""));
        } else {
            for msg in dns1123_subdomain(group) {
                errs.push(FieldError::invalid("spec.group", json!(group), msg));
            }
            if group.split('.').count() < 2 {
                errs.push(FieldError::invalid("spec.group", json!(group), "should be a domain with at least one dot"));
            }
        }
        name_field(&mut errs, obj, "plural", dns1123_label, true);
        name_field(&mut errs, obj, "singular", dns1123_label, false);
        name_field(&mut errs, obj, "listKind", dns1035_label_kind, false);
        name_field(&mut errs, obj, "kind", dns1035_label_kind, true);
        match meta::at(obj, &["spec", "scope"]) {
            None => errs.push(FieldError::required("spec.scope", "")),
            scope => supported(&mut errs, scope, "spec.scope", &["Cluster", "Namespaced"]),
        }
        let versions = meta::at(obj, &["spec", "versions"]).and_then(Value::as_array).cloned().unwrap_or_default();
        if versions.is_empty() {
            errs.push(FieldError::invalid("spec.versions", json!(versions), "must have exactly one version marked as storage version"));
        } else {
            let storage = versions.iter().filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true)).count();
            if storage != 1 {
                errs.push(FieldError::invalid("spec.versions", json!(versions), "must have exactly one version marked as storage version"));
            }
            for (i, v) in versions.iter().enumerate() {
                let name = v.get("name").and_then(Value::as_str).unwrap_or_default();
                for msg in dns1035_label(name) {
                    errs.push(FieldError::invalid(format!("spec.versions[{i}].name"), json!(name), msg));
                }
            }
        }
        if let Some(spec) = obj.get("spec") {
            errs.extend(crate::apiextensions::validate_version_parts(spec));
            errs.extend(crate::apiextensions::conversion::validate(spec));
        }
        errs
    }

    fn allow_unconditional_update(&self) -> bool {
        false
    }

    /// kube's CRD delete: the cleanup finalizer, so that the CRD's resources go first, and a
    /// `Terminating` condition saying so.
    fn prepare_for_delete(&self, obj: &mut Value, now: jiff::Timestamp) {
        let mut finalizers = meta::finalizers(obj);
        if !finalizers.iter().any(|f| f == CLEANUP_FINALIZER) {
            finalizers.push(CLEANUP_FINALIZER.to_string());
            meta::set_finalizers(obj, &finalizers);
        }
        let message = "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon";
        set_condition(obj, "Terminating", ("True", "InstanceDeletionPending", message.into()), now);
    }

    fn marks_own_delete(&self) -> bool {
        true
    }
}

/// Kinds are checked as DNS-1035 labels once lower-cased (`ValidateCustomResourceDefinitionNames`).
fn dns1035_label_kind(kind: &str) -> Vec<String> {
    if dns1035_label(&kind.to_lowercase()).is_empty() {
        Vec::new()
    } else {
        vec!["may have mixed case, but should otherwise match: [a-z]([-a-z0-9]*[a-z0-9])?".into()]
    }
}
