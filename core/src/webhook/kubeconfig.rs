//! The kubeconfig file that says where an authentication or authorization webhook is
//! (`--authentication-token-webhook-config-file`, `--authorization-webhook-config-file`), read
//! as kube-apiserver's webhook clients read it: the current context's cluster (`server`, the
//! CA to check it with, or `insecure-skip-tls-verify`) and user (a client certificate and key,
//! a bearer token), each PEM given inline (`-data`, base64) or as a file named relative to the
//! kubeconfig's own. The server URL's path is where the reviews are POSTed.

use std::sync::Arc;

use base64::Engine;
use serde::Deserialize;

use super::Credentials;
use crate::aggregator::ProxyTarget;

/// Where a webhook is and how the server presents itself to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub target: ProxyTarget,
    /// Path and query of the POST.
    pub path: String,
    pub credentials: Option<Arc<Credentials>>,
}

impl Endpoint {
    /// The endpoint asked by a client whose timeout is `timeout` (client-go's `?timeout=`).
    pub fn with_timeout(mut self, timeout: jiff::SignedDuration) -> Endpoint {
        let path = self.path.split('?').next().unwrap_or_default().to_string();
        self.path = format!("{path}?timeout={}", crate::pipeline::limits::go_duration_string(timeout));
        self
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct File {
    clusters: Vec<Named<Cluster>>,
    users: Vec<Named<User>>,
    contexts: Vec<Named<Context>>,
    #[serde(rename = "current-context")]
    current_context: String,
}

#[derive(Deserialize)]
struct Named<T> {
    #[serde(default)]
    name: String,
    #[serde(alias = "cluster", alias = "user", alias = "context")]
    value: Option<T>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "kebab-case")]
struct Cluster {
    server: String,
    certificate_authority: String,
    certificate_authority_data: String,
    insecure_skip_tls_verify: bool,
    tls_server_name: String,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "kebab-case")]
