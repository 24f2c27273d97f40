//! Calls to webhooks (a CRD's conversion webhook; admission, token review and authorization
//! webhooks use the same): where the webhook is, as a `clientConfig` says (a URL, or a Service
//! resolved as kube-apiserver's cluster-IP resolver resolves it), and the HTTPS POST of JSON the
//! shell makes for a core machine ([`WebhookCall`]), its answer coming back as a
//! [`WebhookAnswer`]. The core never opens a connection.

pub mod answer;
pub mod kubeconfig;
pub mod retry;
pub mod validation;

use std::sync::Arc;

use base64::Engine;
use bytes::Bytes;
use jiff::SignedDuration;
use serde_json::Value;

use crate::aggregator::{ProxyTarget, ServiceRef, resolve_service};

/// A webhook's `clientConfig`: a URL or a Service, and the CA bundle its certificate is checked
/// against (the system's CAs without one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    pub url: Option<String>,
    pub service: Option<ServiceRef>,
    /// The path a Service's webhook is asked at (`service.path`).
    pub service_path: Option<String>,
    /// `caBundle`, decoded: PEM.
    pub ca_bundle: Option<String>,
}

impl ClientConfig {
    /// Reads a `clientConfig` (`WebhookClientConfig` of apiextensions or admissionregistration);
    /// a Service's port defaults to 443 as kube defaults it.
    pub fn read(v: &Value) -> ClientConfig {
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let service = v.get("service").filter(|s| s.is_object());
        ClientConfig {
            url: text(v, "url"),
            service: service.map(|s| ServiceRef {
                namespace: text(s, "namespace").unwrap_or_default(),
                name: text(s, "name").unwrap_or_default(),
                port: s.get("port").and_then(Value::as_i64).unwrap_or(443),
            }),
            service_path: service.and_then(|s| text(s, "path")),
            ca_bundle: v
                .get("caBundle")
                .and_then(Value::as_str)
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                .map(|pem| String::from_utf8_lossy(&pem).into_owned()),
        }
    }

    /// Whether finding the webhook needs its Service.
    pub fn service(&self) -> Option<&ServiceRef> {
        if self.url.is_some() { None } else { self.service.as_ref() }
    }

    /// Where the call goes: the URL's host and path, or the Service's address (`service`: the
    /// Service object, if it exists) with its path, checked under `<service>.<namespace>.svc`.
    pub fn resolve(&self, service: Option<&Value>) -> Result<(ProxyTarget, String), String> {
        if let Some(url) = &self.url {
            let uri: http::Uri = url.parse().map_err(|e| format!("invalid webhook URL {url:?}: {e}"))?;
            let host = uri.host().ok_or_else(|| format!("invalid webhook URL {url:?}: no host"))?;
            let port = uri.port_u16().unwrap_or(443);
            let address = if host.starts_with('[') { format!("{host}:{port}") } else { host_port(host, port.into()) };
            let target = ProxyTarget {
                url: format!("https://{address}"),
                server_name: host.trim_start_matches('[').trim_end_matches(']').to_string(),
                ca_bundle: self.ca_bundle.clone(),
                insecure_skip_tls_verify: false,
            };
            let path = uri.path_and_query().map(|p| p.as_str().to_string()).filter(|p| !p.is_empty()).unwrap_or_else(|| "/".into());
            return Ok((target, path));
        }
        let Some(svc) = &self.service else { return Err("neither service nor URL specified".into()) };
        let target = resolve_service(svc, service, self.ca_bundle.clone(), false)?;
        let path = self.service_path.clone().filter(|p| !p.is_empty()).unwrap_or_else(|| "/".into());
        Ok((target, path))
    }
}

fn host_port(host: &str, port: i64) -> String {
    if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
}

/// An HTTPS POST of a JSON body (`Content-Type` and `Accept` `application/json`), or a GET
/// (an OIDC issuer's discovery document and keys), the shell makes within `timeout`,
/// presenting `credentials` if any; it reports a [`WebhookAnswer`], or why there is none in the
/// words of Go's HTTP client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookCall {
    /// POST, or GET (with no body).
    pub method: http::Method,
    pub target: ProxyTarget,
    /// Path and query.
    pub path: String,
    pub body: Bytes,
    pub timeout: SignedDuration,
    pub credentials: Option<Arc<Credentials>>,
}

/// How the server presents itself to a webhook its kubeconfig names
/// ([`kubeconfig::read`]): a client certificate, a bearer token, or both.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The certificate chain and its key, PEM.
    pub client: Option<(String, String)>,
    /// Sent as `Authorization: Bearer <token>`.
    pub token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("client", &self.client.is_some()).field("token", &self.token.is_some()).finish()
    }
}

