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
    namespace: String,
    account: (String, String),
    pod: Option<(String, String)>,
    secret: Option<(String, String)>,
    node: Option<(String, String)>,
    jti: String,
}

/// What `token` claims, if it is a service account token of this server's issuers: `None`
/// for a token that is not (other authenticators may know it), `Err` with kube's reason for
/// one that is but does not check.
pub fn check_token(config: &TokenConfig, token: &str, now: Timestamp) -> Option<Result<Claimed, String>> {
    let unverified = unverified_claims(token)?;
    let issuer = unverified.get("iss").and_then(Value::as_str)?;
    if !config.issuers.iter().any(|i| i == issuer) {
        return None;
    }
    Some(verified(config, token, now))
}

fn verified(config: &TokenConfig, token: &str, now: Timestamp) -> Result<Claimed, String> {
    let claims = jwt::verify(token, &config.public_keys)?;
    let string = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_string();
    let audiences: Vec<String> = match claims.get("aud") {
        Some(Value::String(a)) => vec![a.clone()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        _ => Vec::new(),
    };
    if audiences.is_empty() {
        return Err("token does not have an audience".into());
    }
    if !audiences.iter().any(|a| config.audiences.contains(a)) {
        return Err(format!("token audiences {audiences:?} is invalid for the target audiences {:?}", config.audiences));
    }
    let at = now.as_second();
    let time = |k: &str| claims.get(k).and_then(Value::as_i64);
    if time("exp").is_some_and(|exp| at > exp + LEEWAY) {
        return Err("service account token has expired".into());
    }
    if time("nbf").is_some_and(|nbf| at + LEEWAY < nbf) {
        return Err("service account token is not valid yet".into());
    }
    if time("iat").is_some_and(|iat| at + LEEWAY < iat) {
        return Err("service account token is issued in the future".into());
    }
    let kubernetes = claims.get("kubernetes.io").cloned().unwrap_or(Value::Null);
    let reference = |k: &str| {
        let r = kubernetes.get(k)?;
        Some((string(r.get("name")), string(r.get("uid"))))
    };
    let account = reference("serviceaccount").ok_or("token could not be validated")?;
    Ok(Claimed {
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
    /// why it no longer does.
    pub fn confirm(&self, found: &[(Lookup, Option<Value>)], now: Timestamp) -> Result<UserInfo, String> {
        let deleted_before = now.as_second() - LEEWAY;
        for (lookup, object) in found {
            let (what, claimed) = match lookup {
                Lookup::ServiceAccount { .. } => ("service account", &self.account),
                Lookup::Secret { .. } => ("secret", self.secret.as_ref().expect("a secret lookup is of a secret claim")),
                Lookup::Pod { .. } => ("pod", self.pod.as_ref().expect("a pod lookup is of a pod claim")),
                Lookup::Node(_) => ("node", self.node.as_ref().expect("a node lookup is of a node claim")),
                Lookup::Namespace(_) => continue,
            };
            let (resource, name) = match lookup {
                Lookup::Node(name) => ("nodes", name.clone()),
                Lookup::ServiceAccount { name, .. } => ("serviceaccounts", name.clone()),
                Lookup::Secret { name, .. } => ("secrets", name.clone()),
                Lookup::Pod { name, .. } => ("pods", name.clone()),
                Lookup::Namespace(_) => continue,
            };
            let Some(object) = object else { return Err(format!("{resource} {} not found", crate::status::quote(&name))) };
            let gone = meta::deletion_timestamp(object).and_then(|t| t.parse::<Timestamp>().ok()).is_some_and(|t| t.as_second() < deleted_before);
            if gone {
                let place = if matches!(lookup, Lookup::Node(_)) { name.clone() } else { format!("{}/{name}", self.namespace) };
                return Err(format!("{what} {place} has been deleted"));
            }
            let uid = meta::uid(object);
            if uid != claimed.1 {
                let claim = if what == "secret" { "service account secret ref claim" } else { "claim" };
                return Err(format!("{what} UID ({uid}) does not match {claim} ({})", claimed.1));
            }
        }
        let mut extra = BTreeMap::new();
        let mut put = |k: &str, v: &str| {
            if !v.is_empty() {
                extra.insert(format!("{EXTRA_PREFIX}{k}"), vec![v.to_string()]);
            }
        };
        if let Some((name, uid)) = &self.pod {
            put("pod-name", name);
            put("pod-uid", uid);
        }
        if let Some((name, uid)) = &self.node {
            put("node-name", name);
            put("node-uid", uid);
        }
        if !self.jti.is_empty() {
            put("credential-id", &format!("JTI={}", self.jti));
        }
        Ok(UserInfo {
            name: format!("system:serviceaccount:{}:{}", self.namespace, self.account.0),
            uid: self.account.1.clone(),
            groups: vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{}", self.namespace), AUTHENTICATED_GROUP.into()],
            extra,
        })
    }
}
