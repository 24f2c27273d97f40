//! The flags of OIDC authentication and of the authentication webhook: the
//! files they name read from disk (what the files say is the core's:
//! `kapi_core::webhook::kubeconfig`), and the task that fetches the OIDC issuer's keys
//! (`kapi_core::auth::oidc_keys`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use jiff::SignedDuration;
use kapi_core::auth::oidc::{Oidc, OidcConfig, OidcFlags};
use kapi_core::auth::oidc_keys::KeyFetcher;
use kapi_core::auth::webhook::TokenWebhook;
use kapi_core::webhook::ReviewVersion;
use kapi_core::webhook::kubeconfig::{self, Endpoint};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::clock;
use crate::webhook::WebhookClient;

#[derive(Args, Debug, Clone)]
pub struct AuthArgs {
    /// The URL of the OpenID Connect issuer whose JWTs are bearer credentials (https).
    #[arg(long)]
    oidc_issuer_url: Option<String>,
    /// The audience the issuer's tokens must be meant for.
    #[arg(long)]
    oidc_client_id: Option<String>,
    /// PEM CA bundle the issuer's certificate is checked against (the system's roots when
    /// not given).
    #[arg(long)]
    oidc_ca_file: Option<PathBuf>,
    /// The claim that names the user (default sub).
    #[arg(long)]
    oidc_username_claim: Option<String>,
    /// Put before usernames (default: the issuer URL and '#', unless the claim is email; '-':
    /// none).
    #[arg(long)]
    oidc_username_prefix: Option<String>,
    /// The claim that lists the user's groups.
    #[arg(long)]
    oidc_groups_claim: Option<String>,
    /// Put before group names.
    #[arg(long)]
    oidc_groups_prefix: Option<String>,
    /// The signing algorithms accepted (RS256, ES256), comma-separated (default RS256).
    #[arg(long, value_delimiter = ',')]
    oidc_signing_algs: Option<Vec<String>>,
    /// key=value: a claim every token must have with that value (repeatable).
    #[arg(long)]
    oidc_required_claim: Vec<String>,
    /// A kubeconfig naming the webhook asked (TokenReview) about bearer tokens no other
    /// authenticator recognizes.
    #[arg(long)]
    authentication_token_webhook_config_file: Option<PathBuf>,
    /// How long the authentication webhook's answers are kept.
    #[arg(long, default_value = "2m0s")]
    authentication_token_webhook_cache_ttl: String,
    /// The TokenReview version sent to the authentication webhook (v1 or v1beta1).
    #[arg(long, default_value = "v1beta1")]
    authentication_token_webhook_version: String,
}

impl AuthArgs {
    /// The OIDC authenticator, if the flags name an issuer (`service_account_issuers`: the
    /// issuers it must not be).
    pub fn oidc(&self, service_account_issuers: &[String]) -> anyhow::Result<Option<Oidc>> {
        let any = self.oidc_issuer_url.is_some()
            || self.oidc_client_id.is_some()
            || self.oidc_ca_file.is_some()
            || self.oidc_username_claim.is_some()
            || self.oidc_signing_algs.is_some()
            || self.oidc_username_prefix.is_some()
            || self.oidc_groups_claim.is_some()
            || self.oidc_groups_prefix.is_some()
            || !self.oidc_required_claim.is_empty();
        if !any {
            return Ok(None);
        }
        if self.oidc_issuer_url.is_none() || self.oidc_client_id.is_none() {
            anyhow::bail!("oidc-issuer-url and oidc-client-id must be specified together when any oidc-* flags are set");
        }
        let ca_bundle = match &self.oidc_ca_file {
            Some(f) => Some(std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?),
            None => None,
        };
        if ca_bundle.as_ref().is_some_and(|pem| CertificateDer::pem_slice_iter(pem.as_bytes()).flatten().next().is_none()) {
            anyhow::bail!(
                "invalid authentication configuration: jwt[0].issuer.certificateAuthority: Invalid value: \"<omitted>\": data does not contain any valid RSA or ECDSA certificates"
            );
        }
        let flags = OidcFlags {
            issuer_url: self.oidc_issuer_url.clone().unwrap_or_default(),
            client_id: self.oidc_client_id.clone().unwrap_or_default(),
            username_claim: self.oidc_username_claim.clone().unwrap_or_else(|| "sub".into()),
            username_prefix: self.oidc_username_prefix.clone(),
            groups_claim: self.oidc_groups_claim.clone().unwrap_or_default(),
            groups_prefix: self.oidc_groups_prefix.clone().unwrap_or_default(),
            required_claims: self.oidc_required_claim.clone(),
            signing_algs: self.oidc_signing_algs.clone().unwrap_or_default(),
            ca_bundle,
            disallowed_issuers: service_account_issuers.to_vec(),
        };
        Ok(Some(Oidc::new(OidcConfig::from_flags(flags).map_err(anyhow::Error::msg)?)))
    }

    /// The authentication webhook, if a kubeconfig names one.
    pub fn token_webhook(&self) -> anyhow::Result<Option<TokenWebhook>> {
        let Some(file) = &self.authentication_token_webhook_config_file else { return Ok(None) };
        let version = ReviewVersion::parse(&self.authentication_token_webhook_version, "authentication webhook").map_err(anyhow::Error::msg)?;
        let ttl = duration(&self.authentication_token_webhook_cache_ttl)?;
        Ok(Some(TokenWebhook::new(endpoint(file)?, version, ttl)))
    }
}

pub(crate) fn duration(flag: &str) -> anyhow::Result<SignedDuration> {
    Ok(SignedDuration::from_secs(crate::parse_duration(flag)?))
}

/// The webhook a kubeconfig file names, the files it names read relative to its directory.
pub(crate) fn endpoint(file: &Path) -> anyhow::Result<Endpoint> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
    let read = |name: &str| std::fs::read(dir.join(name)).map_err(|e| format!("open {name}: {e}"));
    kubeconfig::read(&text, &read).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))
}

/// Fetches the OIDC issuer's keys, and again when the authenticator wants them, for as long as
/// the server runs.
pub async fn fetch_oidc_keys(oidc: Arc<Oidc>, client: WebhookClient) {
    let mut fetcher = KeyFetcher::new(clock::now());
    loop {
        if let Some(call) = fetcher.poll(&oidc, clock::now()) {
            let answer = client.call(call).await;
            if let Err(e) = fetcher.handle(&oidc, answer, clock::now()) {
                tracing::warn!("oidc authenticator: initializing plugin: {e}");
            }
            continue;
        }
        let next = fetcher.poll_timeout(clock::now()).unwrap_or_else(clock::now);
        tokio::time::sleep_until(clock::instant_of(next)).await;
    }
}
