//! PodSecurity: the Pod Security Standards (privileged, baseline, restricted) of kube v1.33
//! enforced on pods by their namespace's `pod-security.kubernetes.io/enforce` label (403 with
//! kube's `violates PodSecurity` message), and warned of (`warn`) for pods and the workloads
//! that make them, with kube's exemptions, fallbacks and namespace-label checks. The `audit`
//! level's violations, the enforced policy, exemptions and label errors are the request's
//! audit annotations (`pod-security.kubernetes.io/...`), as kube's plugin adds them.
//!
//! Files: [`checks`] (the seventeen checks), [`policy`] (levels, versions, labels), [`config`]
//! (`PodSecurityConfiguration`), [`namespace`] (checks of namespaces' labels).

mod checks;
mod config;
mod namespace;
mod policy;
#[cfg(test)]
mod tests;

use serde_json::Value;

use super::{Attributes, Lookup, Operation, Pending, Plugin};
use crate::status::{ApiError, quote};
use checks::{PodView, Verdict};
pub use config::Config;
use policy::{LevelVersion, Policy};

/// The prefix of the audit annotations the plugin adds.
const ANNOTATION_PREFIX: &str = "pod-security.kubernetes.io/";

fn annotate(a: &Attributes, key: &str, value: String) {
    a.annotate(format!("{ANNOTATION_PREFIX}{key}"), value);
}

/// Subresources of pods that are never checked.
const IGNORED_POD_SUBRESOURCES: [&str; 8] = ["exec", "attach", "binding", "eviction", "log", "portforward", "proxy", "status"];

/// The workloads whose pod templates are checked (warn only), by group and resource.
const WORKLOADS: [(&str, &str); 8] = [
    ("", "replicationcontrollers"),
    ("", "podtemplates"),
    ("apps", "replicasets"),
    ("apps", "deployments"),
    ("apps", "statefulsets"),
    ("apps", "daemonsets"),
    ("batch", "jobs"),
    ("batch", "cronjobs"),
];

#[derive(Debug)]
pub struct PodSecurity {
    config: Config,
}

impl PodSecurity {
    /// The plugin with its `PodSecurityConfiguration` (`None`: kube's defaults).
    pub fn new(config: Option<&[u8]>) -> Result<PodSecurity, String> {
        Ok(PodSecurity { config: Config::load(config)? })
    }

    fn exempt_namespace(&self, ns: &str) -> bool {
        !ns.is_empty() && self.config.exempt_namespaces.iter().any(|n| n == ns)
    }

    /// Whether the request's namespace or user is exempt (noted as kube notes it).
    fn exempt(&self, a: &Attributes) -> bool {
        let ns = self.exempt_namespace(a.namespace);
        let user = !a.user.name.is_empty() && self.config.exempt_usernames.contains(&a.user.name);
        match (ns, user) {
            (true, _) => annotate(a, "exempt", "namespace".into()),
            (false, true) => annotate(a, "exempt", "user".into()),
            (false, false) => return false,
        }
        true
    }

    fn exempt_runtime_class(&self, spec: &Value) -> bool {
        let class = spec.get("runtimeClassName").and_then(Value::as_str).unwrap_or_default();
        !class.is_empty() && self.config.exempt_runtime_classes.iter().any(|c| c == class)
    }

    /// The namespace's policy, with what is wrong with its labels (kube's words); `Err`: it
    /// was not found.
    fn namespace_policy(&self, a: &Attributes) -> Result<(Policy, Option<String>), String> {
        match &a.found.namespace {
            Some((name, Some(ns))) if name == a.namespace => {
                let (policy, errs) = Policy::from_labels(ns.pointer("/metadata/labels").and_then(Value::as_object), &self.config.defaults);
                Ok((policy, crate::status::field::aggregate(&errs)))
            }
            _ => Err(format!("failed to lookup namespace {}", quote(a.namespace))),
        }
    }

    /// A pod's create or update (`ValidatePod`).
    fn validate_pod(&self, a: &Attributes, pod: &Value, warnings: &mut Vec<String>) -> Result<(), ApiError> {
        if a.subresource.is_some_and(|s| IGNORED_POD_SUBRESOURCES.contains(&s)) || self.exempt(a) {
            return Ok(());
        }
        let (policy, label_errors) = self.namespace_policy(a).map_err(ApiError::internal)?;
        if label_errors.is_none() && policy.fully_privileged() {
            return Ok(());
        }
        if let Some(old) = a.old.filter(|_| a.operation == Operation::Update)
            && !significant_update(pod, old)
        {
            return Ok(());
        }
        let view = PodView { meta: pod.get("metadata").unwrap_or(&Value::Null), spec: pod.get("spec").unwrap_or(&Value::Null) };
        self.evaluate(a, (&policy, label_errors), view, true, warnings)
    }

