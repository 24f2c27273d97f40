//! The rules of custom resources (apiextensions-apiserver's `pkg/registry/customresource`
//! strategy), and their conversion between the served and the stored version (`None`: only
//! `apiVersion` changes; `Webhook`: the webhook's answer, see [`super::conversion`]).

use std::sync::Arc;

use serde_json::{Value, json};

use jiff::Timestamp;

use super::columns::PrinterColumn;
use super::conversion::ConversionWebhook;
use super::openapi::KindDefinitions;
use super::scale::ScalePaths;
use super::structural::Structural;
use crate::catalog::{FieldName, ScaleOf, Strategy, copy_all_but_status, keep_status};
use crate::meta;
use crate::ssa::Typing;
use crate::status::{ApiError, FieldError, FieldErrorType};
use crate::table::{self, Column};

/// One served version of a CRD's resource.
pub struct CustomResources {
    pub group: String,
    pub served: String,
    pub storage: String,
    /// The `status` subresource is enabled for the served version.
    pub status: bool,
    /// The `scale` subresource's paths, when it is enabled for the served version.
    pub scale: Option<ScalePaths>,
    /// The version's schema (`None`: none given, everything kept).
    pub schema: Option<Structural>,
    /// Its `additionalPrinterColumns` (empty: Name and Age).
    pub columns: Vec<PrinterColumn>,
    /// Its `selectableFields`, by the names field selectors give them.
    pub selectable: Vec<FieldName>,
    /// Its kind's and list kind's OpenAPI definitions.
    pub openapi: KindDefinitions,
    /// The CRD's conversion webhook (`None`: the `None` strategy, only `apiVersion` changes).
    pub webhook: Option<Arc<ConversionWebhook>>,
}

