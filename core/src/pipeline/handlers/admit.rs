//! A write that waits for admission webhooks ([`Effect::Calls`]): the Services of those that
//! name one are read from the watch cache first, to resolve them; then every review is sent at
//! once and the answers, in order, go to the write's stage, which admits the write again with
//! them (a webhook that cannot be resolved answers with why).

use super::Stage;
use crate::admission::webhooks::dispatch::AdmissionCall;
use crate::cache::{ReadRequest, ReadResult};
use crate::pipeline::{Effect, RequestMachine};
use crate::status::ApiError;
use crate::storage::keys::object_key;
use crate::webhook::{WebhookAnswer, WebhookCall};

/// The calls a write's stage waits for.
pub(in crate::pipeline) struct Admitting {
    calls: Vec<AdmissionCall>,
    /// For each call, the answer it already has (a webhook that could not be resolved).
    answers: Vec<Option<Result<WebhookAnswer, String>>>,
    stage: Box<Stage>,
}

impl RequestMachine {
    /// Asks the webhooks of `calls`; `stage` (a write's) takes the answers.
    pub(super) fn ask_admission_webhooks(&mut self, calls: Vec<AdmissionCall>, stage: Stage) {
        let admitting = Box::new(Admitting { answers: Vec::new(), calls, stage: Box::new(stage) });
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
        admitting.answers = admitting
            .calls
            .iter()
            .map(|c| {
                let service = c.service().and_then(|svc| {
                    let key = object_key(root.as_deref()?, Some(&svc.namespace), &svc.name);
                    services?.objects.get(&key).map(|o| o.value())
                });
                match c.call(service.as_ref()) {
                    Ok(call) => {
                        calls.push(call);
                        None
                    }
                    Err(why) => Some(Err(why)),
                }
            })
            .collect();
        if calls.is_empty() {
            return self.admission_webhooks_answered(*admitting, Vec::new());
        }
        self.out.push_back(Effect::Calls(calls));
        self.stage = Stage::Admitting(admitting);
    }

    /// The answers of the calls made, in order: the write goes on with every call's.
    pub(super) fn admission_webhooks_answered(&mut self, admitting: Admitting, answers: Vec<Result<WebhookAnswer, String>>) {
        let Admitting { answers: known, mut stage, .. } = admitting;
        let mut made = answers.into_iter();
        let all = known.into_iter().map(|k| k.unwrap_or_else(|| made.next().unwrap_or_else(|| Err("no answer".into())))).collect();
        if let Some(op) = stage.write_under_way() {
            op.admitted(all);
        }
        self.stage = *stage;
    }
}
