//! The `AdmissionReview` a webhook is sent (`admission.k8s.io/v1`, or `v1beta1` when that is
//! the first version the webhook accepts) and what kube makes of its answer
//! (`VerifyAdmissionResponse`, `ToStatusErr`), in kube's words.

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::Hook;
use crate::admission::matching::{namespace_of, operation_name};
use crate::admission::{Attributes, Operation};
use crate::catalog::ResourceInfo;
use crate::codec::go_json;
use crate::rand::Rng;
use crate::status::{ApiError, StatusDetails, quote};
use crate::webhook::{WebhookAnswer, unexpected_status};

/// The review versions kube sends, in its order of preference.
const VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// The first review version the webhook accepts, or kube's error (for the failure policy).
pub fn version(hook: &Hook) -> Result<&'static str, String> {
    hook.review_versions
        .iter()
        .find_map(|v| VERSIONS.into_iter().find(|k| k == v))
        .ok_or_else(|| "could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)".to_string())
}

/// The kind and the resource of a write of `info`'s resource, as a review names them.
fn kind_and_resource(info: &ResourceInfo, subresource: Option<&str>) -> (Value, Value) {
    let (kind_group, kind_version, kind) = match subresource.and_then(|s| info.subresource(s)) {
        Some(s) => (s.group.as_str(), s.version.as_str(), s.kind.as_str()),
        None => (info.group.as_str(), info.version.as_str(), info.kind.as_str()),
    };
    (json!({"group": kind_group, "version": kind_version, "kind": kind}), json!({"group": info.group, "version": info.version, "resource": info.resource}))
}

/// The review's `request` without its uid and objects (CEL's `request`): the kind and
/// resource the webhook is asked about (`invoked`: an equivalent one its rules name), the
/// request's, the name, namespace, operation, user, dry run and options.
pub fn request(a: &Attributes, invoked: &ResourceInfo, obj: Option<&Value>) -> Value {
    let (kind, resource) = kind_and_resource(invoked, a.subresource);
    let (request_kind, request_resource) = kind_and_resource(a.info, a.subresource);
    let mut r = Map::new();
    r.insert("kind".into(), kind);
    r.insert("resource".into(), resource);
    if let Some(s) = a.subresource {
        r.insert("subResource".into(), json!(s));
    }
    r.insert("requestKind".into(), request_kind);
    r.insert("requestResource".into(), request_resource);
    if let Some(s) = a.subresource {
        r.insert("requestSubResource".into(), json!(s));
    }
    let name = request_name(a, obj);
    if !name.is_empty() {
        r.insert("name".into(), json!(name));
    }
    let namespace = namespace_of(a, obj);
    if !namespace.is_empty() {
        r.insert("namespace".into(), json!(namespace));
    }
    r.insert("operation".into(), json!(operation_name(a.operation)));
    r.insert("userInfo".into(), user_info(a.user));
    r.insert("dryRun".into(), json!(a.dry_run));
    let options = match a.operation {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
        Operation::Delete => "DeleteOptions",
    };
    let mut options = json!({"kind": options, "apiVersion": "meta.k8s.io/v1"});
    if a.dry_run {
        options["dryRun"] = json!(["All"]);
    }
    r.insert("options".into(), options);
    Value::Object(r)
}

/// The name kube's admission attributes carry: a new object's own (empty when it is to be
/// generated), the request path's otherwise.
pub fn request_name<'a>(a: &'a Attributes, obj: Option<&'a Value>) -> &'a str {
    match a.operation {
        Operation::Create => obj.map(crate::meta::name).unwrap_or_default(),
        _ => a.name,
    }
}

/// `authenticationv1.UserInfo` as a review carries it (empty fields left out).
fn user_info(user: &crate::auth::UserInfo) -> Value {
    let mut u = Map::new();
    u.insert("username".into(), json!(user.name));
    if !user.uid.is_empty() {
        u.insert("uid".into(), json!(user.uid));
    }
    if !user.groups.is_empty() {
        u.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        u.insert("extra".into(), json!(user.extra));
    }
    Value::Object(u)
}

/// The review sent: its uid (drawn from `salt`, the webhook, the `phase` it is asked in and
/// what it asks, so the same question gets the same uid) and its body.
pub fn body(hook: &Hook, phase: &str, version: &str, request: &Value, obj: Option<&Value>, old: Option<&Value>, salt: u64) -> (String, Bytes) {
    let api_version = format!("admission.k8s.io/{version}");
    let review = |uid: &str| {
        serde_json::to_vec(&Review { api_version: &api_version, request: Request { uid, fields: request, obj, old } }).expect("JSON trees serialize")
    };
    let unnamed = review("");
    let uid = Rng::of(&[&salt.to_be_bytes()[..], hook.uid.as_bytes(), phase.as_bytes(), &unnamed].concat()).uuid();
    let named = review(&uid);
    (uid, Bytes::from(named))
}

