//! The review resources: create-only questions answered from the request's user and the
//! authorizer, never stored (`kubectl auth can-i`, `kubectl auth whoami`).

use serde_json::{Value, json};

use super::{info, serve};
use crate::auth::{Attributes, Peer};
use crate::catalog::{Backing, Resource, ReviewContext, Strategy};
use crate::meta;
use crate::status::ApiError;

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
        review("authorization.k8s.io", "LocalSubjectAccessReview", "localsubjectaccessreviews", true, Review::Access),
        review("authorization.k8s.io", "SelfSubjectAccessReview", "selfsubjectaccessreviews", false, Review::SelfAccess),
        review("authorization.k8s.io", "SelfSubjectRulesReview", "selfsubjectrulesreviews", false, Review::Rules),
        review("authorization.k8s.io", "SubjectAccessReview", "subjectaccessreviews", false, Review::Access),
    ]
}

enum Review {
    WhoAmI,
    Token,
    SelfAccess,
    Access,
    Rules,
}

fn user_json(u: &crate::auth::UserInfo) -> Value {
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
        },
        (None, Some(n)) => Attributes { verb: s(n, "verb"), path: s(n, "path"), ..Default::default() },
        (None, None) => Attributes::default(),
    }
}

impl Strategy for Review {
    fn review(&self, mut obj: Value, ctx: &ReviewContext) -> Result<Value, ApiError> {
        let status = match self {
            Review::WhoAmI => json!({"userInfo": user_json(ctx.user)}),
            Review::Token => {
                let token = meta::str_at(&obj, &["spec", "token"]).unwrap_or_default().to_string();
                match ctx.authenticator.authenticate(&[("Authorization".into(), format!("Bearer {token}"))], &Peer::default()) {
                    Ok(u) => json!({"authenticated": true, "user": user_json(&u)}),
                    Err(_) => json!({"user": {}, "error": "invalid bearer token"}),
                }
            }
            Review::SelfAccess | Review::Access => {
                let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
                if spec.get("resourceAttributes").is_some() == spec.get("nonResourceAttributes").is_some() {
                    return Err(ApiError::invalid(
                        &crate::status::GroupKind { group: "authorization.k8s.io".into(), kind: "SelfSubjectAccessReview".into() },
                        "",
                        &[crate::status::FieldError::invalid(
                            "spec.resourceAttributes",
                            Value::Null,
                            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                        )],
                    ));
                }
                let d = ctx.authorizer.authorize(ctx.user, &attributes(&spec));
                let mut st = json!({"allowed": d.allowed});
                if !d.reason.is_empty() {
                    st["reason"] = json!(d.reason);
                }
                st
            }
            Review::Rules => json!({
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": false,
            }),
        };
        obj["status"] = status;
        meta::set_meta(&mut obj, "creationTimestamp", Value::Null);
        Ok(obj)
    }
}
