//! A write that waits for admission webhooks ([`Effect::Calls`]): the Services of those that
//! name one are read from the watch cache first, to resolve them; then every review is sent at
//! once and the answers, in order, go to the write's stage, which admits the write again with
//! them (a webhook that cannot be resolved answers with why). A call kube makes with its
//! generic webhook client (ImagePolicyWebhook's) is tried again after a transient failure
//! ([`crate::webhook::retry`]): the write waits, in its own time, and sends it again.

use jiff::Timestamp;

use super::Stage;
use crate::admission::webhooks::dispatch::AdmissionCall;
use crate::cache::{ReadRequest, ReadResult};
use crate::pipeline::{Effect, RequestMachine};
use crate::status::ApiError;
use crate::storage::keys::object_key;
use crate::webhook::retry::Backoff;
use crate::webhook::{WebhookAnswer, WebhookCall};

/// The calls a write's stage waits for.
pub(in crate::pipeline) struct Admitting {
    calls: Vec<AdmissionCall>,
    /// For each call, the answer it already has (a webhook that could not be resolved, a call
    /// answered before the others are tried again).
    answers: Vec<Option<Result<WebhookAnswer, String>>>,
    /// The calls that may be tried again: their place in `calls`, what is sent, their tries.
    retried: Vec<(usize, WebhookCall, Backoff)>,
    /// When the calls to try again are sent.
    retry_at: Option<Timestamp>,
    stage: Box<Stage>,
}

impl Admitting {
    /// When the write stops waiting to try calls again.
    pub(super) fn wakes_at(&self) -> Option<Timestamp> {
        self.retry_at
    }
}

impl RequestMachine {
    /// Asks the webhooks of `calls`; `stage` (a write's) takes the answers.
    pub(super) fn ask_admission_webhooks(&mut self, calls: Vec<AdmissionCall>, stage: Stage) {
        let admitting = Box::new(Admitting { answers: Vec::new(), calls, retried: Vec::new(), retry_at: None, stage: Box::new(stage) });
        let services = self.served.catalog.get("", "v1", "services").cloned().filter(|_| admitting.calls.iter().any(|c| c.service().is_some()));
        match services {
            Some(resource) => {
                self.out.push_back(Effect::Cache { resource, request: ReadRequest::Latest { min: None } });
                self.stage = Stage::AdmitResolve(admitting);
            }
            None => self.call_admission_webhooks(admitting, None),
        }
    }

    /// The Services as the cache has them: the webhooks' are resolved.
    pub(super) fn admission_webhooks_resolved(&mut self, admitting: Box<Admitting>, services: Result<ReadResult, ApiError>) {
        let snapshot = match services {
            Ok(ReadResult::Snapshot(s)) => Some(s),
            _ => None,
        };
        self.call_admission_webhooks(admitting, snapshot.as_ref())
    }

    fn call_admission_webhooks(&mut self, mut admitting: Box<Admitting>, services: Option<&crate::cache::Snapshot>) {
        let root = self.served.catalog.get("", "v1", "services").map(|res| self.server.storage_root(res));
        let mut calls: Vec<WebhookCall> = Vec::new();
        let mut retried = Vec::new();
        admitting.answers = admitting
            .calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let service = c.service().and_then(|svc| {
                    let key = object_key(root.as_deref()?, Some(&svc.namespace), &svc.name);
                    services?.objects.get(&key).map(|o| o.value())
                });
                match c.call(service.as_ref()) {
                    Ok(call) => {
                        retried.extend(c.retry.map(|first| (i, call.clone(), Backoff::new(first))));
                        calls.push(call);
                        None
                    }
                    Err(why) => Some(Err(why)),
                }
            })
            .collect();
        admitting.retried = retried;
        if calls.is_empty() {
            let all = admitting.answers.drain(..).map(|a| a.unwrap_or_else(|| Err("no answer".into()))).collect();
            return self.write_admitted(*admitting, all);
        }
        self.out.push_back(Effect::Calls(calls));
        self.stage = Stage::Admitting(admitting);
    }

    /// The answers of the calls made, in order, at `now`: the write goes on with every call's,
    /// unless some are to be tried again (it then waits for that).
    pub(super) fn admission_webhooks_answered(&mut self, mut admitting: Admitting, answers: Vec<Result<WebhookAnswer, String>>, now: Timestamp) {
        let mut made = answers.into_iter();
        let all: Vec<_> = admitting.answers.drain(..).map(|k| k.unwrap_or_else(|| made.next().unwrap_or_else(|| Err("no answer".into())))).collect();
        let mut again = Vec::new();
        let mut wait = None;
        for (i, _, backoff) in &mut admitting.retried {
            if let Some(w) = backoff.again(&all[*i], &mut self.rng) {
                again.push(*i);
                wait = wait.max(Some(w));
            }
        }
        if let Some(wait) = wait {
            admitting.answers = all.into_iter().enumerate().map(|(i, a)| (!again.contains(&i)).then_some(a)).collect();
            admitting.retry_at = Some(now + wait);
            self.stage = Stage::Admitting(Box::new(admitting));
            return;
        }
        self.write_admitted(admitting, all);
    }

    /// The write goes on with every call's answer, in order.
    fn write_admitted(&mut self, admitting: Admitting, all: Vec<Result<WebhookAnswer, String>>) {
        let mut stage = admitting.stage;
        if let Some(op) = stage.write_under_way() {
            op.admitted(all);
        }
        self.stage = *stage;
    }

    /// A write waiting to try calls again sends them once their time has come; whether it did.
    pub(super) fn step_admitting(&mut self, mut admitting: Box<Admitting>, now: Timestamp) -> bool {
        let due = admitting.retry_at.is_some_and(|at| at <= now);
        if due {
            admitting.retry_at = None;
            let calls = admitting.retried.iter().filter(|(i, ..)| admitting.answers[*i].is_none()).map(|(_, call, _)| call.clone()).collect();
            self.out.push_back(Effect::Calls(calls));
        }
        self.stage = Stage::Admitting(admitting);
        due
    }
}
