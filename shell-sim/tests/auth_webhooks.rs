//! The authentication and authorization webhooks (`--authentication-token-webhook-config-file`,
//! `--authorization-mode=...,Webhook`): a token no other authenticator knows is whoever the
//! webhook's TokenReview says; a request RBAC does not allow is what the webhook's
//! SubjectAccessReview decides; both answers are kept for their time, and a webhook that fails
//! makes the request 401 (authentication) or 500 (authorization), as kube-apiserver answers.

use std::cell::RefCell;
use std::rc::Rc;

use bytes::Bytes;
use jiff::SignedDuration;
use kapi_core::webhook::WebhookAnswer;
use kapi_sim::{World, epoch, server_with_authorization_config, server_with_webhooks, with_mutating_policies};
use serde_json::{Value, json};

const TOKEN: &str = "opaque-token-of-jane";

/// The reviews the webhooks were sent, and what they answer: jane's token is jane (in `dev`);
/// jane may get anything and is denied deletes; `/admit` admits everything; `/authorize` fails while `down` is set; both
/// answer a 500 while `busy` counts down.
#[derive(Default)]
struct Hooks {
    sent: Vec<(String, Value)>,
    down: bool,
    busy: u32,
}

fn install(w: &mut World) -> Rc<RefCell<Hooks>> {
    let hooks = Rc::new(RefCell::new(Hooks::default()));
    let seen = hooks.clone();
    w.webhook = Some(Box::new(move |call| {
        let review: Value = serde_json::from_slice(&call.body).unwrap();
        let path = call.path.split('?').next().unwrap().to_string();
        let mut h = seen.borrow_mut();
        h.sent.push((path.clone(), review.clone()));
        if h.busy > 0 {
            h.busy -= 1;
            return Ok(WebhookAnswer { status: 500, body: Bytes::from_static(b"busy"), content_type: "text/plain".into() });
        }
        let status = match path.as_str() {
            "/admit" => {
                let response = json!({"uid": review["request"]["uid"], "allowed": true});
                let answer = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response});
                return Ok(WebhookAnswer { status: 200, body: Bytes::from(answer.to_string()), ..Default::default() });
            }
            "/authenticate" if review["spec"]["token"] == TOKEN => json!({"authenticated": true, "user": {"username": "jane", "uid": "7", "groups": ["dev"]}}),
            "/authenticate" => json!({"authenticated": false}),
            "/authorize" if h.down => return Err(format!("Post \"{}{}\": dial tcp: connect: connection refused", call.target.url, call.path)),
            _ if review["spec"]["user"] != "jane" => json!({"allowed": false}),
            _ if review["spec"]["resourceAttributes"]["verb"] == "delete" => json!({"allowed": false, "denied": true, "reason": "jane never deletes"}),
            _ => json!({"allowed": true, "reason": "jane may"}),
        };
        let answer = json!({"apiVersion": review["apiVersion"], "kind": review["kind"], "status": status});
        Ok(WebhookAnswer { status: 200, body: Bytes::from(answer.to_string()), ..Default::default() })
    }));
    hooks
}

fn sent(hooks: &Rc<RefCell<Hooks>>, path: &str) -> Vec<Value> {
    hooks.borrow().sent.iter().filter(|(p, _)| p == path).map(|(_, r)| r.clone()).collect()
}

fn text(r: &kapi_sim::Response) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

