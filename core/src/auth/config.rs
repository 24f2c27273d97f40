//! `--authentication-config`: an `AuthenticationConfiguration` file
//! (`apiserver.config.k8s.io/v1beta1` or `v1alpha1`, as kube v1.33 reads it) of JWT
//! authenticators (issuer, audiences, claim validation rules, claim mappings with CEL, user
//! validation rules) and of who is anonymous (`anonymous.enabled`, `conditions[].path`),
//! decoded strictly and checked as kube checks it, in its order and words.

use std::collections::BTreeSet;

use serde_json::json;

use super::Anonymous;
use super::claims::{self, ClaimMapping, Rule, Source, Variable};
use super::oidc::{OidcConfig, SUPPORTED_ALGS};
use crate::config_file::{self, Decoder, Struct};
use crate::status::FieldError;
use crate::status::field::{BadValue, aggregate};

/// The versions of `AuthenticationConfiguration` kube v1.33 reads (the same fields in each).
pub const VERSIONS: [&str; 2] = ["apiserver.config.k8s.io/v1beta1", "apiserver.config.k8s.io/v1alpha1"];

/// kube's limit of JWT authenticators.
const MAX_JWT: usize = 64;

/// A file, read and checked.
#[derive(Clone, Debug, PartialEq)]
pub struct AuthenticationConfig {
    pub jwt: Vec<OidcConfig>,
    /// `anonymous`, as written (`None`: not in the file).
    pub anonymous: Option<AnonymousConfig>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnonymousConfig {
    pub enabled: bool,
    pub paths: Vec<String>,
}

impl AnonymousConfig {
    /// Who is anonymous.
    pub fn anonymous(&self) -> Anonymous {
        match (self.enabled, self.paths.is_empty()) {
            (false, _) => Anonymous::Off,
            (true, true) => Anonymous::Everywhere,
            (true, false) => Anonymous::Paths(self.paths.clone()),
        }
    }
}

/// A JWT authenticator as written.
#[derive(Default)]
struct Jwt {
    url: String,
    discovery_url: String,
    ca: String,
    audiences: Vec<String>,
    audience_match_policy: String,
    claim_rules: Vec<ClaimRule>,
    username: Mapping,
    groups: Mapping,
    uid: Mapping,
    extra: Vec<(String, String)>,
    user_rules: Vec<(String, String)>,
}

#[derive(Default)]
struct ClaimRule {
    claim: String,
    required_value: String,
    expression: String,
    message: String,
}

#[derive(Default)]
struct Mapping {
    claim: String,
    /// A Go pointer: set (even empty) or not.
    prefix: Option<String>,
    expression: String,
}

impl AuthenticationConfig {
    /// The file `data` (named `file`), read and checked; `disallowed_issuers`: the
    /// `--service-account-issuer`s, which no JWT authenticator may have.
    pub fn load(file: &str, data: &[u8], disallowed_issuers: &[String]) -> Result<AuthenticationConfig, String> {
        let failed = |e: String| format!("failed to load authentication configuration from file {file:?}: {e}");
        if data.is_empty() {
            return Err(failed("empty config data".into()));
        }
        let (jwts, anonymous) = decode(data).map_err(failed)?;
        let mut errs = Vec::new();
        let mut jwt = Vec::new();
        if jwts.len() > MAX_JWT {
            errs.push(FieldError::too_many("jwt", jwts.len(), MAX_JWT));
        } else {
            let (mut issuers, mut discoveries) = (BTreeSet::new(), BTreeSet::new());
            for (i, j) in jwts.iter().enumerate() {
                let at = format!("jwt[{i}]");
                let checked = validate(j, &at, disallowed_issuers, &mut errs);
                if !issuers.insert(j.url.as_str()) {
                    errs.push(FieldError::duplicate(format!("{at}.issuer.url"), json!(j.url)));
                }
                if !j.discovery_url.is_empty() && !discoveries.insert(j.discovery_url.as_str()) {
                    errs.push(FieldError::duplicate(format!("{at}.issuer.discoveryURL"), json!(j.discovery_url)));
                }
                jwt.extend(checked);
            }
        }
        if let Some(a) = anonymous.as_ref().filter(|a| !a.enabled && !a.paths.is_empty()) {
            let conditions: Vec<String> = a.paths.iter().map(|p| format!("apiserver.AnonymousAuthCondition{{Path:{p:?}}}")).collect();
            let mut e = FieldError::invalid("anonymous.conditions", json!(""), "enabled should be set to true when conditions are defined");
            e.bad_value = Some(BadValue::Go(format!("[]apiserver.AnonymousAuthCondition{{{}}}", conditions.join(", "))));
            errs.push(e);
        }
        match aggregate(&errs) {
            Some(e) => Err(format!("invalid authentication configuration: {e}")),
            None => Ok(AuthenticationConfig { jwt, anonymous }),
        }
    }
}

/// kube's checks of one JWT authenticator (`at`: `jwt[i]`), in its order; the authenticator
/// when they pass.
fn validate(j: &Jwt, at: &str, disallowed: &[String], errs: &mut Vec<FieldError>) -> Option<OidcConfig> {
    let before = errs.len();
    if j.url.is_empty() {
        errs.push(FieldError::required(format!("{at}.issuer.url"), "URL is required"));
    } else {
        validate_url(&j.url, disallowed, &format!("{at}.issuer.url"), errs);
    }
    if !j.discovery_url.is_empty() {
        let path = format!("{at}.issuer.discoveryURL");
        if !j.url.is_empty() && j.url.trim_end_matches('/') == j.discovery_url.trim_end_matches('/') {
            errs.push(FieldError::invalid(&path, json!(j.discovery_url), "discoveryURL must be different from URL"));
        }
        validate_url(&j.discovery_url, &[], &path, errs);
    }
    validate_audiences(j, at, errs);
    if !j.ca.is_empty() && !has_certificate(&j.ca) {
        errs.push(FieldError::invalid(
            format!("{at}.issuer.certificateAuthority"),
            json!("<omitted>"),
            "data does not contain any valid RSA or ECDSA certificates",
        ));
    }
    let (required_claims, claim_rules) = validate_claim_rules(j, at, errs);
    let mapping = validate_mappings(j, at, &claim_rules, errs);
    let mut user_rules = Vec::new();
    let mut seen = BTreeSet::new();
    for (k, (expression, message)) in j.user_rules.iter().enumerate() {
        let path = format!("{at}.userValidationRules[{k}].expression");
        if expression.is_empty() {
            errs.push(FieldError::required(path, "expression is required"));
        } else if !seen.insert(expression) {
            errs.push(FieldError::duplicate(path, json!(expression)));
        } else {
            match claims::compile(expression, Variable::User, true) {
                Ok(compiled) => user_rules.push(Rule { expression: compiled, message: message.clone() }),
                Err(detail) => errs.push(FieldError::invalid(path, json!(expression), detail)),
            }
        }
    }
    let (username, groups, uid, extra) = mapping?;
    (errs.len() == before).then(|| OidcConfig {
        issuer: j.url.clone(),
        discovery_url: (!j.discovery_url.is_empty()).then(|| j.discovery_url.clone()),
        audiences: j.audiences.clone(),
        signing_algs: SUPPORTED_ALGS.map(str::to_string).to_vec(),
        ca_bundle: (!j.ca.is_empty()).then(|| j.ca.clone()),
        mapping: ClaimMapping { username, groups, uid, extra, required_claims, claim_rules, user_rules },
    })
}

/// kube's `validateURL`: not a disallowed issuer, https, no user, query or fragment.
fn validate_url(url: &str, disallowed: &[String], path: &str, errs: &mut Vec<FieldError>) {
    let invalid = |detail: &str| FieldError::invalid(path, json!(url), detail);
    if disallowed.iter().any(|d| d == url) {
        let mut sorted = disallowed.to_vec();
        sorted.sort();
        errs.push(invalid(&format!("URL must not overlap with disallowed issuers: [{}]", sorted.join(" "))));
    }
    let Ok(uri) = url.parse::<http::Uri>() else {
        errs.push(invalid(&format!("parse {url:?}: invalid URI")));
        return;
    };
    if !uri.scheme_str().is_some_and(|s| s.eq_ignore_ascii_case("https")) {
        errs.push(invalid("URL scheme must be https"));
    }
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        errs.push(invalid("URL must not contain a username or password"));
    }
    if uri.query().is_some_and(|q| !q.is_empty()) {
        errs.push(invalid("URL must not contain a query"));
    }
    if url.split_once('#').is_some_and(|(_, f)| !f.is_empty()) {
        errs.push(invalid("URL must not contain a fragment"));
    }
}

