//! admissionregistration.k8s.io as objects: webhook configurations, validating admission
//! policies (+`status`) and their bindings at v1; mutating admission policies and their
//! bindings at v1alpha1 (alpha: served only when `--runtime-config` turns the version on);
//! with kube's defaults and the main rules of `pkg/apis/admissionregistration/validation`.
//! What they do is admission's.

use serde_json::{Map, Value, json};

use super::{info, serve, status_subresource};
use crate::admission::policies::checks;
use crate::catalog::{Lifecycle, Resource, Strategy};
use crate::meta;
use crate::status::FieldError;
use crate::table::{self, Column, Describe};
use crate::validation::{dns1123_subdomain, label_selector, supported};

const G: &str = "admissionregistration.k8s.io";

pub fn resources() -> Vec<Resource> {
    let kind = |kind: &'static str, resource: &'static str, which: Which| {
        let mut i = info(G, "v1", kind, resource, false);
        i.categories = crate::catalog::names(&["api-extensions"]);
        if which == Which::Policy {
            i.subresources = vec![status_subresource(&i)];
        }
        serve(i, Admission(which))
    };
    vec![
        kind("MutatingWebhookConfiguration", "mutatingwebhookconfigurations", Which::Webhooks { mutating: true }),
        kind("ValidatingAdmissionPolicy", "validatingadmissionpolicies", Which::Policy),
        kind("ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", Which::Binding),
        kind("ValidatingWebhookConfiguration", "validatingwebhookconfigurations", Which::Webhooks { mutating: false }),
    ]
}

/// The v1alpha1 kinds, off by default: MutatingAdmissionPolicy and its binding.
pub fn alpha() -> Vec<Resource> {
    let kind = |kind: &'static str, resource: &'static str, which: Which| {
        let mut i = info(G, "v1alpha1", kind, resource, false);
        i.categories = crate::catalog::names(&["api-extensions"]);
        serve(i, Admission(which))
    };
    vec![
        kind("MutatingAdmissionPolicy", "mutatingadmissionpolicies", Which::MutatingPolicy),
        kind("MutatingAdmissionPolicyBinding", "mutatingadmissionpolicybindings", Which::MutatingBinding),
    ]
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Which {
    Webhooks { mutating: bool },
    Policy,
    Binding,
    MutatingPolicy,
    MutatingBinding,
}

struct Admission(Which);

const WEBHOOK_COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Webhooks", "integer", Describe::Text("Webhooks indicates the number of webhooks registered in this configuration")),
    Column::AGE,
];
const POLICY_COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Validations", "integer", Describe::Text("Validations indicates the number of validation rules defined in this configuration")),
    Column::new("ParamKind", "string", Describe::Text("ParamKind specifies the kind of resources used to parameterize this policy")),
    Column::AGE,
];
const MUTATING_POLICY_COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("Mutations", "integer", Describe::Text("Mutation indicates the number of mutations rules defined in this configuration")),
    Column::new("ParamKind", "string", Describe::Text("ParamKind specifies the kind of resources used to parameterize this policy")),
    Column::AGE,
];
const BINDING_COLUMNS: &[Column] = &[
    Column::NAME,
    Column::new("PolicyName", "string", Describe::Text("PolicyName indicates the policy definition which the policy binding binded to")),
    Column::new("ParamRef", "string", Describe::Text("ParamRef indicates the param resource which sets the configration param")),
    Column::AGE,
];

/// `SetDefaults_Rule` and the selector and match-policy defaults of a webhook or of a
/// policy's `MatchResources`.
fn default_match(m: &mut Map<String, Value>, rules: &str) {
    m.entry("matchPolicy").or_insert_with(|| json!("Equivalent"));
    m.entry("namespaceSelector").or_insert_with(|| json!({}));
    m.entry("objectSelector").or_insert_with(|| json!({}));
    for key in [rules, "excludeResourceRules"] {
        for rule in m.get_mut(key).and_then(Value::as_array_mut).into_iter().flatten() {
            if let Value::Object(r) = rule {
                r.entry("scope").or_insert_with(|| json!("*"));
            }
        }
    }
}

