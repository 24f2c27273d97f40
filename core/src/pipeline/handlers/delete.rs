//! DELETE of one object and of a collection (kube's `handlers/delete.go`).

use std::collections::VecDeque;
use std::sync::Arc;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::lookups::{AfterLookups, Lookups};
use super::{DeleteCollection, PendingWrite, Stage};
use crate::admission::Found;
use crate::apiextensions::Converted;
use crate::catalog::Resource;
use crate::codec::negotiate::{self, Target};
use crate::codec::{self, Output};
use crate::pipeline::params;
use crate::pipeline::query::Query;
use crate::pipeline::respond::{Head, content_type};
use crate::pipeline::{Effect, RequestInfo, RequestMachine};
use crate::registry::{self, FieldValidation, WriteContext, WriteEffect, WriteKind, WriteOp};
use crate::status::ApiError;
use crate::storage::{Outcome, StorageEffect, StorageOp, StorageRequest};

/// What admission reads before deleting objects of `res` (the namespace, the policies' parameters).
fn delete_lookups(ctx: &WriteContext, res: &Resource) -> Vec<crate::admission::Lookup> {
    let pending = crate::admission::Pending {
        operation: crate::admission::Operation::Delete,
        info: &res.info,
        subresource: ctx.subresource.as_deref(),
        namespace: ctx.namespace.as_deref(),
        name: ctx.name.as_deref(),
        object: None,
        dry_run: ctx.dry_run,
    };
    ctx.configured_lookups(&pending)
}

impl RequestMachine {
    pub(super) fn delete_body(&self) -> Result<Option<Value>, ApiError> {
        if self.req.body.is_empty() {
            return Ok(None);
        }
        let format = negotiate::request_format(self.req.header("Content-Type"))?;
        codec::decode(&self.req.body, format).map(Some).map_err(ApiError::bad_request)
    }

    pub(super) fn delete(&mut self, now: Timestamp, res: Arc<Resource>, info: &RequestInfo, query: &Query, namespace: Option<String>) -> Result<(), ApiError> {
        let output = self.output(&res, Target::Object, query)?;
        let (options, dry_run) = params::delete_options(query, self.delete_body()?.as_ref())?;
        let opts = params::WriteOptions { dry_run, field_manager: String::new(), field_validation: FieldValidation::Ignore, force: None };
        let ctx = self.write_context(now, info, namespace, &opts);
        let lookups = delete_lookups(&ctx, &res);
        self.start_write(PendingWrite { res, output, ctx, kind: WriteKind::Delete(options) }, lookups);
        Ok(())
    }

    pub(super) fn delete_collection(
        &mut self,
        now: Timestamp,
        res: Arc<Resource>,
        info: &RequestInfo,
        query: &Query,
        namespace: Option<String>,
    ) -> Result<(), ApiError> {
        let output = self.output(&res, Target::List, query)?;
        let (options, dry_run) = params::delete_options(query, self.delete_body()?.as_ref())?;
        let list = params::list_options(query, false)?;
        let opts = params::WriteOptions { dry_run, field_manager: String::new(), field_validation: FieldValidation::Ignore, force: None };
        let ctx = self.write_context(now, info, namespace.clone(), &opts);
        let prefix = crate::storage::keys::collection_prefix(&self.server.storage_root(&res), namespace.as_deref());
        let op = StorageOp::new(StorageRequest::List { prefix, start: None, limit: 0, revision: 0 });
        let lookups = delete_lookups(&ctx, &res);
        let dc = DeleteCollection {
            res,
            output,
            filter: list,
            ctx,
            options,
            found: Found::default(),
            names: VecDeque::new(),
            current: None,
            deleted: Vec::new(),
            revision: 0,
        };
        self.stage = match lookups.is_empty() {
            true => Stage::Listing { op, dc: Box::new(dc) },
            false => Stage::Lookups(Box::new(Lookups::new(lookups, AfterLookups::DeleteCollection { op: Box::new(op), dc: Box::new(dc) }))),
        };
        Ok(())
    }

    pub(super) fn finish_delete_collection(&mut self, dc: DeleteCollection) {
        let items: Vec<Value> = dc.deleted;
        let list = json!({
            "kind": dc.res.info.list_kind(),
            "apiVersion": dc.res.info.api_version(),
            "metadata": {"resourceVersion": dc.revision.to_string()},
            "items": items,
        });
        let output = Output { view: codec::View::Object, ..dc.output };
        match codec::encode(&list, output.format) {
            Ok(body) => self.respond(Head::new(200, &content_type(output, false)), body),
            Err(e) => self.fail_as(&ApiError::internal(e), output.format),
        }
    }

    /// The collection is listed: the objects that match are deleted next.
    pub(super) fn step_listing(&mut self, mut op: StorageOp<ApiError>, dc: Box<DeleteCollection>, now: Timestamp) -> bool {
        match op.poll(now) {
            Some(StorageEffect::Kv(r)) => {
                self.out.push_back(Effect::Kv(r));
                self.stage = Stage::Listing { op, dc };
                true
            }
            Some(StorageEffect::Done(Ok(Outcome::Listed(range)))) => {
                self.listed_for_deletion(range, dc, Converted::default(), now);
                true
            }
            Some(StorageEffect::Done(r)) => {
                let e = match r {
                    Err(e) => registry::storage_error(e, &dc.res.info.group_resource(), ""),
                    Ok(o) => ApiError::internal(format!("unexpected storage outcome {o:?}")),
                };
                self.fail_as(&e, dc.output.format);
                true
            }
            _ => {
                self.stage = Stage::Listing { op, dc };
                false
            }
        }
    }

    /// One delete after the other, each as a DELETE of the object would be.
    pub(super) fn step_delete_collection(&mut self, mut dc: Box<DeleteCollection>, now: Timestamp) -> bool {
        let Some(op) = dc.current.as_mut() else {
            match dc.names.pop_front() {
                Some(name) => {
                    let ctx = WriteContext { name: Some(name), ..dc.ctx.clone() };
                    dc.current = Some(WriteOp::new(
                        dc.res.clone(),
                        ctx,
                        WriteKind::Delete(dc.options.clone()),
                        dc.found.clone(),
                        crate::rand::Rng::new(self.rng.next_u64()),
                    ));
                    self.stage = Stage::DeleteCollection(dc);
                }
                None => self.finish_delete_collection(*dc),
            }
            return true;
        };
        match op.poll(now) {
            Some(WriteEffect::Kv(r)) => {
                self.out.push_back(Effect::Kv(r));
                self.stage = Stage::DeleteCollection(dc);
                true
            }
            Some(WriteEffect::Convert(c)) => {
                self.convert(c, super::convert::Resume::Writing(Box::new(Stage::DeleteCollection(dc))), now);
                true
            }
            Some(WriteEffect::Admit(calls)) => {
                self.ask_admission_webhooks(calls, Stage::DeleteCollection(dc));
                true
            }
            Some(WriteEffect::Provision(p)) => {
                self.start_provisioning(p, Stage::DeleteCollection(dc), now);
                true
            }
            Some(WriteEffect::Done(result)) => {
                self.heard(op.take_said());
                dc.current = None;
                match result {
                    Ok(o) => {
                        dc.deleted.push(o.object);
                        self.stage = Stage::DeleteCollection(dc);
                    }
                    // Gone already: someone else deleted it.
                    Err(e) if e.code == 404 => self.stage = Stage::DeleteCollection(dc),
                    Err(e) => self.fail_as(&e, dc.output.format),
                }
                true
            }
            None => {
                self.stage = Stage::DeleteCollection(dc);
                false
            }
        }
    }
}
