//! The generic store (kube-apiserver's `genericregistry.Store`): create, update, patch, apply
//! and delete of one object, with the per-resource [`Strategy`](crate::catalog::Strategy).
//!
//! A [`WriteOp`] is a machine over [`StorageOp`]s. Call order: [`WriteOp::new`]; then loop on
//! [`WriteOp::poll`]: send each [`WriteEffect::Kv`] to the store and feed the answer with
//! [`WriteOp::handle`], until [`WriteEffect::Done`]. Everything else (defaulting, validation,
//! patching, managed fields, graceful deletion) happens inside, synchronously, in the storage
//! op's transform, so it always works on the object as it is in storage at the time of the write.
//!
//! A write goes through up to three phases: taking values from shared pools for a new object
//! (a service's cluster IP and node ports, [`Claim`]), the object's own write, and giving pool
//! values back (when a create fails after taking them, or when the object is deleted).

mod admit;
mod charges;
mod claims;
mod create;
mod delete;
mod eviction;
pub mod objects;
mod pause;
mod provision;
mod request;
mod strict;
mod token_request;
mod update;

use pause::{Asked, Blocked, Paused};

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use jiff::Timestamp;
use serde_json::Value;

use crate::admission::Found;
use crate::admission::webhooks::dispatch::Answers;
use crate::apiextensions::Converted;
use crate::catalog::{Claim, Resource};
use crate::kv::{KeyValue, KvResult};
use crate::meta;
use crate::rand::Rng;
use crate::status::ApiError;
use crate::storage::{Outcome, StorageEffect, StorageError, StorageEvent, StorageOp, StorageRequest, Transform};

pub use delete::DeleteOptions;
pub use eviction::EvictionOp;
pub use objects::{Splice, Unconverted, decode_converted, decode_stored, encode_stored, serve_stored};
pub use request::{FieldValidation, PatchType, Said, WriteContext, WriteEffect, WriteKind, WriteOutcome};
pub use strict::{BodyFindings, Finding, go_format};
pub use token_request::{TokenRequestOp, TokenResources};

enum Phase {
    /// Taking values for a new object: claim `index`, candidate `attempt`.
    Claiming {
        obj: Value,
        claims: Vec<Claim>,
        index: usize,
        attempt: u64,
        granted: Vec<String>,
    },
    /// The object's own write.
    Writing,
    /// Giving pool values back, then answering.
    Releasing {
        keys: VecDeque<Bytes>,
        answer: Result<WriteOutcome, ApiError>,
    },
    Done,
}

/// One write; see the module documentation for the call order.
pub struct WriteOp {
    res: Arc<Resource>,
    ctx: WriteContext,
    kind: WriteKind,
    /// What admission's lookups found.
    found: Found,
    rng: Rng,
    phase: Phase,
    storage: Option<StorageOp<ApiError>>,
    /// The object the last transform produced, returned when the write lands.
    result: Option<Value>,
    /// Where the resourceVersion goes in the bytes stored for `result`, if it was stored as
    /// served (see [`Self::store`]).
    splice: Option<Splice>,
    /// Pool keys this write took (to give back if the create fails).
    claimed: Vec<Bytes>,
    /// A create answers 201; an update that created the object too.
    created: bool,
    warnings: Vec<String>,
    /// What admission warned of (kept on a refusal too, and over retries: the client is told
    /// each once).
    admission_warnings: Vec<String>,
    /// The audit annotations admission added (kept on a refusal too).
    admission_annotations: Vec<(String, String)>,
    /// The quotas the object is charged to, written with it (`charges.rs`).
    charges: Vec<crate::admission::Charge>,
    /// How many times a create's quotas had moved when it was sent.
    charge_attempts: u32,
    done: Option<Result<WriteOutcome, ApiError>>,
    /// The conversion webhook's answers so far.
    converted: Converted,
    /// The admission webhooks' answers so far, by review uid.
    admitted: Answers,
    /// What the reviews' uids are drawn from.
    salt: u64,
    /// What the write met that needs a webhook's answer.
    blocked: Option<Blocked>,
    /// What was asked for (and whether it was sent), and where the write goes on.
    asked: Option<(Asked, bool, Paused)>,
    /// Where the write goes on now that the webhook answered.
    resumed: Option<Paused>,
    /// What the validating plugins and policies passed. An update's transform, run again
    /// over the same object (once a webhook answered, or after a quota it charges moved),
    /// makes the same object again (an update draws nothing at random; the mutating webhooks'
    /// answers are kept): see [`WriteOp::validating_admission`].
    validated: Option<admit::Validated>,
    /// Whether what a plugin needed created first was (see `provision.rs`).
    provisioning: provision::Provisioning,
}

