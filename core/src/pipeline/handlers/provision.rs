//! A write that first has the server create an object, as a request of its own: an admission
//! plugin's [`Provision`] (NamespaceAutoProvision's namespace, which kube's plugin creates
//! through the server's loopback client, so through that object's own authorization and
//! admission). That request is a [`RequestMachine`] this one runs inside itself: the effects
//! it emits are this one's, the events answering them are handed to it, and its answer is
//! kept. If the object already exists, a second such request reads it. The write then goes on
//! with the object as it now is, or the error the request met ([`WriteOp::provisioned`]).
//!
//! [`WriteOp::provisioned`]: crate::registry::WriteOp::provisioned

use jiff::Timestamp;
use serde_json::Value;

use super::Stage;
use crate::admission::Provision;
use crate::pipeline::{Effect, Event, Head, Request, RequestMachine};
use crate::status::ApiError;
use crate::webhook::{WebhookAnswer, unexpected_status};

/// A write waiting for the server's own request about what it needs.
pub(crate) struct Provisioning {
    request: Box<RequestMachine>,
    provision: Provision,
    /// The request reads the object (its create found it there already).
    reading: bool,
    head: Option<Head>,
    body: Vec<u8>,
    /// The write's stage, which takes what came of it.
    stage: Box<Stage>,
}

impl Provisioning {
    /// Hands the provisioning request an event (the answer to what it asked).
    pub(super) fn handle(&mut self, now: Timestamp, event: Event) {
        self.request.handle(now, event);
    }

    /// When the provisioning request must be polled without an event.
    pub(super) fn wakes_at(&self) -> Option<Timestamp> {
        self.request.poll_timeout()
    }
}

impl RequestMachine {
    /// Starts the request that creates `provision`'s object, as the server's own (its loopback
    /// token), for the write of `stage` to wait on.
    pub(super) fn start_provisioning(&mut self, provision: Provision, stage: Stage, now: Timestamp) {
        let request = self.loopback_request("POST", provision.path.clone(), Some(&provision.object), now);
        let p = Provisioning { request, provision, reading: false, head: None, body: Vec::new(), stage: Box::new(stage) };
        self.stage = Stage::Provisioning(Box::new(p));
    }

    /// A request of the server's own, run inside this one.
    fn loopback_request(&mut self, method: &str, path: String, body: Option<&Value>, now: Timestamp) -> Box<RequestMachine> {
        let token = self.server.authenticator.loopback.as_deref();
        let request = Request::loopback(token, method, path, body.map(|b| ("application/json", b)));
        Box::new(RequestMachine::new(self.server.clone(), self.served.clone(), request, now, self.rng.next_u64()))
    }

    /// Runs the provisioning request a step: passes on what it asks, keeps its answer, and
    /// once that is whole takes it in. Whether anything happened.
    pub(super) fn step_provisioning(&mut self, mut p: Box<Provisioning>, now: Timestamp) -> bool {
        match p.request.poll(now) {
            None => {
                self.stage = Stage::Provisioning(p);
                return false;
            }
            Some(Effect::Respond(head)) => p.head = Some(head),
            Some(Effect::Body(chunk)) => p.body.extend_from_slice(&chunk),
            Some(Effect::End) => {
                self.provisioned(*p, now);
                return true;
            }
            // A create or a read of one object neither watches nor is relayed.
            Some(Effect::Watch { .. } | Effect::Relay) => {
                p.head = Some(Head::new(500, "text/plain"));
                self.provisioned(*p, now);
                return true;
            }
            Some(asked) => self.out.push_back(asked),
        }
        self.stage = Stage::Provisioning(p);
        true
    }

    /// The provisioning request is answered. Created (2xx), the object goes to the write; one
    /// that already exists is read; read, it goes to the write (`None` if gone again);
    /// otherwise the write gets the error, as client-go makes it of the answer.
    fn provisioned(&mut self, mut p: Provisioning, now: Timestamp) {
        let head = p.head.take().unwrap_or_else(|| Head::new(500, "text/plain"));
        let body: Value = serde_json::from_slice(&p.body).unwrap_or(Value::Null);
        let error = || {
            let mut error = ApiError::answered(head.status, &body);
            if body.get("kind").and_then(Value::as_str) != Some("Status") {
                let answer =
                    WebhookAnswer { status: head.status, body: p.body.clone().into(), content_type: head.content_type().unwrap_or_default().to_string() };
                let what = if p.reading { format!("get {} {}", p.provision.resource, p.provision.name) } else { format!("post {}", p.provision.resource) };
                error.message = format!("{} ({what})", unexpected_status(&answer));
            }
            error
        };
        let outcome = match (p.reading, head.status) {
            (_, 200..=299) => Ok(Some(body.clone())),
            (false, 409) if error().reason == "AlreadyExists" => {
                let path = format!("{}/{}", p.provision.path, p.provision.name);
                let read = Provisioning { request: self.loopback_request("GET", path, None, now), reading: true, head: None, body: Vec::new(), ..p };
                self.stage = Stage::Provisioning(Box::new(read));
                return;
            }
            (true, 404) => Ok(None),
            _ => Err(error()),
        };
        let mut stage = p.stage;
        if let Some(op) = stage.write_under_way() {
            op.provisioned(outcome);
        }
        self.stage = *stage;
    }
}
