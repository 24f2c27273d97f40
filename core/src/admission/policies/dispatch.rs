//! kube's dispatcher of the validating admission policies on a write (after every mutation,
//! before the validating webhooks): each policy whose `matchConstraints` cover the write, with
//! each of its bindings whose `matchResources` do too, once per parameter the binding's
//! `paramRef` finds; a failed validation denies, warns or is left to the audit log as the
//! binding's `validationActions` say. Every policy is evaluated (a warning of a later one
//! still reaches the client); the first denial, in the order of the policies' names and then
//! of their bindings', is the answer.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::sync::Arc;

use serde_json::Value;

use super::evaluate::{Decision, Inputs, evaluate};
use super::{Binding, FailurePolicy, Hook, ParamResource, Policies, Policy, Uses};
use crate::admission::cel_authorizer::CelAuthorizer;
use crate::admission::matching::{Invocation, matches, namespace_of, versioned};
use crate::admission::webhooks::dispatch::Halt;
use crate::admission::webhooks::review;
use crate::admission::{Attributes, Lookup};
use crate::catalog::Resource;
use crate::meta;
use crate::status::{ApiError, StatusCause};

/// What kube's policies never see: the policies and bindings themselves (so a broken one can
/// be taken away), and the reviews nothing stores.
pub(super) fn exempt(a: &Attributes) -> bool {
    let resource = a.info.resource.as_str();
    match a.info.group.as_str() {
        "admissionregistration.k8s.io" => {
            ["validatingadmissionpolicies", "validatingadmissionpolicybindings", "mutatingadmissionpolicies", "mutatingadmissionpolicybindings"]
                .contains(&resource)
        }
        "authentication.k8s.io" => ["tokenreviews", "selfsubjectreviews"].contains(&resource),
        "authorization.k8s.io" => {
            ["localsubjectaccessreviews", "selfsubjectaccessreviews", "selfsubjectrulesreviews", "subjectaccessreviews"].contains(&resource)
        }
        _ => false,
    }
}

/// The HTTP status of a refusal with `reason` (kube's `reasonToCode`).
fn code_of(reason: &str) -> u16 {
    match reason {
        "Forbidden" => 403,
        "Unauthorized" => 401,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    }
}

/// kube's refusal of a write by `policy` (and `binding`, unless the policy itself could not be
/// applied): `<resource> "<name>" is forbidden: ValidatingAdmissionPolicy '<p>' [with binding
/// '<b>'] denied request: <message>`, with the decision's reason and its code.
fn refusal(a: &Attributes, obj: Option<&Value>, policy: &str, binding: Option<&str>, d: &Decision) -> ApiError {
    let message = match binding {
        Some(b) => format!("ValidatingAdmissionPolicy '{policy}' with binding '{b}' denied request: {}", d.message),
        None => format!("ValidatingAdmissionPolicy '{policy}' denied request: {}", d.message),
    };
    let generated = obj.and_then(|o| meta::str_at(o, &["metadata", "generateName"])).unwrap_or_default();
    let name = [review::request_name(a, obj), generated].into_iter().find(|n| !n.is_empty()).unwrap_or("Unknown");
    let mut e = ApiError::forbidden(&a.info.group_resource(), name, &message);
    e.reason = d.reason.unwrap_or("Invalid");
    e.code = code_of(e.reason);
    if let Some(details) = e.details.as_mut() {
        details.causes.push(StatusCause { message, ..StatusCause::default() });
    }
    e
}

