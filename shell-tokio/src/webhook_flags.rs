//! The flags of the authentication and authorization webhooks, and the kubeconfig files they
//! name read from disk (what the files say is the core's: `kapi_core::webhook::kubeconfig`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use jiff::SignedDuration;
use kapi_core::auth::webhook::TokenWebhook;
use kapi_core::authz::WebhookAuthorizer;
use kapi_core::webhook::ReviewVersion;
use kapi_core::webhook::kubeconfig::{self, Endpoint};

#[derive(Args, Debug, Clone)]
pub struct WebhookArgs {
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
    /// A kubeconfig naming the webhook the Webhook authorization mode asks (SubjectAccessReview).
    #[arg(long)]
    authorization_webhook_config_file: Option<PathBuf>,
    /// The SubjectAccessReview version sent to the authorization webhook (v1 or v1beta1).
    #[arg(long, default_value = "v1beta1")]
    authorization_webhook_version: String,
    /// How long the authorization webhook's allowing answers are kept.
    #[arg(long, default_value = "5m0s")]
    authorization_webhook_cache_authorized_ttl: String,
    /// How long its other answers are kept.
    #[arg(long, default_value = "30s")]
    authorization_webhook_cache_unauthorized_ttl: String,
}

impl WebhookArgs {
    /// The authentication webhook, if a kubeconfig names one.
    pub fn token_webhook(&self) -> anyhow::Result<Option<TokenWebhook>> {
        let Some(file) = &self.authentication_token_webhook_config_file else { return Ok(None) };
        let version = ReviewVersion::parse(&self.authentication_token_webhook_version, "authentication webhook").map_err(anyhow::Error::msg)?;
        let ttl = duration(&self.authentication_token_webhook_cache_ttl)?;
        Ok(Some(TokenWebhook::new(endpoint(file)?, version, ttl)))
    }

    /// The authorization webhook, if a kubeconfig names one.
    pub fn authorization_webhook(&self) -> anyhow::Result<Option<WebhookAuthorizer>> {
        let Some(file) = &self.authorization_webhook_config_file else { return Ok(None) };
        let version = ReviewVersion::parse(&self.authorization_webhook_version, "webhook authorizer").map_err(anyhow::Error::msg)?;
        let authorized = duration(&self.authorization_webhook_cache_authorized_ttl)?;
        let unauthorized = duration(&self.authorization_webhook_cache_unauthorized_ttl)?;
        Ok(Some(WebhookAuthorizer::new(endpoint(file)?, version, authorized, unauthorized)))
    }
}

fn duration(flag: &str) -> anyhow::Result<SignedDuration> {
    Ok(SignedDuration::from_secs(crate::parse_duration(flag)?))
}

/// The webhook a kubeconfig file names, the files it names read relative to its directory.
fn endpoint(file: &Path) -> anyhow::Result<Endpoint> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
    let read = |name: &str| std::fs::read(dir.join(name)).map_err(|e| format!("open {name}: {e}"));
    kubeconfig::read(&text, &read).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))
}
