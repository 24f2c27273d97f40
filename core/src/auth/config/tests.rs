use super::*;

const HEAD: &str = "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\n";

fn load(text: &str) -> Result<AuthenticationConfig, String> {
    AuthenticationConfig::load("/etc/authn.yaml", text.as_bytes(), &["https://kubernetes.default.svc.cluster.local".to_string()])
}

/// One JWT authenticator of `issuer` with `rest` (indented as its fields) after the issuer.
fn jwt(issuer: &str, rest: &str) -> String {
    format!("- issuer:\n    url: {issuer}\n    audiences: [kapi]\n{rest}")
}

const BY_SUB: &str = "  claimMappings:\n    username:\n      claim: sub\n      prefix: \"\"\n";

fn err(text: &str) -> String {
    load(text).unwrap_err().trim_start_matches("invalid authentication configuration: ").to_string()
}

#[test]
fn a_whole_file_is_read() {
    let text = format!(
        "{HEAD}jwt:\n{}{}anonymous:\n  enabled: true\n  conditions:\n  - path: /livez\n",
        jwt(
            "https://one.example",
            "  claimValidationRules:\n  - claim: hd\n    requiredValue: example.com\n  - expression: claims.?admin.orValue(false) == false\n    message: no admins\n  claimMappings:\n    username:\n      expression: claims.sub\n    groups:\n      claim: groups\n      prefix: 'one:'\n    uid:\n      claim: sub\n    extra:\n    - key: example.com/tenant\n      valueExpression: claims.tenant\n  userValidationRules:\n  - expression: \"!user.username.startsWith('system:')\"\n    message: no system users\n"
        ),
        "- issuer:\n    url: https://two.example\n    discoveryURL: https://discovery.example/two\n    audiences: [a, b]\n    audienceMatchPolicy: MatchAny\n"
            .to_string()
            + BY_SUB
    );
    let config = load(&text).unwrap();
    assert_eq!(config.jwt.len(), 2);
    let one = &config.jwt[0];
    assert_eq!(one.mapping.required_claims, [("hd".to_string(), "example.com".to_string())]);
    assert_eq!(one.mapping.claim_rules[0].message, "no admins");
    assert!(matches!(&one.mapping.groups, Some(Source::Claim { claim, prefix }) if claim == "groups" && prefix == "one:"));
    assert_eq!(one.mapping.extra[0].0, "example.com/tenant");
    assert_eq!(config.jwt[1].discovery_url.as_deref(), Some("https://discovery.example/two"));
    assert_eq!(config.jwt[1].audiences, ["a", "b"]);
    assert_eq!(config.anonymous.as_ref().unwrap().anonymous(), Anonymous::Paths(vec!["/livez".into()]));
    // No jwt at all is fine; the anonymous section alone.
    assert_eq!(load(&format!("{HEAD}anonymous:\n  enabled: false\n")).unwrap().anonymous.unwrap().anonymous(), Anonymous::Off);
}

#[test]
fn decoding_is_strict_and_an_empty_file_is_refused() {
    assert_eq!(load("").unwrap_err(), "failed to load authentication configuration from file \"/etc/authn.yaml\": empty config data");
    let e = load(&format!("{HEAD}jwt:\n{}    color: red\n", jwt("https://one.example", BY_SUB))).unwrap_err();
    assert_eq!(
        e,
        "failed to load authentication configuration from file \"/etc/authn.yaml\": strict decoding error: unknown field \"jwt[0].claimMappings.color\""
    );
    let e = load("apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\n").unwrap_err();
    assert!(e.contains("no kind \"AuthenticationConfiguration\" is registered for version \"apiserver.config.k8s.io/v1\""), "{e}");
}

#[test]
fn issuers_and_audiences_are_checked_as_kube_checks_them() {
    let one = |issuer: &str, rest: &str| err(&format!("{HEAD}jwt:\n{}", jwt(issuer, &format!("{rest}{BY_SUB}"))));
    assert_eq!(one("http://one.example", ""), "jwt[0].issuer.url: Invalid value: \"http://one.example\": URL scheme must be https");
    assert_eq!(
        one("https://kubernetes.default.svc.cluster.local", ""),
        "jwt[0].issuer.url: Invalid value: \"https://kubernetes.default.svc.cluster.local\": URL must not overlap with disallowed issuers: [https://kubernetes.default.svc.cluster.local]"
    );
    assert_eq!(one("https://one.example?a=b", ""), "jwt[0].issuer.url: Invalid value: \"https://one.example?a=b\": URL must not contain a query");
    assert_eq!(
        one("https://one.example", "    discoveryURL: https://one.example/\n"),
        "jwt[0].issuer.discoveryURL: Invalid value: \"https://one.example/\": discoveryURL must be different from URL"
    );
    assert_eq!(
        one("https://one.example", "    certificateAuthority: nonsense\n"),
        "jwt[0].issuer.certificateAuthority: Invalid value: \"<omitted>\": data does not contain any valid RSA or ECDSA certificates"
    );
    let audiences = |list: &str, policy: &str| err(&format!("{HEAD}jwt:\n- issuer:\n    url: https://one.example\n    audiences: {list}\n{policy}{BY_SUB}"));
    assert_eq!(audiences("[]", ""), "jwt[0].issuer.audiences: Required value: at least one jwt[0].issuer.audiences is required");
    assert_eq!(
        audiences("[a, a]", ""),
        "[jwt[0].issuer.audiences[1]: Duplicate value: \"a\", jwt[0].issuer.audienceMatchPolicy: Invalid value: \"\": audienceMatchPolicy must be MatchAny for multiple audiences]"
    );
    assert_eq!(
        audiences("[a]", "    audienceMatchPolicy: MatchAll\n"),
        "jwt[0].issuer.audienceMatchPolicy: Invalid value: \"MatchAll\": audienceMatchPolicy must be empty or MatchAny for single audience"
    );
    let twice = format!("{HEAD}jwt:\n{}{}", jwt("https://one.example", BY_SUB), jwt("https://one.example", BY_SUB));
    assert_eq!(err(&twice), "jwt[1].issuer.url: Duplicate value: \"https://one.example\"");
    assert_eq!(
        err(&format!("{HEAD}jwt:\n- issuer: {{}}\n{BY_SUB}")),
        "[jwt[0].issuer.url: Required value: URL is required, jwt[0].issuer.audiences: Required value: at least one jwt[0].issuer.audiences is required]"
    );
}

