//! Whether a webhook or an admission policy sees a write, in kube's order (`ShouldCallHook`,
//! the policies' `Matcher.Matches`): the namespace selector, the object selector, the
//! excluded rules and the rules are matched; one none of whose rules matches is skipped
//! whatever its selectors; a selector that does not parse is then an error (500, whatever the
//! failure policy). Conditions are each one's own.

use std::borrow::Cow;

use serde_json::Value;

use std::sync::Arc;

use super::{Attributes, Operation};
use crate::catalog::{Resource, ResourceInfo};
use crate::meta;
use crate::selector::LabelSelector;
use crate::status::ApiError;

/// One rule (`RuleWithOperations`, or a policy's `NamedRuleWithOperations`).
#[derive(Debug, Default)]
pub struct Rule {
    pub operations: Vec<String>,
    pub groups: Vec<String>,
    pub versions: Vec<String>,
    pub resources: Vec<String>,
    /// `*` (or absent), `Cluster` or `Namespaced`.
    pub scope: String,
    /// The names it covers (`resourceNames`; empty: any).
    pub names: Vec<String>,
}

impl Rule {
    pub fn read(r: &Value) -> Rule {
        let strings = |k: &str| meta::strings(r.get(k));
        Rule {
            operations: strings("operations"),
            groups: strings("apiGroups"),
            versions: strings("apiVersions"),
            resources: strings("resources"),
            scope: r.get("scope").and_then(Value::as_str).unwrap_or("*").to_string(),
            names: strings("resourceNames"),
        }
    }
}

/// What a webhook or a policy (or a policy's binding) is matched by.
#[derive(Debug)]
pub struct Match {
    pub rules: Vec<Rule>,
    /// `excludeResourceRules` (policies').
    pub exclude: Vec<Rule>,
    /// A binding without rules: every resource its selectors allow.
    pub every_resource: bool,
    /// `matchPolicy: Equivalent`.
    pub equivalent: bool,
    pub namespace_selector: Result<LabelSelector, String>,
    pub object_selector: Result<LabelSelector, String>,
}

impl Match {
    /// The matching fields of `m` (a webhook, or a policy's `MatchResources`), its rules
    /// under `rules`.
    pub fn read(m: &Value, rules: &str) -> Match {
        let selector = |k: &str| match m.get(k) {
            None | Some(Value::Null) => Ok(LabelSelector::default()),
            Some(s) => LabelSelector::from_object(s),
        };
        let rules_at = |k: &str| m.get(k).and_then(Value::as_array).into_iter().flatten().map(Rule::read).collect::<Vec<_>>();
        Match {
            rules: rules_at(rules),
            exclude: rules_at("excludeResourceRules"),
            every_resource: false,
            equivalent: m.get("matchPolicy").and_then(Value::as_str) != Some("Exact"),
            namespace_selector: selector("namespaceSelector"),
            object_selector: selector("objectSelector"),
        }
    }

    /// Whether it selects namespaces by their labels.
    pub fn selects_namespaces(&self) -> bool {
        !matches!(&self.namespace_selector, Ok(s) if s.is_empty())
    }
}

/// kube's names of the operations.
pub fn operation_name(op: Operation) -> &'static str {
    match op {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
    }
}

/// Whether the write is of core/v1 namespaces themselves.
fn is_namespaces(a: &Attributes) -> bool {
    a.info.group.is_empty() && a.info.resource == "namespaces"
}

/// The namespace kube's admission attributes carry: a namespace's own name for a write of a
/// namespace (its request path names it), the request's otherwise.
pub fn namespace_of<'a>(a: &'a Attributes, obj: Option<&'a Value>) -> &'a str {
    if !is_namespaces(a) {
        return a.namespace;
    }
    if a.name.is_empty() { obj.map(meta::name).unwrap_or_default() } else { a.name }
}

/// Whether one rule covers the write (`rules.Matcher`): the operation, group, version, the
/// resource with its subresource (`*` is every resource but no subresource, `pods/*` is pods
/// and each of its subresources, `*/*` everything), and the scope.
fn rule_matches(rule: &Rule, a: &Attributes, info: &ResourceInfo, namespace: &str) -> bool {
    let any_or = |items: &[String], wanted: &str| items.iter().any(|i| i == "*" || i == wanted);
    let subresource = a.subresource.unwrap_or_default();
    let resource = rule.resources.iter().any(|r| {
        let (res, sub) = r.split_once('/').unwrap_or((r, ""));
        (res == "*" || res == info.resource) && (sub == "*" || sub == subresource)
    });
    let cluster = is_namespaces(a) || namespace.is_empty();
    let scope = match rule.scope.as_str() {
        "*" | "" => true,
        "Cluster" => cluster,
        "Namespaced" => !cluster,
        _ => false,
    };
    let named = rule.names.is_empty() || rule.names.iter().any(|n| n == a.name);
    scope
        && any_or(&rule.operations, operation_name(a.operation))
        && any_or(&rule.groups, &info.group)
        && any_or(&rule.versions, &info.version)
        && resource
        && named
}

