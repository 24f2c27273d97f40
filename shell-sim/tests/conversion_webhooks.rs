//! A CRD whose versions a conversion webhook converts, through the core's request pipeline
//! with a stand-in webhook: objects are stored at the storage version and served at the one
//! asked for, by every read, write, list and watch, and a failing webhook fails the request
//! with kube's 500.

use std::cell::RefCell;
use std::rc::Rc;

use bytes::Bytes;
use kapi_core::controllers::Enabled;
use kapi_core::webhook::{WebhookAnswer, WebhookCall};
use kapi_sim::{Response, World, default_server, epoch};
use serde_json::{Value, json};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const V1: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";
const V2: &str = "/apis/stable.example.com/v2/namespaces/default/crontabs";

fn call(w: &mut World, method: &str, path: &str, body: Option<Value>) -> Response {
    let ct = if method == "PATCH" { "application/merge-patch+json" } else { "application/json" };
    w.call(method, path, "", body.as_ref(), if body.is_some() { ct } else { "" })
}

fn crd(client_config: Value) -> Value {
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}});
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {"group": "stable.example.com", "scope": "Namespaced", "names": {"plural": "crontabs", "kind": "CronTab"},
            "conversion": {"strategy": "Webhook", "webhook": {"clientConfig": client_config, "conversionReviewVersions": ["v1"]}},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema},
                {"name": "v2", "served": true, "storage": false, "schema": schema}]}})
}

/// v1 calls the schedule `cron`, v2 `schedule`.
fn convert(obj: &Value, desired: &str) -> Value {
    let mut out = obj.clone();
    out["apiVersion"] = json!(desired);
    let spec = out["spec"].as_object_mut().expect("a spec");
    let (from, to) = if desired.ends_with("/v2") { ("cron", "schedule") } else { ("schedule", "cron") };
    if let Some(v) = spec.remove(from) {
        spec.insert(to.into(), v);
    }
    out
}

/// The calls the stand-in webhook got: each call's desired version and object count.
type Calls = Rc<RefCell<Vec<(String, usize, String)>>>;

/// A world whose webhook converts (or, with `fail`, answers a failed review).
fn world(fail: Rc<RefCell<bool>>) -> (World, Calls) {
    let mut w = World::new(default_server(), epoch(), 11);
    w.start_controllers(Enabled::NONE);
    let calls: Calls = Rc::default();
    let seen = calls.clone();
    w.webhook = Some(Box::new(move |call: &WebhookCall| {
        let review: Value = serde_json::from_slice(&call.body).expect("a review");
        let request = &review["request"];
        let desired = request["desiredAPIVersion"].as_str().unwrap_or_default().to_string();
        let objects = request["objects"].as_array().cloned().unwrap_or_default();
        seen.borrow_mut().push((desired.clone(), objects.len(), format!("{}{}", call.target.url, call.path)));
        let response = if *fail.borrow() {
            json!({"uid": request["uid"], "result": {"status": "Failure", "message": "custom webhook conversion error"}})
        } else {
            let converted: Vec<Value> = objects.iter().map(|o| convert(o, &desired)).collect();
            json!({"uid": request["uid"], "result": {"status": "Success"}, "convertedObjects": converted})
        };
        let body = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response});
        Ok(WebhookAnswer { status: 200, body: Bytes::from(serde_json::to_vec(&body).unwrap()), ..Default::default() })
    }));
    (w, calls)
}

fn crontab(version: &str, name: &str, field: &str) -> Value {
    json!({"apiVersion": format!("stable.example.com/{version}"), "kind": "CronTab", "metadata": {"name": name}, "spec": {field: "*/5 * * * *"}})
}

