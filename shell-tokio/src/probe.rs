//! The core's [`Probe`] effects: HTTP(S) GETs with the server's certificate unverified (as
//! kube's component-status prober makes them), each within its timeout, reported as what they
//! met. Only transport lives here; what an outcome means is the core's.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use kapi_core::pipeline::{Probe, ProbeOutcome};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::net::TcpStream;

/// How much of an answer's body is read (kube's `maxRespBodyLength`).
const MAX_BODY: usize = 10 * 1024;

/// Makes every probe at once; the outcomes come in the probes' order.
pub async fn probe_all(probes: Vec<Probe>) -> Vec<ProbeOutcome> {
    let tasks: Vec<_> = probes.into_iter().map(|p| tokio::spawn(probe(p))).collect();
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await.unwrap_or_else(|e| ProbeOutcome::Failed(e.to_string())));
    }
    out
}

async fn probe(p: Probe) -> ProbeOutcome {
    tokio::time::timeout(Duration::from_secs(p.timeout_seconds), get(&p.url)).await.unwrap_or(ProbeOutcome::TimedOut)
}

async fn get(url: &str) -> ProbeOutcome {
    let Some((scheme, rest)) = url.split_once("://") else { return ProbeOutcome::Failed(format!("unsupported protocol scheme in {url:?}")) };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let stream = match TcpStream::connect(authority).await {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return ProbeOutcome::Refused,
        Err(e) => return ProbeOutcome::Failed(format!("dial tcp {authority}: {e}")),
    };
    let request =
        http::Request::get(if path.is_empty() { "/" } else { path }).header("Host", authority).header("User-Agent", "kapi/probe").body(Empty::<Bytes>::new());
    let Ok(request) = request else { return ProbeOutcome::Failed(format!("invalid URL {url:?}")) };
    match scheme {
        "https" => {
            let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h).trim_matches(['[', ']']);
            let Ok(name) = ServerName::try_from(host.to_string()) else { return ProbeOutcome::Failed(format!("invalid host {host:?}")) };
            let connector = tokio_rustls::TlsConnector::from(Arc::new(insecure_client()));
            match connector.connect(name, stream).await {
                Ok(tls) => exchange(TokioIo::new(tls), request).await,
                Err(e) => ProbeOutcome::Failed(e.to_string()),
            }
        }
        "http" => exchange(TokioIo::new(stream), request).await,
        other => ProbeOutcome::Failed(format!("unsupported protocol scheme {other:?}")),
    }
}

async fn exchange<T>(io: T, request: http::Request<Empty<Bytes>>) -> ProbeOutcome
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = match hyper::client::conn::http1::handshake(io).await {
        Ok(pair) => pair,
        Err(e) => return ProbeOutcome::Failed(e.to_string()),
    };
    tokio::spawn(conn);
    let response = match sender.send_request(request).await {
        Ok(r) => r,
        Err(e) => return ProbeOutcome::Failed(e.to_string()),
    };
    let status = response.status().as_u16();
    let body = match Limited::new(response.into_body(), MAX_BODY).collect().await {
        Ok(b) => String::from_utf8_lossy(&b.to_bytes()).into_owned(),
        Err(_) => String::new(),
    };
    ProbeOutcome::Answered { status, body }
}

/// A TLS client that accepts any server certificate (`InsecureSkipVerify`).
fn insecure_client() -> rustls::ClientConfig {
    let provider = Arc::new(crate::tls::provider());
    rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("the provider supports the default versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth()
}

#[derive(Debug)]
pub(crate) struct AnyCertificate(pub(crate) Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