fn validate_audiences(j: &Jwt, at: &str, errs: &mut Vec<FieldError>) {
    let path = format!("{at}.issuer.audiences");
    if j.audiences.is_empty() {
        errs.push(FieldError::required(&path, format!("at least one {path} is required")));
        return;
    }
    let mut seen = BTreeSet::new();
    for (k, audience) in j.audiences.iter().enumerate() {
        if audience.is_empty() {
            errs.push(FieldError::required(format!("{path}[{k}]"), "audience can't be empty"));
        } else if !seen.insert(audience) {
            errs.push(FieldError::duplicate(format!("{path}[{k}]"), json!(audience)));
        }
    }
    let policy = j.audience_match_policy.as_str();
    let path = format!("{at}.issuer.audienceMatchPolicy");
    if j.audiences.len() > 1 && policy != "MatchAny" {
        errs.push(FieldError::invalid(path, json!(policy), "audienceMatchPolicy must be MatchAny for multiple audiences"));
    } else if j.audiences.len() == 1 && !matches!(policy, "" | "MatchAny") {
        errs.push(FieldError::invalid(path, json!(policy), "audienceMatchPolicy must be empty or MatchAny for single audience"));
    }
}

/// Whether a PEM bundle holds a certificate (Go's `cert.NewPoolFromBytes` finds one).
fn has_certificate(pem: &str) -> bool {
    x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes()).flatten().any(|p| p.label == "CERTIFICATE" && p.parse_x509().is_ok())
}

