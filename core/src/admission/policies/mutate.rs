//! kube's dispatcher of the mutating admission policies on a write (after the mutating
//! plugins, before the mutating webhooks; creates and updates only: kapi admits no connects): each policy
//! whose `matchConstraints` cover the write, with each of its bindings whose
//! `matchResources` do too, once per parameter the binding finds (an *invocation*); its match
//! conditions, then its mutations in order, each on the object as the one before left it
//! (decoded and defaulted after each). An invocation that changed the object makes every
//! `reinvocationPolicy: IfNeeded` one before it run again in the chain's second round.
//!
//! Errors of policies that fail closed refuse the write at the end, as kube's: 403, the
//! first error's message and reason (`Invalid` for a mutation's and a condition's), a cause
//! per error: `policy '<p>' with binding '<b>' denied request: <why>`.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use super::dispatch::{Seen, exempt, namespace_object, params_of};
use super::evaluate;
use super::patch::{self, Failure};
use super::{FailurePolicy, Hook, Policies, Policy};
use crate::admission::cel_authorizer::CelAuthorizer;
use crate::admission::matching::{Invocation, matches, namespace_of, versioned};
use crate::admission::webhooks::dispatch::{Halt, patch_into};
use crate::admission::webhooks::review;
use crate::admission::{Attributes, Operation};
use crate::catalog::Resource;
use crate::meta;
use crate::status::{ApiError, StatusCause};

/// An invocation: the policy, the binding and the parameter (`namespace/name`, empty without).
type Key = (String, String, String);

/// What the policies' reinvocation keeps between the chain's two rounds.
#[derive(Debug, Default)]
pub struct Reinvocation {
    /// The `IfNeeded` invocations made so far.
    previously: BTreeSet<Key>,
    /// Those to make again in the second round.
    again: BTreeSet<Key>,
    /// The object as the policies last left it.
    last_output: Option<Value>,
    /// A policy mutated the object: the chain runs a second round.
    pub needed: bool,
}

impl Reinvocation {
    /// Something changed the object: every `IfNeeded` invocation made before is made again.
    fn changed(&mut self) {
        self.again.append(&mut self.previously);
        self.needed = true;
    }
}

/// A policy's error, and whether it refuses the write as `Forbidden` (a policy or binding
/// that cannot be applied) or `Invalid` (a condition or mutation that failed).
struct PolicyError {
    message: String,
    reason: &'static str,
}

/// The policy errors of a write so far (only of policies that fail closed).
#[derive(Default)]
struct Errors(Vec<PolicyError>);

impl Errors {
    fn add(&mut self, policy: &Policy, binding: Option<&str>, why: &str, reason: &'static str) {
        let message = match &policy.failure_policy {
            FailurePolicy::Ignore => return,
            FailurePolicy::Fail => why.to_string(),
            FailurePolicy::Unknown(p) => format!("unrecognized failure policy: '{p}'"),
        };
        let message = match binding {
            Some(b) => format!("policy '{}' with binding '{b}' denied request: {message}", policy.name),
            None => format!("policy {:?} denied request: {message}", policy.name),
        };
        self.0.push(PolicyError { message, reason });
    }

    /// kube's refusal: the first error's message and reason, a cause per error.
    fn refusal(self, a: &Attributes, obj: &Value) -> Result<(), ApiError> {
        let Some(first) = self.0.first() else { return Ok(()) };
        let generated = meta::str_at(obj, &["metadata", "generateName"]).unwrap_or_default();
        let name = [review::request_name(a, Some(obj)), generated].into_iter().find(|n| !n.is_empty()).unwrap_or("Unknown");
        let mut e = ApiError::forbidden(&a.info.group_resource(), name, "");
        e.message = first.message.clone();
        e.reason = first.reason;
        if let Some(details) = e.details.as_mut() {
            details.causes = self.0.into_iter().map(|p| StatusCause { message: p.message, ..StatusCause::default() }).collect();
        }
        Err(e)
    }
}

