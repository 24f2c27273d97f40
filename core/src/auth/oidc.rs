//! OpenID Connect tokens (`--oidc-issuer-url` and the other `--oidc-*` flags), as
//! kube-apiserver's JWT authenticator checks them: a bearer JWT whose `iss` is the issuer's
//! (any other is not this authenticator's), signed with one of the issuer's keys (its JWKS,
//! fetched by [`super::oidc_keys`]) in one of `--oidc-signing-algs`, meant for
//! `--oidc-client-id` (`aud`), not expired, with the required claims; the user is its username
//! claim (prefixed) and its groups claim (prefixed). Like kube's, it is audience-agnostic: a
//! token it accepts is good for the API server's audiences.
//!
//! The keys are an immutable list swapped whole when fetched again ([`Oidc::set_keys`]); a
//! token signed with a key the list lacks asks for a fetch ([`Oidc::wants_keys`]), as go-oidc's
//! remote key set fetches again for an unknown key id.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::{ArcSwap, ArcSwapOption};
use jiff::Timestamp;
use serde_json::{Map, Value};

use super::UserInfo;
use super::claims::{ClaimMapping, Source};
use crate::serviceaccount::jwt;
use crate::serviceaccount::keys::PublicKey;

/// The algorithms kapi verifies (kube's `--oidc-signing-algs` default is RS256) ...
pub const SUPPORTED_ALGS: [&str; 2] = ["RS256", "ES256"];
/// ... of those kube's verifies.
const KUBE_ALGS: [&str; 9] = ["RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512"];

/// One JWT authenticator: an `--authentication-config` `jwt` entry, or the `--oidc-*` flags,
/// checked.
#[derive(Clone, Debug, PartialEq)]
pub struct OidcConfig {
    pub issuer: String,
    /// Where the discovery document is fetched from instead of under the issuer
    /// (`discoveryURL`).
    pub discovery_url: Option<String>,
    /// A token must be meant for one of these (`--oidc-client-id`: the one).
    pub audiences: Vec<String>,
    pub signing_algs: Vec<String>,
    /// PEM: what the issuer's certificate is checked against (the system's roots without it).
    pub ca_bundle: Option<String>,
    /// What the claims make of the user.
    pub mapping: ClaimMapping,
}

/// The `--oidc-*` flags as given.
#[derive(Clone, Debug, Default)]
pub struct OidcFlags {
    pub issuer_url: String,
    pub client_id: String,
    pub username_claim: String,
    pub username_prefix: Option<String>,
    pub groups_claim: String,
    pub groups_prefix: String,
    /// `key=value` each.
    pub required_claims: Vec<String>,
    pub signing_algs: Vec<String>,
    pub ca_bundle: Option<String>,
    /// `--service-account-issuer`s, whose tokens are not an OIDC issuer's.
    pub disallowed_issuers: Vec<String>,
}

