//! The groups of Service-backed APIServices in discovery, as kube-aggregator lists them: every
//! APIService's group in `/apis` whether available or not, ordered by `groupPriorityMinimum`
//! (highest first, then by APIService name), its versions by `versionPriority`, and
//! `/apis/<group>` answered here for them (`/apis/<group>/<version>` is the extension
//! server's own answer, proxied); and in aggregated discovery with the resources each server
//! last said it serves ([`Discovered`], which the availability controller's checks keep).

use std::cmp::Reverse;
use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::ApiServices;
use crate::apiextensions::kube_version_order;
use crate::catalog::Catalog;
use crate::resources::apiregistration;

/// Where a group goes in `/apis`: highest `groupPriorityMinimum` first, then the smallest
/// APIService name (`<version>.<group>`).
type Rank = (Reverse<i64>, String);

fn catalog_rank(catalog: &Catalog, group: &str) -> Rank {
    catalog
        .versions(group)
        .into_iter()
        .map(|v| {
            let (group_priority, _) = apiregistration::priority(group, v);
            (Reverse(group_priority), format!("{v}.{group}"))
        })
        .min()
        .unwrap_or((Reverse(0), String::new()))
}

/// A group's versions, most preferred first: the catalog's, and those of APIServices (whose
/// `versionPriority` counts for a version both have), by `versionPriority` then kube's
/// version order.
fn versions(catalog: &Catalog, apis: &ApiServices, group: &str) -> Vec<String> {
    let local = catalog.versions(group);
    if !apis.iter().any(|a| a.group == group) {
        return local.into_iter().map(str::to_string).collect();
    }
    let mut priorities: BTreeMap<&str, i64> = local.into_iter().map(|v| (v, apiregistration::priority(group, v).1)).collect();
    priorities.extend(apis.iter().filter(|a| a.group == group).map(|a| (a.version.as_str(), a.version_priority)));
    let mut all: Vec<(i64, &str)> = priorities.into_iter().map(|(v, p)| (p, v)).collect();
    all.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| kube_version_order(a.1, b.1)));
    all.into_iter().map(|(_, v)| v.to_string()).collect()
}

fn api_group(catalog: &Catalog, apis: &ApiServices, group: &str) -> Value {
    let gv = |v: &str| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    let versions: Vec<Value> = versions(catalog, apis, group).iter().map(|v| gv(v)).collect();
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({"name": group, "versions": versions, "preferredVersion": preferred})
}