#[test]
fn a_token_only_the_webhook_knows_is_whom_its_review_says_and_the_answer_is_kept() {
    let mut w = World::new(server_with_webhooks("AlwaysAllow"), epoch(), 1);
    let hooks = install(&mut w);
    let whoami = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let r = w.call_with_token(TOKEN, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", Some(whoami.clone()));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    assert_eq!(r.json()["status"]["userInfo"], json!({"username": "jane", "uid": "7", "groups": ["dev", "system:authenticated"]}));
    let reviews = sent(&hooks, "/authenticate");
    assert_eq!(reviews.len(), 1);
    assert_eq!(reviews[0]["apiVersion"], "authentication.k8s.io/v1");
    assert_eq!(reviews[0]["spec"], json!({"token": TOKEN, "audiences": ["https://kubernetes.default.svc.cluster.local"]}));

    // Kept for two minutes: not asked again until then.
    w.advance(SignedDuration::from_secs(100));
    assert_eq!(w.call_with_token(TOKEN, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", Some(whoami.clone())).head.status, 201);
    assert_eq!(sent(&hooks, "/authenticate").len(), 1);
    w.advance(SignedDuration::from_secs(20));
    assert_eq!(w.call_with_token(TOKEN, "GET", "/api/v1/namespaces", None).head.status, 200);
    assert_eq!(sent(&hooks, "/authenticate").len(), 2);

    // A token the webhook does not know is 401, and so is its refusal, kept.
    assert_eq!(w.call_with_token("nobody", "GET", "/api/v1/namespaces", None).head.status, 401);
    assert_eq!(w.call_with_token("nobody", "GET", "/api/v1/namespaces", None).head.status, 401);
    assert_eq!(sent(&hooks, "/authenticate").len(), 3);

    // A TokenReview asks the webhook too, for the audiences asked.
    let review = |token: &str, audiences: Value| json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token, "audiences": audiences}});
    let r = w.call(
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        "",
        Some(&review(TOKEN, json!(["https://kubernetes.default.svc.cluster.local"]))),
        "application/json",
    );
    assert_eq!(r.head.status, 201, "{}", text(&r));
    assert_eq!(
        r.json()["status"],
        json!({"authenticated": true, "user": {"username": "jane", "uid": "7", "groups": ["dev", "system:authenticated"]}, "audiences": ["https://kubernetes.default.svc.cluster.local"]})
    );
    let r = w.call("POST", "/apis/authentication.k8s.io/v1/tokenreviews", "", Some(&review("nobody", json!([]))), "application/json");
    assert_eq!(r.json()["status"], json!({"user": {}, "error": "invalid bearer token"}));
    // An audience the webhook does not vouch for (it names none: the API server's count).
    let r = w.call("POST", "/apis/authentication.k8s.io/v1/tokenreviews", "", Some(&review(TOKEN, json!(["vault"]))), "application/json");
    assert_eq!(r.json()["status"], json!({"user": {}, "error": "invalid bearer token"}));

    // A webhook that cannot be reached: 401, never anonymous; the TokenReview says why.
    w.webhook = None;
    assert_eq!(w.call_with_token("another", "GET", "/api/v1/namespaces", None).head.status, 401);
    let r = w.call("POST", "/apis/authentication.k8s.io/v1/tokenreviews", "", Some(&review("another", json!([]))), "application/json");
    assert_eq!(r.json()["status"]["error"], "Post \"https://127.0.0.1:9443/authenticate?timeout=30s\": dial tcp: connect: connection refused");
}

