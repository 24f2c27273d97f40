//! Admission webhooks through the core's request pipeline with stand-in webhooks: which
//! writes a configuration's rules and selectors send to its webhooks, what the
//! AdmissionReview carries, how patches, refusals, warnings and failures come back to the
//! client (kube's codes and messages), and that a webhook that cannot be asked never lets a
//! `Fail` write through.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use base64::Engine;
use bytes::Bytes;
use kapi_core::controllers::Enabled;
use kapi_core::webhook::{WebhookAnswer, WebhookCall};
use kapi_sim::{Response, Setup, World, default_server, epoch};
use serde_json::{Value, json};

const VALIDATING: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
const MUTATING: &str = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// What a stand-in webhook answers a review (its `request`; another kind of review, whole),
/// by the URL path it is called at.
type Answer = Box<dyn Fn(&Value) -> Result<WebhookAnswer, String>>;

/// The reviews each webhook was sent, by path.
type Seen = Rc<RefCell<Vec<(String, Value)>>>;

fn world(answers: BTreeMap<&'static str, Answer>) -> (World, Seen) {
    world_on(default_server(), answers)
}

fn world_on(setup: Setup, answers: BTreeMap<&'static str, Answer>) -> (World, Seen) {
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

fn review(response: Value) -> Result<WebhookAnswer, String> {
    let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response});
    Ok(WebhookAnswer { status: 200, body: Bytes::from(serde_json::to_vec(&body).unwrap()), content_type: "application/json".into() })
}

fn allow(request: &Value) -> Result<WebhookAnswer, String> {
    review(json!({"uid": request["uid"], "allowed": true}))
}

fn patch(request: &Value, ops: Value) -> Result<WebhookAnswer, String> {
    let patch = base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&ops).unwrap());
    review(json!({"uid": request["uid"], "allowed": true, "patchType": "JSONPatch", "patch": patch}))
}

fn hook(name: &str, path: &str, extra: Value) -> Value {
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

fn configure(w: &mut World, at: &str, name: &str, hooks: Vec<Value>) {
    let kind = if at == MUTATING { "MutatingWebhookConfiguration" } else { "ValidatingWebhookConfiguration" };
    let body = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "webhooks": hooks});
    let r = w.call("POST", at, "", Some(&body), "application/json");
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
}

fn configmap(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})
}

fn create(w: &mut World, path: &str, query: &str, obj: &Value) -> Response {
    w.call("POST", path, query, Some(obj), "application/json")
}

fn text(r: &Response) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

fn warnings(r: &Response) -> Vec<String> {
    r.head.headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case("Warning")).map(|(_, v)| v.clone()).collect()
}

