//! Create (`rest.BeforeCreate` and the generic store's create path).

use serde_json::Value;

use super::WriteOp;
use super::strict::Source;
use crate::admission::Operation;
use crate::authz::escalation::Write;
use crate::authz::rbac::Kind;
use crate::meta;
use crate::schema::normalize::format_time;
use crate::ssa;
use crate::status::ApiError;
use crate::validation;

impl WriteOp {
    /// Everything before a new object is written: decoding checks, defaults, system fields,
    /// managed fields, admission and validation. `applied` is set when the object comes from a
    /// server-side apply, which has already recorded its managed fields.
    ///
    /// This is the create of a transform (PUT or apply of what does not exist), which runs
    /// again, drawing the same uid, after a validating webhook answered: an object equal to
    /// the one the validating plugins and policies passed in an earlier run is not passed
    /// through them again (see [`Self::validating_admission`]).
    pub(super) fn prepare_new(&mut self, obj: Value, applied: bool) -> Result<Value, ApiError> {
        let earlier = self.validated.take();
        let mut obj = self.prepare_unvalidated(obj, applied)?;
        self.validated = earlier.filter(|v| v.entered(&obj));
        // Only a validating webhook, a plugin asking its own review or the authorization
        // webhook, or a conversion webhook makes it run again.
        let may_ask = !self.ctx.webhooks.validating.is_empty()
            || self.ctx.admission.validation_annotates(&self.res.info)
            || self.ctx.access.as_ref().is_some_and(|a| a.authorizer.asks_webhooks())
            || self.res.strategy.conversion_webhook().is_some();
        let entered = may_ask.then(|| obj.clone());
        let admitted = self.admit_new(&mut obj);
        if let (Some(v), Some(entered)) = (self.validated.as_mut(), entered) {
            v.entering(entered);
        }
        admitted?;
        Ok(obj)
    }

    /// [`Self::prepare_new`] up to the validating admission: the object is final from here
    /// on, so a create waiting for a validating webhook goes on from it (see [`Self::admit_new`]).
    /// A new object is validated afresh (whatever an earlier object of the write passed).
    pub(super) fn prepare_unvalidated(&mut self, mut obj: Value, applied: bool) -> Result<Value, ApiError> {
        self.validated = None;
        let res = self.res.clone();
        let info = &res.info;
        if !applied {
            self.decode_check(&mut obj, Source::Body)?;
        }
        meta::set_type_meta(&mut obj, &info.api_version(), &info.kind);
        self.fix_namespace(&mut obj)?;
        if !meta::resource_version(&obj).is_empty() {
            return Err(ApiError::bad_request("resourceVersion should not be set on objects to be created"));
        }
        self.res.strategy.default(&mut obj);
        if !applied {
            ssa::record_update(None, &mut obj, self.res.strategy.typing(), &self.ctx.field_manager, self.ctx.subresource.as_deref(), self.ctx.now);
        }
        let named = shown_name(&obj);
        self.provision_first(&obj, &named)?;
        self.mutating_admission(Operation::Create, &named, None, Some(&mut obj))?;
        // kube's `BeforeCreate` checks the namespace of what admission made.
        self.fix_namespace(&mut obj)?;
        self.check_escalation(&obj, None)?;

        meta::remove_meta(&mut obj, "deletionTimestamp");
        meta::remove_meta(&mut obj, "deletionGracePeriodSeconds");
        self.res.strategy.prepare_for_create(&mut obj);
        self.res.strategy.record_requester(&mut obj, &self.ctx.user);
        meta::set_meta(&mut obj, "creationTimestamp", Value::String(format_time(self.ctx.now, false)));
        meta::set_meta(&mut obj, "uid", Value::String(self.rng.uuid()));
        let generate_name = meta::str_at(&obj, &["metadata", "generateName"]).unwrap_or_default().to_string();
        if meta::name(&obj).is_empty() && !generate_name.is_empty() {
            let name = format!("{}{}", truncate_for_suffix(&generate_name), self.rng.name_suffix(5));
            meta::set_meta(&mut obj, "name", Value::String(name));
        }

        self.res.strategy.finalize_create(&mut obj);
        let mut errs = validation::object_meta(&obj, info.namespaced, self.res.strategy.name_check());
        errs.extend(self.res.strategy.validate(&obj));
        for msg in validation::path_segment_name(meta::name(&obj)) {
            errs.push(crate::status::FieldError::invalid("metadata.name", Value::from(meta::name(&obj)), msg));
        }
        if errs.is_empty() {
            errs.extend(self.params_access(&obj, None)?);
        }
        if !errs.is_empty() {
            return Err(ApiError::invalid(&info.group_kind(), meta::name(&obj), &errs));
        }
        Ok(obj)
    }

