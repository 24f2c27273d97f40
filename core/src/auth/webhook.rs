//! Webhook token authentication (`--authentication-token-webhook-config-file`): a bearer token
//! no other authenticator recognizes is sent to a webhook in a TokenReview, as kube-apiserver's
//! webhook token authenticator sends it (last of its token authenticators), and the webhook's
//! `status` says who it stands for.
//!
//! The audiences asked (the API server's, or a TokenReview's own) go in `spec.audiences`; the
//! token is good for those of them the webhook names in `status.audiences` (the API server's
//! when it names none), and for no one when that leaves none. Answers are kept by token and
//! audiences for `--authentication-token-webhook-cache-ttl`, whether the token authenticates or
//! not; a call that fails, or an answer that is not a review, is an error (the request is 401)
//! and is not kept.
//!
//! The call is an effect the request machine makes ([`TokenAsk`]).

use std::sync::Arc;

use bytes::Bytes;
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::UserInfo;
use crate::answers::{AnswerCache, key};
use crate::webhook::kubeconfig::Endpoint;
use crate::webhook::{ReviewVersion, TIMEOUT, WebhookAnswer, WebhookCall};

/// `--authentication-token-webhook-cache-ttl`'s default.
pub const CACHE_TTL: SignedDuration = SignedDuration::from_mins(2);

/// Who a token stands for and the audiences it is good for; `None`: no one.
pub type Reviewed = Option<(UserInfo, Vec<String>)>;

/// The authentication webhook and what it answered lately.
pub struct TokenWebhook {
    pub endpoint: Endpoint,
    pub version: ReviewVersion,
    pub cache_ttl: SignedDuration,
    answers: AnswerCache<Arc<Reviewed>>,
}

impl std::fmt::Debug for TokenWebhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenWebhook").field("endpoint", &self.endpoint).field("version", &self.version).finish()
    }
}

/// A token review the webhook is asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenAsk {
    key: [u8; 32],
    body: Bytes,
    audiences: Vec<String>,
}

impl TokenWebhook {
    pub fn new(endpoint: Endpoint, version: ReviewVersion, cache_ttl: SignedDuration) -> TokenWebhook {
        TokenWebhook { endpoint, version, cache_ttl, answers: AnswerCache::default() }
    }

    /// What the webhook said of `token` for `audiences` less than the cache's time ago, or the
    /// review to ask it.
    pub fn review(&self, token: &str, audiences: &[String], now: Timestamp) -> Result<Reviewed, TokenAsk> {
        let mut parts: Vec<&[u8]> = vec![token.as_bytes()];
        parts.extend(audiences.iter().map(|a| a.as_bytes()));
        let key = key(&parts);
        if let Some(kept) = self.answers.get(&key, now) {
            return Ok(Reviewed::clone(&kept));
        }
        let mut spec = json!({"token": token});
        if !audiences.is_empty() {
            spec["audiences"] = json!(audiences);
        }
        let review = json!({
            "kind": "TokenReview",
            "apiVersion": format!("authentication.k8s.io/{}", self.version.name()),
            "metadata": {"creationTimestamp": null},
            "spec": spec,
            "status": {"user": {}},
        });
        Err(TokenAsk { key, body: Bytes::from(serde_json::to_vec(&review).expect("JSON trees serialize")), audiences: audiences.to_vec() })
    }

    /// The call that asks `ask`.
    pub fn call(&self, ask: &TokenAsk) -> WebhookCall {
        WebhookCall {
            method: http::Method::POST,
            target: self.endpoint.target.clone(),
            path: self.endpoint.path.clone(),
            body: ask.body.clone(),
            timeout: TIMEOUT,
            credentials: self.endpoint.credentials.clone(),
        }
    }

