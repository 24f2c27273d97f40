//! A CRD's `Webhook` conversion (apiextensions-apiserver's `webhookConverter`): objects not at
//! the version asked for are sent in a ConversionReview to the CRD's webhook, and what comes
//! back is checked as kube checks it (the review's uid, the count, each object's apiVersion and
//! kind, its name, namespace and uid kept) and given back its original metadata but for the
//! labels and annotations the webhook may change.
//!
//! The machines that read or write custom resources ([`WriteOp`](crate::registry::WriteOp),
//! the watch cache, the request machine) ask for a [`Conversion`] when they meet an object
//! they cannot convert without the webhook, keep each answer in [`Converted`], and carry on
//! where they stopped.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use jiff::SignedDuration;
use serde_json::{Map, Value, json};

use crate::meta;
use crate::status::FieldError;
use crate::status::field::aggregate;
use crate::webhook::{ClientConfig, WebhookAnswer, WebhookCall};

/// How long a conversion webhook may take: kube's webhook client's default.
pub const TIMEOUT: SignedDuration = SignedDuration::from_secs(30);

/// `spec.conversion.webhook` of a CRD whose strategy is `Webhook`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConversionWebhook {
    pub client: ClientConfig,
    /// `conversionReviewVersions`: the first of `v1` and `v1beta1` in it is the review's.
    pub review_versions: Vec<String>,
}

impl ConversionWebhook {
    /// The webhook a CRD's `spec` names, if its conversion strategy is `Webhook`.
    pub fn read(spec: &Value) -> Option<ConversionWebhook> {
        let conversion = spec.get("conversion")?;
        if conversion.get("strategy").and_then(Value::as_str) != Some("Webhook") {
            return None;
        }
        let webhook = conversion.get("webhook").cloned().unwrap_or_default();
        Some(ConversionWebhook {
            client: ClientConfig::read(webhook.get("clientConfig").unwrap_or(&Value::Null)),
            review_versions: meta::strings(webhook.get("conversionReviewVersions")),
        })
    }

    fn review_version(&self) -> Option<&'static str> {
        self.review_versions.iter().find_map(|v| match v.as_str() {
            "v1beta1" => Some("v1beta1"),
            "v1" => Some("v1"),
            _ => None,
        })
    }
}

/// kube's checks of a CRD's `spec.conversion` (`validateCustomResourceConversion`, with its
/// paths named by the internal version's fields: `webhookClientConfig`,
/// `conversionReviewVersions`).
pub fn validate(spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(conversion) = spec.get("conversion").filter(|c| !c.is_null()) else { return errs };
    let strategy = conversion.get("strategy").and_then(Value::as_str).unwrap_or_default();
    if strategy != "None" && spec.get("preserveUnknownFields").and_then(Value::as_bool) == Some(true) {
        errs.push(FieldError::invalid("spec.conversion.strategy", json!(strategy), "must be None if spec.preserveUnknownFields is true"));
    }
    match strategy {
        "" => errs.push(FieldError::required("spec.conversion.strategy", "")),
        "None" | "Webhook" => {}
        other => errs.push(FieldError::not_supported("spec.conversion.strategy", json!(other), &["None", "Webhook"])),
    }
    let webhook = conversion.get("webhook");
    let client = webhook.and_then(|w| w.get("clientConfig")).filter(|c| !c.is_null());
    let versions: Vec<&str> =
        webhook.and_then(|w| w.get("conversionReviewVersions")).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    const CLIENT: &str = "spec.conversion.webhookClientConfig";
    const VERSIONS: &str = "spec.conversion.conversionReviewVersions";
    if strategy != "Webhook" {
        if client.is_some() {
            errs.push(FieldError::forbidden(CLIENT, "should not be set when strategy is not set to Webhook"));
        }
        if !versions.is_empty() {
            errs.push(FieldError::forbidden(VERSIONS, "should not be set when strategy is not set to Webhook"));
        }
        return errs;
    }
    match client {
        None => errs.push(FieldError::required(CLIENT, "required when strategy is set to Webhook")),
        Some(c) => match (c.get("url").and_then(Value::as_str), c.get("service").filter(|s| !s.is_null())) {
            (Some(url), None) => errs.extend(crate::webhook::validation::url(&format!("{CLIENT}.url"), url, true)),
            (None, Some(service)) => errs.extend(crate::webhook::validation::service(&format!("{CLIENT}.service"), service)),
            _ => errs.push(FieldError::required(CLIENT, "exactly one of url or service is required")),
        },
    }
    if versions.is_empty() {
        errs.push(FieldError::required(VERSIONS, ""));
        return errs;
    }
    for (i, v) in versions.iter().enumerate() {
        if versions[..i].contains(v) {
            errs.push(FieldError::invalid(format!("{VERSIONS}[{i}]"), json!(v), "duplicate version"));
            continue;
        }
        for msg in crate::validation::dns1035_label(v) {
            errs.push(FieldError::invalid(format!("{VERSIONS}[{i}]"), json!(v), msg));
        }
    }
    if !versions.iter().any(|v| *v == "v1" || *v == "v1beta1") {
        let go = format!("[]string{{{}}}", versions.iter().map(|v| format!("{v:?}")).collect::<Vec<_>>().join(", "));
        errs.push(FieldError::invalid_go(VERSIONS, go, "must include at least one of v1, v1beta1"));
    }
    errs
}

