//! The match conditions of an authorization webhook (`--authorization-config`'s
//! `matchConditions`): CEL expressions over the SubjectAccessReview the webhook would be sent
//! (the variable `request`, an `authorization.k8s.io/v1` `SubjectAccessReviewSpec`), every one
//! of which must be true for the webhook to be asked, as kube's CEL matcher evaluates them:
//! in order, the first false one ending it (the webhook has no opinion), errors collected and
//! given to the webhook's failure policy.
//!
//! Each evaluation is charged its estimated cost at the request's sizes against kube's
//! per-call limit; one past it is an error, as cel-go's cost tracker cancels it.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::Attributes;
use crate::auth::UserInfo;
use crate::cel::cost::{self, Shape};
use crate::cel::{Expression, Type};
use crate::webhook::ReviewVersion;

/// kube's limit of an authorizer's match conditions.
pub const MAX_CONDITIONS: usize = 64;

/// The compiled conditions of one webhook (none: it is always asked).
#[derive(Debug, Default)]
pub struct MatchConditions {
    conditions: Vec<Expression>,
}

impl PartialEq for MatchConditions {
    fn eq(&self, other: &MatchConditions) -> bool {
        self.conditions == other.conditions
    }
}

/// The type of `request`: the v1 `SubjectAccessReviewSpec`, field selectors and label
/// selectors included (kube v1.33's `AuthorizeWithSelectors` is on).
fn request_type() -> Type {
    let object = |fields: &[(&str, Type)]| Type::Object(Arc::new(fields.iter().map(|(k, t)| (k.to_string(), t.clone())).collect::<BTreeMap<_, _>>()));
    let strings = Type::list(Type::String);
    let requirement = object(&[("key", Type::String), ("operator", Type::String), ("values", strings.clone())]);
    let selector = object(&[("rawSelector", Type::String), ("requirements", Type::list(requirement))]);
    let resource = object(&[
        ("namespace", Type::String),
        ("verb", Type::String),
        ("group", Type::String),
        ("version", Type::String),
        ("resource", Type::String),
        ("subresource", Type::String),
        ("name", Type::String),
        ("fieldSelector", selector.clone()),
        ("labelSelector", selector),
    ]);
    let non_resource = object(&[("path", Type::String), ("verb", Type::String)]);
    object(&[
        ("resourceAttributes", resource),
        ("nonResourceAttributes", non_resource),
        ("user", Type::String),
        ("groups", strings.clone()),
        ("extra", Type::map(Type::String, strings)),
        ("uid", Type::String),
    ])
}

/// One expression compiled and checked as kube's authorization CEL compiler checks it: its
/// detail when it does not compile or does not give a bool.
pub fn compile(source: &str) -> Result<Expression, String> {
    let compiled = Expression::compile(source).map_err(|e| format!("compilation failed: {e}"))?;
    let checked = crate::cel::check(&compiled, &[("request", request_type())]);
    if !checked.errors.is_empty() {
        return Err(format!("compilation failed: {}", checked.errors.join("\n")));
    }
    match checked.output {
        Type::Bool | Type::Dyn => Ok(compiled),
        other => Err(format!("must evaluate to bool but got {}", other.name())),
    }
}

impl MatchConditions {
    /// Conditions that [`compile`] each accepted.
    pub fn new(conditions: Vec<Expression>) -> MatchConditions {
        MatchConditions { conditions }
    }

    pub fn is_empty(&self) -> bool {
        self.conditions.is_empty()
    }