/// An `AdmissionReview` written from what the write already holds (nothing copied), its keys
/// in the order a JSON object of them is written (sorted).
struct Review<'a> {
    api_version: &'a str,
    request: Request<'a>,
}

/// Its `request`: the request's fields with the objects and the uid among them.
struct Request<'a> {
    uid: &'a str,
    fields: &'a Value,
    obj: Option<&'a Value>,
    old: Option<&'a Value>,
}

impl serde::Serialize for Review<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("apiVersion", self.api_version)?;
        m.serialize_entry("kind", "AdmissionReview")?;
        m.serialize_entry("request", &self.request)?;
        m.end()
    }
}

impl serde::Serialize for Request<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let uid = Value::String(self.uid.to_string());
        let mut added = [("object", self.obj.unwrap_or(&Value::Null)), ("oldObject", self.old.unwrap_or(&Value::Null)), ("uid", &uid)].into_iter().peekable();
        let mut m = s.serialize_map(None)?;
        for (k, v) in self.fields.as_object().into_iter().flatten() {
            while let Some((key, value)) = added.next_if(|(key, _)| *key < k.as_str()) {
                m.serialize_entry(key, value)?;
            }
            m.serialize_entry(k, v)?;
        }
        for (key, value) in added {
            m.serialize_entry(key, value)?;
        }
        m.end()
    }
}

/// What a webhook answered, checked.
#[derive(Debug, Default, PartialEq)]
pub struct Response {
    pub allowed: bool,
    pub status: Option<Value>,
    /// A mutating webhook's JSON patch, decoded from base64.
    pub patch: Option<Vec<u8>>,
    /// Its type, with a patch (only `JSONPatch` is applied).
    pub patch_type: Option<String>,
    pub warnings: Vec<String>,
    /// `auditAnnotations`, by key.
    pub audit_annotations: Vec<(String, String)>,
}

/// kube's reading of a webhook's answer to the review `uid` (`version`): the response, or
/// why the call failed (`failed calling webhook "<name>": ...`), which the failure policy
/// decides on.
pub fn read(hook: &Hook, version: &str, uid: &str, mutating: bool, answer: &Result<WebhookAnswer, String>) -> Result<Response, String> {
    let failed = |why: String| format!("failed calling webhook {}: {why}", quote(&hook.name));
    let answer = answer.as_ref().map_err(|e| failed(format!("failed to call webhook: {e}")))?;
    if !answer.succeeded() {
        return Err(failed(format!("failed to call webhook: {}", unexpected_status(answer))));
    }
    if answer.body.is_empty() {
        return Err(failed(format!("failed to call webhook: 0-length response with status code: {} and content type: {}", answer.status, answer.content_type)));
    }
    let review = crate::webhook::answer::decode(&answer.body).map_err(|e| failed(format!("failed to call webhook: {e}")))?;
    let patch = typed_patch(&review, version).map_err(|e| failed(format!("failed to call webhook: {e}")))?;
    verify(&review, patch, version, uid, mutating).map_err(|e| failed(format!("received invalid webhook response: {e}")))
}

/// The response's patch, decoded (empty when there is none), once Go's decoding of `review`
/// into the `AdmissionReview` of `version` passes; else its first error: a field of another
/// JSON type than the response's Go type (a null is no value, in a list or a map too), a
/// patch that is not base64 or not bytes. The fields are checked in one order, where Go's
/// decoder names the first in the document; a refusal's `details` and the review's
/// `request` are not checked.
fn typed_patch(review: &Map<String, Value>, version: &str) -> Result<Vec<u8>, String> {
    let response = match review.get("response") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(r)) => r,
        Some(other) => return Err(go_json::mistyped(other, "AdmissionReview.response", &format!("{version}.AdmissionResponse"))),
    };
    let at = |k: &str| format!("AdmissionResponse.response.{k}");
    let mistyped =
        |k: &str, ok: fn(&Value) -> bool, go_type: &str| response.get(k).filter(|v| !v.is_null() && !ok(v)).map(|v| go_json::mistyped(v, &at(k), go_type));
    let strings = |k: &str, members: Vec<&Value>| members.into_iter().find(|v| !v.is_string() && !v.is_null()).map(|v| go_json::mistyped(v, &at(k), "string"));
    let first = |error: Option<String>| error.map_or(Ok(()), Err);
    first(
        mistyped("uid", Value::is_string, "types.UID")
            .or_else(|| mistyped("allowed", Value::is_boolean, "bool"))
            .or_else(|| mistyped("status", Value::is_object, "v1.Status"))
            .or_else(|| status_type_error(response.get("status")?)),
    )?;
    let patch = response.get("patch").map_or(Ok(Vec::new()), |p| go_json::bytes(p, &at("patch")))?;
    first(
        mistyped("patchType", Value::is_string, &format!("{version}.PatchType"))
            .or_else(|| mistyped("auditAnnotations", Value::is_object, "map[string]string"))
            .or_else(|| strings("auditAnnotations", response.get("auditAnnotations")?.as_object()?.values().collect()))
            .or_else(|| mistyped("warnings", Value::is_array, "[]string"))
            .or_else(|| strings("warnings", response.get("warnings")?.as_array()?.iter().collect())),
    )?;
    Ok(patch)
}

