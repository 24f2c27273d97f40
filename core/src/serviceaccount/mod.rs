//! Service account tokens, as kube-apiserver issues, publishes and checks them: the
//! configuration of `--service-account-*` and `--api-audiences`, the claims of a bound token
//! (`claims`), the OIDC discovery document and the JWKS that let others verify kapi's
//! tokens, signing and verifying (`jwt.rs`) with the keys (`keys.rs`).

pub mod jwt;
pub mod keys;

use jiff::Timestamp;
use serde_json::{Value, json};

use self::keys::{PublicKey, SigningKey};

/// The default lifetime of a requested token, and the bounds of what may be asked.
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
pub const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;

/// What kubelets ask for their projected tokens, which kube makes last a year but warns about
/// after the hour and seven seconds asked (`--service-account-extend-token-expiration`).
pub const WARN_ONLY_EXPIRATION_SECONDS: i64 = 3607;
pub const EXTENDED_EXPIRATION_SECONDS: i64 = 365 * 24 * 3600;

/// Where the discovery documents are served.
pub const OPENID_CONFIGURATION_PATH: &str = "/.well-known/openid-configuration";
pub const JWKS_PATH: &str = "/openid/v1/jwks";

/// The server's configuration of service account tokens.
#[derive(Clone, Debug)]
pub struct TokenConfig {
    /// `--service-account-issuer`: the first is written in new tokens; all are accepted.
    pub issuers: Vec<String>,
    /// `--api-audiences`: a token must be meant for one of them (default: the issuers).
    pub audiences: Vec<String>,
    pub signing_key: SigningKey,
    /// `--service-account-key-file`: the keys tokens are verified with.
    pub public_keys: Vec<PublicKey>,
    /// `--service-account-max-token-expiration`, in seconds (`None`: no limit).
    pub max_expiration: Option<i64>,
    /// `--service-account-extend-token-expiration`.
    pub extend_expiration: bool,
    /// `--service-account-jwks-uri`: where the discovery document says the keys are.
    pub jwks_uri: Option<String>,
}

/// What a token is bound to: a pod (and the node it runs on, if known), a secret or a node;
/// each as its name and uid.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Binding {
    pub pod: Option<(String, String)>,
    pub secret: Option<(String, String)>,
    pub node: Option<(String, String)>,
}

impl TokenConfig {
    /// The issuer new tokens name.
    pub fn issuer(&self) -> &str {
        self.issuers.first().map(String::as_str).unwrap_or_default()
    }

    /// The claims of a token for the service account `namespace`/`name` (of `uid`), kube's
    /// `token.Claims`: valid from `now` for `seconds`, warned about after `warn_after` seconds
    /// if given, with the id `jti`.
    #[allow(clippy::too_many_arguments)]
    pub fn claims(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        binding: &Binding,
        audiences: &[String],
        now: Timestamp,
        seconds: i64,
        warn_after: Option<i64>,
        jti: &str,
    ) -> Value {
        let at = now.as_second();
        let reference = |(name, uid): &(String, String)| if uid.is_empty() { json!({"name": name}) } else { json!({"name": name, "uid": uid}) };
        let mut kubernetes = json!({"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}});
        if let Some(pod) = &binding.pod {
            kubernetes["pod"] = reference(pod);
        }
        if let Some(secret) = &binding.secret {
            kubernetes["secret"] = reference(secret);
        }
        if let Some(node) = &binding.node {
            kubernetes["node"] = reference(node);
        }
        if let Some(w) = warn_after {
            kubernetes["warnafter"] = json!(at.saturating_add(w));
        }
        json!({
            "aud": audiences,
            "exp": at.saturating_add(seconds),
            "iat": at,
            "iss": self.issuer(),
            "jti": jti,
            "kubernetes.io": kubernetes,
            "nbf": at,
            "sub": format!("system:serviceaccount:{namespace}:{name}"),
        })
    }

    /// Where the keys are: `--service-account-jwks-uri`, or the issuer's `/openid/v1/jwks`
    /// when the issuer is an https URL; `None` (no discovery) otherwise.
    fn jwks_uri(&self) -> Option<String> {
        if let Some(uri) = &self.jwks_uri {
            return Some(uri.clone());
        }
        let issuer = self.issuer();
        let rest = issuer.strip_prefix("https://")?;
        (!rest.is_empty() && !issuer.contains(['?', '#'])).then(|| format!("{}{JWKS_PATH}", issuer.trim_end_matches('/')))
    }

    /// The OIDC discovery document (`/.well-known/openid-configuration`), in kube's field
    /// order; `None` when the issuer gives no place for the keys.
    pub fn openid_configuration(&self) -> Option<String> {
        let mut algorithms: Vec<&str> = self.public_keys.iter().map(PublicKey::algorithm).collect();
        algorithms.sort_unstable();
        algorithms.dedup();
        let s = |v: &str| Value::from(v).to_string();
        Some(format!(
            "{{\"issuer\":{},\"jwks_uri\":{},\"response_types_supported\":[\"id_token\"],\"subject_types_supported\":[\"public\"],\"id_token_signing_alg_values_supported\":{}}}",
            s(self.issuer()),
            s(&self.jwks_uri()?),
            json!(algorithms)
        ))
    }

    /// The public keys as a JWKS (`/openid/v1/jwks`), each key in go-jose's field order.
    pub fn jwks(&self) -> String {
        let keys: Vec<String> = self.public_keys.iter().map(|k| ordered_jwk(&k.jwk())).collect();
        format!("{{\"keys\":[{}]}}", keys.join(","))
    }
}

/// A JWK's members in the order go-jose writes them.
fn ordered_jwk(jwk: &Value) -> String {
    let members: Vec<String> =
        ["use", "kty", "kid", "crv", "alg", "n", "e", "x", "y"].iter().filter_map(|k| jwk.get(*k).map(|v| format!("{}:{v}", Value::from(*k)))).collect();
    format!("{{{}}}", members.join(","))
}

#[cfg(test)]
mod tests;
