//! CustomResourceDefinitions through the core's request pipeline: a CRD's names are accepted
//! and it is established by the apiextensions controllers, its resources are served from a
//! catalog that changes at run time, and deleting it deletes its resources first.

use bytes::Bytes;
use jiff::SignedDuration;
use kapi_core::controllers::Enabled;
use kapi_core::kv::{KvRequest, KvResponse, RangeRequest};
use kapi_sim::{Response, World, default_server, epoch};
use serde_json::{Value, json};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

fn world() -> World {
    let mut w = World::new(default_server(), epoch(), 7);
    w.start_controllers(Enabled::NONE);
    w
}

fn call(w: &mut World, method: &str, path: &str, body: Option<Value>) -> Response {
    let ct = if method == "PATCH" { "application/merge-patch+json" } else { "application/json" };
    w.call(method, path, "", body.as_ref(), if body.is_some() { ct } else { "" })
}

fn crd(kind: &str, plural: &str) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": format!("{plural}.example.com")},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": plural, "kind": kind, "shortNames": ["wd"]},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                {"name": "v1beta1", "served": true, "storage": false,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})
}

fn widget(name: &str, size: i64) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"size": size}})
}

fn condition(crd: &Value, ty: &str) -> (String, String) {
    let c = crd["status"]["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == ty).cloned().unwrap_or_default();
    (c["status"].as_str().unwrap_or_default().to_string(), c["reason"].as_str().unwrap_or_default().to_string())
}

#[test]
fn a_crd_is_established_and_its_resources_served() {
    let mut w = world();
    assert_eq!(call(&mut w, "GET", WIDGETS, None).head.status, 404);
    let created = call(&mut w, "POST", CRDS, Some(crd("Widget", "widgets")));
    assert_eq!(created.head.status, 201, "{}", String::from_utf8_lossy(&created.body));
    assert_eq!(created.json()["status"]["storedVersions"], json!(["v1"]));
    let crd = call(&mut w, "GET", &format!("{CRDS}/widgets.example.com"), None).json();
    assert_eq!(condition(&crd, "NamesAccepted"), ("True".into(), "NoConflicts".into()));
    assert_eq!(condition(&crd, "Established"), ("True".into(), "InitialNamesAccepted".into()));
    assert_eq!(
        crd["status"]["acceptedNames"],
        json!({"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList", "shortNames": ["wd"]})
    );

    let r = call(&mut w, "POST", WIDGETS, Some(widget("w1", 3)));
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let w1 = r.json();
    assert_eq!((w1["metadata"]["generation"].clone(), w1["spec"]["size"].clone()), (json!(1), json!(3)));
    // The same object at the other served version: only apiVersion differs.
    let beta = call(&mut w, "GET", "/apis/example.com/v1beta1/namespaces/default/widgets/w1", None).json();
    assert_eq!((beta["apiVersion"].as_str(), beta["spec"]["size"].as_i64()), (Some("example.com/v1beta1"), Some(3)));
    let list = call(&mut w, "GET", "/apis/example.com/v1/widgets", None).json();
    assert_eq!((list["kind"].as_str(), list["items"].as_array().map(Vec::len)), (Some("WidgetList"), Some(1)));
    // A field that is not selectable, as kube's converter of custom resources' field labels says.
    let r = w.call("GET", WIDGETS, "fieldSelector=spec.size%3D3", None, "");
    assert_eq!((r.head.status, r.json()["message"].clone()), (400, json!("field label not supported: spec.size")));
    let r = w.call("GET", WIDGETS, "fieldSelector=metadata.name%3Dw1", None, "");
    assert_eq!((r.head.status, r.json()["items"].as_array().map(Vec::len)), (200, Some(1)));

    // A spec change bumps the generation; with a status subresource, status is kept.
    let r = call(&mut w, "PATCH", &format!("{WIDGETS}/w1"), Some(json!({"spec": {"size": 4}, "status": {"ready": true}})));
    assert_eq!(r.head.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!((r.json()["metadata"]["generation"].clone(), r.json().get("status").cloned()), (json!(2), None));
    let r = call(&mut w, "PATCH", &format!("{WIDGETS}/w1/status"), Some(json!({"status": {"ready": true}, "spec": {"size": 9}})));
    assert_eq!(
        (r.json()["status"]["ready"].clone(), r.json()["spec"]["size"].clone(), r.json()["metadata"]["generation"].clone()),
        (json!(true), json!(4), json!(2))
    );

    // Strategic merge patch is refused, as kube refuses it for custom resources.
    let r = w.call("PATCH", &format!("{WIDGETS}/w1"), "", Some(&json!({"spec": {"size": 5}})), "application/strategic-merge-patch+json");
    assert_eq!(r.head.status, 415, "{}", String::from_utf8_lossy(&r.body));
    // Updates need a resourceVersion; the kind must be the CRD's.
    let r = call(&mut w, "PUT", &format!("{WIDGETS}/w1"), Some(widget("w1", 5)));
    assert_eq!(r.head.status, 422, "{}", String::from_utf8_lossy(&r.body));
    let mut gadget = widget("g1", 1);
    gadget["kind"] = json!("Gadget");
    let r = call(&mut w, "POST", WIDGETS, Some(gadget));
    assert_eq!(r.head.status, 422);
    assert_eq!(r.json()["message"], "Widget.example.com \"g1\" is invalid: kind: Invalid value: \"Gadget\": must be Widget");

    // Discovery lists the group and the resource.
    let d = call(&mut w, "GET", "/apis/example.com/v1", None).json();
    let names: Vec<&str> = d["resources"].as_array().unwrap().iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(names, vec!["widgets", "widgets/status"]);
}

#[test]
fn a_second_crd_with_a_kind_in_use_in_its_group_is_not_served() {
    let mut w = world();
    assert_eq!(call(&mut w, "POST", CRDS, Some(crd("Widget", "widgets"))).head.status, 201);
    let mut second = crd("Widget", "gizmos");
    second["spec"]["names"]["shortNames"] = json!([]);
    assert_eq!(call(&mut w, "POST", CRDS, Some(second)).head.status, 201);
    let crd = call(&mut w, "GET", &format!("{CRDS}/gizmos.example.com"), None).json();
    // The kind and the list kind are both in use: the last conflict found says why.
    assert_eq!(condition(&crd, "NamesAccepted"), ("False".into(), "ListKindConflict".into()));
    let message = crd["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "NamesAccepted").unwrap()["message"].clone();
    assert_eq!(message, "\"WidgetList\" is already in use");
    assert_eq!(condition(&crd, "Established"), ("False".into(), "NotAccepted".into()));
    assert_eq!(call(&mut w, "GET", "/apis/example.com/v1/namespaces/default/gizmos", None).head.status, 404);
}

#[test]
fn deleting_a_crd_deletes_its_resources_first() {
    let mut w = world();
    assert_eq!(call(&mut w, "POST", CRDS, Some(crd("Widget", "widgets"))).head.status, 201);
    assert_eq!(call(&mut w, "POST", WIDGETS, Some(widget("w1", 1))).head.status, 201);
    let r = call(&mut w, "DELETE", &format!("{CRDS}/widgets.example.com"), None);
    assert_eq!(r.head.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["metadata"]["finalizers"], json!(["customresourcecleanup.apiextensions.k8s.io"]));
    assert_eq!(condition(&r.json(), "Terminating"), ("True".into(), "InstanceDeletionPending".into()));
    // As kube's CRD delete marks it: no grace period, the generation as it was.
    let meta = &r.json()["metadata"];
    assert_eq!((meta.get("deletionGracePeriodSeconds"), meta["generation"].clone()), (None, json!(1)), "{meta}");
    w.advance(SignedDuration::from_secs(1));
    let left = call(&mut w, "GET", &format!("{CRDS}/widgets.example.com"), None);
    assert_eq!(left.head.status, 404, "the CRD is gone once its resources are: {}", String::from_utf8_lossy(&left.body));
    assert_eq!(call(&mut w, "GET", WIDGETS, None).head.status, 404);
    // Made again, it starts empty.
    assert_eq!(call(&mut w, "POST", CRDS, Some(crd("Widget", "widgets"))).head.status, 201);
    let list = call(&mut w, "GET", WIDGETS, None);
    assert_eq!(list.json()["items"], json!([]), "{}", String::from_utf8_lossy(&list.body));
}

#[test]
fn crds_and_their_resources_are_stored_under_kubes_keys() {
    let mut w = world();
    assert_eq!(call(&mut w, "POST", CRDS, Some(crd("Widget", "widgets"))).head.status, 201);
    assert_eq!(call(&mut w, "POST", WIDGETS, Some(widget("w1", 1))).head.status, 201);
    let (result, _) = w.model.apply(w.now(), &KvRequest::Range(RangeRequest::prefix(Bytes::from_static(b"/registry/"))));
    let Ok(KvResponse::Range(r)) = result else { panic!("the store reads: {result:?}") };
    let keys: Vec<String> = r.kvs.iter().map(|kv| String::from_utf8_lossy(&kv.key).to_string()).filter(|k| k.contains("example.com")).collect();
    // The CRD, the APIServices kapi keeps for its versions, and the widget.
    let expected = [
        "/registry/apiextensions.k8s.io/customresourcedefinitions/widgets.example.com",
        "/registry/apiregistration.k8s.io/apiservices/v1.example.com",
        "/registry/apiregistration.k8s.io/apiservices/v1beta1.example.com",
        "/registry/example.com/widgets/default/w1",
    ];
    assert_eq!(keys, expected);
}

#[test]
fn a_terminating_crd_refuses_creates_and_serves_updates() {
    let mut w = world();
    assert_eq!(call(&mut w, "POST", CRDS, Some(crd("Widget", "widgets"))).head.status, 201);
    let mut held = widget("w1", 1);
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    assert_eq!(call(&mut w, "POST", WIDGETS, Some(held)).head.status, 201);
    assert_eq!(call(&mut w, "DELETE", &format!("{CRDS}/widgets.example.com"), None).head.status, 200);
    w.advance(SignedDuration::from_secs(1));
    // The widget waits for its finalizer, and the CRD for the widget.
    let r = call(&mut w, "POST", WIDGETS, Some(widget("w2", 1)));
    assert_eq!(r.head.status, 405, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["message"], "create not allowed while custom resource definition is terminating");
    assert_eq!(r.json()["details"], json!({"group": "example.com", "kind": "widgets"}));
    let apply = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w3"}, "spec": {"size": 1}});
    let r = w.call("PATCH", &format!("{WIDGETS}/w3"), "fieldManager=me", Some(&apply), "application/apply-patch+yaml");
    assert_eq!(
        (r.head.status, r.json()["message"].clone()),
        (405, json!("create not allowed while custom resource definition is terminating")),
        "an apply does not create either"
    );
    let d = call(&mut w, "GET", "/apis/example.com/v1", None).json();
    assert_eq!(d["resources"][0]["verbs"], json!(["delete", "deletecollection", "get", "list", "watch"]));
    let mut w1 = call(&mut w, "GET", &format!("{WIDGETS}/w1"), None).json();
    assert!(w1["metadata"]["deletionTimestamp"].is_string(), "{w1}");
    w1["metadata"]["finalizers"] = json!([]);
    assert_eq!(call(&mut w, "PUT", &format!("{WIDGETS}/w1"), Some(w1)).head.status, 200, "an update is served");
    w.advance(SignedDuration::from_secs(10));
    assert_eq!(call(&mut w, "GET", &format!("{CRDS}/widgets.example.com"), None).head.status, 404, "the CRD goes with its last widget");
}

#[test]
fn deleting_a_namespace_deletes_its_custom_resources() {
    let mut w = World::new(default_server(), epoch(), 7);
    w.start_controllers(Enabled::ALL);
    assert_eq!(call(&mut w, "POST", CRDS, Some(crd("Widget", "widgets"))).head.status, 201);
    assert_eq!(
        call(&mut w, "POST", "/api/v1/namespaces", Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}))).head.status,
        201
    );
    let team = "/apis/example.com/v1/namespaces/team/widgets";
    assert_eq!(call(&mut w, "POST", team, Some(widget("w1", 1))).head.status, 201);
    assert_eq!(call(&mut w, "DELETE", "/api/v1/namespaces/team", None).head.status, 200);
    w.advance(SignedDuration::from_secs(1));
    assert_eq!(call(&mut w, "GET", "/api/v1/namespaces/team", None).head.status, 404, "the namespace is gone");
    assert_eq!(call(&mut w, "GET", &format!("{team}/w1"), None).head.status, 404, "and its widget with it");
}

