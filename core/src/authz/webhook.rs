//! The Webhook authorizer (`--authorization-mode=...,Webhook` with
//! `--authorization-webhook-config-file`, or a `Webhook` of `--authorization-config`): a
//! SubjectAccessReview of the user and the request POSTed to a webhook its kubeconfig names,
//! as kube-apiserver's webhook authorizer sends it, its `allowed`, `denied` and `reason` the
//! authorizer's decision; only for requests its match conditions hold for.
//!
//! Decisions are kept by the review's spec (kube's key: the spec's JSON), allowed ones for the
//! authorized TTL, the others for the unauthorized TTL. A webhook that does not answer, or
//! answers with an error, says what its failure policy says (the flags' webhook: no opinion),
//! and the error goes with the chain's decision (a request no later authorizer allows is then
//! a 500, as in kube).
//!
//! The call is an effect: the chain says which review it needs answered ([`Ask`]); the request
//! machine makes it, keeps the answer in the request's [`Asked`] (and the cache), and puts the
//! question to the chain again.

use std::sync::Arc;

use bytes::Bytes;
use jiff::{SignedDuration, Timestamp};
use serde_json::{Map, Value, json};

use super::conditions::MatchConditions;
use super::{Attributes, Verdict};
use crate::answers::{AnswerCache, key};
use crate::auth::UserInfo;
use crate::webhook::kubeconfig::Endpoint;
use crate::webhook::{ReviewVersion, WebhookAnswer, WebhookCall};

/// kube's defaults for the decision cache.
pub const AUTHORIZED_TTL: SignedDuration = SignedDuration::from_mins(5);
pub const UNAUTHORIZED_TTL: SignedDuration = SignedDuration::from_secs(30);
/// A request whose names add up to this many bytes or more is not cached (kube's
/// `maxControlledAttrCacheSize`).
const MAX_CACHED_ATTRIBUTES_BYTES: usize = 10_000;

/// What the webhook said (`error`: why it has no opinion, or what was wrong with its answer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Said {
    pub verdict: Verdict,
    pub reason: String,
    pub error: String,
}

/// How an authorization webhook is set up: by the `--authorization-webhook-*` flags (then
/// named `default`, asked within 30 s, no opinion when it fails) or by an `--authorization-config`
/// entry.
#[derive(Debug)]
pub struct WebhookSettings {
    pub name: String,
    pub endpoint: Endpoint,
    pub version: ReviewVersion,
    pub authorized_ttl: SignedDuration,
    pub unauthorized_ttl: SignedDuration,
    /// How long a call may take.
    pub timeout: SignedDuration,
    /// What the webhook says when it cannot be asked, or its conditions fail to evaluate
    /// (`failurePolicy`: `Deny` or `NoOpinion`), with the error.
    pub on_error: Verdict,
    /// Which requests it is asked about.
    pub conditions: MatchConditions,
}

impl WebhookSettings {
    /// The webhook of the `--authorization-webhook-*` flags.
    pub fn from_flags(endpoint: Endpoint, version: ReviewVersion, authorized_ttl: SignedDuration, unauthorized_ttl: SignedDuration) -> WebhookSettings {
        WebhookSettings {
            name: "default".into(),
            endpoint,
            version,
            authorized_ttl,
            unauthorized_ttl,
            timeout: crate::webhook::TIMEOUT,
            on_error: Verdict::NoOpinion,
            conditions: MatchConditions::default(),
        }
    }
}

/// An authorization webhook and the decisions it made lately.
pub struct WebhookAuthorizer {
    pub settings: WebhookSettings,
    decisions: AnswerCache<Arc<Said>>,
}

impl std::fmt::Debug for WebhookAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookAuthorizer").field("settings", &self.settings).finish()
    }
}

/// A review the chain needs a webhook's answer to, and the webhook.
#[derive(Clone, Debug)]
pub struct Ask {
    webhook: Arc<WebhookAuthorizer>,
    key: [u8; 32],
    body: Bytes,
    cache: bool,
}

/// The webhook's answers a request got (to the [`Ask`]s its chain made), by review.
#[derive(Clone, Debug, Default)]
pub struct Asked {
    said: Vec<([u8; 32], Said)>,
}

impl Asked {
    fn get(&self, key: &[u8; 32]) -> Option<&Said> {
        self.said.iter().find(|(k, _)| k == key).map(|(_, s)| s)
    }
}

impl WebhookAuthorizer {
    pub fn new(settings: WebhookSettings) -> WebhookAuthorizer {
        WebhookAuthorizer { settings, decisions: AnswerCache::default() }
    }

    /// What the webhook says to `user` doing `attrs`: nothing when its conditions leave the
    /// request out (their errors: its failure policy's word); known (from `asked`, or kept);
    /// or to be asked. `this` is the webhook itself, which an [`Ask`] names.
    pub fn decide(this: &Arc<WebhookAuthorizer>, user: &UserInfo, attrs: &Attributes, asked: &Asked, now: Timestamp) -> Result<Said, Ask> {
        let settings = &this.settings;
        match settings.conditions.matches(user, attrs) {
            Ok(true) => {}
            Ok(false) => return Ok(Said { verdict: Verdict::NoOpinion, reason: String::new(), error: String::new() }),
            Err(error) => return Ok(Said { verdict: settings.on_error, reason: String::new(), error }),
        }
        let spec = spec(user, attrs, settings.version);
        let spec_bytes = serde_json::to_vec(&spec).expect("JSON trees serialize");
        let key = key(&[settings.name.as_bytes(), settings.version.name().as_bytes(), &spec_bytes]);
        if let Some(said) = asked.get(&key) {
            return Ok(said.clone());
        }
        if let Some(kept) = this.decisions.get(&key, now) {
            return Ok(Said::clone(&kept));
        }
        let review = json!({
            "kind": "SubjectAccessReview",
            "apiVersion": format!("authorization.k8s.io/{}", settings.version.name()),
            "metadata": {"creationTimestamp": null},
            "spec": spec,
            "status": {"allowed": false},
        });
        let size =
            [&attrs.namespace, &attrs.verb, &attrs.group, &attrs.resource, &attrs.subresource, &attrs.name, &attrs.path].iter().map(|s| s.len()).sum::<usize>();
        Err(Ask {
            webhook: Arc::clone(this),
            key,
            body: Bytes::from(serde_json::to_vec(&review).expect("JSON trees serialize")),
            cache: size < MAX_CACHED_ATTRIBUTES_BYTES,
        })
    }
}