    /// What the webhook's answer to `ask` (or why there is none) makes of the token, with
    /// `implicit` the API server's audiences; kept when it is an answer.
    pub fn answered(&self, ask: &TokenAsk, answer: Result<WebhookAnswer, String>, implicit: &[String], now: Timestamp) -> Result<Reviewed, String> {
        let answer = answer?;
        if !answer.succeeded() {
            return Err(crate::webhook::unexpected_status(&answer));
        }
        let review: Value = serde_json::from_slice(&answer.body).map_err(|e| format!("unable to decode the webhook's answer: {e}"))?;
        let status = review.get("status").cloned().unwrap_or(Value::Null);
        let strings =
            |v: Option<&Value>| -> Vec<String> { v.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect() };
        let audiences = if ask.audiences.is_empty() {
            Vec::new()
        } else {
            // kube's `Intersect`: the audiences the webhook names (else the API server's), in their
            // order, that were asked.
            let said = strings(status.get("audiences"));
            let good = if said.is_empty() { implicit } else { &said[..] };
            good.iter().filter(|a| ask.audiences.contains(a)).cloned().collect()
        };
        let reviewed = if !ask.audiences.is_empty() && audiences.is_empty() {
            None
        } else if status.get("authenticated").and_then(Value::as_bool) == Some(true) {
            let user = status.get("user").cloned().unwrap_or(Value::Null);
            let text = |k: &str| user.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            let extra =
                user.get("extra").and_then(Value::as_object).map(|m| m.iter().map(|(k, v)| (k.clone(), strings(Some(v)))).collect()).unwrap_or_default();
            Some((UserInfo { name: text("username"), uid: text("uid"), groups: strings(user.get("groups")), extra }, audiences))
        } else {
            // Not authenticated: with the webhook's error, an error (and not kept, as kube keeps
            // no errors).
            match status.get("error").and_then(Value::as_str).filter(|e| !e.is_empty()) {
                Some(error) => return Err(error.to_string()),
                None => None,
            }
        };
        self.answers.put(ask.key, Arc::new(reviewed.clone()), self.cache_ttl, now);
        Ok(reviewed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregator::ProxyTarget;

    fn webhook() -> TokenWebhook {
        let target = ProxyTarget { url: "https://127.0.0.1:1".into(), server_name: "127.0.0.1".into(), ca_bundle: None, insecure_skip_tls_verify: false };
        TokenWebhook::new(Endpoint { target, path: "/?timeout=30s".into(), credentials: None }, ReviewVersion::V1, CACHE_TTL)
    }

    fn ok(status: Value) -> Result<WebhookAnswer, String> {
        Ok(WebhookAnswer { status: 200, body: Bytes::from(json!({"status": status}).to_string()), ..Default::default() })
    }

    #[test]
    fn a_review_names_the_user_for_the_audiences_and_is_kept_for_its_time() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let w = webhook();
        let api = vec!["https://kapi".to_string()];
        let ask = w.review("t0k", &api, now).unwrap_err();
        let sent: Value = serde_json::from_slice(&w.call(&ask).body).unwrap();
        assert_eq!(sent["spec"], json!({"token": "t0k", "audiences": ["https://kapi"]}));
        assert_eq!(sent["apiVersion"], "authentication.k8s.io/v1");
        let user = json!({"username": "jane", "uid": "42", "groups": ["dev"], "extra": {"scopes": ["a"]}});
        let (u, auds) = w.answered(&ask, ok(json!({"authenticated": true, "user": user})), &api, now).unwrap().unwrap();
        assert_eq!((u.name.as_str(), u.uid.as_str(), u.groups.as_slice(), auds), ("jane", "42", &["dev".to_string()][..], api.clone()));
        assert_eq!(u.extra["scopes"], vec!["a".to_string()]);
        assert!(w.review("t0k", &api, now + SignedDuration::from_secs(119)).unwrap().is_some());
        assert!(w.review("t0k", &api, now + CACHE_TTL).is_err());

        // Audiences the webhook names that are not those asked: no one.
        let ask = w.review("other", &api, now).unwrap_err();
        let answer = ok(json!({"authenticated": true, "user": {"username": "x"}, "audiences": ["elsewhere"]}));
        assert_eq!(w.answered(&ask, answer, &api, now), Ok(None));
        // A refusal is kept; an error is not.
        let ask = w.review("bad", &api, now).unwrap_err();
        assert_eq!(w.answered(&ask, ok(json!({"authenticated": false})), &api, now), Ok(None));
        assert_eq!(w.review("bad", &api, now), Ok(None));
        let ask = w.review("err", &api, now).unwrap_err();
        assert_eq!(w.answered(&ask, ok(json!({"error": "token expired"})), &api, now), Err("token expired".into()));
        assert!(w.review("err", &api, now).is_err());
        let failed = Ok(WebhookAnswer { status: 500, body: Bytes::from_static(b"boom"), ..Default::default() });
        assert_eq!(w.answered(&ask, failed, &api, now), Err("an error on the server (\"boom\") has prevented the request from succeeding".into()));
    }
}