#[test]
fn the_schema_prunes_unknown_fields_and_sets_defaults() {
    let mut w = world();
    let mut def = crd("Widget", "widgets");
    def["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "size": {"type": "integer", "default": 1},
            "mode": {"type": "string", "default": "fast"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "parts": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "count": {"type": "integer", "default": 2}}}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}});
    assert_eq!(call(&mut w, "POST", CRDS, Some(def)).head.status, 201);
    let body = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"},
        "spec": {"size": 3, "unknown": true, "labels": {"a": "b"}, "parts": [{"name": "p", "extra": 1}], "free": {"any": {"thing": 1}}}, "other": 1});
    let r = w.call("POST", WIDGETS, "fieldValidation=Warn", Some(&body), "application/json");
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let w1 = r.json();
    assert_eq!(w1["spec"], json!({"size": 3, "mode": "fast", "labels": {"a": "b"}, "parts": [{"name": "p", "count": 2}], "free": {"any": {"thing": 1}}}));
    assert!(w1.get("other").is_none());
    let warnings: Vec<&str> = r.head.headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case("warning")).map(|(_, v)| v.as_str()).collect();
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert!(warnings.iter().all(|w| w.contains("unknown field")) && warnings.iter().any(|w| w.contains("spec.parts[0].extra")), "{warnings:?}");
    let r = w.call(
        "POST",
        WIDGETS,
        "fieldValidation=Strict",
        Some(&json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w2"}, "spec": {"nope": 1}})),
        "application/json",
    );
    assert_eq!(r.head.status, 400, "{}", String::from_utf8_lossy(&r.body));
}

