//! Admission webhooks (kube's `MutatingAdmissionWebhook` and `ValidatingAdmissionWebhook`):
//! the webhooks of every `MutatingWebhookConfiguration` and `ValidatingWebhookConfiguration`,
//! read into [`Hooks`], an immutable snapshot the request path holds (in `Served`, swapped
//! whole when a configuration changes), matched against a write ([`matching`]), asked with an
//! `AdmissionReview` ([`review`]) and their answers applied in kube's order ([`dispatch`]).
//!
//! The core never calls a webhook: a write that meets a webhook it has no answer from stops
//! with the calls to make ([`dispatch::Halt::Ask`]); the registry hands them to the request
//! machine, which emits them as effects, and runs admission again with the answers, which it
//! keeps by the review's uid (drawn from what the review asks, so asking again asks the same).

pub mod dispatch;
pub mod review;

use std::sync::Arc;

use serde_json::Value;

use super::{Lookup, Pending, Source};
use crate::admission::matching::Match;
use crate::cel::Expression;
use crate::webhook::ClientConfig;

/// The webhooks of the configurations, in kube's order: configurations by name, each one's
/// webhooks as listed.
#[derive(Debug, Default)]
pub struct Hooks {
    pub mutating: Vec<Arc<Hook>>,
    pub validating: Vec<Arc<Hook>>,
    /// The mutating configurations have been read (or are not served): until then a write
    /// they may concern is refused, as kube refuses it before its informer has synced.
    pub mutating_synced: bool,
    pub validating_synced: bool,
}

impl Hooks {
    /// No webhooks yet: those of the configurations `catalog` serves are still to be read.
    pub fn unread(catalog: &crate::catalog::Catalog) -> Hooks {
        let served = |source| crate::admission::serves(catalog, source);
        Hooks { mutating_synced: !served(Source::MutatingWebhooks), validating_synced: !served(Source::ValidatingWebhooks), ..Hooks::default() }
    }

    /// Whether both kinds of configurations have been read.
    pub fn synced(&self) -> bool {
        self.mutating_synced && self.validating_synced
    }

    /// The snapshot with the mutating (or validating) webhooks those of `configurations`.
    pub fn with<'a>(&self, mutating: bool, configurations: impl IntoIterator<Item = &'a Value>) -> Hooks {
        let mut configurations: Vec<&Value> = configurations.into_iter().collect();
        configurations.sort_by(|a, b| crate::meta::name(a).cmp(crate::meta::name(b)));
        let mut hooks = Vec::new();
        for c in configurations {
            let configuration = crate::meta::name(c);
            let mut seen: Vec<&str> = Vec::new();
            for w in c.get("webhooks").and_then(Value::as_array).into_iter().flatten() {
                let name = w.get("name").and_then(Value::as_str).unwrap_or_default();
                let n = seen.iter().filter(|s| **s == name).count();
                seen.push(name);
                hooks.push(Arc::new(Hook::read(w, &format!("{configuration}/{name}/{n}"), configuration)));
            }
        }
        match mutating {
            true => Hooks { mutating: hooks, mutating_synced: true, validating: self.validating.clone(), validating_synced: self.validating_synced },
            false => Hooks { mutating: self.mutating.clone(), mutating_synced: self.mutating_synced, validating: hooks, validating_synced: true },
        }
    }

    pub fn is_empty(&self) -> bool {
        self.mutating.is_empty() && self.validating.is_empty()
    }

    /// What matching needs read before a write: the labels of the namespace written in, when
    /// a webhook selects namespaces.
    pub fn lookups(&self, request: &Pending) -> Vec<Lookup> {
        let selects = self.mutating.iter().chain(&self.validating).any(|h| h.matching.selects_namespaces());
        match request.namespace.filter(|ns| selects && request.info.namespaced && !ns.is_empty()) {
            Some(ns) => vec![Lookup::Namespace(ns.to_string())],
            None => Vec::new(),
        }
    }
}

/// One webhook of a configuration, read once (its selectors parsed and its conditions
/// compiled; what does not parse is kept as the error it gives when a write matches).
#[derive(Debug)]
pub struct Hook {
    /// kube's `<configuration>/<webhook>/<n>`, `n` counting webhooks of the same name.
    pub uid: String,
    pub configuration: String,
    pub name: String,
    /// Its rules and selectors.
    pub matching: Match,
    /// Each condition's expression, compiled (or why it does not compile).
    pub conditions: Vec<(String, Result<Expression, String>)>,
    /// Whether a condition that compiles uses `authorizer` (found once here, not per write).
    pub asks_authorizer: bool,
    /// `failurePolicy: Ignore` (anything else fails closed, as kube).
    pub ignore_failures: bool,
    pub timeout_seconds: i64,
    /// `sideEffects`, if set.
    pub side_effects: Option<String>,
    /// `reinvocationPolicy: IfNeeded`.
    pub reinvoke: bool,
    pub review_versions: Vec<String>,
    pub client: ClientConfig,
}

impl Hook {
    fn read(w: &Value, uid: &str, configuration: &str) -> Hook {
        let text = |k: &str| w.get(k).and_then(Value::as_str).map(str::to_string);
        let strings = |v: Option<&Value>| crate::meta::strings(v);
        let conditions: Vec<(String, Result<Expression, String>)> = w
            .get("matchConditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| {
                let expression = c.get("expression").and_then(Value::as_str).unwrap_or_default();
                (expression.to_string(), Expression::compile(expression))
            })
            .collect();
        Hook {
            uid: uid.to_string(),
            configuration: configuration.to_string(),
            name: text("name").unwrap_or_default(),
            matching: Match::read(w, "rules"),
            asks_authorizer: conditions.iter().any(|(_, c)| c.as_ref().is_ok_and(|c| c.uses("authorizer"))),
            conditions,
            ignore_failures: text("failurePolicy").as_deref() == Some("Ignore"),
            timeout_seconds: w.get("timeoutSeconds").and_then(Value::as_i64).unwrap_or(10).clamp(1, 30),
            side_effects: text("sideEffects"),
            reinvoke: text("reinvocationPolicy").as_deref() == Some("IfNeeded"),
            review_versions: strings(w.get("admissionReviewVersions")),
            client: ClientConfig::read(w.get("clientConfig").unwrap_or(&Value::Null)),
        }
    }
}

#[cfg(test)]
mod tests;
