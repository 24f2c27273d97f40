//! The generic store (kube-apiserver's `genericregistry.Store`): create, update, patch, apply
//! and delete of one object, with the per-resource [`Strategy`](crate::catalog::Strategy).
//!
//! A [`WriteOp`] is a machine over a [`StorageOp`]. Call order: [`WriteOp::new`]; then loop on
//! [`WriteOp::poll`]: send each [`WriteEffect::Kv`] to the store and feed the answer with
//! [`WriteOp::handle`], until [`WriteEffect::Done`]. Everything else (defaulting, validation,
//! patching, managed fields, graceful deletion) happens inside, synchronously, in the storage
//! op's transform, so it always works on the object as it is in storage at the time of the write.

mod create;
mod delete;
pub mod objects;
mod update;

use std::sync::Arc;

use bytes::Bytes;
use jiff::Timestamp;
use serde_json::Value;

use crate::admission::Admission;
use crate::catalog::Resource;
use crate::kv::{KeyValue, KvRequest, KvResult};
use crate::rand::Rng;
use crate::schema::{normalize::normalize, schema};
use crate::status::ApiError;
use crate::storage::{Outcome, StorageEffect, StorageError, StorageEvent, StorageOp, StorageRequest, Transform};

pub use delete::DeleteOptions;
pub use objects::{decode_stored, encode_for_storage};

/// How unknown and duplicate fields in a request are treated (`fieldValidation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

/// The request around a write.
#[derive(Clone, Debug)]
pub struct WriteContext {
    pub now: Timestamp,
    /// The namespace in the URL (namespaced resources).
    pub namespace: Option<String>,
    /// The name in the URL (all but create).
    pub name: Option<String>,
    pub subresource: Option<String>,
    pub dry_run: bool,
    pub field_manager: String,
    pub field_validation: FieldValidation,
    /// The storage key root of the resource (`/registry/pods`).
    pub storage_root: String,
    pub user: crate::auth::UserInfo,
}

/// A patch document and its type.
#[derive(Clone, Debug, PartialEq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply { force: bool },
}

#[derive(Clone, Debug)]
pub enum WriteKind {
    Create(Value),
    Update(Value),
    Patch(PatchType, Value),
    Delete(DeleteOptions),
}

/// What a write returns to the client.
#[derive(Clone, Debug, PartialEq)]
pub struct WriteOutcome {
    /// 200 or 201.
    pub code: u16,
    pub object: Value,
    /// For deletes: the object is gone (rather than marked for deletion).
    pub deleted: bool,
    /// Warnings for the `Warning` header (unknown fields with `fieldValidation=Warn`).
    pub warnings: Vec<String>,
}

#[derive(Debug)]
pub enum WriteEffect {
    Kv(KvRequest),
    Done(Result<WriteOutcome, ApiError>),
}

/// One write; see the module documentation for the call order.
pub struct WriteOp {
    res: Arc<Resource>,
    ctx: WriteContext,
    kind: WriteKind,
    admission: Admission,
    rng: Rng,
    storage: Option<StorageOp<ApiError>>,
    /// The object the last transform produced, returned when the write lands.
    result: Option<Value>,
    /// A create answers 201; an update that created the object too.
    created: bool,
    warnings: Vec<String>,
    done: Option<Result<WriteOutcome, ApiError>>,
}

impl WriteOp {
    pub fn new(res: Arc<Resource>, ctx: WriteContext, kind: WriteKind, admission: Admission, rng: Rng) -> WriteOp {
        let mut op = WriteOp {
            res,
            ctx,
            kind,
            admission,
            rng,
            storage: None,
            result: None,
            created: false,
            warnings: Vec::new(),
            done: None,
        };
        op.start();
        op
    }

    fn key(&self, name: &str) -> Bytes {
        let ns = if self.res.info.namespaced { self.ctx.namespace.as_deref() } else { None };
        crate::storage::keys::object_key(&self.ctx.storage_root, ns, name)
    }

    fn start(&mut self) {
        let req = match self.kind.clone() {
            WriteKind::Create(obj) => match self.prepare_create(obj) {
                Ok(obj) => {
                    let key = self.key(crate::meta::name(&obj));
                    self.created = true;
                    let req = if self.ctx.dry_run {
                        StorageRequest::CreateDryRun { key }
                    } else {
                        StorageRequest::Create { key, value: encode_for_storage(&obj), ttl_seconds: self.res.ttl_seconds }
                    };
                    self.result = Some(obj);
                    req
                }
                Err(e) => {
                    self.done = Some(Err(e));
                    return;
                }
            },
            _ => {
                let name = self.ctx.name.clone().unwrap_or_default();
                StorageRequest::Mutate { key: self.key(&name), cached: None, dry_run: self.ctx.dry_run }
            }
        };
        self.storage = Some(StorageOp::new(req));
    }

