//! The core's [`ProxyRequest`] effects: a request to an extension API server over HTTPS (HTTP/2
//! or HTTP/1.1 by ALPN), with the front-proxy client certificate, the server verified against
//! the APIService's CA bundle (the system's CAs without one) under `<service>.<namespace>.svc`
//! (or not at all with `insecureSkipTLSVerify`), each over a connection of its own
//! ([`Connections::unpooled`]). Only transport lives here: the headers, the address and what the
//! answer becomes are the core's.

use anyhow::Context;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::upgrade::OnUpgrade;
use kapi_core::aggregator::{ProxyHead, ProxyRequest};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::connections::Connections;

/// Sends proxied requests as this server's front proxy.
pub struct ProxyClient {
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    connections: Connections,
}

impl ProxyClient {
    /// A client presenting the certificate and key in PEM.
    pub fn new(cert_pem: &str, key_pem: &str) -> anyhow::Result<ProxyClient> {
        let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes()).collect::<Result<_, _>>().context("proxy client certificate")?;
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).context("proxy client key")?;
        Ok(ProxyClient { certs, key, connections: Connections::unpooled() })
    }

    /// Sends `req`; the answer's head and what follows it, or the error in Go's words where
    /// kube's client would say them.
    pub async fn send(&self, req: ProxyRequest) -> Result<(ProxyHead, Upstream), String> {
        let mut builder = http::Request::builder().method(req.method.as_str()).uri(&req.path_and_query);
        for (k, v) in &req.headers {
            builder = builder.header(k, v);
        }
        let request = builder.body(Full::new(req.body)).map_err(|e| e.to_string())?;
        // Switching protocols is HTTP/1.1's.
        let response = self.connections.send(&req.target, Some((&self.certs, &self.key)), req.upgrade, request).await?;
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
