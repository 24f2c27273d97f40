//! The review resources: create-only questions answered from the request's user and the
//! authorizer, never stored (`kubectl auth can-i`, `kubectl auth whoami`).

use serde_json::{Value, json};

use super::{info, serve};
use crate::auth::{Peer, UserInfo};
use crate::authz::Attributes;
use crate::authz::rbac::Rule;
use crate::catalog::{Backing, Resource, ReviewContext, Strategy};
use crate::meta;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::{ApiError, FieldError};

pub fn resources() -> Vec<Resource> {
    let review = |group: &'static str, kind: &'static str, plural: &'static str, namespaced: bool, r: Review| {
        let mut i = info(group, "v1", kind, plural, namespaced);
        i.verbs = crate::catalog::names(&["create"]);
        i.backing = Backing::Review;
        serve(i, r)
    };
    vec![
        review("authentication.k8s.io", "SelfSubjectReview", "selfsubjectreviews", false, Review::WhoAmI),
        review("authentication.k8s.io", "TokenReview", "tokenreviews", false, Review::Token),
        review("authorization.k8s.io", "LocalSubjectAccessReview", "localsubjectaccessreviews", true, Review::Access { local: true }),
        review("authorization.k8s.io", "SelfSubjectAccessReview", "selfsubjectaccessreviews", false, Review::SelfAccess),
        review("authorization.k8s.io", "SelfSubjectRulesReview", "selfsubjectrulesreviews", false, Review::Rules),
        review("authorization.k8s.io", "SubjectAccessReview", "subjectaccessreviews", false, Review::Access { local: false }),
    ]
}

enum Review {
    WhoAmI,
    Token,
    SelfAccess,
    /// A SubjectAccessReview, or (`local`) a namespace's LocalSubjectAccessReview.
    Access {
        local: bool,
    },
    Rules,
}

/// A TokenReview's status: the user the token stands for and the audiences it is meant for
/// among those asked, or why it stands for no one.
pub fn token_review_status(user: Result<&UserInfo, &str>, audiences: &[String]) -> Value {
    match user {
        Ok(u) if audiences.is_empty() => json!({"authenticated": true, "user": user_json(u)}),
        Ok(u) => json!({"authenticated": true, "user": user_json(u), "audiences": audiences}),
        Err(e) => json!({"user": {}, "error": e}),
    }
}

/// The audiences a TokenReview asks about (`spec.audiences`; none: the API server's).
pub fn review_audiences(review: &Value) -> Vec<String> {
    review.pointer("/spec/audiences").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
}

/// A TokenReview answered with `status` (as [`Strategy::review`] answers reviews).
pub fn reviewed(mut obj: Value, status: Value) -> Value {
    obj["status"] = status;
    meta::set_meta(&mut obj, "creationTimestamp", Value::Null);
    obj
}

fn user_json(u: &UserInfo) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("username".into(), json!(u.name));
    if !u.uid.is_empty() {
        m.insert("uid".into(), json!(u.uid));
    }
    if !u.groups.is_empty() {
        m.insert("groups".into(), json!(u.groups));
    }
    if !u.extra.is_empty() {
        m.insert("extra".into(), json!(u.extra));
    }
    Value::Object(m)
}

/// The user a SubjectAccessReview asks about (`spec.user`, `groups`, `uid`, `extra`).
fn subject(spec: &Value) -> UserInfo {
    let strings = |v: Option<&Value>| v.and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default();
    UserInfo {
        name: meta::str_at(spec, &["user"]).unwrap_or_default().to_string(),
        uid: meta::str_at(spec, &["uid"]).unwrap_or_default().to_string(),
        groups: strings(spec.get("groups")),
        extra: spec.get("extra").and_then(Value::as_object).map(|m| m.iter().map(|(k, v)| (k.clone(), strings(Some(v)))).collect()).unwrap_or_default(),
    }
}