#[test]
fn rules_and_mappings_are_checked_as_kube_checks_them() {
    let with = |rest: &str| err(&format!("{HEAD}jwt:\n{}", jwt("https://one.example", rest)));
    assert_eq!(
        with(&format!("  claimValidationRules:\n  - claim: a\n    expression: 'true'\n  - {{}}\n  - claim: b\n    message: m\n{BY_SUB}")),
        "[jwt[0].claimValidationRules[0]: Invalid value: \"a\": claim and expression can't both be set, jwt[0].claimValidationRules[1]: Required value: claim or expression is required, jwt[0].claimValidationRules[2].message: Invalid value: \"m\": message can't be set when claim is set]"
    );
    assert_eq!(
        with(&format!("  claimValidationRules:\n  - expression: claims.admin\n{BY_SUB}")),
        "jwt[0].claimValidationRules[0].expression: Invalid value: \"claims.admin\": must evaluate to bool"
    );
    assert_eq!(with("  claimMappings: {}\n"), "jwt[0].claimMappings.username: Required value: claim or expression is required");
    assert_eq!(
        with("  claimMappings:\n    username:\n      claim: sub\n"),
        "jwt[0].claimMappings.username.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing"
    );
    assert_eq!(
        with("  claimMappings:\n    username:\n      expression: claims.sub\n      prefix: x\n"),
        "jwt[0].claimMappings.username.prefix: Invalid value: \"x\": prefix can't be set when expression is set"
    );
    assert_eq!(
        with(&format!("{BY_SUB}    uid:\n      claim: sub\n      expression: claims.sub\n")),
        "jwt[0].claimMappings.uid: Invalid value: \"\": claim and expression can't both be set"
    );
    let extra = with(&format!(
        "{BY_SUB}    extra:\n    - key: tenant\n      valueExpression: claims.t\n    - key: Example.com/x\n      valueExpression: claims.t\n    - key: authentication.kubernetes.io/x\n      valueExpression: claims.t\n    - key: example.com/y\n    - key: example.com/y\n      valueExpression: claims.t\n"
    ));
    assert!(
        extra.starts_with("[jwt[0].claimMappings.extra[0].key: Invalid value: \"tenant\": must be a domain-prefixed path (such as \"acme.io/foo\")"),
        "{extra}"
    );
    assert!(extra.contains("jwt[0].claimMappings.extra[1].key: Invalid value: \"Example.com/x\": key must be lowercase"), "{extra}");
    assert!(extra.contains("jwt[0].claimMappings.extra[2].key: Invalid value: \"authentication.kubernetes.io/x\": k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use"), "{extra}");
    assert!(extra.contains("jwt[0].claimMappings.extra[3].valueExpression: Required value: valueExpression is required"), "{extra}");
    assert!(extra.ends_with("jwt[0].claimMappings.extra[4].key: Duplicate value: \"example.com/y\"]"), "{extra}");
    assert_eq!(
        with("  claimMappings:\n    username:\n      expression: claims.email\n"),
        "jwt[0].claimMappings.username.expression: Invalid value: \"claims.email\": claims.email_verified must be used in claimMappings.username.expression or claimMappings.extra[*].valueExpression or claimValidationRules[*].expression when claims.email is used in claimMappings.username.expression"
    );
    assert!(load(&format!("{HEAD}jwt:\n{}", jwt("https://one.example", "  claimValidationRules:\n  - expression: claims.?email_verified.orValue(true) == true\n  claimMappings:\n    username:\n      expression: claims.email\n"))).is_ok());
    assert_eq!(
        with(&format!("{BY_SUB}  userValidationRules:\n  - expression: ''\n  - expression: user.name == ''\n")).lines().next().unwrap(),
        "[jwt[0].userValidationRules[0].expression: Required value: expression is required, jwt[0].userValidationRules[1].expression: Invalid value: \"user.name == ''\": compilation failed: ERROR: <input>:1:5: undefined field 'name'"
    );
}

#[test]
fn anonymous_conditions_need_it_enabled() {
    assert_eq!(
        err(&format!("{HEAD}anonymous:\n  enabled: false\n  conditions:\n  - path: /livez\n")),
        "anonymous.conditions: Invalid value: []apiserver.AnonymousAuthCondition{apiserver.AnonymousAuthCondition{Path:\"/livez\"}}: enabled should be set to true when conditions are defined"
    );
}
