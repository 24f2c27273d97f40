//! Service account tokens as credentials (kube's `jwtTokenAuthenticator` and its validator):
//! a bearer JWT whose issuer is one of `--service-account-issuer`'s is checked in two steps.
//! First what the token alone says ([`check_token`]): a signature of one of the keys, an
//! issuer, an audience among `--api-audiences`, and its times (a minute's leeway, as go-jose
//! gives). Then what it names ([`Claimed::confirm`]): the service account, and the pod, secret
//! or node it is bound to, must exist with the uids it names, and not have been deleted more
//! than a minute ago; so a token stops working when what it is bound to is deleted.
//!
//! A token of the legacy issuer `kubernetes/serviceaccount` (one a `kubernetes.io/service-account-token`
//! Secret holds, made by the tokens controller) is checked as kube's legacy validator checks
//! it: it has no times; the Secret it names must still hold exactly this token and not be
//! marked invalid (`kubernetes.io/legacy-token-invalid-since`), and the account must exist
//! with the uid it names.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use super::{AUTHENTICATED_GROUP, UserInfo};
use crate::admission::Lookup;
use crate::meta;
use crate::serviceaccount::{TokenConfig, jwt};

/// go-jose's `DefaultLeeway`, in seconds.
const LEEWAY: i64 = 60;

const EXTRA_PREFIX: &str = "authentication.kubernetes.io/";

/// kube's `serviceaccount.LegacyIssuer`: the issuer of the tokens Secrets hold.
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";
/// The label that marks a Secret's token as no longer good (kube's legacy token cleaner sets it).
pub const INVALID_SINCE_LABEL: &str = "kubernetes.io/legacy-token-invalid-since";
/// The label that dates a Secret's token's last use (the day, UTC).
pub const LAST_USED_LABEL: &str = "kubernetes.io/legacy-token-last-used";

/// A token whose signature, issuer, audiences and times check; who it names.
#[derive(Clone, Debug, PartialEq)]
pub struct Claimed {
    /// The audiences the token is meant for among those asked.
    pub audiences: Vec<String>,
    namespace: String,
    account: (String, String),
    kind: Kind,
}

#[derive(Clone, Debug, PartialEq)]
enum Kind {
    /// A TokenRequest's token, and what it is bound to.
    Bound { pod: Option<(String, String)>, secret: Option<(String, String)>, node: Option<(String, String)>, jti: String },
    /// A Secret's token: the Secret's name, and the token it must still hold.
    Legacy { secret: String, token: String },
}

/// What confirming a token found: the user, and what the client is warned of.
#[derive(Clone, Debug, PartialEq)]
pub struct Confirmed {
    pub user: UserInfo,
    pub warning: Option<&'static str>,
}

/// kube's warning to a client authenticated by a token its service account's `secrets` lists.
pub const AUTO_GENERATED_WARNING: &str =
    "Use tokens from the TokenRequest API or manually created secret-based tokens instead of auto-generated secret-based tokens.";

/// What `token` claims, if it is a service account token of this server's issuers: `None`
/// for a token that is not (other authenticators may know it), `Err` with kube's reason for
/// one that is but does not check. The token must be meant for one of `audiences` (a
/// TokenReview's), or of `--api-audiences` when `None`.
pub fn check_token(config: &TokenConfig, token: &str, audiences: Option<&[String]>, now: Timestamp) -> Option<Result<Claimed, String>> {
    let unverified = unverified_claims(token)?;
    let issuer = unverified.get("iss").and_then(Value::as_str)?;
    let requested = audiences.unwrap_or(&config.audiences);
    // kube tries the legacy authenticator first.
    if issuer == LEGACY_ISSUER {
        return Some(signed(config, token, requested).and_then(|(claims, meant)| legacy(claims, meant, token)));
    }
    if !config.issuers.iter().any(|i| i == issuer) {
        return None;
    }
    Some(signed(config, token, requested).and_then(|(claims, meant)| bound(claims, meant, now)))
}

fn string(v: Option<&Value>) -> String {
    v.and_then(Value::as_str).unwrap_or_default().to_string()
}

/// The claims of a token one of the keys signed, and the audiences it is meant for among
/// those `requested` (a token that names none is meant for the API server).
fn signed(config: &TokenConfig, token: &str, requested: &[String]) -> Result<(Map<String, Value>, Vec<String>), String> {
    let claims = jwt::verify(token, &config.public_keys)?;
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
    Ok((claims, meant))
}

/// A legacy token's claims, checked as kube's legacy validator checks them before lookups.
fn legacy(claims: Map<String, Value>, meant: Vec<String>, token: &str) -> Result<Claimed, String> {
    let claim = |k: &str| string(claims.get(&format!("kubernetes.io/serviceaccount/{k}")));
    let subject = string(claims.get("sub"));
    if subject.is_empty() {
        return Err("sub claim is missing".into());
    }
    let required = [
        ("namespace", "namespace"),
        ("secret.name", "secretName"),
        ("service-account.name", "serviceAccountName"),
        ("service-account.uid", "serviceAccountUID"),
    ];
    let mut values = Vec::new();
    for (key, what) in required {
        let value = claim(key);
        if value.is_empty() {
            return Err(format!("{what} claim is missing"));
        }
        values.push(value);
    }
    let [namespace, secret, name, uid] = <[String; 4]>::try_from(values).expect("four claims");
    if split_username(&subject) != Some((namespace.as_str(), name.as_str())) {
        return Err("sub claim is invalid".into());
    }
    Ok(Claimed { audiences: meant, namespace, account: (name, uid), kind: Kind::Legacy { secret, token: token.to_string() } })
}