struct User {
    client_certificate: String,
    client_certificate_data: String,
    client_key: String,
    client_key_data: String,
    token: String,
    #[serde(rename = "tokenFile")]
    token_file: String,
    /// What kapi does not present to a webhook (refused rather than left out).
    username: String,
    exec: Option<serde_json::Value>,
    #[serde(rename = "auth-provider")]
    auth_provider: Option<serde_json::Value>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Context {
    cluster: String,
    user: String,
}

/// Reads a webhook's kubeconfig (`text`); `read_file` reads a file it names (a path relative
/// to the kubeconfig's directory, as the shell resolves it).
pub fn read(text: &str, read_file: &dyn Fn(&str) -> Result<Vec<u8>, String>) -> Result<Endpoint, String> {
    let file: File = serde_norway::from_str(text).map_err(|e| format!("error loading config: {e}"))?;
    // Only the current context counts; what it does not name is not there.
    let no_configuration = "invalid configuration: no configuration has been provided, try setting KUBERNETES_MASTER environment variable";
    let context = file.contexts.iter().find(|c| c.name == file.current_context).and_then(|c| c.value.as_ref());
    if context.is_none() && !file.current_context.is_empty() {
        return Err(format!("invalid configuration: [context was not found for specified context: {}, cluster has no server defined]", file.current_context));
    }
    let (cluster_name, user_name) = context.map(|c| (c.cluster.as_str(), c.user.as_str())).unwrap_or_default();
    let cluster = file.clusters.iter().find(|c| c.name == cluster_name && !cluster_name.is_empty()).and_then(|c| c.value.as_ref()).ok_or(no_configuration)?;
    if cluster.server.is_empty() {
        return Err(format!("invalid configuration: no server found for cluster {cluster_name:?}"));
    }
    let user = file.users.iter().find(|u| u.name == user_name && !user_name.is_empty()).and_then(|u| u.value.as_ref());

    let uri: http::Uri = cluster.server.parse().map_err(|e| format!("invalid server URL {:?}: {e}", cluster.server))?;
    if uri.scheme_str() != Some("https") {
        return Err(format!("webhook server {:?}: only https is supported", cluster.server));
    }
    let host = uri.host().ok_or_else(|| format!("invalid server URL {:?}: no host", cluster.server))?;
    let port = uri.port_u16().unwrap_or(443);
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let address = if bare.contains(':') { format!("[{bare}]:{port}") } else { format!("{bare}:{port}") };
    let pem = |data: &str, path: &str, what: &str| -> Result<Option<String>, String> {
        if !data.is_empty() {
            let bytes = base64::engine::general_purpose::STANDARD.decode(data.trim()).map_err(|e| format!("{what}: illegal base64 data: {e}"))?;
            return Ok(Some(String::from_utf8_lossy(&bytes).into_owned()));
        }
        if !path.is_empty() {
            return read_file(path)
                .map(|b| Some(String::from_utf8_lossy(&b).into_owned()))
                .map_err(|e| format!("invalid configuration: unable to read {what} {path} due to {e}"));
        }
        Ok(None)
    };
    let ca_bundle = pem(&cluster.certificate_authority_data, &cluster.certificate_authority, "certificate-authority")?;
    if cluster.insecure_skip_tls_verify && ca_bundle.is_some() {
        return Err("invalid configuration: specifying a root certificates file with the insecure flag is not allowed".into());
    }
    let target = ProxyTarget {
        url: format!("https://{address}"),
        server_name: if cluster.tls_server_name.is_empty() { bare.to_string() } else { cluster.tls_server_name.clone() },
        ca_bundle,
        insecure_skip_tls_verify: cluster.insecure_skip_tls_verify,
    };
    let credentials = match user {
        None => None,
        Some(u) => {
            let certificate = pem(&u.client_certificate_data, &u.client_certificate, "client-certificate")?;
            let key = pem(&u.client_key_data, &u.client_key, "client-key")?;
            if !u.username.is_empty() || u.exec.is_some() || u.auth_provider.is_some() {
                return Err(format!("user {user_name:?}: basic authentication, exec and auth-provider credentials are not implemented by kapi yet"));
            }
            // A token file wins over a token, as client-go's round tripper reads it.
            let token = if u.token_file.is_empty() {
                u.token.clone()
            } else {
                let bytes = read_file(&u.token_file).map_err(|e| format!("invalid configuration: unable to read tokenFile {} due to {e}", u.token_file))?;
                String::from_utf8_lossy(&bytes).trim().to_string()
            };
            let client = match (certificate, key) {
                (Some(c), Some(k)) => Some((c, k)),
                (None, None) => None,
                (Some(_), None) => {
                    return Err(format!(
                        "invalid configuration: client-key-data or client-key must be specified for {user_name} to use the clientCert authentication method."
                    ));
                }
                (None, Some(_)) => {
                    return Err(format!(
                        "invalid configuration: client-cert-data or client-cert must be specified for {user_name} to use the clientCert authentication method."
                    ));
                }
            };
            let token = (!token.is_empty()).then_some(token);
            (client.is_some() || token.is_some()).then(|| Arc::new(Credentials { client, token }))
        }
    };
    // Go's path.Join of the URL's path (its query is not kept), and the client's timeout.
    let mut segments: Vec<&str> = Vec::new();
    for segment in uri.path().split('/').filter(|s| !s.is_empty() && *s != ".") {
        if segment == ".." {
            segments.pop();
        } else {
            segments.push(segment);
        }
    }
    let path = format!("/{}?timeout=30s", segments.join("/"));
    Ok(Endpoint { target, path, credentials })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_files(path: &str) -> Result<Vec<u8>, String> {
        Err(format!("open {path}: no such file or directory"))
    }

    #[test]
    fn the_current_context_names_the_server_its_ca_and_the_credentials() {
        let text = r#"
apiVersion: v1
kind: Config
clusters:
- name: other
  cluster: {server: "https://10.0.0.1"}
- name: hook
  cluster:
    server: https://127.0.0.1:9443/authenticate?v=1
    certificate-authority: ca.pem
users:
- name: apiserver
  user: {token: s3cret, tokenFile: token.txt, client-certificate-data: Q0VSVA==, client-key-data: S0VZ}
contexts:
- name: webhook
  context: {cluster: hook, user: apiserver}
current-context: webhook
"#;
        let files = |p: &str| match p {
            "ca.pem" => Ok(b"CA".to_vec()),
            "token.txt" => Ok(b"from-file\n".to_vec()),
            _ => no_files(p),
        };
        let e = read(text, &files).unwrap();
        assert_eq!(
            (e.target.url.as_str(), e.target.server_name.as_str(), e.path.as_str()),
            ("https://127.0.0.1:9443", "127.0.0.1", "/authenticate?timeout=30s")
        );
        assert_eq!(e.target.ca_bundle.as_deref(), Some("CA"));
        let c = e.credentials.unwrap();
        assert_eq!((c.token.as_deref(), c.client.clone()), (Some("from-file"), Some(("CERT".to_string(), "KEY".to_string()))));
    }

    #[test]
    fn only_the_current_context_counts_and_mistakes_are_named_as_kube_names_them() {
        let config =
            |cluster: &str| format!("clusters:\n- name: c\n  cluster: {cluster}\ncontexts:\n- name: x\n  context: {{cluster: c}}\ncurrent-context: x\n");
        let e = read(&config("{server: 'https://[::1]:8443/a//x/../b/'}"), &no_files).unwrap();
        assert_eq!((e.target.url.as_str(), e.target.server_name.as_str(), e.path.as_str()), ("https://[::1]:8443", "::1", "/a/b?timeout=30s"));
        assert!(e.credentials.is_none());
        let lone = "clusters:\n- name: c\n  cluster: {server: 'https://h'}\n";
        assert!(read(lone, &no_files).unwrap_err().starts_with("invalid configuration: no configuration has been provided"));
        assert!(read("current-context: y\n", &no_files).unwrap_err().contains("context was not found for specified context: y"));
        assert!(read(&config("{server: 'http://h'}"), &no_files).unwrap_err().contains("only https"));
        assert_eq!(read(&config("{}"), &no_files).unwrap_err(), "invalid configuration: no server found for cluster \"c\"");
        assert_eq!(
            read(&config("{server: 'https://h', certificate-authority: /nope}"), &no_files).unwrap_err(),
            "invalid configuration: unable to read certificate-authority /nope due to open /nope: no such file or directory"
        );
        assert!(read("clusters: {", &no_files).unwrap_err().starts_with("error loading config"));
    }
}
