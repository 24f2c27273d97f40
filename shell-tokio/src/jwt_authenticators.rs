//! The JWT authenticators' tasks: each authenticator's keys fetched from its issuer (the
//! core's `kapi_core::auth::oidc_keys` machine, driven for as long as the authenticator is in
//! use), and `--authentication-config` read again when it changes, its authenticators
//! swapped in once their keys are fetched, as kube's reloader does.

use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use kapi_core::auth::config::AuthenticationConfig;
use kapi_core::auth::oidc::{JwtAuthenticators, Oidc, OidcConfig};
use kapi_core::auth::oidc_keys::KeyFetcher;

use crate::clock;
use crate::webhook::WebhookClient;

/// How long a reload waits for its new authenticators' keys, and how long before a change
/// that did not take is tried again (kube: a minute each).
const UPDATE_TIMEOUT: Duration = Duration::from_secs(60);

/// The authenticators `configs` make, each fetching its keys.
pub fn start(configs: &[OidcConfig], client: &WebhookClient) -> Vec<Arc<Oidc>> {
    configs
        .iter()
        .map(|config| {
            let oidc = Arc::new(Oidc::new(config.clone()));
            tokio::spawn(fetch_keys(Arc::downgrade(&oidc), client.clone()));
            oidc
        })
        .collect()
}

/// Fetches an issuer's keys, and again when its authenticator wants them, until the
/// authenticator is no longer in use (a reload replaced it and its last request is done).
async fn fetch_keys(oidc: Weak<Oidc>, client: WebhookClient) {
    let mut fetcher = KeyFetcher::new(clock::now());
    loop {
        let Some(authenticator) = oidc.upgrade() else { return };
        if let Some(call) = fetcher.poll(&authenticator, clock::now()) {
            let answer = client.call(call).await;
            if let Err(e) = fetcher.handle(&authenticator, answer, clock::now()) {
                tracing::warn!("oidc authenticator: initializing plugin: {e}");
            }
            continue;
        }
        let next = fetcher.poll_timeout(clock::now()).unwrap_or_else(clock::now);
        drop(authenticator);
        tokio::time::sleep_until(clock::instant_of(next)).await;
    }
}

/// Reads `--authentication-config` each second (kube: on file events, and each minute) and,
/// when its bytes change: a file that does not load or changes `anonymous` is logged and left
/// until it changes again; otherwise its authenticators are made afresh and swapped in once
/// every one has its issuer's keys (within a minute; if not, the change is tried again a
/// minute later). Requests in flight keep the authenticators they found.
pub async fn reload(jwt: Arc<JwtAuthenticators>, file: PathBuf, data: Vec<u8>, initial: AuthenticationConfig, issuers: Vec<String>, client: WebhookClient) {
    let name = file.display().to_string();
    let mut last_read = data;
    // A change that did not take, and when to try it again.
    let mut failed: Option<(Vec<u8>, tokio::time::Instant)> = None;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let data = match std::fs::read(&file) {
            Ok(data) => data,
            Err(e) => {
                tracing::error!(error = %e, "failed to read authentication config file");
                continue;
            }
        };
        if data == last_read || failed.as_ref().is_some_and(|(d, at)| *d == data && tokio::time::Instant::now() < *at) {
            continue;
        }
        let config = match AuthenticationConfig::load(&name, &data, &issuers) {
            Ok(config) => config,
            Err(e) => {
                tracing::error!(error = %e, "failed to load authentication config");
                last_read = data;
                continue;
            }
        };
        if config.anonymous != initial.anonymous {
            tracing::error!(error = "anonymous: Forbidden: changed from initial configuration file", "failed to validate authentication config");
            last_read = data;
            continue;
        }
        let authenticators = start(&config.jwt, &client);
        let deadline = tokio::time::Instant::now() + UPDATE_TIMEOUT;
        while !authenticators.iter().all(|a| a.has_keys()) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if let Some(waiting) = authenticators.iter().find(|a| !a.has_keys()) {
            let issuer = &waiting.config.issuer;
            tracing::error!(error = %format!("oidc: authenticator for issuer {issuer:?} is not healthy"), "failed to update authentication config");
            failed = Some((data, tokio::time::Instant::now() + UPDATE_TIMEOUT));
            continue;
        }
        jwt.store(authenticators);
        last_read = data;
        failed = None;
        tracing::info!("reloaded authentication config");
    }
}
