//! Auditing (kube's `--audit-policy-file` with a log backend): each request the policy gives a
//! level gets `audit.k8s.io/v1` events, one JSON line each, at the stages the policy does not
//! omit: `RequestReceived` once the request is authenticated, `ResponseStarted` when a
//! long-running answer (a watch, a proxied upgrade) begins, `ResponseComplete` when the answer
//! is written. An event carries the request's identity (`auditID`, the `Audit-Id` header), who
//! made it (and whom it impersonated), what it addressed, the answer's status, the request's
//! and the answer's objects at the levels that record them, and the annotations authorization
//! and admission added.
//!
//! [`Recorder`] is a request's: the pipeline feeds it what passes and emits the lines it makes
//! as [`crate::pipeline::Effect::Audit`]; the shell appends them to the log.

pub mod policy;

use std::collections::BTreeMap;

use bytes::Bytes;
use jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;

use crate::auth::UserInfo;
use crate::schema::normalize::format_time;
pub use policy::{Config, Level, Policy, Stage};

#[derive(Serialize)]
struct User<'a> {
    username: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    uid: &'a str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    groups: &'a [String],
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    extra: &'a BTreeMap<String, Vec<String>>,
}

impl<'a> User<'a> {
    fn of(u: &'a UserInfo) -> User<'a> {
        User { username: &u.name, uid: &u.uid, groups: &u.groups, extra: &u.extra }
    }
}

/// What a resource request addressed (kube's `ObjectReference` of an event).
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Status<'a> {
    metadata: Empty,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<&'a Value>,
    code: u16,
}

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Event<'a> {
    kind: &'static str,
    api_version: &'static str,
    level: &'static str,
    #[serde(rename = "auditID")]
    audit_id: &'a str,
    stage: &'static str,
    #[serde(rename = "requestURI")]
    request_uri: &'a str,
    verb: &'a str,
    user: User<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    impersonated_user: Option<User<'a>>,
    #[serde(rename = "sourceIPs", skip_serializing_if = "<[String]>::is_empty")]
    source_ips: &'a [String],
    #[serde(skip_serializing_if = "str::is_empty")]
    user_agent: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    object_ref: Option<&'a ObjectRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_status: Option<Status<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_object: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_object: Option<&'a Value>,
    request_received_timestamp: String,
    stage_timestamp: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    annotations: &'a BTreeMap<String, String>,
}

/// A request, as its events tell of it.
pub struct Received {
    pub audit_id: String,
    /// The path and query as the client wrote them.
    pub request_uri: String,
    pub verb: String,
    pub user: UserInfo,
    pub source_ips: Vec<String>,
    pub user_agent: String,
    pub object_ref: Option<ObjectRef>,
    pub at: Timestamp,
}

/// One request's events (see the module's doc).
pub struct Recorder {
    config: Config,
    request: Received,
    /// The object the request carries, once its handler has it (`Request` and above).
    request_object: Option<Value>,
    impersonated: Option<UserInfo>,
    annotations: BTreeMap<String, String>,
    /// The answer's status code, once it is known.
    code: Option<u16>,
    /// The answer's `Content-Type`.
    content_type: Option<String>,
    /// The answer's body, while it is written, when the event records it or it may be a
    /// `Status`.
    body: Vec<u8>,
    done: bool,
}

/// The source addresses of a request (kube's `SourceIPs`): the addresses of
/// `X-Forwarded-For` (what is not one left out), then `X-Real-Ip`'s unless it is the last of
/// those, then the connection's unless it is the last.
pub fn source_ips(forwarded_for: Option<&str>, real_ip: Option<&str>, remote_addr: &str) -> Vec<String> {
    let ip = |s: &str| s.trim().parse::<core::net::IpAddr>().ok().map(|ip| ip.to_string());
    let mut ips: Vec<String> = forwarded_for.into_iter().flat_map(|f| f.split(',')).filter_map(ip).collect();
    let remote = match remote_addr.parse::<core::net::SocketAddr>() {
        Ok(addr) => Some(addr.ip().to_string()),
        Err(_) => ip(remote_addr),
    };
    for next in [real_ip.and_then(ip), remote].into_iter().flatten() {
        if ips.last() != Some(&next) {
            ips.push(next);
        }
    }
    ips
}

impl Recorder {
    /// The recorder of a request the policy gives `config`, if it records anything, with its
    /// `RequestReceived` line (at `now`) unless that stage is omitted.
    pub fn start(config: Config, request: Received, now: Timestamp) -> Option<(Recorder, Option<Bytes>)> {
        if config.level == Level::None {
            return None;
        }
        let r = Recorder {
            config,
            request,
            request_object: None,
            impersonated: None,
            annotations: BTreeMap::new(),
            code: None,
            content_type: None,
            body: Vec::new(),
            done: false,
        };
        let line = r.line(Stage::RequestReceived, now);
        Some((r, line))
    }

    /// Whether the request's object is recorded (`Request` and above).
    pub fn records_request(&self) -> bool {
        self.config.level >= Level::Request
    }