/// Objects to convert to `desired` (an apiVersion) by a CRD's webhook, each with the bytes it
/// is known by in [`Converted`].
#[derive(Clone, Debug)]
pub struct Conversion {
    pub webhook: Arc<ConversionWebhook>,
    pub desired: String,
    pub objects: Vec<(Bytes, Value)>,
    /// The review's `request.uid`.
    pub uid: String,
}

impl Conversion {
    /// The POST to make: the ConversionReview at the webhook (`service`: the Service its
    /// `clientConfig` names, if it does and the Service exists).
    pub fn call(&self, service: Option<&Value>) -> Result<WebhookCall, String> {
        let version = self.webhook.review_version().ok_or("no supported conversion review versions")?;
        let (target, path) = self.webhook.client.resolve(service)?;
        let review = json!({
            "kind": "ConversionReview",
            "apiVersion": format!("apiextensions.k8s.io/{version}"),
            "request": {
                "uid": self.uid,
                "desiredAPIVersion": self.desired,
                "objects": self.objects.iter().map(|(_, o)| o).collect::<Vec<_>>(),
            },
        });
        // client-go puts its client's timeout in the query.
        let path = format!("{path}{}timeout={}s", if path.contains('?') { '&' } else { '?' }, TIMEOUT.as_secs());
        Ok(WebhookCall {
            method: http::Method::POST,
            target,
            path,
            body: Bytes::from(serde_json::to_vec(&review).expect("JSON trees serialize")),
            timeout: TIMEOUT,
            credentials: None,
        })
    }

    /// The converted objects, in order, from the webhook's answer; or the error every object
    /// of the conversion meets, in kube's words.
    pub fn answered(&self, answer: Result<WebhookAnswer, String>) -> Result<Vec<Value>, String> {
        let gvk = self.objects.first().map(|(_, o)| gvk(o)).unwrap_or_default();
        let failed = |e: String| format!("conversion webhook for {gvk} failed: {e}");
        let answer = answer.map_err(failed)?;
        if !(200..300).contains(&answer.status) {
            return Err(failed(status_error(&answer)));
        }
        let review: Value = serde_json::from_slice(&answer.body).map_err(|e| failed(e.to_string()))?;
        let converted = self.converted_objects(&review).map_err(failed)?;
        if converted.len() != self.objects.len() {
            return Err(format!("conversion webhook for {gvk} returned {} objects, expected {}", converted.len(), self.objects.len()));
        }
        self.objects.iter().zip(converted).map(|((_, original), converted)| self.checked(original, converted)).collect()
    }