    /// A workload's create or update: warnings only (`ValidatePodController`).
    fn validate_workload(&self, a: &Attributes, obj: &Value, warnings: &mut Vec<String>) {
        if a.subresource.is_some() || self.exempt(a) {
            return;
        }
        let Ok((policy, label_errors)) = self.namespace_policy(a) else { return };
        if label_errors.is_none() && policy.warn.level == policy::Level::Privileged && policy.audit.level == policy::Level::Privileged {
            return;
        }
        let template = match a.info.resource.as_str() {
            "podtemplates" => obj.get("template"),
            "cronjobs" => obj.pointer("/spec/jobTemplate/spec/template"),
            _ => obj.pointer("/spec/template"),
        };
        let Some(template) = template.filter(|t| !t.is_null()) else { return };
        let view = PodView { meta: template.get("metadata").unwrap_or(&Value::Null), spec: template.get("spec").unwrap_or(&Value::Null) };
        // Warnings never refuse.
        let _ = self.evaluate(a, (&policy, label_errors), view, false, warnings);
    }

    /// `EvaluatePod`: the enforce level refuses a pod (`enforce`), the audit level's
    /// violations are noted, then the warn level warns of an admitted one. `label_errors`: what
    /// is wrong with the namespace's labels.
    fn evaluate(
        &self,
        a: &Attributes,
        (policy, label_errors): (&Policy, Option<String>),
        pod: PodView,
        enforce: bool,
        warnings: &mut Vec<String>,
    ) -> Result<(), ApiError> {
        if self.exempt_runtime_class(pod.spec) {
            annotate(a, "exempt", "runtimeClass".into());
            return Ok(());
        }
        if let Some(errors) = label_errors {
            annotate(a, "error", format!("Failed to parse policy: {errors}"));
        }
        // Each level and version is evaluated once.
        let mut verdicts: Vec<(LevelVersion, Verdict)> = Vec::new();
        let mut verdict = |lv: LevelVersion| -> Verdict {
            if let Some((_, v)) = verdicts.iter().find(|(l, _)| *l == lv) {
                return v.clone();
            }
            let v = checks::evaluate(lv, pod);
            verdicts.push((lv, v.clone()));
            v
        };
        let mut refused = None;
        if enforce {
            annotate(a, "enforce-policy", policy.enforce.to_string());
            let enforced = verdict(policy.enforce);
            if !enforced.allowed() {
                refused = Some(a.forbidden(&format!("violates PodSecurity {}: {}", quote(&policy.enforce.to_string()), enforced.details())));
            }
        }
        let audited = verdict(policy.audit);
        if !audited.allowed() {
            annotate(a, "audit-violations", format!("would violate PodSecurity {}: {}", quote(&policy.audit.to_string()), audited.details()));
        }
        if let Some(refused) = refused {
            return Err(refused);
        }
        let warned = verdict(policy.warn);
        if !warned.allowed() {
            warnings.push(format!("would violate PodSecurity {}: {}", quote(&policy.warn.to_string()), warned.details()));
        }
        Ok(())
    }
}

/// Whether a pod update can change what PodSecurity says of it: containers added or
/// removed, an image changed, an ephemeral container added or changed.
fn significant_update(pod: &Value, old: &Value) -> bool {
    let list = |p: &'_ Value, name: &str| p.pointer(&format!("/spec/{name}")).and_then(Value::as_array).cloned().unwrap_or_default();
    let image = |c: &Value| c.get("image").and_then(Value::as_str).unwrap_or_default().to_string();
    for name in ["containers", "initContainers"] {
        let (new, was) = (list(pod, name), list(old, name));
        if new.len() != was.len() || new.iter().zip(&was).any(|(n, o)| image(n) != image(o)) {
            return true;
        }
    }
    let was = list(old, "ephemeralContainers");
    list(pod, "ephemeralContainers").iter().any(|e| !was.iter().any(|o| o.get("name") == e.get("name") && image(o) == image(e)))
}

impl Plugin for PodSecurity {
    fn name(&self) -> &'static str {
        "PodSecurity"
    }

    fn handles(&self, op: Operation) -> bool {
        matches!(op, Operation::Create | Operation::Update)
    }

    fn lookups(&self, request: &Pending) -> Vec<Lookup> {
        let (group, resource) = (request.info.group.as_str(), request.info.resource.as_str());
        if group.is_empty() && resource == "namespaces" {
            return match (request.operation, request.subresource, request.name) {
                (Operation::Update, None, Some(name)) if !self.exempt_namespace(name) => vec![Lookup::Pods(name.to_string())],
                _ => Vec::new(),
            };
        }
        let pods = group.is_empty() && resource == "pods" && !request.subresource.is_some_and(|s| IGNORED_POD_SUBRESOURCES.contains(&s));
        let workload = request.subresource.is_none() && WORKLOADS.contains(&(group, resource));
        match request.namespace {
            Some(ns) if (pods || workload) && !self.exempt_namespace(ns) => vec![Lookup::Namespace(ns.to_string())],
            _ => Vec::new(),
        }
    }

    fn validate(&self, a: &Attributes, obj: Option<&Value>, warnings: &mut Vec<String>) -> Result<(), ApiError> {
        let Some(obj) = obj else { return Ok(()) };
        let (group, resource) = (a.info.group.as_str(), a.info.resource.as_str());
        match (group, resource) {
            ("", "namespaces") => self.validate_namespace(a, obj, warnings),
            ("", "pods") => self.validate_pod(a, obj, warnings),
            gr if WORKLOADS.contains(&gr) => {
                self.validate_workload(a, obj, warnings);
                Ok(())
            }
            _ => Ok(()),
        }
    }
}
