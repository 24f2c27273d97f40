//! ImagePolicyWebhook (off by default): a pod's images are reviewed by a backend before the
//! pod is created or updated. The backend is the webhook a kubeconfig names, configured as
//! kube configures it (YAML or JSON, read leniently):
//!
//! ```yaml
//! imagePolicy:
//!   kubeConfigFile: /etc/kapi/image-policy.kubeconfig
//!   allowTTL: 50      # seconds an allowing answer is kept (default 300; -1: not kept)
//!   denyTTL: 50       # seconds a denying answer is kept (default 30; -1: not kept)
//!   retryBackoff: 500 # milliseconds: the first wait of kube's retries of a failed call
//!   defaultAllow: true
//! ```
//!
//! The review (`imagepolicy.k8s.io/v1alpha1` `ImageReview`) names the images of the pod's
//! containers and init containers (of its ephemeral containers, for the `ephemeralcontainers`
//! subresource), the pod's annotations whose key holds `.image-policy.k8s.io/`, and the
//! namespace. Its `status.allowed` lets the pod through; a denial is kube's 403 (`image policy
//! webhook backend denied one or more images: <reason>`). Answers are kept by what the review
//! asks, `allowTTL` or `denyTTL`. A backend that cannot be asked or answers wrongly refuses the
//! pod with the error (403), or, with `defaultAllow`, lets it through annotated
//! `alpha.image-policy.k8s.io/failed-open: "true"`.
//!
//! The core never calls the backend: a review the write has no answer to stops it
//! ([`Halt::Ask`]), as an admission webhook does, and the write runs again with the answer.

use std::sync::Arc;

use bytes::Bytes;
use jiff::SignedDuration;
use serde_json::{Map, Value, json};

use super::{Attributes, Operation, Plugin, ReadFile};
use crate::admission::webhooks::dispatch::{AdmissionCall, Answers, Callee, Halt};
use crate::answers::AnswerCache;
use crate::catalog::ResourceInfo;
use crate::codec::go_json;
use crate::config_file::Decoder;
use crate::meta;
use crate::pipeline::limits::go_duration_string;
use crate::webhook::WebhookAnswer;
use crate::webhook::kubeconfig::{self, Endpoint};

/// The annotation a pod let through by `defaultAllow` carries.
const FAILED_OPEN: &str = "alpha.image-policy.k8s.io/failed-open";

/// What a pod annotation's key holds for the backend to see it.
const REVIEWED_ANNOTATIONS: &str = ".image-policy.k8s.io/";

#[derive(Debug)]
pub struct ImagePolicyWebhook {
    backend: Arc<Endpoint>,
    allow_ttl: SignedDuration,
    deny_ttl: SignedDuration,
    /// The first wait of the retries of a call that failed for a while (`retryBackoff`).
    retry_backoff: SignedDuration,
    default_allow: bool,
    /// The backend's answers, by the review's spec.
    decisions: AnswerCache<Decision>,
}

/// What the backend answered.
#[derive(Clone, Debug, PartialEq)]
struct Decision {
    allowed: bool,
    reason: String,
}

/// kube's reading of a configured duration (`count` of `unit`): -1 turns it off (zero), 0 or
/// none is the default, anything else must lie within `min..=max` (kube's error otherwise).
fn duration(count: i64, unit: SignedDuration, default: SignedDuration, (min, max): (SignedDuration, SignedDuration)) -> Result<SignedDuration, String> {
    let d = match count {
        -1 => return Ok(SignedDuration::ZERO),
        0 => return Ok(default),
        n => SignedDuration::from_nanos(unit.as_nanos().saturating_mul(i128::from(n)).clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64),
    };
    if d < min || d > max {
        return Err(format!("valid value is between {} and {}, got {}", go_duration_string(min), go_duration_string(max), go_duration_string(d)));
    }
    Ok(d)
}

/// The folder of `file` ("" for the working one).
fn folder(file: &str) -> &str {
    match file.rfind('/') {
        Some(0) => "/",
        Some(i) => &file[..i],
        None => "",
    }
}

