//! The review resources: create-only questions answered from the request's user and the
//! authorizer, never stored (`kubectl auth can-i`, `kubectl auth whoami`).

use serde_json::{Value, json};

use super::{info, serve};
use crate::auth::{Peer, UserInfo};
use crate::authz::Attributes;
use crate::authz::rbac::Rule;
use crate::catalog::{Backing, Resource, ReviewContext, Strategy};
use crate::meta;
use crate::selector::FieldSelector;
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

/// A review's `resourceAttributes.fieldSelector`: its `rawSelector`, or its requirements
/// (`In` and `NotIn` with one value are `=` and `!=`); empty when it does not parse, as kube
/// leaves an authorizer no requirements then.
fn field_selector(v: Option<&Value>) -> FieldSelector {
    let Some(v) = v else { return FieldSelector::default() };
    if let Some(raw) = v.get("rawSelector").and_then(Value::as_str) {
        return FieldSelector::parse(raw).unwrap_or_default();
    }
    let mut terms = Vec::new();
    for r in v.get("requirements").and_then(Value::as_array).into_iter().flatten() {
        let values: Vec<&str> = r.get("values").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        let key = r.get("key").and_then(Value::as_str).unwrap_or_default();
        let equal = match r.get("operator").and_then(Value::as_str) {
            Some("In") => true,
            Some("NotIn") => false,
            _ => return FieldSelector::default(),
        };
        let [value] = values[..] else { return FieldSelector::default() };
        terms.push((key.to_string(), equal, value.to_string()));
    }
    FieldSelector::of(terms)
}

fn attributes(spec: &Value) -> Attributes {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    match (spec.get("resourceAttributes"), spec.get("nonResourceAttributes")) {
        (Some(r), _) => Attributes {
            verb: s(r, "verb"),
            group: s(r, "group"),
            resource: s(r, "resource"),
            subresource: s(r, "subresource"),
            namespace: s(r, "namespace"),
            name: s(r, "name"),
            path: String::new(),
            resource_request: true,
            field_selector: field_selector(r.get("fieldSelector")),
        },
        (None, Some(n)) => Attributes { verb: s(n, "verb"), path: s(n, "path"), ..Default::default() },
        (None, None) => Attributes::default(),
    }
}

impl Strategy for Review {
    fn review(&self, obj: Value, ctx: &ReviewContext) -> Result<Value, ApiError> {
        let status = match self {
            Review::WhoAmI => json!({"userInfo": user_json(ctx.user)}),
            Review::Token => {
                let token = meta::str_at(&obj, &["spec", "token"]).unwrap_or_default().to_string();
                let user = ctx.authenticator.authenticate(&[("Authorization".into(), format!("Bearer {token}"))], &Peer::default());
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
                let d = ctx.authorizer.authorize(ctx.authz, &subject, &attributes(&spec));
                let mut st = json!({"allowed": d.allowed});
                if !d.reason.is_empty() {
                    st["reason"] = json!(d.reason);
                }
                st
            }
            Review::Rules => {
                let namespace = meta::str_at(&obj, &["spec", "namespace"]).unwrap_or_default();
                let review = ctx.authorizer.rules_for(ctx.authz, ctx.user, namespace);
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