impl Ask {
    /// What names the review among a write's answers: its key, in hex.
    pub fn uid(&self) -> String {
        self.key.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The review sent.
    pub fn body(&self) -> Bytes {
        self.body.clone()
    }

    /// The call that asks it.
    pub fn call(&self) -> WebhookCall {
        let settings = &self.webhook.settings;
        WebhookCall {
            method: http::Method::POST,
            target: settings.endpoint.target.clone(),
            path: settings.endpoint.path.clone(),
            body: self.body.clone(),
            timeout: settings.timeout,
            credentials: settings.endpoint.credentials.clone(),
        }
    }

    /// Takes in the webhook's answer (or why there is none): kept in `asked`, and cached by
    /// the webhook when it is a decision. A failed call says what the failure policy says.
    pub fn answered(&self, answer: Result<WebhookAnswer, String>, asked: &mut Asked, now: Timestamp) {
        let settings = &self.webhook.settings;
        let said = match answer.and_then(|a| read_answer(&a)) {
            Ok((said, allowed)) => {
                if self.cache {
                    let ttl = if allowed { settings.authorized_ttl } else { settings.unauthorized_ttl };
                    self.webhook.decisions.put(self.key, Arc::new(said.clone()), ttl, now);
                }
                said
            }
            Err(error) => Said { verdict: settings.on_error, reason: String::new(), error },
        };
        asked.said.push((self.key, said));
    }
}

/// The review's spec, as kube's webhook authorizer fills it (empty fields left out; the keys,
/// as serde_json writes maps, in their sorted order rather than Go's).
pub(super) fn spec(user: &UserInfo, attrs: &Attributes, version: ReviewVersion) -> Value {
    let mut spec = Map::new();
    let put = |m: &mut Map<String, Value>, k: &str, v: &str| {
        if !v.is_empty() {
            m.insert(k.into(), json!(v));
        }
    };
    if attrs.resource_request {
        let mut r = Map::new();
        put(&mut r, "namespace", &attrs.namespace);
        put(&mut r, "verb", &attrs.verb);
        put(&mut r, "group", &attrs.group);
        put(&mut r, "version", &attrs.version);
        put(&mut r, "resource", &attrs.resource);
        put(&mut r, "subresource", &attrs.subresource);
        put(&mut r, "name", &attrs.name);
        let requirements: Vec<Value> = attrs
            .field_selector
            .terms()
            .iter()
            .map(|(field, op, value)| json!({"key": field, "operator": if *op { "In" } else { "NotIn" }, "values": [value]}))
            .collect();
        if !requirements.is_empty() {
            r.insert("fieldSelector".into(), json!({"requirements": requirements}));
        }
        let requirements = attrs.label_selector.review_requirements();
        if !requirements.is_empty() {
            r.insert("labelSelector".into(), json!({"requirements": requirements}));
        }
        spec.insert("resourceAttributes".into(), Value::Object(r));
    } else {
        let mut n = Map::new();
        put(&mut n, "path", &attrs.path);
        put(&mut n, "verb", &attrs.verb);
        spec.insert("nonResourceAttributes".into(), Value::Object(n));
    }
    put(&mut spec, "user", &user.name);
    if !user.groups.is_empty() {
        let field = if version == ReviewVersion::V1 { "groups" } else { "group" };
        spec.insert(field.into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        spec.insert("extra".into(), json!(user.extra));
    }
    put(&mut spec, "uid", &user.uid);
    Value::Object(spec)
}

/// The decision a webhook's answer holds and whether it allowed, or the error it is (kube's
/// REST client's words for an answer that is not a 2xx, or not a review).
fn read_answer(answer: &WebhookAnswer) -> Result<(Said, bool), String> {
    if !answer.succeeded() {
        return Err(crate::webhook::unexpected_status(answer));
    }
    let review: Value = serde_json::from_slice(&answer.body).map_err(|e| format!("unable to decode the webhook's answer: {e}"))?;
    let status = review.get("status").cloned().unwrap_or(Value::Null);
    let flag = |k: &str| status.get(k).and_then(Value::as_bool).unwrap_or(false);
    let reason = status.get("reason").and_then(Value::as_str).unwrap_or_default().to_string();
    let (allowed, denied) = (flag("allowed"), flag("denied"));
    let said = |verdict, error: &str| Said { verdict, reason: reason.clone(), error: error.to_string() };
    let said = match (allowed, denied) {
        (true, true) => said(Verdict::Deny, "webhook subject access review returned both allow and deny response"),
        (_, true) => said(Verdict::Deny, ""),
        (true, _) => said(Verdict::Allow, ""),
        _ => said(Verdict::NoOpinion, ""),
    };
    Ok((said, allowed))
}
