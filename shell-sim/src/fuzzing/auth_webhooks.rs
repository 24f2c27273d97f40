//! The authentication and authorization webhooks under fuzzing: a server under `RBAC,Webhook`
//! (or, every second world, an `--authorization-config` whose webhook CEL match conditions
//! pick) with a token webhook, whose stand-in webhooks answer anything (any status and body, a
//! review with `authenticated`, `user`, `audiences`, `error`, `allowed`, `denied` and `reason`
//! of any type, or no answer), while requests come with unknown tokens, impersonation, and as
//! TokenReviews and SelfSubjectAccessReviews. Whatever the webhooks say, no input may panic,
//! every request is answered with a known status, and what neither webhook ever vouched for
//! never passes: a token the authentication webhook never called authenticated is always 401
//! and never reviewed as authenticated; while the authorization webhook never allowed anything,
//! no request for secrets (which RBAC grants no webhook user) succeeds.

use std::cell::RefCell;
use std::rc::Rc;

use arbitrary::{Arbitrary, Unstructured};
use bytes::Bytes;
use jiff::SignedDuration;
use kapi_core::pipeline::Request;
use kapi_core::webhook::{WebhookAnswer, WebhookCall};
use serde_json::{Value, json};

use super::{KeptWorld, with_world_in};
use crate::{World, epoch, server_with_authorization_config, server_with_webhooks};

const TOKENS: &[&str] = &["t1", "t2", "t3"];
const USERS: &[&str] = &["jane", "system:admin", "", "system:serviceaccount:default:robot"];
const GROUPS: &[&str] = &["dev", "system:nodes", "system:authenticated", ""];
const AUDIENCES: &[&str] = &["https://kubernetes.default.svc.cluster.local", "vault", ""];
const PATHS: &[&str] = &[
    "/api/v1/namespaces/default/secrets",
    "/api/v1/namespaces/default/configmaps",
    "/api/v1/namespaces/default/configmaps/x",
    "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "/healthz",
    "/metrics",
];

fn pick<'a>(u: &mut Unstructured, from: &[&'a str]) -> arbitrary::Result<&'a str> {
    Ok(from[u.choose_index(from.len())?])
}

/// A JSON value of any type, its strings drawn from `from`.
fn any(u: &mut Unstructured, from: &[&str]) -> arbitrary::Result<Value> {
    Ok(match u.int_in_range(0u8..=6)? {
        0 => Value::Null,
        1 => json!(bool::arbitrary(u)?),
        2 => json!(i64::arbitrary(u)?),
        3 => json!([pick(u, from)?, pick(u, from)?]),
        4 => json!({pick(u, from)?: [pick(u, from)?]}),
        _ => json!(pick(u, from)?),
    })
}

/// One answer of a stand-in webhook.
fn answer(u: &mut Unstructured) -> arbitrary::Result<Result<WebhookAnswer, String>> {
    let status: u16 = if u.ratio(7, 8)? { 200 } else { u.arbitrary()? };
    let body = match u.int_in_range(0u8..=4)? {
        0 => return Ok(Err("dial tcp: connect: connection refused".into())),
        1 => Bytes::from(Vec::<u8>::arbitrary(u)?),
        _ => {
            let mut st = serde_json::Map::new();
            for (k, from) in [
                ("authenticated", &[][..]),
                ("allowed", &[][..]),
                ("denied", &[][..]),
                ("user", USERS),
                ("audiences", AUDIENCES),
                ("error", &["expired", ""][..]),
                ("reason", &["because", ""][..]),
            ] {
                if u.arbitrary()? {
                    let v = match k {
                        "user" if u.arbitrary()? => {
                            json!({"username": any(u, USERS)?, "uid": any(u, USERS)?, "groups": any(u, GROUPS)?, "extra": any(u, GROUPS)?})
                        }
                        "authenticated" | "allowed" | "denied" if u.ratio(3, 4)? => json!(bool::arbitrary(u)?),
                        _ => any(u, from)?,
                    };
                    st.insert(k.into(), v);
                }
            }
            let status = if u.ratio(7, 8)? { Value::Object(st) } else { any(u, USERS)? };
            Bytes::from(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "status": status}).to_string())
        }
    };
    Ok(Ok(WebhookAnswer { status, body, ..Default::default() }))
}

/// What the stand-in webhooks have said so far.
#[derive(Default)]
struct Said {
    answers: Vec<Result<WebhookAnswer, String>>,
    next: usize,
    /// Tokens the authentication webhook was sent with an answer whose `authenticated` is true.
    vouched: Vec<String>,
    /// An authorization answer whose `allowed` was true.
    allowed: bool,
}

thread_local! {
    static WORLD: KeptWorld = const { RefCell::new(None) };
    /// What the kept world's webhooks have said, over all its inputs.
    static SAID: RefCell<Rc<RefCell<Said>>> = RefCell::new(Rc::default());
}
/// Inputs served by one world before a fresh one (what its webhooks vouched for stays).
const INPUTS_PER_WORLD: u32 = 50;