/// What admission is told of a write (`name`: the object's, or what its refusals call it).
fn admission_attributes<'a>(
    res: &'a Resource,
    ctx: &'a WriteContext,
    found: &'a Found,
    operation: crate::admission::Operation,
    name: &'a str,
    old: Option<&'a Value>,
) -> crate::admission::Attributes<'a> {
    crate::admission::Attributes {
        operation,
        info: &res.info,
        subresource: ctx.subresource.as_deref(),
        namespace: if res.info.namespaced { ctx.namespace.as_deref().unwrap_or_default() } else { "" },
        name,
        dry_run: ctx.dry_run,
        user: &ctx.user,
        old,
        found,
        access: ctx.access.as_deref(),
        catalog: ctx.catalog.as_deref(),
        now: ctx.now,
        annotations: Default::default(),
    }
}

impl WriteOp {
    pub fn new(res: Arc<Resource>, ctx: WriteContext, kind: WriteKind, found: Found, rng: Rng) -> WriteOp {
        let salt = rng.clone().next_u64();
        let mut op = WriteOp {
            res,
            ctx,
            kind,
            found,
            rng,
            phase: Phase::Writing,
            storage: None,
            result: None,
            splice: None,
            claimed: Vec::new(),
            created: false,
            warnings: Vec::new(),
            admission_warnings: Vec::new(),
            admission_annotations: Vec::new(),
            charges: Vec::new(),
            charge_attempts: 0,
            done: None,
            converted: Converted::default(),
            admitted: Answers::new(),
            salt,
            blocked: None,
            asked: None,
            resumed: None,
            validated: None,
            provisioning: provision::Provisioning::NotAsked,
        };
        op.start();
        op
    }

    /// What admission warned of so far (for the `Warning` headers, whatever the outcome),
    /// each once.
    pub fn take_said(&mut self) -> Said {
        Said { warnings: once_each(std::mem::take(&mut self.admission_warnings)), annotations: std::mem::take(&mut self.admission_annotations) }
    }

    fn storage_root(&self) -> String {
        format!("{}/{}", self.ctx.prefix, self.res.info.storage_prefix)
    }

    fn key(&self, name: &str) -> Bytes {
        let ns = if self.res.info.namespaced { self.ctx.namespace.as_deref() } else { None };
        crate::storage::keys::object_key(&self.storage_root(), ns, name)
    }

    fn pool_key(&self, pool: &str, value: &str) -> Bytes {
        Bytes::from(format!("{}/{pool}/{value}", self.ctx.prefix))
    }

    fn start(&mut self) {
        if let WriteKind::Admit { body, mutating } = &self.kind {
            let (body, mutating) = (body.clone(), *mutating);
            return self.admit_only(body, mutating);
        }
        let WriteKind::Create(obj) = &self.kind else {
            let name = self.ctx.name.clone().unwrap_or_default();
            self.storage = Some(StorageOp::new(StorageRequest::Mutate { key: self.key(&name), cached: None, dry_run: self.ctx.dry_run }));
            return;
        };
        // The object moves on to become the result: nothing reads a create's kind again,
        // unless a mutating admission webhook is asked, a plugin needs an object created
        // first, or the authorization webhook is asked before validation (a policy's params,
        // a mutating policy's `authorizer`), and the create starts again (a validating webhook's answer goes on from the
        // validation, with the object it kept).
        let again = !self.ctx.webhooks.mutating.is_empty() || self.provision_wanted(obj).is_some() || self.may_ask_webhook_before_validation();
        let obj = match &mut self.kind {
            WriteKind::Create(obj) if again => obj.clone(),
            WriteKind::Create(obj) => std::mem::take(obj),
            _ => return,
        };
        let rng = self.rng.clone();
        match self.prepare_unvalidated(obj, false) {
            Ok(obj) => self.validate_new(obj),
            Err(_) if self.paused_at(Paused::Start) => self.rng = rng,
            Err(e) => self.done = Some(Err(e)),
        }
    }

