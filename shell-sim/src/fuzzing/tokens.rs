//! Service account tokens under fuzzing: bearer tokens as a client may send them (any text,
//! JWT-shaped text with any header and signature, and tokens the server's key signed over any
//! claims: any issuer, audiences, times and `kubernetes.io` parts, well or badly typed), checked
//! as a request's credential, then confirmed against any objects its lookups may find. No
//! input may panic; a token the server did not sign is never accepted; an accepted one is of
//! an issuer and an audience of the server's, within its times, and is confirmed only by
//! objects whose uids are the ones it names. Bootstrap tokens likewise: any text, and tokens
//! of the bootstrap form against Secrets with any data; one is accepted only where its Secret
//! holds its id and secret, is of the bootstrap type and is marked for authentication. And
//! OIDC: the same tokens put to an OIDC authenticator whose issuer key is the server's, with
//! its keys read from JWKs of any shape (its claims mapped as the `--oidc-*` flags map them, or
//! by CEL expressions of an `--authentication-config` over claims of any type); one is
//! accepted only if that key signed it, its issuer is the OIDC issuer, its audiences hold the
//! client id and it has not expired.
//! Legacy tokens (issuer `kubernetes/serviceaccount`, the claims a Secret's token has) are
//! confirmed only by a Secret that holds that very token, is not deleting and is not marked
//! invalid, and by an account that is not deleting.

use arbitrary::{Arbitrary, Unstructured};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use kapi_core::admission::Lookup;
use kapi_core::auth::config::AuthenticationConfig;
use kapi_core::auth::oidc::{Oidc, OidcConfig, OidcFlags};
use kapi_core::auth::{BOOTSTRAPPERS_GROUP, BootstrapToken, Confirmed, INVALID_SINCE_LABEL, LEGACY_ISSUER, check_token};
use kapi_core::serviceaccount::keys::PublicKey;
use kapi_core::serviceaccount::{TokenConfig, jwt};
use serde_json::{Value, json};

use crate::token_config;

const ISSUERS: &[&str] = &["https://kubernetes.default.svc.cluster.local", "https://other.example.com", "kubernetes/serviceaccount"];
const AUDIENCES: &[&str] = &["https://kubernetes.default.svc.cluster.local", "vault", ""];
const UIDS: &[&str] = &["u1", "u2", ""];
const NAMES: &[&str] = &["robot", "web", "n1", ""];
/// The time the fuzzed tokens are checked at.
const NOW: i64 = 1_700_000_000;

fn pick<'a>(u: &mut Unstructured, from: &[&'a str]) -> arbitrary::Result<&'a str> {
    Ok(from[u.choose_index(from.len())?])
}

/// A value of any JSON type, the strings drawn from `from`.
fn any_value(u: &mut Unstructured, from: &[&str]) -> arbitrary::Result<Value> {
    Ok(match u.int_in_range(0u8..=5)? {
        0 => Value::Null,
        1 => json!(i64::arbitrary(u)?),
        2 => json!([pick(u, from)?, pick(u, from)?]),
        3 => json!({"name": pick(u, NAMES)?, "uid": pick(u, UIDS)?}),
        _ => json!(pick(u, from)?),
    })
}

fn time(u: &mut Unstructured) -> arbitrary::Result<Value> {
    Ok(match u.int_in_range(0u8..=3)? {
        0 => Value::Null,
        1 => json!(NOW + i64::from(i16::arbitrary(u)?)),
        2 => json!(i64::arbitrary(u)?),
        _ => json!("soon"),
    })
}

fn reference(u: &mut Unstructured) -> arbitrary::Result<Option<Value>> {
    Ok(match u.int_in_range(0u8..=2)? {
        0 => None,
        1 => Some(json!({"name": pick(u, NAMES)?, "uid": pick(u, UIDS)?})),
        _ => Some(any_value(u, NAMES)?),
    })
}

