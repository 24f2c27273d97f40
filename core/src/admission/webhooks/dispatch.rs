//! kube's webhook dispatchers over the answers a write has so far: the mutating webhooks one
//! after another, each seeing the object as the ones before patched it (and those with
//! `reinvocationPolicy: IfNeeded` once more when a later one changed it); the validating ones
//! all asked at once, the first refusal in their order answered.
//!
//! Where an answer is missing the dispatch stops with the calls to make ([`Halt::Ask`]): the
//! next mutating webhook's, or every validating webhook's still unanswered. Run again with
//! the answers, it asks the same reviews (their uids drawn from what they ask) and goes on.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bytes::Bytes;
use jiff::SignedDuration;
use serde_json::Value;

use super::review::{self, Response};
use super::{Hook, Hooks};
use crate::admission::Attributes;
use crate::admission::cel_authorizer::CelAuthorizer;
use crate::admission::matching::{Invocation, convert, matches, versioned};
use crate::aggregator::ServiceRef;
use crate::catalog::Resource;
use crate::cel::cost::{self, Shape};
use crate::status::{ApiError, quote};
use crate::webhook::kubeconfig::Endpoint;
use crate::webhook::{WebhookAnswer, WebhookCall};

/// The answers a write has had, by review uid (a call that failed: why, in Go's words).
pub type Answers = BTreeMap<String, Result<WebhookAnswer, String>>;

/// A review a write asks before admission goes on: an admission webhook's, or a plugin's
/// (ImagePolicyWebhook's), whose answer the write keeps by `uid`.
#[derive(Clone, Debug)]
pub struct AdmissionCall {
    pub callee: Callee,
    pub uid: String,
    pub body: Bytes,
    /// The first wait of kube's retries of a call its generic webhook client makes
    /// ([`crate::webhook::retry`]: ImagePolicyWebhook's `retryBackoff`, the authorization
    /// webhook's 500 ms); `None`: tried once, as kube's admission webhooks are.
    pub retry: Option<jiff::SignedDuration>,
}

/// Who a review goes to.
#[derive(Clone, Debug)]
pub enum Callee {
    /// A webhook of a configuration.
    Hook(Arc<Hook>),
    /// The webhook a plugin's kubeconfig names, asked within kube's 30 s.
    Endpoint(Arc<Endpoint>),
    /// The authorization webhook, asked a review a plugin's question to the authorizer needs.
    Authorizer(Arc<crate::authz::Ask>),
}

impl AdmissionCall {
    /// The call that asks the authorization webhook `ask`, tried again as kube tries it.
    pub fn authorizer(ask: crate::authz::Ask) -> AdmissionCall {
        let retry = Some(crate::webhook::retry::AUTH_WEBHOOK_FIRST_WAIT);
        AdmissionCall { uid: ask.uid(), body: ask.body(), callee: Callee::Authorizer(Arc::new(ask)), retry }
    }

    /// The Service the webhook names, which the call is resolved with.
    pub fn service(&self) -> Option<&ServiceRef> {
        match &self.callee {
            Callee::Hook(hook) => hook.client.service(),
            Callee::Endpoint(_) | Callee::Authorizer(_) => None,
        }
    }

    /// The HTTPS POST of the review (`service`: the Service object [`Self::service`] names,
    /// if any): a configuration's webhook at its path with kube's `?timeout=`, within its
    /// timeout; a kubeconfig's at its server's path, with its credentials.
    pub fn call(&self, service: Option<&Value>) -> Result<WebhookCall, String> {
        let hook = match &self.callee {
            Callee::Hook(hook) => hook,
            Callee::Endpoint(endpoint) => {
                return Ok(WebhookCall {
                    method: http::Method::POST,
                    target: endpoint.target.clone(),
                    path: endpoint.path.clone(),
                    body: self.body.clone(),
                    timeout: crate::webhook::TIMEOUT,
                    credentials: endpoint.credentials.clone(),
                });
            }
            Callee::Authorizer(ask) => return Ok(ask.call()),
        };
        let (target, path) = hook.client.resolve(service)?;
        let seconds = hook.timeout_seconds;
        let separator = if path.contains('?') { '&' } else { '?' };
        Ok(WebhookCall {
            method: http::Method::POST,
            target,
            path: format!("{path}{separator}timeout={seconds}s"),
            body: self.body.clone(),
            timeout: SignedDuration::from_secs(seconds),
            credentials: None,
        })
    }
}