/// `/apis` with the APIServices' groups among the catalog's, every group where its highest
/// ranked APIService puts it.
pub fn merged_group_list(catalog: &Catalog, apis: &ApiServices) -> Value {
    let mut groups: Vec<(Rank, &str)> = catalog.groups().into_iter().filter(|g| !g.is_empty()).map(|g| (catalog_rank(catalog, g), g)).collect();
    // The core group (`v1.`) is `/api`'s, never listed here.
    for a in apis.iter().filter(|a| !a.group.is_empty()) {
        let rank = (Reverse(a.group_priority), a.name.clone());
        match groups.iter_mut().find(|(_, g)| *g == a.group) {
            Some(entry) => entry.0 = entry.0.clone().min(rank),
            None => groups.push((rank, &a.group)),
        }
    }
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    let groups: Vec<Value> = groups.into_iter().map(|(_, g)| api_group(catalog, apis, g)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>` for a group an APIService serves from an extension server.
pub fn group_document(catalog: &Catalog, apis: &ApiServices, group: &str) -> Option<Value> {
    if !apis.iter().any(|a| a.group == group) {
        return None;
    }
    let mut g = api_group(catalog, apis, group);
    let m = g.as_object_mut().expect("an object");
    m.insert("kind".into(), json!("APIGroup"));
    m.insert("apiVersion".into(), json!("v1"));
    Some(g)
}

/// What an extension server last said of one group version.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Discovery {
    /// Its resources in aggregated discovery's form (`apidiscovery.k8s.io/v2`); `None` when it
    /// could not be asked, which aggregated discovery shows as `freshness: Stale`.
    pub resources: Option<Vec<Value>>,
    /// Where its OpenAPI v3 document is (`serverRelativeURL` in its `/openapi/v3`), if known.
    pub openapi: Option<String>,
    /// What of its OpenAPI v2 document `/openapi/v2` merges, if known.
    pub openapi_v2: Option<super::OpenApiV2>,
}

/// What each Service-backed group version's extension server last said.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Discovered {
    by_group_version: BTreeMap<(String, String), Discovery>,
}

impl Discovered {
    /// With what `group`/`version`'s server said now; `None` when that changes nothing.
    pub fn with(&self, group: &str, version: &str, discovery: Discovery) -> Option<Discovered> {
        let key = (group.to_string(), version.to_string());
        if self.by_group_version.get(&key) == Some(&discovery) {
            return None;
        }
        let mut next = self.clone();
        next.by_group_version.insert(key, discovery);
        Some(next)
    }

    /// Only what `apis` still hand to extension servers.
    pub fn retain_served(&mut self, apis: &ApiServices) {
        self.by_group_version.retain(|(g, v), _| apis.iter().any(|a| a.group == *g && a.version == *v));
    }

    /// Adds to an OpenAPI v2 document what the extension servers of `apis` serve (in the order
    /// of their group versions' names).
    pub fn merge_openapi_v2(&self, doc: &mut Value, apis: &ApiServices) {
        let served = |g: &str, v: &str| apis.iter().any(|a| a.group == g && a.version == v);
        for ((_, _), d) in self.by_group_version.iter().filter(|((g, v), _)| served(g, v)) {
            if let Some(spec) = &d.openapi_v2 {
                spec.merge_into(doc);
            }
        }
    }

    /// Adds to an OpenAPI v3 index (`{"paths": {...}}`) the documents the extension servers of
    /// `apis` serve, under the `serverRelativeURL`s they gave; those requests are proxied to them.
    pub fn add_openapi_paths(&self, index: &mut Value, apis: &ApiServices) {
        let Some(Value::Object(paths)) = index.get_mut("paths") else { return };
        let served = |g: &str, v: &str| apis.iter().any(|a| a.group == g && a.version == v);
        for ((g, v), d) in self.by_group_version.iter().filter(|((g, v), _)| served(g, v)) {
            if let Some(url) = &d.openapi {
                paths.insert(format!("apis/{g}/{v}"), json!({"serverRelativeURL": url}));
            }
        }
    }
}

/// An extension server's `APIResourceList` as aggregated discovery's resources (kube's
/// `ConvertGroupVersionIntoToDiscovery`): each resource with its subresources under it.
pub fn resources_of(list: &Value) -> Vec<Value> {
    let entries = list.get("resources").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let text = |r: &Value, k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    let scope = |r: &Value| if r.get("namespaced").and_then(Value::as_bool).unwrap_or(false) { "Namespaced" } else { "Cluster" };
    let kind = |r: &Value| json!({"group": text(r, "group"), "version": text(r, "version"), "kind": text(r, "kind")});
    let mut out: Vec<Value> = Vec::new();
    for r in entries.iter().filter(|r| !text(r, "name").contains('/')) {
        let mut m = Map::new();
        m.insert("resource".into(), json!(text(r, "name")));
        m.insert("responseKind".into(), kind(r));
        m.insert("scope".into(), json!(scope(r)));
        m.insert("singularResource".into(), json!(text(r, "singularName")));
        m.insert("verbs".into(), r.get("verbs").cloned().unwrap_or(json!([])));
        for key in ["shortNames", "categories"] {
            if let Some(v) = r.get(key).filter(|v| v.as_array().is_some_and(|a| !a.is_empty())) {
                m.insert(key.into(), v.clone());
            }
        }
        out.push(Value::Object(m));
    }
    for r in entries {
        let name = text(r, "name");
        let Some((parent, sub)) = name.split_once('/') else { continue };
        let at = match out.iter().position(|o| o["resource"] == parent) {
            Some(at) => at,
            None => {
                out.push(json!({"resource": parent, "responseKind": {"group": "", "version": "", "kind": ""}, "scope": scope(r), "singularResource": "", "verbs": []}));
                out.len() - 1
            }
        };
        let response_kind = if text(r, "kind").is_empty() { json!({"group": "", "version": "", "kind": ""}) } else { kind(r) };
        let subresource = json!({"subresource": sub, "responseKind": response_kind, "verbs": r.get("verbs").cloned().unwrap_or(json!([]))});
        if let Value::Object(o) = &mut out[at] {
            let subs = o.entry("subresources").or_insert_with(|| json!([]));
            if let Value::Array(subs) = subs {
                subs.push(subresource);
            }
        }
    }
    out
}

/// Aggregated discovery of the named groups (`/apis`, `apidiscovery.k8s.io/<api_version>`)
/// with the extension servers' groups among the catalog's: by `groupPriorityMinimum`, then
/// group name, as kube's aggregated discovery orders them.
pub fn merged_aggregated(catalog: &Catalog, apis: &ApiServices, discovered: &Discovered, api_version: &str) -> Value {
    let mut doc = crate::discovery::aggregated(catalog, false, api_version);
    let rank_of = |g: &str, priority: i64| (Reverse(priority), g.to_string());
    let mut ranked: Vec<((Reverse<i64>, String), Value)> = Vec::new();
    if let Some(Value::Array(items)) = doc.get_mut("items") {
        for item in items.drain(..) {
            let g = item["metadata"]["name"].as_str().unwrap_or_default().to_string();
            let priority = catalog.versions(&g).into_iter().map(|v| apiregistration::priority(&g, v).0).max().unwrap_or(1000);
            ranked.push((rank_of(&g, priority), item));
        }
    }
    let mut remote: BTreeMap<&str, Vec<&super::ApiService>> = BTreeMap::new();
    for a in apis.iter().filter(|a| !catalog.groups().contains(&a.group.as_str())) {
        remote.entry(&a.group).or_default().push(a);
    }
    for (group, mut versions) in remote {
        versions.sort_by(|a, b| b.version_priority.cmp(&a.version_priority).then_with(|| kube_version_order(&a.version, &b.version)));
        let priority = versions.iter().map(|a| a.group_priority).max().unwrap_or_default();
        let versions: Vec<Value> = versions
            .iter()
            .map(|a| match discovered.by_group_version.get(&(a.group.clone(), a.version.clone())).and_then(|d| d.resources.as_ref()) {
                Some(resources) => json!({"version": a.version, "resources": resources, "freshness": "Current"}),
                None => json!({"version": a.version, "freshness": "Stale"}),
            })
            .collect();
        ranked.push((rank_of(group, priority), json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": versions})));
    }
    ranked.sort_by(|a, b| a.0.cmp(&b.0));
    doc["items"] = Value::Array(ranked.into_iter().map(|(_, item)| item).collect());
    doc
}
