//! The flags of JWT authentication (`--oidc-*`, or `--authentication-config`, with who is
//! anonymous) and of the authentication webhook: the files they name read from disk (what the
//! files say is the core's: `kapi_core::auth::config`, `kapi_core::webhook::kubeconfig`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use jiff::SignedDuration;
use kapi_core::auth::Anonymous;
use kapi_core::auth::config::AuthenticationConfig;
use kapi_core::auth::oidc::{OidcConfig, OidcFlags};
use kapi_core::auth::webhook::TokenWebhook;
use kapi_core::webhook::ReviewVersion;
use kapi_core::webhook::kubeconfig::{self, Endpoint};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

#[derive(Args, Debug, Clone)]
pub struct AuthArgs {
    /// An AuthenticationConfiguration file (apiserver.config.k8s.io/v1beta1): JWT
    /// authenticators and who is anonymous; read again when it changes. Not with the --oidc-*
    /// flags, nor --anonymous-auth where it says who is anonymous.
    #[arg(long)]
    authentication_config: Option<PathBuf>,
    /// Whether a request that presents no credential is served as `system:anonymous` (kube's
    /// default); off whatever this says when AlwaysAllow is a mode, as kube-apiserver does.
    #[arg(long, action = clap::ArgAction::Set)]
    anonymous_auth: Option<bool>,
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

/// The JWT authenticators and who is anonymous, and the file they were read from with what
/// it said.
pub struct Authentication {
    pub jwt: Vec<OidcConfig>,
    pub anonymous: Anonymous,
    pub config: Option<(PathBuf, Vec<u8>, AuthenticationConfig)>,
}

impl AuthArgs {
    /// The JWT authenticators and who is anonymous, as kube-apiserver's options check and
    /// make them (`always_allows`: `AlwaysAllow` is an `--authorization-mode`, which turns the
    /// flag's anonymous requests off).
    pub fn authentication(&self, always_allows: bool, service_account_issuers: &[String]) -> anyhow::Result<Authentication> {
        let flag_anonymous = || {
            let wanted = self.anonymous_auth.unwrap_or(true);
            if wanted && always_allows {
                tracing::warn!(
                    "AnonymousAuth is not allowed with the AlwaysAllow authorizer. Resetting AnonymousAuth to false. You should use a different authorizer"
                );
            }
            if wanted && !always_allows { Anonymous::Everywhere } else { Anonymous::Off }
        };
        let Some(file) = &self.authentication_config else {
            let jwt = self.oidc(service_account_issuers)?.into_iter().collect();
            return Ok(Authentication { jwt, anonymous: flag_anonymous(), config: None });
        };
        if self.any_oidc_flag() {
            anyhow::bail!("authentication-config file and oidc-* flags are mutually exclusive");
        }
        let name = file.display().to_string();
        let data = std::fs::read(file).map_err(|e| anyhow::anyhow!("failed to load authentication configuration from file {name:?}: open {name}: {e}"))?;
        let config = AuthenticationConfig::load(&name, &data, service_account_issuers).map_err(anyhow::Error::msg)?;
        let anonymous = match (&config.anonymous, self.anonymous_auth) {
            (Some(_), Some(_)) => anyhow::bail!(
                "anonymous: Forbidden: --anonymous-auth flag cannot be set when anonymous field is configured in authentication configuration file"
            ),
            (Some(a), None) => a.anonymous(),
            (None, _) => flag_anonymous(),
        };
        Ok(Authentication { jwt: config.jwt.clone(), anonymous, config: Some((file.clone(), data, config)) })
    }

    fn any_oidc_flag(&self) -> bool {
        self.oidc_issuer_url.is_some()
            || self.oidc_client_id.is_some()
            || self.oidc_ca_file.is_some()
            || self.oidc_username_claim.is_some()
            || self.oidc_signing_algs.is_some()
            || self.oidc_username_prefix.is_some()
            || self.oidc_groups_claim.is_some()
            || self.oidc_groups_prefix.is_some()
            || !self.oidc_required_claim.is_empty()
    }

    /// The JWT authenticator of the `--oidc-*` flags, if they name an issuer
    /// (`service_account_issuers`: the issuers it must not be).
    fn oidc(&self, service_account_issuers: &[String]) -> anyhow::Result<Option<OidcConfig>> {
        if !self.any_oidc_flag() {
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
        Ok(Some(OidcConfig::from_flags(flags).map_err(anyhow::Error::msg)?))
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