/// Why admission by webhooks stopped.
#[derive(Debug)]
pub enum Halt {
    /// The write is refused.
    Refused(ApiError),
    /// These webhooks are to be asked first.
    Ask(Vec<AdmissionCall>),
}

impl From<ApiError> for Halt {
    fn from(e: ApiError) -> Halt {
        Halt::Refused(e)
    }
}

/// kube's reinvocation context of one write: the `IfNeeded` webhooks called since the last
/// change, and those to call again in the second round.
#[derive(Clone, Debug, Default)]
pub struct Reinvocation {
    previously: BTreeSet<String>,
    again: BTreeSet<String>,
    /// A webhook changed the object after an `IfNeeded` one was called: the mutating
    /// plugins run a second round.
    pub needed: bool,
    /// The second round is running.
    pub second_round: bool,
}

impl Reinvocation {
    /// Something changed the object: every `IfNeeded` webhook called before is called again.
    pub fn changed(&mut self) {
        self.again.append(&mut self.previously);
        self.needed = true;
    }
}

/// The webhook configurations a write is admitted by, with what they answered so far.
pub struct Webhooks<'a> {
    pub hooks: &'a Hooks,
    pub answers: &'a Answers,
    /// Drawn once per write: the reviews' uids differ between writes asking the same.
    pub salt: u64,
    /// The resource written.
    pub resource: &'a Resource,
    /// The other versions stored alike, which webhooks of `matchPolicy: Equivalent` may name.
    pub equivalents: &'a [Arc<Resource>],
}

/// The configurations themselves are never admitted by webhooks (kube's exemption, so that a
/// broken webhook can be taken away).
fn exempt(a: &Attributes) -> bool {
    const EXEMPT: [&str; 6] = [
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
        "validatingadmissionpolicies",
        "validatingadmissionpolicybindings",
        "mutatingadmissionpolicies",
        "mutatingadmissionpolicybindings",
    ];
    a.info.group == "admissionregistration.k8s.io" && EXEMPT.contains(&a.info.resource.as_str())
}

/// The phase of a validating webhook's review (see [`Webhooks::ask`]).
const VALIDATING: &str = "validating";

/// kube's refusal of a write before the configurations have been read.
fn not_ready(a: &Attributes) -> ApiError {
    a.forbidden("not yet ready to handle request")
}

/// What asking one webhook came to.
enum Asked {
    /// Its checked answer.
    Answered(Response),
    /// The call failed, for the failure policy.
    Failed(String),
    /// Not asked yet.
    Pending(AdmissionCall),
}

/// Puts what a webhook or a mutating policy patched (`new`, the object as `invocation` saw it)
/// in `target`, the object written: decoded as its kind and defaulted, converted back from
/// the version the webhook was asked about; for the scale subresource, the patched Scale's
/// replicas.
/// The schema's definition of the kind `subresource` of `resource` reads and writes, when it
/// is not the resource's own (a Scale, a Binding, an Eviction, a TokenRequest).
pub(crate) fn own_definition(resource: &Resource, subresource: Option<&str>) -> Option<&'static str> {
    let sub = subresource.and_then(|s| resource.info.subresource(s)).filter(|s| s.kind != resource.info.kind)?;
    crate::schema::schema().for_gvk(&sub.group, &sub.version, &sub.kind).map(|d| d.name.as_str())
}

pub(crate) fn patch_into(resource: &Resource, invocation: Invocation, a: &Attributes, mut new: Value, target: &mut Value) -> Result<(), ApiError> {
    if a.subresource == Some("scale") {
        crate::schema::normalize::normalize(crate::schema::schema(), "io.k8s.api.autoscaling.v1.Scale", &mut new).map_err(ApiError::internal)?;
        let replicas = new.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(0);
        return resource.strategy.set_scale_replicas(target, replicas);
    }
    // A subresource of a kind of its own (a Binding): its object as kube decodes that kind.
    if let Some(definition) = own_definition(resource, a.subresource) {
        crate::schema::normalize::normalize(crate::schema::schema(), definition, &mut new).map_err(ApiError::internal)?;
        *target = new;
        return Ok(());
    }
    let kind = match invocation {
        Invocation::Exact => resource,
        Invocation::Equivalent(e) => e,
    };
    decode(kind, &mut new)?;
    if let Invocation::Equivalent(from) = invocation {
        new = convert(from, resource, &new);
    }
    *target = new;
    Ok(())
}

