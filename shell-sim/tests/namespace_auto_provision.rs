//! NamespaceAutoProvision through the core's request pipeline: a create in a namespace that
//! does not exist has the server create the namespace first, as a request of its own that
//! goes through the namespace's own admission (here a stand-in validating webhook), then
//! goes on; what that request is refused with refuses the create, in kube's words.

use std::collections::BTreeMap;

use bytes::Bytes;
use kapi_sim::{Response, World, default_server};
use serde_json::{Value, json};
use webhook_world::{Answer, Seen, VALIDATING, configure, hook, review, world_on};

mod webhook_world;

/// A world with NamespaceAutoProvision on (and kube's default plugins), whose validating
/// webhook on namespace creates refuses those named `deny-*` (with a 403 for `deny-403-*`, a
/// 403 without a reason for `deny-code-*`, without a code otherwise).
fn world() -> (World, Seen) {
    let mut setup = default_server();
    let chain = kapi_core::admission::Chain::from_flags(&["NamespaceAutoProvision".into()], &[], &BTreeMap::new(), &kapi_core::admission::no_files)
        .expect("a valid chain");
    std::sync::Arc::get_mut(&mut setup.server).expect("not shared yet").admission = std::sync::Arc::new(chain);
    let guard: Answer = Box::new(|request: &Value| {
        let response = match request["name"].as_str().unwrap_or_default() {
            n if n.starts_with("deny-403-") => json!({"uid": request["uid"], "allowed": false,
                "status": {"code": 403, "reason": "Forbidden", "message": "no new namespaces"}}),
            n if n.starts_with("deny-code-") => json!({"uid": request["uid"], "allowed": false, "status": {"code": 403, "message": "no new namespaces"}}),
            n if n.starts_with("deny-") => json!({"uid": request["uid"], "allowed": false, "status": {"message": "no new namespaces"}}),
            _ => json!({"uid": request["uid"], "allowed": true}),
        };
        review(response)
    });
    let (mut w, seen) = world_on(setup, BTreeMap::from([("/namespaces", guard)]));
    let rules = json!({"rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["namespaces"]}]});
    configure(&mut w, VALIDATING, "namespaces", vec![hook("namespaces.example.com", "/namespaces", rules)]);
    (w, seen)
}

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

fn text(r: &Response) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

fn namespace(w: &mut World, name: &str) -> Response {
    w.call("GET", &format!("/api/v1/namespaces/{name}"), "", None, "")
}

#[test]
fn a_create_in_a_missing_namespace_creates_it_through_its_own_admission() {
    let (mut w, seen) = world();
    let r = w.call("POST", "/api/v1/namespaces/team/configmaps", "", Some(&configmap("c")), "application/json");
    assert_eq!(r.head.status, 201, "{}", text(&r));
    let ns = namespace(&mut w, "team");
    assert_eq!(ns.head.status, 200, "{}", text(&ns));
    assert_eq!(ns.json()["status"]["phase"], "Active");
    assert_eq!(ns.json()["spec"]["finalizers"], json!(["kubernetes"]));
    // The server's own request, as kube's loopback client's.
    let reviews = seen.borrow();
    assert_eq!(reviews.len(), 1);
    let request = &reviews[0].1["request"];
    assert_eq!((request["name"].as_str(), request["userInfo"]["username"].as_str()), (Some("team"), Some("system:apiserver")));
    drop(reviews);
    // A namespace that exists is not created again.
    let r = w.call("POST", "/api/v1/namespaces/team/configmaps", "", Some(&configmap("d")), "application/json");
    assert_eq!(r.head.status, 201, "{}", text(&r));
    assert_eq!(seen.borrow().len(), 1);
}

#[test]
fn an_apply_or_a_put_that_creates_creates_the_namespace_and_a_dry_run_or_a_refused_create_does_not() {
    let (mut w, _) = world();
    let apply = w.request(kapi_core::pipeline::Request {
        method: "PATCH".into(),
        path: "/api/v1/namespaces/applied/configmaps/c".into(),
        query: "fieldManager=test".into(),
        headers: vec![("Authorization".into(), format!("Bearer {}", kapi_sim::ADMIN_TOKEN)), ("Content-Type".into(), "application/apply-patch+yaml".into())],
        body: Bytes::from(serde_json::to_vec(&configmap("c")).unwrap()),
        ..Default::default()
    });
    assert_eq!(apply.head.status, 201, "{}", text(&apply));
    assert_eq!(namespace(&mut w, "applied").head.status, 200);

    // A dry run creates nothing, so NamespaceLifecycle finds no namespace.
    let r = w.call("POST", "/api/v1/namespaces/dry/configmaps", "dryRun=All", Some(&configmap("c")), "application/json");
    assert_eq!((r.head.status, r.json()["message"].as_str()), (404, Some("namespaces \"dry\" not found")), "{}", text(&r));
    assert_eq!(namespace(&mut w, "dry").head.status, 404);
    // A PUT that creates (a LimitRange may be created so) creates the namespace first.
    let limits =
        json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"}, "spec": {"limits": [{"type": "Container", "default": {"cpu": "1"}}]}});
    let r = w.call("PUT", "/api/v1/namespaces/limited/limitranges/l", "", Some(&limits), "application/json");
    assert_eq!(r.head.status, 201, "{}", text(&r));
    assert_eq!(namespace(&mut w, "limited").head.status, 200);
    // A create kube refuses before admission creates no namespace.
    let elsewhere = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "other"}});
    let r = w.call("POST", "/api/v1/namespaces/mismatch/configmaps", "", Some(&elsewhere), "application/json");
    assert_eq!(
        (r.head.status, r.json()["message"].as_str()),
        (400, Some("the namespace of the provided object does not match the namespace sent on the request"))
    );
    assert_eq!(namespace(&mut w, "mismatch").head.status, 404);
    let unknown = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "bogus": 1});
    let r = w.call("POST", "/api/v1/namespaces/strict/configmaps", "fieldValidation=Strict", Some(&unknown), "application/json");
    assert_eq!(r.head.status, 400, "{}", text(&r));
    assert_eq!(namespace(&mut w, "strict").head.status, 404);
    // Nor does a PUT of what cannot be created by one.
    let r = w.call("PUT", "/api/v1/namespaces/put/configmaps/c", "", Some(&configmap("c")), "application/json");
    assert_eq!((r.head.status, r.json()["message"].as_str()), (404, Some("configmaps \"c\" not found")), "{}", text(&r));
    assert_eq!(namespace(&mut w, "put").head.status, 404);
}