impl OidcConfig {
    /// The configuration the flags give, or kube's error for them.
    pub fn from_flags(flags: OidcFlags) -> Result<OidcConfig, String> {
        if flags.issuer_url.is_empty() || flags.client_id.is_empty() {
            return Err("oidc-issuer-url and oidc-client-id must be specified together when any oidc-* flags are set".into());
        }
        let uri: http::Uri = flags.issuer_url.parse().map_err(|e| format!("oidc-issuer-url: invalid URL {:?}: {e}", flags.issuer_url))?;
        let invalid = |why: &str| format!("invalid authentication configuration: jwt[0].issuer.url: Invalid value: {:?}: {why}", flags.issuer_url);
        if uri.scheme_str() != Some("https") {
            return Err(invalid("URL scheme must be https"));
        }
        if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
            return Err(invalid("URL must not contain a username or password"));
        }
        if uri.query().is_some() {
            return Err(invalid("URL must not contain a query"));
        }
        if flags.issuer_url.contains('#') {
            return Err(invalid("URL must not contain a fragment"));
        }
        if flags.disallowed_issuers.contains(&flags.issuer_url) {
            return Err(invalid(&format!("URL must not overlap with disallowed issuers: [{}]", flags.disallowed_issuers.join(" "))));
        }
        if flags.username_claim.is_empty() {
            return Err("invalid authentication configuration: jwt[0].claimMappings.username: Required value: claim or expression is required".into());
        }
        for alg in flags.signing_algs.iter().filter(|a| !a.is_empty()) {
            if !KUBE_ALGS.contains(&alg.as_str()) {
                return Err(format!("oidc: unsupported signing alg: {alg:?}"));
            }
            if !SUPPORTED_ALGS.contains(&alg.as_str()) {
                return Err(format!("oidc-signing-algs: {alg:?} is not implemented by kapi yet (RS256 and ES256 are)"));
            }
        }
        // A map, as kube keeps them: the last value of a key counts.
        let mut required_claims: Vec<(String, String)> = Vec::new();
        for claim in &flags.required_claims {
            let (k, v) = claim.split_once('=').ok_or_else(|| format!("oidc-required-claim: {claim:?} is not key=value"))?;
            if k.is_empty() {
                return Err(
                    "invalid authentication configuration: jwt[0].claimValidationRules[0].claim: Required value: claim or expression is required".into()
                );
            }
            required_claims.retain(|(key, _)| key != k);
            required_claims.push((k.to_string(), v.to_string()));
        }
        let username_prefix = match flags.username_prefix.as_deref() {
            Some("-") => String::new(),
            Some(p) if !p.is_empty() => p.to_string(),
            _ if flags.username_claim == "email" => String::new(),
            _ => format!("{}#", flags.issuer_url),
        };
        let groups = (!flags.groups_claim.is_empty()).then(|| Source::Claim { claim: flags.groups_claim.clone(), prefix: flags.groups_prefix.clone() });
        Ok(OidcConfig {
            mapping: ClaimMapping {
                username: Source::Claim { claim: flags.username_claim, prefix: username_prefix },
                groups,
                uid: None,
                extra: Vec::new(),
                required_claims,
                claim_rules: Vec::new(),
                user_rules: Vec::new(),
            },
            issuer: flags.issuer_url,
            discovery_url: None,
            audiences: vec![flags.client_id],
            signing_algs: match flags.signing_algs.into_iter().filter(|a| !a.is_empty()).collect::<Vec<_>>() {
                algs if algs.is_empty() => vec!["RS256".into()],
                algs => algs,
            },
            ca_bundle: flags.ca_bundle,
        })
    }
}

/// The OIDC authenticator: its configuration and the issuer's keys as last fetched.
pub struct Oidc {
    pub config: OidcConfig,
    keys: ArcSwapOption<Vec<PublicKey>>,
    /// A token named a key the list lacks (or there is none yet): fetch them again.
    pub(super) stale: AtomicBool,
}

impl std::fmt::Debug for Oidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oidc").field("config", &self.config).finish()
    }
}

impl Oidc {
    pub fn new(config: OidcConfig) -> Oidc {
        Oidc { config, keys: ArcSwapOption::empty(), stale: AtomicBool::new(true) }
    }

    /// The issuer's keys, fetched.
    pub fn set_keys(&self, keys: Vec<PublicKey>) {
        self.keys.store(Some(Arc::new(keys)));
        self.stale.store(false, Ordering::Relaxed);
    }

    /// Whether the issuer's keys have been fetched.
    pub fn has_keys(&self) -> bool {
        self.keys.load().is_some()
    }

    /// Whether the keys should be fetched (again).
    pub fn wants_keys(&self) -> bool {
        self.stale.load(Ordering::Relaxed)
    }