/// The mutating admission policies on `obj`, in the chain's first round or (`second_round`)
/// its second, where only the invocations `reinvocation` marked are made again.
pub fn mutate(
    policies: &Policies,
    resource: &Resource,
    equivalents: &[Arc<Resource>],
    a: &Attributes,
    obj: &mut Value,
    reinvocation: &mut Reinvocation,
    second_round: bool,
) -> Result<(), Halt> {
    if exempt(a) || !matches!(a.operation, Operation::Create | Operation::Update) {
        return Ok(());
    }
    if !policies.synced() {
        return Err(a.forbidden("not yet ready to handle request").into());
    }
    let mut errors = Errors::default();
    let planned = plan(policies, equivalents, a, obj, &mut errors);
    if planned.is_empty() {
        return Ok(errors.refusal(a, obj)?);
    }
    let authorizer = policies.uses.authorizer.then(|| CelAuthorizer::of(a, Some(obj)));
    let namespace = namespace_object(a, Some(obj), policies.uses.namespace)?;
    if second_round && reinvocation.last_output.as_ref() != Some(obj) {
        reinvocation.changed();
    }
    let mut run = Run {
        resource,
        a,
        authorizer: authorizer.as_ref(),
        namespace: &namespace,
        errors: &mut errors,
        reinvocation: &mut *reinvocation,
        second_round,
        dirty: false,
    };
    for invocation in &planned {
        run.invoke(invocation, obj)?;
    }
    if run.dirty {
        reinvocation.changed();
    }
    reinvocation.last_output = Some(obj.clone());
    Ok(errors.refusal(a, obj)?)
}

/// An invocation to make: a policy with one of its bindings and one parameter, and how the
/// write matched the policy.
struct Planned<'h, 'r> {
    policy: &'h Policy,
    binding: &'h str,
    param: Option<Value>,
    matched: Invocation<'r>,
    key: Key,
}

/// The invocations of the policies that cover the write as it came to them (kube settles
/// them all before any mutation runs, so a mutation does not change which others run); the
/// policies and bindings that cannot be applied go to `errors`.
fn plan<'h, 'r>(policies: &'h Policies, equivalents: &'r [Arc<Resource>], a: &Attributes, obj: &Value, errors: &mut Errors) -> Vec<Planned<'h, 'r>> {
    let mut planned = Vec::new();
    for hook in &policies.hooks {
        let policy = &hook.policy;
        let Some(constraints) = &policy.matching else {
            errors.add(policy, None, "failed to configure policy: policy contained no match constraints, a required field", "Forbidden");
            continue;
        };
        let matched = match matches(constraints, a, Some(obj), equivalents) {
            Ok(None) => continue,
            Ok(Some(i)) => i,
            Err(e) => {
                errors.add(policy, None, &format!("failed to configure policy: {}", e.message), "Forbidden");
                continue;
            }
        };
        plan_hook(hook, matched, equivalents, a, obj, errors, &mut planned);
    }
    planned
}

/// The invocations of `hook`'s policy: each of its bindings that covers the write, once per
/// parameter.
fn plan_hook<'h, 'r>(
    hook: &'h Hook,
    matched: Invocation<'r>,
    equivalents: &[Arc<Resource>],
    a: &Attributes,
    obj: &Value,
    errors: &mut Errors,
    planned: &mut Vec<Planned<'h, 'r>>,
) {
    let policy = &hook.policy;
    let at = match &hook.params {
        Ok(at) => at.as_ref(),
        Err(why) => {
            errors.add(policy, None, &format!("failed to configure policy: {why}"), "Forbidden");
            return;
        }
    };
    for binding in &hook.bindings {
        if let Some(m) = &binding.matching {
            match matches(m, a, Some(obj), equivalents) {
                Ok(None) => continue,
                Ok(Some(_)) => {}
                Err(e) => {
                    errors.add(policy, Some(&binding.name), &format!("failed to configure binding: {}", e.message), "Forbidden");
                    continue;
                }
            }
        }
        let params = match at.map(|at| params_of(at, binding, a, namespace_of(a, Some(obj)))) {
            None | Some(Ok(None)) => vec![None],
            Some(Ok(Some(list))) => list.into_iter().map(Some).collect(),
            Some(Err(why)) => {
                errors.add(policy, Some(&binding.name), &format!("failed to configure binding: {why}"), "Forbidden");
                continue;
            }
        };
        for param in params {
            let id = param.as_ref().map(|p| format!("{}/{}", meta::namespace(p), meta::name(p))).unwrap_or_default();
            let key = (policy.name.clone(), binding.name.clone(), id);
            planned.push(Planned { policy, binding: &binding.name, param, matched, key });
        }
    }
}

