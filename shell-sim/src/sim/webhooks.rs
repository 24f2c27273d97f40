//! The admission webhooks of a world with them, answered by the world itself in virtual time:
//! a validating webhook (`failurePolicy: Fail`) that refuses configmaps whose `v` is a
//! multiple of ten, and a mutating one (`Ignore`) that stamps an annotation on new
//! configmaps. Each call is slow, refused or never answered as the world draws it; one that
//! is not answered within the webhook's timeout fails as the shell fails it, at the timeout.
//!
//! What the validating webhook allowed is kept, for invariant 10 (`check::webhooks`).

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine;
use bytes::Bytes;
use jiff::{SignedDuration, Timestamp};
use kapi_core::webhook::{WebhookAnswer, WebhookCall};
use serde_json::{Value, json};

use super::ReqId;
use super::check::{self, Checked, Invariant};
use super::rng::SimRng;

/// The validating webhook's name and where it is.
pub const GUARD: &str = "guard.sim.kapi.dev";
/// The mutating webhook's.
pub const STAMP: &str = "stamp.sim.kapi.dev";

/// The answers to one request's calls, in order (a call that failed: why).
pub type Answers = Vec<Result<WebhookAnswer, String>>;

/// The webhooks' servers.
pub struct WebhookServers {
    /// Every webhook's `timeoutSeconds`.
    pub timeout_seconds: i64,
    rng: SimRng,
    /// With faults off every call is answered in time.
    pub calm: bool,
    /// A planted bug: a failed call is answered as an allowing review.
    open: bool,
    /// Answers due, by when (and in what order they were asked), for the request that waits.
    due: BTreeMap<(Timestamp, u64), (ReqId, Answers)>,
    asked: u64,
    /// The configmaps the guard allowed: namespace, name and `v`.
    allowed: BTreeSet<(String, String, String)>,
}

/// An answer allowing the review `call` sends.
fn allowing(call: &WebhookCall) -> WebhookAnswer {
    let review: Value = serde_json::from_slice(&call.body).unwrap_or_default();
    review_answer(json!({"uid": review["request"]["uid"], "allowed": true}))
}

/// A webhook's answer of `response`.
fn review_answer(response: Value) -> WebhookAnswer {
    let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response});
    WebhookAnswer { status: 200, body: Bytes::from(body.to_string()), content_type: "application/json".into() }
}

/// The configmap's namespace, name and `v`, as the guard judges it.
pub fn judged(obj: &Value) -> (String, String, String) {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (text(&obj["metadata"]["namespace"]), text(&obj["metadata"]["name"]), text(&obj["data"]["v"]))
}

impl WebhookServers {
    pub fn new(timeout_seconds: i64, seed: u64, open: bool) -> WebhookServers {
        WebhookServers { timeout_seconds, rng: SimRng::new(seed), calm: false, open, due: BTreeMap::new(), asked: 0, allowed: BTreeSet::new() }
    }

    /// The two configurations, for the world's setup: their path and body.
    pub fn configurations(&self) -> [(&'static str, Value); 2] {
        let rules = |ops: &[&str]| json!([{"operations": ops, "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]);
        let hook = |name: &str, ops: &[&str], policy: &str| {
            json!({"name": name, "clientConfig": {"url": format!("https://{name}/admit")}, "rules": rules(ops), "failurePolicy": policy,
                "timeoutSeconds": self.timeout_seconds, "sideEffects": "None", "admissionReviewVersions": ["v1"]})
        };
        let config =
            |kind: &str, hook: Value| json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": "sim"}, "webhooks": [hook]});
        [
            (
                "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                config("ValidatingWebhookConfiguration", hook(GUARD, &["CREATE", "UPDATE"], "Fail")),
            ),
            ("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", config("MutatingWebhookConfiguration", hook(STAMP, &["CREATE"], "Ignore"))),
        ]
    }

    /// Whether the guard allowed this configmap.
    pub fn allowed(&self, obj: &Value) -> bool {
        self.allowed.contains(&judged(obj))
    }

    /// The request `id` asks these webhooks at once: each answers (or fails) after its own
    /// delay, and the request hears all at the latest. Every call must carry its webhook's
    /// timeout.
    pub fn call(&mut self, now: Timestamp, id: ReqId, calls: &[WebhookCall]) -> Checked {
        let timeout = SignedDuration::from_secs(self.timeout_seconds);
        let mut latest = now;
        let mut answers = Vec::new();
        for call in calls {
            let wanted = format!("/admit?timeout={}s", self.timeout_seconds);
            if call.timeout != timeout || call.path != wanted {
                return check::violation(
                    Invariant::Admission,
                    format!("a webhook was called at {} within {:?}, not {wanted} within {timeout:?}", call.path, call.timeout),
                );
            }
            let url = format!("{}{}", call.target.url, call.path);
            let (after, answer) = match self.rng.below(10) {
                0 if !self.calm => (SignedDuration::from_millis(1), Err(format!("Post {url:?}: dial tcp 10.0.0.9:443: connect: connection refused"))),
                1 if !self.calm => (timeout, Err(format!("Post {url:?}: context deadline exceeded"))),
                _ => (SignedDuration::from_millis(self.rng.between(1, 300) as i64), Ok(self.answer(call))),
            };
            latest = latest.max(now + after);
            answers.push(answer.or_else(|e| if self.open { Ok(allowing(call)) } else { Err(e) }));
        }
        self.asked += 1;
        self.due.insert((latest, self.asked), (id, answers));
        Ok(())
    }

    /// What the webhook called answers the review it is sent.
    fn answer(&mut self, call: &WebhookCall) -> WebhookAnswer {
        let review: Value = serde_json::from_slice(&call.body).unwrap_or_default();
        let request = &review["request"];
        let mut response = json!({"uid": request["uid"], "allowed": true});
        if call.target.url.contains(GUARD) {
            let judged = judged(&request["object"]);
            if judged.2.parse::<u64>().is_ok_and(|v| v % 10 == 0) {
                response["allowed"] = json!(false);
                response["status"] = json!({"code": 403, "reason": "Forbidden", "message": "v is a multiple of ten"});
            } else {
                self.allowed.insert(judged);
            }
        } else {
            let patch = json!([{"op": "add", "path": "/metadata/annotations", "value": {"sim.kapi.dev/stamped": "yes"}}]);
            response["patchType"] = json!("JSONPatch");
            response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(patch.to_string()));
        }
        review_answer(response)
    }

    /// When the next answers are due.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.due.first_key_value().map(|((at, _), _)| *at)
    }

    /// The next answers due by `now`, and the request they are for.
    pub fn poll(&mut self, now: Timestamp) -> Option<(ReqId, Answers)> {
        let (&(at, n), _) = self.due.first_key_value()?;
        if at > now {
            return None;
        }
        self.due.remove(&(at, n))
    }
}