    pub fn poll(&mut self, now: Timestamp) -> Option<WriteEffect> {
        if let Some(done) = self.done.take() {
            return Some(WriteEffect::Done(done));
        }
        loop {
            let storage = self.storage.as_mut()?;
            match storage.poll(now)? {
                StorageEffect::Kv(req) => return Some(WriteEffect::Kv(req)),
                StorageEffect::Transform(current) => {
                    let t = self.transform(current.as_ref());
                    self.storage.as_mut().expect("storage op is running").handle(now, StorageEvent::Transformed(t));
                }
                StorageEffect::Done(result) => {
                    self.storage = None;
                    return Some(WriteEffect::Done(self.finish(result)));
                }
            }
        }
    }

    pub fn handle(&mut self, now: Timestamp, result: KvResult) {
        if let Some(s) = self.storage.as_mut() {
            s.handle(now, StorageEvent::Kv(result));
        }
    }

    /// Decides what the key becomes, given what is stored now.
    fn transform(&mut self, current: Option<&KeyValue>) -> Result<Transform, ApiError> {
        let existing = current.map(decode_stored).transpose()?;
        match self.kind.clone() {
            WriteKind::Update(obj) => self.update(existing, obj),
            WriteKind::Patch(pt, patch) => self.patch(existing, pt, patch),
            WriteKind::Delete(opts) => self.delete(existing, &opts),
            WriteKind::Create(_) => unreachable!("creates do not transform"),
        }
    }

    fn finish(&mut self, result: Result<Outcome, StorageError<ApiError>>) -> Result<WriteOutcome, ApiError> {
        let gr = self.res.info.group_resource();
        let name = self.ctx.name.clone().or_else(|| self.result.as_ref().map(|o| crate::meta::name(o).to_string())).unwrap_or_default();
        let outcome = result.map_err(|e| storage_error(e, &gr, &name))?;
        let warnings = std::mem::take(&mut self.warnings);
        let done = |object: Value, code: u16, deleted: bool| Ok(WriteOutcome { code, object, deleted, warnings: warnings.clone() });
        match outcome {
            Outcome::Created(kv) | Outcome::Written { kv, .. } => {
                let mut obj = self.result.take().expect("a transform or create produced the object");
                objects::set_resource_version(&mut obj, kv.mod_revision);
                done(obj, if self.created { 201 } else { 200 }, false)
            }
            Outcome::WouldWrite { value: Some(_), .. } => {
                let obj = self.result.take().expect("a transform or create produced the object");
                done(obj, if self.created { 201 } else { 200 }, false)
            }
            Outcome::Deleted { prev, .. } | Outcome::WouldWrite { value: None, prev: Some(prev) } => {
                let obj = self.result.take().map(Ok).unwrap_or_else(|| decode_stored(&prev))?;
                done(obj, 200, true)
            }
            Outcome::Unchanged(Some(kv)) => {
                let obj = match self.result.take() {
                    // A delete that only marked the object (or found it marked) answers with it.
                    Some(obj) if matches!(self.kind, WriteKind::Delete(_)) => obj,
                    _ => decode_stored(&kv)?,
                };
                done(obj, 200, false)
            }
            Outcome::Unchanged(None) | Outcome::WouldWrite { value: None, prev: None } => Err(ApiError::not_found(&gr, &name)),
            other => Err(ApiError::internal(format!("unexpected storage outcome {other:?}"))),
        }
    }

    /// Type-checks an incoming object against the kind, pruning unknown fields as
    /// `fieldValidation` says.
    fn decode_check(&mut self, obj: &mut Value) -> Result<(), ApiError> {
        let info = &self.res.info;
        let findings = normalize(schema(), info.definition, obj).map_err(|e| {
            ApiError::bad_request(format!("{} in version {:?} cannot be handled as a {}: {e}", info.kind, info.version, info.kind))
        })?;
        if findings.unknown_fields.is_empty() {
            return Ok(());
        }
        let msgs: Vec<String> = findings.unknown_fields.iter().map(|f| format!("unknown field {}", crate::status::quote(f))).collect();
        match self.ctx.field_validation {
            FieldValidation::Ignore => Ok(()),
            FieldValidation::Warn => {
                self.warnings.extend(msgs);
                Ok(())
            }
            FieldValidation::Strict => Err(ApiError::bad_request(format!("strict decoding error: {}", msgs.join(", ")))),
        }
    }
}

/// kube's answer for a storage failure on one object.
pub fn storage_error(e: StorageError<ApiError>, gr: &crate::status::GroupResource, name: &str) -> ApiError {
    match e {
        StorageError::Rejected(e) => e,
        StorageError::AlreadyExists => ApiError::already_exists(gr, name),
        StorageError::Compacted { .. } => ApiError::expired("The resourceVersion for the provided watch is too old."),
        StorageError::FutureRevision { current } => {
            ApiError::timeout(&format!("Too large resource version: current resource version {current}"), 1)
        }
        StorageError::Kv(crate::kv::KvError::Timeout(m)) => ApiError::timeout(&format!("request did not complete within the allotted timeout: {m}"), 1),
        StorageError::Kv(e) => ApiError::internal(e),
    }
}
