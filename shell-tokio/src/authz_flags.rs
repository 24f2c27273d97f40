//! The authorization flags: `--authorization-mode` with the `--authorization-webhook-*` flags,
//! or `--authorization-config` (what its file says is the core's: `kapi_core::authz::config`),
//! and the task that reads that file again when it changes and swaps in the chain it makes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use kapi_core::authz::config::Config;
use kapi_core::authz::{Authorizer, Modes, WebhookSettings};
use kapi_core::pipeline::Server;
use kapi_core::webhook::ReviewVersion;

use crate::auth_flags::{duration, endpoint};

#[derive(Args, Debug, Clone)]
pub struct AuthzArgs {
    /// Authorization modes, in order (AlwaysAllow, AlwaysDeny, Node, RBAC, Webhook); members
    /// of system:masters are always allowed. Default: Node,RBAC.
    #[arg(long, value_parser = Modes::parse)]
    authorization_mode: Option<Modes>,
    /// An AuthorizationConfiguration file (apiserver.config.k8s.io/v1): the chain of
    /// authorizers, read again when it changes. Not with --authorization-mode or the
    /// --authorization-webhook-* flags.
    #[arg(long)]
    authorization_config: Option<PathBuf>,
    /// A kubeconfig naming the webhook the Webhook authorization mode asks (SubjectAccessReview).
    #[arg(long)]
    authorization_webhook_config_file: Option<PathBuf>,
    /// The SubjectAccessReview version sent to the authorization webhook (v1 or v1beta1;
    /// default v1beta1).
    #[arg(long)]
    authorization_webhook_version: Option<String>,
    /// How long the authorization webhook's allowing answers are kept (default 5m0s).
    #[arg(long)]
    authorization_webhook_cache_authorized_ttl: Option<String>,
    /// How long its other answers are kept (default 30s).
    #[arg(long)]
    authorization_webhook_cache_unauthorized_ttl: Option<String>,
}

/// The chain the flags make, and the file it was read from with what it said.
pub struct Authorization {
    pub authorizer: Authorizer,
    pub config: Option<(PathBuf, Vec<u8>, Config)>,
}

impl AuthzArgs {
    /// Whether `AlwaysAllow` is one of `--authorization-mode`'s modes (kube then turns
    /// anonymous requests off; a configuration file's `AlwaysAllow` does not).
    pub fn always_allows(&self) -> bool {
        self.authorization_mode.as_ref().is_some_and(Modes::always_allows)
    }

    /// The chain of authorizers, as kube-apiserver's options check and build it.
    pub fn authorization(&self) -> anyhow::Result<Authorization> {
        let legacy = self.authorization_mode.is_some()
            || self.authorization_webhook_config_file.is_some()
            || self.authorization_webhook_version.is_some()
            || self.authorization_webhook_cache_authorized_ttl.is_some()
            || self.authorization_webhook_cache_unauthorized_ttl.is_some();
        if let Some(file) = &self.authorization_config {
            if legacy {
                anyhow::bail!("--authorization-config can not be specified when --authorization-mode or --authorization-webhook-* flags are defined");
            }
            let data = std::fs::read(file).map_err(|e| anyhow::anyhow!("open {}: {}", file.display(), io_error(&e)))?;
            let config = Config::load(&data, &stat, &BTreeSet::new()).map_err(anyhow::Error::msg)?;
            let entries = config.entries(&|f| endpoint(Path::new(f)).map_err(|e| format!("{e:#}"))).map_err(anyhow::Error::msg)?;
            let authorizer = Authorizer::from_entries(entries, None).map_err(|e| anyhow::anyhow!("invalid authorization config: {e}"))?;
            return Ok(Authorization { authorizer, config: Some((file.clone(), data, config)) });
        }
        let modes = match &self.authorization_mode {
            Some(modes) => modes.clone(),
            None => Modes::parse("Node,RBAC").expect("the default modes parse"),
        };
        let authorizer = Authorizer::from_modes(&modes, self.authorization_webhook()?).map_err(anyhow::Error::msg)?;
        Ok(Authorization { authorizer, config: None })
    }

    /// The webhook of the `--authorization-webhook-*` flags, if a kubeconfig names one.
    fn authorization_webhook(&self) -> anyhow::Result<Option<WebhookSettings>> {
        let Some(file) = &self.authorization_webhook_config_file else { return Ok(None) };
        let version = self.authorization_webhook_version.as_deref().unwrap_or("v1beta1");
        let version = ReviewVersion::parse(version, "webhook authorizer").map_err(anyhow::Error::msg)?;
        let authorized = duration(self.authorization_webhook_cache_authorized_ttl.as_deref().unwrap_or("5m0s"))?;
        let unauthorized = duration(self.authorization_webhook_cache_unauthorized_ttl.as_deref().unwrap_or("30s"))?;
        Ok(Some(WebhookSettings::from_flags(endpoint(file)?, version, authorized, unauthorized)))
    }
}

/// Go's `os.Stat` of a path: whether it is a regular file, or its error in Go's words.
fn stat(path: &str) -> Result<bool, String> {
    std::fs::metadata(path).map(|m| m.is_file()).map_err(|e| format!("stat {path}: {}", io_error(&e)))
}

/// An I/O error as Go words it (`no such file or directory`).
fn io_error(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

/// Reads `--authorization-config` each second (kube: on file events, and each minute) and,
/// when its bytes change to a configuration that loads and differs from the last loaded, swaps
/// in the chain it makes, as kube's reloader does: the modes other than `Webhook` the server
/// started with must stay (neither `Node` nor `RBAC` may be added), every webhook starts
/// afresh (its kept decisions dropped), and a file that does not load keeps the chain that
/// serves, is logged once, and is tried again only once its bytes change.
pub async fn reload(server: Arc<Server>, file: PathBuf, data: Vec<u8>, config: Config) {
    let startup = server.authorizer.load_full();
    let required = config.fixed_types();
    let (mut last_read, mut last_loaded) = (data, config);
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    loop {
        tick.tick().await;
        let data = match std::fs::read(&file) {
            Ok(data) => data,
            Err(e) => {
                tracing::error!(error = %e, "reloading authorization config");
                continue;
            }
        };
        if data == last_read {
            continue;
        }
        tracing::info!("found new authorization config data");
        last_read = data;
        let config = match Config::load(&last_read, &stat, &required) {
            Ok(config) => config,
            Err(e) => {
                tracing::error!(error = %e, "reloading authorization config");
                continue;
            }
        };
        if config == last_loaded {
            continue;
        }
        tracing::info!("found new authorization config");
        last_loaded = config.clone();
        let built =
            config.entries(&|f| endpoint(Path::new(f)).map_err(|e| format!("{e:#}"))).and_then(|entries| Authorizer::from_entries(entries, Some(&startup)));
        match built {
            Ok(authorizer) => {
                tracing::info!("constructed new authorizer");
                server.authorizer.store(Arc::new(authorizer));
                tracing::info!("reloaded authz config");
            }
            Err(e) => tracing::error!(error = %e, "reloading authorization config"),
        }
    }
}
