//! TokenRequest (`serviceaccounts/<name>/token`), as kube-apiserver answers it: a token signed
//! with the server's key for a service account that exists, with kube's claims, defaults,
//! bounds and bindings, and kube's refusals.

use base64::Engine;
use kapi_core::controllers::Enabled;
use kapi_sim::{Response, World, default_server, epoch, token_config};
use serde_json::{Value, json};

const ACCOUNTS: &str = "/api/v1/namespaces/default/serviceaccounts";

fn post(w: &mut World, path: &str, body: Value) -> Response {
    w.call("POST", path, "", Some(&body), "application/json")
}

fn request(spec: Value) -> Value {
    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
}

/// The claims of a token the server signed (checked with its key).
fn claims(token: &str) -> Value {
    Value::Object(kapi_core::serviceaccount::jwt::verify(token, &token_config().public_keys).expect("the server's key signed it"))
}

fn world() -> (World, Value) {
    let mut w = World::new(default_server(), epoch(), 5);
    let r = post(&mut w, ACCOUNTS, json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}}));
    assert_eq!(r.head.status, 201);
    let account = r.json();
    (w, account)
}

#[test]
fn a_token_is_signed_for_an_existing_service_account_with_kubes_claims() {
    let (mut w, account) = world();
    let r = post(&mut w, &format!("{ACCOUNTS}/robot/token"), request(json!({})));
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let answer = r.json();
    assert_eq!(answer["kind"], "TokenRequest");
    assert_eq!((answer["metadata"]["name"].as_str(), answer["metadata"]["namespace"].as_str()), (Some("robot"), Some("default")));
    assert_eq!(answer["spec"], json!({"audiences": ["https://kubernetes.default.svc.cluster.local"], "expirationSeconds": 3600}));
    let token = answer["status"]["token"].as_str().unwrap();
    let c = claims(token);
    assert_eq!(c["sub"], "system:serviceaccount:default:robot");
    assert_eq!(c["iss"], "https://kubernetes.default.svc.cluster.local");
    assert_eq!(c["aud"], json!(["https://kubernetes.default.svc.cluster.local"]));
    assert_eq!(c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap(), 3600);
    assert_eq!(c["nbf"], c["iat"]);
    assert_eq!(c["kubernetes.io"], json!({"namespace": "default", "serviceaccount": {"name": "robot", "uid": account["metadata"]["uid"]}}));
    assert_eq!(c["jti"].as_str().unwrap().len(), 36);
    let expires: jiff::Timestamp = answer["status"]["expirationTimestamp"].as_str().unwrap().parse().unwrap();
    assert_eq!(expires.as_second(), c["exp"].as_i64().unwrap());
    // The header names the key.
    let header = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token.split('.').next().unwrap()).unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&header).unwrap(), json!({"alg": "ES256", "kid": token_config().signing_key.kid}));

    // Audiences and lifetime as asked.
    let r = post(&mut w, &format!("{ACCOUNTS}/robot/token"), request(json!({"audiences": ["vault"], "expirationSeconds": 7200})));
    let c = claims(r.json()["status"]["token"].as_str().unwrap());
    assert_eq!((c["aud"].clone(), c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap()), (json!(["vault"]), 7200));
}

#[test]
fn kubes_refusals() {
    let (mut w, _) = world();
    let r = post(&mut w, &format!("{ACCOUNTS}/nobody/token"), request(json!({})));
    assert_eq!((r.head.status, r.json()["message"].clone()), (404, json!("serviceaccounts \"nobody\" not found")));
    let r = post(&mut w, &format!("{ACCOUNTS}/robot/token"), request(json!({"expirationSeconds": 5})));
    assert_eq!(r.head.status, 422);
    assert_eq!(
        r.json()["message"],
        "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 5: may not specify a duration less than 10 minutes"
    );
    let mut named = request(json!({}));
    named["metadata"] = json!({"name": "other"});
    let r = post(&mut w, &format!("{ACCOUNTS}/robot/token"), named);
    assert_eq!(
        r.json()["message"],
        "TokenRequest.authentication.k8s.io \"robot\" is invalid: metadata.name: Invalid value: \"other\": must match the service account name if specified"
    );
    let r = post(&mut w, &format!("{ACCOUNTS}/robot/token"), request(json!({"boundObjectRef": {"apiVersion": "v1", "kind": "ConfigMap", "name": "c"}})));
    assert_eq!((r.head.status, r.json()["message"].clone()), (400, json!("cannot bind token to object of type /v1, Kind=ConfigMap")));
}