/// `name` as a path from `folder`.
fn join(folder: &str, name: &str) -> String {
    match folder {
        _ if name.starts_with('/') || folder.is_empty() => name.to_string(),
        "/" => format!("/{name}"),
        _ => format!("{folder}/{name}"),
    }
}

impl ImagePolicyWebhook {
    /// The plugin with its configuration, its kubeconfig read with `read_file` (the files it
    /// names relative to its folder), or kube's start-up error.
    pub fn new(config: Option<&[u8]>, read_file: &ReadFile) -> Result<ImagePolicyWebhook, String> {
        let init = |e: String| format!("couldn't init admission plugin \"ImagePolicyWebhook\": {e}");
        let config = config.ok_or_else(|| init("no config specified".into()))?;
        let tree: Value = serde_norway::from_slice(config).map_err(|e| init(e.to_string()))?;
        let mut d = Decoder::new(&tree);
        let root = d.root(&tree, "AdmissionConfig", &["imagePolicy"]);
        let fields = ["kubeConfigFile", "allowTTL", "denyTTL", "retryBackoff", "defaultAllow"];
        let c = d.nested(&root, "imagePolicy", "imagePolicyWebhookConfig", &fields);
        let file = d.string(&c, "kubeConfigFile");
        let [allow, deny, backoff] = ["allowTTL", "denyTTL", "retryBackoff"].map(|f| d.integer(&c, f, "time.Duration", |_| true).unwrap_or(0));
        let default_allow = d.bool(&c, "defaultAllow");
        d.finish_leniently().map_err(init)?;
        let (ms, s) = (SignedDuration::from_millis(1), SignedDuration::from_secs(1));
        // kube's order of checks: the backoff, then the TTLs.
        let retry_backoff =
            duration(backoff, ms, SignedDuration::from_millis(500), (SignedDuration::from_nanos(1), SignedDuration::from_mins(5))).map_err(init)?;
        let ttls = (s, SignedDuration::from_mins(30));
        let allow_ttl = duration(allow, s, SignedDuration::from_mins(5), ttls).map_err(init)?;
        let deny_ttl = duration(deny, s, SignedDuration::from_secs(30), ttls).map_err(init)?;
        let text = read_file(&file).map_err(init)?;
        let backend = kubeconfig::read(&String::from_utf8_lossy(&text), &|name| read_file(&join(folder(&file), name))).map_err(init)?;
        Ok(ImagePolicyWebhook { backend: Arc::new(backend), allow_ttl, deny_ttl, retry_backoff, default_allow, decisions: AnswerCache::default() })
    }
}

/// The images the review of `pod` names (`None`: a subresource not reviewed).
fn images<'a>(pod: &'a Value, subresource: Option<&str>) -> Option<Vec<&'a str>> {
    let lists: &[&str] = match subresource {
        None => &["containers", "initContainers"],
        Some("ephemeralcontainers") => &["ephemeralContainers"],
        Some(_) => return None,
    };
    let containers = lists.iter().flat_map(|l| meta::at(pod, &["spec", l]).and_then(Value::as_array).into_iter().flatten());
    Some(containers.map(|c| c.get("image").and_then(Value::as_str).unwrap_or_default()).collect())
}

/// The review's spec (fields empty in Go left out, as Go's `omitempty` leaves them).
fn review_spec(pod: &Value, images: &[&str], namespace: &str) -> Value {
    let mut spec = Map::new();
    if !images.is_empty() {
        spec.insert("containers".into(), images.iter().map(|i| json!({"image": i})).collect());
    }
    let annotations: Map<String, Value> = meta::string_map(meta::at(pod, &["metadata", "annotations"]))
        .into_iter()
        .filter(|(k, _)| k.contains(REVIEWED_ANNOTATIONS))
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    if !annotations.is_empty() {
        spec.insert("annotations".into(), Value::Object(annotations));
    }
    if !namespace.is_empty() {
        spec.insert("namespace".into(), namespace.into());
    }
    Value::Object(spec)
}

