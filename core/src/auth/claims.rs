//! What a verified JWT's claims make of its user, as kube's JWT authenticator maps them
//! (`claimMappings`, `claimValidationRules`, `userValidationRules` of an
//! `--authentication-config` JWT authenticator; the `--oidc-*` flags make the same mappings of
//! claims): the username, groups and uid from a claim (with a prefix) or a CEL expression over
//! `claims`; extra values from expressions; then the required claims, the validation
//! expressions over `claims`, and the rules over the `user` made; each failure in kube's words.
//!
//! Every expression is charged its estimated cost at the token's sizes against kube's
//! per-call limit; one past it fails, as cel-go's cost tracker cancels it.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::UserInfo;
use crate::cel::cost::{self, Shape};
use crate::cel::{Expression, Type};

/// An expression with what a failing rule says.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub expression: Arc<Expression>,
    pub message: String,
}

/// Where a name comes from: a claim (behind a prefix), or an expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    Claim { claim: String, prefix: String },
    Expression(Arc<Expression>),
}

/// A JWT authenticator's mappings and rules.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimMapping {
    pub username: Source,
    pub groups: Option<Source>,
    pub uid: Option<Source>,
    /// Extra keys and their value expressions, in order.
    pub extra: Vec<(String, Arc<Expression>)>,
    /// Claims that must be strings of these values.
    pub required_claims: Vec<(String, String)>,
    pub claim_rules: Vec<Rule>,
    pub user_rules: Vec<Rule>,
}

/// The environment an expression is compiled in: `claims` (a map of anything) or `user`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variable {
    Claims,
    User,
}

impl Variable {
    fn name(self) -> &'static str {
        match self {
            Variable::Claims => "claims",
            Variable::User => "user",
        }
    }

    fn ty(self) -> Type {
        match self {
            Variable::Claims => Type::map(Type::String, Type::Dyn),
            Variable::User => {
                let strings = Type::list(Type::String);
                let fields = [("username", Type::String), ("uid", Type::String), ("groups", strings.clone()), ("extra", Type::map(Type::String, strings))];
                Type::Object(Arc::new(fields.into_iter().map(|(k, t)| (k.to_string(), t)).collect::<BTreeMap<_, _>>()))
            }
        }
    }
}

/// `source` compiled and checked in `variable`'s environment, as kube's authentication CEL
/// compiler checks it (`boolean`: it must give a bool); the detail of why not.
pub fn compile(source: &str, variable: Variable, boolean: bool) -> Result<Arc<Expression>, String> {
    let compiled = Expression::compile(source).map_err(|e| format!("compilation failed: {e}"))?;
    let checked = crate::cel::check(&compiled, &[(variable.name(), variable.ty())]);
    if !checked.errors.is_empty() {
        return Err(format!("compilation failed: {}", checked.errors.join("\n")));
    }
    // kube's checker types every claim `dyn`, which is no bool: a rule that only reads one
    // is refused. (kapi's checker also says `dyn` of what it cannot type, which passes.)
    let output_bool = match checked.output {
        Type::Bool => true,
        Type::Dyn => !compiled.is_access(),
        _ => false,
    };
    if boolean && !output_bool {
        return Err("must evaluate to bool".into());
    }
    Ok(Arc::new(compiled))
}

/// One evaluation, charged against kube's per-call limit; the error in kube's words
/// (`expression 'x' resulted in error: no such key: x`).
fn evaluate(expr: &Expression, variable: Variable, value: &crate::cel::Value) -> Result<crate::cel::Value, String> {
    let failed = |why: &str| format!("expression '{}' resulted in error: {why}", expr.source());
    if cost::estimate(expr, &[(variable.name(), Shape::of(value))]) > cost::CALL_LIMIT {
        return Err(failed("operation cancelled: actual cost limit exceeded"));
    }
    expr.evaluate(vec![(variable.name(), value.clone())]).map_err(|e| failed(&e))
}

/// A claim read as Go's JSON decoder reads it into a string (`null` is empty).
fn string_claim(claims: &Map<String, Value>, name: &str) -> Result<String, String> {
    match claims.get(name) {
        None => Err("claim not present".into()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Null) => Ok(String::new()),
        Some(other) => Err(go_unmarshal(other, "string")),
    }
}

/// Go's error for a JSON value that does not fit a Go type.
fn go_unmarshal(v: &Value, go_type: &str) -> String {
    let kind = match v {
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    };
    format!("json: cannot unmarshal {kind} into Go value of type {go_type}")
}

/// A CEL result as kube's `convertCELValueToStringList` takes it: a string (none if empty), a
/// list of strings (the empty ones dropped), or null.
fn string_list(v: &crate::cel::Value) -> Option<Vec<String>> {
    match v {
        crate::cel::Value::String(s) => Some(if s.is_empty() { Vec::new() } else { vec![s.to_string()] }),
        crate::cel::Value::Null => Some(Vec::new()),
        crate::cel::Value::List(items) => items
            .iter()
            .filter_map(|item| match item {
                crate::cel::Value::String(s) if s.is_empty() => None,
                crate::cel::Value::String(s) => Some(Some(s.to_string())),
                _ => Some(None),
            })
            .collect(),
        _ => None,
    }
}