#[test]
fn what_rbac_does_not_allow_the_webhook_decides_and_its_failure_is_a_500() {
    let mut w = World::new(server_with_webhooks("RBAC,Webhook"), epoch(), 2);
    let hooks = install(&mut w);
    let r = w.call_with_token(TOKEN, "GET", "/api/v1/namespaces/default/pods", None);
    assert_eq!(r.head.status, 200, "{}", text(&r));
    let reviews = sent(&hooks, "/authorize");
    assert_eq!(reviews.len(), 1);
    assert_eq!(
        reviews[0],
        json!({"kind": "SubjectAccessReview", "apiVersion": "authorization.k8s.io/v1", "metadata": {"creationTimestamp": null},
            "spec": {"resourceAttributes": {"namespace": "default", "verb": "list", "version": "v1", "resource": "pods"}, "user": "jane",
                "groups": ["dev", "system:authenticated"], "uid": "7"},
            "status": {"allowed": false}})
    );
    // Allowed answers are kept five minutes.
    w.advance(SignedDuration::from_secs(299));
    assert_eq!(w.call_with_token(TOKEN, "GET", "/api/v1/namespaces/default/pods", None).head.status, 200);
    assert_eq!(sent(&hooks, "/authorize").len(), 1);

    // RBAC allows what it allows without the webhook (discovery, to everyone authenticated).
    assert_eq!(w.call_with_token(TOKEN, "GET", "/api", None).head.status, 200);
    assert_eq!(sent(&hooks, "/authorize").len(), 1);

    // A denial is a 403 with the webhook's reason.
    let r = w.call_with_token(TOKEN, "DELETE", "/api/v1/namespaces/default/configmaps/x", None);
    assert_eq!(r.head.status, 403);
    assert_eq!(
        r.json()["message"],
        "configmaps \"x\" is forbidden: User \"jane\" cannot delete resource \"configmaps\" in API group \"\" in the namespace \"default\": jane never deletes"
    );

    // The webhook down: what it would decide is a 500, kube's plain-text internal error; what it
    // decided lately still holds.
    hooks.borrow_mut().down = true;
    let r = w.call_with_token(TOKEN, "GET", "/api/v1/namespaces/default/secrets", None);
    assert_eq!((r.head.status, text(&r)), (500, "Internal Server Error: \"/api/v1/namespaces/default/secrets\": Post \"https://127.0.0.1:9443/authorize?timeout=30s\": dial tcp: connect: connection refused\n".to_string()));
    assert_eq!(w.call_with_token(TOKEN, "GET", "/api/v1/namespaces/default/pods", None).head.status, 200);
    hooks.borrow_mut().down = false;

    // can-i: the same chain; a rules review cannot list the webhook's rules.
    let ssar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {"resourceAttributes": {"verb": "delete", "resource": "pods", "namespace": "default"}}});
    let r = w.call_with_token(TOKEN, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", Some(ssar));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    assert_eq!(r.json()["status"], json!({"allowed": false, "denied": true, "reason": "jane never deletes"}));
    let ssrr = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}});
    let r = w.call_with_token(TOKEN, "POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", Some(ssrr));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    assert_eq!(
        (r.json()["status"]["incomplete"].clone(), r.json()["status"]["evaluationError"].clone()),
        (json!(true), json!("webhook authorizer does not support user rule resolution"))
    );
}