    /// The create of the prepared `obj` from its validating admission on: its claims, then
    /// its write. Waiting for a validating webhook, it goes on from here with the answer.
    fn validate_new(&mut self, mut obj: Value) {
        match self.admit_new(&mut obj).and_then(|()| self.res.strategy.claims(&obj, &mut self.rng)) {
            Ok(claims) if claims.is_empty() => self.write_new(obj),
            Ok(claims) if self.ctx.dry_run => {
                let mut obj = obj;
                let values: Vec<String> = claims.iter().filter_map(|c| c.candidates.get(0)).collect();
                self.res.strategy.grant(&mut obj, &values);
                self.write_new(obj);
            }
            Ok(claims) => {
                self.phase = Phase::Claiming { obj, claims, index: 0, attempt: 0, granted: Vec::new() };
                self.claim_next();
            }
            Err(e) => {
                if !self.paused_at(Paused::Validate(obj)) {
                    self.done = Some(Err(e));
                }
            }
        }
    }

    /// The create of a prepared object.
    fn write_new(&mut self, obj: Value) {
        let key = self.key(crate::meta::name(&obj));
        self.created = true;
        // A dry run encodes the object for storage too: kube's dry run converts it to the
        // stored version and back, through the conversion webhook where there is one.
        let alongside = self.alongside(&key);
        let req = match self.store(obj) {
            Ok(value) if self.ctx.dry_run => StorageRequest::CreateDryRun { key, value },
            Ok(value) => StorageRequest::Create { key, value, ttl_seconds: self.res.ttl_seconds },
            Err(e) => {
                let obj = self.result.take().expect("store keeps the object");
                if !self.paused_at(Paused::Create(obj)) {
                    self.done = Some(Err(e));
                }
                return;
            }
        };
        self.phase = Phase::Writing;
        let mut op = StorageOp::new(req);
        op.set_alongside(alongside);
        self.storage = Some(op);
    }

    /// The bytes to store for `obj`, which becomes the write's result. Where a webhook
    /// converts the resource's objects, the webhook's object at the stored version (the error
    /// when it is yet to be asked: see [`Self::paused_at`]).
    fn store(&mut self, obj: Value) -> Result<Bytes, ApiError> {
        if let Some((_, stored_version)) = self.res.strategy.conversion_webhook() {
            let input = Bytes::from(serde_json::to_vec(&obj).expect("JSON trees serialize"));
            let converted = objects::by_webhook(&self.res, obj.clone(), &input, &stored_version, &self.converted);
            self.result = Some(obj);
            self.splice = None;
            return match converted? {
                Ok(stored) => Ok(encode_stored(&self.res, &stored).0),
                Err(u) => Err(self.block(u, stored_version)),
            };
        }
        let (bytes, splice) = encode_stored(&self.res, &obj);
        self.result = Some(obj);
        self.splice = splice;
        Ok(bytes)
    }

    /// The object stored in `kv`, as served (the error when the conversion webhook is yet
    /// to be asked: see [`Self::paused_at`]).
    fn decode(&mut self, kv: &KeyValue) -> Result<Value, ApiError> {
        match objects::decode_converted(&self.res, kv, &self.converted)? {
            Ok(obj) => Ok(obj),
            Err(u) => Err(self.block(u, self.res.info.api_version())),
        }
    }

    pub fn poll(&mut self, now: Timestamp) -> Option<WriteEffect> {
        loop {
            if let Some(done) = self.done.take() {
                self.phase = Phase::Done;
                return Some(WriteEffect::Done(done));
            }
            if let Some((asked, sent, _)) = &mut self.asked {
                return (!std::mem::replace(sent, true)).then(|| match asked {
                    Asked::Convert(conversion) => WriteEffect::Convert(conversion.clone()),
                    Asked::Admit(calls) => WriteEffect::Admit(calls.clone()),
                    Asked::Provision(p) => WriteEffect::Provision(p.clone()),
                });
            }
            if let Some(at) = self.resumed.take() {
                match at {
                    Paused::Start => self.start(),
                    Paused::Validate(obj) => self.validate_new(obj),
                    Paused::Create(obj) => self.write_new(obj),
                    Paused::Transform(current) => self.transformed(now, current),
                    Paused::Finish(result) => self.landed(result),
                }
                continue;
            }
            let Some(storage) = self.storage.as_mut() else {
                if self.done.is_some() || self.asked.is_some() {
                    continue;
                }
                return None;
            };
            match storage.poll(now)? {
                StorageEffect::Kv(req) => return Some(WriteEffect::Kv(req)),
                StorageEffect::Transform(current) => self.transformed(now, current),
                StorageEffect::Done(result) => {
                    self.storage = None;
                    match self.phase {
                        Phase::Claiming { .. } => self.claim_answered(result),
                        Phase::Releasing { .. } => self.release_next(),
                        Phase::Writing => self.landed(result),
                        Phase::Done => {}
                    }
                }
            }
        }
    }