#[test]
fn a_validating_webhook_refuses_with_its_status_and_sees_the_review_kube_sends() {
    let mut answers: BTreeMap<&str, Answer> = BTreeMap::new();
    answers.insert(
        "/deny",
        Box::new(|request: &Value| {
            let denied = request["object"]["metadata"]["labels"]["deny"] == "yes";
            review(json!({"uid": request["uid"], "allowed": !denied, "warnings": ["looked at it"],
                "status": {"code": 403, "reason": "Forbidden", "message": "labelled deny"}}))
        }),
    );
    let (mut w, seen) = world(answers);
    configure(&mut w, VALIDATING, "policy", vec![hook("deny.example.com", "/deny", json!({}))]);

    let r = create(&mut w, CONFIGMAPS, "", &configmap("bad", json!({"deny": "yes"})));
    assert_eq!(r.head.status, 403, "{}", text(&r));
    assert_eq!(r.json()["message"], "admission webhook \"deny.example.com\" denied the request: labelled deny");
    assert_eq!(r.json()["reason"], "Forbidden");
    assert_eq!(warnings(&r), ["299 - \"looked at it\""]);
    assert_eq!(w.call("GET", &format!("{CONFIGMAPS}/bad"), "", None, "").head.status, 404);

    let r = create(&mut w, CONFIGMAPS, "", &configmap("good", json!({"deny": "no"})));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    let (path, sent) = seen.borrow().last().cloned().unwrap();
    assert_eq!(path, "/deny?timeout=10s");
    assert_eq!((sent["apiVersion"].as_str(), sent["kind"].as_str()), (Some("admission.k8s.io/v1"), Some("AdmissionReview")));
    let request = &sent["request"];
    assert_eq!(request["uid"].as_str().map(str::len), Some(36));
    assert_eq!(request["kind"], json!({"group": "", "version": "v1", "kind": "ConfigMap"}));
    assert_eq!(request["resource"], json!({"group": "", "version": "v1", "resource": "configmaps"}));
    assert_eq!(request["requestKind"], request["kind"]);
    assert_eq!((request["name"].as_str(), request["namespace"].as_str(), request["operation"].as_str()), (Some("good"), Some("default"), Some("CREATE")));
    assert_eq!(request["userInfo"]["username"], "admin");
    assert_eq!(request["oldObject"], Value::Null);
    assert_eq!(request["dryRun"], false);
    assert_eq!(request["options"], json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}));
    // Validating webhooks see the object as it is stored: with its uid.
    assert_eq!(request["object"]["metadata"]["uid"].as_str().map(str::len), Some(36));

    // An update is sent with the object it replaces; a delete with only that.
    let r = w.call("PATCH", &format!("{CONFIGMAPS}/good"), "", Some(&json!({"data": {"k": "w"}})), "application/merge-patch+json");
    assert_eq!(r.head.status, 200, "{}", text(&r));
    let request = seen.borrow().last().unwrap().1["request"].clone();
    assert_eq!(
        (request["operation"].as_str(), request["oldObject"]["data"]["k"].as_str(), request["object"]["data"]["k"].as_str()),
        (Some("UPDATE"), Some("v"), Some("w"))
    );
    assert_eq!(request["options"]["kind"], "UpdateOptions");
    let r = w.call("DELETE", &format!("{CONFIGMAPS}/good"), "", None, "");
    assert_eq!(r.head.status, 200, "{}", text(&r));
    let request = seen.borrow().last().unwrap().1["request"].clone();
    assert_eq!((request["operation"].as_str(), &request["object"], request["oldObject"]["data"]["k"].as_str()), (Some("DELETE"), &Value::Null, Some("w")));
}

#[test]
fn mutating_webhooks_patch_in_order_and_the_ifneeded_ones_run_again() {
    let mut answers: BTreeMap<&str, Answer> = BTreeMap::new();
    answers.insert("/first", Box::new(|r: &Value| patch(r, json!([{"op": "add", "path": "/metadata/labels/first", "value": "yes"}]))));
    answers.insert(
        "/second",
        Box::new(|r: &Value| {
            // It sees the first webhook's label, and adds its own once.
            assert_eq!(r["object"]["metadata"]["labels"]["first"], "yes");
            match r["object"]["metadata"]["labels"].get("second") {
                None => patch(r, json!([{"op": "add", "path": "/metadata/labels/second", "value": "yes"}])),
                Some(_) => allow(r),
            }
        }),
    );
    let (mut w, seen) = world(answers);
    configure(
        &mut w,
        MUTATING,
        "a-config",
        vec![hook("first.example.com", "/first", json!({"reinvocationPolicy": "IfNeeded"})), hook("second.example.com", "/second", json!({}))],
    );

    let r = create(&mut w, CONFIGMAPS, "", &configmap("m", json!({})));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    assert_eq!(r.json()["metadata"]["labels"], json!({"first": "yes", "second": "yes"}));
    let stored = w.call("GET", &format!("{CONFIGMAPS}/m"), "", None, "").json();
    assert_eq!(stored["metadata"]["labels"], json!({"first": "yes", "second": "yes"}));
    // The first is called again after the second changed the object; the second is not.
    let paths: Vec<String> = seen.borrow().iter().map(|(p, _)| p.split('?').next().unwrap().to_string()).collect();
    assert_eq!(paths, ["/first", "/second", "/first"]);
    // Mutating webhooks see the object before the server fills in its uid.
    assert_eq!(seen.borrow()[0].1["request"]["object"]["metadata"].get("uid"), None);
}