#[test]
fn the_webhook_authorizes_impersonation_and_binding_a_role_jane_does_not_hold() {
    let mut w = World::new(server_with_webhooks("RBAC,Webhook"), epoch(), 3);
    let hooks = install(&mut w);
    let mut req = kapi_core::pipeline::Request {
        method: "GET".into(),
        path: "/api/v1/namespaces/default/configmaps".into(),
        headers: vec![("Authorization".into(), format!("Bearer {TOKEN}")), ("Impersonate-User".into(), "bob".into())],
        ..Default::default()
    };
    // jane may impersonate bob (the webhook allows it); bob may not list config maps.
    let r = w.request(req.clone());
    assert_eq!(r.head.status, 403, "{}", text(&r));
    assert!(text(&r).contains("User \\\"bob\\\" cannot list resource \\\"configmaps\\\""), "{}", text(&r));
    let verbs: Vec<Value> = sent(&hooks, "/authorize").iter().map(|r| r["spec"]["resourceAttributes"]["verb"].clone()).collect();
    assert_eq!(verbs, vec![json!("impersonate"), json!("list")]);
    req.headers[1].1 = "jane".into();
    assert_eq!(w.request(req).head.status, 200);

    // RBAC grants jane nothing; the webhook lets her bind cluster-admin.
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "jane-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}, "subjects": [{"kind": "User", "name": "jane"}]});
    let r = w.call_with_token(TOKEN, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", Some(binding));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    let bind = sent(&hooks, "/authorize").into_iter().find(|r| r["spec"]["resourceAttributes"]["verb"] == "bind").expect("bind asked");
    assert_eq!(
        bind["spec"]["resourceAttributes"],
        json!({"verb": "bind", "group": "rbac.authorization.k8s.io", "resource": "clusterroles", "name": "cluster-admin"})
    );
}

#[test]
fn label_selectors_are_told_to_the_webhook_as_kube_tells_them() {
    let mut w = World::new(server_with_webhooks("Webhook"), epoch(), 4);
    let hooks = install(&mut w);
    // A list's: by key, `=` and `in` as In (values sorted, once), `!` as DoesNotExist, `>` left out.
    let r = w.request(kapi_core::pipeline::Request {
        method: "GET".into(),
        path: "/api/v1/namespaces/default/pods".into(),
        query: "labelSelector=tier%20in%20(b%2Ca%2Ca)%2Capp%3Dweb%2Cx%3E3%2C!gone".into(),
        headers: vec![("Authorization".into(), format!("Bearer {TOKEN}"))],
        ..Default::default()
    });
    assert_eq!(r.head.status, 200, "{}", text(&r));
    let reviews = sent(&hooks, "/authorize");
    assert_eq!(
        reviews[0]["spec"]["resourceAttributes"]["labelSelector"],
        json!({"requirements": [{"key": "app", "operator": "In", "values": ["web"]}, {"key": "gone", "operator": "DoesNotExist"},
            {"key": "tier", "operator": "In", "values": ["a", "b"]}]})
    );

    // A review's: its requirements that do not convert are dropped and the status says so;
    // what is left is what the webhook is told.
    let review = |selector: Value| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "default", "labelSelector": selector}}})
    };
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let selector = json!({"requirements": [{"key": "app", "operator": "NotIn", "values": ["db"]}, {"key": "x", "operator": "Gt", "values": ["3"]}]});
    let r = w.call_with_token(TOKEN, "POST", path, Some(review(selector)));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    assert_eq!(
        r.json()["status"],
        json!({"allowed": true, "reason": "jane may", "evaluationError": "spec.resourceAttributes.labelSelector partially ignored due to parse error"})
    );
    let told = sent(&hooks, "/authorize").pop().unwrap();
    assert_eq!(told["spec"]["resourceAttributes"]["labelSelector"], json!({"requirements": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}));
    let r = w.call_with_token(TOKEN, "POST", path, Some(review(json!({"rawSelector": "app in"}))));
    assert_eq!(r.json()["status"]["evaluationError"], "spec.resourceAttributes.labelSelector ignored due to parse error");

    // Requirements are checked as labels are.
    let selector = json!({"requirements": [{"key": "-bad", "operator": "Exists"}, {"key": "app", "operator": "In", "values": ["a b"]}]});
    let r = w.call_with_token(TOKEN, "POST", path, Some(review(selector)));
    assert_eq!(r.head.status, 422);
    let message = r.json()["message"].as_str().unwrap().to_string();
    assert!(message.starts_with("SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: [spec.resourceAttributes.labelSelector.requirements[0].key: Invalid value: \"-bad\": name part must consist of"), "{message}");
    assert!(message.contains("spec.resourceAttributes.labelSelector.requirements[1].values[0]: Invalid value: \"a b\": a valid label must be"), "{message}");
}

/// A webhook entry of an authorization configuration.
fn webhook_entry(name: &str, failure: &str, condition: &str) -> String {
    format!(
        "- type: Webhook\n  name: {name}\n  webhook:\n    timeout: 3s\n    subjectAccessReviewVersion: v1\n    matchConditionSubjectAccessReviewVersion: v1\n    failurePolicy: {failure}\n    connectionInfo:\n      type: KubeConfigFile\n      kubeConfigFile: /{name}\n    matchConditions:\n    - expression: \"{condition}\"\n"
    )
}