#[test]
fn the_schema_refuses_what_it_does_not_allow() {
    let mut w = world();
    let mut def = crd("Widget", "widgets");
    def["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({"type": "object", "properties": {
        "spec": {"type": "object", "required": ["size"], "properties": {"size": {"type": "integer", "minimum": 1}, "note": {"type": "string"}}}}});
    assert_eq!(call(&mut w, "POST", CRDS, Some(def)).head.status, 201);
    let bad = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": "big", "note": null}});
    let r = call(&mut w, "POST", WIDGETS, Some(bad));
    assert_eq!(r.head.status, 422, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        r.json()["message"],
        "Widget.example.com \"w1\" is invalid: spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\"",
        "kube shows the type the value has as the bad value"
    );
    let r = call(&mut w, "POST", WIDGETS, Some(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"note": null}})));
    assert_eq!(r.json()["message"], "Widget.example.com \"w1\" is invalid: spec.size: Required value", "a null not allowed is dropped, not refused");
    assert_eq!(call(&mut w, "POST", WIDGETS, Some(widget("w1", 2))).head.status, 201);
    let r = call(&mut w, "PATCH", &format!("{WIDGETS}/w1"), Some(json!({"spec": {"size": 0}})));
    assert_eq!(
        r.json()["message"],
        "Widget.example.com \"w1\" is invalid: spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"
    );
}

