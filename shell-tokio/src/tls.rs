//! The TLS side of the shell: serving certificate, optional client certificates verified
//! against the client CA or the request-header CA, HTTP/2 and HTTP/1.1 by ALPN.

use std::sync::Arc;

use anyhow::Context;
use kapi_core::auth::VerifiedBy;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, UnixTime};

/// The cipher suites kube-apiserver (Go's TLS server) picks: AES-GCM with a 128-bit key
/// before a 256-bit one, whatever order the client lists them in. rustls' own order puts
/// AES-256 first, which encrypts every response (a LIST's hundreds of megabytes) a third slower
/// for no protection a Kubernetes client asks for.
pub(crate) fn provider() -> CryptoProvider {
    use rustls::crypto::ring::cipher_suite as suites;
    let aes_128 =
        [suites::TLS13_AES_128_GCM_SHA256, suites::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, suites::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256].map(|s| s.suite());
    let mut provider = rustls::crypto::ring::default_provider();
    // Stable: TLS 1.3 first, and within each version the AES-128 suites first, the rest as they were.
    provider.cipher_suites.sort_by_key(|s| (s.version().version != rustls::ProtocolVersion::TLSv1_3, !aes_128.contains(&s.suite())));
    provider
}

/// Which CAs verify client certificates: `--client-ca-file`, and `--requestheader-client-ca-file`
/// when a front proxy may present one.
pub struct ClientCas {
    client: Arc<dyn ClientCertVerifier>,
    request_header: Option<Arc<dyn ClientCertVerifier>>,
}

fn verifier(pem: &str, what: &str, provider: &Arc<CryptoProvider>) -> anyhow::Result<Arc<dyn ClientCertVerifier>> {
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        roots.add(c.with_context(|| what.to_string())?)?;
    }
    Ok(WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone()).allow_unauthenticated().build()?)
}

impl ClientCas {
    pub fn new(client_ca_pem: &str, request_header_ca_pem: Option<&str>) -> anyhow::Result<ClientCas> {
        let provider = Arc::new(provider());
        Ok(ClientCas {
            client: verifier(client_ca_pem, "client CA", &provider)?,
            request_header: request_header_ca_pem.map(|pem| verifier(pem, "request-header CA", &provider)).transpose()?,
        })
    }

    /// Which CAs verify a certificate chain (leaf first) that the handshake accepted.
    pub fn verified_by(&self, chain: &[CertificateDer<'_>]) -> VerifiedBy {
        let Some((leaf, intermediates)) = chain.split_first() else { return VerifiedBy::default() };
        let Some(request_header) = &self.request_header else { return VerifiedBy { client_ca: true, request_header_ca: false } };
        let now = UnixTime::now();
        VerifiedBy {
            client_ca: self.client.verify_client_cert(leaf, intermediates, now).is_ok(),
            request_header_ca: request_header.verify_client_cert(leaf, intermediates, now).is_ok(),
        }
    }
}

/// The TLS server: a client certificate is accepted when either CA verifies it (which one did
/// is [`ClientCas::verified_by`]'s to say).
pub fn server_config(cert_pem: &str, key_pem: &str, client_ca_pem: &str, request_header_ca_pem: Option<&str>) -> anyhow::Result<ServerConfig> {
    let provider = Arc::new(provider());
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes()).collect::<Result<_, _>>().context("serving certificate")?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).context("serving key")?;
    let both = format!("{client_ca_pem}\n{}", request_header_ca_pem.unwrap_or_default());
    let mut config = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier(&both, "client CA", &provider)?)
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config.ignore_client_order = true;
    Ok(config)
}