/// Claims of any shape, mostly near what the server writes.
fn claims(u: &mut Unstructured) -> arbitrary::Result<Value> {
    let mut kubernetes = json!({"namespace": pick(u, &["default", ""])?});
    for part in ["serviceaccount", "pod", "secret", "node"] {
        if let Some(r) = reference(u)? {
            kubernetes[part] = r;
        }
    }
    let aud = if bool::arbitrary(u)? { json!([pick(u, AUDIENCES)?]) } else { any_value(u, AUDIENCES)? };
    let mut claims = json!({"iss": pick(u, ISSUERS)?, "aud": aud, "exp": time(u)?, "nbf": time(u)?, "iat": time(u)?,
        "jti": pick(u, UIDS)?, "kubernetes.io": if bool::arbitrary(u)? { kubernetes } else { any_value(u, NAMES)? }});
    // A legacy token's claims.
    if bool::arbitrary(u)? {
        claims["sub"] =
            json!(pick(u, &["system:serviceaccount:default:robot", "system:serviceaccount:default:web", "system:serviceaccount:default:", "robot", ""])?);
        for (key, from) in [("namespace", &["default", ""][..]), ("secret.name", NAMES), ("service-account.name", NAMES), ("service-account.uid", UIDS)] {
            if u.ratio(7, 8)? {
                claims[format!("kubernetes.io/serviceaccount/{key}")] = if u.ratio(7, 8)? { json!(pick(u, from)?) } else { any_value(u, from)? };
            }
        }
    }
    Ok(claims)
}

/// A bearer token as a client may send it, and whether the server's key signed it.
fn token(u: &mut Unstructured, config: &TokenConfig) -> arbitrary::Result<(String, bool)> {
    Ok(match u.int_in_range(0u8..=2)? {
        0 => (String::arbitrary(u)?, false),
        1 => {
            let header = json!({"alg": pick(u, &["ES256", "RS256", "none", "HS256"])?, "kid": pick(u, &[config.signing_key.kid.as_str(), "other"])?});
            let encode = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
            let signature: Vec<u8> = Vec::arbitrary(u)?;
            (format!("{}.{}.{}", encode(&header), encode(&claims(u)?), URL_SAFE_NO_PAD.encode(signature)), false)
        }
        _ => (jwt::sign(&config.signing_key, &claims(u)?), true),
    })
}

/// An object a lookup may find: none, or one with any uid, deleted or not; a Secret holding
/// `token` or another, marked invalid or not; an account listing secrets or not.
fn found(u: &mut Unstructured, token: &str) -> arbitrary::Result<Option<Value>> {
    if bool::arbitrary(u)? {
        return Ok(None);
    }
    let mut object = json!({"metadata": {"name": pick(u, NAMES)?, "uid": pick(u, UIDS)?}});
    if bool::arbitrary(u)? {
        object["metadata"]["deletionTimestamp"] = json!(pick(u, &["2023-11-14T22:13:20Z", "2000-01-01T00:00:00Z", "not a time"])?);
    }
    if bool::arbitrary(u)? {
        let held = if bool::arbitrary(u)? { token } else { pick(u, &["", "other", "%%"])? };
        object["data"] = json!({"token": base64::engine::general_purpose::STANDARD.encode(held)});
    }
    if bool::arbitrary(u)? {
        object["metadata"]["labels"] = json!({INVALID_SINCE_LABEL: pick(u, &["2024-01-01", ""])?});
    }
    if bool::arbitrary(u)? {
        object["secrets"] = json!([{"name": pick(u, NAMES)?}]);
    }
    Ok(Some(object))
}

/// A bootstrap token's Secret with any of the data that matters, well or badly formed.
fn bootstrap_secret(u: &mut Unstructured) -> arbitrary::Result<Value> {
    let mut data = serde_json::Map::new();
    for (key, values) in [
        ("token-id", &["abcdef", "ghijkl", ""][..]),
        ("token-secret", &["0123456789abcdef", "0123456789abcdeX", ""]),
        ("usage-bootstrap-authentication", &["true", "false", "TRUE"]),
        ("expiration", &["2030-01-01T00:00:00Z", "2020-01-01T00:00:00Z", "soon", ""]),
        ("auth-extra-groups", &["system:bootstrappers:a", "system:masters", "system:bootstrappers:", "system:bootstrappers:a,system:bootstrappers:b"]),
    ] {
        if u.ratio(3, 4)? {
            let value = pick(u, values)?;
            let encoded = if u.ratio(1, 10)? { "%%not base64".to_string() } else { base64::engine::general_purpose::STANDARD.encode(value) };
            data.insert(key.to_string(), json!(encoded));
        }
    }
    let kind = pick(u, &["bootstrap.kubernetes.io/token", "Opaque"])?;
    Ok(json!({"metadata": {"name": "bootstrap-token-abcdef"}, "type": kind, "data": data}))
}