/// The backend's decision in its answer, or the error the call came to, in the words of
/// kube's REST client and Go's JSON decoder (an answer that is not an ImageReview is an
/// error, which `defaultAllow` lets through, not a denial).
fn read_answer(answer: &Result<WebhookAnswer, String>) -> Result<Decision, String> {
    let answer = answer.as_ref().map_err(Clone::clone)?;
    if !answer.succeeded() {
        return Err(crate::webhook::unexpected_status(answer));
    }
    if answer.body.is_empty() {
        return Err(format!("0-length response with status code: {} and content type: {}", answer.status, answer.content_type));
    }
    let review = crate::webhook::answer::decode(&answer.body)?;
    let mistyped = go_json::mistyped;
    let status = match review.get("status") {
        None | Some(Value::Null) => return Ok(Decision { allowed: false, reason: String::new() }),
        Some(Value::Object(status)) => status,
        Some(other) => return Err(mistyped(other, "ImageReview.status", "v1alpha1.ImageReviewStatus")),
    };
    let allowed = match status.get("allowed") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => return Err(mistyped(other, "ImageReviewStatus.status.allowed", "bool")),
    };
    let reason = match status.get("reason") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(r)) => r.clone(),
        Some(other) => return Err(mistyped(other, "ImageReviewStatus.status.reason", "string")),
    };
    Ok(Decision { allowed, reason })
}

impl ImagePolicyWebhook {
    /// The backend's decision on `spec`: kept, in `answers`, or to be asked.
    fn decide(&self, spec: Value, answers: &Answers, now: jiff::Timestamp) -> Result<Result<Decision, String>, Halt> {
        let spec_bytes = serde_json::to_vec(&spec).expect("JSON trees serialize");
        let key = crate::answers::key(&[b"ImageReview", &spec_bytes]);
        if let Some(kept) = self.decisions.get(&key, now) {
            return Ok(Ok(kept));
        }
        let uid: String = key.iter().map(|b| format!("{b:02x}")).collect();
        let Some(answer) = answers.get(&uid) else {
            let review = json!({
                "apiVersion": "imagepolicy.k8s.io/v1alpha1",
                "kind": "ImageReview",
                "metadata": {"creationTimestamp": null},
                "spec": spec,
                "status": {"allowed": false},
            });
            let body = Bytes::from(serde_json::to_vec(&review).expect("JSON trees serialize"));
            let call = AdmissionCall { callee: Callee::Endpoint(self.backend.clone()), uid, body, retry: Some(self.retry_backoff) };
            return Err(Halt::Ask(vec![call]));
        };
        let decision = read_answer(answer);
        if let Ok(d) = &decision {
            self.decisions.put(key, d.clone(), if d.allowed { self.allow_ttl } else { self.deny_ttl }, now);
        }
        Ok(decision)
    }
}

impl Plugin for ImagePolicyWebhook {
    fn name(&self) -> &'static str {
        "ImagePolicyWebhook"
    }

    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Update)
    }

    fn annotates(&self, info: &ResourceInfo) -> bool {
        info.group.is_empty() && info.resource == "pods"
    }

    fn validate_asking(&self, a: &Attributes, obj: Option<&mut Value>, answers: &Answers, _warnings: &mut Vec<String>) -> Result<(), Halt> {
        let Some(pod) = obj.filter(|_| a.info.group.is_empty() && a.info.resource == "pods") else { return Ok(()) };
        let Some(images) = images(pod, a.subresource) else { return Ok(()) };
        let spec = review_spec(pod, &images, a.namespace);
        match self.decide(spec, answers, a.now)? {
            Ok(d) if d.allowed => Ok(()),
            Ok(d) if d.reason.is_empty() => Err(a.forbidden("one or more images rejected by webhook backend").into()),
            Ok(d) => Err(a.forbidden(&format!("image policy webhook backend denied one or more images: {}", d.reason)).into()),
            Err(_) if self.default_allow => {
                meta::object_at(pod, &["metadata", "annotations"]).insert(FAILED_OPEN.into(), "true".into());
                Ok(())
            }
            Err(why) => Err(a.forbidden(&why).into()),
        }
    }
}

#[cfg(test)]
mod tests;