#[test]
fn a_webhook_that_cannot_be_asked_fails_the_write_unless_its_policy_ignores_it() {
    let (mut w, _) = world(BTreeMap::new());
    configure(&mut w, VALIDATING, "closed", vec![hook("closed.example.com", "/nowhere", json!({"objectSelector": {"matchLabels": {"guarded": "yes"}}}))]);
    configure(
        &mut w,
        VALIDATING,
        "open",
        vec![hook("open.example.com", "/nowhere", json!({"failurePolicy": "Ignore", "objectSelector": {"matchLabels": {"open": "yes"}}}))],
    );
    let r = create(&mut w, CONFIGMAPS, "", &configmap("guarded", json!({"guarded": "yes"})));
    assert_eq!(r.head.status, 500, "{}", text(&r));
    assert_eq!(r.json()["reason"], "InternalError");
    assert_eq!(
        r.json()["message"],
        "Internal error occurred: failed calling webhook \"closed.example.com\": failed to call webhook: Post \"https://hooks.example:443/nowhere?timeout=10s\": dial tcp 127.0.0.1:443: connect: connection refused"
    );
    assert_eq!(w.call("GET", &format!("{CONFIGMAPS}/guarded"), "", None, "").head.status, 404);
    // The selector leaves other objects alone; the Ignore webhook lets its own through.
    assert_eq!(create(&mut w, CONFIGMAPS, "", &configmap("plain", json!({}))).head.status, 201);
    assert_eq!(create(&mut w, CONFIGMAPS, "", &configmap("open", json!({"open": "yes"}))).head.status, 201);
    // The configurations themselves are never sent to webhooks, so a broken one can go.
    assert_eq!(w.call("DELETE", &format!("{VALIDATING}/closed"), "", None, "").head.status, 200);
    assert_eq!(create(&mut w, CONFIGMAPS, "", &configmap("guarded", json!({"guarded": "yes"}))).head.status, 201);
}

#[test]
fn answers_kube_refuses_are_call_failures() {
    let mut answers: BTreeMap<&str, Answer> = BTreeMap::new();
    answers.insert("/wrong-uid", Box::new(|_: &Value| review(json!({"uid": "nope", "allowed": true}))));
    answers.insert("/boom", Box::new(|_: &Value| Ok(WebhookAnswer { status: 500, body: Bytes::from_static(b"boom"), content_type: "text/plain".into() })));
    answers.insert("/patching", Box::new(|r: &Value| patch(r, json!([{"op": "remove", "path": "/metadata/labels/missing"}]))));
    let (mut w, _) = world(answers);
    let only = |label: &str| json!({"objectSelector": {"matchLabels": {label: "yes"}}});
    configure(&mut w, VALIDATING, "v", vec![hook("uid.example.com", "/wrong-uid", only("uid")), hook("boom.example.com", "/boom", only("boom"))]);
    configure(&mut w, MUTATING, "m", vec![hook("patch.example.com", "/patching", only("patch"))]);

    let r = create(&mut w, CONFIGMAPS, "", &configmap("u", json!({"uid": "yes"})));
    assert_eq!(r.head.status, 500);
    let message = r.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.starts_with("Internal error occurred: failed calling webhook \"uid.example.com\": received invalid webhook response: expected response.uid=\""),
        "{message}"
    );
    assert!(message.ends_with("\", got \"nope\""), "{message}");
    let r = create(&mut w, CONFIGMAPS, "", &configmap("b", json!({"boom": "yes"})));
    assert_eq!(
        r.json()["message"],
        "Internal error occurred: failed calling webhook \"boom.example.com\": failed to call webhook: an error on the server (\"boom\") has prevented the request from succeeding"
    );
    let r = create(&mut w, CONFIGMAPS, "", &configmap("p", json!({"patch": "yes"})));
    assert_eq!((r.head.status, r.json()["reason"].as_str()), (500, Some("InternalError")), "{}", text(&r));
}

#[test]
fn dry_runs_reach_only_webhooks_without_side_effects() {
    let (mut w, seen) = world(BTreeMap::from([("/ok", Box::new(allow) as Answer)]));
    configure(&mut w, VALIDATING, "v", vec![hook("ok.example.com", "/ok", json!({"sideEffects": "NoneOnDryRun"}))]);
    let r = create(&mut w, CONFIGMAPS, "dryRun=All", &configmap("d", json!({})));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    let request = seen.borrow().last().unwrap().1["request"].clone();
    assert_eq!((request["dryRun"].as_bool(), &request["options"]["dryRun"]), (Some(true), &json!(["All"])));
    // Nothing was stored.
    assert_eq!(w.call("GET", &format!("{CONFIGMAPS}/d"), "", None, "").head.status, 404);
}