#[test]
fn discovery_and_openapi_answer_with_custom_resources_served() {
    let mut w = world();
    assert_eq!(call(&mut w, "POST", CRDS, Some(crd("Widget", "widgets"))).head.status, 201);
    for path in ["/api", "/apis", "/apis/example.com", "/openapi/v2", "/openapi/v3"] {
        let r = call(&mut w, "GET", path, None);
        assert_eq!(r.head.status, 200, "{path}: {}", String::from_utf8_lossy(&r.body));
    }
    let groups = call(&mut w, "GET", "/apis", None).json();
    let example = groups["groups"].as_array().unwrap().iter().find(|g| g["name"] == "example.com").cloned().expect("the CRD's group");
    assert_eq!(example["preferredVersion"]["version"], "v1");
    let aggregated = w.call("GET", "/apis", "", None, "");
    assert_eq!(aggregated.head.status, 200);
    // The kind's schema in the group version's document, as kubectl explain reads it.
    let index = call(&mut w, "GET", "/openapi/v3", None).json();
    let url = index["paths"]["apis/example.com/v1"]["serverRelativeURL"].as_str().expect("a document for the CRD's version").to_string();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let r = w.call("GET", path, query, None, "");
    assert_eq!(r.head.status, 200, "{url}: {}", String::from_utf8_lossy(&r.body));
    let schemas = &r.json()["components"]["schemas"];
    let widget = &schemas["com.example.v1.Widget"];
    assert_eq!(widget["x-kubernetes-group-version-kind"], json!([{"group": "example.com", "kind": "Widget", "version": "v1"}]));
    assert_eq!(widget["properties"]["metadata"]["allOf"], json!([{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]));
    assert!(schemas.get("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta").is_some() && schemas.get("com.example.v1.WidgetList").is_some());
    let post = &r.json()["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets"]["post"];
    let body = post["requestBody"]["content"].as_object().and_then(|c| c.values().next()).cloned().unwrap_or_default();
    assert_eq!(body["schema"]["$ref"], "#/components/schemas/com.example.v1.Widget", "{post}");
    let v2 = call(&mut w, "GET", "/openapi/v2", None).json();
    assert_eq!(v2["definitions"]["com.example.v1.WidgetList"]["properties"]["items"]["items"]["$ref"], "#/definitions/com.example.v1.Widget");
}

#[test]
fn the_scale_subresource_reads_and_writes_the_paths_the_crd_names() {
    let mut w = world();
    let mut def = crd("Widget", "widgets");
    def["spec"]["versions"][0]["subresources"]["scale"] =
        json!({"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.ready", "labelSelectorPath": ".status.selector"});
    assert_eq!(call(&mut w, "POST", CRDS, Some(def)).head.status, 201);
    let discovery = call(&mut w, "GET", "/apis/example.com/v1", None).json();
    let scale = discovery["resources"].as_array().unwrap().iter().find(|r| r["name"] == "widgets/scale").cloned();
    assert_eq!(scale.map(|s| (s["group"].clone(), s["version"].clone(), s["kind"].clone())), Some((json!("autoscaling"), json!("v1"), json!("Scale"))));

    assert_eq!(call(&mut w, "POST", WIDGETS, Some(widget("w1", 3))).head.status, 201);
    let scale_path = format!("{WIDGETS}/w1/scale");
    let r = call(&mut w, "GET", &scale_path, None);
    assert_eq!(r.head.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let s = r.json();
    assert_eq!((s["kind"].clone(), s["spec"].clone(), s["status"].clone()), (json!("Scale"), json!({"replicas": 3}), json!({"replicas": 0, "selector": ""})));

    // A merge patch of the Scale (kubectl scale) lands at the spec path.
    let r = call(&mut w, "PATCH", &scale_path, Some(json!({"spec": {"replicas": 5}})));
    assert_eq!((r.head.status, r.json()["spec"]["replicas"].clone()), (200, json!(5)), "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(call(&mut w, "GET", &format!("{WIDGETS}/w1"), None).json()["spec"]["size"], json!(5));

    // A negative count is refused by the custom resource's own validation, as kube's.
    let r =
        call(&mut w, "PUT", &scale_path, Some(json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "w1"}, "spec": {"replicas": -1}})));
    assert_eq!(r.head.status, 422, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["message"], json!("Widget.example.com \"w1\" is invalid: .spec.size: Invalid value: -1: should be a non-negative integer"));

    // A value of another type at a path: kube's accessor error, on writes and on reads.
    let r = call(&mut w, "PATCH", &format!("{WIDGETS}/w1/status"), Some(json!({"status": {"ready": "two"}})));
    assert_eq!(r.head.status, 422, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        r.json()["message"],
        json!("Widget.example.com \"w1\" is invalid: .status.ready: Invalid value: 0: .status.ready accessor error: two is of the type string, expected int64")
    );

    // Without replicas, a read of the Scale is refused and so is a patch that sets none.
    assert_eq!(call(&mut w, "POST", WIDGETS, Some(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w2"}}))).head.status, 201);
    let r = call(&mut w, "GET", &format!("{WIDGETS}/w2/scale"), None);
    assert_eq!((r.head.status, r.json()["message"].clone()), (500, json!("Internal error occurred: the spec replicas field \".spec.size\" does not exist")));
    let r = call(&mut w, "PATCH", &format!("{WIDGETS}/w2/scale"), Some(json!({"metadata": {"labels": {"a": "b"}}})));
    assert_eq!((r.head.status, r.json()["message"].clone()), (400, json!("the spec replicas field \".spec.size\" cannot be empty")));
    let r = call(&mut w, "PATCH", &format!("{WIDGETS}/w2/scale"), Some(json!({"spec": {"replicas": 2}})));
    assert_eq!((r.head.status, r.json()["spec"]["replicas"].clone()), (200, json!(2)), "{}", String::from_utf8_lossy(&r.body));
}

#[test]
fn server_side_apply_owns_fields_by_the_schema_of_the_crd() {
    let mut w = world();
    let mut def = crd("Widget", "widgets");
    def["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "size": {"type": "integer"},
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "args": {"type": "array", "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}});
    assert_eq!(call(&mut w, "POST", CRDS, Some(def)).head.status, 201);
    let apply = |w: &mut World, path: &str, query: &str, body: Value| w.call("PATCH", path, query, Some(&body), "application/apply-patch+yaml");
    let managed = |obj: &Value| -> Vec<(String, String, Value)> {
        obj["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| (e["manager"].as_str().unwrap().to_string(), e["operation"].as_str().unwrap().to_string(), e["fieldsV1"].clone()))
            .collect()
    };
    let w1 = format!("{WIDGETS}/w1");
    let config = |size: i64, ports: Value, tags: Value| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1", "labels": {"team": "a"}},
            "spec": {"size": size, "ports": ports, "tags": tags, "args": ["p"], "labels": {"k": "v"}}})
    };

    // An apply creates: every field it sets is the applier's; list items by their keys, set
    // items by value, an atomic list whole, map entries one by one.
    let r = apply(&mut w, &w1, "fieldManager=alice", config(1, json!([{"name": "http", "port": 80}]), json!(["x", "y"])));
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let alice = json!({"f:metadata": {"f:labels": {"f:team": {}}}, "f:spec": {"f:args": {}, "f:labels": {"f:k": {}},
        "f:ports": {"k:{\"name\":\"http\"}": {".": {}, "f:name": {}, "f:port": {}}}, "f:size": {}, "f:tags": {"v:\"x\"": {}, "v:\"y\"": {}}}});
    assert_eq!(managed(&r.json()), vec![("alice".into(), "Apply".into(), alice.clone())]);

    // An update takes what it changes; an apply of another value then conflicts, unless forced.
    let r = w.call("PATCH", &w1, "fieldManager=bob", Some(&json!({"spec": {"size": 2}})), "application/merge-patch+json");
    assert_eq!(r.head.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(managed(&r.json())[1], ("bob".into(), "Update".into(), json!({"f:spec": {"f:size": {}}})));
    let r = apply(&mut w, &w1, "fieldManager=alice", config(1, json!([{"name": "http", "port": 80}]), json!(["x", "y"])));
    assert_eq!(r.head.status, 409, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["message"], "Apply failed with 1 conflict: conflict with \"bob\" using example.com/v1: .spec.size");
    let both_ports = json!([{"name": "http", "port": 80}, {"name": "https", "port": 443}]);
    let r = apply(&mut w, &w1, "fieldManager=alice&force=true", config(1, both_ports.clone(), json!(["x"])));
    assert_eq!(r.head.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let obj = r.json();
    assert_eq!((obj["spec"]["size"].clone(), obj["spec"]["ports"].clone(), obj["spec"]["tags"].clone()), (json!(1), both_ports, json!(["x"])));
    assert_eq!(managed(&obj).len(), 1, "bob lost his only field: {obj}");

    // Status through /status is the status applier's; the version applied must be the endpoint's.
    let status = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "status": {"ready": true}});
    let r = apply(&mut w, &format!("{w1}/status"), "fieldManager=ctrl", status);
    assert_eq!(r.head.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let entry = r.json()["metadata"]["managedFields"].as_array().unwrap().iter().find(|e| e["manager"] == "ctrl").cloned().unwrap();
    assert_eq!((entry["subresource"].clone(), entry["fieldsV1"].clone()), (json!("status"), json!({"f:status": {"f:ready": {}}})));
    assert_eq!(r.json()["status"]["ready"], json!(true));
    let r = apply(&mut w, &w1, "fieldManager=alice", json!({"apiVersion": "example.com/v1beta1", "kind": "Widget", "metadata": {"name": "w1"}}));
    assert_eq!(
        (r.head.status, r.json()["message"].clone()),
        (400, json!("Incorrect version specified in apply patch. Specified patch version: example.com/v1beta1, expected: example.com/v1"))
    );

    // A create owns every object it adds (a custom resource's empty object has none of them).
    let r = w.call("POST", WIDGETS, "fieldManager=maker", Some(&widget("w2", 3)), "application/json");
    assert_eq!(managed(&r.json()), vec![("maker".into(), "Update".into(), json!({"f:spec": {".": {}, "f:size": {}}}))]);
}

#[test]
fn selectable_fields_select_as_field_labels() {
    let mut w = world();
    let mut def = crd("Widget", "widgets");
    def["spec"]["versions"][0]["schema"]["openAPIV3Schema"] =
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"color": {"type": "string"}, "size": {"type": "integer"}}}}});
    def["spec"]["versions"][0]["selectableFields"] = json!([{"jsonPath": ".spec.color"}, {"jsonPath": ".spec.size"}]);
    let r = call(&mut w, "POST", CRDS, Some(def));
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    for (name, color, size) in [("a", Some("red"), 1), ("b", Some("blue"), 2), ("c", None, 2)] {
        let mut obj = widget(name, size);
        if let Some(c) = color {
            obj["spec"]["color"] = json!(c);
        }
        assert_eq!(call(&mut w, "POST", WIDGETS, Some(obj)).head.status, 201);
    }
    let names = |w: &mut World, path: &str, selector: &str| -> Vec<String> {
        let r = w.call("GET", path, &format!("fieldSelector={selector}"), None, "");
        assert_eq!(r.head.status, 200, "{selector}: {}", String::from_utf8_lossy(&r.body));
        r.json()["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(names(&mut w, WIDGETS, "spec.color%3Dred"), ["a"]);
    assert_eq!(names(&mut w, "/apis/example.com/v1/widgets", "spec.size%3D2,spec.color!%3Dblue"), ["c"], "numbers as Go prints them");
    assert_eq!(names(&mut w, WIDGETS, "spec.color%3D"), ["c"], "a field the object lacks is empty");
    // The fields are the version's: v1beta1 declares none.
    let r = w.call("GET", "/apis/example.com/v1beta1/namespaces/default/widgets", "fieldSelector=spec.color%3Dred", None, "");
    assert_eq!((r.head.status, r.json()["message"].clone()), (400, json!("field label not supported: spec.color")));
    // The OpenAPI documents name them on the kind, as kube's do.
    let want = json!([{"fieldPath": "spec.color"}, {"fieldPath": "spec.size"}]);
    let v3 = call(&mut w, "GET", "/openapi/v3/apis/example.com/v1", None).json();
    assert_eq!(v3["components"]["schemas"]["com.example.v1.Widget"]["x-kubernetes-selectable-fields"], want);
    let v2 = call(&mut w, "GET", "/openapi/v2", None).json();
    assert_eq!(v2["definitions"]["com.example.v1.Widget"]["x-kubernetes-selectable-fields"], want);
}

#[test]
fn a_crd_whose_scale_columns_or_selectable_fields_kube_refuses_is_invalid() {
    let mut w = world();
    let mut def = crd("Gadget", "gadgets");
    let versions = def["spec"]["versions"].as_array_mut().unwrap();
    versions.truncate(1);
    versions[0]["schema"]["openAPIV3Schema"] = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}}}}});
    versions[0]["subresources"]["scale"] = json!({"specReplicasPath": ".status.size", "statusReplicasPath": ".status.size"});
    versions[0]["additionalPrinterColumns"] = json!([{"name": "Size", "type": "bogus", "jsonPath": "spec.size"}]);
    versions[0]["selectableFields"] = json!([{"jsonPath": ".spec.nope"}, {"jsonPath": ".spec.tags"}, {"jsonPath": ".spec.size"}, {"jsonPath": ".spec.size"}]);
    let r = call(&mut w, "POST", CRDS, Some(def.clone()));
    assert_eq!(r.head.status, 422, "{}", String::from_utf8_lossy(&r.body));
    // One version: its parts are the spec's, and reported there, as kube's conversion moves them.
    assert_eq!(
        r.json()["message"],
        "CustomResourceDefinition.apiextensions.k8s.io \"gadgets.example.com\" is invalid: [\
         spec.subresources.scale.specReplicasPath: Invalid value: \".status.size\": should be a json path under .spec, \
         spec.additionalPrinterColumns[0].type: Invalid value: \"bogus\": must be one of boolean,date,integer,number,string, \
         spec.additionalPrinterColumns[0].JSONPath: Invalid value: \"spec.size\": must be a simple json path starting with ., \
         spec.selectableFields[0].jsonPath: Invalid value: \".spec.nope\": is an invalid path: does not refer to a valid field, \
         spec.selectableFields[1].jsonPath: Invalid value: \".spec.tags\": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed., \
         spec.selectableFields[3].jsonPath: Duplicate value: \".spec.size\"]"
    );
    assert_eq!(call(&mut w, "GET", &format!("{CRDS}/gadgets.example.com"), None).head.status, 404, "nothing was stored");
}

