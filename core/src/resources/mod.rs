//! The built-in resources kapi serves: each file pairs a resource's API identity with its
//! strategy (defaults, validation, table columns, selectable fields). Adding a resource is a
//! new file and one line in [`catalog`].

mod apps;
mod batch;
mod configmaps;
mod coordination;
mod discovery;
mod endpoints;
mod events;
mod namespaces;
mod nodes;
mod pods;
pub mod podspec;
mod podspec_enums;
mod reviews;
mod secrets;
mod serviceaccounts;
pub mod services;

use std::sync::Arc;

use crate::catalog::{ALL_VERBS, Catalog, DeleteReturns, Resource, ResourceInfo, Strategy, Subresource};
use crate::schema::schema;

pub use namespaces::DEFAULT_NAMESPACES;

/// Settings of the server that shape resources.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `--event-ttl`.
    pub event_ttl_seconds: i64,
    /// `--service-cluster-ip-range` and `--service-node-port-range`.
    pub service_ranges: services::ServiceRanges,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { event_ttl_seconds: 3600, service_ranges: services::ServiceRanges::default() }
    }
}

/// Every resource kapi serves, in kube's discovery order.
pub fn catalog(settings: &Settings) -> Catalog {
    let mut resources = vec![
        namespaces::resource(),
        configmaps::resource(),
        secrets::resource(),
        serviceaccounts::resource(),
        pods::resource(),
        services::resource(settings.service_ranges),
        endpoints::resource(),
        nodes::resource(),
        events::core(settings),
    ];
    resources.extend(apps::resources());
    resources.extend(reviews::resources());
    resources.extend(batch::resources());
    resources.push(coordination::leases());
    resources.push(discovery::endpoint_slices());
    resources.push(events::events_k8s_io(settings));
    Catalog::new(resources)
}

/// A resource with kube's defaults: every verb, stored under its plural name, answered with a
/// `Status` on delete.
pub(crate) fn info(group: &'static str, version: &'static str, kind: &'static str, resource: &'static str, namespaced: bool) -> ResourceInfo {
    let definition = schema().for_gvk(group, version, kind).map(|d| d.name.as_str()).unwrap_or_else(|| panic!("the schema has no {group}/{version} {kind}"));
    ResourceInfo {
        group,
        version,
        kind,
        resource,
        singular: kind.to_ascii_lowercase(),
        namespaced,
        short_names: &[],
        categories: &[],
        verbs: ALL_VERBS,
        subresources: Vec::new(),
        storage_prefix: resource,
        definition,
        stored_as: None,
        delete_returns: DeleteReturns::Status,
        review: false,
        deprecation: None,
    }
}

pub(crate) fn status_subresource(info: &ResourceInfo) -> Subresource {
    Subresource { name: "status", group: info.group, version: info.version, kind: info.kind, verbs: &["get", "patch", "update"] }
}

pub(crate) fn scale_subresource() -> Subresource {
    Subresource { name: "scale", group: "autoscaling", version: "v1", kind: "Scale", verbs: &["get", "patch", "update"] }
}

pub(crate) fn serve(info: ResourceInfo, strategy: impl Strategy + 'static) -> Resource {
    Resource { info, strategy: Arc::new(strategy), ttl_seconds: None }
}