#[test]
fn a_token_bound_to_a_pod_names_it_and_its_node() {
    let (mut w, _) = world();
    let node = post(&mut w, "/api/v1/nodes", json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})).json();
    let pod = |name: &str, account: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"serviceAccountName": account, "nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]}})
    };
    let r = post(&mut w, "/api/v1/namespaces/default/pods", pod("web", "robot"));
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let web = r.json();
    let bound = |uid: &str| request(json!({"expirationSeconds": 3607, "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": uid}}));
    let r = post(&mut w, &format!("{ACCOUNTS}/robot/token"), bound(web["metadata"]["uid"].as_str().unwrap()));
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let answer = r.json();
    let c = claims(answer["status"]["token"].as_str().unwrap());
    assert_eq!(c["kubernetes.io"]["pod"], json!({"name": "web", "uid": web["metadata"]["uid"]}));
    assert_eq!(c["kubernetes.io"]["node"], json!({"name": "n1", "uid": node["metadata"]["uid"]}));
    // What kubelets ask for lasts a year, warned about after the time asked; the answer says
    // the time asked.
    let iat = c["iat"].as_i64().unwrap();
    assert_eq!((c["exp"].as_i64().unwrap() - iat, c["kubernetes.io"]["warnafter"].as_i64().unwrap() - iat), (365 * 24 * 3600, 3607));
    let expires: jiff::Timestamp = answer["status"]["expirationTimestamp"].as_str().unwrap().parse().unwrap();
    assert_eq!(expires.as_second() - iat, 3607);

    let r = post(&mut w, &format!("{ACCOUNTS}/robot/token"), bound("not-its-uid"));
    assert_eq!(r.head.status, 409);
    assert_eq!(
        r.json()["message"],
        "Operation cannot be fulfilled on Pod \"web\": the UID in the bound object reference (not-its-uid) does not match the UID in record. The object might have been deleted and then recreated"
    );
    post(&mut w, ACCOUNTS, json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "other"}}));
    assert_eq!(post(&mut w, "/api/v1/namespaces/default/pods", pod("db", "other")).head.status, 201);
    let r = post(&mut w, &format!("{ACCOUNTS}/robot/token"), request(json!({"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "db"}})));
    assert_eq!(
        (r.head.status, r.json()["message"].clone()),
        (400, json!("cannot bind token for serviceaccount \"robot\" to pod running with different serviceaccount name."))
    );
    let r = post(&mut w, &format!("{ACCOUNTS}/robot/token"), request(json!({"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "gone"}})));
    assert_eq!((r.head.status, r.json()["message"].clone()), (404, json!("pods \"gone\" not found")));

    // A pod on a node that does not exist names the node without its uid.
    let mut lost = pod("lost", "robot");
    lost["spec"]["nodeName"] = json!("n9");
    assert_eq!(post(&mut w, "/api/v1/namespaces/default/pods", lost).head.status, 201);
    let r = post(&mut w, &format!("{ACCOUNTS}/robot/token"), request(json!({"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "lost"}})));
    assert_eq!(claims(r.json()["status"]["token"].as_str().unwrap())["kubernetes.io"]["node"], json!({"name": "n9"}));
}

fn whoami(w: &mut World, token: &str) -> Response {
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    w.call_with_token(token, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", Some(review))
}

fn token(w: &mut World, spec: Value) -> String {
    let r = post(w, &format!("{ACCOUNTS}/robot/token"), request(spec));
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    r.json()["status"]["token"].as_str().unwrap().to_string()
}

#[test]
fn a_token_authenticates_as_its_service_account_while_what_it_names_exists() {
    let (mut w, account) = world();
    let t = token(&mut w, json!({}));
    let r = whoami(&mut w, &t);
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let user = &r.json()["status"]["userInfo"];
    assert_eq!(user["username"], "system:serviceaccount:default:robot");
    assert_eq!(user["uid"], account["metadata"]["uid"]);
    assert_eq!(user["groups"], json!(["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]));
    let jti = claims(&t)["jti"].as_str().unwrap().to_string();
    assert_eq!(user["extra"]["authentication.kubernetes.io/credential-id"], json!([format!("JTI={jti}")]));
    assert_eq!(w.call_with_token(&t, "GET", "/api/v1/namespaces/default/configmaps", None).head.status, 200);

    // Bound to a pod: the pod and its node are in the user's extra, until the pod is gone.
    post(&mut w, "/api/v1/nodes", json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}));
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": {"serviceAccountName": "robot", "nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]}});
    let web = post(&mut w, "/api/v1/namespaces/default/pods", pod).json();
    let bound = token(&mut w, json!({"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "web"}}));
    let extra = whoami(&mut w, &bound).json()["status"]["userInfo"]["extra"].clone();
    assert_eq!(extra["authentication.kubernetes.io/pod-name"], json!(["web"]));
    assert_eq!(extra["authentication.kubernetes.io/pod-uid"], json!([web["metadata"]["uid"]]));
    assert_eq!(extra["authentication.kubernetes.io/node-name"], json!(["n1"]));
    assert_eq!(w.call("DELETE", "/api/v1/namespaces/default/pods/web", "gracePeriodSeconds=0", None, "").head.status, 200);
    assert_eq!(whoami(&mut w, &bound).head.status, 201, "its answer is kept 10 s, as kube keeps it");
    w.advance(jiff::SignedDuration::from_secs(10));
    assert_eq!(whoami(&mut w, &bound).head.status, 401, "the pod it was bound to is gone");
    assert_eq!(whoami(&mut w, &t).head.status, 201, "an unbound token still works");

    // An account made again is another account.
    assert_eq!(w.call("DELETE", &format!("{ACCOUNTS}/robot"), "", None, "").head.status, 200);
    w.advance(jiff::SignedDuration::from_secs(10));
    assert_eq!(whoami(&mut w, &t).head.status, 401);
    post(&mut w, ACCOUNTS, json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}}));
    assert_eq!(whoami(&mut w, &t).head.status, 401);
    let fresh = token(&mut w, json!({}));
    assert_eq!(whoami(&mut w, &fresh).head.status, 201);
}

#[test]
fn a_token_that_does_not_check_is_refused() {
    let (mut w, _) = world();
    let t = token(&mut w, json!({}));
    // Meant for another audience.
    let vault = token(&mut w, json!({"audiences": ["vault"]}));
    assert_eq!(whoami(&mut w, &vault).head.status, 401);
    // Changed, or signed with another key.
    let mut parts: Vec<String> = t.split('.').map(str::to_string).collect();
    parts[2] = parts[2].chars().rev().collect();
    assert_eq!(whoami(&mut w, &parts.join(".")).head.status, 401);
    // Expired (past the minute of leeway).
    w.advance(jiff::SignedDuration::from_secs(3600 + 61));
    assert_eq!(whoami(&mut w, &t).head.status, 401);
}

#[test]
fn a_token_review_says_whom_a_token_stands_for() {
    let (mut w, account) = world();
    let t = token(&mut w, json!({}));
    let review = |w: &mut World| {
        let r = post(
            w,
            "/apis/authentication.k8s.io/v1/tokenreviews",
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": t}}),
        );
        assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
        r.json()["status"].clone()
    };
    let status = review(&mut w);
    assert_eq!(status["authenticated"], true);
    assert_eq!((status["user"]["username"].as_str(), &status["user"]["uid"]), (Some("system:serviceaccount:default:robot"), &account["metadata"]["uid"]));
    // For the audiences asked: the token's among them, or kube's refusal.
    let for_audiences = |w: &mut World, token: &str, audiences: Value| {
        let spec = json!({"token": token, "audiences": audiences});
        post(w, "/apis/authentication.k8s.io/v1/tokenreviews", json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec})).json()["status"].clone()
    };
    let status = for_audiences(&mut w, &t, json!(["vault"]));
    assert_eq!(status["error"], "token audiences [\"https://kubernetes.default.svc.cluster.local\"] is invalid for the target audiences [\"vault\"]");
    let vault = token(&mut w, json!({"audiences": ["vault", "nomad"]}));
    let status = for_audiences(&mut w, &vault, json!(["vault"]));
    assert_eq!((status["authenticated"].clone(), status["audiences"].clone()), (json!(true), json!(["vault"])));
    w.advance(jiff::SignedDuration::from_secs(3600 + 61));
    assert_eq!(review(&mut w)["error"], "service account token has expired");
    let t = token(&mut w, json!({}));
    w.call("DELETE", &format!("{ACCOUNTS}/robot"), "", None, "");
    let review = post(
        &mut w,
        "/apis/authentication.k8s.io/v1/tokenreviews",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": t}}),
    );
    assert_eq!(review.json()["status"], json!({"user": {}, "error": "serviceaccounts \"robot\" not found"}));
}

const SECRETS: &str = "/api/v1/namespaces/default/secrets";

fn token_secret(name: &str, annotations: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "annotations": annotations}, "type": "kubernetes.io/service-account-token"})
}

fn secret(w: &mut World, name: &str) -> Response {
    w.call("GET", &format!("{SECRETS}/{name}"), "", None, "")
}

fn data(secret: &Value, key: &str) -> String {
    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(secret["data"][key].as_str().unwrap_or_default()).unwrap()).unwrap()
}

fn review_error(w: &mut World, token: &str) -> Value {
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}});
    post(w, "/apis/authentication.k8s.io/v1/tokenreviews", review).json()["status"]["error"].clone()
}

