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
//! newer copy conflicts, and the newer copy's watch event plans again.

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

/// How long after a failed request the token Secrets are looked at again.
const RETRY: SignedDuration = SignedDuration::from_secs(5);

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
    /// When every token Secret is looked at again after a request failed.
    pub(super) retry: Option<Timestamp>,
}

/// What a request of the controller's is for.
pub(super) enum TokenStep {
    /// The account the Secret names, which the watch has not shown: a GET.
    Account,
    /// The Secret filled, or deleted; or its account without it.
    Write,
}

impl Tokens {
    pub(super) fn new(key: SigningKey) -> Tokens {
        Tokens { key, accounts: BTreeMap::new(), secrets: BTreeMap::new(), busy: BTreeSet::new(), stale: BTreeSet::new(), retry: None }
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
            self.plan_token(secret);
        }
    }

    pub(super) fn token_secret_changed(&mut self, change: Change) {
        let key = key_of(&change.object);
        if change.deleted {
            self.tokens_mut().secrets.remove(&key);
            self.forget_token(&change.object);
        } else {
            self.tokens_mut().secrets.insert(key.clone(), change.object);
        }
        self.plan_token(key);
    }

    /// Takes a deleted Secret out of its account's `secrets`.
    fn forget_token(&mut self, secret: &Value) {
        let (namespace, name) = key_of(secret);
        let account_key = (namespace.clone(), annotation(secret, NAME_ANNOTATION).to_string());
        let Some(account) = self.tokens_mut().accounts.get(&account_key) else { return };
        let uid = annotation(secret, UID_ANNOTATION);
        let Some(refs) = account.get("secrets").and_then(Value::as_array) else { return };
        if (!uid.is_empty() && uid != meta::uid(account)) || !refs.iter().any(|r| r.get("name").and_then(Value::as_str) == Some(&name)) {
            return;
        }
        let kept: Vec<Value> = refs.iter().filter(|r| r.get("name").and_then(Value::as_str) != Some(&name)).cloned().collect();
        let mut account = account.clone();
        account["secrets"] = json!(kept);
        let key = (namespace.clone(), name);
        self.tokens_mut().busy.insert(key.clone());
        self.send(
            Asker::Tokens { key, step: TokenStep::Write, status: 0, body: Vec::new() },
            "PUT",
            account_path(&namespace, &account_key.1),
            "",
            Some(account),
        );
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
        let account_key = (key.0.clone(), annotation(secret, NAME_ANNOTATION).to_string());
        let uid = annotation(secret, UID_ANNOTATION);
        let account = tokens.accounts.get(&account_key).filter(|a| uid.is_empty() || meta::uid(a) == uid);
        let (method, path, body, step) = match account {
            Some(account) => match filled(secret, account, &ca_pem, &tokens.key) {
                Some(filled) => ("PUT", secret_path(&key), Some(filled), TokenStep::Write),
                None => return,
            },
            None => ("GET", account_path(&account_key.0, &account_key.1), None, TokenStep::Account),
        };
        tokens.busy.insert(key.clone());
        self.send(Asker::Tokens { key, step, status: 0, body: Vec::new() }, method, path, "", body);
    }

    /// The answer to a request for the Secret `key`.
    pub(super) fn token_answered(&mut self, now: Timestamp, key: Key, step: TokenStep, status: u16, body: &[u8]) {
        let ca_pem = self.ca_pem.clone();
        let tokens = self.tokens_mut();
        let secret = match step {
            TokenStep::Account => tokens.secrets.get(&key).cloned(),
            TokenStep::Write => None,
        };
        let next = match secret {
            Some(secret) => {
                let uid = annotation(&secret, UID_ANNOTATION);
                let account: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
                match status {
                    200 if uid.is_empty() || meta::uid(&account) == uid => filled(&secret, &account, &ca_pem, &tokens.key).map(|f| ("PUT", f)),
                    // The account is gone, or is another one: so is the token.
                    200 | 404 => Some(("DELETE", json!({"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": meta::uid(&secret)}}))),
                    _ => None,
                }
            }
            None => None,
        };
        // A write that conflicted or found nothing is no news: the watch brings what changed.
        if !(200..300).contains(&status) && status != 404 && status != 409 {
            tokens.retry = Some(now + RETRY);
        }
        if let Some((method, body)) = next {
            let path = secret_path(&key);
            self.send(Asker::Tokens { key, step: TokenStep::Write, status: 0, body: Vec::new() }, method, path, "", Some(body));
            return;
        }
        tokens.busy.remove(&key);
        if tokens.stale.remove(&key) {
            self.plan_token(key);
        }
    }

    /// Looks at every token Secret again (after a failure).
    pub(super) fn plan_all_tokens(&mut self) {
        let keys: Vec<Key> = self.tokens_mut().secrets.keys().cloned().collect();
        for key in keys {
            self.plan_token(key);
        }
    }
}
