//! The groups of Service-backed APIServices in discovery, as kube-aggregator lists them: every
//! APIService's group in `/apis` whether available or not, ordered by `groupPriorityMinimum`
//! (highest first, then by APIService name), its versions by `versionPriority`, and
//! `/apis/<group>` answered here for them (`/apis/<group>/<version>` is the extension
//! server's own answer, proxied).

use std::cmp::Reverse;

use serde_json::{Value, json};

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

/// A group's versions, most preferred first: the catalog's, and those of APIServices, by
/// `versionPriority` then kube's version order.
fn versions(catalog: &Catalog, apis: &ApiServices, group: &str) -> Vec<String> {
    let remote: Vec<(i64, &str)> = apis.iter().filter(|a| a.group == group).map(|a| (a.version_priority, a.version.as_str())).collect();
    let local = catalog.versions(group);
    if remote.is_empty() {
        return local.into_iter().map(str::to_string).collect();
    }
    let mut all: Vec<(i64, &str)> = local.into_iter().map(|v| (apiregistration::priority(group, v).1, v)).chain(remote).collect();
    all.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| kube_version_order(a.1, b.1)));
    all.dedup_by(|a, b| a.1 == b.1);
    all.into_iter().map(|(_, v)| v.to_string()).collect()
}

fn api_group(catalog: &Catalog, apis: &ApiServices, group: &str) -> Value {
    let gv = |v: &str| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    let versions: Vec<Value> = versions(catalog, apis, group).iter().map(|v| gv(v)).collect();
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({"name": group, "versions": versions, "preferredVersion": preferred})
}

/// `/apis` with the APIServices' groups among the catalog's.
pub fn merged_group_list(catalog: &Catalog, apis: &ApiServices) -> Value {
    if apis.is_empty() {
        return crate::discovery::api_group_list(catalog);
    }
    let mut groups: Vec<(Rank, &str)> = catalog.groups().into_iter().filter(|g| !g.is_empty()).map(|g| (catalog_rank(catalog, g), g)).collect();
    let mut remote: Vec<(Rank, &str)> = Vec::new();
    for a in apis.iter().filter(|a| !catalog.groups().contains(&a.group.as_str())) {
        let rank = (Reverse(a.group_priority), a.name.clone());
        match remote.iter_mut().find(|(_, g)| *g == a.group) {
            Some(entry) => entry.0 = entry.0.clone().min(rank),
            None => remote.push((rank, &a.group)),
        }
    }
    remote.sort();
    for entry in remote {
        let at = groups.iter().position(|(rank, _)| *rank > entry.0).unwrap_or(groups.len());
        groups.insert(at, entry);
    }
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
