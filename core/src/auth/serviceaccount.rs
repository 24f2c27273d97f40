//! Service account tokens as credentials (kube's `jwtTokenAuthenticator` and its validator):
//! a bearer JWT whose issuer is one of `--service-account-issuer`'s is checked in two steps.
//! First what the token alone says ([`check_token`]): a signature of one of the keys, an
//! issuer, an audience among `--api-audiences`, and its times (a minute's leeway, as go-jose
//! gives). Then what it names ([`Claimed::confirm`]): the service account, and the pod, secret
//! or node it is bound to, must exist with the uids it names, and not have been deleted more
//! than a minute ago; so a token stops working when what it is bound to is deleted.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde_json::{Map, Value};

use super::{AUTHENTICATED_GROUP, UserInfo};
use crate::admission::Lookup;
use crate::meta;
use crate::serviceaccount::{TokenConfig, jwt};

/// go-jose's `DefaultLeeway`, in seconds.
const LEEWAY: i64 = 60;

const EXTRA_PREFIX: &str = "authentication.kubernetes.io/";

/// A token whose signature, issuer, audiences and times check; who it names.
#[derive(Clone, Debug, PartialEq)]
pub struct Claimed {
    /// The audiences the token is meant for among those asked.
    pub audiences: Vec<String>,
    namespace: String,
    account: (String, String),
    pod: Option<(String, String)>,
    secret: Option<(String, String)>,
    node: Option<(String, String)>,
    jti: String,
}

/// What `token` claims, if it is a service account token of this server's issuers: `None`
/// for a token that is not (other authenticators may know it), `Err` with kube's reason for
/// one that is but does not check. The token must be meant for one of `audiences` (a
/// TokenReview's), or of `--api-audiences` when `None`.
pub fn check_token(config: &TokenConfig, token: &str, audiences: Option<&[String]>, now: Timestamp) -> Option<Result<Claimed, String>> {
    let unverified = unverified_claims(token)?;
    let issuer = unverified.get("iss").and_then(Value::as_str)?;
    if !config.issuers.iter().any(|i| i == issuer) {
        return None;
    }
    Some(verified(config, token, audiences.unwrap_or(&config.audiences), now))
}

fn verified(config: &TokenConfig, token: &str, requested: &[String], now: Timestamp) -> Result<Claimed, String> {
    let claims = jwt::verify(token, &config.public_keys)?;
    let string = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_string();
    let mut audiences: Vec<String> = match claims.get("aud") {
        Some(Value::String(a)) => vec![a.clone()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        _ => Vec::new(),
    };
    // A token meant for no one in particular is meant for the API server (kube's legacy tokens).
    if audiences.is_empty() {
        audiences = config.audiences.clone();
    }
    let meant: Vec<String> = audiences.iter().filter(|a| requested.contains(a)).cloned().collect();
    if meant.is_empty() {
        return Err(format!("token audiences {} is invalid for the target audiences {}", go_list(&audiences), go_list(requested)));
    }
    // NumericDates: numbers (go-jose takes fractions); anything else makes the claims invalid.
    let time = |k: &str| match claims.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_f64().map(|t| Some(t as i64)).ok_or_else(|| "invalid claims".to_string()),
    };
    let at = now.as_second();
    if time("exp")?.is_some_and(|exp| at > exp.saturating_add(LEEWAY)) {
        return Err("service account token has expired".into());
    }
    if time("nbf")?.is_some_and(|nbf| at.saturating_add(LEEWAY) < nbf) {
        return Err("service account token is not valid yet".into());
    }
    if time("iat")?.is_some_and(|iat| at.saturating_add(LEEWAY) < iat) {
        return Err("service account token is issued in the future".into());
    }
    let kubernetes = claims.get("kubernetes.io").cloned().unwrap_or(Value::Null);
    let reference = |k: &str| {
        let r = kubernetes.get(k)?;
        Some((string(r.get("name")), string(r.get("uid"))))
    };
    let account = reference("serviceaccount").ok_or("token could not be validated")?;
    Ok(Claimed {
        audiences: meant,
        namespace: string(kubernetes.get("namespace")),
        account,
        pod: reference("pod"),
        secret: reference("secret"),
        node: reference("node"),
        jti: string(claims.get("jti")),
    })
}

