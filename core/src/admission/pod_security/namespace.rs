//! PodSecurity on namespaces (`ValidateNamespace`): labels with invalid levels or versions
//! are refused (422, unless an update leaves them as they were), an exempt namespace's
//! policy is warned to be ignored, and a stricter enforce level is tried on the pods the
//! namespace has, whose violations come back as warnings, grouped as kube groups them.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::PodSecurity;
use super::checks::{self, PodView};
use super::policy::{Level, LevelVersion, MODES, Policy};
use crate::admission::{Attributes, Operation};
use crate::status::{ApiError, GroupKind, quote};

/// At most this many of a namespace's pods are tried against a new enforce level.
const MAX_PODS_CHECKED: usize = 3000;

fn labels(ns: &Value) -> Option<&Map<String, Value>> {
    ns.pointer("/metadata/labels").and_then(Value::as_object)
}

impl PodSecurity {
    pub(super) fn validate_namespace(&self, a: &Attributes, ns: &Value, warnings: &mut Vec<String>) -> Result<(), ApiError> {
        if a.subresource.is_some() {
            return Ok(());
        }
        let (policy, errs) = Policy::from_labels(labels(ns), &self.config.defaults);
        let invalid = || ApiError::invalid(&GroupKind { group: String::new(), kind: "Namespace".into() }, a.name, &errs);
        let old = a.old.filter(|_| a.operation == Operation::Update);
        let Some(old) = old else {
            if !errs.is_empty() {
                return Err(invalid());
            }
            if self.exempt_namespace(a.name) {
                warnings.extend(self.exempt_warning(a.name, &policy, labels(ns)));
            }
            return Ok(());
        };
        let (old_policy, old_errs) = Policy::from_labels(labels(old), &self.config.defaults);
        let text = |e: &[crate::status::FieldError]| e.iter().map(ToString::to_string).collect::<Vec<_>>();
        if !errs.is_empty() && text(&errs) != text(&old_errs) {
            return Err(invalid());
        }
        let (new, was) = (policy.enforce, old_policy.enforce);
        if new == was || new.level == Level::Privileged || (new.version == was.version && new.level <= was.level) {
            return Ok(());
        }
        if self.exempt_namespace(a.name) {
            warnings.extend(self.exempt_warning(a.name, &policy, labels(ns)));
            return Ok(());
        }
        warnings.extend(self.existing_pods(a, new));
        Ok(())
    }

    /// `namespace "x" is exempt from Pod Security, and the policy (...) will be ignored`, for
    /// a policy that is not fully privileged nor the default one.
    fn exempt_warning(&self, name: &str, policy: &Policy, labels: Option<&Map<String, Value>>) -> Option<String> {
        if policy.fully_privileged()
            || [policy.enforce, policy.audit, policy.warn]
                .iter()
                .zip([self.config.defaults.enforce, self.config.defaults.audit, self.config.defaults.warn])
                .all(|(p, d)| p.equivalent(&d))
        {
            return None;
        }
        let modes: Vec<String> = MODES
            .iter()
            .zip([policy.enforce, policy.audit, policy.warn])
            .filter(|(mode, lv)| lv.level != Level::Privileged && Policy::labelled(labels, mode))
            .map(|(mode, lv)| format!("{mode}={lv}"))
            .collect();
        Some(format!("namespace {} is exempt from Pod Security, and the policy ({}) will be ignored", quote(name), modes.join(", ")))
    }

    /// The warnings of a new enforce level for the namespace's pods (`EvaluatePodsInNamespace`):
    /// one pod of each controller first, then the rest, at most [`MAX_PODS_CHECKED`].
    fn existing_pods(&self, a: &Attributes, enforce: LevelVersion) -> Vec<String> {
        let pods: Vec<&Value> = a.found.pods.iter().filter(|p| !self.exempt_runtime_class(p.get("spec").unwrap_or(&Value::Null))).collect();
        let mut first = Vec::new();
        let mut rest = Vec::new();
        let mut controllers = Vec::new();
        for pod in pods {
            let controller = pod
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|r| r.get("controller") == Some(&Value::Bool(true)))
                .and_then(|r| r.get("uid"))
                .and_then(Value::as_str);
            match controller {
                Some(uid) if controllers.contains(&uid) => rest.push(pod),
                Some(uid) => {
                    controllers.push(uid);
                    first.push(pod);
                }
                None => first.push(pod),
            }
        }
        first.extend(rest);
        let total = first.len();
        let mut by_reasons: BTreeMap<String, (String, usize)> = BTreeMap::new();
        for pod in first.iter().take(MAX_PODS_CHECKED) {
            let view = PodView { meta: pod.get("metadata").unwrap_or(&Value::Null), spec: pod.get("spec").unwrap_or(&Value::Null) };
            let verdict = checks::evaluate(enforce, view);
            if verdict.allowed() {
                continue;
            }
            let name = crate::meta::name(pod).to_string();
            let entry = by_reasons.entry(verdict.reasons()).or_insert_with(|| (name.clone(), 0));
            entry.0 = entry.0.clone().min(name);
            entry.1 += 1;
        }
        let mut out = Vec::new();
        if total > MAX_PODS_CHECKED {
            out.push(format!("new PodSecurity enforce level only checked against the first {MAX_PODS_CHECKED} of {total} existing pods"));
        }
        if by_reasons.is_empty() {
            return out;
        }
        out.push(format!("existing pods in namespace {} violate the new PodSecurity enforce level {}", quote(a.name), quote(&enforce.to_string())));
        let mut lines: Vec<String> = by_reasons
            .into_iter()
            .map(|(reasons, (pod, count))| match count {
                1 => format!("{pod}: {reasons}"),
                2 => format!("{pod} (and 1 other pod): {reasons}"),
                n => format!("{pod} (and {} other pods): {reasons}", n - 1),
            })
            .collect();
        lines.sort();
        out.extend(lines);
        out
    }
}
