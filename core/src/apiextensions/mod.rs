//! CustomResourceDefinitions turned into catalog entries: the apiextensions server's part of
//! kube-apiserver's chain. A CRD whose names are accepted adds one resource per served version
//! to the catalog, stored under `<group>/<plural>` at its storage version; [`catalog_with`] makes
//! the catalog a server serves from the built-in one and the CRDs in storage, each time they
//! change.

mod columns;
pub mod conversion;
mod crd_validation;
mod definition;
mod embedded;
mod formats;
mod listtype;
pub mod naming;
mod numbers;
mod openapi;
mod pattern;
mod rule_checks;
mod rules;
#[cfg(test)]
mod rules_tests;
mod scale;
mod schema_rules;
mod strategy;
pub(crate) mod structural;
mod validate;

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use serde_json::{Value, json};

pub use columns::PrinterColumn;
pub use conversion::{Conversion, ConversionWebhook, Converted};
pub use crd_validation::validate_version_parts;
pub use definition::{Definition, Names, Version};
pub use formats::CHECKED as CHECKED_FORMATS;
pub use formats::{accepts as format_accepts, go_duration, is_request_uri};
pub use openapi::KindDefinitions;
pub use rule_checks::{cel_type, check_rules, shape_of};
pub use rules::to_cel;
pub use scale::ScalePaths;
pub use strategy::CustomResources;
pub use structural::Structural;

use crate::cache::Snapshot;
use crate::catalog::{Backing, Catalog, DeleteReturns, FieldName, Resource, ResourceInfo, Subresource};
use crate::kv::Revision;

/// The verbs of a custom resource, in the order kube's discovery lists them.
const VERBS: &[&str] = &["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"];
/// While its CRD is being deleted: no create, no update.
const TERMINATING_VERBS: &[&str] = &["delete", "deletecollection", "get", "list", "watch"];

/// The catalog of `builtins` and the resources of `crds` (stored CustomResourceDefinition
/// objects). A resource whose definition is unchanged since `previous` is the same entry (the
/// same `Arc`), so that whoever holds one per resource (watch caches) keeps it. A custom
/// resource never hides a built-in one: kube-apiserver's handlers come before the
/// apiextensions server's.
pub fn catalog_with<'a>(builtins: &Catalog, previous: &Catalog, crds: impl IntoIterator<Item = &'a Value>) -> Catalog {
    let mut catalog = builtins.clone();
    for crd in crds {
        add_unhidden(&mut catalog, &entries(crd, previous));
    }
    catalog
}

/// The entries each stored CRD made, by its key, with the revision it was read at.
pub type Made = Arc<BTreeMap<Bytes, (Revision, Vec<Arc<Resource>>)>>;

/// [`catalog_with`] of the CRDs in a snapshot of their cache, where a CRD whose revision is
/// the one `made` saw keeps its entries without being read again (with a thousand CRDs, a
/// change of one reads one); also what each CRD made now.
pub fn catalog_of_snapshot(builtins: &Catalog, previous: &Catalog, made: &Made, crds: &Snapshot) -> (Catalog, Made) {
    let mut catalog = builtins.clone();
    let mut now = BTreeMap::new();
    for (key, obj) in &crds.objects {
        let entries = match made.get(key) {
            Some((rv, entries)) if *rv == obj.rv => entries.clone(),
            _ => entries(&obj.value(), previous),
        };
        add_unhidden(&mut catalog, &entries);
        now.insert(key.clone(), (obj.rv, entries));
    }
    (catalog, Arc::new(now))
}

/// Adds the entries whose group, version and resource are not served yet.
fn add_unhidden(catalog: &mut Catalog, entries: &[Arc<Resource>]) {
    for r in entries {
        if catalog.get(&r.info.group, &r.info.version, &r.info.resource).is_none() {
            catalog.add_shared(r.clone());
        }
    }
}

/// The entries of a CRD: the one `previous` has for a served version whose definition is the
/// same, a new one otherwise.
fn entries(crd: &Value, previous: &Catalog) -> Vec<Arc<Resource>> {
    let Some(def) = Definition::read(crd) else { return Vec::new() };
    served_versions(&def, crd)
        .into_iter()
        .map(|(info, v)| {
            let kept = previous.get(&info.group, &info.version, &info.resource).filter(|p| p.info.defined_by == info.defined_by && p.info.verbs == info.verbs);
            kept.cloned().unwrap_or_else(|| Arc::new(resource(&def, v, info)))
        })
        .collect()
}