/// The claims of a JWT, read without checking its signature (to see whose it is).
fn unverified_claims(token: &str) -> Option<Map<String, Value>> {
    if !jwt::is_jwt(token) {
        return None;
    }
    let payload = token.split('.').nth(1)?;
    let bytes = base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, payload).ok()?;
    serde_json::from_slice(&bytes).ok()
}

impl Claimed {
    /// The objects to look up to confirm the token: its service account, and what it is bound
    /// to (a pod-bound token's node is taken as it says).
    pub fn lookups(&self) -> Vec<Lookup> {
        let ns = || self.namespace.clone();
        let mut out = vec![Lookup::ServiceAccount { namespace: ns(), name: self.account.0.clone() }];
        if let Some((name, _)) = &self.secret {
            out.push(Lookup::Secret { namespace: ns(), name: name.clone() });
        }
        if let Some((name, _)) = &self.pod {
            out.push(Lookup::Pod { namespace: ns(), name: name.clone() });
        } else if let Some((name, _)) = &self.node {
            out.push(Lookup::Node(name.clone()));
        }
        out
    }

    /// The user the token stands for, given what its [`Self::lookups`] found (in order), or
    /// why it no longer does, in kube's words (its validator's checks, in its order).
    pub fn confirm(&self, found: &[(Lookup, Option<Value>)], now: Timestamp) -> Result<UserInfo, String> {
        const INVALIDATED: &str = "service account token has been invalidated";
        let deleted_before = now.as_second() - LEEWAY;
        for (lookup, object) in found {
            let (what, claimed) = match lookup {
                Lookup::ServiceAccount { .. } => ("service account", Some(&self.account)),
                Lookup::Secret { .. } => ("secret", self.secret.as_ref()),
                Lookup::Pod { .. } => ("pod", self.pod.as_ref()),
                Lookup::Node(_) => ("node", self.node.as_ref()),
                Lookup::Namespace(_) => continue,
            };
            let Some((name, claimed_uid)) = claimed else { continue };
            let account = matches!(lookup, Lookup::ServiceAccount { .. });
            let Some(object) = object else {
                return Err(if account { format!("serviceaccounts {} not found", crate::status::quote(name)) } else { INVALIDATED.into() });
            };
            let uid = meta::uid(object);
            if uid != claimed_uid {
                let claim = if account { "claim".to_string() } else { format!("service account {what} ref claim") };
                return Err(format!("{what} UID ({uid}) does not match {claim} ({claimed_uid})"));
            }
            let gone = meta::deletion_timestamp(object).and_then(|t| t.parse::<Timestamp>().ok()).is_some_and(|t| t.as_second() < deleted_before);
            if gone {
                return Err(if account { format!("service account {}/{name} has been deleted", self.namespace) } else { INVALIDATED.into() });
            }
        }
        let mut extra = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            extra.insert(format!("{EXTRA_PREFIX}{k}"), vec![v]);
        };
        if let Some((name, uid)) = self.pod.as_ref().filter(|(n, u)| !n.is_empty() && !u.is_empty()) {
            put("pod-name", name.clone());
            put("pod-uid", uid.clone());
        }
        if !self.jti.is_empty() {
            put("credential-id", format!("JTI={}", self.jti));
        }
        if let Some((name, uid)) = self.node.as_ref().filter(|(n, _)| !n.is_empty()) {
            put("node-name", name.clone());
            if !uid.is_empty() {
                put("node-uid", uid.clone());
            }
        }
        Ok(UserInfo {
            name: format!("system:serviceaccount:{}:{}", self.namespace, self.account.0),
            uid: self.account.1.clone(),
            groups: vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{}", self.namespace), AUTHENTICATED_GROUP.into()],
            extra,
        })
    }
}

/// A list of strings as Go's `%q` prints it: `["a" "b"]`.
fn go_list(list: &[String]) -> String {
    format!("[{}]", list.iter().map(|s| crate::status::quote(s)).collect::<Vec<_>>().join(" "))
}
