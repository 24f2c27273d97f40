//! Typed API errors and their `metav1.Status` form.
//!
//! Every error that reaches a client is an [`ApiError`]; its constructors mirror apimachinery's
//! `k8s.io/apimachinery/pkg/api/errors` so that code, reason, message and details are the ones
//! kube-apiserver sends for the same situation.

pub mod field;

use serde_json::{Map, Value, json};

pub use field::{BadValue, FieldError, FieldErrorType};

/// A group and a resource, as in `deployments.apps` (core group: `pods`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    pub fn new(group: &str, resource: &str) -> Self {
        GroupResource { group: group.to_string(), resource: resource.to_string() }
    }
}

impl std::fmt::Display for GroupResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() { write!(f, "{}", self.resource) } else { write!(f, "{}.{}", self.resource, self.group) }
    }
}

/// A group and a kind, as in `Deployment.apps`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupKind {
    pub group: String,
    pub kind: String,
}

impl std::fmt::Display for GroupKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() { write!(f, "{}", self.kind) } else { write!(f, "{}.{}", self.kind, self.group) }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct StatusCause {
    pub reason: String,
    pub message: String,
    pub field: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct StatusDetails {
    pub name: String,
    pub group: String,
    pub kind: String,
    pub uid: String,
    pub causes: Vec<StatusCause>,
    pub retry_after_seconds: i32,
}

impl StatusDetails {
    /// The `details` of a `metav1.Status` written elsewhere (a webhook's, another request's
    /// answer), if it has them; fields of other types are left empty.
    pub fn of_status(status: &Value) -> Option<Box<StatusDetails>> {
        let d = status.get("details").filter(|d| d.is_object())?;
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let causes = d.get("causes").and_then(Value::as_array).into_iter().flatten();
        Some(Box::new(StatusDetails {
            name: text(d, "name"),
            group: text(d, "group"),
            kind: text(d, "kind"),
            uid: text(d, "uid"),
            causes: causes.map(|c| StatusCause { reason: text(c, "reason"), message: text(c, "message"), field: text(c, "field") }).collect(),
            retry_after_seconds: d.get("retryAfterSeconds").and_then(Value::as_i64).and_then(|s| i32::try_from(s).ok()).unwrap_or(0),
        }))
    }
}

/// An error answered to the client as a `metav1.Status`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub code: u16,
    /// `metav1.StatusReason`; empty for errors kube-apiserver sends without a reason.
    pub reason: &'static str,
    pub message: String,
    /// Boxed: errors travel in every `Result` of the core, and most have no details.
    pub details: Option<Box<StatusDetails>>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ApiError {}

fn details_for(gr: &GroupResource, name: &str) -> Option<Box<StatusDetails>> {
    Some(Box::new(StatusDetails { name: name.to_string(), group: gr.group.clone(), kind: gr.resource.clone(), ..Default::default() }))
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError { code, reason, message: message.into(), details: None }
    }

    /// The error a request of the server's own was answered with (`code`, and the `Status` of
    /// its body), as client-go makes it of the answer.
    pub fn answered(code: u16, status: &Value) -> Self {
        let text = |k: &str| status.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        ApiError { details: StatusDetails::of_status(status), ..Self::new(code, known_reason(&text("reason")), text("message")) }
    }

    pub fn not_found(gr: &GroupResource, name: &str) -> Self {
        ApiError { details: details_for(gr, name), ..Self::new(404, "NotFound", format!("{gr} {} not found", quote(name))) }
    }

    pub fn already_exists(gr: &GroupResource, name: &str) -> Self {
        ApiError { details: details_for(gr, name), ..Self::new(409, "AlreadyExists", format!("{gr} {} already exists", quote(name))) }
    }

    pub fn conflict(gr: &GroupResource, name: &str, why: &str) -> Self {
        ApiError { details: details_for(gr, name), ..Self::new(409, "Conflict", format!("Operation cannot be fulfilled on {gr} {}: {why}", quote(name))) }
    }

    /// The conflict of an update or delete based on a stale `resourceVersion`.
    pub fn stale_conflict(gr: &GroupResource, name: &str) -> Self {
        Self::conflict(gr, name, "the object has been modified; please apply your changes to the latest version and try again")
    }

