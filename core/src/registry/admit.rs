//! Admission of a write: the chain's plugins, the webhooks of the configurations served
//! (`admission::webhooks`) and the admission policies (`admission::policies`), mutating then
//! validating, as kube's chain runs them (the mutating policies, then the mutating webhooks,
//! last of the mutating plugins; the validating policies, then the validating webhooks,
//! before `ResourceQuota`'s charge).
//!
//! A webhook the write has no answer from yet stops it (see [`WriteOp::paused_at`]): the error
//! returned then is never seen; the write asks and runs again with the answer, from where it
//! began (a create waiting for a validating webhook: from its validating admission, the object
//! being final there).

use serde_json::Value;

use super::WriteOp;
use crate::admission::webhooks::dispatch::{Answers, Halt, Reinvocation, Webhooks};
use crate::admission::{Lookup, Operation, Pending};
use crate::catalog::Resource;
use crate::status::ApiError;

/// The webhooks of the configurations the write was served with, with its answers so far.
fn webhooks<'a>(ctx: &'a super::WriteContext, admitted: &'a Answers, salt: u64, res: &'a Resource) -> Webhooks<'a> {
    Webhooks { hooks: &ctx.webhooks, answers: admitted, salt, resource: res, equivalents: &ctx.equivalents }
}

impl super::WriteContext {
    /// What the webhooks and the policies the write is admitted by read first.
    pub fn configured_lookups(&self, pending: &Pending) -> Vec<Lookup> {
        let mut lookups = self.webhooks.lookups(pending);
        let policies = [(self.admission.validating_policies, &self.policies), (self.admission.mutating_policies, &self.mutating_policies)];
        for (_, p) in policies.iter().filter(|(on, _)| *on) {
            for l in p.lookups(pending) {
                if !lookups.contains(&l) {
                    lookups.push(l);
                }
            }
        }
        lookups
    }
}

/// The admission attributes of a write admitted as `res` (at the write's subresource when
/// `own`; see [`WriteOp::admitted_as`]).
fn attributes<'a>(
    (res, own): (&'a Resource, bool),
    ctx: &'a super::WriteContext,
    found: &'a crate::admission::Found,
    operation: Operation,
    name: &'a str,
    old: Option<&'a Value>,
) -> crate::admission::Attributes<'a> {
    let a = super::admission_attributes(res, ctx, found, operation, name, old);
    crate::admission::Attributes { subresource: a.subresource.filter(|_| own), ..a }
}

impl WriteOp {
    /// What the write is admitted as: its resource and subresource, or the resource an
    /// action is admitted as (see [`super::WriteKind::Action`]).
    fn admitted_as(&self) -> (std::sync::Arc<Resource>, bool) {
        match &self.kind {
            super::WriteKind::Action { admitted_as: Some(other), .. } => (other.clone(), false),
            _ => (self.res.clone(), true),
        }
    }

    /// The mutating or the validating admission of `body` as a create of the write's
    /// subresource, without a write (see [`super::WriteKind::Admit`]); stopped for a webhook,
    /// it starts again with the answer.
    pub(super) fn admit_only(&mut self, mut body: Value, mutating: bool) {
        let name = self.ctx.name.clone().unwrap_or_default();
        let admitted = match mutating {
            true => self.mutating_admission(Operation::Create, &name, None, Some(&mut body)),
            false => self.validating_admission(Operation::Create, &name, None, Some(&mut body)),
        };
        match admitted {
            Ok(()) => self.done = Some(Ok(super::WriteOutcome { code: 201, object: body, stored: None, deleted: false, warnings: Vec::new() })),
            Err(_) if self.paused_at(super::pause::Paused::Start) => {}
            Err(e) => self.done = Some(Err(e)),
        }
    }

    /// The mutating plugins, the mutating admission policies, then the mutating webhooks on
    /// `obj` (`None` for a delete); all once more when a policy or a webhook changed the object
    /// after one that asks to be called again (`reinvocationPolicy: IfNeeded`) was called, as
    /// kube's reinvoker runs them.
    pub(super) fn mutating_admission(&mut self, operation: Operation, name: &str, old: Option<&Value>, mut obj: Option<&mut Value>) -> Result<(), ApiError> {
        let mut reinvocation = Reinvocation::default();
        let mut policies_reinvocation = crate::admission::policies::mutate::Reinvocation::default();
        let mut last_output: Option<Value> = None;
        let policies = &self.ctx.mutating_policies;
        let policies_on = self.ctx.admission.mutating_policies && !(policies.synced() && policies.is_empty());
        let webhooks_on = self.ctx.admission.mutating_webhooks && !(self.ctx.webhooks.mutating_synced && self.ctx.webhooks.mutating.is_empty());
        let (res, own) = self.admitted_as();
        loop {
            let a = attributes((&res, own), &self.ctx, &self.found, operation, name, old);
            let admitted = self.ctx.admission.admit(&a, obj.as_deref_mut(), &mut self.rng);
            halted(&mut self.blocked, noted(&mut self.admission_annotations, &a, admitted))?;
            if policies_on && let Some(obj) = obj.as_deref_mut() {
                let second = reinvocation.second_round;
                let mutated = crate::admission::policies::mutate::mutate(policies, &res, &self.ctx.equivalents, &a, obj, &mut policies_reinvocation, second);
                halted(&mut self.blocked, noted(&mut self.admission_annotations, &a, mutated))?;
            }
            if webhooks_on {
                // A plugin or a policy that changed the object since the webhooks last saw it
                // calls them again.
                if last_output.is_some() && last_output.as_ref() != obj.as_deref() {
                    reinvocation.changed();
                }
                let webhooks = webhooks(&self.ctx, &self.admitted, self.salt, &res);
                let mutated = webhooks.mutate(&a, obj.as_deref_mut(), &mut reinvocation, &mut self.admission_warnings);
                halted(&mut self.blocked, noted(&mut self.admission_annotations, &a, mutated))?;
            }
            if !(reinvocation.needed || policies_reinvocation.needed) || reinvocation.second_round {
                return Ok(());
            }
            reinvocation.second_round = true;
            if webhooks_on {
                last_output = obj.as_deref().cloned();
            }
        }
    }