#[test]
fn an_authorization_config_asks_each_webhook_its_conditions_pick_and_fails_as_its_policy_says() {
    let config = format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\nauthorizers:\n- type: RBAC\n  name: rbac\n{}{}",
        webhook_entry("dev", "Deny", "request.resourceAttributes.namespace == 'dev'"),
        webhook_entry("authorize", "NoOpinion", "has(request.resourceAttributes)"),
    );
    let mut w = World::new(server_with_authorization_config(&config), epoch(), 5);
    let hooks = install(&mut w);
    let timeouts = Rc::new(RefCell::new(Vec::new()));
    let (seen, mut inner) = (timeouts.clone(), w.webhook.take().unwrap());
    w.webhook = Some(Box::new(move |call| {
        seen.borrow_mut().push((call.path.clone(), call.timeout));
        inner(call)
    }));

    // In dev, the first webhook decides (it allows jane), asked within its 3 s.
    let r = w.call_with_token(TOKEN, "GET", "/api/v1/namespaces/dev/pods", None);
    assert_eq!(r.head.status, 200, "{}", text(&r));
    assert_eq!(sent(&hooks, "/dev").len(), 1);
    assert!(timeouts.borrow().contains(&("/dev?timeout=3s".to_string(), SignedDuration::from_secs(3))), "{:?}", timeouts.borrow());
    // Elsewhere its condition is false: the next webhook is asked.
    assert_eq!(w.call_with_token(TOKEN, "GET", "/api/v1/namespaces/default/pods", None).head.status, 200);
    assert_eq!((sent(&hooks, "/dev").len(), sent(&hooks, "/authorize").len()), (1, 1));

    // A non-resource request: the first condition fails to evaluate, and its policy (Deny)
    // says the chain's last word, with the error: kube's 500.
    let r = w.call_with_token(TOKEN, "GET", "/metrics", None);
    assert_eq!(
        (r.head.status, text(&r)),
        (
            500,
            "Internal Server Error: \"/metrics\": cel evaluation error: expression 'request.resourceAttributes.namespace == 'dev'' resulted in error: no such key: resourceAttributes\n"
                .to_string()
        )
    );

    // The second webhook down (NoOpinion): no one allows, and the error makes it a 500; what
    // RBAC allows is allowed all the same.
    hooks.borrow_mut().down = true;
    let r = w.call_with_token(TOKEN, "GET", "/api/v1/namespaces/default/secrets", None);
    assert_eq!(r.head.status, 500, "{}", text(&r));
    assert_eq!(w.call_with_token(TOKEN, "GET", "/api", None).head.status, 200);

    // The chain swapped as a reload swaps it: the next request meets the new one, whose
    // webhooks start with no decisions kept.
    let reloaded = format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\nauthorizers:\n- type: RBAC\n  name: rbac\n{}",
        webhook_entry("dev", "NoOpinion", "request.user == 'bob'")
    );
    let next = server_with_authorization_config(&reloaded);
    w.server.authorizer.store(next.server.authorizer.load_full());
    let r = w.call_with_token(TOKEN, "GET", "/api/v1/namespaces/dev/pods", None);
    assert_eq!(r.head.status, 403, "{}", text(&r));
    assert_eq!(sent(&hooks, "/dev").len(), 1, "jane is not bob: no webhook is asked");
}

/// A world whose webhooks `install` answers, authorizing with RBAC then the webhook, with
/// OwnerReferencesPermissionEnforcement and EventRateLimit (two Events a namespace at once).
fn world_asking_during_writes(seed: u64) -> (World, Rc<RefCell<Hooks>>) {
    let mut setup = server_with_webhooks("RBAC,Webhook");
    let plugins = ["OwnerReferencesPermissionEnforcement".to_string(), "EventRateLimit".to_string()];
    let limits = b"apiVersion: eventratelimit.admission.k8s.io/v1alpha1\nkind: Configuration\nlimits: [{type: Namespace, qps: 1, burst: 2}]\n";
    let configs = std::collections::BTreeMap::from([("EventRateLimit".to_string(), limits.to_vec())]);
    let chain = kapi_core::admission::Chain::from_flags(&plugins, &[], &configs, &kapi_core::admission::no_files).expect("a valid chain");
    std::sync::Arc::get_mut(&mut setup.server).expect("not shared yet").admission = std::sync::Arc::new(chain);
    let mut w = World::new(setup, epoch(), seed);
    let hooks = install(&mut w);
    (w, hooks)
}

