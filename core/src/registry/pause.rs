//! Where a write stops for an answer from outside it (a conversion or admission webhook's, or
//! the server's own request's): what it needs ([`Blocked`], noted where it met the need), what
//! it asks ([`Asked`], the effect [`WriteOp::poll`] emits), and where it goes on once the answer
//! is in ([`Paused`]).

use serde_json::Value;

use super::{Unconverted, WriteOp};
use crate::admission::webhooks::dispatch::{AdmissionCall, Callee};
use crate::apiextensions::Conversion;
use crate::kv::KeyValue;
use crate::rand::Rng;
use crate::status::ApiError;
use crate::storage::{Outcome, StorageError};

/// Where a write stopped to ask a webhook (or for the server's own request), to go on from
/// once it answered.
pub(super) enum Paused {
    /// The create, from its start (a mutating webhook asked, or a plugin needed an object
    /// created first).
    Start,
    /// The create of this prepared object, from its validating admission (a validating
    /// webhook asked).
    Validate(Value),
    /// The create of this prepared object.
    Create(Value),
    /// The transform of what storage holds.
    Transform(Option<KeyValue>),
    /// The answer to the write storage finished.
    Finish(Result<Outcome, StorageError<ApiError>>),
}

/// What a write needs a webhook's answer to (or the server's own request's).
pub(super) enum Blocked {
    /// An object to convert, to this apiVersion.
    Convert(Unconverted, String),
    /// Admission webhooks to ask.
    Admit(Vec<AdmissionCall>),
    /// An object to create first.
    Provision(crate::admission::Provision),
}

/// A question to a webhook (or the server's own request).
pub(super) enum Asked {
    Convert(Conversion),
    Admit(Vec<AdmissionCall>),
    Provision(crate::admission::Provision),
}

impl WriteOp {
    /// Notes that `u` needs the webhook at `desired`; the error stands for the answer until
    /// it comes, and is never seen.
    pub(super) fn block(&mut self, u: Unconverted, desired: String) -> ApiError {
        self.blocked = Some(Blocked::Convert(u, desired));
        ApiError::internal("waiting for the conversion webhook")
    }

    /// Whether the write stopped to ask a webhook or for the server's own request (something
    /// it met was blocked); it goes on at `at` once [`Self::converted`], [`Self::admitted`] or
    /// [`Self::provisioned`] has the answer.
    pub(super) fn paused_at(&mut self, at: Paused) -> bool {
        let asked = match self.blocked.take() {
            None => return false,
            Some(Blocked::Admit(calls)) => Asked::Admit(calls),
            Some(Blocked::Provision(p)) => Asked::Provision(p),
            Some(Blocked::Convert(u, desired)) => {
                let Some((webhook, _)) = self.res.strategy.conversion_webhook() else { return false };
                // The review's uid is drawn apart from the write's own (see `transformed`).
                let uid = Rng::of(&[u.input.as_ref(), desired.as_bytes()].concat()).uuid();
                Asked::Convert(Conversion { webhook: webhook.clone(), desired, objects: vec![(u.input, u.object)], uid })
            }
        };
        self.asked = Some((asked, false, at));
        true
    }

    /// The conversion webhook's answer to the [`WriteEffect::Convert`] asked for: the
    /// converted objects, or the error every one of them met.
    pub fn converted(&mut self, result: Result<Vec<Value>, String>) {
        if let Some((Asked::Convert(conversion), _, at)) = self.asked.take() {
            self.converted.record(&conversion, result);
            self.resumed = Some(at);
        }
    }

    /// The admission webhooks' answers to the [`WriteEffect::Admit`] asked for, in the order
    /// of its calls (a call that failed: why); the authorization webhook's go to the write's
    /// authorizer too, for the plugins' questions to it.
    pub fn admitted(&mut self, answers: Vec<Result<crate::webhook::WebhookAnswer, String>>) {
        if let Some((Asked::Admit(calls), _, at)) = self.asked.take() {
            for (call, answer) in calls.into_iter().zip(answers) {
                match (&call.callee, self.ctx.access.as_mut()) {
                    (Callee::Authorizer(ask), Some(access)) => access.answered(ask, answer),
                    _ => {
                        self.admitted.insert(call.uid, answer);
                    }
                }
            }
            self.resumed = Some(at);
        }
    }
}