impl Review {
    fn kind(&self) -> &'static str {
        match self {
            Review::Access { local: true } => "LocalSubjectAccessReview",
            Review::Access { local: false } => "SubjectAccessReview",
            _ => "SelfSubjectAccessReview",
        }
    }

    /// kube's checks of an access review (`ValidateSubjectAccessReviewSpec` and its kin), all
    /// of them reported together.
    fn access_errors(&self, obj: &Value, spec: &Value) -> Vec<FieldError> {
        let (resource, non_resource) = (spec.get("resourceAttributes"), spec.get("nonResourceAttributes"));
        let mut errors = Vec::new();
        if resource.is_some() && non_resource.is_some() {
            errors.push(FieldError::invalid(
                "spec.nonResourceAttributes",
                non_resource.cloned().unwrap_or_default(),
                "cannot be specified in combination with resourceAttributes",
            ));
        }
        if resource.is_none() && non_resource.is_none() {
            errors.push(FieldError::invalid(
                "spec.resourceAttributes",
                Value::Null,
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ));
        }
        if let Some(r) = resource {
            selector_errors(r, &mut errors);
        }
        if let Review::Access { local } = self {
            if meta::str_at(spec, &["user"]).unwrap_or_default().is_empty() && spec.get("groups").and_then(Value::as_array).is_none_or(Vec::is_empty) {
                errors.push(FieldError::invalid("spec.user", Value::String(String::new()), "at least one of user or group must be specified"));
            }
            // A namespace's review asks about that namespace only.
            let namespace = meta::str_at(obj, &["metadata", "namespace"]).unwrap_or_default();
            if *local && let Some(r) = resource {
                let asked = r.get("namespace").and_then(Value::as_str).unwrap_or_default();
                if asked != namespace {
                    errors.push(FieldError::invalid("spec.resourceAttributes.namespace", Value::String(asked.to_string()), "must match metadata.namespace"));
                }
            }
            if *local && let Some(n) = non_resource {
                errors.push(FieldError::invalid("spec.nonResourceAttributes", n.clone(), "disallowed on this kind of request"));
            }
        }
        errors
    }
}

/// A `ResourceRule`, its empty lists left out as Go leaves them.
fn resource_rule(r: &Rule) -> Value {
    let mut v = json!({"verbs": r.verbs});
    for (k, list) in [("apiGroups", &r.api_groups), ("resources", &r.resources), ("resourceNames", &r.resource_names)] {
        if !list.is_empty() {
            v[k] = json!(list);
        }
    }
    v
}

