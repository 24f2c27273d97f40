//! The request's audit events (see [`crate::audit`]): its recorder starts once the request is
//! authenticated, when the server audits; what the machine emits passes it on its way out.

use bytes::Bytes;
use jiff::Timestamp;

use super::{Effect, RequestInfo, RequestMachine};
use crate::audit::{self, ObjectRef, Received, Recorder};

/// The header a client may name its request's audit ID in, and the answer always carries.
pub const AUDIT_ID_HEADER: &str = "Audit-Id";

impl RequestMachine {
    /// Starts the request's events, as the server's policy has it for the authenticated user.
    pub(super) fn start_audit(&mut self, info: &RequestInfo, now: Timestamp) {
        let Some(policy) = self.server.audit.as_deref().filter(|_| self.audit.is_none()) else { return };
        let request = audit::policy::Request {
            user: &self.user,
            verb: &info.verb,
            resource_request: info.is_resource_request,
            path: &self.req.path,
            namespace: &info.namespace,
            group: &info.api_group,
            resource: &info.resource,
            subresource: &info.subresource,
            name: &info.name,
        };
        let config = policy.evaluate(&request);
        if config.level == audit::Level::None {
            return;
        }
        let object_ref = info.is_resource_request.then(|| ObjectRef {
            resource: info.resource.clone(),
            namespace: info.namespace.clone(),
            name: info.name.clone(),
            api_group: info.api_group.clone(),
            api_version: info.api_version.clone(),
            subresource: info.subresource.clone(),
            ..ObjectRef::default()
        });
        let received = Received {
            audit_id: self.audit_id.clone(),
            request_uri: if self.req.query.is_empty() { self.raw_path.clone() } else { format!("{}?{}", self.raw_path, self.req.query) },
            verb: info.verb.clone(),
            user: self.user.clone(),
            source_ips: audit::source_ips(self.req.header("X-Forwarded-For"), self.req.header("X-Real-Ip"), &self.req.peer.remote_addr),
            user_agent: self.req.header("User-Agent").unwrap_or_default().to_string(),
            object_ref,
            at: self.received_at,
        };
        if let Some((recorder, line)) = Recorder::start(config, received, now) {
            self.audit = Some(Box::new(recorder));
            self.out.extend(line.map(Effect::Audit));
        }
    }

    /// The object an authorized resource request carries, for its events (kube logs it as its
    /// handler decodes it): decoded for a level that records it, or to name a create's or an
    /// update's object.
    pub(super) fn audit_request_object(&mut self, verb: &str) {
        let Some(r) = self.audit.as_mut().filter(|_| !self.req.body.is_empty()) else { return };
        if (r.records_request() || matches!(verb, "create" | "update"))
            && let Some(obj) = audit::decoded(&self.req.body, self.req.header("Content-Type"))
        {
            r.request_object(obj);
        }
    }

    /// Notes an annotation on the request's events, if it has any.
    pub(super) fn annotate(&mut self, key: &str, value: &str) {
        if let Some(r) = &mut self.audit {
            r.annotate(key, value);
        }
    }

    /// What a write's admission said: its warnings for the answer, its audit annotations for
    /// the events.
    pub(super) fn heard(&mut self, said: crate::registry::Said) {
        self.warnings.extend(said.warnings);
        for (key, value) in said.annotations {
            self.annotate(&key, &value);
        }
    }

    /// What passes on its way out: the answer's head gets the `Audit-Id` header; the recorder
    /// sees the head, the body and the end, and gives the lines they make.
    pub(super) fn audit_pass(&mut self, e: &mut Effect, now: Timestamp) -> Option<Bytes> {
        if let Effect::Respond(head) | Effect::Watch { head, .. } = e {
            head.headers.push((AUDIT_ID_HEADER.into(), self.audit_id.clone()));
        }
        let r = self.audit.as_mut()?;
        match e {
            Effect::Respond(head) => r.responded(head, self.long_running, now),
            Effect::Watch { head, .. } => r.responded(head, true, now),
            Effect::Body(bytes) => {
                r.body(bytes);
                None
            }
            Effect::End => r.complete(now),
            _ => None,
        }
    }

    /// The request's `ResponseComplete` line, if it is due and was not written: the shell asks
    /// when it lets the machine go (a relayed answer ended, a 101's connections closed, the
    /// client gone before the answer), as kube writes it however the handler returns.
    pub fn finish_audit(&mut self, now: Timestamp) -> Option<Bytes> {
        self.audit.as_mut()?.complete(now)
    }

    /// The request's recorder, for a shell that keeps a watch's stream without its machine:
    /// [`Recorder::complete`] gives the `ResponseComplete` line when the watch ends.
    pub fn take_audit(&mut self) -> Option<Box<Recorder>> {
        self.audit.take()
    }
}