    pub fn invalid(gk: &GroupKind, name: &str, errors: &[FieldError]) -> Self {
        let causes = errors.iter().map(|e| StatusCause { reason: e.kind.cause_reason().to_string(), message: e.body(), field: e.field.clone() }).collect();
        let message = match field::aggregate(errors) {
            Some(agg) => format!("{gk} {} is invalid: {agg}", quote(name)),
            None => format!("{gk} {} is invalid", quote(name)),
        };
        ApiError {
            details: Some(Box::new(StatusDetails { name: name.to_string(), group: gk.group.clone(), kind: gk.kind.clone(), causes, ..Default::default() })),
            ..Self::new(422, "Invalid", message)
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn method_not_supported(gr: &GroupResource, action: &str) -> Self {
        ApiError {
            details: Some(Box::new(StatusDetails { group: gr.group.clone(), kind: gr.resource.clone(), ..Default::default() })),
            ..Self::new(405, "MethodNotAllowed", format!("{action} is not supported on resources of kind {}", quote(&gr.to_string())))
        }
    }

    /// `405` for a create of a custom resource whose CRD is being deleted, as kube's CRD
    /// handler words it.
    pub fn create_while_terminating(gr: &GroupResource) -> Self {
        ApiError { message: "create not allowed while custom resource definition is terminating".into(), ..Self::method_not_supported(gr, "create") }
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Gone", message)
    }

    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn timeout(message: &str, retry_after_seconds: i32) -> Self {
        ApiError {
            details: Some(Box::new(StatusDetails { retry_after_seconds, ..Default::default() })),
            ..Self::new(504, "Timeout", format!("Timeout: {message}"))
        }
    }

    pub fn server_timeout(gr: &GroupResource, operation: &str, retry_after_seconds: i32) -> Self {
        ApiError {
            details: Some(Box::new(StatusDetails { group: gr.group.clone(), kind: gr.resource.clone(), retry_after_seconds, ..Default::default() })),
            ..Self::new(500, "ServerTimeout", format!("The {operation} operation against {gr} could not be completed at this time, please try again."))
        }
    }

    pub fn internal(message: impl std::fmt::Display) -> Self {
        let message = message.to_string();
        ApiError {
            details: Some(Box::new(StatusDetails { causes: vec![StatusCause { message: message.clone(), ..Default::default() }], ..Default::default() })),
            ..Self::new(500, "InternalError", format!("Internal error occurred: {message}"))
        }
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn forbidden(gr: &GroupResource, name: &str, why: &str) -> Self {
        let message = if gr.group.is_empty() && gr.resource.is_empty() {
            format!("forbidden: {why}")
        } else if name.is_empty() {
            format!("{gr} is forbidden: {why}")
        } else {
            format!("{gr} {} is forbidden: {why}", quote(name))
        };
        ApiError { details: details_for(gr, name), ..Self::new(403, "Forbidden", message) }
    }

    pub fn request_entity_too_large(message: &str) -> Self {
        Self::new(413, "RequestEntityTooLarge", format!("Request entity too large: {message}"))
    }

    pub fn unsupported_media_type(accepted: &[&str]) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: {}", accepted.join(", ")),
        )
    }

    pub fn not_acceptable(accepted: &[&str]) -> Self {
        Self::new(406, "NotAcceptable", format!("only the following media types are accepted: {}", accepted.join(", ")))
    }

    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// `503` for what may be a custom resource before the CRDs are known, as kube's CRD
    /// handler answers before its informer has synced (`serverStartingError`).
    pub fn server_starting() -> Self {
        ApiError { details: Some(Box::new(StatusDetails { retry_after_seconds: 10, ..Default::default() })), ..Self::service_unavailable("server is starting") }
    }

    /// `404` for a path no route serves, as kube's router answers it (with empty details).
    pub fn path_not_found() -> Self {
        Self::routing(404, "NotFound", "the server could not find the requested resource")
    }

    /// `405` for a method the route does not serve, as kube's router answers it.
    pub fn method_not_allowed() -> Self {
        Self::routing(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
    }

    /// `415` for a PATCH whose content type is no patch type, as kube's router (go-restful's
    /// `Consumes`) answers it before any handler runs.
    pub fn patch_type_not_consumed() -> Self {
        Self::routing(415, "UnsupportedMediaType", "415: Unsupported Media Type")
    }

    /// An error of kube's router (go-restful's service errors): empty details.
    fn routing(code: u16, reason: &'static str, message: &str) -> Self {
        ApiError { details: Some(Box::default()), ..Self::new(code, reason, message) }
    }

    /// The `metav1.Status` object for this error.
    pub fn to_status(&self) -> Value {
        let mut status = Map::new();
        status.insert("kind".into(), json!("Status"));
        status.insert("apiVersion".into(), json!("v1"));
        status.insert("metadata".into(), json!({}));
        status.insert("status".into(), json!("Failure"));
        status.insert("message".into(), json!(self.message));
        if !self.reason.is_empty() {
            status.insert("reason".into(), json!(self.reason));
        }
        if let Some(d) = &self.details {
            status.insert("details".into(), details_json(d));
        }
        status.insert("code".into(), json!(self.code));
        Value::Object(status)
    }
}

fn details_json(d: &StatusDetails) -> Value {
    let mut m = Map::new();
    let mut put = |k: &str, v: &str| {
        if !v.is_empty() {
            m.insert(k.into(), json!(v));
        }
    };
    put("name", &d.name);
    put("group", &d.group);
    put("kind", &d.kind);
    put("uid", &d.uid);
    if !d.causes.is_empty() {
        let causes: Vec<Value> = d
            .causes
            .iter()
            .map(|c| {
                let mut cm = Map::new();
                for (k, v) in [("reason", &c.reason), ("message", &c.message), ("field", &c.field)] {
                    if !v.is_empty() {
                        cm.insert(k.into(), json!(v));
                    }
                }
                Value::Object(cm)
            })
            .collect();
        m.insert("causes".into(), Value::Array(causes));
    }
    if d.retry_after_seconds != 0 {
        m.insert("retryAfterSeconds".into(), json!(d.retry_after_seconds));
    }
    Value::Object(m)
}

/// The `metav1.Status` of a successful operation (a DELETE answered without the object).
pub fn success_status(gr: &GroupResource, name: &str, uid: &str) -> Value {
    let mut details = Map::new();
    details.insert("name".into(), json!(name));
    if !gr.group.is_empty() {
        details.insert("group".into(), json!(gr.group));
    }
    details.insert("kind".into(), json!(gr.resource));
    if !uid.is_empty() {
        details.insert("uid".into(), json!(uid));
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": Value::Object(details),
    })
}

/// kube's `metav1.StatusReason` of the name `reason`, as a `Status` another server wrote
/// carries it; empty for one kube does not define.
pub fn known_reason(reason: &str) -> &'static str {
    const REASONS: [&str; 20] = [
        "Unauthorized",
        "Forbidden",
        "NotFound",
        "AlreadyExists",
        "Conflict",
        "Gone",
        "Invalid",
        "ServerTimeout",
        "StoreReadError",
        "Timeout",
        "TooManyRequests",
        "BadRequest",
        "MethodNotAllowed",
        "NotAcceptable",
        "RequestEntityTooLarge",
        "UnsupportedMediaType",
        "InternalError",
        "Expired",
        "ServiceUnavailable",
        "Unknown",
    ];
    REASONS.into_iter().find(|r| *r == reason).unwrap_or("")
}

/// Go's `%q` for the strings kube puts in messages.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_matches_kube() {
        let e = ApiError::not_found(&GroupResource::new("apps", "deployments"), "web");
        assert_eq!(
            e.to_status(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                "message":"deployments.apps \"web\" not found","reason":"NotFound",
                "details":{"name":"web","group":"apps","kind":"deployments"},"code":404})
        );
    }

    #[test]
    fn invalid_aggregates_messages() {
        let gk = GroupKind { group: String::new(), kind: "Pod".into() };
        let one = ApiError::invalid(&gk, "p", &[FieldError::required("spec.containers", "")]);
        assert_eq!(one.message, "Pod \"p\" is invalid: spec.containers: Required value");
        let two =
            ApiError::invalid(&gk, "p", &[FieldError::required("spec.containers", ""), FieldError::invalid("metadata.name", json!("A"), "must be lowercase")]);
        assert_eq!(two.message, "Pod \"p\" is invalid: [spec.containers: Required value, metadata.name: Invalid value: \"A\": must be lowercase]");
        assert_eq!(two.details.unwrap().causes[1].reason, "FieldValueInvalid");
    }
}