#[test]
fn set_and_map_lists_refuse_duplicates() {
    let mut w = world();
    let mut def = crd("Widget", "widgets");
    def["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}}}}}});
    assert_eq!(call(&mut w, "POST", CRDS, Some(def)).head.status, 201);
    let body = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"},
        "spec": {"tags": ["a", "a"], "ports": [{"name": "http", "port": 80}, {"name": "http", "port": 81}]}});
    let r = call(&mut w, "POST", WIDGETS, Some(body));
    assert_eq!(r.head.status, 422, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        r.json()["message"],
        "Widget.example.com \"w1\" is invalid: [spec.ports[1]: Duplicate value: map[string]interface {}{\"name\":\"http\"}, spec.tags[1]: Duplicate value: \"a\"]"
    );
}

#[test]
fn a_crd_whose_schema_is_not_structural_is_refused_as_kube_refuses_it() {
    let mut w = world();
    let mut def = crd("Widget", "widgets");
    def["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"a": {}, "tags": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}}}}});
    let r = call(&mut w, "POST", CRDS, Some(def));
    assert_eq!(r.head.status, 422, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        r.json()["message"],
        "CustomResourceDefinition.apiextensions.k8s.io \"widgets.example.com\" is invalid: [\
         spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[a].type: Required value: must not be empty for specified object fields, \
         spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[tags].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic]"
    );
    assert_eq!(call(&mut w, "GET", &format!("{CRDS}/widgets.example.com"), None).head.status, 404);
    // The versions' schemas differ, so kube reports at the version's path; alike, at the spec's.
    let mut def = crd("Widget", "widgets");
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"a": {}}}}});
    def["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = schema.clone();
    def["spec"]["versions"][1]["schema"]["openAPIV3Schema"] = schema;
    let r = call(&mut w, "POST", CRDS, Some(def));
    assert_eq!(
        r.json()["message"],
        "CustomResourceDefinition.apiextensions.k8s.io \"widgets.example.com\" is invalid: \
         spec.validation.openAPIV3Schema.properties[spec].properties[a].type: Required value: must not be empty for specified object fields"
    );
    // A v1 CRD has a schema for every version.
    let mut def = crd("Widget", "widgets");
    def["spec"]["versions"][1].as_object_mut().unwrap().remove("schema");
    let r = call(&mut w, "POST", CRDS, Some(def));
    assert_eq!(
        r.json()["message"],
        "CustomResourceDefinition.apiextensions.k8s.io \"widgets.example.com\" is invalid: spec.versions[1].schema.openAPIV3Schema: Required value: schemas are required"
    );
}

