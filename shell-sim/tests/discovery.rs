//! Discovery against kube-apiserver v1.33's own: every group, version, resource and subresource
//! a default v1.33 server serves (`testdata/kube-v1.33-discovery.json`, taken from kube's
//! discovery snapshots), with the same kind, scope, names, verbs and categories, read from
//! aggregated discovery as kubectl reads it.

use std::collections::BTreeMap;

use kapi_core::pipeline::Request;
use kapi_sim::{ADMIN_TOKEN, World, default_server, epoch};
use serde_json::{Value, json};

/// Subresources kube serves by connecting to a kubelet (or proxying to a service), which kapi
/// does not do: it answers them 404 as kube does for a subresource it does not serve.
const NOT_SERVED: &[&str] = &["pods/attach", "pods/exec", "pods/log", "pods/portforward", "pods/proxy", "nodes/proxy", "services/proxy"];

fn reference() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/kube-v1.33-discovery.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("the reference discovery")).expect("JSON")
}

fn aggregated(w: &mut World, path: &str) -> Value {
    let headers = vec![
        ("Authorization".to_string(), format!("Bearer {ADMIN_TOKEN}")),
        ("Accept".to_string(), "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList".to_string()),
    ];
    let r = w.request(Request { method: "GET".into(), path: path.into(), headers, ..Default::default() });
    assert_eq!(r.head.status, 200, "{path}");
    r.json()
}

/// One line per resource and per subresource, in the reference file's terms.
fn served(w: &mut World) -> (BTreeMap<String, Value>, Vec<Value>) {
    let mut resources = BTreeMap::new();
    let mut groups = Vec::new();
    for path in ["/api", "/apis"] {
        for g in aggregated(w, path)["items"].as_array().expect("items") {
            let group = g["metadata"]["name"].as_str().unwrap_or_default().to_string();
            let versions: Vec<&str> = g["versions"].as_array().expect("versions").iter().map(|v| v["version"].as_str().expect("version")).collect();
            groups.push(json!({"group": group, "versions": versions, "preferredVersion": versions[0]}));
            for v in g["versions"].as_array().expect("versions") {
                let version = v["version"].as_str().expect("version");
                for r in v["resources"].as_array().expect("resources") {
                    let name = r["resource"].as_str().expect("resource");
                    let key = format!("{group}/{version}/{name}");
                    let mut subs: Vec<Value> = r["subresources"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|s| {
                            json!({"name": s["subresource"], "group": s["responseKind"]["group"], "version": s["responseKind"]["version"],
                                "kind": s["responseKind"]["kind"], "verbs": s["verbs"]})
                        })
                        .collect();
                    subs.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
                    resources.insert(
                        key,
                        json!({"group": group, "version": version, "resource": name, "kind": r["responseKind"]["kind"],
                            "namespaced": r["scope"] == "Namespaced", "singular": r["singularResource"],
                            "shortNames": r["shortNames"].as_array().cloned().unwrap_or_default(),
                            "categories": r["categories"].as_array().cloned().unwrap_or_default(),
                            "verbs": r["verbs"], "subresources": subs}),
                    );
                }
            }
        }
    }
    (resources, groups)
}

#[test]
fn discovery_lists_what_kube_apiserver_v1_33_serves_by_default() {
    let mut w = World::new(default_server(), epoch(), 7);
    let reference = reference();
    let (served, groups) = served(&mut w);
    assert_eq!(Value::from(groups), reference["groups"], "groups, their versions and preferred versions, in kube's order");

    let mut missing = Vec::new();
    let mut different = Vec::new();
    let mut expected_keys = Vec::new();
    for want in reference["resources"].as_array().expect("resources") {
        let mut want = want.clone();
        let field = |k: &str| want[k].as_str().expect("a string").to_string();
        let (group, version, resource) = (field("group"), field("version"), field("resource"));
        let key = format!("{group}/{version}/{resource}");
        want["subresources"].as_array_mut().expect("subresources").retain(|s| {
            let sub = format!("{resource}/{}", s["name"].as_str().unwrap());
            !NOT_SERVED.contains(&sub.as_str())
        });
        for field in ["shortNames", "categories"] {
            if want[field].is_null() {
                want[field] = json!([]);
            }
        }
        expected_keys.push(key.clone());
        match served.get(&key) {
            None => missing.push(key),
            Some(got) if *got != want => different.push(format!("{key}:\n  kube: {want}\n  kapi: {got}")),
            Some(_) => {}
        }
    }
    let extra: Vec<&String> = served.keys().filter(|k| !expected_keys.contains(k)).collect();
    assert!(missing.is_empty() && different.is_empty() && extra.is_empty(), "missing: {missing:?}\nextra: {extra:?}\n{}", different.join("\n"));
}