/// The parameters `binding` gives its policy's evaluations (`None`: it names none, the policy
/// is evaluated once without); an empty list skips it. The error is why it cannot be applied.
pub(super) fn params_of(at: &ParamResource, binding: &Binding, a: &Attributes, request_namespace: &str) -> Result<Option<Vec<Value>>, String> {
    let Some(r) = &binding.param_ref else { return Ok(None) };
    let namespace = match (at.namespaced, &r.namespace) {
        (true, Some(ns)) => Some(ns.clone()),
        (true, None) if !request_namespace.is_empty() => Some(request_namespace.to_string()),
        (true, None) => return Err("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".into()),
        (false, Some(_)) => return Err("paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into()),
        (false, None) => None,
    };
    let resource = (at.group.clone(), at.version.clone(), at.resource.clone());
    let found = |name: Option<String>| {
        let lookup = Lookup::Params { resource: resource.clone(), namespace: namespace.clone(), name };
        a.found.params.iter().find(|(l, _)| *l == lookup).and_then(|(_, o)| o.as_deref().cloned())
    };
    let params: Vec<Value> = match (&r.name, &r.selector) {
        (Some(_), Some(_)) => return Err("paramRef.name and paramRef.selector are mutually exclusive".into()),
        (None, None) => return Err("one of name or selector must be provided".into()),
        (Some(name), None) => found(Some(name.clone())).into_iter().collect(),
        (None, Some(selector)) => {
            let selector = selector.as_ref().map_err(String::clone)?;
            let all = match found(None) {
                Some(Value::Array(items)) => items,
                _ => Vec::new(),
            };
            all.into_iter().filter(|o| selector.matches(&meta::labels(o))).collect()
        }
    };
    if params.is_empty() && r.deny_when_missing {
        return Err("no params found for policy binding with `Deny` parameterNotFoundAction".into());
    }
    Ok(Some(params))
}

/// The namespace a write is in as `namespaceObject` (`null` for a cluster-scoped write or a
/// namespace's own), without its managed fields and owners; 404 when it does not exist.
/// `null` too when no expression reads it (`read`), once it is known to exist.
pub(super) fn namespace_object(a: &Attributes, obj: Option<&Value>, read: bool) -> Result<Value, ApiError> {
    let namespace = namespace_of(a, obj);
    if namespace.is_empty() || (a.info.group.is_empty() && a.info.resource == "namespaces") {
        return Ok(Value::Null);
    }
    match &a.found.namespace {
        Some((ns, Some(_))) if ns == namespace && !read => Ok(Value::Null),
        Some((ns, Some(found))) if ns == namespace => {
            let mut found = Value::clone(found);
            if let Some(Value::Object(m)) = found.get_mut("metadata") {
                m.remove("managedFields");
                m.remove("ownerReferences");
            }
            Ok(found)
        }
        // kube's policy matcher reads its lister, whose error names the resource `namespace`.
        _ => Err(ApiError::not_found(&crate::status::GroupResource::new("", "namespace"), namespace)),
    }
}

/// The validating admission policies on the final object (`None` for a delete); their
/// warnings go to `warnings`. An `authorizer` check the authorization webhook must answer
/// first stops them ([`Halt::Ask`]).
pub fn validate(
    policies: &Policies,
    resource: &Resource,
    equivalents: &[Arc<Resource>],
    a: &Attributes,
    obj: Option<&Value>,
    warnings: &mut Vec<String>,
) -> Result<(), Halt> {
    if exempt(a) {
        return Ok(());
    }
    if !policies.synced() {
        return Err(Halt::Refused(a.forbidden("not yet ready to handle request")));
    }
    let mut denied: Option<ApiError> = None;
    let mut failures: Vec<ValidationFailure> = Vec::new();
    let mut deny = |e: ApiError| {
        denied.get_or_insert(e);
    };
    let authorizer = policies.uses.authorizer.then(|| CelAuthorizer::of(a, obj));
    let (namespace, seen_exact, exact) = (OnceCell::new(), OnceCell::new(), OnceCell::new());
    for hook in &policies.hooks {
        let policy = &hook.policy;
        let Some(constraints) = &policy.matching else {
            misconfigured(policy, a, obj, None, "policy contained no match constraints, a required field".into()).map(&mut deny);
            continue;
        };
        let invocation = match matches(constraints, a, obj, equivalents) {
            Ok(None) => continue,
            Ok(Some(i)) => i,
            Err(e) => {
                misconfigured(policy, a, obj, None, e.message).map(&mut deny);
                continue;
            }
        };
        let at = match &hook.params {
            Ok(at) => at.as_ref(),
            Err(why) => {
                misconfigured(policy, a, obj, None, why.clone()).map(&mut deny);
                continue;
            }
        };
        let mut write = Write { a, obj, equivalents, deny: &mut deny, warnings, failures: &mut failures };
        // What every policy that sees the write as it is sent shares.
        let namespace = namespace.get_or_init(|| namespace_object(a, obj, policies.uses.namespace)).as_ref().map_err(|e| Halt::Refused(e.clone()))?;
        match invocation {
            Invocation::Exact => {
                let seen = seen_exact.get_or_init(|| Seen::of(resource, invocation, a, obj, policies.uses, authorizer.as_ref()));
                write.hook(hook, at, exact.get_or_init(|| seen.inputs(namespace, policies.uses)));
            }
            Invocation::Equivalent(_) => {
                let seen = Seen::of(resource, invocation, a, obj, policies.uses, authorizer.as_ref());
                write.hook(hook, at, &seen.inputs(namespace, policies.uses));
            }
        }
    }
    if let Some(ask) = authorizer.as_ref().and_then(CelAuthorizer::wanted) {
        return Err(ask);
    }
    // kube v1.33 annotates each failure as a list of one, and keeps the first annotation.
    if let Some(first) = failures.into_iter().next() {
        let value = serde_json::to_string(&[first]).expect("failures serialize");
        a.annotate("validation.policy.admission.k8s.io/validation_failure".into(), value);
    }
    denied.map_or(Ok(()), |e| Err(Halt::Refused(e)))
}

/// A policy that cannot be applied (`binding`: `None` for the policy itself): denied if it
/// fails closed, whatever the bindings say.
fn misconfigured(policy: &Policy, a: &Attributes, obj: Option<&Value>, binding: Option<&str>, why: String) -> Option<ApiError> {
    let what = if binding.is_some() { "binding" } else { "policy" };
    let message = match &policy.failure_policy {
        FailurePolicy::Fail => format!("failed to configure {what}: {why}"),
        FailurePolicy::Ignore => return None,
        FailurePolicy::Unknown(p) => format!("unrecognized failure policy: '{p}'"),
    };
    Some(refusal(a, obj, &policy.name, binding, &Decision { message, reason: None, index: 0 }))
}

/// The write the policies are dispatched on, and where their answers go.
struct Write<'x, 'd> {
    a: &'x Attributes<'x>,
    obj: Option<&'x Value>,
    equivalents: &'x [Arc<Resource>],
    deny: &'d mut dyn FnMut(ApiError),
    warnings: &'d mut Vec<String>,
    /// The failures the bindings' `Audit` action keeps.
    failures: &'d mut Vec<ValidationFailure>,
}

/// One failure an `Audit` binding keeps (kube's `ValidationFailureValue`).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ValidationFailure {
    message: String,
    policy: String,
    binding: String,
    expression_index: usize,
    validation_actions: Vec<String>,
}