/// The first type error of a refusal's `status` (a `metav1.Status`), in its fields a
/// refusal reads.
fn status_type_error(status: &Value) -> Option<String> {
    let at = |k: &str| format!("Status.response.status.{k}");
    for k in ["status", "message", "reason"] {
        if let Some(v) = status.get(k).filter(|v| !v.is_null() && !v.is_string()) {
            return Some(go_json::mistyped(v, &at(k), "string"));
        }
    }
    match status.get("code")? {
        Value::Null => None,
        Value::Number(n) if n.as_i64().is_some_and(|c| i32::try_from(c).is_ok()) => None,
        Value::Number(n) => Some(format!("json: cannot unmarshal number {n} into Go struct field {} of type int32", at("code"))),
        other => Some(go_json::mistyped(other, &at("code"), "int32")),
    }
}

/// `VerifyAdmissionResponse`, of `review` whose response's patch decoded to `patch`.
fn verify(review: &Map<String, Value>, patch: Vec<u8>, version: &str, uid: &str, mutating: bool) -> Result<Response, String> {
    let response = review.get("response").filter(|r| r.is_object()).ok_or("webhook response was absent")?;
    let text = |k: &str| response.get(k).and_then(Value::as_str);
    // An empty patch is none (kube's `len(Patch) > 0`).
    let mut patch = Some(patch).filter(|p| !p.is_empty());
    let patch_type = text("patchType");
    if version == "v1" {
        let got = text("uid").unwrap_or_default();
        if got != uid {
            return Err(format!("expected response.uid={uid:?}, got {got:?}"));
        }
        let api_version = review.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let kind = review.get("kind").and_then(Value::as_str).unwrap_or_default();
        if api_version != "admission.k8s.io/v1" || kind != "AdmissionReview" {
            let (group, v) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            return Err(format!("expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {group}/{v}, Kind={kind}"));
        }
        match (mutating, &patch, patch_type) {
            (true, Some(_), None) => return Err("webhook returned response.patch but not response.patchType".into()),
            (true, None, Some(_)) => return Err("webhook returned response.patchType but not response.patch".into()),
            (true, _, Some("")) => return Err("webhook returned invalid response.patchType of \"\"".into()),
            (false, Some(_), _) => return Err("validating webhook may not return response.patch".into()),
            (false, None, Some(_)) => return Err("validating webhook may not return response.patchType".into()),
            _ => {}
        }
    }
    if !mutating {
        patch = None;
    }
    // v1beta1's patches are JSON patches whatever the type says.
    let patch_type = patch.as_ref().map(|_| if version == "v1" { patch_type.unwrap_or_default() } else { "JSONPatch" }.to_string());
    Ok(Response {
        allowed: response.get("allowed").and_then(Value::as_bool).unwrap_or(false),
        status: response.get("status").filter(|s| s.is_object()).cloned(),
        patch,
        patch_type,
        warnings: crate::meta::strings(response.get("warnings")),
        audit_annotations: response
            .get("auditAnnotations")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect(),
    })
}

/// A webhook's refusal (`ToStatusErr`): its status, at least a 400, with kube's message
/// (`admission webhook "<name>" denied the request: <message or reason>`).
pub fn denied(hook: &Hook, status: Option<&Value>) -> ApiError {
    let empty = Value::Null;
    let status = status.unwrap_or(&empty);
    let text = |k: &str| status.get(k).and_then(Value::as_str).unwrap_or_default();
    let denied_by = format!("admission webhook {} denied the request", quote(&hook.name));
    let message = match (text("message"), text("reason")) {
        ("", "") => format!("{denied_by} without explanation"),
        ("", reason) => format!("{denied_by}: {reason}"),
        (message, _) => format!("{denied_by}: {message}"),
    };
    let code = status.get("code").and_then(Value::as_u64).filter(|c| (400..600).contains(c)).unwrap_or(400) as u16;
    let details = StatusDetails::of_status(status);
    ApiError { details, ..ApiError::new(code, crate::status::known_reason(text("reason")), message) }
}