    /// The validating plugins, the validating admission policies, then the validating
    /// webhooks, on the final object (`None` for a delete). The plugins and policies pass an
    /// object once: a write that runs again over the same object (an update's or a delete's
    /// by its old object's resourceVersion, a create's from its validation on, a create by a
    /// transform by the object that entered validation), after a validating webhook answered
    /// or a quota moved, does not run them again, so each plugin counts the write once
    /// (EventRateLimit's token); the object goes on as they left it (annotated by
    /// ImagePolicyWebhook failing open). A plugin waiting for its own review (or the
    /// authorization webhook's answer) has passed nothing: the write goes on from it with the
    /// answer, the plugins before it passed. (A create by a transform that a moved quota runs
    /// again draws a new uid, and is validated again, as kube's retried update validates its
    /// create again.)
    pub(super) fn validating_admission(&mut self, operation: Operation, name: &str, old: Option<&Value>, mut obj: Option<&mut Value>) -> Result<(), ApiError> {
        let (res, own) = self.admitted_as();
        let a = attributes((&res, own), &self.ctx, &self.found, operation, name, old);
        let version = old.map_or("", crate::meta::resource_version);
        let earlier = self.validated.take().filter(|v| v.version == version);
        if let (Some(obj), Some(kept)) = (obj.as_deref_mut(), earlier.as_ref().and_then(|v| v.object.as_ref())) {
            obj.clone_from(kept);
        }
        match earlier {
            Some(passed) if passed.complete => self.validated = Some(passed),
            earlier => {
                let mut passed = earlier.map_or(0, |v| v.plugins);
                let checked = self.ctx.admission.validate(&a, obj.as_deref_mut(), &mut passed, &self.admitted, &mut self.admission_warnings);
                let mut checked = noted(&mut self.admission_annotations, &a, checked);
                if checked.is_ok() && self.ctx.admission.validating_policies {
                    let policies = &self.ctx.policies;
                    let before = self.admission_warnings.len();
                    checked =
                        crate::admission::policies::dispatch::validate(policies, &res, &self.ctx.equivalents, &a, obj.as_deref(), &mut self.admission_warnings);
                    // The policies run again with the authorization webhook's answer: what they
                    // warned of and annotated without it is not what they will.
                    let annotated = a.annotations.take();
                    match &checked {
                        Err(Halt::Ask(_)) => self.admission_warnings.truncate(before),
                        _ => self.admission_annotations.extend(annotated),
                    }
                }
                let keep = self.ctx.admission.validation_annotates(&res.info);
                let object = || if keep { obj.as_deref().cloned() } else { None };
                if let Err(Halt::Ask(_)) = &checked {
                    self.validated = Some(Validated { version: version.to_string(), object: object(), entered: None, plugins: passed, complete: false });
                }
                halted(&mut self.blocked, checked)?;
                self.validated = Some(Validated { version: version.to_string(), object: object(), entered: None, plugins: passed, complete: true });
            }
        }
        if !self.ctx.admission.validating_webhooks {
            return Ok(());
        }
        let webhooks = webhooks(&self.ctx, &self.admitted, self.salt, &res);
        let asked = webhooks.validate(&a, obj.as_deref(), &mut self.admission_warnings);
        if let (Err(Halt::Ask(_)), Some(passed)) = (&asked, self.validated.as_mut())
            && passed.object.is_none()
        {
            passed.object = obj.as_deref().cloned();
        }
        halted(&mut self.blocked, noted(&mut self.admission_annotations, &a, asked))
    }
}

/// What the validating plugins and policies passed: the object of the write at `version` (an
/// update's or a delete's old object's resourceVersion; empty for a create), kept as they
/// left it when they may have annotated it or the write waits for a validating webhook.
#[derive(Debug)]
pub(super) struct Validated {
    version: String,
    object: Option<Value>,
    /// For a create by a transform, the object as it entered validation.
    entered: Option<Value>,
    /// How many of the validating plugins passed it.
    plugins: usize,
    /// The plugins and the policies all passed it (not: a plugin waits for an answer).
    complete: bool,
}

impl Validated {
    /// Whether `obj` is the object that entered validation (known for a create by a
    /// transform only).
    pub(super) fn entered(&self, obj: &Value) -> bool {
        self.entered.as_ref() == Some(obj)
    }

    /// Notes `obj` as the object that entered validation.
    pub(super) fn entering(&mut self, obj: Value) {
        self.entered = Some(obj);
    }
}

/// `r`, once the annotations admission added on `a` are noted in `annotations`.
fn noted<T>(annotations: &mut Vec<(String, String)>, a: &crate::admission::Attributes, r: T) -> T {
    annotations.extend(a.annotations.take());
    r
}

/// Where admission stopped: a refusal, or the reviews to ask first (noted in `blocked`; the
/// error returned then stands for the answers until they come, and is never seen).
fn halted(blocked: &mut Option<super::Blocked>, r: Result<(), Halt>) -> Result<(), ApiError> {
    match r {
        Ok(()) => Ok(()),
        Err(Halt::Refused(e)) => Err(e),
        Err(Halt::Ask(calls)) => {
            *blocked = Some(super::Blocked::Admit(calls));
            Err(ApiError::internal("waiting for admission webhooks"))
        }
    }
}
