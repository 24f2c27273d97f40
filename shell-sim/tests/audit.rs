//! The audit log through the core's request pipeline: the events each request gets at the
//! stages and levels a policy gives it, with the `Audit-Id` the answer carries, who made the
//! request (and whom it impersonated), what it addressed, the answer's status and objects,
//! and the annotations authorization and admission add.

use std::sync::Arc;

use bytes::Bytes;
use kapi_core::audit::Policy;
use kapi_sim::{ADMIN_TOKEN, Response, Setup, World, epoch, server_authorizing};
use serde_json::{Value, json};

const POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- {level: None, resources: [{group: '', resources: [events]}]}
- {level: RequestResponse, resources: [{group: '', resources: [configmaps]}], omitStages: [RequestReceived]}
- {level: Metadata, resources: [{group: '', resources: [secrets]}], omitStages: [RequestReceived]}
- {level: Request, verbs: [watch]}
";

fn world() -> World {
    let mut setup: Setup = server_authorizing("Node,RBAC");
    Arc::get_mut(&mut setup.server).expect("not shared yet").audit = Some(Arc::new(Policy::read(POLICY.as_bytes()).unwrap()));
    World::new(setup, epoch(), 7)
}

/// The events logged since `from`.
fn events(w: &World, from: usize) -> Vec<Value> {
    w.audit_log[from..].iter().map(|l: &Bytes| serde_json::from_slice(l).unwrap()).collect()
}

fn audit_id(r: &Response) -> String {
    r.head.headers.iter().find(|(k, _)| k == "Audit-Id").map(|(_, v)| v.clone()).expect("every answer has an Audit-Id")
}

#[test]
fn each_request_is_logged_at_the_level_and_stages_its_rule_gives() {
    let mut w = world();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}});
    let from = w.audit_log.len();
    let r = w.call("POST", "/api/v1/namespaces/default/configmaps", "", Some(&cm), "application/json");
    assert_eq!(r.head.status, 201);
    let logged = events(&w, from);
    assert_eq!(logged.len(), 1, "RequestReceived is omitted: {logged:?}");
    let e = &logged[0];
    assert_eq!(
        (&e["stage"], &e["level"], &e["verb"], &e["auditID"]),
        (&json!("ResponseComplete"), &json!("RequestResponse"), &json!("create"), &json!(audit_id(&r)))
    );
    // The object the request carries names it.
    assert_eq!(e["objectRef"], json!({"resource": "configmaps", "namespace": "default", "name": "c", "apiVersion": "v1"}));
    assert_eq!(e["responseStatus"], json!({"metadata": {}, "code": 201}));
    assert_eq!((&e["requestObject"]["data"], &e["responseObject"]["metadata"]["name"]), (&json!({"k": "v"}), &json!("c")));
    assert_eq!(e["user"]["username"], "admin");
    assert_eq!(e["userAgent"], "kapi-test/1.0");
    assert_eq!(e["annotations"]["authorization.k8s.io/decision"], "allow");

    // A refusal's status is the event's; Metadata records neither object.
    let from = w.audit_log.len();
    let r = w.call("GET", "/api/v1/namespaces/default/secrets/missing", "", None, "");
    assert_eq!(r.head.status, 404);
    let e = &events(&w, from)[0];
    assert_eq!(e["level"], "Metadata");
    assert_eq!(e["objectRef"]["name"], "missing");
    assert_eq!(e["responseStatus"]["reason"], "NotFound");
    assert_eq!(e["responseStatus"]["message"], "secrets \"missing\" not found");
    assert!(e.get("responseObject").is_none());

    // No rule, or a None one: nothing.
    let from = w.audit_log.len();
    assert_eq!(w.call("GET", "/api/v1/namespaces/default/events", "", None, "").head.status, 200);
    assert_eq!(w.call("GET", "/api/v1/namespaces", "", None, "").head.status, 200);
    assert!(events(&w, from).is_empty());

    // A watch: received, started, then complete when it ends.
    let from = w.audit_log.len();
    let r = w.call("GET", "/api/v1/namespaces/default/pods", "watch=true", None, "");
    assert_eq!(r.head.status, 200);
    let stages = |w: &World| events(w, from).iter().map(|e| e["stage"].clone()).collect::<Vec<Value>>();
    assert_eq!(stages(&w), [json!("RequestReceived"), json!("ResponseStarted")]);
    w.stop_watch(r.watch.expect("a watch"));
    assert_eq!(stages(&w), [json!("RequestReceived"), json!("ResponseStarted"), json!("ResponseComplete")]);
}

