use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::resources::{Settings, catalog};

fn crd(accepted: bool) -> Value {
    let mut crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com", "uid": "u1"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"], "categories": ["all"]},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}},
                {"name": "v1beta1", "served": true, "storage": false, "deprecated": true},
                {"name": "v1alpha1", "served": false, "storage": false}]},
        "status": {"storedVersions": ["v1"]}});
    if accepted {
        crd["status"]["acceptedNames"] =
            json!({"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList", "shortNames": ["wd"], "categories": ["all"]});
        crd["status"]["conditions"] = json!([{"type": "NamesAccepted", "status": "True"}, {"type": "Established", "status": "True"}]);
    }
    crd
}

#[test]
fn a_crd_serves_its_served_versions_once_its_names_are_accepted() {
    let builtins = catalog(&Settings::default());
    let none = catalog_with(&builtins, &builtins, [&crd(false)]);
    assert!(none.get("example.com", "v1", "widgets").is_none());

    let c = catalog_with(&builtins, &builtins, [&crd(true)]);
    let v1 = c.get("example.com", "v1", "widgets").expect("v1 served");
    assert_eq!((v1.info.kind.as_str(), v1.info.singular.as_str(), v1.info.namespaced), ("Widget", "widget", true));
    assert_eq!(v1.info.storage_prefix, "example.com/widgets");
    assert_eq!(v1.info.short_names, vec!["wd"]);
    assert!(v1.info.subresource("status").is_some());
    assert_eq!(v1.info.stored_as, None);
    let beta = c.get("example.com", "v1beta1", "widgets").expect("v1beta1 served");
    assert_eq!(beta.info.stored_as, Some(("example.com".into(), "v1".into())));
    assert_eq!(beta.info.deprecation.as_deref(), Some("example.com/v1beta1 Widget is deprecated; use example.com/v1 Widget"));
    assert!(beta.info.subresource("status").is_none());
    assert!(c.get("example.com", "v1alpha1", "widgets").is_none(), "not served");
    assert!(c.get("", "v1", "pods").is_some(), "built-ins stay");
}

#[test]
fn an_unchanged_crd_keeps_its_entries_and_a_changed_one_gets_new_ones() {
    let builtins = catalog(&Settings::default());
    let first = catalog_with(&builtins, &builtins, [&crd(true)]);
    let again = catalog_with(&builtins, &first, [&crd(true)]);
    let entry = |c: &Catalog| c.get("example.com", "v1", "widgets").cloned().expect("served");
    assert!(Arc::ptr_eq(&entry(&first), &entry(&again)));
    let mut changed = crd(true);
    changed["spec"]["versions"][0]["subresources"] = json!({});
    let after = catalog_with(&builtins, &again, [&changed]);
    assert!(!Arc::ptr_eq(&entry(&again), &entry(&after)));
    assert!(entry(&after).info.subresource("status").is_none());
}

#[test]
fn a_terminating_crd_serves_no_create_and_no_update() {
    let builtins = catalog(&Settings::default());
    let mut deleting = crd(true);
    deleting["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
    let c = catalog_with(&builtins, &builtins, [&deleting]);
    let v1 = c.get("example.com", "v1", "widgets").expect("still served");
    assert!(!v1.info.has_verb("create") && !v1.info.has_verb("update") && v1.info.has_verb("delete"));
}

#[test]
fn a_custom_resource_never_hides_a_built_in_one() {
    let builtins = catalog(&Settings::default());
    let mut leases = crd(true);
    leases["spec"]["group"] = json!("coordination.k8s.io");
    leases["status"]["acceptedNames"]["plural"] = json!("leases");
    let c = catalog_with(&builtins, &builtins, [&leases]);
    let entry = c.get("coordination.k8s.io", "v1", "leases").expect("built in");
    assert!(!is_custom(&entry.info));
}

#[test]
fn versions_convert_by_their_api_version_only() {
    let s = CustomResources {
        group: "example.com".into(),
        served: "v1beta1".into(),
        storage: "v1".into(),
        status: false,
        scale: None,
        schema: None,
        columns: Vec::new(),
        selectable: Vec::new(),
        openapi: super::openapi::kind_definitions("example.com", "v1", &Names::default(), None, &[]),
        webhook: None,
    };
    use crate::catalog::Strategy;
    let obj = json!({"apiVersion": "example.com/v1beta1", "kind": "Widget", "spec": {"a": 1}});
    let stored = s.stored_from_served(&obj).expect("another version");
    assert_eq!(stored["apiVersion"], "example.com/v1");
    assert_eq!(s.served_from_stored(stored), obj);
}

#[test]
fn generation_grows_with_changes_beyond_metadata_and_status_when_status_is_a_subresource() {
    use crate::catalog::Strategy;
    let with_status = CustomResources {
        group: "example.com".into(),
        served: "v1".into(),
        storage: "v1".into(),
        status: true,
        scale: None,
        schema: None,
        columns: Vec::new(),
        selectable: Vec::new(),
        openapi: super::openapi::kind_definitions("example.com", "v1", &Names::default(), None, &[]),
        webhook: None,
    };
    let old = json!({"metadata": {"name": "a", "generation": 1}, "spec": {"a": 1}, "status": {"ok": true}});
    let mut new = json!({"metadata": {"name": "a", "labels": {"x": "y"}}, "spec": {"a": 1}, "status": {"ok": false}});
    with_status.prepare_for_update(&mut new, &old);
    assert_eq!((new["metadata"]["generation"].clone(), new["status"].clone()), (json!(1), json!({"ok": true})));
    let mut new = json!({"metadata": {"name": "a"}, "spec": {"a": 2}});
    with_status.prepare_for_update(&mut new, &old);
    assert_eq!(new["metadata"]["generation"], 2);

    let without = CustomResources { status: false, ..with_status };
    let mut new = json!({"metadata": {"name": "a"}, "spec": {"a": 1}, "status": {"ok": false}});
    without.prepare_for_update(&mut new, &old);
    assert_eq!(new["metadata"]["generation"], 2, "status is part of the object");
}

#[test]
fn versions_are_preferred_in_kubes_order() {
    let mut list = vec!["foo", "v1alpha1", "v2", "v1beta2", "v1", "v10", "v1beta1", "bar", "v11alpha2"];
    list.sort_by(|a, b| kube_version_order(a, b));
    assert_eq!(list, vec!["v10", "v2", "v1", "v1beta2", "v1beta1", "v11alpha2", "v1alpha1", "bar", "foo"]);
}

#[test]
fn an_embedded_resources_metadata_keeps_only_what_object_meta_has() {
    let s = Structural::read(&json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}}}}}));
    let mut obj = json!({"apiVersion": "v1", "kind": "W", "metadata": {"name": "w", "foo": 1},
        "spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}, "bogus": true}, "spec": {"x": 1}}}});
    assert_eq!(s.prune_object(&mut obj), vec!["spec.template.metadata.bogus"]);
    assert_eq!(obj["spec"]["template"]["metadata"], json!({"name": "p", "labels": {"a": "b"}}));
    assert_eq!(obj["spec"]["template"]["spec"], json!({"x": 1}), "unknown fields elsewhere are kept");
    assert_eq!(obj["metadata"]["foo"], 1, "the root's metadata is the object's own");
}