/// A bearer token that may have the bootstrap form, checked against any Secret.
fn bootstrap(u: &mut Unstructured, now: jiff::Timestamp) -> arbitrary::Result<()> {
    let text = match u.int_in_range(0u8..=2)? {
        0 => String::arbitrary(u)?,
        1 => "abcdef.0123456789abcdef".to_string(),
        _ => format!("{}.{}", pick(u, &["abcdef", "ABCDEF", "abcde"])?, pick(u, &["0123456789abcdef", "0123456789abcdeX"])?),
    };
    let Some(token) = BootstrapToken::parse(&text) else { return Ok(()) };
    let secret = if bool::arbitrary(u)? { Some(bootstrap_secret(u)?) } else { None };
    let found: Vec<(Lookup, Option<std::sync::Arc<Value>>)> = token.lookups().into_iter().map(|l| (l, secret.clone().map(std::sync::Arc::new))).collect();
    if let Some(user) = token.confirm(&found, now) {
        let secret = secret.expect("confirmed without a secret");
        let data = |k: &str| secret["data"][k].as_str().and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok());
        let (id, key) = text.split_once('.').expect("the bootstrap form");
        assert_eq!(data("token-id").as_deref(), Some(id.as_bytes()));
        assert_eq!(data("token-secret").as_deref(), Some(key.as_bytes()));
        assert_eq!(data("usage-bootstrap-authentication").as_deref(), Some(&b"true"[..]));
        assert_eq!(secret["type"], "bootstrap.kubernetes.io/token");
        assert_eq!(user.name, format!("system:bootstrap:{id}"));
        assert!(user.groups.iter().all(|g| g.starts_with(BOOTSTRAPPERS_GROUP) || g == "system:authenticated"), "{user:?}");
    }
    Ok(())
}

/// The same authenticator as an `--authentication-config` file with CEL: the username
/// `cel:` and the `jti`, groups and extra from claims of any type, and rules over both.
const CEL_AUTHENTICATOR: &str = r#"
apiVersion: apiserver.config.k8s.io/v1beta1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: https://other.example.com
    audiences: [vault]
  claimValidationRules:
  - expression: "!has(claims.nbf) || claims.nbf != 'never'"
  claimMappings:
    username:
      expression: "'cel:' + claims.jti"
    groups:
      expression: "claims.?aud.orValue([])"
    uid:
      expression: "has(claims.sub) ? string(claims.sub) : ''"
    extra:
    - key: example.com/kubernetes
      valueExpression: "claims.?kubernetes_io.orValue('')"
  userValidationRules:
  - expression: "user.groups.all(g, g.size() < 100)"
"#;

/// The OIDC authenticator: the second issuer, the `vault` audience, the server's key (read
/// back from its JWK), and before it keys of JWKs of any shape; its user the `jti` behind the
/// issuer (the flags' mapping) or behind `cel:` (CEL's, when `cel`).
fn oidc(u: &mut Unstructured, config: &TokenConfig, cel: bool) -> arbitrary::Result<Oidc> {
    let flags = OidcFlags {
        issuer_url: ISSUERS[1].into(),
        client_id: "vault".into(),
        username_claim: "jti".into(),
        signing_algs: vec!["ES256".into(), "RS256".into()],
        ..Default::default()
    };
    let oidc = if cel {
        let file = AuthenticationConfig::load("cel.yaml", CEL_AUTHENTICATOR.as_bytes(), &[]).expect("a valid configuration");
        Oidc::new(file.jwt[0].clone())
    } else {
        Oidc::new(OidcConfig::from_flags(flags).expect("valid flags"))
    };
    let mut keys = Vec::new();
    for _ in 0..u.int_in_range(0u8..=3)? {
        let mut jwk = config.signing_key.public().jwk();
        let field = pick(u, &["kty", "crv", "x", "y", "n", "e", "alg", "use", "kid"])?;
        jwk[field] = match u.int_in_range(0u8..=2)? {
            0 => json!(String::arbitrary(u)?),
            1 => json!(URL_SAFE_NO_PAD.encode(Vec::<u8>::arbitrary(u)?)),
            _ => any_value(u, NAMES)?,
        };
        keys.extend(PublicKey::from_jwk(&jwk));
    }
    keys.extend(PublicKey::from_jwk(&config.signing_key.public().jwk()));
    oidc.set_keys(keys);
    Ok(oidc)
}

