//! Admission policies (kube's `ValidatingAdmissionPolicy` and `MutatingAdmissionPolicy`
//! plugins): the CEL validations of every `ValidatingAdmissionPolicy` (the mutations of every
//! `MutatingAdmissionPolicy`), applied to the writes its bindings and its own
//! `matchConstraints` cover, with the parameters each binding names. The policies and
//! bindings of each kind are read into [`Policies`], an immutable snapshot the request path
//! holds (in `Served`, swapped whole when one changes); [`dispatch`] validates a write with
//! them, [`mutate`] mutates it.
//!
//! Expressions are compiled once, when a policy is read (again only when its
//! resourceVersion changes), in the one CEL environment kapi has (`crate::cel`).

pub mod access;
pub mod checks;
pub mod dispatch;
mod evaluate;
pub mod mutate;
mod patch;
pub mod type_checking;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::matching::Match;
use super::{Lookup, Pending, Source};
use crate::catalog::Catalog;
use crate::cel::Expression;
use crate::meta;
use crate::selector::LabelSelector;

/// An expression as written, and compiled (or why it does not compile).
#[derive(Debug)]
pub struct Compiled {
    pub source: String,
    pub expression: Result<Expression, String>,
}

impl Compiled {
    fn new(source: &str) -> Compiled {
        Compiled { source: source.to_string(), expression: Expression::compile(source) }
    }

    /// A mutation's expression (trimmed, as kube compiles it).
    fn mutation(source: &str) -> Compiled {
        Compiled { source: source.to_string(), expression: Expression::compile_mutation(source.trim()) }
    }

    /// Whether the expression reads `variables.<name>`.
    pub fn reads_variable(&self, name: &str) -> bool {
        self.expression.as_ref().is_ok_and(|e| e.selects("variables", name))
    }

    /// The expression `key` of `v`.
    fn at(v: &Value, key: &str) -> Compiled {
        Compiled::new(v.get(key).and_then(Value::as_str).unwrap_or_default())
    }
}

/// One of a policy's `validations`.
#[derive(Debug)]
pub struct Validation {
    pub expression: Compiled,
    pub message: Option<String>,
    pub message_expression: Option<Compiled>,
    /// `Forbidden`, `Invalid`, `RequestEntityTooLarge` or `Unauthorized` (kube's reasons a
    /// refusal may carry); `None` when unset (a refusal is then `Invalid`).
    pub reason: Option<&'static str>,
}

/// One of a mutating policy's `mutations`: what its expression gives, and the expression.
#[derive(Debug)]
pub struct Mutation {
    /// `patchType: JSONPatch` (else `ApplyConfiguration`).
    pub json_patch: bool,
    pub expression: Compiled,
}

/// What a policy does when it cannot decide (`failurePolicy`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailurePolicy {
    Fail,
    Ignore,
    /// A value kube does not know (only an object older than its validation has one).
    Unknown(String),
}

/// A `ValidatingAdmissionPolicy`, read and compiled.
#[derive(Debug)]
pub struct Policy {
    pub name: String,
    resource_version: String,
    /// `paramKind`: its apiVersion and kind.
    pub param_kind: Option<(String, String)>,
    /// `matchConstraints` (`None`: the policy has none, an error when a write meets it).
    pub matching: Option<Match>,
    pub conditions: Vec<Compiled>,
    /// `variables`, in order: each may use those before it.
    pub variables: Vec<(String, Compiled)>,
    pub validations: Vec<Validation>,
    /// `auditAnnotations`: each key and its value's expression.
    pub audit_annotations: Vec<(String, Compiled)>,
    /// A mutating policy's `mutations`, in order.
    pub mutations: Vec<Mutation>,
    /// A mutating policy's `reinvocationPolicy: IfNeeded`.
    pub reinvoke: bool,
    pub failure_policy: FailurePolicy,
    /// What of a write its expressions read.
    pub uses: Uses,
}

/// Which of what a write gives them a policy's expressions read: what none reads is not made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Uses {
    pub object: bool,
    pub old_object: bool,
    pub request: bool,
    pub namespace: bool,
    pub authorizer: bool,
}

