//! kube-controller-manager's `serviceaccount-token` controller: a Secret of type
//! `kubernetes.io/service-account-token` that names a service account
//! (`kubernetes.io/service-account.name`, and `kubernetes.io/service-account.uid` if given)
//! gets a legacy token for it (issuer `kubernetes/serviceaccount`, signed with the service
//! account key, no expiry), the namespace and the root CA in its data, and both annotations; a
//! Secret whose account does not exist (asked of the API when the watch has not seen it) is
//! deleted, as are the token Secrets of a deleted account; a deleted Secret is taken out of its
//! account's `secrets`. As in kube v1.33, no Secret is made for an account that has none.
//!
//! Writes go from the watched copy (its resource version a precondition): one that meets a
//! newer copy conflicts, and the newer copy's watch event plans again. A request that fails
//! otherwise is tried again 5 s later, at most 10 times (kube's `maxRetries`). Taking a Secret
//! out of its account's `secrets` reads the account afresh and tries again on a conflict, up
//! to 10 times, as kube's `RetryOnConflict` does. A Secret whose account name could not be
//! part of a path is left alone, as client-go refuses to ask for it.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::{Asker, Change, Controllers};
use crate::auth::LEGACY_ISSUER;
use crate::meta;
use crate::serviceaccount::jwt;
use crate::serviceaccount::keys::SigningKey;

pub(super) const TOKEN_SECRETS: &str = "fieldSelector=type%3Dkubernetes.io%2Fservice-account-token";
const NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
const UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";

/// How long after a failed request a token Secret is looked at again, and how many times.
const RETRY: SignedDuration = SignedDuration::from_secs(5);
const MAX_RETRIES: u32 = 10;

/// A namespace and a name.
type Key = (String, String);

pub(super) struct Tokens {
    key: SigningKey,
    /// Service accounts and token Secrets, as last seen.
    accounts: BTreeMap<Key, Value>,
    secrets: BTreeMap<Key, Value>,
    /// Secrets with a request in flight, and those that changed meanwhile.
    busy: BTreeSet<Key>,
    stale: BTreeSet<Key>,
    /// Secrets whose last requests failed, how many times in a row; and when to try again.
    failures: BTreeMap<Key, u32>,
    retry_at: BTreeMap<Key, Timestamp>,
}

/// What a request of the controller's is for.
pub(super) enum TokenStep {
    /// The account the Secret names, which the watch has not shown: a GET.
    Account,
    /// The Secret filled, or deleted.
    Write,
    /// The account of a deleted Secret, read afresh to take the Secret out of its `secrets`;
    /// `attempt` counts conflicts.
    Unlist { account: String, uid: String, attempt: u32 },
    /// That account written without it.
    Unlisted { account: String, uid: String, attempt: u32 },
}

impl Tokens {
    pub(super) fn new(key: SigningKey) -> Tokens {
        Tokens {
            key,
            accounts: BTreeMap::new(),
            secrets: BTreeMap::new(),
            busy: BTreeSet::new(),
            stale: BTreeSet::new(),
            failures: BTreeMap::new(),
            retry_at: BTreeMap::new(),
        }
    }

    /// When the next failed Secret is tried again.
    pub(super) fn wake_at(&self) -> Option<Timestamp> {
        self.retry_at.iter().filter(|(k, _)| !self.busy.contains(*k)).map(|(_, at)| *at).min()
    }

    /// The token Secrets of the account `(namespace, name)` with this uid.
    fn secrets_of(&self, namespace: &str, name: &str, uid: &str) -> Vec<Key> {
        let names = |s: &Value| annotation(s, NAME_ANNOTATION) == name && [uid, ""].contains(&annotation(s, UID_ANNOTATION));
        self.secrets.iter().filter(|((ns, _), s)| ns == namespace && names(s)).map(|(k, _)| k.clone()).collect()
    }
}

fn annotation<'a>(object: &'a Value, key: &str) -> &'a str {
    meta::str_at(object, &["metadata", "annotations", key]).unwrap_or_default()
}

/// The account a Secret names, if a request can name it (client-go's path segment check).
fn account_name(secret: &Value) -> Option<&str> {
    let name = annotation(secret, NAME_ANNOTATION);
    (!name.is_empty() && name != "." && name != ".." && !name.contains(['/', '%'])).then_some(name)
}

fn key_of(object: &Value) -> Key {
    (meta::namespace(object).to_string(), meta::name(object).to_string())
}

