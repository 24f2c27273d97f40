//! Fetching an OIDC issuer's keys, as go-oidc's provider and remote key set do for kube's JWT
//! authenticator: the issuer's discovery document (`<issuer>/.well-known/openid-configuration`,
//! or the authenticator's `discoveryURL`; its `issuer` must be the one configured) names `jwks_uri`, and the keys there (those kapi
//! can verify with: RS256 and ES256) become the authenticator's. Until a fetch succeeds the
//! authenticator has none (its tokens are refused); a failed fetch is tried again after
//! [`RETRY`]; the keys are fetched again when a token names a key they lack, at most once per
//! [`RETRY`].
//!
//! A machine: [`KeyFetcher::poll`] gives the GET to make (an HTTPS call the shell makes with
//! `--oidc-ca-file`), [`KeyFetcher::handle`] takes its answer, [`KeyFetcher::poll_timeout`]
//! says when to poll again.

use bytes::Bytes;
use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use super::oidc::Oidc;
use crate::serviceaccount::keys::PublicKey;
use crate::webhook::{ClientConfig, TIMEOUT, WebhookAnswer, WebhookCall};

/// The least time between fetches (and before trying a failed one again).
pub const RETRY: SignedDuration = SignedDuration::from_secs(10);
/// How often a fetcher with keys looks whether a token asked for new ones.
const LOOK: SignedDuration = SignedDuration::from_secs(1);

#[derive(Debug)]
enum Step {
    /// Fetch the discovery document next.
    Discovery,
    /// Fetch the keys at this URL next.
    Keys(String),
    /// The keys are in place.
    Fetched,
}

#[derive(Debug)]
pub struct KeyFetcher {
    step: Step,
    /// A GET is out; its answer is awaited.
    asking: bool,
    /// No GET before this.
    not_before: Timestamp,
}

impl KeyFetcher {
    pub fn new(now: Timestamp) -> KeyFetcher {
        KeyFetcher { step: Step::Discovery, asking: false, not_before: now }
    }

    /// The GET to make now, if any.
    pub fn poll(&mut self, oidc: &Oidc, now: Timestamp) -> Option<WebhookCall> {
        if self.asking || now < self.not_before {
            return None;
        }
        let url = match &self.step {
            Step::Fetched if !oidc.wants_keys() => return None,
            Step::Fetched | Step::Discovery => {
                self.step = Step::Discovery;
                match &oidc.config.discovery_url {
                    Some(url) => url.clone(),
                    None => format!("{}/.well-known/openid-configuration", oidc.config.issuer.trim_end_matches('/')),
                }
            }
            Step::Keys(url) => url.clone(),
        };
        let client = ClientConfig { url: Some(url.clone()), service: None, service_path: None, ca_bundle: oidc.config.ca_bundle.clone() };
        let (target, path) = match client.resolve(None) {
            Ok(found) => found,
            Err(_) => {
                self.failed(now);
                return None;
            }
        };
        self.asking = true;
        Some(WebhookCall { method: http::Method::GET, target, path, body: Bytes::new(), timeout: TIMEOUT, credentials: None })
    }

    /// When to poll again.
    pub fn poll_timeout(&self, now: Timestamp) -> Option<Timestamp> {
        match (&self.step, self.asking) {
            (_, true) => None,
            (Step::Fetched, false) => Some(self.not_before.max(now + LOOK)),
            _ => Some(self.not_before),
        }
    }

    /// The answer to the GET made; what went wrong, if anything (for the log).
    pub fn handle(&mut self, oidc: &Oidc, answer: Result<WebhookAnswer, String>, now: Timestamp) -> Result<(), String> {
        self.asking = false;
        let outcome = answer.and_then(|a| self.take(oidc, a));
        if outcome.is_err() {
            self.failed(now);
        } else if matches!(self.step, Step::Fetched) {
            self.not_before = now + RETRY;
        }
        outcome
    }