/// The claim rules: the required claims and the checked expressions.
fn validate_claim_rules(j: &Jwt, at: &str, errs: &mut Vec<FieldError>) -> (Vec<(String, String)>, Vec<Rule>) {
    let (mut required, mut rules) = (Vec::new(), Vec::new());
    let (mut claims_seen, mut expressions_seen) = (BTreeSet::new(), BTreeSet::new());
    for (k, rule) in j.claim_rules.iter().enumerate() {
        let path = format!("{at}.claimValidationRules[{k}]");
        match (rule.claim.is_empty(), rule.expression.is_empty()) {
            (false, false) => errs.push(FieldError::invalid(path, json!(rule.claim), "claim and expression can't both be set")),
            (true, true) => errs.push(FieldError::required(path, "claim or expression is required")),
            (false, true) => {
                if !rule.message.is_empty() {
                    errs.push(FieldError::invalid(format!("{path}.message"), json!(rule.message), "message can't be set when claim is set"));
                }
                if !claims_seen.insert(rule.claim.as_str()) {
                    errs.push(FieldError::duplicate(format!("{path}.claim"), json!(rule.claim)));
                } else {
                    required.push((rule.claim.clone(), rule.required_value.clone()));
                }
            }
            (true, false) => {
                if !rule.required_value.is_empty() {
                    errs.push(FieldError::invalid(
                        format!("{path}.requiredValue"),
                        json!(rule.required_value),
                        "requiredValue can't be set when expression is set",
                    ));
                }
                if !expressions_seen.insert(rule.expression.as_str()) {
                    errs.push(FieldError::duplicate(format!("{path}.expression"), json!(rule.expression)));
                    continue;
                }
                match claims::compile(&rule.expression, Variable::Claims, true) {
                    Ok(compiled) => rules.push(Rule { expression: compiled, message: rule.message.clone() }),
                    Err(detail) => errs.push(FieldError::invalid(format!("{path}.expression"), json!(rule.expression), detail)),
                }
            }
        }
    }
    (required, rules)
}

type Mappings = (Source, Option<Source>, Option<Source>, Vec<(String, std::sync::Arc<crate::cel::Expression>)>);