impl Write<'_, '_> {
    /// The policy of `hook` with each of its bindings that covers the write, once per
    /// parameter (`at`: the resource of the policy's `paramKind`).
    fn hook(&mut self, hook: &Hook, at: Option<&ParamResource>, inputs: &Inputs<'_>) {
        let (a, obj, policy) = (self.a, self.obj, &hook.policy);
        // kube's collector: each key's distinct values, over the bindings and parameters.
        let mut annotations: Vec<(String, Vec<String>)> = Vec::new();
        for binding in &hook.bindings {
            if let Some(m) = &binding.matching {
                match matches(m, a, obj, self.equivalents) {
                    Ok(None) => continue,
                    Ok(Some(_)) => {}
                    Err(e) => {
                        misconfigured(policy, a, obj, Some(&binding.name), e.message).map(&mut *self.deny);
                        continue;
                    }
                }
            }
            let params = match at {
                None => None,
                Some(at) => match params_of(at, binding, a, namespace_of(a, obj)) {
                    Ok(p) => p,
                    Err(why) => {
                        misconfigured(policy, a, obj, Some(&binding.name), why).map(&mut *self.deny);
                        continue;
                    }
                },
            };
            let params: Vec<Option<crate::cel::Value>> = match params {
                None => vec![None],
                Some(list) => list.iter().map(|p| Some(crate::cel::to_value(p))).collect(),
            };
            for param in &params {
                let evaluated = evaluate(policy, inputs, param.as_ref());
                for d in &evaluated.denials {
                    if binding.actions.deny {
                        (self.deny)(refusal(a, obj, &policy.name, Some(&binding.name), d));
                    }
                    if binding.actions.warn {
                        let warning =
                            format!("Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}", policy.name, binding.name, d.message);
                        if !self.warnings.contains(&warning) {
                            self.warnings.push(warning);
                        }
                    }
                }
                for message in evaluated.audit_errors {
                    (self.deny)(refusal(a, obj, &policy.name, Some(&binding.name), &Decision { message, reason: None, index: 0 }));
                }
                for d in evaluated.denials.iter().filter(|_| binding.actions.audit) {
                    let actions = binding.validation_actions.clone();
                    self.failures.push(ValidationFailure {
                        message: d.message.clone(),
                        policy: policy.name.clone(),
                        binding: binding.name.clone(),
                        expression_index: d.index,
                        validation_actions: actions,
                    });
                }
                for (key, value) in evaluated.audit_annotations {
                    match annotations.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, values)) if values.contains(&value) => {}
                        Some((_, values)) => values.push(value),
                        None => annotations.push((key, vec![value])),
                    }
                }
            }
        }
        for (key, values) in annotations {
            a.annotate(format!("{}/{key}", policy.name), values.join(", "));
        }
    }
}

/// What a policy's expressions read of the write as `invocation` sees it (what none of them
/// reads, `uses` says, as `null`), and the `authorizer` if one reads it.
pub(super) struct Seen<'o> {
    object: Option<Cow<'o, Value>>,
    old_object: Option<Cow<'o, Value>>,
    request: Option<Value>,
    authorizer: Option<&'o CelAuthorizer>,
}

impl<'o> Seen<'o> {
    pub(super) fn of<'x: 'o>(
        resource: &Resource,
        invocation: Invocation<'x>,
        a: &Attributes<'x>,
        obj: Option<&'o Value>,
        uses: Uses,
        authorizer: Option<&'o CelAuthorizer>,
    ) -> Seen<'o> {
        let (invoked, object, old_object) = versioned(resource, invocation, a, obj);
        let request = uses.request.then(|| review::request(a, invoked, object.as_deref()));
        Seen { object: object.filter(|_| uses.object), old_object: old_object.filter(|_| uses.old_object), request, authorizer }
    }

    /// The inputs of the expressions, with `namespace` as `namespaceObject`.
    pub(super) fn inputs<'w>(&'w self, namespace: &'w Value, uses: Uses) -> Inputs<'w> {
        let mut inputs = Inputs::new([
            ("object", self.object.as_deref()),
            ("oldObject", self.old_object.as_deref()),
            ("request", self.request.as_ref()),
            ("namespaceObject", Some(namespace).filter(|_| uses.namespace)),
        ]);
        if let Some(authorizer) = self.authorizer.filter(|_| uses.authorizer) {
            inputs.bind(authorizer.variables());
        }
        inputs
    }
}