impl CustomResources {
    /// The schema's checks, then the scale subresource's (`customResourceValidator`), then
    /// the embedded resources and the schema's set and map lists, then the CEL rules (with
    /// `old`, an update's stored object), which do not run when an error before them is one
    /// kube calls blocking (a wrong type, a missing required field, an unsupported value, too
    /// long or too many).
    fn checks(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut errs = self.schema.as_ref().map(|s| s.validate(obj)).unwrap_or_default();
        if let Some(scale) = &self.scale {
            errs.extend(scale.validate_spec(obj));
            errs.extend(scale.validate_status(obj));
        }
        let Some(s) = &self.schema else { return errs };
        errs.extend(s.validate_embedded(obj));
        errs.extend(s.validate_list_types(obj));
        if !s.has_rules() {
            return errs;
        }
        let blocking = errs.iter().any(|e| {
            matches!(
                e.kind,
                FieldErrorType::NotSupported | FieldErrorType::Required | FieldErrorType::TooLong | FieldErrorType::TooMany | FieldErrorType::TypeInvalid
            )
        });
        if blocking {
            errs.push(FieldError::invalid_go(
                "<nil>",
                "\"null\"",
                "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            ));
        } else {
            errs.extend(s.validate_rules(obj, old));
        }
        errs
    }

    fn with_version(&self, mut obj: Value, version: &str) -> Value {
        if let Some(m) = obj.as_object_mut() {
            m.insert("apiVersion".into(), json!(format!("{}/{version}", self.group)));
        }
        obj
    }
}

impl Strategy for CustomResources {
    fn typing(&self) -> Typing<'_> {
        Typing::Custom { schema: self.schema.as_ref(), status: self.status }
    }

    fn prune_unknown(&self, obj: &mut Value) -> Option<Vec<String>> {
        Some(self.schema.as_ref().map(|s| s.prune_object(obj)).unwrap_or_default())
    }

    fn default(&self, obj: &mut Value) {
        if let Some(s) = &self.schema {
            s.default_object(obj);
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        self.checks(obj, None)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        self.checks(new, Some(old))
    }

    fn validate_subresource_update(&self, _subresource: &str, new: &Value, old: &Value) -> Vec<FieldError> {
        self.checks(new, Some(old))
    }

    fn scale_of(&self, obj: &Value) -> Result<ScaleOf, ApiError> {
        match &self.scale {
            Some(scale) => scale.scale_of(obj),
            None => Err(ApiError::internal("no scale subresource")),
        }
    }

    fn set_scale_replicas(&self, obj: &mut Value, replicas: i64) -> Result<(), ApiError> {
        match &self.scale {
            Some(scale) => scale.set_replicas(obj, replicas),
            None => Err(ApiError::internal("no scale subresource")),
        }
    }

    /// Not where the schema prunes or defaults what is read (it may have changed since the
    /// object was written).
    fn stored_as_served(&self) -> bool {
        self.served == self.storage && !self.schema.as_ref().is_some_and(Structural::applies_on_read)
    }

    /// The stored object at the served version (an object stored at an older storage version
    /// too), pruned and defaulted by the version's schema as kube's storage decoder does: a
    /// default added to the CRD shows on objects written before, a property taken out of it no
    /// longer does. With a webhook, the object is the webhook's already.
    fn served_from_stored(&self, stored: Value) -> Value {
        let mut obj = self.with_version(stored, &self.served);
        if let Some(s) = self.schema.as_ref().filter(|s| s.applies_on_read()) {
            s.prune_object(&mut obj);
            s.default_object(&mut obj);
        }
        obj
    }

    fn stored_from_served(&self, served: &Value) -> Option<Value> {
        (self.served != self.storage).then(|| self.with_version(served.clone(), &self.storage))
    }

    fn conversion_webhook(&self) -> Option<(&Arc<ConversionWebhook>, String)> {
        self.webhook.as_ref().map(|w| (w, format!("{}/{}", self.group, self.storage)))
    }

    /// With a `status` subresource, a create sets no status; every object starts at
    /// generation 1.
    fn prepare_for_create(&self, obj: &mut Value) {
        if self.status
            && let Some(m) = obj.as_object_mut()
        {
            m.remove("status");
        }
        meta::set_meta(obj, "generation", json!(1));
    }

    /// With a `status` subresource, an update keeps the stored status; the generation grows
    /// when anything but metadata changed.
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        if self.status {
            keep_status(new, old);
        }
        let changed = match (new.as_object(), old.as_object()) {
            (Some(n), Some(o)) => {
                let beyond_metadata = |m: &serde_json::Map<String, Value>| m.iter().filter(|(k, _)| *k != "metadata").count();
                beyond_metadata(n) != beyond_metadata(o) || n.iter().any(|(k, v)| k != "metadata" && o.get(k) != Some(v))
            }
            _ => false,
        };
        let generation = meta::generation(old).max(1);
        meta::set_meta(new, "generation", json!(if changed { generation + 1 } else { generation }));
    }

    fn prepare_for_subresource_update(&self, subresource: &str, new: &mut Value, old: &Value) {
        if subresource == "status" {
            copy_all_but_status(new, old);
        }
    }

    fn allow_unconditional_update(&self) -> bool {
        false
    }

    /// A version without `additionalPrinterColumns`: its name and age.
    fn columns(&self) -> &'static [Column] {
        &[Column::NAME, Column::AGE_DATE]
    }

    /// Name, then the printer columns (no age unless one of them is).
    fn column_definitions(&self) -> Vec<Value> {
        if self.columns.is_empty() {
            return self.columns().iter().map(Column::to_json).collect();
        }
        std::iter::once(Column::NAME.to_json()).chain(self.columns.iter().map(PrinterColumn::definition)).collect()
    }

    fn selectable_fields(&self) -> &[FieldName] {
        &self.selectable
    }

    fn openapi_definitions(&self) -> Option<&KindDefinitions> {
        Some(&self.openapi)
    }

    fn row(&self, obj: &Value, now: Timestamp) -> Vec<Value> {
        if self.columns.is_empty() {
            return vec![Value::from(meta::name(obj)), table::age(obj, now)];
        }
        std::iter::once(Value::from(meta::name(obj))).chain(self.columns.iter().map(|c| c.cell(obj, now))).collect()
    }
}
