//! A world whose admission webhooks are stand-ins answering by URL path, and the helpers the
//! admission webhook tests share.

#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use base64::Engine;
use bytes::Bytes;
use kapi_core::controllers::Enabled;
use kapi_core::webhook::{WebhookAnswer, WebhookCall};
use kapi_sim::{Response, Setup, World, default_server, epoch};
use serde_json::{Value, json};

pub const VALIDATING: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
pub const MUTATING: &str = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
pub const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// What a stand-in webhook answers a review (its `request`; another kind of review, whole),
/// by the URL path it is called at.
pub type Answer = Box<dyn Fn(&Value) -> Result<WebhookAnswer, String>>;

/// The reviews each webhook was sent, by path.
pub type Seen = Rc<RefCell<Vec<(String, Value)>>>;

pub fn world(answers: BTreeMap<&'static str, Answer>) -> (World, Seen) {
    world_on(default_server(), answers)
}

pub fn world_on(setup: Setup, answers: BTreeMap<&'static str, Answer>) -> (World, Seen) {
    let mut w = World::new(setup, epoch(), 7);
    w.start_controllers(Enabled::NONE);
    let seen: Seen = Rc::default();
    let log = seen.clone();
    w.webhook = Some(Box::new(move |call: &WebhookCall| {
        let review: Value = serde_json::from_slice(&call.body).expect("a review");
        let path = call.path.split('?').next().unwrap_or_default().to_string();
        log.borrow_mut().push((call.path.clone(), review.clone()));
        // An AdmissionReview's request, or a review of another kind whole (an ImageReview).
        match answers.get(path.as_str()) {
            Some(answer) => answer(review.get("request").unwrap_or(&review)),
            None => Err(format!("Post \"{}{}\": dial tcp 127.0.0.1:443: connect: connection refused", call.target.url, call.path)),
        }
    }));
    (w, seen)
}

pub fn review(response: Value) -> Result<WebhookAnswer, String> {
    let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response});
    Ok(WebhookAnswer { status: 200, body: Bytes::from(serde_json::to_vec(&body).unwrap()), content_type: "application/json".into() })
}

pub fn allow(request: &Value) -> Result<WebhookAnswer, String> {
    review(json!({"uid": request["uid"], "allowed": true}))
}

pub fn patch(request: &Value, ops: Value) -> Result<WebhookAnswer, String> {
    let patch = base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&ops).unwrap());
    review(json!({"uid": request["uid"], "allowed": true, "patchType": "JSONPatch", "patch": patch}))
}

pub fn hook(name: &str, path: &str, extra: Value) -> Value {
    let mut h = json!({
        "name": name,
        "clientConfig": {"url": format!("https://hooks.example{path}")},
        "rules": [{"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    });
    for (k, v) in extra.as_object().unwrap() {
        h[k] = v.clone();
    }
    h
}

pub fn configure(w: &mut World, at: &str, name: &str, hooks: Vec<Value>) {
    let kind = if at == MUTATING { "MutatingWebhookConfiguration" } else { "ValidatingWebhookConfiguration" };
    let body = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "webhooks": hooks});
    let r = w.call("POST", at, "", Some(&body), "application/json");
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
}

pub fn configmap(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})
}

pub fn create(w: &mut World, path: &str, query: &str, obj: &Value) -> Response {
    w.call("POST", path, query, Some(obj), "application/json")
}

pub fn text(r: &Response) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

pub fn warnings(r: &Response) -> Vec<String> {
    r.head.headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case("Warning")).map(|(_, v)| v.clone()).collect()
}
