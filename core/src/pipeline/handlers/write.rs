//! What every write shares: the body's decoding, the write context, admission's lookups and
//! the answer.

use std::sync::Arc;

use bytes::Bytes;
use jiff::Timestamp;
use serde_json::{Value, json};

use super::{AfterLookups, Lookups, PendingWrite, Stage};
use crate::admission::Lookup;
use crate::apiextensions;
use crate::authz::Access;
use crate::catalog::Resource;
use crate::codec::negotiate;
use crate::codec::{self, Format, Output};
use crate::meta;
use crate::pipeline::params;
use crate::pipeline::respond::{Head, content_type, status_body};
use crate::pipeline::{RequestInfo, RequestMachine};
use crate::registry::{BodyFindings, FieldValidation, WriteContext, WriteOutcome};
use crate::status::{ApiError, FieldError, GroupKind, success_status};

/// kube's `summarizeData(body, 30)`: a JSON object's first bytes as text, anything else in hex.
fn summarize(body: &[u8]) -> String {
    const MAX: usize = 30;
    let (head, more) = if body.len() > MAX { (&body[..MAX], " ...") } else { (body, "") };
    match body.first() {
        None => "<empty>".into(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(head)),
        Some(_) => format!("{}{more}", head.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    }
}

/// The Go package of a group's internal types, as kube's conversion errors name it.
fn internal_package(group: &str) -> &str {
    match group {
        "" | "events.k8s.io" => "core",
        g => g.split('.').next().unwrap_or(g),
    }
}

impl RequestMachine {
    /// The request's object, and (JSON bodies, unless `fieldValidation=Ignore`) the keys it
    /// repeats.
    pub(super) fn decode_body(&self, res: &Resource, validation: FieldValidation) -> Result<(Value, BodyFindings), ApiError> {
        let custom = apiextensions::is_custom(&res.info);
        let format = match negotiate::request_format(self.req.header("Content-Type"))? {
            Format::Protobuf if custom => return Err(ApiError::unsupported_media_type(negotiate::UNSTRUCTURED)),
            format => format,
        };
        // A body whose kind cannot be read is "unrecognized", with Go's parse error and the
        // body's first bytes (kube's transformDecodeError).
        let unrecognized = |e: String| {
            let e = match format {
                Format::Json => {
                    let go = codec::go_json::syntax_error(&self.req.body).unwrap_or(e);
                    format!("couldn't get version/kind; json parse error: {go}")
                }
                _ => e,
            };
            ApiError::bad_request(format!("the object provided is unrecognized (must be of type {}): {e} ({})", res.info.kind, summarize(&self.req.body)))
        };
        let (mut obj, findings) = match format {
            Format::Json if validation != FieldValidation::Ignore => {
                let (obj, duplicates) = codec::strict::decode(&self.req.body).map_err(|e| unrecognized(e.to_string()))?;
                (obj, BodyFindings::of_object(&self.req.body, duplicates))
            }
            _ => (codec::decode(&self.req.body, format).map_err(unrecognized)?, BodyFindings::default()),
        };
        if !obj.is_object() {
            return Err(ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }} ({})",
                res.info.kind,
                if obj.is_array() { "array" } else { "string" },
                summarize(&self.req.body)
            )));
        }
        let want_av = res.info.api_version();
        let av = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("").to_string();
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
        if !av.is_empty() && av != want_av {
            return Err(ApiError::bad_request(format!("the API version in the data ({av}) does not match the expected API version ({want_av})")));
        }
        if custom && kind.is_empty() {
            return Err(ApiError::bad_request(format!("Object 'Kind' is missing in '{}'", String::from_utf8_lossy(&self.req.body).trim_end())));
        }
        if custom && kind != res.info.kind {
            // The custom resource strategy's `ValidateTypeMeta`.
            let gk = GroupKind { group: res.info.group.clone(), kind: res.info.kind.clone() };
            return Err(ApiError::invalid(&gk, meta::name(&obj), &[FieldError::invalid("kind", Value::from(kind), format!("must be {}", res.info.kind))]));
        }
        if !kind.is_empty() && kind != res.info.kind {
            // kube decodes the body as the kind it names, then fails to convert it.
            let why = match crate::schema::schema().for_gvk(&res.info.group, &res.info.version, &kind) {
                Some(_) => format!("converting ({}.{kind}) to ({}.{}): unknown conversion", res.info.version, internal_package(&res.info.group), res.info.kind),
                None => format!("no kind {kind:?} is registered for version {want_av:?} in scheme \"pkg/api/legacyscheme/scheme.go:30\""),
            };
            return Err(ApiError::bad_request(format!("{kind} in version {:?} cannot be handled as a {}: {why}", res.info.version, res.info.kind)));
        }
        meta::set_type_meta(&mut obj, &want_av, &res.info.kind);
        Ok((obj, findings))
    }

    pub(super) fn write_context(&self, now: Timestamp, info: &RequestInfo, namespace: Option<String>, opts: &params::WriteOptions) -> WriteContext {
        WriteContext {
            now,
            namespace,
            name: Some(info.name.clone()).filter(|n| !n.is_empty()),
            subresource: Some(info.subresource.clone()).filter(|s| !s.is_empty()),
            dry_run: opts.dry_run,
            field_manager: opts.field_manager.clone(),
            field_validation: opts.field_validation,
            body_findings: BodyFindings::default(),
            prefix: self.server.prefix.clone(),
            user: self.user.clone(),
            access: Some(Box::new(Access { authorizer: self.authorizer.clone(), state: self.served.authz.clone(), asked: self.asked.clone(), now })),
            admission: self.server.admission.clone(),
            webhooks: self.served.webhooks.clone(),
            policies: self.served.policies.clone(),
            mutating_policies: self.served.mutating_policies.clone(),
            catalog: Some(self.served.catalog.clone()),
            equivalents: match self.served.webhooks.is_empty() && self.served.policies.is_empty() && self.served.mutating_policies.is_empty() {
                true => Vec::new(),
                false => self.equivalents(info),
            },
        }
    }

    /// The other versions of the resource of `info` stored alike, which a webhook or a policy may name
    /// for it (none converted by a CRD's webhook, nor for a subresource other than `status`:
    /// its objects are of another kind).
    fn equivalents(&self, info: &RequestInfo) -> Vec<Arc<Resource>> {
        let catalog = &self.served.catalog;
        let Some(res) = catalog.get(&info.api_group, &info.api_version, &info.resource) else { return Vec::new() };
        let plain = |r: &Resource| r.strategy.conversion_webhook().is_none() && r.info.stored();
        if !plain(res) || !matches!(info.subresource.as_str(), "" | "status") {
            return Vec::new();
        }
        let same = |r: &Resource| r.info.group == res.info.group && r.info.version == res.info.version;
        catalog.by_storage_prefix(&res.info.storage_prefix).filter(|r| !same(r) && plain(r)).cloned().collect()
    }

    pub(super) fn user_agent(&self) -> String {
        self.req.header("User-Agent").unwrap_or("").to_string()
    }

    /// What admission reads before a write that updates `res` (`object`: the body of a PUT or
    /// an apply), or creates it if the write turns out to create it.
    pub(super) fn write_lookups(ctx: &WriteContext, res: &Resource, object: Option<&serde_json::Value>) -> Vec<Lookup> {
        let mut lookups = Vec::new();
        for operation in [crate::admission::Operation::Update, crate::admission::Operation::Create] {
            let pending = crate::admission::Pending {
                operation,
                info: &res.info,
                subresource: ctx.subresource.as_deref(),
                namespace: ctx.namespace.as_deref(),
                name: ctx.name.as_deref(),
                object,
                dry_run: ctx.dry_run,
            };
            for l in admission_lookups(ctx, &pending) {
                if !lookups.contains(&l) {
                    lookups.push(l);
                }
            }
        }
        lookups
    }

    pub(super) fn start_write(&mut self, write: PendingWrite, lookups: Vec<Lookup>) {
        self.stage = Stage::Lookups(Box::new(Lookups::new(lookups, AfterLookups::Write(Box::new(write)))));
    }

    pub(super) fn finish_write(&mut self, res: Arc<Resource>, output: Output, action: bool, result: Result<WriteOutcome, ApiError>, now: Timestamp) {
        let outcome = match result {
            Ok(o) => o,
            Err(e) => return self.fail_as(&e, output.format),
        };
        if action {
            let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201});
            let (ct, body) = status_body(&status, output.format);
            return self.respond(Head::new(201, &ct), body);
        }
        // A DELETE answers with a Status for most kinds; an update that deleted the object (its
        // last finalizer removed) answers with the object.
        if outcome.deleted && self.req.method == "DELETE" && res.info.delete_returns == crate::catalog::DeleteReturns::Status {
            let status = success_status(&res.info.group_resource(), meta::name(&outcome.object), meta::uid(&outcome.object));
            let (ct, body) = status_body(&status, output.format);
            return self.respond(Head::new(200, &ct), body);
        }
        self.warnings.extend(outcome.warnings.iter().cloned());
        if output == (Output { format: Format::Json, view: crate::codec::View::Object })
            && let Some((stored, rv, splice)) = &outcome.stored
        {
            let mut body = splice.apply(stored, *rv);
            body.push(b'\n');
            return self.respond(Head::new(outcome.code, &content_type(output, false)), Bytes::from(body));
        }
        self.respond_object(&res, &outcome.object, output, outcome.code, "", now);
    }
}

/// What the chain's plugins and the configured webhooks and policies read of `pending`, each
/// once.
pub(super) fn admission_lookups(ctx: &WriteContext, pending: &crate::admission::Pending) -> Vec<Lookup> {
    let mut lookups = ctx.admission.lookups(pending);
    for l in ctx.configured_lookups(pending) {
        if !lookups.contains(&l) {
            lookups.push(l);
        }
    }
    lookups
}