/// What the catalog says of each served version of a CRD (one per served version, once its
/// names are accepted), in kube's order of preference.
fn served_versions<'d>(def: &'d Definition, crd: &Value) -> Vec<(ResourceInfo, &'d Version)> {
    let Some(storage) = def.storage_version() else { return Vec::new() };
    if !def.serving() {
        return Vec::new();
    }
    // What the entries' objects are made from: a change of any of it makes new entries with
    // new caches (a deletion that begins changes only the verbs).
    let defined_by = json!([crate::meta::uid(crd), crd.get("spec"), crate::meta::at(crd, &["status", "acceptedNames"])]).to_string();
    let names = &def.accepted;
    let mut served: Vec<&Version> = def.versions.iter().filter(|v| v.served).collect();
    served.sort_by(|a, b| kube_version_order(&a.name, &b.name));
    served
        .into_iter()
        .map(|v| {
            let mut subresources = Vec::new();
            if v.status {
                subresources.push(Subresource::new("status", &def.group, &v.name, &names.kind, &["get", "patch", "update"]));
            }
            if v.scale.is_some() {
                subresources.push(Subresource::new("scale", "autoscaling", "v1", "Scale", &["get", "patch", "update"]));
            }
            let info = ResourceInfo {
                group: def.group.clone(),
                version: v.name.clone(),
                kind: names.kind.clone(),
                resource: names.plural.clone(),
                singular: names.singular.clone(),
                namespaced: def.namespaced,
                short_names: names.short_names.clone(),
                categories: names.categories.clone(),
                verbs: crate::catalog::names(if def.terminating { TERMINATING_VERBS } else { VERBS }),
                subresources,
                storage_prefix: format!("{}/{}", def.group, names.plural),
                definition: openapi::model_name(&def.group, &v.name, &names.kind),
                stored_as: (v.name != storage.name).then(|| (def.group.clone(), storage.name.clone())),
                delete_returns: DeleteReturns::Status,
                backing: Backing::Stored,
                deprecation: v.deprecated.then(|| v.deprecation_warning.clone().unwrap_or_else(|| deprecated(def, v))),
                defined_by: Some(defined_by.clone()),
                terminating: def.terminating,
            };
            (info, v)
        })
        .collect()
}

/// A served version's entry: its schema, columns and OpenAPI definitions read.
fn resource(def: &Definition, v: &Version, info: ResourceInfo) -> Resource {
    let storage = def.storage_version().map_or(v.name.clone(), |s| s.name.clone());
    let names = &def.accepted;
    let strategy = CustomResources {
        group: def.group.clone(),
        served: v.name.clone(),
        storage,
        status: v.status,
        scale: v.scale.clone(),
        schema: v.schema.as_ref().map(Structural::read),
        columns: v.columns.iter().filter_map(PrinterColumn::read).collect(),
        selectable: v.selectable_fields.iter().map(|f| FieldName::Owned(f.clone())).collect(),
        openapi: openapi::kind_definitions(&def.group, &v.name, names, v.schema.as_ref(), &v.selectable_fields),
        webhook: def.conversion.clone(),
    };
    Resource { info, strategy: Arc::new(strategy), ttl_seconds: None }
}

/// kube's warning for a deprecated version: the newest served version that is not deprecated
/// and newer, if there is one, is the one to use.
fn deprecated(def: &Definition, v: &Version) -> String {
    let (group, kind) = (&def.group, &def.accepted.kind);
    let newer = def
        .versions
        .iter()
        .filter(|o| o.served && !o.deprecated && kube_version_order(&o.name, &v.name).is_lt())
        .min_by(|a, b| kube_version_order(&a.name, &b.name));
    match newer {
        Some(n) => format!("{group}/{} {kind} is deprecated; use {group}/{} {kind}", v.name, n.name),
        None => format!("{group}/{} {kind} is deprecated", v.name),
    }
}

/// kube's order of versions (`CompareKubeAwareVersionStrings`), most preferred first: GA, then
/// beta, then alpha, each by major then minor number, highest first; then versions not of
/// that form, alphabetically.
pub fn kube_version_order(a: &str, b: &str) -> std::cmp::Ordering {
    fn parse(v: &str) -> Option<(u64, u8, u64)> {
        let rest = v.strip_prefix('v')?;
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let major: u64 = rest[..digits].parse().ok().filter(|m| *m > 0)?;
        let (stage, minor) = match &rest[digits..] {
            "" => return Some((major, 2, 0)),
            s if s.starts_with("beta") => (1, &s[4..]),
            s if s.starts_with("alpha") => (0, &s[5..]),
            _ => return None,
        };
        Some((major, stage, minor.parse().ok().filter(|m| *m > 0)?))
    }
    match (parse(a), parse(b)) {
        (Some((ma, sa, na)), Some((mb, sb, nb))) => sb.cmp(&sa).then(mb.cmp(&ma)).then(nb.cmp(&na)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// Whether a watch cache of `a` serves `b` as well: the same entry, or entries of the same
/// CRD's same definition.
pub fn same_objects(a: &Arc<Resource>, b: &Arc<Resource>) -> bool {
    Arc::ptr_eq(a, b) || (a.info.defined_by.is_some() && a.info.defined_by == b.info.defined_by && a.info.version == b.info.version)
}

/// Whether a resource is defined by a CRD (its objects have no built-in schema).
pub fn is_custom(info: &ResourceInfo) -> bool {
    info.defined_by.is_some()
}

#[cfg(test)]
mod tests;