impl Webhooks<'_> {
    /// The review of `hook` for the write, answered if it was: refused before any call on a
    /// dry run the webhook may not see.
    /// `phase` tells the reviews of one webhook apart: mutating (and in which round) or
    /// validating, each a call of its own.
    fn ask(&self, hook: &Arc<Hook>, phase: &str, a: &Attributes, (obj, old): (Option<&Value>, Option<&Value>), request: &Value) -> Result<Asked, ApiError> {
        if a.dry_run {
            match hook.side_effects.as_deref() {
                None => return Ok(Asked::Failed(format!("failed calling webhook {}: Webhook SideEffects is nil", quote(&hook.name)))),
                Some("None" | "NoneOnDryRun") => {}
                Some(_) => return Err(ApiError::bad_request(format!("admission webhook {} does not support dry run", quote(&hook.name)))),
            }
        }
        let version = match review::version(hook) {
            Ok(v) => v,
            Err(why) => return Ok(Asked::Failed(format!("failed calling webhook {}: {why}", quote(&hook.name)))),
        };
        let (uid, body) = review::body(hook, phase, version, request, obj, old, self.salt);
        Ok(match self.answers.get(&uid) {
            None => Asked::Pending(AdmissionCall { callee: Callee::Hook(hook.clone()), uid, body, retry: None }),
            Some(answer) => match review::read(hook, version, &uid, phase != VALIDATING, answer) {
                Ok(r) => Asked::Answered(r),
                Err(why) => Asked::Failed(why),
            },
        })
    }

    /// The mutating webhooks on `obj` (`None` for a delete), in order; a patched object is
    /// decoded as its kind and defaulted, as kube decodes it.
    pub fn mutate(&self, a: &Attributes, mut obj: Option<&mut Value>, reinvocation: &mut Reinvocation, warnings: &mut Vec<String>) -> Result<(), Halt> {
        if exempt(a) {
            return Ok(());
        }
        if !self.hooks.mutating_synced {
            return Err(not_ready(a).into());
        }
        for (index, hook) in self.hooks.mutating.iter().enumerate() {
            let Some(invocation) = matches(&hook.matching, a, obj.as_deref(), self.equivalents)? else { continue };
            let (invoked, seen, old) = versioned(self.resource, invocation, a, obj.as_deref());
            let request = review::request(a, invoked, seen.as_deref());
            if !conditions_hold(hook, a, (seen.as_deref(), old.as_deref()), &request)? {
                continue;
            }
            if reinvocation.second_round && !reinvocation.again.contains(&hook.uid) {
                continue;
            }
            let phase = if reinvocation.second_round { "mutating/1" } else { "mutating/0" };
            let answer = match self.ask(hook, phase, a, (seen.as_deref(), old.as_deref()), &request)? {
                Asked::Pending(call) => return Err(Halt::Ask(vec![call])),
                asked => asked,
            };
            let round = usize::from(reinvocation.second_round);
            let failed_open = || {
                a.annotate(format!("failed-open.mutation.webhook.admission.k8s.io/round_{round}_index_{index}"), "true".into());
                Ok(false)
            };
            let outcome: Result<bool, Halt> = 'call: {
                match answer {
                    Asked::Pending(_) => Ok(false),
                    Asked::Failed(_) if hook.ignore_failures => failed_open(),
                    Asked::Failed(why) => Err(ApiError::internal(why).into()),
                    Asked::Answered(r) => {
                        add_warnings(warnings, &r.warnings);
                        annotate(a, hook, &r);
                        if !r.allowed {
                            break 'call Err(review::denied(hook, r.status.as_ref()).into());
                        }
                        match patched(hook, &r, seen.as_deref()) {
                            Err(PatchError::Call(_)) if hook.ignore_failures => failed_open(),
                            Err(PatchError::Call(why)) => Err(ApiError::internal(why).into()),
                            Err(PatchError::Refused(e)) => Err(e.into()),
                            Ok(None) => Ok(false),
                            Ok(Some(new)) => {
                                let changed = Some(&new) != seen.as_deref();
                                patch_into(self.resource, invocation, a, new, obj.as_deref_mut().expect("a patch is applied to an object"))
                                    .map(|()| changed)
                                    .map_err(Halt::from)
                            }
                        }
                    }
                }
            };
            // kube notes each call made, whatever came of it.
            let mutation = Mutation { configuration: &hook.configuration, webhook: &hook.name, mutated: matches!(outcome, Ok(true)) };
            let value = serde_json::to_string(&mutation).expect("a mutation serializes");
            a.annotate(format!("mutation.webhook.admission.k8s.io/round_{round}_index_{index}"), value);
            let changed = outcome?;
            if changed {
                reinvocation.changed();
            }
            if hook.reinvoke {
                reinvocation.previously.insert(hook.uid.clone());
            }
        }
        Ok(())
    }

    /// The validating webhooks on the final object (`None` for a delete): every matching one
    /// asked at once; the first refusal, in their order, answered.
    pub fn validate(&self, a: &Attributes, obj: Option<&Value>, warnings: &mut Vec<String>) -> Result<(), Halt> {
        if exempt(a) {
            return Ok(());
        }
        if !self.hooks.validating_synced {
            return Err(not_ready(a).into());
        }
        let mut asked = Vec::new();
        for (index, hook) in self.hooks.validating.iter().enumerate() {
            let Some(invocation) = matches(&hook.matching, a, obj, self.equivalents)? else { continue };
            let (invoked, seen, old) = versioned(self.resource, invocation, a, obj);
            let request = review::request(a, invoked, seen.as_deref());
            if conditions_hold(hook, a, (seen.as_deref(), old.as_deref()), &request)? {
                asked.push((index, hook, self.ask(hook, VALIDATING, a, (seen.as_deref(), old.as_deref()), &request)));
            }
        }
        let pending: Vec<AdmissionCall> = asked.iter().filter_map(|(_, _, a)| if let Ok(Asked::Pending(c)) = a { Some(c.clone()) } else { None }).collect();
        if !pending.is_empty() {
            return Err(Halt::Ask(pending));
        }
        let mut refusal = None;
        for (index, hook, outcome) in asked {
            let refused = match outcome {
                Err(e) => Some(e),
                Ok(Asked::Failed(_)) if hook.ignore_failures => {
                    a.annotate(format!("failed-open.validating.webhook.admission.k8s.io/round_0_index_{index}"), "true".into());
                    None
                }
                Ok(Asked::Failed(why)) => Some(ApiError::internal(why)),
                Ok(Asked::Answered(r)) => {
                    add_warnings(warnings, &r.warnings);
                    annotate(a, hook, &r);
                    (!r.allowed).then(|| review::denied(hook, r.status.as_ref()))
                }
                Ok(Asked::Pending(_)) => None,
            };
            refusal = refusal.or(refused);
        }
        refusal.map_or(Ok(()), |e| Err(Halt::Refused(e)))
    }
}