    /// Whether `user` doing `attrs` is for the webhook: every condition true; false at the
    /// first that is false; otherwise the errors of those that failed, aggregated.
    pub fn matches(&self, user: &UserInfo, attrs: &Attributes) -> Result<bool, String> {
        if self.conditions.is_empty() {
            return Ok(true);
        }
        let request = request_value(user, attrs);
        let shape = [("request", Shape::of(&request))];
        let mut errors = Vec::new();
        for condition in &self.conditions {
            let failed = |why: String| format!("cel evaluation error: expression '{}' resulted in error: {why}", condition.source());
            if cost::estimate(condition, &shape) > cost::CALL_LIMIT {
                errors.push(failed("operation cancelled: actual cost limit exceeded".into()));
                continue;
            }
            match condition.evaluate(vec![("request", request.clone())]) {
                Ok(crate::cel::Value::Bool(true)) => {}
                Ok(crate::cel::Value::Bool(false)) => return Ok(false),
                Ok(other) => errors.push(format!(
                    "cel evaluation error: expression '{}' eval result type should be bool but got %!W({:?})",
                    condition.source(),
                    other.type_of()
                )),
                Err(e) => errors.push(failed(e)),
            }
        }
        if errors.is_empty() { Ok(true) } else { Err(super::rbac::aggregate(&errors)) }
    }
}

/// `request` as kube's matcher makes it: the v1 review's spec, with the user's name, uid,
/// groups and extra always there, and the seven names of a resource request.
fn request_value(user: &UserInfo, attrs: &Attributes) -> crate::cel::Value {
    let mut spec = super::webhook::spec(user, attrs, ReviewVersion::V1);
    for (field, empty) in [("user", json!("")), ("uid", json!("")), ("groups", json!([])), ("extra", json!({}))] {
        spec.as_object_mut().expect("a spec is an object").entry(field).or_insert(empty);
    }
    if let Some(Value::Object(r)) = spec.get_mut("resourceAttributes") {
        for field in ["namespace", "verb", "group", "version", "resource", "subresource", "name"] {
            r.entry(field).or_insert(json!(""));
        }
    }
    crate::cel::to_value(&spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user() -> UserInfo {
        UserInfo { name: "alice".into(), groups: vec!["dev".into()], ..Default::default() }
    }

    fn conditions(sources: &[&str]) -> MatchConditions {
        MatchConditions::new(sources.iter().map(|s| compile(s).unwrap()).collect())
    }

    #[test]
    fn conditions_are_checked_against_the_review_type() {
        assert_eq!(compile("request.user").unwrap_err(), "must evaluate to bool but got string");
        let e = compile("request.foo == 'x'").unwrap_err();
        assert!(e.starts_with("compilation failed: ERROR: <input>:1:8: undefined field 'foo'"), "{e}");
        assert!(compile("has(request.resourceAttributes) && request.resourceAttributes.namespace == 'dev'").is_ok());
        assert!(compile("request.resourceAttributes.labelSelector.requirements.exists(r, r.key == 'app')").is_ok());
        assert!(compile("'dev' in request.groups && request.extra.size() == 0").is_ok());
    }

    #[test]
    fn every_condition_must_hold_and_errors_are_collected() {
        let pods = Attributes::resource("list", "", "pods", "", "dev", "");
        let path = Attributes { verb: "get".into(), path: "/healthz".into(), ..Default::default() };
        let c = conditions(&["has(request.resourceAttributes)", "request.resourceAttributes.namespace == 'dev'"]);
        assert_eq!(c.matches(&user(), &pods), Ok(true));
        assert_eq!(c.matches(&user(), &path), Ok(false));
        assert_eq!(c.matches(&user(), &Attributes::resource("list", "", "pods", "", "prod", "")), Ok(false));
        // A non-resource request has no resourceAttributes: reading them is an error.
        let c = conditions(&["request.resourceAttributes.verb == 'get'"]);
        assert_eq!(
            c.matches(&user(), &path).unwrap_err(),
            "cel evaluation error: expression 'request.resourceAttributes.verb == 'get'' resulted in error: no such key: resourceAttributes"
        );
        // A false condition ends it, whatever failed before.
        let c = conditions(&["request.resourceAttributes.verb == 'get'", "request.user == 'bob'"]);
        assert_eq!(c.matches(&user(), &path), Ok(false));
        // A user without groups or a uid still has them, empty.
        assert_eq!(conditions(&["request.groups.size() == 0 && request.uid == ''"]).matches(&UserInfo::default(), &path), Ok(true));
    }
}
