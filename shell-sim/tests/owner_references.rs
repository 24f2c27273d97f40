//! OwnerReferencesPermissionEnforcement through the request pipeline with RBAC: who changes
//! an object's owner references must be allowed to delete it (updates only), and who makes a
//! reference block its owner's deletion must be allowed to update the owner's `finalizers`;
//! kube's 403s otherwise.

use std::sync::Arc;

use kapi_core::admission::Chain;
use kapi_sim::{Response, World, epoch, rbac_server};
use serde_json::{Value, json};

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const ALICE: &str = "alice-token";

fn world() -> World {
    let mut setup = rbac_server();
    let chain =
        Chain::from_flags(&["OwnerReferencesPermissionEnforcement".into()], &[], &Default::default(), &kapi_core::admission::no_files).expect("kube's plugins");
    Arc::get_mut(&mut setup.server).expect("not shared yet").admission = Arc::new(chain);
    let mut w = World::new(setup, epoch(), 3);
    // alice may work on configmaps, but not delete them.
    grant(&mut w, "configmaps", json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create", "update", "patch"]}]));
    w
}

/// A role of `rules` in `default`, bound to alice.
fn grant(w: &mut World, name: &str, rules: Value) {
    let role = json!({"metadata": {"name": name}, "rules": rules});
    let r = w.call("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", "", Some(&role), "application/json");
    assert_eq!(r.head.status, 201, "{}", text(&r));
    let binding = json!({"metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]});
    let r = w.call("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", "", Some(&binding), "application/json");
    assert_eq!(r.head.status, 201, "{}", text(&r));
}

fn text(r: &Response) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

fn owned(name: &str, owner: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "ownerReferences": [owner]}})
}

fn owner(api_version: &str, kind: &str, block: bool) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "name": "web", "uid": "5a1e0b7c-0000-4000-8000-000000000001", "blockOwnerDeletion": block})
}

#[test]
fn changing_owner_references_takes_delete_permission_on_updates_only() {
    let mut w = world();
    let r = w.call_with_token(ALICE, "POST", CONFIGMAPS, Some(owned("c", owner("apps/v1", "Deployment", false))));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    let mut changed = r.json();
    changed["metadata"]["ownerReferences"][0]["name"] = json!("api");
    let r = w.call_with_token(ALICE, "PUT", &format!("{CONFIGMAPS}/c"), Some(changed.clone()));
    assert_eq!(r.head.status, 403, "{}", text(&r));
    assert_eq!(r.json()["message"], "configmaps \"c\" is forbidden: cannot set an ownerRef on a resource you can't delete: , <nil>");
    // Changing the rest is not asked about.
    let mut labelled = w.call_with_token(ALICE, "GET", &format!("{CONFIGMAPS}/c"), None).json();
    labelled["metadata"]["labels"] = json!({"a": "b"});
    assert_eq!(w.call_with_token(ALICE, "PUT", &format!("{CONFIGMAPS}/c"), Some(labelled)).head.status, 200);
    grant(&mut w, "deleter", json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["delete"]}]));
    changed["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    assert_eq!(w.call_with_token(ALICE, "PUT", &format!("{CONFIGMAPS}/c"), Some(changed)).head.status, 200);
}

#[test]
fn blocking_an_owners_deletion_takes_update_permission_on_its_finalizers() {
    let mut w = world();
    let r = w.call_with_token(ALICE, "POST", CONFIGMAPS, Some(owned("c", owner("apps/v1", "Deployment", true))));
    assert_eq!(r.head.status, 403, "{}", text(&r));
    assert_eq!(
        r.json()["message"],
        "configmaps \"c\" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: , <nil>"
    );
    let r = w.call_with_token(ALICE, "POST", CONFIGMAPS, Some(owned("c", owner("example.com/v1", "Widget", true))));
    assert_eq!(r.head.status, 403, "{}", text(&r));
    assert_eq!(
        r.json()["message"],
        "configmaps \"c\" is forbidden: cannot set blockOwnerDeletion in this case because cannot find RESTMapping for APIVersion example.com/v1 Kind Widget: no matches for kind \"Widget\" in version \"example.com/v1\""
    );
    grant(&mut w, "finalizers", json!([{"apiGroups": ["apps"], "resources": ["deployments/finalizers"], "verbs": ["update"], "resourceNames": ["web"]}]));
    let r = w.call_with_token(ALICE, "POST", CONFIGMAPS, Some(owned("c", owner("apps/v1", "Deployment", true))));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    // A reference that blocked already is not asked about again.
    let mut kept = r.json();
    kept["data"] = json!({"k": "v"});
    assert_eq!(w.call_with_token(ALICE, "PUT", &format!("{CONFIGMAPS}/c"), Some(kept)).head.status, 200);
    // An administrator may do both.
    let r = w.call("POST", CONFIGMAPS, "", Some(&owned("d", owner("example.com/v1", "Widget", true))), "application/json");
    assert_eq!(r.head.status, 201, "{}", text(&r));
}