/// The claim mappings checked; what they make when they check.
fn validate_mappings(j: &Jwt, at: &str, claim_rules: &[Rule], errs: &mut Vec<FieldError>) -> Option<Mappings> {
    let before = errs.len();
    let at = format!("{at}.claimMappings");
    let username = mapping(&j.username, &format!("{at}.username"), true, errs);
    let groups = mapping(&j.groups, &format!("{at}.groups"), false, errs);
    let uid = match (j.uid.claim.is_empty(), j.uid.expression.is_empty()) {
        (false, false) => {
            errs.push(FieldError::invalid(format!("{at}.uid"), json!(""), "claim and expression can't both be set"));
            None
        }
        (false, true) => Some(Source::Claim { claim: j.uid.claim.clone(), prefix: String::new() }),
        (true, false) => compiled(&j.uid.expression, &format!("{at}.uid.expression"), errs).map(Source::Expression),
        (true, true) => None,
    };
    let mut extra = Vec::new();
    let mut keys = BTreeSet::new();
    for (k, (key, value)) in j.extra.iter().enumerate() {
        let path = format!("{at}.extra[{k}]");
        domain_prefixed_key(key, &format!("{path}.key"), errs);
        if !keys.insert(key.as_str()) {
            errs.push(FieldError::duplicate(format!("{path}.key"), json!(key)));
            continue;
        }
        if value.is_empty() {
            errs.push(FieldError::required(format!("{path}.valueExpression"), "valueExpression is required"));
            continue;
        }
        extra.extend(compiled(value, &format!("{path}.valueExpression"), errs).map(|e| (key.clone(), e)));
    }
    if let Some(Source::Expression(expr)) = &username {
        let verified = expr.selects("claims", "email_verified")
            || extra.iter().any(|(_, e)| e.selects("claims", "email_verified"))
            || claim_rules.iter().any(|r| r.expression.selects("claims", "email_verified"));
        if expr.selects("claims", "email") && !verified {
            errs.push(FieldError::invalid(
                format!("{at}.username.expression"),
                json!(expr.source()),
                "claims.email_verified must be used in claimMappings.username.expression or claimMappings.extra[*].valueExpression or claimValidationRules[*].expression when claims.email is used in claimMappings.username.expression",
            ));
        }
    }
    let username = username?;
    (errs.len() == before).then_some((username, groups, uid, extra))
}

/// An expression of the claims compiled, its error reported at `path`.
fn compiled(expression: &str, path: &str, errs: &mut Vec<FieldError>) -> Option<std::sync::Arc<crate::cel::Expression>> {
    claims::compile(expression, Variable::Claims, false).map_err(|detail| errs.push(FieldError::invalid(path, json!(expression), detail))).ok()
}

/// kube's `validatePrefixClaimOrExpression` (`required`: one of them must be set).
fn mapping(m: &Mapping, path: &str, required: bool, errs: &mut Vec<FieldError>) -> Option<Source> {
    match (m.claim.is_empty(), m.expression.is_empty()) {
        (false, false) => {
            errs.push(FieldError::invalid(path, json!(""), "claim and expression can't both be set"));
            None
        }
        (true, true) => {
            if required {
                errs.push(FieldError::required(path, "claim or expression is required"));
            }
            None
        }
        (true, false) => {
            if let Some(prefix) = &m.prefix {
                errs.push(FieldError::invalid(format!("{path}.prefix"), json!(prefix), "prefix can't be set when expression is set"));
            }
            compiled(&m.expression, &format!("{path}.expression"), errs).map(Source::Expression)
        }
        (false, true) => match &m.prefix {
            None => {
                errs.push(FieldError::required(
                    format!("{path}.prefix"),
                    "prefix is required when claim is set. It can be set to an empty string to disable prefixing",
                ));
                None
            }
            Some(prefix) => Some(Source::Claim { claim: m.claim.clone(), prefix: prefix.clone() }),
        },
    }
}