    /// `response.convertedObjects`, once the review is the one asked for and it succeeded.
    fn converted_objects(&self, review: &Value) -> Result<Vec<Value>, String> {
        let v1 = self.webhook.review_version() == Some("v1");
        if v1 {
            let (api_version, kind) = (meta::str_at(review, &["apiVersion"]).unwrap_or_default(), meta::str_at(review, &["kind"]).unwrap_or_default());
            if (api_version, kind) != ("apiextensions.k8s.io/v1", "ConversionReview") {
                return Err(format!("expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {}", gvk_of(api_version, kind)));
            }
        }
        let response = review.get("response").filter(|r| r.is_object()).ok_or("no response provided")?;
        let uid = response.get("uid").and_then(Value::as_str).unwrap_or_default();
        if v1 && uid != self.uid {
            return Err(format!("expected response.uid={:?}, got {uid:?}", self.uid));
        }
        let status = meta::str_at(response, &["result", "status"]).unwrap_or_default();
        if status != "Success" {
            return Err(match meta::str_at(response, &["result", "message"]).filter(|m| !m.is_empty()) {
                Some(m) => m.to_string(),
                None => format!("response.result.status was '{status}', not 'Success'"),
            });
        }
        Ok(response.get("convertedObjects").and_then(Value::as_array).cloned().unwrap_or_default())
    }

    /// One converted object, checked against the original and given the original's metadata
    /// with its own labels and annotations.
    fn checked(&self, original: &Value, mut converted: Value) -> Result<Value, String> {
        let gvk = gvk(original);
        let invalid = |e: String| format!("conversion webhook for {gvk} returned invalid object: {e}");
        let got = meta::str_at(&converted, &["apiVersion"]).unwrap_or_default();
        if got != self.desired {
            return Err(format!(
                "conversion webhook for {gvk} returned invalid object at index 0: invalid groupVersion (expected {}, received {got})",
                self.desired
            ));
        }
        let (want_kind, got_kind) = (meta::str_at(original, &["kind"]).unwrap_or_default(), meta::str_at(&converted, &["kind"]).unwrap_or_default());
        if want_kind != got_kind {
            return Err(format!("conversion webhook for {gvk} returned invalid object at index 0: invalid kind (expected {want_kind}, received {got_kind})"));
        }
        for (what, field) in [("name", "name"), ("namespace", "namespace"), ("UID", "uid")] {
            let (a, b) = (meta::str_at(original, &["metadata", field]).unwrap_or_default(), meta::str_at(&converted, &["metadata", field]).unwrap_or_default());
            if a != b {
                return Err(invalid(format!("must have the same {what}: {a} != {b}")));
            }
        }
        restore_metadata(original, &mut converted).map_err(|e| format!("conversion webhook for {gvk} returned invalid metadata: {e}"))?;
        Ok(converted)
    }
}

/// `restoreObjectMeta`: the original's metadata, with the labels and annotations the webhook
/// gave (checked when they changed).
fn restore_metadata(original: &Value, converted: &mut Value) -> Result<(), String> {
    let answered = match converted.get("metadata") {
        None => return Err("missing metadata in converted object".into()),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => return Err(format!("invalid metadata of type {} in converted object", go_type(other))),
    };
    let mut metadata: Map<String, Value> = original.get("metadata").and_then(Value::as_object).cloned().unwrap_or_default();
    for field in ["labels", "annotations"] {
        let given = match answered.get(field) {
            None | Some(Value::Null) => {
                metadata.remove(field);
                continue;
            }
            Some(Value::Object(m)) => m,
            Some(other) => return Err(format!("invalid metadata.{field} of type {} in converted object", go_type(other))),
        };
        if let Some((k, v)) = given.iter().find(|(_, v)| !v.is_string()) {
            return Err(format!("metadata.{field}[{k}] must be a string, but is {} in converted object", go_type(v)));
        }
        if metadata.get(field).and_then(Value::as_object) != Some(given) {
            let map = Value::Object(given.clone());
            let errs = if field == "labels" {
                crate::validation::labels(Some(&map), "metadata.labels")
            } else {
                crate::validation::annotations(Some(&map), "metadata.annotation")
            };
            if let Some(e) = aggregate(&errs) {
                return Err(e);
            }
        }
        metadata.insert(field.into(), Value::Object(given.clone()));
    }
    if let Some(m) = converted.as_object_mut() {
        m.insert("metadata".into(), Value::Object(metadata));
    }
    Ok(())
}

