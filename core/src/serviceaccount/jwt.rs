//! JSON Web Tokens in their compact form (RFC 7519), as kube's service account tokens are:
//! `base64url(header).base64url(claims).base64url(signature)`, unpadded, the header
//! `{"alg":...,"kid":...}`, the claims with sorted keys (as go-jose writes them).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value};

use super::keys::{PublicKey, SigningKey};

/// The most bytes a token may have: the bound tokens kube writes are a kilobyte or two; this
/// keeps what an untrusted client sends from costing more than a request body.
const MAX_TOKEN_BYTES: usize = 64 * 1024;

/// `claims` (a JSON object), signed with `key`.
pub fn sign(key: &SigningKey, claims: &Value) -> String {
    let mut header = Map::new();
    header.insert("alg".into(), Value::from(key.algorithm()));
    header.insert("kid".into(), Value::from(key.kid.as_str()));
    let encode = |v: &Value| URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).expect("JSON trees serialize"));
    let input = format!("{}.{}", encode(&Value::Object(header)), encode(&sorted(claims)));
    let signature = URL_SAFE_NO_PAD.encode(key.sign(input.as_bytes()));
    format!("{input}.{signature}")
}

/// Whether `token` looks like a JWT at all: three base64url parts, the first a JSON header
/// with an `alg` (kube's service account authenticator passes on other bearer tokens).
pub fn is_jwt(token: &str) -> bool {
    header(token).is_some()
}

fn header(token: &str) -> Option<Map<String, Value>> {
    if token.len() > MAX_TOKEN_BYTES {
        return None;
    }
    let mut parts = token.split('.');
    let (Some(header), Some(_), Some(_), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else { return None };
    let header: Map<String, Value> = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).ok()?).ok()?;
    header.get("alg").and_then(Value::as_str)?;
    Some(header)
}

/// The claims of `token` as it states them, unverified (to see whose it says it is), and its
/// header.
pub fn unverified(token: &str) -> Option<(Map<String, Value>, Map<String, Value>)> {
    let header = header(token)?;
    let claims = URL_SAFE_NO_PAD.decode(token.split('.').nth(1)?).ok()?;
    Some((header, serde_json::from_slice(&claims).ok()?))
}

/// The claims of `token` if one of `keys` signed it (the key its `kid` names, or any of the
/// token's algorithm when it names none), or why not, in kube's words.
pub fn verify(token: &str, keys: &[PublicKey]) -> Result<Map<String, Value>, String> {
    let header = header(token).ok_or("not a JWT")?;
    let alg = header.get("alg").and_then(Value::as_str).unwrap_or_default();
    // An empty key id names no key: every key is tried, as go-jose's key sets try them.
    let kid = header.get("kid").and_then(Value::as_str).filter(|kid| !kid.is_empty());
    let (input, signature) = token.rsplit_once('.').ok_or("not a JWT")?;
    let signature = URL_SAFE_NO_PAD.decode(signature).map_err(|_| "invalid signature encoding")?;
    let signed = keys.iter().filter(|k| k.algorithm() == alg && kid.is_none_or(|kid| kid == k.kid)).any(|k| k.verifies(input.as_bytes(), &signature));
    if !signed {
        return Err("invalid signature".into());
    }
    let claims = input.split('.').nth(1).ok_or("not a JWT")?;
    let claims = URL_SAFE_NO_PAD.decode(claims).map_err(|_| "invalid claims encoding")?;
    serde_json::from_slice(&claims).map_err(|_| "invalid claims".to_string())
}

/// `v` with every object's keys sorted.
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(entries.into_iter().map(|(k, x)| (k.clone(), sorted(x))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}