    /// Decides what the key becomes and tells the storage op, unless the decision waits for
    /// the conversion webhook.
    fn transformed(&mut self, now: Timestamp, current: Option<KeyValue>) {
        // A transform run again after the webhook answered draws the same uids and names (a
        // create by apply), so that the object it asked about is the one it meets again.
        let rng = self.rng.clone();
        let mut out_of_attempts = None;
        if let Some(moved) = self.storage.as_mut().and_then(StorageOp::take_moved)
            && self.quotas_moved(moved)
        {
            out_of_attempts = self.out_of_attempts();
        }
        let t = match (&self.phase, out_of_attempts) {
            (Phase::Releasing { .. }, _) => Ok(Transform::Delete),
            (_, Some(conflict)) => Err(conflict),
            _ => self.transform(current.as_ref()),
        };
        if self.paused_at(Paused::Transform(current)) {
            self.rng = rng;
        } else {
            let own = self.key(self.ctx.name.as_deref().unwrap_or_default());
            let alongside = if matches!(t, Ok(Transform::Put(_))) { self.alongside(&own) } else { Vec::new() };
            let storage = self.storage.as_mut().expect("storage op is running");
            storage.set_alongside(alongside);
            storage.handle(now, StorageEvent::Transformed(t));
        }
    }

    /// The object's write ended: the answer, unless it waits for the conversion webhook.
    fn landed(&mut self, result: Result<Outcome, StorageError<ApiError>>) {
        if let Err(StorageError::Moved(moved)) = result {
            return self.recharge_create(moved);
        }
        let answer = self.finish(result.clone());
        if !self.paused_at(Paused::Finish(result)) {
            self.after_write(answer);
        }
    }

    pub fn handle(&mut self, now: Timestamp, result: KvResult) {
        if let Some(s) = self.storage.as_mut() {
            s.handle(now, StorageEvent::Kv(result));
        }
    }

    /// After the object's write: a failed create gives its pool values back, a deleted
    /// object gives back the ones it held.
    fn after_write(&mut self, answer: Result<WriteOutcome, ApiError>) {
        match &answer {
            Err(_) if !self.claimed.is_empty() => self.release(answer),
            Ok(o) if o.deleted && !self.ctx.dry_run => {
                let held = self.res.strategy.held(&o.object);
                self.claimed = held.iter().map(|(pool, value)| self.pool_key(pool, value)).collect();
                self.release(answer);
            }
            _ => {
                self.phase = Phase::Done;
                self.done = Some(answer);
            }
        }
    }

    /// Decides what the key becomes, given what is stored now.
    fn transform(&mut self, current: Option<&KeyValue>) -> Result<Transform, ApiError> {
        let existing = current.map(|kv| self.decode(kv)).transpose()?;
        match self.kind.clone() {
            WriteKind::Update(obj) if self.ctx.subresource.as_deref() == Some("scale") => self.update_scale(existing, obj),
            WriteKind::Update(obj) => self.update(existing, obj),
            WriteKind::Patch(pt, patch) => self.patch(existing, pt, patch),
            WriteKind::Delete(opts) => self.delete(existing, &opts),
            WriteKind::Action { body, .. } => self.action(existing, body),
            WriteKind::Create(_) | WriteKind::Admit { .. } => unreachable!("creates and admissions do not transform"),
        }
    }