    /// The object the request carries, as its handler has it (kube's `LogRequestObject`): its
    /// name, namespace, uid and resourceVersion complete the `objectRef`; it is recorded at
    /// `Request` and above (a patch as written).
    pub fn request_object(&mut self, mut obj: Value) {
        if let Some(r) = self.request.object_ref.as_mut() {
            let meta = |k: &str| crate::meta::str_at(&obj, &["metadata", k]).unwrap_or_default().to_string();
            for (field, key) in [(&mut r.namespace, "namespace"), (&mut r.name, "name"), (&mut r.uid, "uid"), (&mut r.resource_version, "resourceVersion")] {
                if field.is_empty() {
                    *field = meta(key);
                }
            }
        }
        if self.records_request() {
            if self.config.omit_managed_fields {
                strip_managed_fields(&mut obj);
            }
            self.request_object = Some(obj);
        }
    }

    /// The user the request acts as (impersonation).
    pub fn impersonated(&mut self, user: &UserInfo) {
        self.impersonated = Some(user.clone());
    }

    /// An annotation (kube's `AddAuditAnnotation`: the first value of a key stays).
    pub fn annotate(&mut self, key: &str, value: &str) {
        self.annotations.entry(key.to_string()).or_insert_with(|| value.to_string());
    }

    /// The answer's head: a long-running answer's (`started`) has its `ResponseStarted` line.
    pub fn responded(&mut self, head: &crate::pipeline::Head, started: bool, now: Timestamp) -> Option<Bytes> {
        self.code = Some(head.status);
        self.content_type = head.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("Content-Type")).map(|(_, v)| v.clone());
        started.then(|| self.line(Stage::ResponseStarted, now)).flatten()
    }

    /// A piece of the answer's body.
    pub fn body(&mut self, bytes: &[u8]) {
        let status = self.code.is_some_and(|c| !(200..300).contains(&c));
        if self.config.level == Level::RequestResponse || status {
            self.body.extend_from_slice(bytes);
        }
    }

    /// The answer is written: its `ResponseComplete` line (once).
    pub fn complete(&mut self, now: Timestamp) -> Option<Bytes> {
        if std::mem::replace(&mut self.done, true) {
            return None;
        }
        self.line(Stage::ResponseComplete, now)
    }

    fn line(&self, stage: Stage, now: Timestamp) -> Option<Bytes> {
        if self.config.omit_stages.contains(&stage) {
            return None;
        }
        let answer = (stage == Stage::ResponseComplete && !self.body.is_empty()).then(|| decoded(&self.body, self.content_type.as_deref())).flatten();
        let status_object = answer.as_ref().filter(|a| a.get("kind").and_then(Value::as_str) == Some("Status"));
        let response_status = self.code.map(|code| match status_object {
            Some(s) => {
                Status { metadata: Empty {}, status: s.get("status"), message: s.get("message"), reason: s.get("reason"), details: s.get("details"), code }
            }
            None => Status { metadata: Empty {}, status: None, message: None, reason: None, details: None, code },
        });
        let mut response_object = answer.clone().filter(|_| self.config.level == Level::RequestResponse);
        if self.config.omit_managed_fields {
            response_object.as_mut().map(strip_managed_fields);
        }
        let r = &self.request;
        let event = Event {
            kind: "Event",
            api_version: "audit.k8s.io/v1",
            level: self.config.level.name(),
            audit_id: &r.audit_id,
            stage: stage.name(),
            request_uri: &r.request_uri,
            verb: &r.verb,
            user: User::of(&r.user),
            impersonated_user: self.impersonated.as_ref().map(User::of),
            source_ips: &r.source_ips,
            user_agent: &r.user_agent,
            object_ref: r.object_ref.as_ref(),
            response_status: response_status.filter(|_| stage != Stage::RequestReceived),
            request_object: self.request_object.as_ref().filter(|_| stage != Stage::RequestReceived),
            response_object: response_object.as_ref(),
            request_received_timestamp: format_time(r.at, true),
            stage_timestamp: format_time(now, true),
            annotations: &self.annotations,
        };
        let mut line = serde_json::to_vec(&event).expect("an event serializes");
        line.push(b'\n');
        Some(Bytes::from(line))
    }
}

/// A request's or an answer's body as the object it carries (JSON, YAML or protobuf; a
/// patch as written), if it is one.
pub fn decoded(body: &[u8], content_type: Option<&str>) -> Option<Value> {
    let mime = content_type.and_then(|c| c.split(';').next()).map(|m| m.trim().to_ascii_lowercase()).unwrap_or_default();
    let format = match mime.as_str() {
        "application/json-patch+json" | "application/merge-patch+json" | "application/strategic-merge-patch+json" => crate::codec::Format::Json,
        "application/apply-patch+yaml" => crate::codec::Format::Yaml,
        _ => crate::codec::negotiate::request_format(content_type).ok()?,
    };
    crate::codec::decode(body, format).ok()
}

/// kube's `omitManagedFields`: an object's (or a list's items') `metadata.managedFields` left out.
fn strip_managed_fields(obj: &mut Value) {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    if let Some(items) = obj.get_mut("items").and_then(Value::as_array_mut) {
        items.iter_mut().for_each(strip_managed_fields);
    }
}

#[cfg(test)]
mod tests;
