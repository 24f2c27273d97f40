//! Discovery documents, all derived from the catalog: `/api`, `/apis/<group>`,
//! resource lists per group-version, and aggregated discovery (`apidiscovery.k8s.io/v2` and
//! `v2beta1`), which kubectl reads to learn short names, categories, verbs and subresources.
//! `/apis` and the named groups' aggregated discovery are the aggregator's (`aggregator::
//! discovery`), which puts the extension servers' groups among these.

use base64::Engine;
use serde_json::{Map, Value, json};
use sha2::Digest;

use crate::catalog::{Catalog, Resource};

/// `storageVersionHash`: the first 8 bytes of SHA-256 of `group/version/kind`, base64.
pub fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    let sum = sha2::Sha256::digest(format!("{group}/{version}/{kind}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(&sum[..8])
}

fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() { version.to_string() } else { format!("{group}/{version}") }
}

/// `/api`.
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn api_group(catalog: &Catalog, group: &str) -> Value {
    let versions: Vec<Value> = catalog.versions(group).iter().map(|v| json!({"groupVersion": group_version(group, v), "version": v})).collect();
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({"name": group, "versions": versions, "preferredVersion": preferred})
}

/// `/apis/<group>`, if the group exists.
pub fn group_document(catalog: &Catalog, group: &str) -> Option<Value> {
    if group.is_empty() || catalog.versions(group).is_empty() {
        return None;
    }
    let mut g = api_group(catalog, group);
    let m = g.as_object_mut().expect("an object");
    m.insert("kind".into(), json!("APIGroup"));
    m.insert("apiVersion".into(), json!("v1"));
    Some(g)
}

fn in_group_version<'a>(catalog: &'a Catalog, group: &'a str, version: &'a str) -> impl Iterator<Item = &'a std::sync::Arc<Resource>> {
    catalog.resources_of(group, version).into_iter()
}

/// `/api/v1` and `/apis/<group>/<version>`: `APIResourceList`, if the group-version exists.
pub fn resource_list(catalog: &Catalog, group: &str, version: &str) -> Option<Value> {
    let mut entries: Vec<Value> = Vec::new();
    for r in in_group_version(catalog, group, version) {
        let i = &r.info;
        let mut m = Map::new();
        m.insert("name".into(), json!(i.resource));
        m.insert("singularName".into(), json!(i.singular));
        m.insert("namespaced".into(), json!(i.namespaced));
        m.insert("kind".into(), json!(i.kind));
        m.insert("verbs".into(), json!(i.verbs));
        if !i.short_names.is_empty() {
            m.insert("shortNames".into(), json!(i.short_names));
        }
        if !i.categories.is_empty() {
            m.insert("categories".into(), json!(i.categories));
        }
        if i.stored() {
            let (group, version) = i.stored_as.as_ref().map_or((&i.group, &i.version), |(g, v)| (g, v));
            m.insert("storageVersionHash".into(), json!(storage_version_hash(group, version, &i.kind)));
        }
        entries.push(Value::Object(m));
        for s in &i.subresources {
            let mut m = Map::new();
            m.insert("name".into(), json!(format!("{}/{}", i.resource, s.name)));
            m.insert("singularName".into(), json!(""));
            m.insert("namespaced".into(), json!(i.namespaced));
            if s.group != i.group || s.version != i.version {
                m.insert("group".into(), json!(s.group));
                m.insert("version".into(), json!(s.version));
            }
            m.insert("kind".into(), json!(s.kind));
            m.insert("verbs".into(), json!(s.verbs));
            entries.push(Value::Object(m));
        }
    }
    if entries.is_empty() {
        return None;
    }
    entries.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version(group, version), "resources": entries}))
}

fn discovery_resource(r: &Resource) -> Value {
    let i = &r.info;
    let mut m = Map::new();
    m.insert("resource".into(), json!(i.resource));
    m.insert("responseKind".into(), json!({"group": "", "version": "", "kind": i.kind}));
    m.insert("scope".into(), json!(if i.namespaced { "Namespaced" } else { "Cluster" }));
    m.insert("singularResource".into(), json!(i.singular));
    m.insert("verbs".into(), json!(i.verbs));
    if !i.short_names.is_empty() {
        m.insert("shortNames".into(), json!(i.short_names));
    }
    if !i.categories.is_empty() {
        m.insert("categories".into(), json!(i.categories));
    }
    if !i.subresources.is_empty() {
        let mut subs: Vec<Value> = i
            .subresources
            .iter()
            .map(|s| {
                let (g, v) = if s.group == i.group && s.version == i.version { ("", "") } else { (s.group.as_str(), s.version.as_str()) };
                json!({"subresource": s.name, "responseKind": {"group": g, "version": v, "kind": s.kind}, "verbs": s.verbs})
            })
            .collect();
        subs.sort_by(|a, b| a["subresource"].as_str().cmp(&b["subresource"].as_str()));
        m.insert("subresources".into(), Value::Array(subs));
    }
    Value::Object(m)
}

/// Aggregated discovery of the core group (`legacy = true`, `/api`) or of every named group
/// (`/apis`), in `apidiscovery.k8s.io/<version>`.
pub fn aggregated(catalog: &Catalog, legacy: bool, api_version: &str) -> Value {
    let groups: Vec<&str> = catalog.groups().into_iter().filter(|g| g.is_empty() == legacy).collect();
    let items: Vec<Value> = groups
        .into_iter()
        .map(|g| {
            let versions: Vec<Value> = catalog
                .versions(g)
                .into_iter()
                .map(|v| {
                    let mut resources: Vec<Value> = in_group_version(catalog, g, v).map(|r| discovery_resource(r)).collect();
                    resources.sort_by(|a, b| a["resource"].as_str().cmp(&b["resource"].as_str()));
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": g, "creationTimestamp": null}, "versions": versions})
        })
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": format!("apidiscovery.k8s.io/{api_version}"), "metadata": {}, "items": items})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{Settings, catalog};

    #[test]
    fn documents_come_from_the_catalog() {
        let c = catalog(&Settings::default());
        let core = resource_list(&c, "", "v1").unwrap();
        let pods = core["resources"].as_array().unwrap().iter().find(|r| r["name"] == "pods").unwrap();
        assert_eq!(pods["shortNames"], json!(["po"]));
        assert_eq!(pods["storageVersionHash"], "xPOwRZ+Yhw8=");
        let groups = aggregated(&c, false, "v2");
        let apps = groups["items"].as_array().unwrap().iter().find(|g| g["metadata"]["name"] == "apps").unwrap();
        let deploy = apps["versions"][0]["resources"].as_array().unwrap().iter().find(|r| r["resource"] == "deployments").unwrap();
        assert_eq!(deploy["subresources"][0]["responseKind"]["kind"], "Scale");
        assert!(group_document(&c, "apps").is_some());
        let hash = |group: &str, version: &str| {
            let list = resource_list(&c, group, version).unwrap();
            list["resources"].as_array().unwrap().iter().find(|r| r["name"] == "horizontalpodautoscalers").unwrap()["storageVersionHash"].clone()
        };
        assert_eq!(hash("autoscaling", "v1"), hash("autoscaling", "v2"), "the hash of the storage version, whatever version is served");
        assert!(group_document(&c, "nope").is_none());
    }
}