impl ClaimMapping {
    /// The user `claims` (verified) stand for, or why not, in kube's order: username, groups,
    /// uid, extra, required claims, claim validation rules, user validation rules.
    pub fn user(&self, claims: &Map<String, Value>) -> Result<UserInfo, String> {
        let cel_claims = crate::cel::to_value(&Value::Object(claims.clone()));
        let name = self.username(claims, &cel_claims)?;
        let groups = self.groups(claims, &cel_claims)?;
        let uid = match &self.uid {
            None => String::new(),
            Some(Source::Claim { claim, .. }) => string_claim(claims, claim).map_err(|e| format!("oidc: parse uid claim {claim:?}: {e}"))?,
            Some(Source::Expression(expr)) => match evaluate(expr, Variable::Claims, &cel_claims) {
                Ok(crate::cel::Value::String(s)) => s.to_string(),
                Ok(_) => return Err("oidc: error evaluating uid claim expression: uid claim expression must return a string".into()),
                Err(e) => return Err(format!("oidc: error evaluating uid claim expression: {e}")),
            },
        };
        let mut extra = BTreeMap::new();
        if let Some(Value::String(jti)) = claims.get("jti").filter(|j| j.as_str().is_some_and(|j| !j.is_empty())) {
            extra.insert("authentication.kubernetes.io/credential-id".to_string(), vec![format!("JTI={jti}")]);
        }
        for (key, expr) in &self.extra {
            let value = evaluate(expr, Variable::Claims, &cel_claims)?;
            let values = string_list(&value).ok_or_else(|| {
                format!("oidc: error evaluating extra claim expression: {}: expression must return a string or a list of strings", expr.source())
            })?;
            if !values.is_empty() {
                extra.insert(key.clone(), values);
            }
        }
        for (claim, want) in &self.required_claims {
            let got = match claims.get(claim) {
                None => return Err(format!("oidc: required claim {claim} not present in ID token")),
                Some(v) => string_claim(claims, claim).map_err(|_| format!("oidc: parse claim {claim}: {}", go_unmarshal(v, "string")))?,
            };
            if &got != want {
                return Err(format!("oidc: required claim {claim} value does not match. Got = {got}, want = {want}"));
            }
        }
        check_rules(&self.claim_rules, Variable::Claims, &cel_claims, "claim validation expression")?;
        let user = UserInfo { name, uid, groups, extra };
        let user_value = serde_json::json!({"username": user.name, "uid": user.uid, "groups": user.groups, "extra": user.extra});
        check_rules(&self.user_rules, Variable::User, &crate::cel::to_value(&user_value), "user info validation rule")?;
        Ok(user)
    }

    fn username(&self, claims: &Map<String, Value>, cel_claims: &crate::cel::Value) -> Result<String, String> {
        match &self.username {
            Source::Expression(expr) => match evaluate(expr, Variable::Claims, cel_claims) {
                Ok(crate::cel::Value::String(s)) if s.is_empty() => Err("oidc: empty username via CEL expression is not allowed".into()),
                Ok(crate::cel::Value::String(s)) => Ok(s.to_string()),
                Ok(_) => Err("oidc: error evaluating username claim expression: username claim expression must return a string".into()),
                Err(e) => Err(format!("oidc: error evaluating username claim expression: {e}")),
            },
            Source::Claim { claim, prefix } => {
                let username = string_claim(claims, claim).map_err(|e| format!("oidc: parse username claims {claim:?}: {e}"))?;
                if claim == "email" {
                    match claims.get("email_verified") {
                        None | Some(Value::Bool(true)) => {}
                        Some(Value::Bool(false) | Value::Null) => return Err("oidc: email not verified".into()),
                        Some(other) => return Err(format!("oidc: parse 'email_verified' claim: {}", go_unmarshal(other, "bool"))),
                    }
                }
                Ok(format!("{prefix}{username}"))
            }
        }
    }

    fn groups(&self, claims: &Map<String, Value>, cel_claims: &crate::cel::Value) -> Result<Vec<String>, String> {
        match &self.groups {
            None => Ok(Vec::new()),
            Some(Source::Claim { claim, prefix }) => {
                let groups = match claims.get(claim) {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::String(g)) => vec![g.clone()],
                    Some(Value::Array(items)) if items.iter().all(Value::is_string) => items.iter().filter_map(Value::as_str).map(str::to_string).collect(),
                    Some(Value::Array(_)) => return Err(format!("oidc: parse groups claim {claim:?}: {}", go_unmarshal(&Value::Array(Vec::new()), "string"))),
                    Some(other) => return Err(format!("oidc: parse groups claim {claim:?}: {}", go_unmarshal(other, "string"))),
                };
                Ok(groups.into_iter().map(|g| format!("{prefix}{g}")).collect())
            }
            Some(Source::Expression(expr)) => {
                let value = evaluate(expr, Variable::Claims, cel_claims).map_err(|e| format!("oidc: error evaluating group claim expression: {e}"))?;
                string_list(&value).ok_or_else(|| "oidc: error evaluating group claim expression: expression must return a string or a list of strings".into())
            }
        }
    }
}

/// Rules evaluated all (the first error ends it), then the first false one's message.
fn check_rules(rules: &[Rule], variable: Variable, value: &crate::cel::Value, what: &str) -> Result<(), String> {
    let mut results = Vec::with_capacity(rules.len());
    for rule in rules {
        results.push(evaluate(&rule.expression, variable, value).map_err(|e| format!("oidc: error evaluating {what}: {e}"))?);
    }
    for (rule, result) in rules.iter().zip(results) {
        match result {
            crate::cel::Value::Bool(true) => {}
            crate::cel::Value::Bool(false) => {
                return Err(format!("oidc: error evaluating {what}: validation expression '{}' failed: {}", rule.expression.source(), rule.message));
            }
            _ => return Err(format!("oidc: error evaluating {what}: validation expression must return a boolean")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
