//! A write that first has the server create an object, as a request of its own: an admission
//! plugin's [`Provision`] (NamespaceAutoProvision's namespace, which kube's plugin creates
//! through the server's loopback client, so through that object's own authorization and
//! admission). That request is a [`RequestMachine`] this one runs inside itself: the effects
//! it emits are this one's, the events answering them are handed to it, and its answer is
//! kept. Created, or already there, the write's lookups are read again and it goes on;
//! otherwise the write is refused as kube's plugin refuses it.

use std::sync::Arc;

use jiff::Timestamp;
use serde_json::Value;

use super::{AfterLookups, Lookups, PendingWrite, Stage};
use crate::admission::{Lookup, Operation, Pending, Provision};
use crate::meta;
use crate::pipeline::{Effect, Event, Head, Request, RequestMachine};
use crate::registry::shown_name;
use crate::status::ApiError;
use crate::webhook::{WebhookAnswer, unexpected_status};

/// A write waiting for the request that creates what it needs.
pub(crate) struct Provisioning {
    request: Box<RequestMachine>,
    /// The resource it creates (`namespaces`), as client-go names it in an error.
    resource: String,
    head: Option<Head>,
    body: Vec<u8>,
    write: Box<PendingWrite>,
    /// The write's lookups, read again once the object is there.
    lookups: Vec<Lookup>,
}

impl Provisioning {
    /// Hands the provisioning request an event (the answer to what it asked).
    pub(super) fn handle(&mut self, now: Timestamp, event: Event) {
        self.request.handle(now, event);
    }
}

impl RequestMachine {
    /// What a plugin needs created before the write `w` is admitted, given what its lookups
    /// found (once per write: after that request, the write goes on with what it finds).
    /// Nothing for a write kube refuses before admission: an object whose namespace, or for a
    /// PUT or apply whose name, is not the request's (`EnsureObjectNamespaceMatchesRequestNamespace`,
    /// `checkName`).
    pub(super) fn provision_for(w: &PendingWrite, found: &[(Lookup, Option<Arc<Value>>)]) -> Option<Provision> {
        if w.provisioned {
            return None;
        }
        let ctx = &w.ctx;
        let object = w.kind.created(&w.res, ctx.subresource.as_deref())?;
        let differs = |field: &str, wanted: Option<&str>| meta::str_at(object, &["metadata", field]).is_some_and(|v| !v.is_empty() && Some(v) != wanted);
        if differs("namespace", ctx.namespace.as_deref()) || (ctx.name.is_some() && differs("name", ctx.name.as_deref())) {
            return None;
        }
        let pending = Pending {
            operation: Operation::Create,
            info: &w.res.info,
            subresource: ctx.subresource.as_deref(),
            namespace: ctx.namespace.as_deref(),
            name: ctx.name.as_deref(),
            object: Some(object),
            dry_run: ctx.dry_run,
        };
        ctx.admission.provision(&pending, found)
    }

    /// Starts the request that creates `provision`'s object, as the server's own (its loopback
    /// token), for the write `write` to wait on.
    pub(super) fn start_provisioning(&mut self, write: Box<PendingWrite>, provision: Provision, lookups: Vec<Lookup>, now: Timestamp) {
        let token = self.server.authenticator.loopback.as_deref();
        let resource = provision.resource;
        let request = Request::loopback(token, "POST", provision.path, "application/json", &provision.object);
        let machine = RequestMachine::new(self.server.clone(), self.served.clone(), request, now, self.rng.next_u64());
        self.stage = Stage::Provisioning(Box::new(Provisioning { request: Box::new(machine), resource, head: None, body: Vec::new(), write, lookups }));
    }

    /// Runs the provisioning request a step: passes on what it asks, keeps its answer, and
    /// once that is whole goes on with the write. Whether anything happened.
    pub(super) fn step_provisioning(&mut self, mut p: Box<Provisioning>, now: Timestamp) -> bool {
        match p.request.poll(now) {
            None => {
                self.stage = Stage::Provisioning(p);
                return false;
            }
            Some(Effect::Respond(head)) => p.head = Some(head),
            Some(Effect::Body(chunk)) => p.body.extend_from_slice(&chunk),
            Some(Effect::End) => {
                self.provisioned(*p);
                return true;
            }
            // A create neither watches nor is relayed from an extension server.
            Some(Effect::Watch { .. } | Effect::Relay) => {
                let output = p.write.output.format;
                self.fail_as(&ApiError::internal("the server's own request was not answered"), output);
                return true;
            }
            Some(asked) => self.out.push_back(asked),
        }
        self.stage = Stage::Provisioning(p);
        true
    }

    /// The provisioning request is answered: the write reads its lookups again and goes on if
    /// the object was created or already exists; otherwise it is refused as kube's
    /// `admission.NewForbidden` refuses it (a 403 as it came, anything else as the written
    /// object's 403 with the error's message, client-go's words for an answer that is no
    /// `Status`).
    fn provisioned(&mut self, p: Provisioning) {
        let Provisioning { head, body, mut write, lookups, resource, .. } = p;
        let head = head.unwrap_or_else(|| Head::new(500, "text/plain"));
        let status: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let mut error = ApiError::answered(head.status, &status);
        if (200..300).contains(&head.status) || error.reason == "AlreadyExists" {
            write.provisioned = true;
            self.stage = Stage::Lookups(Box::new(Lookups::new(lookups, AfterLookups::Write(write))));
            return;
        }
        if status.get("kind").and_then(Value::as_str) != Some("Status") {
            let answer = WebhookAnswer { status: head.status, body: body.into(), content_type: head.content_type().unwrap_or_default().to_string() };
            error.message = format!("{} (post {resource})", unexpected_status(&answer));
        }
        let forbidden = error.code == 403 && (error.reason == "Forbidden" || error.reason.is_empty());
        if !forbidden {
            let name = write.ctx.name.clone().or_else(|| write.kind.created(&write.res, None).map(shown_name)).filter(|n| !n.is_empty());
            error = ApiError::forbidden(&write.res.info.group_resource(), name.as_deref().unwrap_or("Unknown"), &error.message);
        }
        self.fail_as(&error, write.output.format);
    }
}