/// The error of a webhook's answer that is not a success, as client-go words it.
fn status_error(answer: &WebhookAnswer) -> String {
    let status: Option<Value> = serde_json::from_slice(&answer.body).ok();
    if let Some(message) = status.as_ref().filter(|s| s.get("kind").and_then(Value::as_str) == Some("Status")).and_then(|s| meta::str_at(s, &["message"])) {
        return message.to_string();
    }
    if answer.body.is_empty() {
        return format!("the server responded with the status code {} but did not return more information", answer.status);
    }
    let body = String::from_utf8_lossy(&answer.body[..answer.body.len().min(1024)]).into_owned();
    format!("an error on the server ({body:?}) has prevented the request from succeeding")
}

/// Go's `%T` of a decoded JSON value.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// A GroupVersionKind as Go prints it: `stable.example.com/v1, Kind=CronTab`.
fn gvk(obj: &Value) -> String {
    gvk_of(meta::str_at(obj, &["apiVersion"]).unwrap_or_default(), meta::str_at(obj, &["kind"]).unwrap_or_default())
}

fn gvk_of(api_version: &str, kind: &str) -> String {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    format!("{}, Kind={kind}", if group.is_empty() { version.to_string() } else { format!("{group}/{version}") })
}

/// The webhook's answers a machine has had: each object (by its bytes) converted to a version,
/// or the error its conversion met.
#[derive(Default, Debug)]
pub struct Converted {
    answers: BTreeMap<(Bytes, String), Result<Value, String>>,
}

impl Converted {
    /// The answer for `input` converted to `desired`, if there is one.
    pub fn get(&self, input: &Bytes, desired: &str) -> Option<&Result<Value, String>> {
        self.answers.get(&(input.clone(), desired.to_string()))
    }

    /// Keeps what the webhook answered for `conversion`.
    pub fn record(&mut self, conversion: &Conversion, result: Result<Vec<Value>, String>) {
        let results: Vec<Result<Value, String>> = match result {
            Ok(objects) => objects.into_iter().map(Ok).collect(),
            Err(e) => vec![Err(e); conversion.objects.len()],
        };
        for ((input, _), r) in conversion.objects.iter().zip(results) {
            self.answers.insert((input.clone(), conversion.desired.clone()), r);
        }
    }