#[test]
fn rules_selectors_and_conditions_choose_the_writes_sent() {
    let (mut w, seen) = world(BTreeMap::from([("/ok", Box::new(allow) as Answer)]));
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "watched", "labels": {"watch": "yes"}}});
    assert_eq!(w.call("POST", "/api/v1/namespaces", "", Some(&ns), "application/json").head.status, 201);
    let watched = "/api/v1/namespaces/watched/configmaps";
    configure(
        &mut w,
        VALIDATING,
        "v",
        vec![
            hook(
                "ns.example.com",
                "/ok",
                json!({"namespaceSelector": {"matchLabels": {"watch": "yes"}},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"], "scope": "Namespaced"}]}),
            ),
            hook("cond.example.com", "/ok", json!({"matchConditions": [{"name": "big", "expression": "has(object.data) && object.data.size() > 1"}]})),
            hook(
                "broken.example.com",
                "/ok",
                json!({"matchConditions": [{"name": "bad", "expression": "object.nothing == 'x'"}],
                "objectSelector": {"matchLabels": {"broken": "yes"}}}),
            ),
        ],
    );
    let sent = |seen: &Seen| seen.borrow().iter().map(|(_, r)| r["request"]["name"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    assert_eq!(create(&mut w, CONFIGMAPS, "", &configmap("elsewhere", json!({}))).head.status, 201);
    assert_eq!(create(&mut w, watched, "", &configmap("inside", json!({}))).head.status, 201);
    assert_eq!(sent(&seen), ["inside"]);
    // An update is not among the rule's operations.
    let r = w.call("PATCH", &format!("{watched}/inside"), "", Some(&json!({"data": {"k": "w"}})), "application/merge-patch+json");
    assert_eq!(r.head.status, 200, "{}", text(&r));
    assert_eq!(sent(&seen).len(), 1);
    let big = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"a": "1", "b": "2"}});
    assert_eq!(create(&mut w, CONFIGMAPS, "", &big).head.status, 201);
    assert_eq!(sent(&seen), ["inside", "big"]);
    // A condition that fails to evaluate fails a `Fail` webhook's write with kube's 403.
    let r = create(&mut w, CONFIGMAPS, "", &configmap("broken", json!({"broken": "yes"})));
    assert_eq!(r.head.status, 403, "{}", text(&r));
    let message = r.json()["message"].as_str().unwrap().to_string();
    assert!(message.starts_with("configmaps \"broken\" is forbidden: expression 'object.nothing == 'x'' resulted in error: "), "{message}");
}

#[test]
fn an_equivalent_webhook_sees_the_version_its_rules_name() {
    let (mut w, seen) = world(BTreeMap::from([("/v1", Box::new(allow) as Answer)]));
    let v1_only =
        json!({"rules": [{"operations": ["CREATE"], "apiGroups": ["autoscaling"], "apiVersions": ["v1"], "resources": ["horizontalpodautoscalers"]}]});
    let mut exact = v1_only.clone();
    exact["matchPolicy"] = json!("Exact");
    configure(&mut w, VALIDATING, "v", vec![hook("equivalent.example.com", "/v1", v1_only), hook("exact.example.com", "/v1", exact)]);
    let hpa = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 3,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}]}});
    let r = create(&mut w, "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers", "", &hpa);
    assert_eq!(r.head.status, 201, "{}", text(&r));
    // Only the Equivalent webhook is asked, about autoscaling/v1, with the object at v1.
    assert_eq!(seen.borrow().len(), 1);
    let request = seen.borrow()[0].1["request"].clone();
    assert_eq!(request["kind"], json!({"group": "autoscaling", "version": "v1", "kind": "HorizontalPodAutoscaler"}));
    assert_eq!(request["resource"]["version"], "v1");
    assert_eq!(request["requestKind"]["version"], "v2");
    assert_eq!(request["object"]["apiVersion"], "autoscaling/v1");
    assert_eq!(request["object"]["spec"]["targetCPUUtilizationPercentage"], 60);
}

