//! The TLS side of the shell: serving certificates (`serving.rs`), optional client
//! certificates verified against the client CA or the request-header CA, the versions and
//! cipher suites `--tls-min-version` and `--tls-cipher-suites` allow, HTTP/2 and HTTP/1.1 by
//! ALPN.

use std::sync::Arc;

use anyhow::Context;
use kapi_core::auth::VerifiedBy;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, UnixTime};

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

/// `--tls-min-version` (Go's names): whether only TLS 1.3 is served. kapi serves TLS 1.2 and
/// 1.3 (rustls has no older version), so `VersionTLS10` and `VersionTLS11` mean 1.2 too.
pub fn tls13_only(flag: &str) -> Result<bool, String> {
    match flag {
        "" | "VersionTLS10" | "VersionTLS11" | "VersionTLS12" => Ok(false),
        "VersionTLS13" => Ok(true),
        other => Err(format!("unknown tls version {other:?}")),
    }
}

/// `--tls-cipher-suites` (Go's names, comma-separated): the TLS 1.2 suites served; TLS 1.3's
/// are not chosen (as in Go, where naming them changes nothing). A suite Go knows and rustls
/// does not serve (CBC, RSA key exchange, 3DES, RC4) is refused rather than dropped.
pub fn cipher_suites(flag: &str) -> Result<CipherSuites, String> {
    if flag.is_empty() {
        return Ok(CipherSuites(None));
    }
    use rustls::CipherSuite as S;
    const GO_ONLY: [&str; 16] = [
        "TLS_RSA_WITH_RC4_128_SHA",
        "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
        "TLS_RSA_WITH_AES_128_CBC_SHA",
        "TLS_RSA_WITH_AES_256_CBC_SHA",
        "TLS_RSA_WITH_AES_128_CBC_SHA256",
        "TLS_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_RSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
        "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
        "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
        "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    ];
    let mut out = Vec::new();
    for name in flag.split(',') {
        let suite = match name {
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256" => S::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" => S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384" => S::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384" => S::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256" | "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305" => S::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256" | "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305" => S::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
            "TLS_AES_128_GCM_SHA256" | "TLS_AES_256_GCM_SHA384" | "TLS_CHACHA20_POLY1305_SHA256" => continue,
            n if GO_ONLY.contains(&n) => {
                return Err(format!("cipher suite {n} is not served by kapi: rustls offers ECDHE with AES-GCM or ChaCha20-Poly1305 only"));
            }
            n => return Err(format!("Cipher suite {n} not supported or doesn't exist")),
        };
        out.push(suite);
    }
    Ok(CipherSuites(Some(out)))
}

/// The TLS 1.2 suites `--tls-cipher-suites` names (none: TLS 1.2 is not served, as Go serves
/// it with only TLS 1.3's named); all of kapi's when the flag is not given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CipherSuites(pub Option<Vec<rustls::CipherSuite>>);

/// What `--tls-min-version` and `--tls-cipher-suites` allow.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    pub tls13_only: bool,
    pub cipher_suites: CipherSuites,
}

/// kapi's suites, less the TLS 1.2 ones `options` leaves out.
pub(crate) fn server_provider(options: &TlsOptions) -> CryptoProvider {
    let mut provider = provider();
    if let Some(wanted) = &options.cipher_suites.0 {
        provider.cipher_suites.retain(|s| s.version().version == rustls::ProtocolVersion::TLSv1_3 || wanted.contains(&s.suite()));
    }
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

/// The TLS server: the certificates `serving` chooses, the versions and suites `options`
/// allow, and a client certificate accepted when either CA verifies it (which one did is
/// [`ClientCas::verified_by`]'s to say).
pub fn server_config(
    serving: Arc<crate::serving::ServingCerts>,
    client_ca_pem: &str,
    request_header_ca_pem: Option<&str>,
    options: &TlsOptions,
) -> anyhow::Result<ServerConfig> {
    let provider = Arc::new(server_provider(options));
    let both = format!("{client_ca_pem}\n{}", request_header_ca_pem.unwrap_or_default());
    let no_tls12_suite = options.cipher_suites.0.as_ref().is_some_and(Vec::is_empty);
    let versions: &[&rustls::SupportedProtocolVersion] =
        if options.tls13_only || no_tls12_suite { &[&rustls::version::TLS13] } else { rustls::DEFAULT_VERSIONS };
    let mut config = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)?
        .with_client_cert_verifier(verifier(&both, "client CA", &provider)?)
        .with_cert_resolver(serving);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config.ignore_client_order = true;
    Ok(config)
}
