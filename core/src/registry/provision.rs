//! A create that an admission plugin needs an object created for first (NamespaceAutoProvision's
//! namespace, [`crate::admission::Plugin::provision`]). kube's plugin creates it when its turn
//! comes, first of the mutating plugins, through the server's loopback client: here the write
//! stops there ([`WriteEffect::Provision`](super::WriteEffect::Provision)), the pipeline makes
//! the server's own request, and the write goes on with what came of it: the object as it now
//! is (what the plugins' lookups see), or the error, which refuses the create.

use std::sync::Arc;

use serde_json::Value;

use super::{Asked, Blocked, WriteOp, admission_attributes};
use crate::admission::{Operation, Pending, Provision};
use crate::status::ApiError;

/// Where a write stands with what a plugin needs created first.
pub(super) enum Provisioning {
    /// Nothing asked yet.
    NotAsked,
    /// Asked and answered: the lookups hold the object as it now is.
    Answered,
    /// The server's own request met this error.
    Failed(ApiError),
}

impl WriteOp {
    /// Before a create's mutating admission (`obj`, named `named` in refusals): whether a
    /// plugin needs an object created first, for which the write stops (the error returned
    /// then stands for the answer until it comes, and is never seen). Once answered, a failure
    /// refuses the create as kube's `admission.NewForbidden` refuses it.
    pub(super) fn provision_first(&mut self, obj: &Value, named: &str) -> Result<(), ApiError> {
        match &self.provisioning {
            Provisioning::Answered => Ok(()),
            Provisioning::Failed(e) => {
                let a = admission_attributes(&self.res, &self.ctx, &self.found, Operation::Create, named, None);
                Err(a.refused_by(e.clone()))
            }
            Provisioning::NotAsked => {
                let Some(provision) = self.provision_wanted(obj) else { return Ok(()) };
                self.blocked = Some(Blocked::Provision(provision));
                Err(ApiError::internal("waiting for the server's own request"))
            }
        }
    }

    /// What a plugin needs created before `obj` is admitted as a create, if not asked yet.
    pub(super) fn provision_wanted(&self, obj: &Value) -> Option<Provision> {
        if !matches!(self.provisioning, Provisioning::NotAsked) {
            return None;
        }
        let pending = Pending {
            operation: Operation::Create,
            info: &self.res.info,
            subresource: self.ctx.subresource.as_deref(),
            namespace: self.ctx.namespace.as_deref(),
            name: self.ctx.name.as_deref(),
            object: Some(obj),
            dry_run: self.ctx.dry_run,
        };
        self.ctx.admission.provision(&pending, &self.found)
    }

    /// What came of the request a [`WriteEffect::Provision`](super::WriteEffect::Provision)
    /// asked for: the object as it now is (`None`: it is gone again), or the error it met.
    pub fn provisioned(&mut self, outcome: Result<Option<Value>, ApiError>) {
        if let Some((Asked::Provision(provision), _, at)) = self.asked.take() {
            self.provisioning = match outcome {
                Ok(object) => {
                    self.found.record(provision.lookup, object.map(Arc::new));
                    Provisioning::Answered
                }
                Err(e) => Provisioning::Failed(e),
            };
            self.resumed = Some(at);
        }
    }
}