#[test]
fn a_scale_webhook_sees_and_patches_the_scale() {
    let (mut w, seen) =
        world(BTreeMap::from([("/scale", Box::new(|r: &Value| patch(r, json!([{"op": "replace", "path": "/spec/replicas", "value": 5}]))) as Answer)]));
    let rules = json!([{"operations": ["UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments/scale"]}]);
    configure(&mut w, MUTATING, "m", vec![hook("scale.example.com", "/scale", json!({"rules": rules}))]);
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 1,
        "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    assert_eq!(create(&mut w, deployments, "", &deployment).head.status, 201);
    assert!(seen.borrow().is_empty(), "the rule names only the scale subresource");
    let scale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 3}});
    let r = w.call("PUT", &format!("{deployments}/web/scale"), "", Some(&scale), "application/json");
    assert_eq!((r.head.status, r.json()["spec"]["replicas"].as_i64()), (200, Some(5)), "{}", text(&r));
    let request = seen.borrow()[0].1["request"].clone();
    assert_eq!((request["kind"]["kind"].as_str(), request["subResource"].as_str()), (Some("Scale"), Some("scale")));
    assert_eq!((request["object"]["kind"].as_str(), request["object"]["spec"]["replicas"].as_i64()), (Some("Scale"), Some(3)));
    assert_eq!(request["oldObject"]["spec"]["replicas"], 1);
    assert_eq!(w.call("GET", &format!("{deployments}/web"), "", None, "").json()["spec"]["replicas"], 5);
}

#[test]
fn a_create_waiting_for_a_validating_webhook_goes_on_from_its_validation_with_what_came_before() {
    let mut answers: BTreeMap<&str, Answer> = BTreeMap::new();
    answers.insert("/allow", Box::new(|request: &Value| review(json!({"uid": request["uid"], "allowed": true, "warnings": ["seen"]}))));
    answers.insert("/label", Box::new(|request: &Value| patch(request, json!([{"op": "add", "path": "/metadata/labels/patched", "value": "yes"}]))));
    let (mut w, seen) = world(answers);
    configure(&mut w, MUTATING, "label", vec![hook("label.example.com", "/label", json!({}))]);
    configure(&mut w, VALIDATING, "allow", vec![hook("allow.example.com", "/allow", json!({}))]);
    // A policy that warns: it runs before the validating webhooks, and its warning stays.
    let policies = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
    let policy = json!({"metadata": {"name": "warn"}, "spec": {"failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]},
        "validations": [{"expression": "false", "message": "noted"}]}});
    assert_eq!(w.call("POST", policies, "", Some(&policy), "application/json").head.status, 201);
    let binding = json!({"metadata": {"name": "warn"}, "spec": {"policyName": "warn", "validationActions": ["Warn"]}});
    let bindings = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
    assert_eq!(w.call("POST", bindings, "", Some(&binding), "application/json").head.status, 201);

    let r = create(&mut w, CONFIGMAPS, "", &configmap("c", json!({})));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    assert_eq!(warnings(&r), ["299 - \"Validation failed for ValidatingAdmissionPolicy 'warn' with binding 'warn': noted\"", "299 - \"seen\""]);
    assert_eq!(r.json()["metadata"]["labels"]["patched"], "yes");
    // Each webhook asked once, the validating one about the object stored.
    let sent = seen.borrow().clone();
    assert_eq!(sent.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(), ["/label?timeout=10s", "/allow?timeout=10s"]);
    let stored = w.call("GET", &format!("{CONFIGMAPS}/c"), "", None, "").json();
    assert_eq!(sent[1].1["request"]["object"]["metadata"]["uid"], stored["metadata"]["uid"]);
    assert_eq!(sent[1].1["request"]["object"]["metadata"]["creationTimestamp"], stored["metadata"]["creationTimestamp"]);
}

/// A world whose only plugin is EventRateLimit, two Events a namespace at once, with a
/// webhook at `/allow` that allows everything.
fn event_rate_limited_world() -> (World, Seen) {
    let mut setup = default_server();
    let config = b"apiVersion: eventratelimit.admission.k8s.io/v1alpha1\nkind: Configuration\nlimits: [{type: Namespace, qps: 1, burst: 2}]\n";
    let configs = BTreeMap::from([("EventRateLimit".to_string(), config.to_vec())]);
    let chain =
        kapi_core::admission::Chain::from_flags(&["EventRateLimit".into()], &[], &configs, &kapi_core::admission::no_files).expect("a valid configuration");
    std::sync::Arc::get_mut(&mut setup.server).expect("not shared yet").admission = std::sync::Arc::new(chain);
    let mut answers: BTreeMap<&str, Answer> = BTreeMap::new();
    answers.insert("/allow", Box::new(allow));
    world_on(setup, answers)
}

