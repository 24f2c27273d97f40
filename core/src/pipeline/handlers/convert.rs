//! Requests for custom resources a webhook converts: where a read or a write meets an object
//! at another version than the one it needs, the request asks the CRD's conversion webhook
//! ([`Effect::Call`], after reading the Services when the webhook is one) and goes on where
//! it stopped with the answer.

use std::sync::Arc;

use jiff::Timestamp;

use super::{DeleteCollection, ListPlan, Stage};
use crate::apiextensions::{Conversion, Converted};
use crate::cache::{CachedObject, ReadRequest, ReadResult, Shared};
use crate::catalog::Resource;
use crate::codec::Output;
use crate::kv::{KeyValue, RangeResponse};
use crate::pipeline::{Effect, RequestMachine};
use crate::registry::{self, Unconverted};
use crate::status::ApiError;
use crate::storage::keys::object_key;
use crate::webhook::WebhookAnswer;

/// What waits for a conversion webhook's answer.
pub(in crate::pipeline) enum Resume {
    /// A write's stage (`Write`, `Evict`, or a `DeleteCollection` with its current delete),
    /// which takes the answer and goes on.
    Writing(Box<Stage>),
    /// A GET from storage, of this object.
    Get { kv: KeyValue, res: Arc<Resource>, output: Output, subresource: String },
    /// A LIST from storage, of this page.
    List { range: RangeResponse, plan: ListPlan, converted: Converted },
    /// A collection listed for its deletion.
    Listing { range: RangeResponse, dc: Box<DeleteCollection>, converted: Converted },
}

/// A conversion under way and what goes on after it.
pub(in crate::pipeline) struct Converting {
    conversion: Conversion,
    resume: Resume,
}

impl RequestMachine {
    /// Asks the webhook for `conversion`; `resume` goes on with the answer.
    pub(super) fn convert(&mut self, conversion: Conversion, resume: Resume, now: Timestamp) {
        let converting = Box::new(Converting { conversion, resume });
        let services = self.served.catalog.get("", "v1", "services").cloned().filter(|_| converting.conversion.webhook.client.service().is_some());
        match services {
            Some(resource) => {
                self.out.push_back(Effect::Cache { resource, request: ReadRequest::Latest { min: None } });
                self.stage = Stage::ConvertResolve(converting);
            }
            None => self.call_webhook(converting, None, now),
        }
    }

    /// Asks the webhook to convert `objects` of `res` to the served version; `resume` goes on
    /// with the answer.
    fn convert_to_served(&mut self, res: &Resource, objects: Vec<Unconverted>, resume: Resume, format: crate::codec::Format, now: Timestamp) {
        let Some((webhook, _)) = res.strategy.conversion_webhook() else { return self.fail_as(&ApiError::internal("no conversion webhook"), format) };
        let objects = objects.into_iter().map(|u| (u.input, u.object)).collect();
        let conversion = Conversion { webhook: webhook.clone(), desired: res.info.api_version(), objects, uid: self.rng.uuid() };
        self.convert(conversion, resume, now)
    }

    /// The Services as the cache has them: the webhook's is resolved.
    pub(super) fn conversion_resolved(&mut self, converting: Box<Converting>, services: Result<ReadResult, ApiError>, now: Timestamp) {
        let service = converting.conversion.webhook.client.service().and_then(|svc| {
            let res = self.served.catalog.get("", "v1", "services")?;
            let key = object_key(&self.server.storage_root(res), Some(&svc.namespace), &svc.name);
            match &services {
                Ok(ReadResult::Snapshot(s)) => s.objects.get(&key).map(|o| o.value()),
                _ => None,
            }
        });
        self.call_webhook(converting, service, now)
    }

    fn call_webhook(&mut self, converting: Box<Converting>, service: Option<serde_json::Value>, now: Timestamp) {
        match converting.conversion.call(service.as_ref()) {
            Ok(call) => {
                self.out.push_back(Effect::Call(Box::new(call)));
                self.stage = Stage::Converting(converting);
            }
            Err(e) => self.called(converting, Err(e), now),
        }
    }