/// The Secret with what it lacks for `account`, if it lacks anything (kube's
/// `secretUpdateNeeded`: a CA other than the root CA, no namespace, no token).
fn filled(secret: &Value, account: &Value, ca_pem: &str, key: &SigningKey) -> Option<Value> {
    let data = |k: &str| meta::str_at(secret, &["data", k]).unwrap_or_default();
    let ca = STANDARD.encode(ca_pem);
    let needs_ca = !ca_pem.is_empty() && data("ca.crt") != ca;
    let needs_namespace = data("namespace").is_empty();
    let needs_token = data("token").is_empty();
    if !needs_ca && !needs_namespace && !needs_token {
        return None;
    }
    let (namespace, name) = key_of(secret);
    let (account_name, account_uid) = (meta::name(account), meta::uid(account));
    let mut out = secret.clone();
    let data = meta::object_at(&mut out, &["data"]);
    if needs_ca {
        data.insert("ca.crt".into(), json!(ca));
    }
    if needs_namespace {
        data.insert("namespace".into(), json!(STANDARD.encode(&namespace)));
    }
    if needs_token {
        let claims = json!({
            "iss": LEGACY_ISSUER,
            "kubernetes.io/serviceaccount/namespace": namespace,
            "kubernetes.io/serviceaccount/secret.name": name,
            "kubernetes.io/serviceaccount/service-account.name": account_name,
            "kubernetes.io/serviceaccount/service-account.uid": account_uid,
            "sub": format!("system:serviceaccount:{namespace}:{account_name}"),
        });
        data.insert("token".into(), json!(STANDARD.encode(jwt::sign(key, &claims))));
    }
    let annotations = meta::object_at(&mut out, &["metadata", "annotations"]);
    annotations.insert(NAME_ANNOTATION.into(), json!(account_name));
    annotations.insert(UID_ANNOTATION.into(), json!(account_uid));
    Some(out)
}

fn secret_path((namespace, name): &Key) -> String {
    format!("/api/v1/namespaces/{namespace}/secrets/{name}")
}

fn account_path(namespace: &str, name: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/serviceaccounts/{name}")
}

impl Controllers {
    fn tokens_mut(&mut self) -> &mut Tokens {
        self.tokens.as_mut().expect("only the tokens controller's watches and requests call here")
    }

    fn send_token(&mut self, key: Key, step: TokenStep, method: &str, path: String, body: Option<Value>) {
        self.tokens_mut().busy.insert(key.clone());
        self.send(Asker::Tokens { key, step, status: 0, body: Vec::new() }, method, path, "", body);
    }

    /// An account came or changed: its Secrets are looked at. It went: its Secrets are
    /// deleted (kube's `deleteTokens`).
    pub(super) fn token_account_changed(&mut self, change: Change) {
        let (namespace, name) = key_of(&change.object);
        let uid = meta::uid(&change.object).to_string();
        let tokens = self.tokens_mut();
        if change.deleted {
            tokens.accounts.remove(&(namespace.clone(), name.clone()));
        } else {
            tokens.accounts.insert((namespace.clone(), name.clone()), change.object);
        }
        for secret in tokens.secrets_of(&namespace, &name, &uid) {
            match self.tokens_mut().secrets.get(&secret).map(meta::uid).map(str::to_string) {
                Some(secret_uid) if change.deleted && !self.tokens_mut().busy.contains(&secret) => {
                    let path = secret_path(&secret);
                    self.send_token(secret, TokenStep::Write, "DELETE", path, Some(delete_options(&secret_uid)));
                }
                _ => self.plan_token(secret),
            }
        }
    }

    pub(super) fn token_secret_changed(&mut self, change: Change) {
        let key = key_of(&change.object);
        if change.deleted {
            self.tokens_mut().secrets.remove(&key);
            self.tokens_mut().failures.remove(&key);
            self.tokens_mut().retry_at.remove(&key);
            self.unlist(&change.object, 0);
        } else {
            self.tokens_mut().secrets.insert(key.clone(), change.object);
        }
        self.plan_token(key);
    }

    /// Reads the account of the deleted Secret `secret` afresh, to take the Secret out of its
    /// `secrets`.
    fn unlist(&mut self, secret: &Value, attempt: u32) {
        let Some(account) = account_name(secret).map(str::to_string) else { return };
        let (namespace, name) = key_of(secret);
        let path = account_path(&namespace, &account);
        let step = TokenStep::Unlist { account, uid: annotation(secret, UID_ANNOTATION).to_string(), attempt };
        self.send_token((namespace, name), step, "GET", path, None);
    }