impl Uses {
    fn of<'a>(expressions: impl Iterator<Item = &'a Compiled>) -> Uses {
        let mut u = Uses::default();
        for e in expressions.filter_map(|c| c.expression.as_ref().ok()) {
            u = u.or(Uses {
                object: e.uses("object"),
                old_object: e.uses("oldObject"),
                request: e.uses("request"),
                namespace: e.uses("namespaceObject"),
                authorizer: e.uses("authorizer"),
            });
        }
        u
    }

    fn or(self, o: Uses) -> Uses {
        Uses {
            object: self.object || o.object,
            old_object: self.old_object || o.old_object,
            request: self.request || o.request,
            namespace: self.namespace || o.namespace,
            authorizer: self.authorizer || o.authorizer,
        }
    }
}

impl Policy {
    fn read(p: &Value) -> Policy {
        let spec = p.get("spec").unwrap_or(&Value::Null);
        let items = |k: &str| spec.get(k).and_then(Value::as_array).into_iter().flatten();
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let mut policy = Policy {
            name: meta::name(p).to_string(),
            resource_version: meta::str_at(p, &["metadata", "resourceVersion"]).unwrap_or_default().to_string(),
            param_kind: spec
                .get("paramKind")
                .filter(|k| k.is_object())
                .map(|k| (text(k, "apiVersion").unwrap_or_default(), text(k, "kind").unwrap_or_default())),
            matching: spec.get("matchConstraints").filter(|m| m.is_object()).map(|m| Match::read(m, "resourceRules")),
            conditions: items("matchConditions").map(|c| Compiled::at(c, "expression")).collect(),
            variables: items("variables").map(|v| (text(v, "name").unwrap_or_default(), Compiled::at(v, "expression"))).collect(),
            validations: items("validations")
                .map(|v| Validation {
                    expression: Compiled::at(v, "expression"),
                    message: text(v, "message"),
                    message_expression: text(v, "messageExpression").filter(|m| !m.trim().is_empty()).map(|m| Compiled::new(&m)),
                    reason: ["Forbidden", "Invalid", "RequestEntityTooLarge", "Unauthorized"]
                        .into_iter()
                        .find(|r| v.get("reason").and_then(Value::as_str) == Some(*r)),
                })
                .collect(),
            audit_annotations: items("auditAnnotations").map(|a| (text(a, "key").unwrap_or_default(), Compiled::at(a, "valueExpression"))).collect(),
            mutations: items("mutations")
                .map(|m| {
                    let json_patch = m.get("patchType").and_then(Value::as_str) == Some("JSONPatch");
                    let written = m.get(if json_patch { "jsonPatch" } else { "applyConfiguration" }).and_then(|e| e.get("expression"));
                    Mutation { json_patch, expression: Compiled::mutation(written.and_then(Value::as_str).unwrap_or_default()) }
                })
                .collect(),
            reinvoke: text(spec, "reinvocationPolicy").as_deref() == Some("IfNeeded"),
            failure_policy: match text(spec, "failurePolicy").as_deref() {
                None | Some("Fail") => FailurePolicy::Fail,
                Some("Ignore") => FailurePolicy::Ignore,
                Some(other) => FailurePolicy::Unknown(other.to_string()),
            },
            uses: Uses::default(),
        };
        let messages = policy.validations.iter().filter_map(|v| v.message_expression.as_ref());
        let expressions = policy.conditions.iter().chain(policy.variables.iter().map(|(_, c)| c)).chain(policy.validations.iter().map(|v| &v.expression));
        let mutations = policy.mutations.iter().map(|m| &m.expression);
        policy.uses = Uses::of(expressions.chain(messages).chain(policy.audit_annotations.iter().map(|(_, c)| c)).chain(mutations));
        policy
    }
}

/// A binding's `paramRef`.
#[derive(Debug)]
pub struct ParamRef {
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub selector: Option<Result<LabelSelector, String>>,
    /// `parameterNotFoundAction: Deny`.
    pub deny_when_missing: bool,
}

/// What a binding does with a failed validation (`validationActions`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Actions {
    pub deny: bool,
    pub warn: bool,
    /// Kept in the audit log (`validation.policy.admission.k8s.io/validation_failure`).
    pub audit: bool,
}

/// A `ValidatingAdmissionPolicyBinding`, read.
#[derive(Debug)]
pub struct Binding {
    pub name: String,
    pub policy: String,
    pub param_ref: Option<ParamRef>,
    /// `matchResources` (`None`: every write the policy matches).
    pub matching: Option<Match>,
    pub actions: Actions,
    /// `validationActions` as written (for the audit annotation of a failure).
    pub validation_actions: Vec<String>,
}