    fn finish(&mut self, result: Result<Outcome, StorageError<ApiError>>) -> Result<WriteOutcome, ApiError> {
        let gr = self.res.info.group_resource();
        let name = self.ctx.name.clone().or_else(|| self.result.as_ref().map(|o| crate::meta::name(o).to_string())).unwrap_or_default();
        let outcome = result.map_err(|e| storage_error(e, &gr, &name))?;
        let warnings = once_each(self.warnings.clone());
        let scale = self.ctx.subresource.as_deref() == Some("scale");
        let res = self.res.clone();
        let view = |obj: Value| if scale { res.strategy.scale_of(&obj).map(|s| s.scale) } else { Ok(obj) };
        let done = |object: Value, code: u16, deleted: bool| Ok(WriteOutcome { code, object, stored: None, deleted, warnings: warnings.clone() });
        match outcome {
            Outcome::Created(kv) | Outcome::Written { kv, .. } => {
                // What a webhook converted is answered as it reads back, converted again (as
                // kube decodes what it stored).
                let read_back = if self.res.strategy.conversion_webhook().is_some() { Some(self.decode(&kv)?) } else { None };
                let mut obj = match read_back {
                    Some(obj) => obj,
                    None => self.result.take().expect("a transform or create produced the object"),
                };
                objects::set_resource_version(&mut obj, kv.mod_revision);
                // The stored form leaves out only the resourceVersion (and a selfLink).
                let splice = self.splice.filter(|_| !scale && meta::at(&obj, &["metadata", "selfLink"]).is_none());
                let stored = splice.map(|s| (kv.value.clone(), kv.mod_revision, s));
                done(view(obj)?, if self.created { 201 } else { 200 }, false).map(|o| WriteOutcome { stored, ..o })
            }
            Outcome::WouldWrite { value: Some(value), .. } => {
                // As kube's dry run, the answer is what would be stored decoded again; where a
                // webhook converts, that is its object converted back (the resourceVersion is
                // the one the object had).
                let read_back = match self.res.strategy.conversion_webhook() {
                    Some(_) => Some(self.decode(&KeyValue { key: Bytes::new(), value, create_revision: 0, mod_revision: 0, version: 0, lease: 0 })?),
                    None => None,
                };
                let mut obj = self.result.take().expect("a transform or create produced the object");
                if let Some(mut converted) = read_back {
                    match meta::at(&obj, &["metadata", "resourceVersion"]).cloned() {
                        Some(rv) => meta::set_meta(&mut converted, "resourceVersion", rv),
                        None => meta::remove_meta(&mut converted, "resourceVersion"),
                    }
                    obj = converted;
                }
                done(view(obj)?, if self.created { 201 } else { 200 }, false)
            }
            Outcome::Deleted { prev, .. } | Outcome::WouldWrite { value: None, prev: Some(prev) } => {
                // An update that removed the last finalizer of an object being deleted answers
                // with the object storage deleted, as kube's `deleteWithoutFinalizers` does.
                let obj = match self.result.take() {
                    Some(obj) if matches!(self.kind, WriteKind::Delete(_)) => obj,
                    _ => self.decode(&prev)?,
                };
                done(obj, 200, true)
            }
            Outcome::Unchanged(Some(kv)) => {
                let obj = match self.result.take() {
                    // A delete that only marked the object (or found it marked) answers with it.
                    Some(obj) if matches!(self.kind, WriteKind::Delete(_)) => obj,
                    _ => self.decode(&kv)?,
                };
                done(view(obj)?, 200, false)
            }
            Outcome::Unchanged(None) | Outcome::WouldWrite { value: None, prev: None } => Err(ApiError::not_found(&gr, &name)),
            other => Err(ApiError::internal(format!("unexpected storage outcome {other:?}"))),
        }
    }
}

/// Warnings each once, in the order first given (a write that ran again gives some again).
/// A write may carry a warning per member of a list (tens of thousands): the seen ones are
/// kept in a set.
fn once_each(warnings: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    warnings.into_iter().filter(|w| seen.insert(w.clone())).collect()
}

/// kube's answer for a storage failure on one object.
pub fn storage_error(e: StorageError<ApiError>, gr: &crate::status::GroupResource, name: &str) -> ApiError {
    match e {
        StorageError::Rejected(e) => e,
        StorageError::AlreadyExists => ApiError::already_exists(gr, name),
        // Only a create charged to quotas meets it, and charges again.
        StorageError::Moved(_) => ApiError::stale_conflict(&crate::status::GroupResource::new("", "resourcequotas"), ""),
        StorageError::Compacted { .. } => ApiError::expired("The resourceVersion for the provided list is too old."),
        StorageError::FutureRevision { current } => crate::cache::too_large(current + 1, current),
        StorageError::Kv(crate::kv::KvError::Timeout(m)) => ApiError::timeout(&format!("request did not complete within the allotted timeout: {m}"), 1),
        // kube passes etcd's refusal through as it is: 500 without a reason.
        StorageError::Kv(e @ crate::kv::KvError::TooLarge) => ApiError::new(500, "", e.to_string()),
        StorageError::Kv(e) => ApiError::internal(e),
    }
}
