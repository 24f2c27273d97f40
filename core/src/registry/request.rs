//! What a write is asked to do and what it answers: the request around it ([`WriteContext`]),
//! what it does ([`WriteKind`]), the effects it asks its driver for ([`WriteEffect`]) and
//! what it returns ([`WriteOutcome`]).

use std::sync::Arc;

use bytes::Bytes;
use jiff::Timestamp;
use serde_json::Value;

use super::{BodyFindings, DeleteOptions, Splice};
use crate::admission::webhooks::dispatch::AdmissionCall;
use crate::apiextensions::Conversion;
use crate::catalog::Resource;
use crate::kv::{KvRequest, Revision};
use crate::status::ApiError;

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
    /// What strict decoding of the request's body found (repeated keys), reported with the
    /// unknown fields as `field_validation` says.
    pub body_findings: BodyFindings,
    /// `--etcd-prefix` (`/registry`).
    pub prefix: String,
    pub user: crate::auth::UserInfo,
    /// The authorizer chain, for what the write checks besides the request's authorization
    /// (RBAC's escalation checks, admission plugins); `None` for kapi's own writes.
    pub access: Option<Box<crate::authz::Access>>,
    /// The admission plugins the write goes through.
    pub admission: std::sync::Arc<crate::admission::Chain>,
    /// The admission webhooks of the configurations served when the request came.
    pub webhooks: std::sync::Arc<crate::admission::webhooks::Hooks>,
    /// The validating admission policies served when the request came.
    pub policies: std::sync::Arc<crate::admission::policies::Policies>,
    /// The mutating admission policies served when the request came.
    pub mutating_policies: std::sync::Arc<crate::admission::policies::Policies>,
    /// The catalog served when the request came (what a policy's `paramKind` names); `None`
    /// for kapi's own writes.
    pub catalog: Option<Arc<crate::catalog::Catalog>>,
    /// The other versions of the resource written that are stored alike (for webhooks of
    /// `matchPolicy: Equivalent`), in the catalog's order.
    pub equivalents: Vec<Arc<Resource>>,
}

/// A patch document and its type.
#[derive(Clone, Debug, PartialEq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply { force: bool },
}

/// What admission said of a write besides its verdict: its warnings (for the `Warning`
/// headers, each once) and its audit annotations (for the request's audit events).
#[derive(Debug, Default)]
pub struct Said {
    pub warnings: Vec<String>,
    pub annotations: Vec<(String, String)>,
}

impl Said {
    pub fn extend(&mut self, other: Said) {
        self.warnings.extend(other.warnings);
        self.annotations.extend(other.annotations);
    }
}

#[derive(Clone, Debug)]
pub enum WriteKind {
    Create(Value),
    Update(Value),
    Patch(PatchType, Value),
    Delete(DeleteOptions),
    /// A create on a subresource that changes its parent (`pods/binding`), admitted as the
    /// subresource's create, or as a create of `admitted_as` when it is set (the `bindings`
    /// resource, which kube admits as a resource of its own).
    Action {
        body: Value,
        admitted_as: Option<Arc<Resource>>,
    },
    /// One phase of the admission of a subresource's object that is not itself written (an
    /// Eviction, a TokenRequest, which their own machines carry out around it): the mutating
    /// one, or the validating one. Its outcome is the object admitted.
    Admit {
        body: Value,
        mutating: bool,
    },
}

impl WriteKind {
    /// What the write creates when `res` has no object of its name (it is then admitted as a
    /// create): a create's object, an apply's configuration, and the object of a PUT where
    /// the resource allows create on update; a PUT or apply of a subresource (`subresource`)
    /// creates nothing.
    pub fn created(&self, res: &Resource, subresource: Option<&str>) -> Option<&Value> {
        match self {
            WriteKind::Create(obj) => Some(obj),
            WriteKind::Update(obj) if subresource.is_none() && res.strategy.allow_create_on_update() => Some(obj),
            WriteKind::Patch(PatchType::Apply { .. }, config) if subresource.is_none() => Some(config),
            _ => None,
        }
    }
}

/// What a write returns to the client.
#[derive(Clone, Debug, PartialEq)]
pub struct WriteOutcome {
    /// 200 or 201.
    pub code: u16,
    pub object: Value,
    /// The bytes just stored for `object`, their revision and where the resourceVersion goes
    /// in them, when `object` is exactly those bytes with it added: its JSON is then spliced,
    /// not encoded again.
    pub stored: Option<(Bytes, Revision, Splice)>,
    /// For deletes: the object is gone (rather than marked for deletion).
    pub deleted: bool,
    /// Warnings for the `Warning` header (unknown fields with `fieldValidation=Warn`).
    pub warnings: Vec<String>,
}

#[derive(Debug)]
pub enum WriteEffect {
    Kv(KvRequest),
    /// Ask the resource's conversion webhook (a custom resource stored at another version);
    /// the answer goes to [`WriteOp::converted`].
    Convert(Conversion),
    /// Ask these admission webhooks, all at once; their answers, in order, go to
    /// [`WriteOp::admitted`].
    Admit(Vec<AdmissionCall>),
    /// Have the server create this object first, as a request of its own (an admission
    /// plugin's, before a create is admitted); what came of it goes to [`WriteOp::provisioned`].
    Provision(crate::admission::Provision),
    Done(Result<WriteOutcome, ApiError>),
}
