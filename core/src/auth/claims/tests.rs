use serde_json::json;

use super::*;

fn claims(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn expr(source: &str) -> Arc<Expression> {
    compile(source, Variable::Claims, false).unwrap()
}

fn rule(source: &str, variable: Variable, message: &str) -> Rule {
    Rule { expression: compile(source, variable, true).unwrap(), message: message.into() }
}

fn by_claims() -> ClaimMapping {
    ClaimMapping {
        username: Source::Claim { claim: "sub".into(), prefix: "oidc:".into() },
        groups: Some(Source::Claim { claim: "groups".into(), prefix: "g:".into() }),
        uid: Some(Source::Claim { claim: "uid".into(), prefix: String::new() }),
        extra: Vec::new(),
        required_claims: vec![("tenant".into(), "a".into())],
        claim_rules: Vec::new(),
        user_rules: Vec::new(),
    }
}

#[test]
fn claims_map_to_the_user_with_prefixes_and_go_s_errors() {
    let m = by_claims();
    let u = m.user(&claims(json!({"sub": "jane", "groups": ["dev", ""], "uid": "7", "tenant": "a", "jti": "j1"}))).unwrap();
    assert_eq!((u.name.as_str(), u.uid.as_str()), ("oidc:jane", "7"));
    assert_eq!(u.groups, ["g:dev", "g:"], "empty groups of a claim are kept");
    assert_eq!(u.extra["authentication.kubernetes.io/credential-id"], ["JTI=j1"]);
    let err = |c: Value| m.user(&claims(c)).unwrap_err();
    assert_eq!(err(json!({"sub": 5})), "oidc: parse username claims \"sub\": json: cannot unmarshal number into Go value of type string");
    assert_eq!(err(json!({"sub": "j", "groups": [1]})), "oidc: parse groups claim \"groups\": json: cannot unmarshal array into Go value of type string");
    assert_eq!(err(json!({"sub": "j"})), "oidc: parse uid claim \"uid\": claim not present");
    // The mappings come before the required claims.
    assert_eq!(err(json!({"sub": "j", "uid": "1", "tenant": "b"})), "oidc: required claim tenant value does not match. Got = b, want = a");
    assert_eq!(err(json!({"sub": "j", "uid": "1", "tenant": 1})), "oidc: parse claim tenant: json: cannot unmarshal number into Go value of type string");
    // A null username claim is empty, not refused.
    assert_eq!(m.user(&claims(json!({"sub": null, "uid": "1", "tenant": "a"}))).unwrap().name, "oidc:");
}

#[test]
fn expressions_map_claims_and_rules_check_claims_and_the_user() {
    let m = ClaimMapping {
        username: Source::Expression(expr("claims.email + ':external'")),
        groups: Some(Source::Expression(expr("claims.roles.map(r, 'role:' + r)"))),
        uid: Some(Source::Expression(expr("claims.sub"))),
        extra: vec![("example.com/tenant".into(), expr("claims.tenant")), ("example.com/none".into(), expr("''"))],
        required_claims: Vec::new(),
        claim_rules: vec![rule("claims.?email_verified.orValue(true) == true", Variable::Claims, "email must be verified")],
        user_rules: vec![rule("!user.username.startsWith('system:')", Variable::User, "no system users")],
    };
    let good = json!({"email": "jane@example.com", "roles": ["admin", ""], "sub": "42", "tenant": ["a", "b"]});
    let u = m.user(&claims(good.clone())).unwrap();
    assert_eq!((u.name.as_str(), u.uid.as_str()), ("jane@example.com:external", "42"));
    assert_eq!(u.groups, ["role:admin", "role:"]);
    assert_eq!(u.extra["example.com/tenant"], ["a", "b"]);
    assert!(!u.extra.contains_key("example.com/none"), "an empty value is left out");
    let err = |c: Value| m.user(&claims(c)).unwrap_err();
    let mut unverified = good.clone();
    unverified["email_verified"] = json!(false);
    assert_eq!(
        err(unverified),
        "oidc: error evaluating claim validation expression: validation expression 'claims.?email_verified.orValue(true) == true' failed: email must be verified"
    );
    assert_eq!(
        err(json!({"sub": "1"})),
        "oidc: error evaluating username claim expression: expression 'claims.email + ':external'' resulted in error: no such key: email"
    );
    let mut system = good.clone();
    system["email"] = json!("system:x");
    assert_eq!(
        err(system),
        "oidc: error evaluating user info validation rule: validation expression '!user.username.startsWith('system:')' failed: no system users"
    );
    let mut bad_tenant = good;
    bad_tenant["tenant"] = json!(5);
    assert_eq!(err(bad_tenant), "oidc: error evaluating extra claim expression: claims.tenant: expression must return a string or a list of strings");
    let empty = ClaimMapping { username: Source::Expression(expr("''")), ..m.clone() };
    assert_eq!(empty.user(&claims(json!({}))).unwrap_err(), "oidc: empty username via CEL expression is not allowed");
    let number = ClaimMapping { username: Source::Expression(expr("1")), ..m };
    assert_eq!(
        number.user(&claims(json!({}))).unwrap_err(),
        "oidc: error evaluating username claim expression: username claim expression must return a string"
    );
}

#[test]
fn expressions_are_checked_in_their_environment() {
    assert_eq!(compile("claims.admin", Variable::Claims, true).unwrap_err(), "must evaluate to bool");
    assert!(compile("claims.admin == true", Variable::Claims, true).is_ok());
    let e = compile("user.username == ''", Variable::Claims, true).unwrap_err();
    assert!(e.starts_with("compilation failed: ERROR: <input>:1:1: undeclared reference to 'user'"), "{e}");
    let e = compile("user.name == ''", Variable::User, true).unwrap_err();
    assert!(e.starts_with("compilation failed: ERROR: <input>:1:5: undefined field 'name'"), "{e}");
}