#[test]
fn admission_plugins_ask_the_webhook_during_the_write() {
    // OwnerReferencesPermissionEnforcement asks the chain about the owner's finalizers and
    // the object's delete; what RBAC does not allow jane, the webhook is asked while the write
    // waits (kube's plugins call the authorizer during admission).
    let (mut w, hooks) = world_asking_during_writes(3);
    let configmaps = "/api/v1/namespaces/default/configmaps";
    let owner = w.call_with_token(TOKEN, "POST", configmaps, Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}})));
    assert_eq!(owner.head.status, 201, "{}", text(&owner));
    let reference = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.json()["metadata"]["uid"], "blockOwnerDeletion": true}]);
    let child = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "child", "ownerReferences": reference}});
    let r = w.call_with_token(TOKEN, "POST", configmaps, Some(child));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    let asked = |verb: &str, subresource: &str| {
        let attributes = |r: &Value, field: &str| r["spec"]["resourceAttributes"][field].as_str().unwrap_or_default().to_string();
        sent(&hooks, "/authorize").iter().any(|r| attributes(r, "verb") == verb && attributes(r, "subresource") == subresource)
    };
    assert!(asked("update", "finalizers"), "{:?}", sent(&hooks, "/authorize"));

    // Changing an object's owner references needs its delete, which the webhook denies jane.
    let mut changed = w.call_with_token(TOKEN, "GET", &format!("{configmaps}/owner"), None).json();
    changed["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "child", "uid": r.json()["metadata"]["uid"]}]);
    let r = w.call_with_token(TOKEN, "PUT", &format!("{configmaps}/owner"), Some(changed));
    assert_eq!(r.head.status, 403, "{}", text(&r));
    assert_eq!(r.json()["message"], "configmaps \"owner\" is forbidden: cannot set an ownerRef on a resource you can't delete: jane never deletes, <nil>");
    assert!(asked("delete", ""));
}

#[test]
fn a_webhook_failing_for_a_while_is_tried_again_as_kube_tries_it() {
    // kube's generic webhook client: a 5xx is tried again after 500 ms, then 750 ms (each plus
    // up to a fifth), up to five tries; the request waits meanwhile.
    let mut w = World::new(server_with_webhooks("RBAC,Webhook"), epoch(), 4);
    let hooks = install(&mut w);
    hooks.borrow_mut().busy = 2;
    let start = w.now();
    let r = w.call_with_token(TOKEN, "GET", "/api/v1/namespaces/default/pods", None);
    assert_eq!(r.head.status, 200, "{}", text(&r));
    // The token's review tried three times, then the authorization's once.
    assert_eq!((sent(&hooks, "/authenticate").len(), sent(&hooks, "/authorize").len()), (3, 1));
    let waited = w.now().duration_since(start).as_secs_f64();
    assert!((1.25..=1.5).contains(&waited), "waited {waited} s");
    // Five failures: the last one's error is the answer (authorization's: kube's 500).
    hooks.borrow_mut().busy = 5;
    let r = w.call_with_token(TOKEN, "GET", "/api/v1/namespaces/default/secrets", None);
    assert_eq!(sent(&hooks, "/authorize").len(), 6);
    assert_eq!(
        (r.head.status, text(&r)),
        (
            500,
            "Internal Server Error: \"/api/v1/namespaces/default/secrets\": an error on the server (\"busy\") has prevented the request from succeeding\n"
                .to_string()
        )
    );
}

#[test]
fn a_write_waiting_for_the_webhooks_answer_passes_the_plugins_before_once() {
    // EventRateLimit runs before OwnerReferencesPermissionEnforcement: an Event that waits for
    // the webhook's answer about its owner takes one token of the two, so a second one fits.
    let (mut w, hooks) = world_asking_during_writes(5);
    let events = "/api/v1/namespaces/default/events";
    let event = |name: &str| {
        let owner = json!([{"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "u-1", "blockOwnerDeletion": true}]);
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "ownerReferences": owner},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web"}, "reason": "Started", "message": "m"})
    };
    let before = sent(&hooks, "/authorize").len();
    let r = w.call_with_token(TOKEN, "POST", events, Some(event("a")));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    assert!(sent(&hooks, "/authorize").len() > before + 1, "the write asked the webhook");
    let r = w.call_with_token(TOKEN, "POST", events, Some(event("b")));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    let r = w.call_with_token(TOKEN, "POST", events, Some(event("c")));
    assert_eq!(r.head.status, 429, "{}", text(&r));
}

/// An administrator's create of `body` at `path`.
fn admin(w: &mut World, path: &str, body: Value) {
    let r = w.call("POST", path, "", Some(&body), "application/json");
    assert_eq!(r.head.status, 201, "{}", text(&r));
}

/// A validating admission policy with `validations` on writes `rules` covers, and its binding
/// of the same name with the validation action `action`.
fn validating_policy(w: &mut World, name: &str, rules: Value, validations: Value, action: &str) {
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
        "spec": {"matchConstraints": rules, "validations": validations}});
    admin(w, "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies", policy);
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": [action]}});
    admin(w, "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings", binding);
}

