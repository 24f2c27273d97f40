//! Subresource creates through admission with stand-in webhooks: each is admitted as a
//! create of its own kind (a Binding, an Eviction) before it is carried out.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use webhook_world::*;

mod webhook_world;

#[test]
fn a_pods_binding_is_admitted_as_its_create() {
    // kube admits a Binding as a create of pods/binding: a mutating webhook may change its
    // target, a validating one refuse it; one of the `bindings` resource as a create of it.
    let retarget: Answer = Box::new(|r: &Value| match r["object"]["target"]["name"].as_str() {
        Some("n0") => patch(r, json!([{"op": "replace", "path": "/target/name", "value": "n1"}])),
        _ => allow(r),
    });
    let refuse: Answer = Box::new(|r: &Value| match r["object"]["target"]["name"].as_str() {
        Some("tainted") => review(json!({"uid": r["uid"], "allowed": false, "status": {"code": 403, "message": "no pods on tainted"}})),
        _ => allow(r),
    });
    let (mut w, seen) = world(BTreeMap::from([("/retarget", retarget), ("/refuse", refuse)]));
    let on = |name: &str, path: &str, resource: &str| {
        hook(name, path, json!({"rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": [resource]}]}))
    };
    configure(&mut w, MUTATING, "m", vec![on("retarget.example.com", "/retarget", "pods/binding")]);
    configure(&mut w, VALIDATING, "v", vec![on("refuse.example.com", "/refuse", "pods/binding")]);
    let pods = "/api/v1/namespaces/default/pods";
    let pod = |name: &str| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let binding = |name: &str, node: &str| json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"kind": "Node", "name": node}});
    let account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
    assert_eq!(create(&mut w, "/api/v1/namespaces/default/serviceaccounts", "", &account).head.status, 201);
    for name in ["a", "b", "c", "d"] {
        assert_eq!(create(&mut w, pods, "", &pod(name)).head.status, 201);
    }
    let r = create(&mut w, &format!("{pods}/a/binding"), "", &binding("a", "n0"));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    assert_eq!(w.call("GET", &format!("{pods}/a"), "", None, "").json()["spec"]["nodeName"], "n1");
    let (_, asked) = seen.borrow().iter().find(|(p, _)| p.starts_with("/refuse")).cloned().unwrap();
    let request = &asked["request"];
    assert_eq!((&request["kind"]["kind"], &request["resource"]["resource"], &request["subResource"]), (&json!("Binding"), &json!("pods"), &json!("binding")));
    assert_eq!((&request["operation"], &request["name"], &request["object"]["target"]["name"]), (&json!("CREATE"), &json!("a"), &json!("n1")));
    let r = create(&mut w, &format!("{pods}/b/binding"), "", &binding("b", "tainted"));
    assert_eq!(r.head.status, 403, "{}", text(&r));
    assert_eq!(r.json()["message"], "admission webhook \"refuse.example.com\" denied the request: no pods on tainted");
    assert!(w.call("GET", &format!("{pods}/b"), "", None, "").json()["spec"]["nodeName"].is_null());
    // The `bindings` resource is not the subresource the rules name: its own rules match it.
    let sent = seen.borrow().len();
    let bindings = "/api/v1/namespaces/default/bindings";
    let r = create(&mut w, bindings, "", &binding("c", "tainted"));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    assert_eq!(seen.borrow().len(), sent);
    configure(&mut w, MUTATING, "m2", vec![on("retarget.example.com", "/retarget", "bindings")]);
    configure(&mut w, VALIDATING, "v2", vec![on("refuse.example.com", "/refuse", "bindings")]);
    let r = create(&mut w, bindings, "", &binding("d", "tainted"));
    assert_eq!(r.head.status, 403, "{}", text(&r));
    assert_eq!(r.json()["message"], "admission webhook \"refuse.example.com\" denied the request: no pods on tainted");
    let r = create(&mut w, bindings, "", &binding("d", "n0"));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    assert_eq!(w.call("GET", &format!("{pods}/d"), "", None, "").json()["spec"]["nodeName"], "n1");
    let (_, asked) = seen.borrow().last().cloned().unwrap();
    let request = &asked["request"];
    assert_eq!((&request["kind"]["kind"], &request["resource"]["resource"], &request["subResource"]), (&json!("Binding"), &json!("bindings"), &Value::Null));
    assert_eq!((&request["name"], &request["namespace"]), (&json!("d"), &json!("default")));
}

#[test]
fn an_eviction_is_admitted_as_its_create_before_it_evicts() {
    // kube admits an Eviction as a create of pods/eviction before it looks at the pod: a
    // webhook refusing it keeps the pod; its warnings reach the client either way.
    let guard: Answer = Box::new(|r: &Value| match r["name"].as_str() {
        Some("keep") => review(json!({"uid": r["uid"], "allowed": false, "status": {"code": 403, "message": "keep is kept"}})),
        _ => review(
            json!({"uid": r["uid"], "allowed": true, "warnings": [format!("evicting {}", r["object"]["metadata"]["name"].as_str().unwrap_or_default())]}),
        ),
    });
    let (mut w, seen) = world(BTreeMap::from([("/guard", guard)]));
    let rules = json!({"rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/eviction"]}]});
    configure(&mut w, VALIDATING, "v", vec![hook("guard.example.com", "/guard", rules)]);
    let account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
    assert_eq!(create(&mut w, "/api/v1/namespaces/default/serviceaccounts", "", &account).head.status, 201);
    let pods = "/api/v1/namespaces/default/pods";
    for name in ["keep", "go"] {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
        assert_eq!(create(&mut w, pods, "", &pod).head.status, 201);
    }
    let eviction = |name: &str| json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}});
    let r = create(&mut w, &format!("{pods}/keep/eviction"), "", &eviction("keep"));
    assert_eq!(r.head.status, 403, "{}", text(&r));
    assert_eq!(r.json()["message"], "admission webhook \"guard.example.com\" denied the request: keep is kept");
    assert_eq!(w.call("GET", &format!("{pods}/keep"), "", None, "").head.status, 200);
    let (_, asked) = seen.borrow().last().cloned().unwrap();
    let request = &asked["request"];
    assert_eq!(
        (&request["kind"], &request["subResource"], &request["operation"]),
        (&json!({"group": "policy", "version": "v1", "kind": "Eviction"}), &json!("eviction"), &json!("CREATE"))
    );
    let r = create(&mut w, &format!("{pods}/go/eviction"), "", &eviction("go"));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    assert_eq!(warnings(&r), ["299 - \"evicting go\""]);
    assert_eq!(w.call("GET", &format!("{pods}/go"), "", None, "").head.status, 404);
}