/// kube's checks of an extra key: a domain-prefixed path, lower case, not of Kubernetes' domains.
fn domain_prefixed_key(key: &str, path: &str, errs: &mut Vec<FieldError>) {
    if key.is_empty() {
        errs.push(FieldError::required(path, ""));
    } else {
        match key.split_once('/') {
            Some((host, rest)) if !host.is_empty() && !rest.is_empty() => {
                for e in crate::validation::names::dns1123_subdomain(host) {
                    errs.push(FieldError::invalid(path, json!(host), e));
                }
                let valid = rest.chars().all(|c| c.is_ascii_alphanumeric() || "/-._~%!$&'()*+,;=:".contains(c));
                if !valid {
                    let why = crate::validation::names::regex_error("Invalid path", r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+", &[]);
                    errs.push(FieldError::invalid(path, json!(rest), why));
                }
            }
            _ => errs.push(FieldError::invalid(path, json!(key), "must be a domain-prefixed path (such as \"acme.io/foo\")")),
        }
    }
    if key != key.to_lowercase() {
        errs.push(FieldError::invalid(path, json!(key), "key must be lowercase"));
    }
    let domain = key.split('/').next().unwrap_or_default();
    if ["kubernetes.io", "k8s.io"].iter().any(|d| domain == *d || domain.ends_with(&format!(".{d}"))) {
        errs.push(FieldError::invalid(path, json!(key), "k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use"));
    }
}

/// The file's tree as kube's strict decoder reads it.
fn decode(data: &[u8]) -> Result<(Vec<Jwt>, Option<AnonymousConfig>), String> {
    let tree = config_file::read(data, "AuthenticationConfiguration", &VERSIONS, config_file::APISERVER_SCHEME)?;
    let mut d = Decoder::new(&tree);
    let root = d.root(&tree, "AuthenticationConfiguration", &["apiVersion", "kind", "jwt", "anonymous"]);
    let mut jwts = Vec::new();
    for (at, item) in d.items(&root, "jwt", "[]v1beta1.JWTAuthenticator") {
        let a = d.object(
            Some(item),
            at,
            "AuthenticationConfiguration",
            "JWTAuthenticator",
            &["issuer", "claimValidationRules", "claimMappings", "userValidationRules"],
        );
        let issuer = d.nested(&a, "issuer", "Issuer", &["url", "discoveryURL", "certificateAuthority", "audiences", "audienceMatchPolicy"]);
        let mut claim_rules = Vec::new();
        for (at, item) in d.items(&a, "claimValidationRules", "[]v1beta1.ClaimValidationRule") {
            let r = d.object(Some(item), at, "JWTAuthenticator", "ClaimValidationRule", &["claim", "requiredValue", "expression", "message"]);
            claim_rules.push(ClaimRule {
                claim: d.string(&r, "claim"),
                required_value: d.string(&r, "requiredValue"),
                expression: d.string(&r, "expression"),
                message: d.string(&r, "message"),
            });
        }
        let m = d.nested(&a, "claimMappings", "ClaimMappings", &["username", "groups", "uid", "extra"]);
        let mut extra = Vec::new();
        for (at, item) in d.items(&m, "extra", "[]v1beta1.ExtraMapping") {
            let e = d.object(Some(item), at, "ClaimMappings", "ExtraMapping", &["key", "valueExpression"]);
            extra.push((d.string(&e, "key"), d.string(&e, "valueExpression")));
        }
        let mut user_rules = Vec::new();
        for (at, item) in d.items(&a, "userValidationRules", "[]v1beta1.UserValidationRule") {
            let r = d.object(Some(item), at, "JWTAuthenticator", "UserValidationRule", &["expression", "message"]);
            user_rules.push((d.string(&r, "expression"), d.string(&r, "message")));
        }
        let username = read_mapping(&mut d, &m, "username", "PrefixedClaimOrExpression");
        let groups = read_mapping(&mut d, &m, "groups", "PrefixedClaimOrExpression");
        let uid = read_mapping(&mut d, &m, "uid", "ClaimOrExpression");
        jwts.push(Jwt {
            url: d.string(&issuer, "url"),
            discovery_url: d.string(&issuer, "discoveryURL"),
            ca: d.string(&issuer, "certificateAuthority"),
            audiences: d.strings(&issuer, "audiences"),
            audience_match_policy: d.string(&issuer, "audienceMatchPolicy"),
            claim_rules,
            username,
            groups,
            uid,
            extra,
            user_rules,
        });
    }
    let anonymous = root.has("anonymous").then(|| {
        let a = d.nested(&root, "anonymous", "AnonymousAuthConfig", &["enabled", "conditions"]);
        let mut paths = Vec::new();
        for (at, item) in d.items(&a, "conditions", "[]v1beta1.AnonymousAuthCondition") {
            let c = d.object(Some(item), at, "AnonymousAuthConfig", "AnonymousAuthCondition", &["path"]);
            paths.push(d.string(&c, "path"));
        }
        AnonymousConfig { enabled: d.bool(&a, "enabled"), paths }
    });
    d.finish()?;
    Ok((jwts, anonymous))
}

fn read_mapping(d: &mut Decoder, m: &Struct, field: &str, name: &'static str) -> Mapping {
    let known: &[&str] = if name == "ClaimOrExpression" { &["claim", "expression"] } else { &["claim", "prefix", "expression"] };
    let s = d.nested(m, field, name, known);
    Mapping { claim: d.string(&s, "claim"), prefix: s.has("prefix").then(|| d.string(&s, "prefix")), expression: d.string(&s, "expression") }
}

#[cfg(test)]
mod tests;