#[test]
fn admission_expressions_ask_the_authorizer_and_wait_for_the_webhook() {
    // kube gives a policy's expressions and a webhook's match conditions its authorizer:
    // what RBAC does not allow jane, the webhook decides while the write waits.
    let mut w = World::new(server_with_webhooks("RBAC,Webhook"), epoch(), 6);
    let hooks = install(&mut w);
    let configmaps = json!({"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]});
    let validations = json!([
        {"expression": "authorizer.group('').resource('secrets').namespace(request.namespace).name(object.metadata.name).check('get').allowed()", "message": "reads secrets"},
        {"expression": "authorizer.requestResource.check('delete').reason() == 'jane never deletes' || request.userInfo.username != 'jane'"},
        {"expression": "!authorizer.serviceAccount('default', 'builder').path('/healthz').check('get').allowed()"},
    ]);
    validating_policy(&mut w, "readers", configmaps, validations, "Deny");
    let hook = json!({"name": "deleters.example.com", "clientConfig": {"url": "https://hooks.example/admit"}, "sideEffects": "None",
        "admissionReviewVersions": ["v1"], "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
        "matchConditions": [{"name": "may-delete", "expression": "authorizer.requestResource.check('delete').allowed()"}]});
    let configuration = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "deleters"}, "webhooks": [hook]});
    admin(&mut w, "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", configuration);

    let configmaps = "/api/v1/namespaces/default/configmaps";
    let r = w.call_with_token(TOKEN, "POST", configmaps, Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "jane"}})));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    let attributes = |r: &Value| {
        let a = &r["spec"]["resourceAttributes"];
        [&a["verb"], &a["resource"], &a["namespace"], &a["name"], &a["version"]].map(|v| v.as_str().unwrap_or_default().to_string())
    };
    let asked: Vec<[String; 5]> = sent(&hooks, "/authorize").iter().map(attributes).collect();
    assert!(asked.contains(&["get", "secrets", "default", "jane", "*"].map(String::from)), "{asked:?}");
    assert!(asked.contains(&["delete", "configmaps", "default", "jane", "*"].map(String::from)), "{asked:?}");
    // The service account is asked about too, as itself.
    assert!(sent(&hooks, "/authorize").iter().any(|r| r["spec"]["user"] == "system:serviceaccount:default:builder"));
    // Jane may not delete, so her write is not the admission webhook's; an administrator's is.
    assert!(sent(&hooks, "/admit").is_empty());
    let r = w.call("POST", configmaps, "", Some(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "admin"}})), "application/json");
    assert_eq!(r.head.status, 201, "{}", text(&r));
    assert_eq!(sent(&hooks, "/admit").len(), 1);

    // The webhook does not answer (a secret of another name is not in its cache): jane's
    // check is its error, and the policy denies.
    hooks.borrow_mut().down = true;
    let r = w.call_with_token(TOKEN, "POST", configmaps, Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "down"}})));
    assert_eq!(r.head.status, 422, "{}", text(&r));
    assert_eq!(
        r.json()["message"],
        "configmaps \"down\" is forbidden: ValidatingAdmissionPolicy 'readers' with binding 'readers' denied request: reads secrets"
    );
}