fn default_webhook(w: &mut Map<String, Value>, mutating: bool) {
    w.entry("failurePolicy").or_insert_with(|| json!("Fail"));
    w.entry("timeoutSeconds").or_insert_with(|| json!(10));
    if mutating {
        w.entry("reinvocationPolicy").or_insert_with(|| json!("Never"));
    }
    default_match(w, "rules");
    if let Some(Value::Object(svc)) = w.get_mut("clientConfig").and_then(|c| c.get_mut("service")) {
        svc.entry("port").or_insert_with(|| json!(443));
    }
}

fn strings(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect()
}

fn validate_rule(rule: &Value, at: &str, errs: &mut Vec<FieldError>) {
    for (field, what) in [("operations", "operations"), ("apiGroups", "API groups"), ("apiVersions", "API versions"), ("resources", "resources")] {
        let list = strings(rule.get(field));
        if rule.get(field).and_then(Value::as_array).is_none_or(Vec::is_empty) {
            errs.push(FieldError::required(format!("{at}.{field}"), ""));
        }
        if list.len() > 1 && list.contains(&"*") && field != "resources" {
            errs.push(FieldError::invalid(format!("{at}.{field}"), json!(list), format!("if '*' is present, must not specify other {what}")));
        }
    }
    for (i, op) in rule.get("operations").and_then(Value::as_array).into_iter().flatten().enumerate() {
        supported(errs, Some(op), &format!("{at}.operations[{i}]"), &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"]);
    }
    let resources = strings(rule.get("resources"));
    if resources.contains(&"*/*") && resources.len() > 1 {
        errs.push(FieldError::invalid(format!("{at}.resources"), json!(resources), "if '*/*' is present, must not specify other resources"));
    }
    supported(errs, rule.get("scope"), &format!("{at}.scope"), &["*", "Cluster", "Namespaced"]);
}

fn validate_webhook(w: &Value, at: &str, mutating: bool, errs: &mut Vec<FieldError>) {
    let name = w.get("name").and_then(Value::as_str).unwrap_or_default();
    if name.is_empty() {
        errs.push(FieldError::required(format!("{at}.name"), ""));
    } else if name.split('.').count() < 3 || !dns1123_subdomain(name).is_empty() {
        errs.push(FieldError::invalid(format!("{at}.name"), json!(name), "should be a domain with at least three segments separated by dots"));
    }
    for (i, r) in w.get("rules").and_then(Value::as_array).into_iter().flatten().enumerate() {
        validate_rule(r, &format!("{at}.rules[{i}]"), errs);
    }
    let conditions = checks::Environment { params: false, namespace: false, variables: false, authorizer: true };
    checks::match_conditions(w.get("matchConditions"), &format!("{at}.matchConditions"), conditions, errs);
    supported(errs, w.get("failurePolicy"), &format!("{at}.failurePolicy"), &["Fail", "Ignore"]);
    supported(errs, w.get("matchPolicy"), &format!("{at}.matchPolicy"), &["Equivalent", "Exact"]);
    match w.get("sideEffects") {
        None | Some(Value::Null) => errs.push(FieldError::required(format!("{at}.sideEffects"), "must specify one of None, NoneOnDryRun")),
        s => supported(errs, s, &format!("{at}.sideEffects"), &["None", "NoneOnDryRun"]),
    }
    if let Some(t) = w.get("timeoutSeconds").and_then(Value::as_i64)
        && !(1..=30).contains(&t)
    {
        errs.push(FieldError::invalid(format!("{at}.timeoutSeconds"), json!(t), "the timeout value must be between 1 and 30 seconds"));
    }
    if mutating {
        supported(errs, w.get("reinvocationPolicy"), &format!("{at}.reinvocationPolicy"), &["IfNeeded", "Never"]);
    }
    errs.extend(label_selector(w.get("namespaceSelector"), &format!("{at}.namespaceSelector")));
    errs.extend(label_selector(w.get("objectSelector"), &format!("{at}.objectSelector")));
    let cc = w.get("clientConfig").cloned().unwrap_or_default();
    let (url, svc) = (cc.get("url").is_some_and(|u| !u.is_null()), cc.get("service").is_some_and(|s| !s.is_null()));
    if url == svc {
        errs.push(FieldError::required(format!("{at}.clientConfig"), "exactly one of url or service is required"));
    }
    if let Some(u) = cc.get("url").and_then(Value::as_str)
        && !u.starts_with("https://")
    {
        errs.push(FieldError::invalid(format!("{at}.clientConfig.url"), json!(u), "'https' is the only allowed URL scheme"));
    }
    let versions = strings(w.get("admissionReviewVersions"));
    if versions.is_empty() {
        errs.push(FieldError::required(format!("{at}.admissionReviewVersions"), "must specify one of v1, v1beta1"));
    } else if !versions.iter().any(|v| matches!(*v, "v1" | "v1beta1")) {
        errs.push(FieldError::invalid(format!("{at}.admissionReviewVersions"), json!(versions), "must include at least one of v1, v1beta1"));
    }
}

/// A policy's `matchConstraints` or a binding's `matchResources` (at `at`), whose
/// `resourceRules` a policy must have.
fn validate_match_resources(m: &Value, at: &str, rules_required: bool, errs: &mut Vec<FieldError>) {
    if rules_required && m.get("resourceRules").and_then(Value::as_array).is_none_or(Vec::is_empty) {
        errs.push(FieldError::required(format!("{at}.resourceRules"), ""));
    }
    for key in ["resourceRules", "excludeResourceRules"] {
        for (i, r) in m.get(key).and_then(Value::as_array).into_iter().flatten().enumerate() {
            validate_rule(r, &format!("{at}.{key}[{i}]"), errs);
        }
    }
    match m.get("matchPolicy") {
        None | Some(Value::Null) => errs.push(FieldError::required(format!("{at}.matchPolicy"), "")),
        p => supported(errs, p, &format!("{at}.matchPolicy"), &["Exact", "Equivalent"]),
    }
    for key in ["namespaceSelector", "objectSelector"] {
        errs.extend(label_selector(m.get(key), &format!("{at}.{key}")));
    }
}

/// What a validating and a mutating policy share: `failurePolicy`, `matchConstraints`
/// (a mutating policy's operations only those it can mutate) and `paramKind`.
fn validate_policy_basics(obj: &Value, mutating: bool, errs: &mut Vec<FieldError>) {
    match meta::at(obj, &["spec", "failurePolicy"]) {
        None | Some(Value::Null) => errs.push(FieldError::required("spec.failurePolicy", "")),
        p => supported(errs, p, "spec.failurePolicy", &["Fail", "Ignore"]),
    }
    match meta::at(obj, &["spec", "matchConstraints"]).filter(|m| !m.is_null()) {
        None => errs.push(FieldError::required("spec.matchConstraints", "")),
        Some(m) => {
            validate_match_resources(m, "spec.matchConstraints", true, errs);
            if mutating {
                mutable_operations(m, "spec.matchConstraints", errs);
            }
        }
    }
    if let Some(k) = meta::at(obj, &["spec", "paramKind"]).filter(|k| !k.is_null()) {
        for field in ["apiVersion", "kind"] {
            if k.get(field).and_then(Value::as_str).is_none_or(str::is_empty) {
                errs.push(FieldError::required(format!("spec.paramKind.{field}"), ""));
            }
        }
    }
}

/// A mutating policy's or binding's rules name only operations that write an object
/// (kube's path has no index).
fn mutable_operations(m: &Value, at: &str, errs: &mut Vec<FieldError>) {
    for rule in m.get("resourceRules").and_then(Value::as_array).into_iter().flatten() {
        for op in strings(rule.get("operations")).into_iter().filter(|op| !["*", "CREATE", "UPDATE", "CONNECT"].contains(op)) {
            errs.push(FieldError::not_supported(format!("{at}.resourceRules.operations"), json!(op), &["*", "CONNECT", "CREATE", "UPDATE"]));
        }
    }
}

fn validate_mutating_policy(obj: &Value, errs: &mut Vec<FieldError>) {
    validate_policy_basics(obj, true, errs);
    checks::mutating_policy(obj.get("spec").unwrap_or(&Value::Null), errs);
    match meta::at(obj, &["spec", "reinvocationPolicy"]) {
        None | Some(Value::Null) => errs.push(FieldError::required("spec.reinvocationPolicy", "")),
        Some(Value::String(s)) if s.is_empty() => errs.push(FieldError::required("spec.reinvocationPolicy", "")),
        p => supported(errs, p, "spec.reinvocationPolicy", &["IfNeeded", "Never"]),
    }
}

fn validate_policy(obj: &Value, errs: &mut Vec<FieldError>) {
    validate_policy_basics(obj, false, errs);
    let (validations, audits) =
        (meta::at(obj, &["spec", "validations"]).and_then(Value::as_array), meta::at(obj, &["spec", "auditAnnotations"]).and_then(Value::as_array));
    if validations.is_none_or(Vec::is_empty) && audits.is_none_or(Vec::is_empty) {
        for f in ["spec.validations", "spec.auditAnnotations"] {
            errs.push(FieldError::required(f, "validations or auditAnnotations must contain at least one item"));
        }
    }
    for (i, v) in validations.into_iter().flatten().enumerate() {
        if let Some(msg) = v.get("message").and_then(Value::as_str) {
            let trimmed = msg.trim();
            if !msg.is_empty() && trimmed.is_empty() {
                errs.push(FieldError::invalid(format!("spec.validations[{i}].message"), json!(msg), "message must be non-empty if specified"));
            } else if trimmed.contains(['\n', '\r']) {
                errs.push(FieldError::invalid(format!("spec.validations[{i}].message"), json!(msg), "message must not contain line breaks"));
            }
        }
        supported(errs, v.get("reason"), &format!("spec.validations[{i}].reason"), &["Forbidden", "Invalid", "RequestEntityTooLarge"]);
    }
    checks::policy(meta::name(obj), obj.get("spec").unwrap_or(&Value::Null), errs);
}

/// What a validating and a mutating binding share: `policyName` and `paramRef`.
fn validate_binding_basics(obj: &Value, errs: &mut Vec<FieldError>) {
    let policy = meta::str_at(obj, &["spec", "policyName"]).unwrap_or_default();
    if policy.is_empty() {
        errs.push(FieldError::required("spec.policyName", ""));
    }
    for detail in dns1123_subdomain(policy).into_iter().filter(|_| !policy.is_empty()) {
        errs.push(FieldError::invalid("spec.policyName", json!(policy), detail));
    }
    if let Some(p) = meta::at(obj, &["spec", "paramRef"]).filter(|p| !p.is_null()) {
        let named = p.get("name").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
        match (named, p.get("selector").is_some_and(|s| !s.is_null())) {
            (true, true) => {
                for field in ["name", "selector"] {
                    errs.push(FieldError::forbidden(format!("spec.paramRef.{field}"), "name and selector are mutually exclusive"));
                }
            }
            (false, false) => errs.push(FieldError::required("spec.paramRef", "one of name or selector must be specified")),
            (false, true) => errs.extend(label_selector(p.get("selector"), "spec.paramRef.selector")),
            (true, false) => {}
        }
        match p.get("parameterNotFoundAction") {
            None | Some(Value::Null) => errs.push(FieldError::required("spec.paramRef.parameterNotFoundAction", "")),
            a => supported(errs, a, "spec.paramRef.parameterNotFoundAction", &["Deny", "Allow"]),
        }
    }
}

fn validate_mutating_binding(obj: &Value, errs: &mut Vec<FieldError>) {
    validate_binding_basics(obj, errs);
    if let Some(m) = meta::at(obj, &["spec", "matchResources"]).filter(|m| !m.is_null()) {
        validate_match_resources(m, "spec.matchResources", false, errs);
        mutable_operations(m, "spec.matchResources", errs);
    }
}

fn validate_binding(obj: &Value, errs: &mut Vec<FieldError>) {
    validate_binding_basics(obj, errs);
    let actions = strings(meta::at(obj, &["spec", "validationActions"]));
    if actions.is_empty() {
        errs.push(FieldError::required("spec.validationActions", "at least one validation action is required"));
    }
    for (i, a) in meta::at(obj, &["spec", "validationActions"]).and_then(Value::as_array).into_iter().flatten().enumerate() {
        supported(errs, Some(a), &format!("spec.validationActions[{i}]"), &["Audit", "Deny", "Warn"]);
        if actions[..i.min(actions.len())].contains(&a.as_str().unwrap_or_default()) {
            errs.push(FieldError::duplicate(format!("spec.validationActions[{i}]"), a.clone()));
        }
    }
    // kube's path, as it spells it.
    if let Some(m) = meta::at(obj, &["spec", "matchResources"]).filter(|m| !m.is_null()) {
        validate_match_resources(m, "spec.matchResouces", false, errs);
    }
    if actions.contains(&"Deny") && actions.contains(&"Warn") {
        errs.push(FieldError::invalid(
            "spec.validationActions",
            json!(actions),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
}

impl Strategy for Admission {
    fn default(&self, obj: &mut Value) {
        match self.0 {
            Which::Webhooks { mutating } => {
                for w in obj.get_mut("webhooks").and_then(Value::as_array_mut).into_iter().flatten() {
                    if let Value::Object(w) = w {
                        default_webhook(w, mutating);
                    }
                }
            }
            Which::Policy | Which::MutatingPolicy => {
                let spec = meta::object_at(obj, &["spec"]);
                spec.entry("failurePolicy").or_insert_with(|| json!("Fail"));
                if let Some(Value::Object(m)) = spec.get_mut("matchConstraints") {
                    default_match(m, "resourceRules");
                }
            }
            Which::Binding | Which::MutatingBinding => {
                if let Some(Value::Object(m)) = obj.get_mut("spec").and_then(|s| s.get_mut("matchResources")) {
                    default_match(m, "resourceRules");
                }
                if self.0 == Which::MutatingBinding
                    && let Some(Value::Object(r)) = obj.get_mut("spec").and_then(|s| s.get_mut("paramRef"))
                {
                    r.entry("parameterNotFoundAction").or_insert_with(|| json!("Deny"));
                }
            }
        }
    }

    fn lifecycle(&self) -> Lifecycle {
        match self.0 {
            Which::Webhooks { .. } => Lifecycle::Generation("webhooks"),
            Which::Policy => Lifecycle::StatusAndGeneration,
            Which::Binding | Which::MutatingPolicy | Which::MutatingBinding => Lifecycle::Generation("spec"),
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        match self.0 {
            Which::Webhooks { mutating } => {
                let mut names = Vec::new();
                for (i, w) in obj.get("webhooks").and_then(Value::as_array).into_iter().flatten().enumerate() {
                    validate_webhook(w, &format!("webhooks[{i}]"), mutating, &mut errs);
                    let name = w.get("name").cloned().unwrap_or_default();
                    if names.contains(&name) {
                        errs.push(FieldError::duplicate(format!("webhooks[{i}].name"), name.clone()));
                    }
                    names.push(name);
                }
            }
            Which::Policy => validate_policy(obj, &mut errs),
            Which::Binding => validate_binding(obj, &mut errs),
            Which::MutatingPolicy => validate_mutating_policy(obj, &mut errs),
            Which::MutatingBinding => validate_mutating_binding(obj, &mut errs),
        }
        errs
    }

    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn columns(&self) -> &'static [Column] {
        match self.0 {
            Which::Webhooks { .. } => WEBHOOK_COLUMNS,
            Which::Policy => POLICY_COLUMNS,
            Which::MutatingPolicy => MUTATING_POLICY_COLUMNS,
            Which::Binding | Which::MutatingBinding => BINDING_COLUMNS,
        }
    }

    fn row(&self, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
        let name = json!(meta::name(obj));
        let age = table::age(obj, now);
        match self.0 {
            Which::Webhooks { .. } => vec![name, json!(obj.get("webhooks").and_then(Value::as_array).map_or(0, Vec::len)), age],
            Which::Policy | Which::MutatingPolicy => {
                let kind = match meta::at(obj, &["spec", "paramKind"]).filter(|p| !p.is_null()) {
                    Some(p) => format!("{}/{}", meta::str_at(p, &["apiVersion"]).unwrap_or_default(), meta::str_at(p, &["kind"]).unwrap_or_default()),
                    None => "<unset>".into(),
                };
                let counted = if self.0 == Which::Policy { "validations" } else { "mutations" };
                vec![name, json!(meta::at(obj, &["spec", counted]).and_then(Value::as_array).map_or(0, Vec::len)), json!(kind), age]
            }
            Which::Binding | Which::MutatingBinding => {
                let param = match meta::at(obj, &["spec", "paramRef"]).filter(|p| !p.is_null()) {
                    None => "<unset>".to_string(),
                    Some(p) => match (meta::str_at(p, &["name"]).filter(|n| !n.is_empty()), meta::str_at(p, &["namespace"]).filter(|n| !n.is_empty())) {
                        (Some(n), Some(ns)) => format!("{ns}/{n}"),
                        (Some(n), None) => format!("*/{n}"),
                        (None, _) if p.get("selector").is_some() => table::selector_string(p.get("selector")),
                        (None, _) => "<unset>".to_string(),
                    },
                };
                vec![name, json!(table::str_or(obj, &["spec", "policyName"], "")), json!(param), age]
            }
        }
    }
}