    /// The user `token` stands for; `None` when it is no JWT of this issuer (another
    /// authenticator's); why not, in kube's words, when it is one and fails a check.
    pub fn authenticate(&self, token: &str, now: Timestamp) -> Option<Result<UserInfo, String>> {
        let (header, stated) = jwt::unverified(token)?;
        if stated.get("iss").and_then(Value::as_str) != Some(self.config.issuer.as_str()) {
            return None;
        }
        Some(self.check(token, &header, &stated, now))
    }

    /// go-oidc's checks, in its order: the claims it reads (typed as its `idToken` reads them;
    /// audience, expiry, not-before), then the algorithm and the signature.
    fn check(&self, token: &str, header: &Map<String, Value>, stated: &Map<String, Value>, now: Timestamp) -> Result<UserInfo, String> {
        let keys = self.keys.load_full().ok_or("oidc: authenticator not initialized")?;
        let unmarshal = |what: &str| format!("oidc: verify token: oidc: failed to unmarshal claims: json: cannot unmarshal {what}");
        let audiences: Vec<String> = match stated.get("aud") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(a)) => vec![a.clone()],
            Some(Value::Array(a)) => a.iter().map(|x| x.as_str().map(str::to_string)).collect::<Option<_>>().ok_or_else(|| unmarshal("into audience"))?,
            Some(_) => return Err(unmarshal("into audience")),
        };
        if stated.get("sub").is_some_and(|v| !v.is_string() && !v.is_null()) {
            return Err(unmarshal("into Go struct field idToken.sub of type string"));
        }
        let time = |k: &str| go_json_time(stated.get(k)).ok_or_else(|| unmarshal(&format!("into Go struct field idToken.{k}")));
        let (expiry, not_before) = (time("exp")?, time("nbf")?);
        // One audience: go-oidc's own check, here; several: any of them, once it verified.
        if let [audience] = self.config.audiences.as_slice()
            && !audiences.contains(audience)
        {
            return Err(format!("oidc: verify token: oidc: expected audience {audience:?} got {}", go_strings(&audiences)));
        }
        let now_ns = now.as_nanosecond();
        let expiry = expiry.unwrap_or(GO_ZERO_TIME);
        if i128::from(expiry) * NANOS < now_ns {
            return Err(format!("oidc: verify token: oidc: token is expired (Token Expiry: {})", go_time(expiry)));
        }
        if let Some(nbf) = not_before.filter(|nbf| now_ns + i128::from(NBF_LEEWAY_SECONDS) * NANOS < i128::from(*nbf) * NANOS) {
            return Err(format!("oidc: verify token: oidc: current time {} before the nbf (not before) time: {}", go_time(now.as_second()), go_time(nbf)));
        }
        let alg = header.get("alg").and_then(Value::as_str).unwrap_or_default();
        if !self.config.signing_algs.iter().any(|a| a == alg) {
            return Err(format!(
                "oidc: verify token: oidc: id token signed with unsupported algorithm, expected {} got {alg:?}",
                go_strings(&self.config.signing_algs)
            ));
        }
        // A signature none of the keys verifies may be of a key the issuer has since rotated in:
        // the keys are fetched again (go-oidc's remote key set does so on a failed verification).
        let claims = jwt::verify(token, &keys).map_err(|_| {
            self.stale.store(true, Ordering::Relaxed);
            "oidc: verify token: failed to verify signature: failed to verify id token signature".to_string()
        })?;
        if !self.config.audiences.iter().any(|a| audiences.contains(a)) {
            let mut wanted = self.config.audiences.clone();
            wanted.sort();
            return Err(format!("oidc: verify token: oidc: expected audience in {} got {}", go_strings(&wanted), go_strings(&audiences)));
        }
        self.config.mapping.user(&claims)
    }
}

/// The JWT authenticators (`--authentication-config`'s `jwt` entries, or the `--oidc-*`
/// flags'), swapped whole when the file changes; a request keeps the list it found.
#[derive(Debug, Default)]
pub struct JwtAuthenticators(ArcSwap<Vec<Arc<Oidc>>>);