#[test]
fn who_may_read_a_policys_params_the_webhook_decides_while_the_write_waits() {
    let mut w = World::new(server_with_webhooks("RBAC,Webhook"), epoch(), 7);
    let hooks = install(&mut w);
    let configmaps = json!({"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]});
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "p"},
        "spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}, "matchConstraints": configmaps, "validations": [{"expression": "true"}]}});
    let r = w.call_with_token(TOKEN, "POST", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies", Some(policy));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    let asked = |verb: &str| {
        sent(&hooks, "/authorize").iter().any(|r| {
            let a = &r["spec"]["resourceAttributes"];
            a["verb"] == verb && a["resource"] == "configmaps" && a["version"] == "v1"
        })
    };
    assert!(asked("get"), "{:?}", sent(&hooks, "/authorize"));
    // A binding selecting its params needs their list.
    let binding = |name: &str, namespace: &str| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
            "spec": {"policyName": "p", "validationActions": ["Deny"], "paramRef": {"selector": {}, "namespace": namespace, "parameterNotFoundAction": "Allow"}}})
    };
    let bindings = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
    let r = w.call_with_token(TOKEN, "POST", bindings, Some(binding("b", "default")));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    assert!(asked("list"));
    // The webhook does not answer now: jane's create is allowed by its kept answer, the list
    // of another namespace's configmaps is not decided; kube's refusal is the error then.
    hooks.borrow_mut().down = true;
    let r = w.call_with_token(TOKEN, "POST", bindings, Some(binding("c", "kube-system")));
    assert_eq!(r.head.status, 422, "{}", text(&r));
    let message = r.json()["message"].as_str().unwrap_or_default().to_string();
    let error = r#"Post "https://127.0.0.1:9443/authorize?timeout=30s": dial tcp: connect: connection refused"#;
    assert!(message.ends_with(&format!("spec.paramRef: Forbidden: {error}")), "{message}");
}

#[test]
fn a_create_a_mutating_policy_waits_for_keeps_its_object_and_warns_once() {
    // The authorization webhook asked from a mutating policy's mutation: the create runs again
    // from its start with the answer, on the object it was sent; a binding that warns warns
    // of what the policy found with the answer only.
    let mut w = World::new(with_mutating_policies(server_with_webhooks("RBAC,Webhook")), epoch(), 8);
    let hooks = install(&mut w);
    let rules = json!({"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]});
    let annotate = "Object{metadata: Object.metadata{annotations: {\
        'may-read': string(authorizer.group('').resource('secrets').namespace(request.namespace).check('get').allowed()),\
        'may-delete': string(authorizer.requestResource.check('delete').allowed())}}}";
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicy", "metadata": {"name": "who"},
        "spec": {"matchConstraints": rules, "reinvocationPolicy": "Never", "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": annotate}}]}});
    admin(&mut w, "/apis/admissionregistration.k8s.io/v1alpha1/mutatingadmissionpolicies", policy);
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": "who"},
        "spec": {"policyName": "who"}});
    admin(&mut w, "/apis/admissionregistration.k8s.io/v1alpha1/mutatingadmissionpolicybindings", binding);
    let validations = json!([{"expression": "!authorizer.group('').resource('secrets').namespace(request.namespace).name('other').check('get').allowed()",
        "message": "reads other secrets"}]);
    validating_policy(&mut w, "warn", rules, validations, "Warn");

    let sent_map = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"team": "a"}}, "data": {"k": "v"}});
    let r = w.call_with_token(TOKEN, "POST", "/api/v1/namespaces/default/configmaps", Some(sent_map));
    assert_eq!(r.head.status, 201, "{}", text(&r));
    let made = r.json();
    assert_eq!((&made["metadata"]["annotations"]["may-read"], &made["metadata"]["annotations"]["may-delete"]), (&json!("true"), &json!("false")));
    assert_eq!((&made["metadata"]["labels"]["team"], &made["data"]["k"]), (&json!("a"), &json!("v")));
    let warnings: Vec<&String> = r.head.headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case("Warning")).map(|(_, v)| v).collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].ends_with("Validation failed for ValidatingAdmissionPolicy 'warn' with binding 'warn': reads other secrets\""), "{warnings:?}");
    assert!(sent(&hooks, "/authorize").iter().any(|r| r["spec"]["resourceAttributes"]["name"] == "other"));
}