#[test]
fn every_verb_serves_the_version_asked_for_through_the_webhook() {
    let (mut w, calls) = world(Rc::default());
    let r = call(&mut w, "POST", CRDS, Some(crd(json!({"url": "https://hooks.example:8443/convert"}))));
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));

    // An object at the storage version needs no webhook to be written (the v2 watch cache
    // has it converted as it comes in).
    let r = call(&mut w, "POST", V1, Some(crontab("v1", "a", "cron")));
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(calls.borrow().iter().map(|(v, n, _)| (v.as_str(), *n)).collect::<Vec<_>>(), [("stable.example.com/v2", 1)]);
    calls.borrow_mut().clear();

    // A create at v2 is stored at v1 and answered at v2, read back through the webhook as kube does.
    let r = call(&mut w, "POST", V2, Some(crontab("v2", "b", "schedule")));
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!((r.json()["apiVersion"].as_str(), r.json()["spec"]["schedule"].as_str()), (Some("stable.example.com/v2"), Some("*/5 * * * *")));
    assert_eq!(
        calls.borrow()[..2].iter().map(|(v, n, url)| (v.as_str(), *n, url.as_str())).collect::<Vec<_>>(),
        [
            ("stable.example.com/v1", 1, "https://hooks.example:8443/convert?timeout=30s"),
            ("stable.example.com/v2", 1, "https://hooks.example:8443/convert?timeout=30s")
        ]
    );
    let stored = call(&mut w, "GET", &format!("{V1}/b"), None).json();
    assert_eq!((stored["apiVersion"].as_str(), stored["spec"]["cron"].as_str()), (Some("stable.example.com/v1"), Some("*/5 * * * *")));

    // GET from storage, from the cache, and LIST at v2.
    let a = call(&mut w, "GET", &format!("{V2}/a"), None).json();
    assert_eq!((a["apiVersion"].as_str(), a["spec"]["schedule"].as_str(), a["spec"].get("cron")), (Some("stable.example.com/v2"), Some("*/5 * * * *"), None));
    let cached = w.call("GET", &format!("{V2}/a"), "resourceVersion=0", None, "").json();
    assert_eq!(cached["spec"]["schedule"], "*/5 * * * *");
    let list = call(&mut w, "GET", V2, None).json();
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert!(items.iter().all(|i| i["apiVersion"] == "stable.example.com/v2" && i["spec"]["schedule"] == "*/5 * * * *"));

    // A watch at v2 sees a change made at v1 converted.
    let watch = w.call("GET", V2, "watch=true&resourceVersion=0", None, "");
    let id = watch.watch.expect("a watch");
    let r = call(&mut w, "PATCH", &format!("{V1}/a"), Some(json!({"spec": {"cron": "0 * * * *"}})));
    assert_eq!(r.head.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let (frames, _) = w.frames(id);
    let events: Vec<Value> =
        frames.iter().flat_map(|f| std::str::from_utf8(f).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect::<Vec<Value>>()).collect();
    let last = events.last().expect("events");
    assert_eq!((last["type"].as_str(), last["object"]["spec"]["schedule"].as_str()), (Some("MODIFIED"), Some("0 * * * *")));
    assert!(events.iter().all(|e| e["object"]["apiVersion"] == "stable.example.com/v2"));

    // Updates and patches at v2 read the stored object converted, and store what they write at v1.
    let r = call(&mut w, "PATCH", &format!("{V2}/a"), Some(json!({"spec": {"schedule": "1 * * * *"}})));
    assert_eq!((r.head.status, r.json()["spec"]["schedule"].as_str()), (200, Some("1 * * * *")), "{}", String::from_utf8_lossy(&r.body));
    let mut current = call(&mut w, "GET", &format!("{V2}/a"), None).json();
    current["spec"]["schedule"] = json!("2 * * * *");
    let r = call(&mut w, "PUT", &format!("{V2}/a"), Some(current));
    assert_eq!((r.head.status, r.json()["spec"]["schedule"].as_str()), (200, Some("2 * * * *")), "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(call(&mut w, "GET", &format!("{V1}/a"), None).json()["spec"]["cron"], "2 * * * *");

    // Server-side apply creates at v2 too (its transform draws the same uid when it runs again
    // after the webhook answered).
    let applied = crontab("v2", "c", "schedule");
    let r = w.call("PATCH", &format!("{V2}/c"), "fieldManager=test", Some(&applied), "application/apply-patch+yaml");
    assert_eq!((r.head.status, r.json()["spec"]["schedule"].as_str()), (201, Some("*/5 * * * *")), "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(call(&mut w, "GET", &format!("{V1}/c"), None).json()["spec"]["cron"], "*/5 * * * *");

    // Deletes, one and all, answer at v2.
    let r = call(&mut w, "DELETE", &format!("{V2}/a"), None);
    assert_eq!(r.head.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let r = call(&mut w, "DELETE", V2, None);
    assert_eq!(r.head.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(call(&mut w, "GET", V1, None).json()["items"], json!([]));
}

#[test]
fn a_failing_webhook_fails_the_request_with_kubes_500() {
    let fail = Rc::new(RefCell::new(false));
    let (mut w, _) = world(fail.clone());
    call(&mut w, "POST", CRDS, Some(crd(json!({"url": "https://hooks.example/convert"}))));
    assert_eq!(call(&mut w, "POST", V1, Some(crontab("v1", "a", "cron"))).head.status, 201);
    *fail.borrow_mut() = true;
    let r = call(&mut w, "POST", V2, Some(crontab("v2", "b", "schedule")));
    assert_eq!(
        (r.head.status, r.json()["reason"].as_str(), r.json()["message"].as_str()),
        (500, None, Some("conversion webhook for stable.example.com/v2, Kind=CronTab failed: custom webhook conversion error"))
    );
    let r = call(&mut w, "GET", &format!("{V2}/a"), None);
    assert_eq!(
        (r.head.status, r.json()["message"].as_str()),
        (500, Some("conversion webhook for stable.example.com/v1, Kind=CronTab failed: custom webhook conversion error"))
    );
    // Nothing was stored by the failed create; the v1 object is read at v1 as ever.
    assert_eq!(call(&mut w, "GET", &format!("{V1}/b"), None).head.status, 404);
    assert_eq!(call(&mut w, "GET", &format!("{V1}/a"), None).head.status, 200);

    // The v2 cache waits for the webhook, and serves once it answers again.
    *fail.borrow_mut() = false;
    w.advance(jiff::SignedDuration::from_secs(2));
    let list = w.call("GET", V2, "resourceVersion=0", None, "").json();
    assert_eq!(list["items"][0]["spec"]["schedule"], "*/5 * * * *", "{list}");
}

#[test]
fn a_service_webhook_is_called_at_its_cluster_ip() {
    let (mut w, calls) = world(Rc::default());
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "conv", "namespace": "default"},
        "spec": {"clusterIP": "10.0.0.44", "ports": [{"port": 443, "targetPort": 8443}]}});
    assert_eq!(call(&mut w, "POST", "/api/v1/namespaces/default/services", Some(svc)).head.status, 201);
    call(&mut w, "POST", CRDS, Some(crd(json!({"service": {"namespace": "default", "name": "conv", "path": "/crd"}}))));
    let r = call(&mut w, "POST", V2, Some(crontab("v2", "b", "schedule")));
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(calls.borrow()[0].2, "https://10.0.0.44:443/crd?timeout=30s");
}

#[test]
fn a_crds_conversion_is_defaulted_and_checked() {
    let (mut w, _) = world(Rc::default());
    let mut none = crd(json!({}));
    none["spec"].as_object_mut().unwrap().remove("conversion");
    let r = call(&mut w, "POST", CRDS, Some(none));
    assert_eq!(r.json()["spec"]["conversion"], json!({"strategy": "None"}));
    call(&mut w, "DELETE", &format!("{CRDS}/crontabs.stable.example.com"), None);

    let r = call(&mut w, "POST", CRDS, Some(crd(json!({"url": "http://hooks.example/convert"}))));
    assert_eq!(
        (r.head.status, r.json()["message"].as_str()),
        (
            422,
            Some(
                "CustomResourceDefinition.apiextensions.k8s.io \"crontabs.stable.example.com\" is invalid: spec.conversion.webhookClientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]"
            )
        )
    );
    let r = call(&mut w, "POST", CRDS, Some(crd(json!({"service": {"namespace": "default", "name": "conv"}}))));
    assert_eq!(r.json()["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["port"], 443, "{}", r.json());
}