/// kube's checks of a review's `resourceAttributes.fieldSelector` and `labelSelector`
/// (`validateFieldSelectorAttributes`, and its label twin's pairing of the two forms).
fn selector_errors(resource: &Value, errors: &mut Vec<FieldError>) {
    for which in ["fieldSelector", "labelSelector"] {
        let Some(selector) = resource.get(which).filter(|v| !v.is_null()) else { continue };
        let path = format!("spec.resourceAttributes.{which}");
        let raw = selector.get("rawSelector").and_then(Value::as_str).unwrap_or_default();
        let requirements = selector.get("requirements").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        if !raw.is_empty() && !requirements.is_empty() {
            errors.push(FieldError::invalid(format!("{path}.rawSelector"), json!(raw), "may not specified at the same time as requirements"));
        }
        if raw.is_empty() && requirements.is_empty() {
            errors.push(FieldError::required(format!("{path}.requirements"), format!("when {path} is specified, requirements or rawSelector is required")));
        }
        for (i, r) in requirements.iter().enumerate() {
            let at = format!("{path}.requirements[{i}]");
            let key = r.get("key").and_then(Value::as_str).unwrap_or_default();
            if which == "fieldSelector" && key.is_empty() {
                errors.push(FieldError::required(format!("{at}.key"), "must be specified"));
            }
            let values = r.get("values").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            match r.get("operator").and_then(Value::as_str).unwrap_or_default() {
                "In" | "NotIn" if values.is_empty() => {
                    errors.push(FieldError::required(format!("{at}.values"), "must be specified when `operator` is 'In' or 'NotIn'"))
                }
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    errors.push(FieldError::forbidden(format!("{at}.values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
                }
                _ => {}
            }
            // A label requirement's key and values are checked as labels' (`ValidateLabelName`,
            // `IsValidLabelValue`); a field requirement's are not.
            if which == "labelSelector" {
                for message in crate::validation::qualified_name(key) {
                    errors.push(FieldError::invalid(format!("{at}.key"), json!(key), message));
                }
                for (j, value) in values.iter().enumerate() {
                    let text = value.as_str().unwrap_or_default();
                    for message in crate::validation::label_value(text) {
                        errors.push(FieldError::invalid(format!("{at}.values[{j}]"), value.clone(), message));
                    }
                }
            }
        }
    }
}

/// What became of a review's selector on its way to the authorizers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SelectorParse {
    Whole,
    /// Some requirements were dropped, some kept.
    Partial,
    /// It did not parse: the authorizers see none.
    Ignored,
}

impl SelectorParse {
    /// What the review's `evaluationError` says of the selector `which` (kube's
    /// `BuildEvaluationError`).
    fn error(self, which: &str) -> Option<String> {
        match self {
            SelectorParse::Whole => None,
            SelectorParse::Partial => Some(format!("spec.resourceAttributes.{which} partially ignored due to parse error")),
            SelectorParse::Ignored => Some(format!("spec.resourceAttributes.{which} ignored due to parse error")),
        }
    }
}

/// A review's `resourceAttributes.fieldSelector` or `labelSelector` as kube's
/// `ResourceAttributesFrom` reads it: its `rawSelector` parsed (all or nothing), or its
/// requirements, those that do not convert dropped and the rest kept.
fn selector<S: Default>(v: Option<&Value>, parse: fn(&str) -> Result<S, String>, from_requirements: fn(&[Value]) -> (S, usize)) -> (S, SelectorParse) {
    let Some(v) = v else { return (S::default(), SelectorParse::Whole) };
    let mut chosen = (S::default(), SelectorParse::Whole);
    if let Some(raw) = v.get("rawSelector").and_then(Value::as_str).filter(|r| !r.is_empty()) {
        chosen = parse(raw).map_or((S::default(), SelectorParse::Ignored), |s| (s, SelectorParse::Whole));
    }
    let requirements = v.get("requirements").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    if requirements.is_empty() {
        return chosen;
    }
    let (selector, dropped) = from_requirements(requirements);
    let parse = match dropped {
        0 => SelectorParse::Whole,
        n if n == requirements.len() => SelectorParse::Ignored,
        _ => SelectorParse::Partial,
    };
    (selector, parse)
}

/// What a review asks about, and what became of its field and label selectors.
fn attributes(spec: &Value) -> (Attributes, [SelectorParse; 2]) {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    match (spec.get("resourceAttributes"), spec.get("nonResourceAttributes")) {
        (Some(r), _) => {
            let (field_selector, fields) = selector(r.get("fieldSelector"), FieldSelector::parse, FieldSelector::from_review_requirements);
            let (label_selector, labels) = selector(r.get("labelSelector"), LabelSelector::parse, LabelSelector::from_review_requirements);
            let attributes = Attributes {
                verb: s(r, "verb"),
                group: s(r, "group"),
                version: s(r, "version"),
                resource: s(r, "resource"),
                subresource: s(r, "subresource"),
                namespace: s(r, "namespace"),
                name: s(r, "name"),
                path: String::new(),
                resource_request: true,
                field_selector,
                label_selector,
            };
            (attributes, [fields, labels])
        }
        (None, Some(n)) => (Attributes { verb: s(n, "verb"), path: s(n, "path"), ..Default::default() }, [SelectorParse::Whole; 2]),
        (None, None) => (Attributes::default(), [SelectorParse::Whole; 2]),
    }
}

impl Strategy for Review {
    fn review(&self, obj: Value, ctx: &ReviewContext) -> Result<Value, ApiError> {
        let status = match self {
            Review::WhoAmI => json!({"userInfo": user_json(ctx.user)}),
            Review::Token => {
                let token = meta::str_at(&obj, &["spec", "token"]).unwrap_or_default().to_string();
                let user = ctx.authenticator.authenticate(&[("Authorization".into(), format!("Bearer {token}"))], &Peer::default(), "");
                token_review_status(user.as_ref().map_err(|_| "invalid bearer token"), &[])
            }
            Review::SelfAccess | Review::Access { .. } => {
                let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
                let errors = self.access_errors(&obj, &spec);
                if !errors.is_empty() {
                    let kind = crate::status::GroupKind { group: "authorization.k8s.io".into(), kind: self.kind().into() };
                    return Err(ApiError::invalid(&kind, "", &errors));
                }
                let subject = match self {
                    Review::Access { .. } => subject(&spec),
                    _ => ctx.user.clone(),
                };
                let (attributes, [fields, labels]) = attributes(&spec);
                let d = ctx.decider.authorize(&subject, &attributes);
                let mut st = json!({"allowed": d.allowed});
                if d.denied {
                    st["denied"] = json!(true);
                }
                if !d.reason.is_empty() {
                    st["reason"] = json!(d.reason);
                }
                // kube's `BuildEvaluationError`: the authorizers' errors, then the selectors'.
                let errors: Vec<String> =
                    [Some(d.error).filter(|e| !e.is_empty()), fields.error("fieldSelector"), labels.error("labelSelector")].into_iter().flatten().collect();
                if !errors.is_empty() {
                    st["evaluationError"] = json!(errors.join("; "));
                }
                st
            }
            Review::Rules => {
                let namespace = meta::str_at(&obj, &["spec", "namespace"]).unwrap_or_default();
                if namespace.is_empty() {
                    return Err(ApiError::bad_request("no namespace on request"));
                }
                let review = ctx.decider.authorizer.rules_for(ctx.decider.state, ctx.user, namespace);
                let mut st = json!({
                    "resourceRules": review.resource_rules.iter().map(resource_rule).collect::<Vec<_>>(),
                    "nonResourceRules": review.non_resource_rules.iter().map(|r| json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls})).collect::<Vec<_>>(),
                    "incomplete": review.incomplete,
                });
                if !review.evaluation_error.is_empty() {
                    st["evaluationError"] = json!(review.evaluation_error);
                }
                st
            }
        };
        Ok(reviewed(obj, status))
    }
}