#[test]
fn an_update_waiting_for_a_validating_webhook_passes_the_plugins_once() {
    // EventRateLimit counts each write of an Event once: with a burst of two, a create and an
    // update that waits for a webhook both fit (the update's plugins are not run again when
    // the webhook answers), and the third write does not.
    let (mut w, seen) = event_rate_limited_world();
    let rules = json!({"rules": [{"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["events"]}]});
    configure(&mut w, VALIDATING, "allow", vec![hook("allow.example.com", "/allow", rules)]);
    let events = "/api/v1/namespaces/default/events";
    let event = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web"}, "reason": "Started", "message": "one"});
    let r = create(&mut w, events, "", &event);
    assert_eq!(r.head.status, 201, "{}", text(&r));
    let mut changed = r.json();
    changed["message"] = json!("two");
    let r = w.call("PUT", &format!("{events}/e"), "", Some(&changed), "application/json");
    assert_eq!(r.head.status, 200, "{}", text(&r));
    assert_eq!(seen.borrow().len(), 1);
    let mut changed = r.json();
    changed["message"] = json!("three");
    let r = w.call("PUT", &format!("{events}/e"), "", Some(&changed), "application/json");
    assert_eq!(r.head.status, 429, "{}", text(&r));
    assert_eq!(r.json()["message"], "Too many requests: limit reached on type Namespace for key default");
}

#[test]
fn a_create_by_apply_waiting_for_a_validating_webhook_passes_the_plugins_once() {
    // The same for an Event created by server-side apply, whose transform runs again with
    // the webhook's answer: it takes one token of two, so a second create still fits.
    let (mut w, seen) = event_rate_limited_world();
    let rules = json!({"rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["events"]}]});
    configure(&mut w, VALIDATING, "allow", vec![hook("allow.example.com", "/allow", rules)]);
    let events = "/api/v1/namespaces/default/events";
    let event = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web"}, "reason": "Started", "message": "one"})
    };
    let r = w.call("PATCH", &format!("{events}/a"), "fieldManager=test", Some(&event("a")), "application/apply-patch+yaml");
    assert_eq!(r.head.status, 201, "{}", text(&r));
    assert_eq!(seen.borrow().len(), 1);
    let r = create(&mut w, events, "", &event("b"));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    let r = create(&mut w, events, "", &event("c"));
    assert_eq!(r.head.status, 429, "{}", text(&r));
}

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

#[test]
fn a_pods_binding_is_admitted_as_its_create() {
    // kube admits a Binding as a create of pods/binding: a mutating webhook may change its
    // target, a validating one refuse it; the `bindings` resource is not pods/binding.
    let retarget: Answer = Box::new(|r: &Value| match r["object"]["target"]["name"].as_str() {
        Some("n0") => patch(r, json!([{"op": "replace", "path": "/target/name", "value": "n1"}])),
        _ => allow(r),
    });
    let refuse: Answer = Box::new(|r: &Value| match r["object"]["target"]["name"].as_str() {
        Some("tainted") => review(json!({"uid": r["uid"], "allowed": false, "status": {"code": 403, "message": "no pods on tainted"}})),
        _ => allow(r),
    });
    let (mut w, seen) = world(BTreeMap::from([("/retarget", retarget), ("/refuse", refuse)]));
    let on_bindings = |name: &str, path: &str| {
        hook(name, path, json!({"rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/binding"]}]}))
    };
    configure(&mut w, MUTATING, "m", vec![on_bindings("retarget.example.com", "/retarget")]);
    configure(&mut w, VALIDATING, "v", vec![on_bindings("refuse.example.com", "/refuse")]);
    let pods = "/api/v1/namespaces/default/pods";
    let pod = |name: &str| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let binding = |name: &str, node: &str| json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"kind": "Node", "name": node}});
    let account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
    assert_eq!(create(&mut w, "/api/v1/namespaces/default/serviceaccounts", "", &account).head.status, 201);
    for name in ["a", "b", "c"] {
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
    // The `bindings` resource is not the subresource the rules name.
    let sent = seen.borrow().len();
    let r = create(&mut w, "/api/v1/namespaces/default/bindings", "", &binding("c", "tainted"));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    assert_eq!(seen.borrow().len(), sent);
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