    /// The webhook answered (or could not be reached): the request goes on.
    pub(super) fn called(&mut self, converting: Box<Converting>, answer: Result<WebhookAnswer, String>, now: Timestamp) {
        let Converting { conversion, resume } = *converting;
        let result = conversion.answered(answer);
        match resume {
            Resume::Writing(mut stage) => {
                if let Some(op) = stage.write_under_way() {
                    op.converted(result);
                }
                self.stage = *stage;
            }
            Resume::Get { kv, res, output, subresource } => {
                let mut converted = Converted::default();
                converted.record(&conversion, result);
                self.respond_stored(&kv, res, output, &subresource, &converted, now);
            }
            Resume::List { range, plan, mut converted } => {
                converted.record(&conversion, result);
                self.list_stored(range, plan, converted, now);
            }
            Resume::Listing { range, dc, mut converted } => {
                converted.record(&conversion, result);
                self.listed_for_deletion(range, dc, converted, now);
            }
        }
    }

    /// A GET's answer: the object storage holds, converted by the webhook where it has to be.
    pub(super) fn respond_stored(&mut self, kv: &KeyValue, res: Arc<Resource>, output: Output, subresource: &str, converted: &Converted, now: Timestamp) {
        match registry::decode_converted(&res, kv, converted) {
            Ok(Ok(obj)) => self.respond_object(&res, &obj, output, 200, subresource, now),
            Ok(Err(u)) => {
                let get = Resume::Get { kv: kv.clone(), res: res.clone(), output, subresource: subresource.to_string() };
                self.convert_to_served(&res, vec![u], get, output.format, now)
            }
            Err(e) => self.fail_as(&e, output.format),
        }
    }

    /// The objects of a page storage listed, each as served (an object that does not decode is
    /// left out, as kube's watch cache leaves it out); or those that need the webhook first,
    /// or the error its answer was.
    pub(super) fn page_objects(res: &Resource, range: &RangeResponse, converted: &Converted) -> StoredPage {
        let mut objects = Vec::with_capacity(range.kvs.len());
        let mut unconverted = Vec::new();
        for kv in &range.kvs {
            match CachedObject::from_kv_converted(res, kv, converted) {
                Ok(Ok(o)) => objects.push(Arc::new(o)),
                Ok(Err(u)) => unconverted.push(u),
                // The webhook's error (kube's: a 500 without a reason) fails the request.
                Err(e) if e.reason.is_empty() => return StoredPage::Failed(e),
                Err(_) => {}
            }
        }
        if unconverted.is_empty() { StoredPage::Ready(objects) } else { StoredPage::Needs(unconverted) }
    }

    /// A LIST page from storage, served once every object is at the version asked for.
    pub(super) fn list_stored(&mut self, range: RangeResponse, plan: ListPlan, converted: Converted, now: Timestamp) {
        match Self::page_objects(&plan.res, &range, &converted) {
            StoredPage::Ready(objects) => self.serve_stored_page(plan, &range, objects, now),
            StoredPage::Failed(e) => self.fail_as(&e, plan.output.format),
            StoredPage::Needs(unconverted) => {
                let (res, format) = (plan.res.clone(), plan.output.format);
                self.convert_to_served(&res, unconverted, Resume::List { range, plan, converted }, format, now)
            }
        }
    }

    /// The collection to delete, once every object is at the version asked for: the objects
    /// that match go.
    pub(super) fn listed_for_deletion(&mut self, range: RangeResponse, mut dc: Box<DeleteCollection>, converted: Converted, now: Timestamp) {
        match Self::page_objects(&dc.res, &range, &converted) {
            StoredPage::Ready(objects) => {
                dc.revision = range.header_revision;
                let f = &dc.filter;
                dc.names.extend(objects.iter().filter(|o| o.matches(&f.labels, &f.fields)).map(|o| o.name.clone()));
                self.stage = Stage::DeleteCollection(dc);
            }
            StoredPage::Failed(e) => self.fail_as(&e, dc.output.format),
            StoredPage::Needs(unconverted) => {
                let (res, format) = (dc.res.clone(), dc.output.format);
                self.convert_to_served(&res, unconverted, Resume::Listing { range, dc, converted }, format, now)
            }
        }
    }
}

/// A page of stored objects as served.
pub(super) enum StoredPage {
    Ready(Vec<Shared>),
    /// These need the conversion webhook first.
    Needs(Vec<Unconverted>),
    /// The conversion webhook's error.
    Failed(ApiError),
}