impl Binding {
    fn read(b: &Value) -> Binding {
        let spec = b.get("spec").unwrap_or(&Value::Null);
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
        let actions = meta::strings(spec.get("validationActions"));
        let has = |a: &str| actions.iter().any(|x| x == a);
        Binding {
            name: meta::name(b).to_string(),
            policy: text(spec, "policyName").unwrap_or_default(),
            param_ref: spec.get("paramRef").filter(|r| r.is_object()).map(|r| ParamRef {
                name: text(r, "name"),
                namespace: text(r, "namespace"),
                selector: r.get("selector").filter(|s| !s.is_null()).map(LabelSelector::from_object),
                deny_when_missing: text(r, "parameterNotFoundAction").as_deref() == Some("Deny"),
            }),
            matching: spec.get("matchResources").filter(|m| m.is_object()).map(|m| {
                let mut m = Match::read(m, "resourceRules");
                m.every_resource = m.rules.is_empty();
                m
            }),
            actions: Actions { deny: has("Deny"), warn: has("Warn"), audit: has("Audit") },
            validation_actions: actions.clone(),
        }
    }
}

/// Where a policy's parameters are: the resource its `paramKind` names, as served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamResource {
    pub group: String,
    pub version: String,
    pub resource: String,
    pub namespaced: bool,
}

/// A policy with its bindings (by name), and where its parameters are (`None` without
/// `paramKind`; the error kube gives when the kind is not served).
#[derive(Debug)]
pub struct Hook {
    pub policy: Arc<Policy>,
    pub bindings: Vec<Arc<Binding>>,
    pub params: Result<Option<ParamResource>, String>,
}

/// The policies and bindings of one kind (validating or mutating), as a snapshot: policies by
/// name, each with its bindings.
#[derive(Debug, Default)]
pub struct Policies {
    /// Where the policies and the bindings are read from.
    sources: Option<(Source, Source)>,
    policies: BTreeMap<String, Arc<Policy>>,
    bindings: BTreeMap<String, Arc<Binding>>,
    /// The policies that have bindings, by name: what a write meets.
    pub hooks: Vec<Hook>,
    /// What the expressions of the policies with bindings read.
    pub uses: Uses,
    /// The policies (and the bindings) have been read, or are not served: until both are, a
    /// write is refused, as kube refuses it before its informers have synced.
    policies_synced: bool,
    bindings_synced: bool,
}

impl Policies {
    /// No validating policies yet: those `catalog` serves are still to be read.
    pub fn unread(catalog: &Catalog) -> Policies {
        Policies::unread_from(catalog, (Source::Policies, Source::PolicyBindings))
    }

    /// No mutating policies yet: those `catalog` serves are still to be read.
    pub fn unread_mutating(catalog: &Catalog) -> Policies {
        Policies::unread_from(catalog, (Source::MutatingPolicies, Source::MutatingPolicyBindings))
    }

    fn unread_from(catalog: &Catalog, sources: (Source, Source)) -> Policies {
        let served = |source| super::serves(catalog, source);
        Policies { sources: Some(sources), policies_synced: !served(sources.0), bindings_synced: !served(sources.1), ..Policies::default() }
    }

    /// Whether its policies and bindings are read from `source`.
    pub fn reads(&self, source: Source) -> bool {
        self.sources.is_some_and(|(p, b)| p == source || b == source)
    }

    pub fn synced(&self) -> bool {
        self.policies_synced && self.bindings_synced
    }

    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// The policy of `name`, with or without bindings.
    pub fn policy(&self, name: &str) -> Option<&Policy> {
        self.policies.get(name).map(|p| p.as_ref())
    }