#[test]
fn a_namespace_that_cannot_be_created_refuses_the_create_in_kubes_words() {
    let (mut w, _) = world();
    // Another error than a 403 is the object's 403 with that error's message.
    let r = w.call("POST", "/api/v1/namespaces/deny-a/configmaps", "", Some(&configmap("c")), "application/json");
    assert_eq!(r.head.status, 403, "{}", text(&r));
    assert_eq!(r.json()["message"], "configmaps \"c\" is forbidden: admission webhook \"namespaces.example.com\" denied the request: no new namespaces");
    assert_eq!(r.json()["details"], json!({"name": "c", "kind": "configmaps"}));
    // A generated name is named by its prefix.
    let generated = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "web-"}});
    let r = w.call("POST", "/api/v1/namespaces/deny-b/configmaps", "", Some(&generated), "application/json");
    assert_eq!(r.json()["message"], "configmaps \"web-\" is forbidden: admission webhook \"namespaces.example.com\" denied the request: no new namespaces");
    // A 403 is answered as it came, its reason Forbidden or none.
    for ns in ["deny-403-a", "deny-code-a"] {
        let r = w.call("POST", &format!("/api/v1/namespaces/{ns}/configmaps"), "", Some(&configmap("c")), "application/json");
        assert_eq!(r.head.status, 403, "{}", text(&r));
        assert_eq!(r.json()["message"], "admission webhook \"namespaces.example.com\" denied the request: no new namespaces");
    }
    // An invalid name is the namespace's own refusal.
    let r = w.call("POST", "/api/v1/namespaces/Bad_Name/configmaps", "", Some(&configmap("c")), "application/json");
    assert_eq!(r.head.status, 403, "{}", text(&r));
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .starts_with("configmaps \"c\" is forbidden: Namespace \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\""),
        "{}",
        text(&r)
    );
    for name in ["deny-a", "deny-b", "deny-403-a", "deny-code-a"] {
        assert_eq!(namespace(&mut w, name).head.status, 404);
    }
}