    /// What of admission policies the write writes: a policy, or a binding of these policies
    /// (`None`: neither).
    fn policy_written(&self) -> Option<crate::admission::policies::access::Written<'_>> {
        use crate::admission::policies::access::Written;
        if self.res.info.group != "admissionregistration.k8s.io" || self.ctx.subresource.is_some() {
            return None;
        }
        match self.res.info.resource.as_str() {
            "validatingadmissionpolicies" | "mutatingadmissionpolicies" => Some(Written::Policy),
            "validatingadmissionpolicybindings" => Some(Written::Binding(&self.ctx.policies)),
            "mutatingadmissionpolicybindings" => Some(Written::Binding(&self.ctx.mutating_policies)),
            _ => None,
        }
    }

    /// Whether the write may stop for the authorization webhook before its validating
    /// admission: to check a policy's or binding's params, or for a mutating policy's
    /// `authorizer`.
    pub(super) fn may_ask_webhook_before_validation(&self) -> bool {
        let mutating_policies_ask = self.ctx.admission.mutating_policies && self.ctx.mutating_policies.uses.authorizer;
        self.ctx.access.as_ref().is_some_and(|a| a.authorizer.asks_webhooks()) && (self.policy_written().is_some() || mutating_policies_ask)
    }

    /// kube's check that the writer of an admission policy or binding may read its params
    /// (see [`crate::admission::policies::access`]), made when it is otherwise valid; `old`:
    /// what an update replaces. A decision the authorization webhook must make first stops the
    /// write to ask it (the error stands for the answer, and is never seen).
    pub(super) fn params_access(&mut self, obj: &Value, old: Option<&Value>) -> Result<Option<crate::status::FieldError>, ApiError> {
        let (Some(access), Some(catalog), Some(written)) = (self.ctx.access.as_ref(), self.ctx.catalog.as_ref(), self.policy_written()) else {
            return Ok(None);
        };
        match crate::admission::policies::access::check(written, catalog, access, &self.ctx.user, obj, old) {
            Ok(refusal) => Ok(refusal),
            Err(ask) => {
                self.blocked = Some(super::Blocked::Admit(vec![crate::admission::webhooks::dispatch::AdmissionCall::authorizer(ask)]));
                Err(ApiError::internal("waiting for the authorization webhook"))
            }
        }
    }

    /// The validating admission of the prepared new `obj` (only its webhooks when the
    /// plugins and policies have passed it), then the quota's charge for it.
    pub(super) fn admit_new(&mut self, obj: &mut Value) -> Result<(), ApiError> {
        let name = meta::name(obj).to_string();
        self.validating_admission(Operation::Create, &name, None, Some(obj))?;
        let a = super::admission_attributes(&self.res, &self.ctx, &self.found, Operation::Create, meta::name(obj), None);
        self.charges = self.ctx.admission.charge(&a, Some(obj), self.ctx.now)?;
        Ok(())
    }

    /// kube's checks against privilege escalation, for writes of RBAC objects (see
    /// [`crate::authz::escalation`]); `old`: what an update replaces.
    pub(super) fn check_escalation(&self, obj: &Value, old: Option<&Value>) -> Result<(), ApiError> {
        let Some(access) = &self.ctx.access else { return Ok(()) };
        let rbac = self.res.info.group == "rbac.authorization.k8s.io";
        let Some(kind) = Kind::ALL.into_iter().find(|k| rbac && k.resource() == self.res.info.resource) else { return Ok(()) };
        let namespace = if self.res.info.namespaced { self.ctx.namespace.as_deref().unwrap_or_default() } else { "" };
        let write = Write { kind, user: &self.ctx.user, namespace, url_name: self.ctx.name.as_deref().unwrap_or_default() };
        access.check_escalation(&write, obj, old)
    }

    /// `EnsureObjectNamespaceMatchesRequestNamespace`.
    pub(super) fn fix_namespace(&self, obj: &mut Value) -> Result<(), ApiError> {
        let request_ns = if self.res.info.namespaced { self.ctx.namespace.clone().unwrap_or_default() } else { String::new() };
        let obj_ns = meta::namespace(obj).to_string();
        if obj_ns == request_ns {
            return Ok(());
        }
        if obj_ns.is_empty() {
            meta::set_meta(obj, "namespace", Value::String(request_ns));
            Ok(())
        } else if request_ns.is_empty() {
            meta::remove_meta(obj, "namespace");
            Ok(())
        } else {
            Err(ApiError::bad_request("the namespace of the provided object does not match the namespace sent on the request"))
        }
    }
}

/// `names.SimpleNameGenerator`: the prefix is cut so that prefix + 5 characters fit in 63.
fn truncate_for_suffix(prefix: &str) -> &str {
    const MAX: usize = 63 - 5;
    if prefix.len() > MAX { &prefix[..MAX] } else { prefix }
}

/// The name admission's refusals give a new object: its name, else its `generateName`.
fn shown_name(obj: &Value) -> String {
    let name = meta::name(obj);
    if name.is_empty() { meta::str_at(obj, &["metadata", "generateName"]).unwrap_or_default().to_string() } else { name.to_string() }
}
