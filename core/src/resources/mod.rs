//! The built-in resources kapi serves: each file pairs a resource's API identity with its
//! strategy (defaults, validation, table columns, selectable fields). Adding a resource is a
//! new file and one line in [`catalog`].

mod admissionregistration;
mod apiextensions;
pub mod apiregistration;
mod apps;
mod autoscaling;
mod batch;
pub mod certificates;
pub mod componentstatuses;
mod configmaps;
mod coordination;
mod discovery;
mod endpoints;
mod events;
mod flowcontrol;
pub mod flowcontrol_bootstrap;
mod hpa_conversion;
mod legacy;
mod namespaces;
mod networking;
mod node;
mod nodes;
mod pod_updates;
mod pods;
pub mod podspec;
mod podspec_enums;
pub use podspec_enums::validate_tolerations;
mod podtemplates;
mod policy;
mod quotas;
mod rbac;
mod replicationcontrollers;
pub mod reviews;
pub mod runtime_config;
pub mod scheduling;
mod secrets;
mod serviceaccounts;
pub mod services;
mod storage;
mod volumes;

use std::sync::Arc;

use serde_json::{Value, json};

use crate::catalog::{ALL_VERBS, Backing, Catalog, DeleteReturns, Resource, ResourceInfo, Strategy, Subresource};
use crate::schema::schema;

pub use namespaces::DEFAULT_NAMESPACES;
pub use runtime_config::RuntimeConfig;

/// Settings of the server that shape resources.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `--event-ttl`.
    pub event_ttl_seconds: i64,
    /// `--service-cluster-ip-range` and `--service-node-port-range`.
    pub service_ranges: services::ServiceRanges,
    /// `--runtime-config`.
    pub runtime_config: RuntimeConfig,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { event_ttl_seconds: 3600, service_ranges: services::ServiceRanges::default(), runtime_config: RuntimeConfig::default() }
    }
}

/// Every resource kapi serves: the core group, then the named groups in kube's discovery order
/// (the order of their `groupPriorityMinimum`), a group's preferred version first; those
/// `--runtime-config` turns off left out, those off by default it turns on added.
pub fn catalog(settings: &Settings) -> Catalog {
    let rc = &settings.runtime_config;
    let on: Vec<Resource> = served_by_default(settings).into_iter().filter(|r| rc.serves(&r.info, true)).collect();
    let older = off_by_default().into_iter().filter(|r| rc.serves(&r.info, false));
    Catalog::new(on.into_iter().chain(older).collect())
}

/// The group versions `--runtime-config` may name.
pub fn registered_group_versions() -> std::collections::BTreeSet<(String, String)> {
    served_by_default(&Settings::default()).into_iter().chain(off_by_default()).map(|r| (r.info.group.to_string(), r.info.version.to_string())).collect()
}

/// What kube v1.33 serves only when `--runtime-config` asks: the versions it no longer
/// serves (`legacy.rs`), and the alpha ones kapi has.
fn off_by_default() -> Vec<Resource> {
    let mut r = vec![batch::cron_jobs_v1beta1(), policy::v1beta1(), discovery::endpoint_slices_v1beta1()];
    r.extend(admissionregistration::alpha());
    r
}

fn served_by_default(settings: &Settings) -> Vec<Resource> {
    let (limit_ranges, resource_quotas) = quotas::resources();
    let mut resources = vec![
        namespaces::resource(),
        configmaps::resource(),
        secrets::resource(),
        serviceaccounts::resource(),
        pods::resource(),
        pods::bindings(),
        componentstatuses::resource(),
        podtemplates::resource(),
        replicationcontrollers::resource(),
        services::resource(settings.service_ranges),
        endpoints::resource(),
        nodes::resource(),
        events::core(settings),
        limit_ranges,
        resource_quotas,
    ];
    resources.extend(volumes::resources());
    resources.push(apiregistration::resource());
    resources.extend(apps::resources());
    resources.push(events::events_k8s_io(settings));
    resources.extend(reviews::resources());
    resources.extend(autoscaling::resources());
    resources.extend(batch::resources());
    resources.push(certificates::resource());
    resources.extend(networking::resources());
    resources.push(policy::resource());
    resources.extend(rbac::resources());
    resources.extend(storage::resources());
    resources.extend(admissionregistration::resources());
    resources.push(apiextensions::resource());
    resources.push(scheduling::resource());
    resources.push(coordination::leases());
    resources.push(node::resource());
    resources.push(discovery::endpoint_slices());
    resources.extend(flowcontrol::resources());
    resources
}

/// A resource with kube's defaults: every verb, stored under its plural name, answered with a
/// `Status` on delete.
pub(crate) fn info(group: &str, version: &str, kind: &str, resource: &str, namespaced: bool) -> ResourceInfo {
    let definition = schema().for_gvk(group, version, kind).map(|d| d.name.clone()).unwrap_or_else(|| panic!("the schema has no {group}/{version} {kind}"));
    ResourceInfo {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        resource: resource.into(),
        singular: kind.to_ascii_lowercase(),
        namespaced,
        short_names: Vec::new(),
        categories: Vec::new(),
        verbs: crate::catalog::names(ALL_VERBS),
        subresources: Vec::new(),
        storage_prefix: resource.into(),
        definition,
        stored_as: None,
        delete_returns: DeleteReturns::Status,
        backing: Backing::Stored,
        deprecation: None,
        defined_by: None,
        terminating: false,
    }
}

pub(crate) fn status_subresource(info: &ResourceInfo) -> Subresource {
    Subresource::new("status", &info.group, &info.version, &info.kind, &["get", "patch", "update"])
}

pub(crate) fn scale_subresource() -> Subresource {
    Subresource::new("scale", "autoscaling", "v1", "Scale", &["get", "patch", "update"])
}

pub(crate) fn serve(info: ResourceInfo, strategy: impl Strategy + 'static) -> Resource {
    Resource { info, strategy: Arc::new(strategy), ttl_seconds: None }
}

/// The `autoscaling/v1` Scale of an object with `spec.replicas`, given its selector as a string.
pub(crate) fn scale(obj: &Value, selector: &str) -> crate::catalog::ScaleOf {
    let mut m = serde_json::Map::new();
    for k in ["name", "namespace", "uid", "resourceVersion", "creationTimestamp"] {
        if let Some(v) = crate::meta::at(obj, &["metadata", k]) {
            m.insert(k.into(), v.clone());
        }
    }
    let scale = json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": Value::Object(m),
        "spec": {"replicas": crate::table::int_at(obj, &["spec", "replicas"])},
        "status": {"replicas": crate::table::int_at(obj, &["status", "replicas"]), "selector": selector},
    });
    crate::catalog::ScaleOf { scale, replicas_set: true, replicas_path: ".spec.replicas".into() }
}
