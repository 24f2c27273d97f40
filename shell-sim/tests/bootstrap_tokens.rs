//! Bootstrap tokens (`--enable-bootstrap-token-auth`), as kubeadm's `kubeadm join` uses them:
//! `<id>.<secret>` is `system:bootstrap:<id>` in `system:bootstrappers` (and the extra groups
//! its Secret lists) while `kube-system/bootstrap-token-<id>` vouches for it, and nobody once
//! the Secret goes, expires or says otherwise; a TokenReview says the same.

use kapi_sim::{Response, World, default_server, epoch};
use serde_json::{Value, json};

const TOKEN: &str = "abcdef.0123456789abcdef";
const SECRET: &str = "/api/v1/namespaces/kube-system/secrets/bootstrap-token-abcdef";

fn whoami(w: &mut World, token: &str) -> Response {
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    w.call_with_token(token, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", Some(review))
}

/// Puts the token's Secret in place, and lets the 10 s pass for which an answer is kept.
fn put_secret(w: &mut World, string_data: Value) {
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bootstrap-token-abcdef", "namespace": "kube-system"},
        "type": "bootstrap.kubernetes.io/token", "stringData": string_data});
    w.call("DELETE", SECRET, "", None, "");
    let r = w.call("POST", "/api/v1/namespaces/kube-system/secrets", "", Some(&secret), "application/json");
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    w.advance(jiff::SignedDuration::from_secs(10));
}

fn review(w: &mut World, audiences: Value) -> Value {
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": TOKEN, "audiences": audiences}});
    let r = w.call("POST", "/apis/authentication.k8s.io/v1/tokenreviews", "", Some(&review), "application/json");
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    r.json()["status"].clone()
}

#[test]
fn a_bootstrap_token_is_its_id_while_its_secret_vouches_for_it() {
    let mut w = World::new(default_server(), epoch(), 11);
    assert_eq!(whoami(&mut w, TOKEN).head.status, 401, "no secret yet");
    put_secret(
        &mut w,
        json!({"token-id": "abcdef", "token-secret": "0123456789abcdef", "usage-bootstrap-authentication": "true",
            "auth-extra-groups": "system:bootstrappers:kubeadm:default-node-token", "expiration": "2030-01-01T00:00:00Z"}),
    );
    let r = whoami(&mut w, TOKEN);
    assert_eq!(r.head.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        r.json()["status"]["userInfo"],
        json!({"username": "system:bootstrap:abcdef", "groups": ["system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token", "system:authenticated"]})
    );
    assert_eq!(whoami(&mut w, "abcdef.fedcba9876543210").head.status, 401, "another secret");

    // A TokenReview: good for the API server's audiences among those asked.
    let status = review(&mut w, json!([]));
    assert_eq!((status["authenticated"].clone(), status["audiences"].clone()), (json!(true), json!(["https://kubernetes.default.svc.cluster.local"])));
    assert_eq!(status["user"]["username"], "system:bootstrap:abcdef");
    assert_eq!(review(&mut w, json!(["vault"])), json!({"user": {}, "error": "invalid bearer token"}));
    let empty = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": ""}});
    let r = w.call("POST", "/apis/authentication.k8s.io/v1/tokenreviews", "", Some(&empty), "application/json");
    assert_eq!((r.head.status, r.json()["message"].clone()), (400, json!("token is required for TokenReview in authentication")));

    // Not for authentication, expired, or gone: nobody.
    put_secret(&mut w, json!({"token-id": "abcdef", "token-secret": "0123456789abcdef", "usage-bootstrap-signing": "true"}));
    assert_eq!(whoami(&mut w, TOKEN).head.status, 401);
    assert_eq!(review(&mut w, json!([])), json!({"user": {}, "error": "invalid bearer token"}));
    put_secret(
        &mut w,
        json!({"token-id": "abcdef", "token-secret": "0123456789abcdef", "usage-bootstrap-authentication": "true", "expiration": "2020-01-01T00:00:00Z"}),
    );
    assert_eq!(whoami(&mut w, TOKEN).head.status, 401);
    put_secret(&mut w, json!({"token-id": "abcdef", "token-secret": "0123456789abcdef", "usage-bootstrap-authentication": "true"}));
    assert_eq!(whoami(&mut w, TOKEN).head.status, 201);
    assert_eq!(w.call("DELETE", SECRET, "", None, "").head.status, 200);
    assert_eq!(whoami(&mut w, TOKEN).head.status, 201, "its answer is kept 10 s, as kube keeps it");
    w.advance(jiff::SignedDuration::from_secs(10));
    assert_eq!(whoami(&mut w, TOKEN).head.status, 401);
}