/// Tokens checked per input (each signed one costs a signature and its check).
const TOKENS_PER_INPUT: usize = 8;

pub fn tokens(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let config = token_config();
    let now = jiff::Timestamp::from_second(NOW).expect("a valid time");
    let Ok(cel) = bool::arbitrary(&mut u) else { return };
    let Ok(oidc) = oidc(&mut u, &config, cel) else { return };
    for _ in 0..TOKENS_PER_INPUT {
        if bootstrap(&mut u, now).is_err() {
            return;
        }
        let Ok((token, signed)) = token(&mut u, &config) else { return };
        if let Some(Ok(user)) = oidc.authenticate(&token, now) {
            assert!(signed, "an OIDC token no key signed was accepted: {token}");
            let claims = jwt::verify(&token, &config.public_keys).expect("an accepted token verifies");
            assert_eq!(claims.get("iss").and_then(Value::as_str), Some(ISSUERS[1]));
            let aud = &claims["aud"];
            assert!(aud == "vault" || aud.as_array().is_some_and(|a| a.iter().any(|x| x == "vault")), "{aud}");
            assert!(claims.get("exp").and_then(Value::as_f64).is_some_and(|exp| exp >= NOW as f64), "{claims:?}");
            let prefix = if cel { "cel:".to_string() } else { format!("{}#", ISSUERS[1]) };
            assert_eq!(user.name, format!("{prefix}{}", claims["jti"].as_str().unwrap_or_default()));
        }
        let Some(Ok(claimed)) = check_token(&config, &token, None, now) else { continue };
        assert!(signed, "a token the server did not sign was accepted: {token}");
        let verified = jwt::verify(&token, &config.public_keys).expect("an accepted token verifies");
        let issuer = verified.get("iss").and_then(Value::as_str).unwrap_or_default();
        assert!(issuer == LEGACY_ISSUER || config.issuers.iter().any(|i| i == issuer), "{issuer}");
        let mut answers = Vec::new();
        for lookup in claimed.lookups() {
            let Ok(object) = found(&mut u, &token) else { return };
            answers.push((lookup, object.map(std::sync::Arc::new)));
        }
        if let Ok(Confirmed { user, .. }) = claimed.confirm(&answers, now) {
            assert!(user.name.starts_with("system:serviceaccount:"), "{user:?}");
            for (lookup, object) in &answers {
                let object = object.as_ref().unwrap_or_else(|| panic!("confirmed without {lookup:?}"));
                let uid = object["metadata"]["uid"].as_str().unwrap_or_default();
                if matches!(lookup, Lookup::ServiceAccount { .. }) {
                    assert_eq!(uid, user.uid, "the account's uid is the one claimed");
                }
                if issuer == LEGACY_ISSUER {
                    assert!(object["metadata"].get("deletionTimestamp").is_none(), "a deleting {lookup:?} confirmed a legacy token");
                    if matches!(lookup, Lookup::Secret { .. }) {
                        assert_eq!(object["data"]["token"], base64::engine::general_purpose::STANDARD.encode(&token), "the Secret holds the token");
                        assert!(object["metadata"]["labels"][INVALID_SINCE_LABEL].as_str().unwrap_or_default().is_empty(), "marked invalid");
                    }
                }
            }
        }
    }
}