    fn take(&mut self, oidc: &Oidc, answer: WebhookAnswer) -> Result<(), String> {
        if answer.status != 200 {
            return Err(format!("{} {}", answer.status, String::from_utf8_lossy(&answer.body).trim()));
        }
        let doc: Value = serde_json::from_slice(&answer.body).map_err(|e| format!("oidc: failed to decode provider discovery object: {e}"))?;
        match &self.step {
            Step::Discovery | Step::Fetched => {
                let issuer = doc.get("issuer").and_then(Value::as_str).unwrap_or_default();
                if issuer != oidc.config.issuer {
                    return Err(format!("oidc: issuer did not match the issuer returned by provider, expected {:?} got {issuer:?}", oidc.config.issuer));
                }
                let jwks = doc.get("jwks_uri").and_then(Value::as_str).filter(|u| !u.is_empty()).ok_or("oidc: discovery document has no jwks_uri")?;
                if !jwks.starts_with("https://") {
                    return Err(format!("oidc: jwks_uri {jwks:?}: kapi fetches keys only over https"));
                }
                self.step = Step::Keys(jwks.to_string());
            }
            Step::Keys(_) => {
                let keys: Vec<PublicKey> = doc.get("keys").and_then(Value::as_array).into_iter().flatten().filter_map(PublicKey::from_jwk).collect();
                if keys.is_empty() {
                    return Err("oidc: no keys of RS256 or ES256 in the issuer's JWKS".into());
                }
                oidc.set_keys(keys);
                self.step = Step::Fetched;
            }
        }
        Ok(())
    }

    fn failed(&mut self, now: Timestamp) {
        self.step = Step::Discovery;
        self.not_before = now + RETRY;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use serde_json::json;

    use super::*;
    use crate::auth::oidc::{OidcConfig, OidcFlags};
    use crate::serviceaccount::keys::SigningKey;

    fn ok(body: Value) -> Result<WebhookAnswer, String> {
        Ok(WebhookAnswer { status: 200, body: Bytes::from(body.to_string()), ..Default::default() })
    }

    #[test]
    fn the_discovery_document_names_the_keys_and_a_failure_is_tried_again() {
        let flags = OidcFlags { issuer_url: "https://127.0.0.1:8443/".into(), client_id: "kapi".into(), username_claim: "sub".into(), ..Default::default() };
        let oidc = Oidc::new(OidcConfig::from_flags(flags).unwrap());
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let mut f = KeyFetcher::new(t0);
        let call = f.poll(&oidc, t0).unwrap();
        assert_eq!(
            (call.method.as_str(), call.target.url.as_str(), call.path.as_str()),
            ("GET", "https://127.0.0.1:8443", "/.well-known/openid-configuration")
        );
        assert!(f.poll(&oidc, t0).is_none(), "one call at a time");
        let wrong = ok(json!({"issuer": "https://elsewhere", "jwks_uri": "https://127.0.0.1:8443/keys"}));
        assert!(f.handle(&oidc, wrong, t0).unwrap_err().starts_with("oidc: issuer did not match the issuer returned by provider"));
        assert!(f.poll(&oidc, t0).is_none());
        assert_eq!(f.poll_timeout(t0), Some(t0 + RETRY));

        let t1 = t0 + RETRY;
        f.poll(&oidc, t1).unwrap();
        f.handle(&oidc, ok(json!({"issuer": "https://127.0.0.1:8443/", "jwks_uri": "https://127.0.0.1:8443/keys"})), t1).unwrap();
        assert_eq!(f.poll(&oidc, t1).unwrap().path, "/keys");
        let jwk = SigningKey::from_pem(include_str!("../../../testdata/serviceaccount/ec.key")).unwrap().public().jwk();
        f.handle(&oidc, ok(json!({"keys": [{"kty": "oct", "k": "x"}, jwk]})), t1).unwrap();
        assert!(!oidc.wants_keys());
        // Fetched: nothing more until a token asks, and then not within RETRY of the last fetch.
        assert!(f.poll(&oidc, t1 + RETRY).is_none());
        oidc.stale.store(true, Ordering::Relaxed);
        assert!(f.poll(&oidc, t1 + SignedDuration::from_secs(5)).is_none());
        assert!(f.poll(&oidc, t1 + RETRY).is_some());
    }
}
