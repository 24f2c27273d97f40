//! The TLS side of the shell: serving certificate, optional client certificates verified
//! against the client CA, HTTP/2 and HTTP/1.1 by ALPN.

use std::sync::Arc;

use anyhow::Context;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

pub fn server_config(cert_pem: &str, key_pem: &str, client_ca_pem: &str) -> anyhow::Result<ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes()).collect::<Result<_, _>>().context("serving certificate")?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).context("serving key")?;
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(client_ca_pem.as_bytes()) {
        roots.add(c.context("client CA")?)?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone()).allow_unauthenticated().build()?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