#[test]
fn a_secret_gets_its_accounts_legacy_token_which_authenticates_while_the_secret_holds_it() {
    let (mut w, account) = world();
    w.start_controllers(Enabled::ALL);
    let uid = account["metadata"]["uid"].as_str().unwrap().to_string();
    assert_eq!(post(&mut w, SECRETS, token_secret("robot-token", json!({"kubernetes.io/service-account.name": "robot"}))).head.status, 201);
    let filled = secret(&mut w, "robot-token").json();
    assert_eq!(filled["metadata"]["annotations"]["kubernetes.io/service-account.uid"], uid.as_str());
    assert_eq!(data(&filled, "namespace"), "default");
    assert!(data(&filled, "ca.crt").contains("BEGIN CERTIFICATE"), "the root CA");
    let token = data(&filled, "token");
    assert_eq!(
        claims(&token),
        json!({"iss": "kubernetes/serviceaccount", "sub": "system:serviceaccount:default:robot",
            "kubernetes.io/serviceaccount/namespace": "default", "kubernetes.io/serviceaccount/secret.name": "robot-token",
            "kubernetes.io/serviceaccount/service-account.name": "robot", "kubernetes.io/serviceaccount/service-account.uid": uid})
    );

    let r = whoami(&mut w, &token);
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let user = &r.json()["status"]["userInfo"];
    assert_eq!((user["username"].as_str(), user["uid"].as_str()), (Some("system:serviceaccount:default:robot"), Some(uid.as_str())));
    assert_eq!(user["groups"], json!(["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]));
    assert_eq!(user.get("extra"), None, "a legacy token has no credential id");
    let warning = |r: &Response| r.head.headers.iter().find(|(k, _)| k == "Warning").map(|(_, v)| v.clone());
    assert_eq!(warning(&r), None, "a secret made by hand earns no warning");
    // The server dates the Secret as used today (UTC), once a day.
    let today = kapi_sim::epoch().to_zoned(jiff::tz::TimeZone::UTC).date().to_string();
    let used = secret(&mut w, "robot-token").json();
    assert_eq!(used["metadata"]["labels"]["kubernetes.io/legacy-token-last-used"], today.as_str());
    w.advance(jiff::SignedDuration::from_secs(10));
    whoami(&mut w, &token);
    assert_eq!(secret(&mut w, "robot-token").json()["metadata"]["resourceVersion"], used["metadata"]["resourceVersion"], "dated once a day");

    // Listed in the account's secrets (as a controller of old made them): kube's warning, also
    // with the answer kept for 10 s.
    let mut listed = w.call("GET", &format!("{ACCOUNTS}/robot"), "", None, "").json();
    listed["secrets"] = json!([{"name": "robot-token"}]);
    assert_eq!(w.call("PUT", &format!("{ACCOUNTS}/robot"), "", Some(&listed), "application/json").head.status, 200);
    w.advance(jiff::SignedDuration::from_secs(10));
    let expected = Some(
        "299 - \"Use tokens from the TokenRequest API or manually created secret-based tokens instead of auto-generated secret-based tokens.\"".to_string(),
    );
    assert_eq!(warning(&whoami(&mut w, &token)), expected);
    assert_eq!(warning(&whoami(&mut w, &token)), expected);

    // Marked invalid: refused, with kube's words.
    let mut marked = secret(&mut w, "robot-token").json();
    marked["metadata"]["labels"] = json!({"kubernetes.io/legacy-token-invalid-since": "2026-01-01"});
    assert_eq!(w.call("PUT", &format!("{SECRETS}/robot-token"), "", Some(&marked), "application/json").head.status, 200);
    assert_eq!(
        review_error(&mut w, &token),
        "the token in secret default/robot-token for service account default/robot has been marked invalid. Use tokens from the TokenRequest API or manually created secret-based tokens, or remove the 'kubernetes.io/legacy-token-invalid-since' label from the secret to temporarily allow use of this token"
    );
    w.advance(jiff::SignedDuration::from_secs(10));
    assert_eq!(whoami(&mut w, &token).head.status, 401);

    // A token the Secret no longer holds, or a Secret that is gone.
    let other = token_secret("other", json!({"kubernetes.io/service-account.name": "robot"}));
    post(&mut w, SECRETS, other);
    let replaced = data(&secret(&mut w, "other").json(), "token");
    assert_ne!(replaced, token);
    let mut tampered: Vec<String> = replaced.split('.').map(str::to_string).collect();
    tampered[1] = token.split('.').nth(1).unwrap().to_string();
    assert_eq!(review_error(&mut w, &tampered.join(".")).as_str().map(|e| e.contains("verif") || e.contains("signature")), Some(true));
    w.call("DELETE", &format!("{SECRETS}/other"), "", None, "");
    assert_eq!(review_error(&mut w, &replaced), "Token has been invalidated");
    assert_eq!(
        w.call("GET", &format!("{ACCOUNTS}/robot"), "", None, "").json()["secrets"],
        json!([{"name": "robot-token"}]),
        "only listed secrets are unlisted"
    );
    w.call("DELETE", &format!("{SECRETS}/robot-token"), "", None, "");
    assert_eq!(w.call("GET", &format!("{ACCOUNTS}/robot"), "", None, "").json()["secrets"], json!([]), "a deleted secret is taken out of the account's list");
}

#[test]
fn token_secrets_go_with_their_account() {
    let (mut w, _) = world();
    w.start_controllers(Enabled::ALL);
    post(&mut w, SECRETS, token_secret("robot-token", json!({"kubernetes.io/service-account.name": "robot"})));
    // Naming an account that does not exist, or another account of the same name.
    post(&mut w, SECRETS, token_secret("nobody-token", json!({"kubernetes.io/service-account.name": "nobody"})));
    post(&mut w, SECRETS, token_secret("stale-token", json!({"kubernetes.io/service-account.name": "robot", "kubernetes.io/service-account.uid": "u-old"})));
    assert_eq!(secret(&mut w, "nobody-token").head.status, 404);
    assert_eq!(secret(&mut w, "stale-token").head.status, 404);
    let token = data(&secret(&mut w, "robot-token").json(), "token");
    assert_eq!(whoami(&mut w, &token).head.status, 201);
    // The account goes: so do its token Secrets, and the token with them.
    assert_eq!(w.call("DELETE", &format!("{ACCOUNTS}/robot"), "", None, "").head.status, 200);
    assert_eq!(secret(&mut w, "robot-token").head.status, 404);
    assert_eq!(review_error(&mut w, &token), "Token has been invalidated");

    // What the watch cache lacks is read from storage; a read that fails refuses the token in
    // the validator's words (a TokenReview still answers).
    post(&mut w, ACCOUNTS, json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}}));
    post(&mut w, SECRETS, token_secret("readable", json!({"kubernetes.io/service-account.name": "robot"})));
    let readable = data(&secret(&mut w, "readable").json(), "token");
    w.call("DELETE", &format!("{SECRETS}/readable"), "", None, "");
    w.unreadable = Some("/registry/secrets/".into());
    assert_eq!(review_error(&mut w, &readable), "Token has been invalidated");
    assert_eq!(whoami(&mut w, &readable).head.status, 401);
    w.unreadable = None;
    w.call("DELETE", &format!("{ACCOUNTS}/robot"), "", None, "");

    // An account name that is empty is refused; one no request could name is left alone.
    let r = post(&mut w, SECRETS, token_secret("empty", json!({"kubernetes.io/service-account.name": ""})));
    assert_eq!(r.head.status, 422, "{}", String::from_utf8_lossy(&r.body));
    post(&mut w, SECRETS, token_secret("odd", json!({"kubernetes.io/service-account.name": "a/b"})));
    assert_eq!(secret(&mut w, "odd").json()["data"], Value::Null);
    // A Secret that cannot be filled (immutable) is tried again a few times, then left alone.
    post(&mut w, ACCOUNTS, json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}}));
    let mut frozen = token_secret("frozen", json!({"kubernetes.io/service-account.name": "robot"}));
    frozen["immutable"] = json!(true);
    assert_eq!(post(&mut w, SECRETS, frozen).head.status, 201);
    for _ in 0..15 {
        w.advance(jiff::SignedDuration::from_secs(5));
    }
    let frozen = secret(&mut w, "frozen").json();
    assert_eq!(frozen["data"], Value::Null);
    assert_eq!(frozen["metadata"]["resourceVersion"], secret(&mut w, "frozen").json()["metadata"]["resourceVersion"]);
}