impl JwtAuthenticators {
    pub fn new(authenticators: Vec<Arc<Oidc>>) -> JwtAuthenticators {
        JwtAuthenticators(ArcSwap::from_pointee(authenticators))
    }

    pub fn load(&self) -> Arc<Vec<Arc<Oidc>>> {
        self.0.load_full()
    }

    pub fn store(&self, authenticators: Vec<Arc<Oidc>>) {
        self.0.store(Arc::new(authenticators));
    }

    /// The user `token` stands for, by the authenticator whose issuer is the token's (issuers
    /// are distinct); `None` when no authenticator's.
    pub fn authenticate(&self, token: &str, now: Timestamp) -> Option<Result<UserInfo, String>> {
        self.0.load().iter().find_map(|o| o.authenticate(token, now))
    }
}

/// How far in the future a token's `nbf` may be (go-oidc's leeway), in seconds.
const NBF_LEEWAY_SECONDS: i64 = 60;
const NANOS: i128 = 1_000_000_000;
/// A missing `exp` reads as Go's zero time, long past.
const GO_ZERO_TIME: i64 = -62_135_596_800;

/// A time claim as go-oidc's `jsonTime` reads one: absent or null is none; a number (or a
/// quoted one) is its seconds, a fraction truncated and a number beyond an int64 read as Go's
/// conversion on amd64 reads it (the least int64); anything else does not unmarshal (`None`).
fn go_json_time(v: Option<&Value>) -> Option<Option<i64>> {
    let number = match v {
        None | Some(Value::Null) => return Some(None),
        Some(Value::Number(n)) => n.clone(),
        Some(Value::String(s)) => serde_json::from_str::<serde_json::Number>(s).ok()?,
        Some(_) => return None,
    };
    let seconds = match (number.as_i64(), number.as_f64()) {
        (Some(i), _) => i,
        (None, Some(f)) if (i64::MIN as f64..-(i64::MIN as f64)).contains(&f) => f as i64,
        _ => i64::MIN,
    };
    Some(Some(seconds))
}

/// A time as Go's `%v` prints one (`2026-01-02 15:04:05 +0000 UTC`).
fn go_time(seconds: i64) -> String {
    Timestamp::from_second(seconds).map(|t| t.strftime("%Y-%m-%d %H:%M:%S +0000 UTC").to_string()).unwrap_or_else(|_| "0001-01-01 00:00:00 +0000 UTC".into())
}