/// One write's dispatch of the policies, and what it found so far.
struct Run<'x, 'r> {
    resource: &'x Resource,
    a: &'x Attributes<'x>,
    authorizer: Option<&'x CelAuthorizer>,
    namespace: &'x Value,
    errors: &'r mut Errors,
    reinvocation: &'r mut Reinvocation,
    second_round: bool,
    /// A mutation was applied (even one that changed nothing, as kube counts it).
    dirty: bool,
}

impl Run<'_, '_> {
    /// The review an `authorizer` check needs the authorization webhook's answer to first.
    fn asked(&self) -> Result<(), Halt> {
        self.authorizer.and_then(CelAuthorizer::wanted).map_or(Ok(()), Err)
    }

    /// One invocation: its conditions, then its mutations in order.
    fn invoke(&mut self, planned: &Planned<'_, '_>, obj: &mut Value) -> Result<(), Halt> {
        let Planned { policy, binding, param, matched: invocation, key } = planned;
        let (policy, binding, invocation) = (*policy, *binding, *invocation);
        let params = param.as_ref().map(crate::cel::to_value);
        let seen = Seen::of(self.resource, invocation, self.a, Some(obj), policy.uses, self.authorizer);
        // Match conditions do not see the namespace.
        let held = evaluate::conditions(policy, &seen.inputs(&Value::Null, policy.uses), params.as_ref());
        self.asked()?;
        match held {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(why) => {
                self.errors.add(policy, Some(binding), &why, "Invalid");
                return Ok(());
            }
        }
        if self.second_round && !self.reinvocation.again.contains(key) {
            return Ok(());
        }
        let resource = match invocation {
            Invocation::Exact => self.resource,
            Invocation::Equivalent(e) => e,
        };
        let kind = patch::Kind { resource, own: crate::admission::webhooks::dispatch::own_definition(resource, self.a.subresource) };
        let before = obj.clone();
        for m in &policy.mutations {
            let patched = {
                let (_, live, _) = versioned(self.resource, invocation, self.a, Some(obj));
                let live = live.as_deref().unwrap_or(&Value::Null);
                let seen = Seen::of(self.resource, invocation, self.a, Some(obj), policy.uses, self.authorizer);
                let mutated = evaluate::mutation(policy, &seen.inputs(self.namespace, policy.uses), params.as_ref(), &m.expression);
                self.asked()?;
                match mutated {
                    Err(why) => Err(Failure::Error(why)),
                    Ok(result) if m.json_patch => patch::json_patch(kind, live, &result).map(|p| p.unwrap_or_else(|| live.clone())),
                    Ok(result) => patch::apply_configuration(kind, live, &result),
                }
            };
            let new = match patched {
                Ok(new) => new,
                Err(Failure::Status(e)) => return Err(e.into()),
                Err(Failure::Error(why)) => {
                    self.errors.add(policy, Some(binding), &why, "Invalid");
                    continue;
                }
            };
            patch_into(self.resource, invocation, self.a, new, obj)?;
            self.dirty = true;
        }
        if *obj != before {
            self.reinvocation.changed();
        }
        if policy.reinvoke {
            self.reinvocation.previously.insert(key.clone());
        }
        Ok(())
    }
}
