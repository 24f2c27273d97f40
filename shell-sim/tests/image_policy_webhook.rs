//! ImagePolicyWebhook through the core's request pipeline with a stand-in backend: what it
//! is asked, how its answers and its failures (with kube's retries) decide a pod's create.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

use bytes::Bytes;
use kapi_core::webhook::WebhookAnswer;
use kapi_sim::{Response, World, default_server};
use serde_json::{Value, json};
use webhook_world::*;

mod webhook_world;

/// A world with ImagePolicyWebhook configured by `config` (ServiceAccount off), its backend
/// at `/policy` answered by `backend`, and a webhook at `/allow` that allows everything.
fn image_policy_world(config: &str, backend: Answer) -> (World, Seen) {
    let mut setup = default_server();
    let kubeconfig = "clusters: [{name: c, cluster: {server: 'https://images.example/policy', insecure-skip-tls-verify: true}}]\n\
        contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n";
    let read = move |path: &str| if path == "/etc/images.kubeconfig" { Ok(kubeconfig.as_bytes().to_vec()) } else { Err(format!("open {path}: not there")) };
    let configs = BTreeMap::from([("ImagePolicyWebhook".to_string(), config.as_bytes().to_vec())]);
    let chain =
        kapi_core::admission::Chain::from_flags(&["ImagePolicyWebhook".into()], &["ServiceAccount".into()], &configs, &read).expect("a valid configuration");
    std::sync::Arc::get_mut(&mut setup.server).expect("not shared yet").admission = std::sync::Arc::new(chain);
    let mut answers: BTreeMap<&str, Answer> = BTreeMap::new();
    answers.insert("/policy", backend);
    answers.insert("/allow", Box::new(allow));
    world_on(setup, answers)
}

fn image_review(status: Value) -> Result<WebhookAnswer, String> {
    let body = json!({"apiVersion": "imagepolicy.k8s.io/v1alpha1", "kind": "ImageReview", "status": status});
    Ok(WebhookAnswer { status: 200, body: Bytes::from(body.to_string()), content_type: "application/json".into() })
}

fn pod(name: &str, image: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": image}]}})
}

#[test]
fn an_image_policy_backend_is_asked_as_a_webhook_is_and_a_pod_it_fails_goes_through_annotated() {
    let up = Rc::new(Cell::new(true));
    let backend = up.clone();
    let config = "imagePolicy: {kubeConfigFile: /etc/images.kubeconfig, allowTTL: -1, denyTTL: -1, defaultAllow: true}";
    let (mut w, seen) = image_policy_world(
        config,
        Box::new(move |review: &Value| {
            if !backend.get() {
                return Err("Post \"https://images.example:443/policy\": dial tcp 10.0.0.9:443: connect: connection refused".into());
            }
            let evil = review["spec"]["containers"].as_array().unwrap().iter().any(|c| c["image"] == "evil");
            image_review(if evil { json!({"allowed": false, "reason": "no evil"}) } else { json!({"allowed": true}) })
        }),
    );
    // A validating webhook on pods too: a write waits for the backend, then for the webhook.
    let rules = json!({"rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]});
    configure(&mut w, VALIDATING, "allow", vec![hook("allow.example.com", "/allow", rules)]);
    let pods = "/api/v1/namespaces/default/pods";
    let failed_open = |r: &Response| r.json()["metadata"]["annotations"]["alpha.image-policy.k8s.io/failed-open"].clone();

    let r = create(&mut w, pods, "", &pod("web", "nginx"));
    assert_eq!((r.head.status, failed_open(&r)), (201, Value::Null), "{}", text(&r));
    let asked: Vec<String> = seen.borrow().iter().map(|(path, _)| path.split('?').next().unwrap().to_string()).collect();
    assert_eq!(asked, ["/policy", "/allow"]);
    assert_eq!(seen.borrow()[0].1["spec"], json!({"containers": [{"image": "nginx"}], "namespace": "default"}));
    let r = create(&mut w, pods, "", &pod("bad", "evil"));
    assert_eq!(r.head.status, 403, "{}", text(&r));
    assert_eq!(r.json()["message"], "pods \"bad\" is forbidden: image policy webhook backend denied one or more images: no evil");

    // The backend down, `defaultAllow` lets pods through annotated: the annotation stays
    // through the validating webhook's pause, on a create and on an update.
    up.set(false);
    let r = create(&mut w, pods, "", &pod("open", "redis"));
    assert_eq!((r.head.status, failed_open(&r)), (201, json!("true")), "{}", text(&r));
    let mut web = w.call("GET", &format!("{pods}/web"), "", None, "").json();
    web["spec"]["containers"][0]["image"] = json!("nginx:2");
    let r = w.call("PUT", &format!("{pods}/web"), "", Some(&web), "application/json");
    assert_eq!((r.head.status, failed_open(&r)), (200, json!("true")), "{}", text(&r));
    let stored = w.call("GET", &format!("{pods}/web"), "", None, "").json();
    assert_eq!(stored["metadata"]["annotations"]["alpha.image-policy.k8s.io/failed-open"], "true");
}

#[test]
fn an_image_policy_backend_failing_for_a_while_is_tried_again_as_kube_tries_it() {
    // kube's generic webhook client: five tries, from `retryBackoff` (1 s here) each wait 1.5
    // times the last plus up to a fifth; a 5xx but 503 is tried again, the last answer counts.
    let failures = Rc::new(Cell::new(2));
    let left = failures.clone();
    let config = "imagePolicy: {kubeConfigFile: /etc/images.kubeconfig, allowTTL: -1, denyTTL: -1, retryBackoff: 1000}";
    let (mut w, seen) = image_policy_world(
        config,
        Box::new(move |_: &Value| match left.get() {
            0 => image_review(json!({"allowed": true})),
            n => {
                left.set(n - 1);
                let status = if n > 100 { 503 } else { 500 };
                Ok(WebhookAnswer { status, body: Bytes::from_static(b"boom"), content_type: "text/plain".into() })
            }
        }),
    );
    let pods = "/api/v1/namespaces/default/pods";
    let (start, tries) = (w.now(), || seen.borrow().iter().filter(|(path, _)| path.starts_with("/policy")).count());
    let r = create(&mut w, pods, "", &pod("web", "nginx"));
    assert_eq!((r.head.status, tries()), (201, 3), "{}", text(&r));
    let waited = w.now().duration_since(start).as_secs_f64();
    assert!((2.5..=3.0).contains(&waited), "waited {waited} s");

    failures.set(5);
    let start = w.now();
    let r = create(&mut w, pods, "", &pod("late", "nginx"));
    assert_eq!((r.head.status, tries()), (403, 8), "{}", text(&r));
    assert_eq!(r.json()["message"], "pods \"late\" is forbidden: an error on the server (\"boom\") has prevented the request from succeeding");
    let waited = w.now().duration_since(start).as_secs_f64();
    assert!((8.125..=9.75).contains(&waited), "waited {waited} s");
    // A 503 (without Retry-After) is not tried again.
    failures.set(101);
    let r = create(&mut w, pods, "", &pod("down", "nginx"));
    assert_eq!((r.head.status, tries()), (403, 9), "{}", text(&r));
}