    pub fn clear(&mut self) {
        self.answers.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn webhook(versions: &[&str]) -> Arc<ConversionWebhook> {
        let spec = json!({"conversion": {"strategy": "Webhook", "webhook": {
            "clientConfig": {"url": "https://127.0.0.1:9443/convert"}, "conversionReviewVersions": versions}}});
        Arc::new(ConversionWebhook::read(&spec).expect("a webhook"))
    }

    fn conversion() -> Conversion {
        let obj = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "a", "namespace": "ns", "uid": "u1", "labels": {"x": "1"}, "resourceVersion": "5"}, "spec": {"cron": "* * * * *"}});
        Conversion { webhook: webhook(&["v1", "v1beta1"]), desired: "stable.example.com/v2".into(), objects: vec![(Bytes::from("a"), obj)], uid: "r1".into() }
    }

    fn answer(review: Value) -> Result<WebhookAnswer, String> {
        Ok(WebhookAnswer { status: 200, body: Bytes::from(serde_json::to_vec(&review).unwrap()), ..Default::default() })
    }

    fn success(objects: Value) -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "r1", "result": {"status": "Success"}, "convertedObjects": objects}})
    }

    #[test]
    fn a_crds_conversion_is_checked_as_kube_checks_it() {
        let m = |spec: Value| validate(&spec).iter().map(|e| e.to_string()).collect::<Vec<_>>();
        assert!(m(json!({"conversion": {"strategy": "None"}})).is_empty());
        assert!(
            m(json!({"conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://h/c"}, "conversionReviewVersions": ["v1"]}}}))
                .is_empty()
        );
        assert_eq!(
            m(json!({"conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v2", "v2"]}}})),
            [
                "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
                "spec.conversion.conversionReviewVersions[1]: Invalid value: \"v2\": duplicate version",
                "spec.conversion.conversionReviewVersions: Invalid value: []string{\"v2\", \"v2\"}: must include at least one of v1, v1beta1",
            ]
        );
        assert_eq!(
            m(json!({"conversion": {"strategy": "None", "webhook": {"clientConfig": {"url": "https://h"}}}})),
            ["spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook"]
        );
        assert_eq!(
            m(json!({"conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {}, "conversionReviewVersions": ["v1"]}}})),
            ["spec.conversion.webhookClientConfig: Required value: exactly one of url or service is required"]
        );
        assert_eq!(
            m(json!({"conversion": {"strategy": "Other"}})),
            ["spec.conversion.strategy: Unsupported value: \"Other\": supported values: \"None\", \"Webhook\""]
        );
    }

    #[test]
    fn only_a_webhook_strategy_has_a_webhook() {
        assert!(ConversionWebhook::read(&json!({"conversion": {"strategy": "None"}})).is_none());
        assert!(ConversionWebhook::read(&json!({})).is_none());
        assert_eq!(webhook(&["v2", "v1beta1", "v1"]).review_version(), Some("v1beta1"));
    }

    #[test]
    fn the_review_asks_for_the_desired_version() {
        let call = conversion().call(None).unwrap();
        let review: Value = serde_json::from_slice(&call.body).unwrap();
        assert_eq!(review["apiVersion"], "apiextensions.k8s.io/v1");
        assert_eq!(review["request"]["desiredAPIVersion"], "stable.example.com/v2");
        assert_eq!(review["request"]["uid"], "r1");
        assert_eq!(review["request"]["objects"][0]["metadata"]["name"], "a");
        assert_eq!(call.path, "/convert?timeout=30s");
    }

    #[test]
    fn converted_objects_keep_their_metadata_but_labels_and_annotations() {
        let c = conversion();
        let out = json!([{"apiVersion": "stable.example.com/v2", "kind": "CronTab",
            "metadata": {"name": "a", "namespace": "ns", "uid": "u1", "labels": {"y": "2"}, "generation": 9}, "spec": {"schedule": "* * * * *"}}]);
        let objects = c.answered(answer(success(out))).unwrap();
        assert_eq!(objects[0]["metadata"], json!({"name": "a", "namespace": "ns", "uid": "u1", "labels": {"y": "2"}, "resourceVersion": "5"}));
        assert_eq!(objects[0]["spec"], json!({"schedule": "* * * * *"}));
    }

    #[test]
    fn a_wrong_answer_is_kubes_error() {
        let c = conversion();
        let e = |review: Value| c.answered(answer(review)).unwrap_err();
        let obj = |api: &str, name: &str| json!({"apiVersion": api, "kind": "CronTab", "metadata": {"name": name, "namespace": "ns", "uid": "u1"}});
        assert_eq!(
            e(success(json!([obj("stable.example.com/v1", "a")]))),
            "conversion webhook for stable.example.com/v1, Kind=CronTab returned invalid object at index 0: invalid groupVersion (expected stable.example.com/v2, received stable.example.com/v1)"
        );
        assert_eq!(
            e(success(json!([obj("stable.example.com/v2", "b")]))),
            "conversion webhook for stable.example.com/v1, Kind=CronTab returned invalid object: must have the same name: a != b"
        );
        assert_eq!(e(success(json!([]))), "conversion webhook for stable.example.com/v1, Kind=CronTab returned 0 objects, expected 1");
        let failed = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": {"uid": "r1", "result": {"status": "Failure", "message": "no way"}}});
        assert_eq!(e(failed), "conversion webhook for stable.example.com/v1, Kind=CronTab failed: no way");
        let other = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": {"uid": "r2", "result": {"status": "Success"}}});
        assert_eq!(e(other), "conversion webhook for stable.example.com/v1, Kind=CronTab failed: expected response.uid=\"r1\", got \"r2\"");
        let bad_label = json!([{"apiVersion": "stable.example.com/v2", "kind": "CronTab", "metadata": {"name": "a", "namespace": "ns", "uid": "u1", "labels": {"x": "a b"}}}]);
        assert!(
            e(success(bad_label))
                .starts_with("conversion webhook for stable.example.com/v1, Kind=CronTab returned invalid metadata: metadata.labels: Invalid value: \"a b\"")
        );
        assert_eq!(
            c.answered(Err("Post \"https://127.0.0.1:9443/convert\": dial tcp 127.0.0.1:9443: connect: connection refused".into())).unwrap_err(),
            "conversion webhook for stable.example.com/v1, Kind=CronTab failed: Post \"https://127.0.0.1:9443/convert\": dial tcp 127.0.0.1:9443: connect: connection refused"
        );
    }
}