    /// The snapshot with the policies (or the bindings, as `source` says) those of `objects`;
    /// a policy whose resourceVersion is unchanged keeps its compiled expressions.
    pub fn with<'a>(&self, source: Source, objects: impl IntoIterator<Item = &'a Value>, catalog: &Catalog) -> Policies {
        let (mut policies, mut bindings) = (self.policies.clone(), self.bindings.clone());
        let (mut policies_synced, mut bindings_synced) = (self.policies_synced, self.bindings_synced);
        if self.sources.is_some_and(|(p, _)| p == source) {
            policies = objects
                .into_iter()
                .map(|p| {
                    let (name, version) = (meta::name(p), meta::str_at(p, &["metadata", "resourceVersion"]).unwrap_or_default());
                    let kept = self.policies.get(name).filter(|k| k.resource_version == version && !version.is_empty());
                    (name.to_string(), kept.cloned().unwrap_or_else(|| Arc::new(Policy::read(p))))
                })
                .collect();
            policies_synced = true;
        } else {
            bindings = objects.into_iter().map(|b| (meta::name(b).to_string(), Arc::new(Binding::read(b)))).collect();
            bindings_synced = true;
        }
        Policies::built(self.sources, policies, bindings, policies_synced, bindings_synced, catalog)
    }

    /// The same policies, their parameters found in `catalog` (which serves other kinds now).
    pub fn resolved(&self, catalog: &Catalog) -> Policies {
        Policies::built(self.sources, self.policies.clone(), self.bindings.clone(), self.policies_synced, self.bindings_synced, catalog)
    }

    /// The snapshot of `policies` and `bindings`: their hooks as `catalog` serves the
    /// parameters, and what their expressions read.
    fn built(
        sources: Option<(Source, Source)>,
        policies: BTreeMap<String, Arc<Policy>>,
        bindings: BTreeMap<String, Arc<Binding>>,
        policies_synced: bool,
        bindings_synced: bool,
        catalog: &Catalog,
    ) -> Policies {
        let mut next = Policies { sources, policies, bindings, hooks: Vec::new(), uses: Uses::default(), policies_synced, bindings_synced };
        next.hooks = next.hooks_of(catalog);
        next.uses = next.hooks.iter().fold(Uses::default(), |u, h| u.or(h.policy.uses));
        next
    }

    fn hooks_of(&self, catalog: &Catalog) -> Vec<Hook> {
        let mut by_policy: BTreeMap<&str, Vec<Arc<Binding>>> = BTreeMap::new();
        for b in self.bindings.values() {
            by_policy.entry(b.policy.as_str()).or_default().push(b.clone());
        }
        let mut hooks = Vec::new();
        for (name, bindings) in by_policy {
            let Some(policy) = self.policies.get(name) else { continue };
            let params = match &policy.param_kind {
                None => Ok(None),
                Some((api_version, kind)) => param_resource(catalog, api_version, kind).map(Some),
            };
            hooks.push(Hook { policy: policy.clone(), bindings, params });
        }
        hooks
    }

    /// What applying the policies to `request` needs read first: the namespace written in
    /// (its labels, and `namespaceObject`), and the parameters of the bindings of the
    /// policies that may match it.
    pub fn lookups(&self, request: &Pending) -> Vec<Lookup> {
        let mut out = Vec::new();
        if self.hooks.is_empty() {
            return out;
        }
        let namespace = request.namespace.filter(|ns| request.info.namespaced && !ns.is_empty());
        if let Some(ns) = namespace {
            out.push(Lookup::Namespace(ns.to_string()));
        }
        for hook in self.hooks.iter().filter(|h| may_match(h, request)) {
            let Ok(Some(at)) = &hook.params else { continue };
            for r in hook.bindings.iter().filter_map(|b| b.param_ref.as_ref()) {
                let namespace = match at.namespaced {
                    true => r.namespace.as_deref().or(namespace).map(str::to_string),
                    false => None,
                };
                if at.namespaced && namespace.is_none() {
                    continue;
                }
                let name = r.name.clone().filter(|_| r.selector.is_none());
                let lookup = Lookup::Params { resource: (at.group.clone(), at.version.clone(), at.resource.clone()), namespace, name };
                if !out.contains(&lookup) {
                    out.push(lookup);
                }
            }
        }
        out
    }
}

/// Whether a policy's rules may name the resource `request` writes (a cheap test before its
/// parameters are read: any group and version, as an equivalent one may match).
fn may_match(hook: &Hook, request: &Pending) -> bool {
    let Some(m) = &hook.policy.matching else { return false };
    m.rules.iter().any(|r| r.resources.iter().any(|x| x.split('/').next().is_some_and(|res| res == "*" || res == request.info.resource)))
}

/// The resource serving `kind` of `api_version`, or kube's error when none does.
fn param_resource(catalog: &Catalog, api_version: &str, kind: &str) -> Result<ParamResource, String> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let found = catalog.resources_of(group, version).into_iter().find(|r| r.info.kind == kind);
    match found {
        Some(r) => Ok(ParamResource { group: group.into(), version: version.into(), resource: r.info.resource.clone(), namespaced: r.info.namespaced }),
        None => Err(format!("failed to find resource referenced by paramKind: '{group}/{version}, Kind={kind}'")),
    }
}

#[cfg(test)]
mod tests;
