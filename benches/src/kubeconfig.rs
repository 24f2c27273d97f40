//! The parts of a kubeconfig a load generator needs: the current context's server, the CA that
//! signs it, and the user's client certificate or bearer token.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, anyhow, bail};
use base64::Engine;
use rustls::ClientConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::Value;

/// Where to connect and how to authenticate.
pub struct Target {
    /// `https://host:port`, no trailing slash.
    pub server: String,
    pub tls: Arc<ClientConfig>,
    pub token: Option<String>,
}

/// Inline `<field>-data` (base64) or the file `<field>` names (relative to the kubeconfig).
fn material(section: &Value, field: &str, dir: &Path) -> anyhow::Result<Option<Vec<u8>>> {
    if let Some(data) = section.get(format!("{field}-data")).and_then(Value::as_str) {
        return Ok(Some(base64::engine::general_purpose::STANDARD.decode(data.trim()).with_context(|| format!("{field}-data is not base64"))?));
    }
    match section.get(field).and_then(Value::as_str) {
        Some(file) => {
            let path = dir.join(file);
            Ok(Some(std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?))
        }
        None => Ok(None),
    }
}

/// The entry named `name` in the kubeconfig's list `list` (clusters, users, contexts).
fn named<'a>(config: &'a Value, list: &str, name: &str) -> anyhow::Result<&'a Value> {
    config
        .get(list)
        .and_then(Value::as_array)
        .and_then(|l| l.iter().find(|e| e.get("name").and_then(Value::as_str) == Some(name)))
        .map(|e| &e[list.trim_end_matches('s')])
        .ok_or_else(|| anyhow!("the kubeconfig has no {} named {name:?}", list.trim_end_matches('s')))
}

impl Target {
    pub fn load(path: &Path) -> anyhow::Result<Target> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let config: Value = serde_norway::from_str(&text).with_context(|| format!("{} is not YAML", path.display()))?;
        let dir: PathBuf = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let context_name = config.get("current-context").and_then(Value::as_str).ok_or_else(|| anyhow!("the kubeconfig has no current-context"))?;
        let context = named(&config, "contexts", context_name)?;
        let cluster = named(&config, "clusters", context["cluster"].as_str().unwrap_or_default())?;
        let user = named(&config, "users", context["user"].as_str().unwrap_or_default())?;
        let server = cluster["server"].as_str().ok_or_else(|| anyhow!("the cluster has no server"))?.trim_end_matches('/').to_string();
        if !server.starts_with("https://") {
            bail!("kapi-bench speaks TLS only; the server is {server}");
        }

        let mut roots = rustls::RootCertStore::empty();
        match material(cluster, "certificate-authority", &dir)? {
            Some(pem) => {
                for cert in CertificateDer::pem_slice_iter(&pem) {
                    roots.add(cert.context("the certificate authority is not PEM")?)?;
                }
            }
            None => bail!("the cluster names no certificate-authority (kapi-bench does not skip verification)"),
        }
        let builder = ClientConfig::builder().with_root_certificates(roots);
        let tls = match (material(user, "client-certificate", &dir)?, material(user, "client-key", &dir)?) {
            (Some(cert), Some(key)) => {
                let chain = CertificateDer::pem_slice_iter(&cert).collect::<Result<Vec<_>, _>>().context("the client certificate is not PEM")?;
                let key = PrivateKeyDer::from_pem_slice(&key).context("the client key is not PEM")?;
                builder.with_client_auth_cert(chain, key)?
            }
            _ => builder.with_no_client_auth(),
        };
        let token = user.get("token").and_then(Value::as_str).map(str::to_string);
        Ok(Target { server, tls: Arc::new(tls), token })
    }
}