/// A list of strings as Go's `%q` prints one (`["a" "b"]`).
fn go_strings(items: &[String]) -> String {
    format!("[{}]", items.iter().map(|i| format!("{i:?}")).collect::<Vec<_>>().join(" "))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::serviceaccount::keys::SigningKey;

    const ISSUER: &str = "https://issuer.example";

    fn key() -> SigningKey {
        SigningKey::from_pem(include_str!("../../../testdata/serviceaccount/ec.key")).unwrap()
    }

    fn oidc(flags: OidcFlags) -> Oidc {
        let base = OidcFlags {
            issuer_url: ISSUER.into(),
            client_id: "kapi".into(),
            username_claim: "sub".into(),
            signing_algs: vec!["ES256".into()],
            groups_claim: "groups".into(),
            ..Default::default()
        };
        let flags = OidcFlags { required_claims: flags.required_claims, username_claim: flags.username_claim, username_prefix: flags.username_prefix, ..base };
        let o = Oidc::new(OidcConfig::from_flags(flags).unwrap());
        // The key as an issuer publishes it: through its JWK.
        o.set_keys(vec![PublicKey::from_jwk(&key().public().jwk()).unwrap()]);
        o
    }

    fn token(claims: Value) -> String {
        jwt::sign(&key(), &claims)
    }

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap()
    }

    fn claims(extra: Value) -> Value {
        let mut c = json!({"iss": ISSUER, "aud": "kapi", "sub": "jane", "exp": 1_800_000_600, "groups": ["dev", "ops"], "jti": "j1"});
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    }

    #[test]
    fn a_token_of_the_issuer_is_its_user_prefixed_with_groups() {
        let o = oidc(OidcFlags { username_claim: "sub".into(), ..Default::default() });
        let u = o.authenticate(&token(claims(json!({}))), now()).unwrap().unwrap();
        assert_eq!(u.name, "https://issuer.example#jane");
        assert_eq!(u.groups, vec!["dev", "ops"]);
        assert_eq!(u.extra["authentication.kubernetes.io/credential-id"], vec!["JTI=j1"]);
        // Another issuer's token, or no JWT: not this authenticator's.
        assert!(o.authenticate(&token(claims(json!({"iss": "https://other"}))), now()).is_none());
        assert!(o.authenticate("opaque", now()).is_none());
        let err = |c: Value| o.authenticate(&token(claims(c)), now()).unwrap().unwrap_err();
        assert_eq!(err(json!({"aud": ["x", "y"]})), "oidc: verify token: oidc: expected audience \"kapi\" got [\"x\" \"y\"]");
        assert_eq!(err(json!({"exp": 1_799_999_999})), "oidc: verify token: oidc: token is expired (Token Expiry: 2027-01-15 07:59:59 +0000 UTC)");
        assert!(err(json!({"nbf": 1_800_000_061})).starts_with("oidc: verify token: oidc: current time 2027-01-15 08:00:00 +0000 UTC before the nbf"));
        assert!(o.authenticate(&token(claims(json!({"nbf": 1_800_000_060}))), now()).unwrap().is_ok(), "a minute's leeway");
        assert_eq!(err(json!({"groups": 7})), "oidc: parse groups claim \"groups\": json: cannot unmarshal number into Go value of type string");
        assert_eq!(o.authenticate(&token(claims(json!({"groups": "solo"}))), now()).unwrap().unwrap().groups, vec!["solo"]);
        // A signature of another key.
        let forged = token(claims(json!({})));
        let (input, _) = forged.rsplit_once('.').unwrap();
        assert_eq!(
            o.authenticate(&format!("{input}.AAAA"), now()).unwrap().unwrap_err(),
            "oidc: verify token: failed to verify signature: failed to verify id token signature"
        );
        // Claims typed as go-oidc reads them.
        assert!(o.authenticate(&token(claims(json!({"exp": "1800000600"}))), now()).unwrap().is_ok(), "a quoted number");
        assert!(err(json!({"exp": 1e300})).starts_with("oidc: verify token: oidc: token is expired"), "beyond an int64");
        assert!(err(json!({"exp": "soon"})).starts_with("oidc: verify token: oidc: failed to unmarshal claims"));
        assert!(err(json!({"aud": ["kapi", 1]})).starts_with("oidc: verify token: oidc: failed to unmarshal claims"));
        let u = o.authenticate(&token(claims(json!({"groups": null, "jti": ""}))), now()).unwrap().unwrap();
        assert!(u.groups.is_empty() && u.extra.is_empty(), "{u:?}");
        // A failed signature asks for the keys again (the issuer may have rotated them).
        assert!(o.wants_keys());
        // Before any keys are fetched.
        let fresh = Oidc::new(o.config.clone());
        assert!(fresh.wants_keys());
        assert_eq!(fresh.authenticate(&token(claims(json!({}))), now()).unwrap().unwrap_err(), "oidc: authenticator not initialized");
    }

    #[test]
    fn email_usernames_need_verifying_and_required_claims_must_hold() {
        let o = oidc(OidcFlags { username_claim: "email".into(), required_claims: vec!["tenant=a".into()], ..Default::default() });
        let ok = claims(json!({"email": "jane@example.com", "tenant": "a"}));
        assert_eq!(o.authenticate(&token(ok.clone()), now()).unwrap().unwrap().name, "jane@example.com", "no prefix for email");
        let err = |c: Value| o.authenticate(&token(c), now()).unwrap().unwrap_err();
        let mut unverified = ok.clone();
        unverified["email_verified"] = json!(false);
        assert_eq!(err(unverified), "oidc: email not verified");
        assert_eq!(err(claims(json!({"email": "jane@example.com"}))), "oidc: required claim tenant not present in ID token");
        assert_eq!(err(claims(json!({"email": "j", "tenant": "b"}))), "oidc: required claim tenant value does not match. Got = b, want = a");
        assert_eq!(err(claims(json!({"tenant": "a"}))), "oidc: parse username claims \"email\": claim not present");
        let plain = oidc(OidcFlags { username_claim: "sub".into(), username_prefix: Some("-".into()), ..Default::default() });
        assert_eq!(plain.authenticate(&token(claims(json!({}))), now()).unwrap().unwrap().name, "jane");
    }

    #[test]
    fn several_audiences_match_any() {
        let mut config = oidc(OidcFlags { username_claim: "sub".into(), ..Default::default() }).config.clone();
        config.audiences = vec!["b".into(), "a".into()];
        let o = Oidc::new(config);
        o.set_keys(vec![PublicKey::from_jwk(&key().public().jwk()).unwrap()]);
        assert!(o.authenticate(&token(claims(json!({"aud": ["x", "a"]}))), now()).unwrap().is_ok());
        assert_eq!(
            o.authenticate(&token(claims(json!({"aud": "c"}))), now()).unwrap().unwrap_err(),
            "oidc: verify token: oidc: expected audience in [\"a\" \"b\"] got [\"c\"]"
        );
    }

    #[test]
    fn the_flags_are_checked_as_kube_checks_them() {
        let flags = |issuer: &str, client: &str, algs: &[&str]| OidcFlags {
            issuer_url: issuer.into(),
            client_id: client.into(),
            username_claim: "sub".into(),
            signing_algs: algs.iter().map(|a| a.to_string()).collect(),
            ..Default::default()
        };
        assert_eq!(
            OidcConfig::from_flags(flags(ISSUER, "", &[])).unwrap_err(),
            "oidc-issuer-url and oidc-client-id must be specified together when any oidc-* flags are set"
        );
        assert!(OidcConfig::from_flags(flags("http://issuer", "kapi", &[])).unwrap_err().ends_with("URL scheme must be https"));
        assert_eq!(OidcConfig::from_flags(flags(ISSUER, "kapi", &["HS256"])).unwrap_err(), "oidc: unsupported signing alg: \"HS256\"");
        assert!(OidcConfig::from_flags(flags(ISSUER, "kapi", &["PS256"])).unwrap_err().contains("not implemented by kapi"));
        assert_eq!(OidcConfig::from_flags(flags(ISSUER, "kapi", &[])).unwrap().signing_algs, vec!["RS256"]);
        assert_eq!(OidcConfig::from_flags(flags(ISSUER, "kapi", &[""])).unwrap().signing_algs, vec!["RS256"]);
        assert!(OidcConfig::from_flags(flags("https://issuer.example?x=1", "kapi", &[])).unwrap_err().ends_with("URL must not contain a query"));
        assert!(OidcConfig::from_flags(flags("https://issuer.example#x", "kapi", &[])).unwrap_err().ends_with("URL must not contain a fragment"));
        let overlap = OidcFlags { disallowed_issuers: vec![ISSUER.into()], ..flags(ISSUER, "kapi", &[]) };
        assert!(OidcConfig::from_flags(overlap).unwrap_err().contains("URL must not overlap with disallowed issuers"));
        let twice = OidcFlags { required_claims: vec!["t=a".into(), "t=b".into()], ..flags(ISSUER, "kapi", &[]) };
        assert_eq!(OidcConfig::from_flags(twice).unwrap().mapping.required_claims, vec![("t".to_string(), "b".to_string())]);
    }
}