/// The most of an answer's body a shell reads (kube's webhook clients read at most what a
/// request may be: 3 MiB, and more for a list).
pub const MAX_ANSWER_BYTES: usize = 30 * 1024 * 1024;

/// What a webhook answered: the status, the body and its `Content-Type` (empty: none).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WebhookAnswer {
    pub status: u16,
    pub body: Bytes,
    pub content_type: String,
}

impl WebhookAnswer {
    /// Whether kube's REST client takes the answer as a success (200 to 206).
    pub fn succeeded(&self) -> bool {
        (200..=206).contains(&self.status)
    }
}

/// `--authentication-token-webhook-version`, `--authorization-webhook-version`: the version of
/// the reviews sent and read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReviewVersion {
    V1,
    V1beta1,
}

impl ReviewVersion {
    /// The flag's value, as kube checks it (`what`: the flag's subject).
    pub fn parse(flag: &str, what: &str) -> Result<ReviewVersion, String> {
        match flag {
            "v1" => Ok(ReviewVersion::V1),
            "v1beta1" => Ok(ReviewVersion::V1beta1),
            other => Err(format!("unsupported {what} version {other:?}, supported versions are \"v1\", \"v1beta1\"")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ReviewVersion::V1 => "v1",
            ReviewVersion::V1beta1 => "v1beta1",
        }
    }
}

/// How long a call to an authentication or authorization webhook may take (the timeout of
/// kube's webhook clients).
pub const TIMEOUT: SignedDuration = SignedDuration::from_secs(30);

/// What kube's REST client makes of a webhook's answer that is not a success and not a
/// `Status` (`errors.NewGenericServerResponse`'s message, quoting the body only when it is
/// text, trimmed), or the `Status`'s message.
pub fn unexpected_status(answer: &WebhookAnswer) -> String {
    let status: Option<Value> = serde_json::from_slice(&answer.body).ok();
    if let Some(message) = status.as_ref().filter(|s| s.get("kind").and_then(Value::as_str) == Some("Status")).and_then(|s| s.get("message")?.as_str()) {
        return message.to_string();
    }
    let text = answer.content_type.is_empty() || answer.content_type.to_ascii_lowercase().starts_with("text/");
    let body = if text { String::from_utf8_lossy(&answer.body).trim().to_string() } else { "unknown".to_string() };
    match answer.status {
        400 => "the server rejected our request for an unknown reason".into(),
        401 => "the server has asked for the client to provide credentials".into(),
        403 => "the server does not allow access to the requested resource".into(),
        404 => "the server could not find the requested resource".into(),
        405 => "the server does not allow this method on the requested resource".into(),
        409 => "the server reported a conflict".into(),
        422 => "the server rejected our request due to an error in our request".into(),
        429 => "the server has received too many requests and has asked us to try again later".into(),
        503 => "the server is currently unable to handle the request".into(),
        504 => "the server was unable to return a response in the time allotted, but may still be processing the request".into(),
        s if s >= 500 => format!("an error on the server ({}) has prevented the request from succeeding", crate::status::quote(&body)),
        s => format!("the server responded with the status code {s} but did not return more information"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_url_is_called_at_its_host_and_path() {
        let c = ClientConfig::read(&json!({"url": "https://127.0.0.1:8443/convert?x=1"}));
        let (t, path) = c.resolve(None).unwrap();
        assert_eq!((t.url.as_str(), t.server_name.as_str(), path.as_str()), ("https://127.0.0.1:8443", "127.0.0.1", "/convert?x=1"));
        let c = ClientConfig::read(&json!({"url": "https://hooks.example"}));
        let (t, path) = c.resolve(None).unwrap();
        assert_eq!((t.url.as_str(), t.server_name.as_str(), path.as_str()), ("https://hooks.example:443", "hooks.example", "/"));
    }

    #[test]
    fn a_service_is_called_at_its_cluster_ip_with_its_path_and_default_port() {
        let c = ClientConfig::read(&json!({"service": {"namespace": "ns", "name": "conv", "path": "/crd"}, "caBundle": "UEVN"}));
        assert_eq!(c.ca_bundle.as_deref(), Some("PEM"));
        let svc = json!({"spec": {"type": "ClusterIP", "clusterIP": "10.0.0.9", "ports": [{"port": 443}]}});
        let (t, path) = c.resolve(Some(&svc)).unwrap();
        assert_eq!((t.url.as_str(), t.server_name.as_str(), path.as_str()), ("https://10.0.0.9:443", "conv.ns.svc", "/crd"));
        assert_eq!(c.resolve(None).unwrap_err(), "service \"conv\" not found");
    }
}