#[test]
fn a_token_request_is_admitted_once_its_service_account_is_found() {
    // kube's validating admission sees the request defaulted (the server's audiences): a
    // policy on serviceaccounts/token refuses a token for another audience.
    let (mut w, _) = world();
    let rules = json!({"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["serviceaccounts/token"]}]});
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "audiences"},
        "spec": {"matchConstraints": rules, "validations": [{"expression": "object.spec.audiences.all(a, a != 'vault')", "message": "no tokens for vault"}]}});
    assert_eq!(post(&mut w, "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies", policy).head.status, 201);
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "audiences"},
        "spec": {"policyName": "audiences", "validationActions": ["Deny"]}});
    assert_eq!(post(&mut w, "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings", binding).head.status, 201);
    let r = post(&mut w, &format!("{ACCOUNTS}/robot/token"), request(json!({"audiences": ["vault"]})));
    assert_eq!(r.head.status, 422, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        r.json()["message"],
        "serviceaccounts \"robot\" is forbidden: ValidatingAdmissionPolicy 'audiences' with binding 'audiences' denied request: no tokens for vault"
    );
    let r = post(&mut w, &format!("{ACCOUNTS}/robot/token"), request(json!({})));
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    // A service account that does not exist is not found before admission.
    let r = post(&mut w, &format!("{ACCOUNTS}/nobody/token"), request(json!({"audiences": ["vault"]})));
    assert_eq!(r.head.status, 404);
}
