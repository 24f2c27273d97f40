//! What a CustomResourceDefinition object says about the resources it defines, read from the
//! object as stored (apiextensions.k8s.io/v1).

use serde_json::Value;

use super::scale::ScalePaths;
use crate::meta;

/// The names a CRD's resources are served under (`status.acceptedNames`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Names {
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub list_kind: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
}

/// One version of a CRD.
#[derive(Clone, Debug, PartialEq)]
pub struct Version {
    pub name: String,
    pub served: bool,
    pub storage: bool,
    /// The `status` subresource is enabled for this version.
    pub status: bool,
    /// The `scale` subresource, when enabled for this version.
    pub scale: Option<ScalePaths>,
    pub deprecated: bool,
    pub deprecation_warning: Option<String>,
    /// `schema.openAPIV3Schema`.
    pub schema: Option<Value>,
    /// `additionalPrinterColumns`.
    pub columns: Vec<Value>,
    /// `selectableFields`, each named by its `jsonPath` without the leading dot, as kube names
    /// them in field selectors (`spec.color`).
    pub selectable_fields: Vec<String>,
}

/// A CRD as far as serving its resources goes.
#[derive(Clone, Debug, PartialEq)]
pub struct Definition {
    /// `metadata.name`: `<plural>.<group>`.
    pub name: String,
    pub group: String,
    pub namespaced: bool,
    /// `spec.names`: what the CRD asks for.
    pub requested: Names,
    /// `status.acceptedNames`: what the naming controller granted (empty until then).
    pub accepted: Names,
    pub versions: Vec<Version>,
    pub names_accepted: bool,
    pub established: bool,
    pub terminating: bool,
    /// The webhook of a `Webhook` conversion (`None`: the `None` strategy).
    pub conversion: Option<std::sync::Arc<super::ConversionWebhook>>,
}

impl Definition {
    /// Reads a stored CRD; `None` for an object that is not one (no group or no versions).
    pub fn read(crd: &Value) -> Option<Definition> {
        let spec = crd.get("spec")?;
        let group = spec.get("group")?.as_str()?.to_string();
        let versions: Vec<Version> = spec.get("versions")?.as_array()?.iter().filter_map(version).collect();
        if group.is_empty() || versions.is_empty() {
            return None;
        }
        let condition = |ty: &str| {
            meta::at(crd, &["status", "conditions"])
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|c| c.get("type").and_then(Value::as_str) == Some(ty) && c.get("status").and_then(Value::as_str) == Some("True"))
        };
        Some(Definition {
            name: meta::name(crd).to_string(),
            group,
            namespaced: spec.get("scope").and_then(Value::as_str) == Some("Namespaced"),
            requested: names(spec.get("names")),
            accepted: names(meta::at(crd, &["status", "acceptedNames"])),
            versions,
            names_accepted: condition("NamesAccepted"),
            established: condition("Established"),
            terminating: meta::at(crd, &["metadata", "deletionTimestamp"]).is_some(),
            conversion: super::ConversionWebhook::read(spec).map(std::sync::Arc::new),
        })
    }

    /// The version objects are stored at.
    pub fn storage_version(&self) -> Option<&Version> {
        self.versions.iter().find(|v| v.storage)
    }

    /// Whether requests for its resources are served: kube serves them once the names are
    /// accepted (or it was established before), under the accepted names.
    pub fn serving(&self) -> bool {
        (self.names_accepted || self.established) && !self.accepted.plural.is_empty() && !self.accepted.kind.is_empty()
    }
}

fn text(v: Option<&Value>) -> String {
    v.and_then(Value::as_str).unwrap_or_default().to_string()
}

fn names(v: Option<&Value>) -> Names {
    let Some(v) = v else { return Names::default() };
    let kind = text(v.get("kind"));
    let singular = text(v.get("singular"));
    let list_kind = text(v.get("listKind"));
    Names {
        plural: text(v.get("plural")),
        singular: if singular.is_empty() { kind.to_lowercase() } else { singular },
        list_kind: if list_kind.is_empty() && !kind.is_empty() { format!("{kind}List") } else { list_kind },
        kind,
        short_names: meta::strings(v.get("shortNames")),
        categories: meta::strings(v.get("categories")),
    }
}

fn version(v: &Value) -> Option<Version> {
    let flag = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
    Some(Version {
        name: v.get("name")?.as_str()?.to_string(),
        served: flag("served"),
        storage: flag("storage"),
        status: meta::at(v, &["subresources", "status"]).is_some(),
        scale: ScalePaths::read(v),
        deprecated: flag("deprecated"),
        deprecation_warning: v.get("deprecationWarning").and_then(Value::as_str).map(str::to_string),
        schema: meta::at(v, &["schema", "openAPIV3Schema"]).cloned(),
        columns: v.get("additionalPrinterColumns").and_then(Value::as_array).cloned().unwrap_or_default(),
        selectable_fields: v
            .get("selectableFields")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|f| f.get("jsonPath")?.as_str())
            .map(|path| path.strip_prefix('.').unwrap_or(path).to_string())
            .collect(),
    })
}