/// Every second world's chain: RBAC, then the webhook for what its CEL match conditions
/// pick of the requests (reading their users, groups, attributes and selectors), its failures
/// denying.
const CONDITIONAL: &str = r#"
apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
- type: RBAC
  name: rbac
- type: Webhook
  name: authorize
  webhook:
    timeout: 5s
    subjectAccessReviewVersion: v1
    matchConditionSubjectAccessReviewVersion: v1
    failurePolicy: Deny
    connectionInfo:
      type: KubeConfigFile
      kubeConfigFile: /authorize
    matchConditions:
    - expression: "request.user != '' && !request.groups.exists(g, g == 'system:nodes')"
    - expression: "has(request.resourceAttributes) ? request.resourceAttributes.namespace != 'kube-system' && request.resourceAttributes.?labelSelector.requirements.orValue([]).size() < 3 : request.nonResourceAttributes.path.startsWith('/')"
"#;

thread_local! {
    /// Worlds made so far.
    static WORLDS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// A fresh world whose stand-in webhooks answer from a fresh [`SAID`].
fn world() -> World {
    let said = Rc::new(RefCell::new(Said::default()));
    SAID.with(|s| *s.borrow_mut() = said.clone());
    let conditional = WORLDS.with(|n| n.replace(n.get() + 1)) % 2 == 1;
    let setup = if conditional { server_with_authorization_config(CONDITIONAL) } else { server_with_webhooks("RBAC,Webhook") };
    let mut w = World::new(setup, epoch(), 5);
    w.webhook = Some(Box::new(move |call: &WebhookCall| {
        let mut s = said.borrow_mut();
        let answer = s.answers.get(s.next % s.answers.len().max(1)).cloned().unwrap_or(Err("no answer".into()));
        s.next += 1;
        let sent: Value = serde_json::from_slice(&call.body).expect("kapi sends JSON");
        let status = answer.as_ref().ok().and_then(|a| serde_json::from_slice::<Value>(&a.body).ok()).map(|b| b["status"].clone()).unwrap_or(Value::Null);
        if call.path.starts_with("/authenticate") && status["authenticated"] == json!(true) {
            let token = sent["spec"]["token"].as_str().unwrap_or_default().to_string();
            s.vouched.push(token);
        }
        if call.path.starts_with("/authorize") && status["allowed"] == json!(true) {
            s.allowed = true;
        }
        answer
    }));
    w
}

pub fn auth_webhooks(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(answers) = (0..u.int_in_range(1u8..=8).unwrap_or(1)).map(|_| answer(&mut u)).collect::<arbitrary::Result<Vec<_>>>() else { return };
    with_world_in(&WORLD, INPUTS_PER_WORLD, world, |w| {
        let said = SAID.with(|s| s.borrow().clone());
        said.borrow_mut().answers = answers;
        serve(w, &mut u, &said);
    });
}

/// Runs the requests of the rest of the input.
fn serve(w: &mut World, u: &mut Unstructured, said: &RefCell<Said>) {
    while !u.is_empty() {
        let Ok(op) = u.int_in_range(0u8..=4) else { return };
        let Ok(token) = pick(u, TOKENS) else { return };
        let vouched = said.borrow().vouched.iter().any(|t| t == token);
        match op {
            0 | 1 => {
                let Ok(path) = pick(u, PATHS) else { return };
                let method = if op == 0 { "GET" } else { "DELETE" };
                let mut headers = vec![("Authorization".to_string(), format!("Bearer {token}"))];
                if u.ratio(1, 4).unwrap_or(false) {
                    headers.push(("Impersonate-User".into(), pick(u, USERS).unwrap_or_default().into()));
                }
                let r = w.request(Request { method: method.into(), path: path.into(), headers, ..Default::default() });
                let code = r.head.status;
                assert!(matches!(code, 200 | 401 | 403 | 404 | 405 | 500), "{method} {path}: {code}");
                let vouched_now = said.borrow().vouched.iter().any(|t| t == token);
                assert!(vouched_now || code == 401, "a token the webhook never vouched for was let in ({code})");
                if path.ends_with("/secrets") && !said.borrow().allowed {
                    assert_ne!(code, 200, "secrets listed though no webhook ever allowed anything");
                }
            }
            2 => {
                let Ok(audience) = pick(u, AUDIENCES) else { return };
                let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token, "audiences": [audience]}});
                let r = w.call("POST", "/apis/authentication.k8s.io/v1/tokenreviews", "", Some(&review), "application/json");
                assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
                let vouched_now = said.borrow().vouched.iter().any(|t| t == token);
                assert!(vouched_now || r.json()["status"]["authenticated"] != json!(true), "a review vouched for a token the webhook never did");
            }
            3 => {
                let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {"resourceAttributes": {"verb": "get", "resource": "secrets"}}});
                let r = w.call_with_token(token, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", Some(review));
                assert!(matches!(r.head.status, 201 | 401 | 403 | 500), "{}", r.head.status);
                assert!(vouched || said.borrow().vouched.iter().any(|t| t == token) || r.head.status == 401);
            }
            _ => w.advance(SignedDuration::from_secs(i64::from(u.int_in_range(1u8..=200).unwrap_or(1)))),
        }
    }
}