#[test]
fn the_client_may_name_its_audit_id_and_an_impersonator_is_logged_with_whom_it_acts_as() {
    let mut w = world();
    let headers = vec![
        ("Authorization".to_string(), format!("Bearer {ADMIN_TOKEN}")),
        ("Audit-ID".to_string(), "mine-1".to_string()),
        ("Impersonate-User".to_string(), "bob".to_string()),
        ("X-Forwarded-For".to_string(), "10.0.0.9".to_string()),
    ];
    let from = w.audit_log.len();
    let r =
        w.request(kapi_core::pipeline::Request { method: "GET".into(), path: "/api/v1/namespaces/default/secrets/s".into(), headers, ..Default::default() });
    assert_eq!(r.head.status, 403);
    assert_eq!(audit_id(&r), "mine-1");
    let e = &events(&w, from)[0];
    assert_eq!((&e["auditID"], &e["user"]["username"], &e["impersonatedUser"]["username"]), (&json!("mine-1"), &json!("admin"), &json!("bob")));
    assert_eq!(e["sourceIPs"][0], "10.0.0.9");
    assert_eq!(e["annotations"]["authorization.k8s.io/decision"], "forbid");
    assert_eq!(e["responseStatus"]["reason"], "Forbidden");
}

mod webhook_world;

#[test]
fn admission_annotates_the_events_of_the_writes_it_admits() {
    // A policy's auditAnnotations and the failures its Audit binding keeps; a webhook's
    // auditAnnotations, under its name; each mutating webhook's call.
    let annotated: webhook_world::Answer =
        Box::new(|r: &Value| webhook_world::review(json!({"uid": r["uid"], "allowed": true, "auditAnnotations": {"checked-by": "team-a"}})));
    let mut setup: Setup = server_authorizing("Node,RBAC");
    Arc::get_mut(&mut setup.server).expect("not shared yet").audit = Some(Arc::new(Policy::read(POLICY.as_bytes()).unwrap()));
    let (mut w, _) = webhook_world::world_on(
        setup,
        std::collections::BTreeMap::from([("/annotate", annotated), ("/mutate", Box::new(webhook_world::allow) as webhook_world::Answer)]),
    );
    webhook_world::configure(&mut w, webhook_world::VALIDATING, "v", vec![webhook_world::hook("annotate.example.com", "/annotate", json!({}))]);
    let broken = webhook_world::hook("broken.example.com", "/gone", json!({"failurePolicy": "Ignore"}));
    webhook_world::configure(&mut w, webhook_world::MUTATING, "m", vec![webhook_world::hook("mutate.example.com", "/mutate", json!({})), broken]);
    let rules = json!({"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]});
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "sized"},
        "spec": {"matchConstraints": rules, "validations": [{"expression": "true"}, {"expression": "size(object.data) < 2", "message": "too big"}],
            "auditAnnotations": [{"key": "keys", "valueExpression": "string(size(object.data))"}, {"key": "never", "valueExpression": "null"}]}});
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "sized-audit"},
        "spec": {"policyName": "sized", "validationActions": ["Audit"]}});
    for (path, body) in [("validatingadmissionpolicies", policy), ("validatingadmissionpolicybindings", binding)] {
        let r = w.call("POST", &format!("/apis/admissionregistration.k8s.io/v1/{path}"), "", Some(&body), "application/json");
        assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    }
    let from = w.audit_log.len();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"a": "1", "b": "2"}});
    let r = w.call("POST", "/api/v1/namespaces/default/configmaps", "", Some(&cm), "application/json");
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let annotations = events(&w, from).pop().unwrap()["annotations"].clone();
    assert_eq!(annotations["sized/keys"], "2");
    assert!(annotations.get("sized/never").is_none(), "{annotations}");
    let failure = r#"[{"message":"too big","policy":"sized","binding":"sized-audit","expressionIndex":1,"validationActions":["Audit"]}]"#;
    assert_eq!(annotations["validation.policy.admission.k8s.io/validation_failure"], failure);
    assert_eq!(annotations["annotate.example.com/checked-by"], "team-a");
    assert_eq!(annotations["mutation.webhook.admission.k8s.io/round_0_index_0"], r#"{"configuration":"m","webhook":"mutate.example.com","mutated":false}"#);
    // A webhook that could not be asked, and whose policy ignores it, failed open.
    assert_eq!(annotations["failed-open.mutation.webhook.admission.k8s.io/round_0_index_1"], "true");
}