/// The labels of the namespace a write is in, as kube's namespace matcher reads them: those
/// of the namespace written itself (a create or update of a namespace), else of the namespace
/// looked up (404 when it does not exist).
fn namespace_labels<'a>(a: &'a Attributes, obj: Option<&'a Value>, namespace: &str) -> Result<Vec<(&'a str, &'a str)>, ApiError> {
    if is_namespaces(a) {
        let own = match a.operation {
            Operation::Create | Operation::Update if a.subresource.is_none() => obj,
            _ => a.old.or(obj),
        };
        return Ok(own.map(meta::labels).unwrap_or_default());
    }
    match &a.found.namespace {
        Some((ns, Some(found))) if ns == namespace => Ok(meta::labels(found)),
        _ => Err(ApiError::not_found(&crate::status::GroupResource::new("", "namespaces"), namespace)),
    }
}

/// Which resource a webhook is asked about: the one written, or (`matchPolicy: Equivalent`)
/// another version of it its rules name, the objects converted to that version.
#[derive(Clone, Copy, Debug)]
pub enum Invocation<'r> {
    Exact,
    Equivalent(&'r Arc<Resource>),
}

/// Whether the selectors and rules of `m` cover the write (`obj`: the object as it would be
/// seen), and as which resource: the written one if a rule names it (or `m` takes every
/// resource), else the first of `equivalents` (the resources stored alike) a rule names, rule
/// by rule; never what an excluded rule names.
pub fn matches<'r>(m: &Match, a: &Attributes, obj: Option<&Value>, equivalents: &'r [Arc<Resource>]) -> Result<Option<Invocation<'r>>, ApiError> {
    let namespace = namespace_of(a, obj);
    let namespace_match = match &m.namespace_selector {
        _ if namespace.is_empty() && !is_namespaces(a) => Ok(true),
        Err(e) => Err(ApiError::internal(e)),
        Ok(s) if s.is_empty() => Ok(true),
        Ok(s) => namespace_labels(a, obj, namespace).map(|labels| s.matches(&labels)),
    };
    if matches!(namespace_match, Ok(false)) {
        return Ok(None);
    }
    let object_match = match &m.object_selector {
        Err(e) => Err(ApiError::internal(e)),
        Ok(s) if s.is_empty() => Ok(true),
        Ok(s) => {
            let labelled = |o: Option<&Value>| o.filter(|o| o.get("metadata").is_some_and(Value::is_object)).is_some_and(|o| s.matches(&meta::labels(o)));
            Ok(labelled(obj) || labelled(a.old))
        }
    };
    if matches!(object_match, Ok(false)) {
        return Ok(None);
    }
    if m.exclude.iter().any(|r| rule_matches(r, a, a.info, namespace)) {
        return Ok(None);
    }
    let invocation = if m.every_resource || m.rules.iter().any(|r| rule_matches(r, a, a.info, namespace)) {
        Invocation::Exact
    } else {
        let equivalents = equivalents.iter().filter(|_| m.equivalent);
        let mut found = m.rules.iter().flat_map(|r| equivalents.clone().map(move |e| (r, e)));
        match found.find(|(r, e)| rule_matches(r, a, &e.info, namespace)) {
            Some((_, e)) => Invocation::Equivalent(e),
            None => return Ok(None),
        }
    };
    namespace_match?;
    object_match?;
    Ok(Some(invocation))
}

/// `obj` of `from` as `to` serves it (the two stored alike).
pub fn convert(from: &Resource, to: &Resource, obj: &Value) -> Value {
    let stored = from.strategy.stored_from_served(obj).unwrap_or_else(|| obj.clone());
    let mut out = to.strategy.served_from_stored(stored);
    crate::meta::set_type_meta(&mut out, &to.info.api_version(), &to.info.kind);
    out
}

/// The resource a write of `resource` is seen as, and its objects (`obj`, and the old one)
/// as seen: as they are for an exact match (borrowed), converted to the equivalent version
/// matched; a scale subresource's as the `autoscaling/v1` Scales.
pub fn versioned<'x: 'o, 'o>(
    resource: &Resource,
    invocation: Invocation<'x>,
    a: &Attributes<'x>,
    obj: Option<&'o Value>,
) -> (&'x ResourceInfo, Option<Cow<'o, Value>>, Option<Cow<'o, Value>>) {
    if a.subresource == Some("scale") {
        let view = |o: Option<&Value>| o.and_then(|o| resource.strategy.scale_of(o).ok()).map(|s| Cow::Owned(s.scale));
        return (a.info, view(obj), view(a.old));
    }
    match invocation {
        Invocation::Exact => (a.info, obj.map(Cow::Borrowed), a.old.map(Cow::Borrowed)),
        Invocation::Equivalent(to) => {
            let each = |o: Option<&Value>| o.map(|o| Cow::Owned(convert(resource, to, o)));
            (&to.info, each(obj), each(a.old))
        }
    }
}