/// kube's annotation of a mutating webhook's call (`mutation.webhook.admission.k8s.io/...`).
#[derive(serde::Serialize)]
struct Mutation<'a> {
    configuration: &'a str,
    webhook: &'a str,
    mutated: bool,
}

/// A webhook's `auditAnnotations`, each under its name (`<webhook>/<key>`).
fn annotate(a: &Attributes, hook: &Hook, r: &review::Response) {
    for (key, value) in &r.audit_annotations {
        a.annotate(format!("{}/{key}", hook.name), value.clone());
    }
}

/// `obj`, patched, as kube's (lenient) decoder reads it as `res`'s kind: fields the kind does
/// not have dropped, a value of the wrong type a 500; then defaulted.
fn decode(res: &Resource, obj: &mut Value) -> Result<(), ApiError> {
    if res.strategy.prune_unknown(obj).is_none() {
        crate::schema::normalize::normalize(crate::schema::schema(), &res.info.definition, obj).map_err(ApiError::internal)?;
    }
    res.strategy.default(obj);
    Ok(())
}

/// The characters of warnings kube's recorder takes from a request's webhooks; past it, it
/// keeps no more.
const WARNINGS_BUDGET: usize = 4096;

/// A webhook's warnings as kube's recorder keeps them: each once, none empty or with control
/// characters, within [`WARNINGS_BUDGET`].
fn add_warnings(warnings: &mut Vec<String>, new: &[String]) {
    let mut used: usize = warnings.iter().map(|w| w.chars().count()).sum();
    for w in new {
        let size = w.chars().count();
        if used + size > WARNINGS_BUDGET {
            return;
        }
        if !w.is_empty() && !w.chars().any(char::is_control) && !warnings.contains(w) {
            used += size;
            warnings.push(w.clone());
        }
    }
}

/// Why a mutating webhook's patch was not applied.
enum PatchError {
    /// kube's call error (the failure policy decides).
    Call(String),
    /// Refused whatever the policy.
    Refused(ApiError),
}