#[test]
fn every_served_version_of_a_crd_has_a_local_api_service() {
    let mut w = world();
    const API_SERVICES: &str = "/apis/apiregistration.k8s.io/v1/apiservices";
    assert_eq!(call(&mut w, "POST", CRDS, Some(crd("Widget", "widgets"))).head.status, 201);
    for version in ["v1", "v1beta1"] {
        let a = call(&mut w, "GET", &format!("{API_SERVICES}/{version}.example.com"), None).json();
        assert_eq!(a["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"], "true", "{a}");
        assert_eq!(a["spec"], json!({"group": "example.com", "version": version, "groupPriorityMinimum": 1000, "versionPriority": 100}));
        assert_eq!(a["status"]["conditions"][0]["reason"], "Local");
    }
    // A user's change is put back.
    let mut a = call(&mut w, "GET", &format!("{API_SERVICES}/v1.example.com"), None).json();
    a["spec"]["versionPriority"] = json!(7);
    assert_eq!(call(&mut w, "PUT", &format!("{API_SERVICES}/v1.example.com"), Some(a)).head.status, 200);
    assert_eq!(call(&mut w, "GET", &format!("{API_SERVICES}/v1.example.com"), None).json()["spec"]["versionPriority"], 100);
    // A version no longer served loses its APIService; the CRD's deletion takes the rest.
    let mut c = call(&mut w, "GET", &format!("{CRDS}/widgets.example.com"), None).json();
    c["spec"]["versions"][1]["served"] = json!(false);
    assert_eq!(call(&mut w, "PUT", &format!("{CRDS}/widgets.example.com"), Some(c)).head.status, 200);
    assert_eq!(call(&mut w, "GET", &format!("{API_SERVICES}/v1beta1.example.com"), None).head.status, 404);
    assert_eq!(call(&mut w, "DELETE", &format!("{CRDS}/widgets.example.com"), None).head.status, 200);
    w.advance(SignedDuration::from_secs(10));
    assert_eq!(call(&mut w, "GET", &format!("{API_SERVICES}/v1.example.com"), None).head.status, 404);
    // The built-in groups' APIServices are not this controller's.
    assert_eq!(call(&mut w, "GET", &format!("{API_SERVICES}/v1.apps"), None).head.status, 200);
}

