//! The resource catalog: the one list of resources that routing, discovery, OpenAPI, storage keys
//! and authorization names are derived from.
//!
//! Each resource pairs its API identity ([`ResourceInfo`]) with a [`Strategy`], kube-apiserver's
//! per-resource rules (`RESTCreateStrategy`, `RESTUpdateStrategy`, `RESTDeleteStrategy`, the table
//! printer and the selectable fields).
//!
//! A catalog is an immutable value: a server serves one catalog at a time, and a change (a
//! resource added or removed at run time) is a new catalog put in the old one's place, so a
//! request reads the catalog it started with, without a lock.

mod info;
mod strategy;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use info::{ALL_VERBS, Backing, DeleteReturns, ResourceInfo, Subresource, names};
pub use strategy::{
    Candidates, Claim, FieldName, GracefulDelete, Lifecycle, ReviewContext, ScaleOf, Strategy, bump_generation_on_spec_change, bump_generation_when_changed,
    copy_all_but_status, field, keep_status,
};

/// A resource with its rules.
#[derive(Clone)]
pub struct Resource {
    pub info: ResourceInfo,
    pub strategy: Arc<dyn Strategy>,
    /// Objects expire this many seconds after their creation (events, `--event-ttl`).
    pub ttl_seconds: Option<i64>,
}

impl std::fmt::Debug for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resource").field("info", &self.info).finish()
    }
}

/// All resources a server serves at one time.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    resources: Vec<Arc<Resource>>,
    /// Group, version and resource to the resource's place in `resources`.
    by_path: BTreeMap<String, BTreeMap<String, BTreeMap<String, usize>>>,
}

impl Catalog {
    pub fn new(resources: Vec<Resource>) -> Self {
        let mut c = Catalog::default();
        for r in resources {
            c.add(r);
        }
        c
    }

    pub fn add(&mut self, r: Resource) {
        self.add_shared(Arc::new(r));
    }

    /// Adds a resource another catalog holds too.
    pub fn add_shared(&mut self, r: Arc<Resource>) {
        let at = self.resources.len();
        let versions = self.by_path.entry(r.info.group.clone()).or_default();
        versions.entry(r.info.version.clone()).or_default().insert(r.info.resource.clone(), at);
        self.resources.push(r);
    }

    pub fn get(&self, group: &str, version: &str, resource: &str) -> Option<&Arc<Resource>> {
        let at = self.by_path.get(group)?.get(version)?.get(resource)?;
        Some(&self.resources[*at])
    }

    pub fn resources(&self) -> impl Iterator<Item = &Arc<Resource>> {
        self.resources.iter()
    }

    /// Group names in discovery order (the core group first, as kube lists them).
    pub fn groups(&self) -> Vec<&str> {
        let mut seen = std::collections::BTreeSet::new();
        self.resources.iter().map(|r| r.info.group.as_str()).filter(|g| seen.insert(*g)).collect()
    }

    /// A group's versions, in the order of their first resources.
    pub fn versions(&self, group: &str) -> Vec<&str> {
        let Some(versions) = self.by_path.get(group) else { return Vec::new() };
        let mut firsts: Vec<(usize, &str)> = versions.iter().filter_map(|(v, rs)| Some((*rs.values().min()?, v.as_str()))).collect();
        firsts.sort_unstable();
        firsts.into_iter().map(|(_, v)| v).collect()
    }

    /// The resources of a group version, in catalog order.
    pub fn resources_of(&self, group: &str, version: &str) -> Vec<&Arc<Resource>> {
        let mut at: Vec<usize> = self.by_path.get(group).and_then(|vs| vs.get(version)).map(|rs| rs.values().copied().collect()).unwrap_or_default();
        at.sort_unstable();
        at.into_iter().map(|i| &self.resources[i]).collect()
    }

    /// Whether both catalogs hold the very same entries, in the same order.
    pub fn same_entries(&self, other: &Catalog) -> bool {
        self.resources.len() == other.resources.len() && self.resources.iter().zip(&other.resources).all(|(a, b)| Arc::ptr_eq(a, b))
    }

    /// The resource stored under `storage_prefix` with the given group (for shared storage).
    pub fn by_storage_prefix(&self, prefix: &str) -> impl Iterator<Item = &Arc<Resource>> {
        self.resources.iter().filter(move |r| r.info.storage_prefix == prefix)
    }
}