/// The object as the webhook's answer patched it; `None` when it did not patch it.
fn patched(hook: &Hook, r: &Response, obj: Option<&Value>) -> Result<Option<Value>, PatchError> {
    let Some(patch) = &r.patch else { return Ok(None) };
    let doc: Value = serde_json::from_slice(patch).map_err(|e| PatchError::Refused(ApiError::internal(e)))?;
    if doc.as_array().is_some_and(Vec::is_empty) {
        return Ok(None);
    }
    let Some(obj) = obj else {
        let why = format!("admission webhook {} attempted to modify the object, which is not supported for this operation", quote(&hook.name));
        return Err(PatchError::Refused(ApiError::internal(why)));
    };
    if let Some(t) = r.patch_type.as_deref().filter(|t| *t != "JSONPatch") {
        return Err(PatchError::Call(format!("failed calling webhook {}: unsupported patch type {}", quote(&hook.name), quote(t))));
    }
    let failed = |why: String| PatchError::Refused(ApiError::internal(why));
    match crate::patch::apply_json_patch(obj, &doc) {
        Ok(new) if new.is_object() => Ok(Some(new)),
        Ok(_) => Err(failed("json: cannot unmarshal non-object into Go value of type map[string]interface {}".into())),
        Err(crate::patch::JsonPatchFailure::NotAList) => Err(failed("json: cannot unmarshal object into Go value of type jsonpatch.Patch".into())),
        Err(crate::patch::JsonPatchFailure::TooMany(n)) => Err(failed(format!("a patch of {n} operations is more than kube applies"))),
        Err(crate::patch::JsonPatchFailure::TooMuchCopied) => Err(failed("Unable to copy, would exceed the accumulated copy size limit".into())),
        Err(crate::patch::JsonPatchFailure::Undecodable(e) | crate::patch::JsonPatchFailure::Failed(e)) => Err(failed(e)),
        Err(crate::patch::JsonPatchFailure::TestFailed(path)) => Err(failed(format!("testing value {path} failed: test failed"))),
    }
}

/// kube's evaluation of `matchConditions` over `object`, `oldObject` (as the webhook sees
/// them), `request` (the review's request without its uid and objects) and the `authorizer`:
/// false at the first that is false; the errors of the others, to the failure policy: with
/// `Fail` a 403, with `Ignore` the webhook is skipped. An `authorizer` check the authorization
/// webhook must answer first stops the write to ask ([`Halt::Ask`]).
pub fn conditions_hold(hook: &Hook, a: &Attributes, (obj, old): (Option<&Value>, Option<&Value>), request: &Value) -> Result<bool, Halt> {
    if hook.conditions.is_empty() {
        return Ok(true);
    }
    let mut variables: Vec<(&str, crate::cel::Value)> = [("object", obj), ("oldObject", old), ("request", Some(request))]
        .into_iter()
        .map(|(n, v)| (n, v.map_or(crate::cel::Value::Null, crate::cel::to_value)))
        .collect();
    let authorizer = hook.asks_authorizer.then(|| CelAuthorizer::of(a, obj));
    variables.extend(authorizer.iter().flat_map(|z| z.variables().iter().map(|(n, v)| (*n, v.clone()))));
    let shape: Vec<(&str, Shape)> = variables.iter().map(|(n, v)| (*n, Shape::of(v))).collect();
    let mut errors = Vec::new();
    for (source, condition) in &hook.conditions {
        let failed = |why: String| (source.clone(), why);
        let compiled = condition.as_ref().map_err(|e| failed(format!("compilation error: {e}")));
        let outcome = compiled.and_then(|c| {
            if cost::estimate(c, &shape) > cost::CALL_LIMIT {
                return Err(failed("operation cancelled: actual cost limit exceeded".into()));
            }
            match c.evaluate(variables.clone()) {
                Ok(crate::cel::Value::Bool(b)) => Ok(b),
                Ok(other) => Err(failed(format!("expected bool, got {:?}", other.type_of()))),
                Err(e) => Err(failed(e)),
            }
        });
        match outcome {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err((source, why)) => errors.push(format!("expression '{source}' resulted in error: {why}")),
        }
    }
    if let Some(ask) = authorizer.as_ref().and_then(CelAuthorizer::wanted) {
        return Err(ask);
    }
    match errors.is_empty() {
        true => Ok(true),
        false if hook.ignore_failures => Ok(false),
        false => Err(ApiError::forbidden(&a.info.group_resource(), review::request_name(a, obj), &crate::authz::rbac::aggregate(&errors)).into()),
    }
}