    /// Brings the Secret `key` in line with its account: fills it, deletes it, or asks
    /// whether its account exists.
    fn plan_token(&mut self, key: Key) {
        let ca_pem = self.ca_pem.clone();
        let tokens = self.tokens_mut();
        if tokens.busy.contains(&key) {
            tokens.stale.insert(key);
            return;
        }
        let Some(secret) = tokens.secrets.get(&key) else { return };
        let Some(name) = account_name(secret) else { return };
        let account_key = (key.0.clone(), name.to_string());
        let uid = annotation(secret, UID_ANNOTATION);
        let account = tokens.accounts.get(&account_key).filter(|a| uid.is_empty() || meta::uid(a) == uid);
        let (method, path, body, step) = match account {
            Some(account) => match filled(secret, account, &ca_pem, &tokens.key) {
                Some(filled) => ("PUT", secret_path(&key), Some(filled), TokenStep::Write),
                None => return,
            },
            None => ("GET", account_path(&account_key.0, &account_key.1), None, TokenStep::Account),
        };
        self.send_token(key, step, method, path, body);
    }

    /// The answer to a request for the Secret `key`.
    pub(super) fn token_answered(&mut self, now: Timestamp, key: Key, step: TokenStep, status: u16, body: &[u8]) {
        let ca_pem = self.ca_pem.clone();
        let tokens = self.tokens_mut();
        tokens.busy.remove(&key);
        let answer = || serde_json::from_slice::<Value>(body).unwrap_or(Value::Null);
        let next = match step {
            TokenStep::Account => tokens.secrets.get(&key).and_then(|secret| {
                let uid = annotation(secret, UID_ANNOTATION);
                let account = answer();
                match status {
                    200 if uid.is_empty() || meta::uid(&account) == uid => {
                        filled(secret, &account, &ca_pem, &tokens.key).map(|f| ("PUT", Some(f), TokenStep::Write))
                    }
                    // The account is gone, or is another one: so is the token.
                    200 | 404 => Some(("DELETE", Some(delete_options(meta::uid(secret))), TokenStep::Write)),
                    _ => None,
                }
            }),
            TokenStep::Write => None,
            TokenStep::Unlist { account: name, uid, attempt } => {
                let mut account = answer();
                let listed = |r: &Value| r.get("name").and_then(Value::as_str) == Some(key.1.as_str());
                let refs = account.get("secrets").and_then(Value::as_array).cloned().unwrap_or_default();
                if status == 200 && (uid.is_empty() || uid == meta::uid(&account)) && refs.iter().any(listed) {
                    account["secrets"] = json!(refs.into_iter().filter(|r| !listed(r)).collect::<Vec<_>>());
                    let path = account_path(&key.0, &name);
                    return self.send_token(key, TokenStep::Unlisted { account: name, uid, attempt }, "PUT", path, Some(account));
                }
                None
            }
            TokenStep::Unlisted { account, uid, attempt } => {
                if status == 409 && attempt + 1 < MAX_RETRIES {
                    let secret = json!({"metadata": {"namespace": key.0, "name": key.1, "annotations": {NAME_ANNOTATION: account, UID_ANNOTATION: uid}}});
                    return self.unlist(&secret, attempt + 1);
                }
                None
            }
        };
        let tokens = self.tokens_mut();
        // A write that conflicted or found nothing is no news: the watch brings what changed.
        // Any other failure is tried again a while later, a few times.
        if (200..300).contains(&status) || status == 404 || status == 409 {
            tokens.failures.remove(&key);
        } else {
            let count = tokens.failures.entry(key.clone()).or_default();
            *count += 1;
            if *count <= MAX_RETRIES {
                tokens.retry_at.insert(key.clone(), now + RETRY);
            } else {
                tokens.failures.remove(&key);
            }
        }
        if let Some((method, body, step)) = next {
            let path = secret_path(&key);
            self.send_token(key, step, method, path, body);
            return;
        }
        if self.tokens_mut().stale.remove(&key) {
            self.plan_token(key);
        }
    }

    /// Looks again at the Secrets whose last request failed, when their time comes.
    pub(super) fn token_retries_due(&mut self, now: Timestamp) {
        let Some(tokens) = self.tokens.as_mut() else { return };
        let due: Vec<Key> = tokens.retry_at.iter().filter(|(k, at)| **at <= now && !tokens.busy.contains(*k)).map(|(k, _)| k.clone()).collect();
        for key in due {
            self.tokens_mut().retry_at.remove(&key);
            self.plan_token(key);
        }
    }
}

fn delete_options(uid: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}})
}
