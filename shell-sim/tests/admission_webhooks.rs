//! Admission webhooks through the core's request pipeline with stand-in webhooks: which
//! writes a configuration's rules and selectors send to its webhooks, what the
//! AdmissionReview carries, how patches, refusals, warnings and failures come back to the
//! client (kube's codes and messages), and that a webhook that cannot be asked never lets a
//! `Fail` write through.

use std::collections::BTreeMap;

use bytes::Bytes;
use kapi_core::webhook::WebhookAnswer;
use kapi_sim::{World, default_server};
use serde_json::{Value, json};
use webhook_world::*;

mod webhook_world;

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
