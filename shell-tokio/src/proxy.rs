//! The core's [`ProxyRequest`] effects: a request to an extension API server over HTTPS (HTTP/2
//! or HTTP/1.1 by ALPN), with the front-proxy client certificate, the server verified against
//! the APIService's CA bundle (the system's CAs without one) under `<service>.<namespace>.svc`
//! (or not at all with `insecureSkipTLSVerify`). Only transport lives here: the headers, the address and what the
//! answer becomes are the core's.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kapi_core::aggregator::{ProxyHead, ProxyRequest, ProxyTarget};
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;

use crate::probe::AnyCertificate;

/// How long connecting and the TLS handshake may take (Go's dialer and kube's transport).
const DIAL_TIMEOUT: Duration = Duration::from_secs(30);
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends proxied requests as this server's front proxy.
pub struct ProxyClient {
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    /// The system's CAs, which verify a server whose APIService has no `caBundle`.
    system_roots: Arc<RootCertStore>,
}

impl ProxyClient {
    /// A client presenting the certificate and key in PEM.
    pub fn new(cert_pem: &str, key_pem: &str) -> anyhow::Result<ProxyClient> {
        let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes()).collect::<Result<_, _>>().context("proxy client certificate")?;
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).context("proxy client key")?;
        Ok(ProxyClient { certs, key, system_roots: system_roots() })
    }

    /// Sends `req`; the answer's head and what follows it, or the error in Go's words where
    /// kube's client would say them.
    pub async fn send(&self, req: ProxyRequest) -> Result<(ProxyHead, Upstream), String> {
        let mut config = tls(&req.target, &self.system_roots, Some((&self.certs, &self.key)))?;
        if req.upgrade {
            // Switching protocols is HTTP/1.1's.
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
        }
        let mut builder = http::Request::builder().method(req.method.as_str()).uri(&req.path_and_query);
        for (k, v) in &req.headers {
            builder = builder.header(k, v);
        }
        let request = builder.body(Full::new(req.body)).map_err(|e| e.to_string())?;
        let response = send(&req.target, config, request).await?;
        let (mut parts, body) = response.into_parts();
        let headers = parts.headers.iter().map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned())).collect();
        let switched = parts.extensions.remove::<OnUpgrade>().filter(|_| parts.status == http::StatusCode::SWITCHING_PROTOCOLS);
        Ok((ProxyHead { status: parts.status.as_u16(), headers }, Upstream { body, switched }))
    }
}

/// What follows an extension server's answer's head.
pub struct Upstream {
    pub body: Incoming,
    /// After a 101: the connection, once it has switched protocols.
    pub switched: Option<OnUpgrade>,
}

/// The TLS client configuration for `target`: its server checked against its CA bundle (the
/// system's roots without one), or not at all where it says so; with a client certificate
/// when one is given.
pub(crate) fn tls(
    target: &ProxyTarget,
    system_roots: &Arc<RootCertStore>,
    client: Option<(&[CertificateDer<'static>], &PrivateKeyDer<'static>)>,
) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(crate::tls::provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().map_err(|e| e.to_string())?;
    let builder = if target.insecure_skip_tls_verify {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
    } else if let Some(bundle) = &target.ca_bundle {
        let mut roots = RootCertStore::empty();
        roots.add_parsable_certificates(CertificateDer::pem_slice_iter(bundle.as_bytes()).flatten());
        builder.with_root_certificates(roots)
    } else {
        builder.with_root_certificates(system_roots.clone())
    };
    let mut config = match client {
        Some((certs, key)) => builder.with_client_auth_cert(certs.to_vec(), key.clone_key()).map_err(|e| e.to_string())?,
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// The system's CA roots.
pub(crate) fn system_roots() -> Arc<RootCertStore> {
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    Arc::new(roots)
}

/// Sends `request` (its URI: path and query) to `target` over a new connection, HTTP/2 or
/// HTTP/1.1 by ALPN (over HTTP/1.1, the connection can switch protocols after a 101); the
/// answer, or the error in Go's words where kube's client would say them.
pub(crate) async fn send(
    target: &ProxyTarget,
    config: rustls::ClientConfig,
    mut request: http::Request<Full<Bytes>>,
) -> Result<http::Response<Incoming>, String> {
    let authority = target.url.trim_start_matches("https://").to_string();
    let tcp = match tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(&authority)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Err(format!("dial tcp {authority}: connect: connection refused")),
        Ok(Err(e)) => return Err(format!("dial tcp {authority}: {e}")),
        Err(_) => return Err(format!("dial tcp {authority}: i/o timeout")),
    };
    let _ = tcp.set_nodelay(true);
    let name = ServerName::try_from(target.server_name.clone()).map_err(|e| e.to_string())?;
    let connect = tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp);
    let tls = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, connect).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(format!("tls: {e}")),
        Err(_) => return Err("net/http: TLS handshake timeout".into()),
    };
    let http2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    let io = TokioIo::new(tls);
    if http2 {
        let (mut sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await.map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        *request.uri_mut() = format!("{}{}", target.url, request.uri()).parse().map_err(|e: http::uri::InvalidUri| e.to_string())?;
        sender.send_request(request).await
    } else {
        request.headers_mut().insert(http::header::HOST, http::HeaderValue::from_str(&authority).map_err(|e| e.to_string())?);
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.map_err(|e| e.to_string())?;
        tokio::spawn(conn.with_upgrades());
        sender.send_request(request).await
    }
    .map_err(|e| e.to_string())
}