#[test]
fn cel_validation_rules_refuse_what_they_do_not_allow() {
    let mut w = world();
    let mut def = crd("Widget", "widgets");
    def["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"size": {"type": "integer"}, "max": {"type": "integer"}},
            "x-kubernetes-validations": [
                {"rule": "self.size <= self.max", "messageExpression": "'size ' + string(self.size) + ' is over ' + string(self.max)"},
                {"rule": "self.size >= oldSelf.size", "message": "size may not shrink", "reason": "FieldValueForbidden"}]}}});
    let r = call(&mut w, "POST", CRDS, Some(def));
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let item = |size: i64| json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": size, "max": 5}});
    let r = call(&mut w, "POST", WIDGETS, Some(item(7)));
    assert_eq!(r.head.status, 422, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["message"], "Widget.example.com \"w1\" is invalid: spec: Invalid value: \"object\": size 7 is over 5");
    assert_eq!(
        r.json()["details"]["causes"][0],
        json!({"reason": "FieldValueInvalid", "message": "Invalid value: \"object\": size 7 is over 5", "field": "spec"})
    );
    assert_eq!(call(&mut w, "POST", WIDGETS, Some(item(3))).head.status, 201, "the transition rule does not run on a create");
    let r = call(&mut w, "PATCH", &format!("{WIDGETS}/w1"), Some(json!({"spec": {"size": 2}})));
    assert_eq!(r.json()["message"], "Widget.example.com \"w1\" is invalid: spec: Forbidden: size may not shrink");
    assert_eq!(call(&mut w, "PATCH", &format!("{WIDGETS}/w1"), Some(json!({"spec": {"size": 4}}))).head.status, 200);

    let mut bad = crd("Gadget", "gadgets");
    bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"names": {"type": "array", "items": {"type": "string"}}},
            "x-kubernetes-validations": [{"rule": "self.names.all(a, self.names.exists(b, a.contains(b)))"}]}}});
    let r = call(&mut w, "POST", CRDS, Some(bad));
    assert_eq!(r.head.status, 422, "{}", String::from_utf8_lossy(&r.body));
    let message = r.json()["message"].as_str().unwrap_or_default().to_string();
    assert!(
        message.contains("spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"),
        "{message}"
    );
}

#[test]
fn objects_are_read_through_the_schema_of_now() {
    let mut w = world();
    let mut def = crd("Widget", "widgets");
    def["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"size": {"type": "integer"}, "old": {"type": "string"}}}}});
    assert_eq!(call(&mut w, "POST", CRDS, Some(def.clone())).head.status, 201);
    let item = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 1, "old": "x"}});
    assert_eq!(call(&mut w, "POST", WIDGETS, Some(item)).head.status, 201);
    // A default added and a property taken out: the stored object shows both when read.
    let mut crd = call(&mut w, "GET", &format!("{CRDS}/widgets.example.com"), None).json();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"] =
        json!({"size": {"type": "integer"}, "color": {"type": "string", "default": "blue"}});
    assert_eq!(call(&mut w, "PUT", &format!("{CRDS}/widgets.example.com"), Some(crd)).head.status, 200);
    w.advance(SignedDuration::from_secs(1));
    let read = call(&mut w, "GET", &format!("{WIDGETS}/w1"), None).json();
    assert_eq!(read["spec"], json!({"size": 1, "color": "blue"}));
    let listed = call(&mut w, "GET", WIDGETS, None).json();
    assert_eq!(listed["items"][0]["spec"], json!({"size": 1, "color": "blue"}));
}