/// The namespace and name of a service account's user name, if it is one (kube's `SplitUsername`).
fn split_username(user: &str) -> Option<(&str, &str)> {
    let (namespace, name) = user.strip_prefix("system:serviceaccount:")?.split_once(':')?;
    let valid = !name.contains(':') && crate::validation::dns1123_label(namespace).is_empty() && crate::validation::dns1123_subdomain(name).is_empty();
    valid.then_some((namespace, name))
}

/// A bound token's claims, checked as kube's validator checks them before lookups.
fn bound(claims: Map<String, Value>, meant: Vec<String>, now: Timestamp) -> Result<Claimed, String> {
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
        kind: Kind::Bound { pod: reference("pod"), secret: reference("secret"), node: reference("node"), jti: string(claims.get("jti")) },
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
        let account = Lookup::ServiceAccount { namespace: ns(), name: self.account.0.clone() };
        let (pod, secret, node) = match &self.kind {
            Kind::Bound { pod, secret, node, .. } => (pod, secret, node),
            Kind::Legacy { secret, .. } => return vec![Lookup::Secret { namespace: ns(), name: secret.clone() }, account],
        };
        let mut out = vec![account];
        if let Some((name, _)) = secret {
            out.push(Lookup::Secret { namespace: ns(), name: name.clone() });
        }
        if let Some((name, _)) = pod {
            out.push(Lookup::Pod { namespace: ns(), name: name.clone() });
        } else if let Some((name, _)) = node {
            out.push(Lookup::Node(name.clone()));
        }
        out
    }

    /// The user the token stands for, given what its [`Self::lookups`] found (in order), or
    /// why it no longer does, in kube's words (its validator's checks, in its order).
    pub fn confirm(&self, found: &[(Lookup, Option<std::sync::Arc<Value>>)], now: Timestamp) -> Result<Confirmed, String> {
        let (extra, warning) = match &self.kind {
            Kind::Bound { pod, secret, node, jti } => (self.confirm_bound(found, now, [pod, secret, node], jti)?, None),
            Kind::Legacy { secret, token } => (BTreeMap::new(), self.confirm_legacy(found, secret, token)?),
        };
        let user = UserInfo {
            name: format!("system:serviceaccount:{}:{}", self.namespace, self.account.0),
            uid: self.account.1.clone(),
            groups: vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{}", self.namespace), AUTHENTICATED_GROUP.into()],
            extra,
        };
        Ok(Confirmed { user, warning })
    }

    /// A bound token's objects: each must exist with the uid claimed and not have been deleted
    /// more than a minute ago. The user's extra values say what the token is bound to.
    fn confirm_bound(
        &self,
        found: &[(Lookup, Option<std::sync::Arc<Value>>)],
        now: Timestamp,
        [pod, secret, node]: [&Option<(String, String)>; 3],
        jti: &str,
    ) -> Result<BTreeMap<String, Vec<String>>, String> {
        const INVALIDATED: &str = "service account token has been invalidated";
        let deleted_before = now.as_second() - LEEWAY;
        for (lookup, object) in found {
            let (what, claimed) = match lookup {
                Lookup::ServiceAccount { .. } => ("service account", Some(&self.account)),
                Lookup::Secret { .. } => ("secret", secret.as_ref()),
                Lookup::Pod { .. } => ("pod", pod.as_ref()),
                Lookup::Node(_) => ("node", node.as_ref()),
                Lookup::Namespace(_)
                | Lookup::LimitRanges(_)
                | Lookup::StorageClasses
                | Lookup::IngressClasses
                | Lookup::RuntimeClass(_)
                | Lookup::Pods(_)
                | Lookup::ResourceQuotas(_)
                | Lookup::Claim { .. }
                | Lookup::Volume(_)
                | Lookup::CsiDriver(_)
                | Lookup::Params { .. } => {
                    continue;
                }
            };
            let Some((name, claimed_uid)) = claimed else { continue };
            let account = matches!(lookup, Lookup::ServiceAccount { .. });
            let Some(object) = object else {
                return Err(if account { account_not_found(name) } else { INVALIDATED.into() });
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
        if let Some((name, uid)) = pod.as_ref().filter(|(n, u)| !n.is_empty() && !u.is_empty()) {
            put("pod-name", name.clone());
            put("pod-uid", uid.clone());
        }
        if !jti.is_empty() {
            put("credential-id", format!("JTI={jti}"));
        }
        if let Some((name, uid)) = node.as_ref().filter(|(n, _)| !n.is_empty()) {
            put("node-name", name.clone());
            if !uid.is_empty() {
                put("node-uid", uid.clone());
            }
        }
        Ok(extra)
    }

    /// A legacy token's Secret and account, in kube's order and words: the Secret must exist,
    /// not be deleting, hold this very token and not be marked invalid; the account must exist,
    /// not be deleting, and have the uid claimed. A Secret the account lists (one made for it
    /// automatically) earns kube's warning.
    fn confirm_legacy(&self, found: &[(Lookup, Option<std::sync::Arc<Value>>)], secret_name: &str, token: &str) -> Result<Option<&'static str>, String> {
        let (secret, account) = self.legacy_objects(found, token)?;
        if invalid_since(secret) {
            let (ns, name) = (&self.namespace, &self.account.0);
            return Err(format!(
                "the token in secret {ns}/{secret_name} for service account {ns}/{name} has been marked invalid. Use tokens from the TokenRequest API or manually created secret-based tokens, or remove the '{INVALID_SINCE_LABEL}' label from the secret to temporarily allow use of this token"
            ));
        }
        let listed = account
            .get("secrets")
            .and_then(Value::as_array)
            .is_some_and(|refs| refs.iter().any(|r| r.get("name").and_then(Value::as_str) == Some(secret_name)));
        Ok(listed.then_some(AUTO_GENERATED_WARNING))
    }

    /// The Secret and the account of a legacy token, if they still vouch for it (all of
    /// [`Self::confirm_legacy`]'s checks but the invalid mark).
    fn legacy_objects<'a>(&self, found: &'a [(Lookup, Option<std::sync::Arc<Value>>)], token: &str) -> Result<(&'a Value, &'a Value), String> {
        const INVALIDATED: &str = "Token has been invalidated";
        let object = |secret: bool| found.iter().find(|(l, _)| matches!(l, Lookup::Secret { .. }) == secret).and_then(|(_, o)| o.as_ref());
        let secret = object(true).filter(|s| meta::deletion_timestamp(s).is_none()).ok_or(INVALIDATED)?;
        let held =
            secret.pointer("/data/token").and_then(Value::as_str).and_then(|t| base64::Engine::decode(&base64::engine::general_purpose::STANDARD, t).ok());
        if !held.is_some_and(|held| same_bytes(&held, token.as_bytes())) {
            return Err("Token does not match server's copy".into());
        }
        let (name, uid) = &self.account;
        let account = object(false).ok_or_else(|| account_not_found(name))?;
        if meta::deletion_timestamp(account).is_some() {
            return Err(format!("ServiceAccount {}/{name} has been deleted", self.namespace));
        }
        if meta::uid(account) != uid {
            return Err(format!("ServiceAccount UID ({}) does not match claim ({uid})", meta::uid(account)));
        }
        Ok((secret, account))
    }

    /// Why the token does not stand for anyone when `lookup` could not be read (`error`), as
    /// kube's validators say it.
    pub fn unreadable(&self, lookup: &Lookup, error: &str) -> String {
        match (lookup, &self.kind) {
            (Lookup::ServiceAccount { .. }, _) => error.to_string(),
            (_, Kind::Legacy { .. }) => "Token has been invalidated".into(),
            (_, Kind::Bound { .. }) => "service account token has been invalidated".into(),
        }
    }

    /// For a legacy token its Secret and account vouch for (marked invalid or not), the merge
    /// patch that dates the Secret's `kubernetes.io/legacy-token-last-used` label today (UTC),
    /// unless it says today or tomorrow already: the Secret's path and the patch, as kube's
    /// validator writes it.
    pub fn last_used(&self, found: &[(Lookup, Option<std::sync::Arc<Value>>)], now: Timestamp) -> Option<(String, Value)> {
        let Kind::Legacy { secret, token } = &self.kind else { return None };
        let (object, _) = self.legacy_objects(found, token).ok()?;
        let today = now.to_zoned(jiff::tz::TimeZone::UTC).date();
        let tomorrow = today.tomorrow().ok()?;
        let last_used = meta::labels(object).into_iter().find(|(k, _)| *k == LAST_USED_LABEL).map(|(_, v)| v);
        if last_used.is_some_and(|v| v == today.to_string() || v == tomorrow.to_string()) {
            return None;
        }
        let patch = json!({"kind": "Secret", "apiVersion": "v1",
            "metadata": {"name": secret, "namespace": self.namespace, "uid": meta::uid(object), "labels": {LAST_USED_LABEL: today.to_string()}}});
        Some((format!("/api/v1/namespaces/{}/secrets/{secret}", self.namespace), patch))
    }
}

fn invalid_since(secret: &Value) -> bool {
    meta::labels(secret).iter().any(|(k, v)| *k == INVALID_SINCE_LABEL && !v.is_empty())
}

/// What a lookup of a missing service account says (the API's NotFound).
fn account_not_found(name: &str) -> String {
    format!("serviceaccounts {} not found", crate::status::quote(name))
}

/// Whether two byte strings are equal, in a time that does not depend on where they differ.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A list of strings as Go's `%q` prints it: `["a" "b"]`.
fn go_list(list: &[String]) -> String {
    format!("[{}]", list.iter().map(|s| crate::status::quote(s)).collect::<Vec<_>>().join(" "))
}
