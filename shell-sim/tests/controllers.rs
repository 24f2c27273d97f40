//! The built-in controllers in the simulator's world: namespaces get their default service
//! account and root CA configmap, and a deleted namespace is emptied and goes away.

use jiff::SignedDuration;
use kapi_core::controllers::Enabled;
use kapi_sim::{Response, SIM_CA, World, default_server, epoch};
use serde_json::{Value, json};

fn world(enabled: Enabled) -> World {
    let mut w = World::new(default_server(), epoch(), 11);
    w.start_controllers(enabled);
    w
}

fn get(w: &mut World, path: &str) -> Response {
    w.call("GET", path, "", None, "")
}

fn post(w: &mut World, path: &str, body: Value) -> Response {
    let r = w.call("POST", path, "", Some(&body), "application/json");
    assert_eq!(r.head.status, 201, "POST {path}: {}", String::from_utf8_lossy(&r.body));
    r
}

fn pod(name: &str, node: Option<&str>) -> Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    if let Some(node) = node {
        p["spec"]["nodeName"] = json!(node);
    }
    p
}

#[test]
fn every_namespace_gets_a_default_service_account_and_the_root_ca() {
    let mut w = world(Enabled::ALL);
    for ns in ["default", "kube-system"] {
        assert_eq!(get(&mut w, &format!("/api/v1/namespaces/{ns}/serviceaccounts/default")).head.status, 200, "{ns}");
    }
    post(&mut w, "/api/v1/namespaces", json!({"metadata": {"name": "team"}}));
    assert_eq!(get(&mut w, "/api/v1/namespaces/team/serviceaccounts/default").head.status, 200);
    let ca = get(&mut w, "/api/v1/namespaces/team/configmaps/kube-root-ca.crt").json();
    assert_eq!(ca["data"]["ca.crt"], SIM_CA);
    assert_eq!(ca["metadata"]["managedFields"][0]["manager"], "kube-controller-manager");

    // A pod without a service account now gets `default`, which admission requires to exist.
    let p = post(&mut w, "/api/v1/namespaces/team/pods", pod("p", None));
    assert_eq!(p.json()["spec"]["serviceAccountName"], "default");
}

#[test]
fn a_deleted_service_account_or_root_ca_comes_back() {
    let mut w = world(Enabled::ALL);
    post(&mut w, "/api/v1/namespaces", json!({"metadata": {"name": "team"}}));
    assert_eq!(w.call("DELETE", "/api/v1/namespaces/team/serviceaccounts/default", "", None, "").head.status, 200);
    assert_eq!(get(&mut w, "/api/v1/namespaces/team/serviceaccounts/default").head.status, 200);

    let path = "/api/v1/namespaces/team/configmaps/kube-root-ca.crt";
    let r = w.call("PATCH", path, "", Some(&json!({"data": {"ca.crt": "forged"}})), "application/merge-patch+json");
    assert_eq!(r.head.status, 200);
    assert_eq!(get(&mut w, path).json()["data"]["ca.crt"], SIM_CA, "the published bundle is put back");
    assert_eq!(w.call("DELETE", path, "", None, "").head.status, 200);
    assert_eq!(get(&mut w, path).json()["data"]["ca.crt"], SIM_CA);
}

#[test]
fn controllers_can_be_turned_off() {
    let mut w = world(Enabled::parse("namespace").unwrap());
    post(&mut w, "/api/v1/namespaces", json!({"metadata": {"name": "bare"}}));
    assert_eq!(get(&mut w, "/api/v1/namespaces/bare/serviceaccounts/default").head.status, 404);
    assert!(Enabled::parse("serviceaccount,nope").is_err());
}

#[test]
fn a_deleted_namespace_is_emptied_then_removed() {
    let mut w = world(Enabled::ALL);
    post(&mut w, "/api/v1/namespaces", json!({"metadata": {"name": "doomed"}}));
    post(&mut w, "/api/v1/namespaces/doomed/configmaps", json!({"metadata": {"name": "c"}, "data": {"k": "v"}}));
    post(
        &mut w,
        "/apis/apps/v1/namespaces/doomed/deployments",
        json!({"metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}),
    );
    post(&mut w, "/api/v1/namespaces/doomed/pods", pod("pending", None));
    post(&mut w, "/api/v1/namespaces/doomed/pods", pod("orphan", Some("no-such-node")));
    post(&mut w, "/api/v1/nodes", json!({"metadata": {"name": "n1"}}));
    post(&mut w, "/api/v1/namespaces/doomed/pods", pod("running", Some("n1")));

    let r = w.call("DELETE", "/api/v1/namespaces/doomed", "", None, "");
    assert_eq!(r.head.status, 200);
    for gone in [
        "/api/v1/namespaces/doomed/configmaps/c",
        "/apis/apps/v1/namespaces/doomed/deployments/d",
        "/api/v1/namespaces/doomed/pods/pending",
        "/api/v1/namespaces/doomed/pods/orphan",
    ] {
        assert_eq!(get(&mut w, gone).head.status, 404, "{gone}");
    }
    // A pod on a live node waits for its kubelet; so does the namespace.
    let running = get(&mut w, "/api/v1/namespaces/doomed/pods/running").json();
    assert!(running["metadata"]["deletionTimestamp"].is_string());
    w.advance(SignedDuration::from_secs(10));
    let ns = get(&mut w, "/api/v1/namespaces/doomed").json();
    assert_eq!(ns["status"]["phase"], "Terminating");
    let remaining = ns["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "NamespaceContentRemaining").unwrap().clone();
    assert_eq!(remaining["status"], "True");
    assert_eq!(remaining["message"], "Some resources are remaining: pods. has 1 resource instances");

    // The kubelet confirms; the next look at the namespace (they back off to 32 s apart)
    // finalizes it.
    let r = w.call("DELETE", "/api/v1/namespaces/doomed/pods/running", "gracePeriodSeconds=0", None, "");
    assert_eq!(r.head.status, 200);
    w.advance(SignedDuration::from_secs(32));
    assert_eq!(get(&mut w, "/api/v1/namespaces/doomed").head.status, 404);

    // The name is free again, and the new namespace gets its own service account.
    post(&mut w, "/api/v1/namespaces", json!({"metadata": {"name": "doomed"}}));
    assert_eq!(get(&mut w, "/api/v1/namespaces/doomed/serviceaccounts/default").head.status, 200);
}
