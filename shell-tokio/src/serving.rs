//! The serving certificates, as kube-apiserver's dynamic serving certificates have them: the
//! default pair (`--tls-cert-file` and `--tls-private-key-file`, or the generated one) and
//! each `--tls-sni-cert-key`, chosen by the name a client asks for in its TLS hello (SNI: the
//! name exactly, then with its first label a wildcard, else the default pair), and read again
//! when their files change, without a restart: connections made after a change get the new
//! certificates; a change that does not load (a half-written file, a key that does not match)
//! keeps the ones in use and says why in the log.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// How often the files are looked at (kube reacts to file events at once).
const POLL: Duration = Duration::from_secs(1);

/// A certificate and key file, and the names it serves (those of `--tls-sni-cert-key`'s
/// `:names`, as written, else its certificate's common name and DNS names, lower-cased).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertKeyFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub names: Vec<String>,
}

impl CertKeyFiles {
    /// One `--tls-sni-cert-key`: `certfile,keyfile` or `certfile,keyfile:name1,name2` (kube's
    /// `NamedCertKey` syntax; `*.example.com` names a wildcard).
    pub fn parse_sni(flag: &str) -> Result<CertKeyFiles, String> {
        let (files, names) = match flag.split_once(':') {
            // Names as written: one with capitals never matches a client's (lower-cased) name, as in kube.
            Some((_, "")) => return Err("empty names list is not allowed".into()),
            Some((files, names)) => (files, names.split(',').map(|n| n.trim().to_string()).collect()),
            None => (flag, Vec::new()),
        };
        match files.split(',').map(str::trim).collect::<Vec<_>>()[..] {
            [cert, key] if !cert.is_empty() && !key.is_empty() => Ok(CertKeyFiles { cert: cert.into(), key: key.into(), names }),
            _ => Err("expected comma separated certificate and key file paths".into()),
        }
    }
}

/// The certificates as last read: the files' bytes, the default and the named ones.
#[derive(Debug)]
struct Loaded {
    bytes: Vec<(Vec<u8>, Vec<u8>)>,
    default: Arc<CertifiedKey>,
    by_name: BTreeMap<String, Arc<CertifiedKey>>,
}

/// The serving certificates, swapped whole when their files change.
#[derive(Debug)]
pub struct ServingCerts {
    /// The default pair first, then the SNI ones in flag order.
    files: Vec<CertKeyFiles>,
    provider: Arc<CryptoProvider>,
    current: ArcSwap<Loaded>,
}

impl ServingCerts {
    pub fn load(default: CertKeyFiles, sni: Vec<CertKeyFiles>, provider: Arc<CryptoProvider>) -> anyhow::Result<Arc<ServingCerts>> {
        let files: Vec<CertKeyFiles> = std::iter::once(default).chain(sni).collect();
        let bytes = read_all(&files)?;
        let loaded = build(&files, bytes, &provider)?;
        Ok(Arc::new(ServingCerts { files, provider, current: ArcSwap::from_pointee(loaded) }))
    }

    /// Reads the files every [`POLL`], forever, putting in place what changed.
    pub async fn watch(self: Arc<Self>) {
        loop {
            tokio::time::sleep(POLL).await;
            let Ok(bytes) = read_all(&self.files) else { continue };
            if bytes == self.current.load().bytes {
                continue;
            }
            match build(&self.files, bytes, &self.provider) {
                Ok(loaded) => {
                    tracing::info!("serving certificates changed on disk: loaded");
                    self.current.store(Arc::new(loaded));
                }
                Err(e) => tracing::warn!("serving certificates changed on disk and do not load; keeping those in use: {e:#}"),
            }
        }
    }
}

fn read_all(files: &[CertKeyFiles]) -> anyhow::Result<Vec<(Vec<u8>, Vec<u8>)>> {
    files
        .iter()
        .map(|f| {
            let read = |p: &PathBuf| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
            Ok((read(&f.cert)?, read(&f.key)?))
        })
        .collect()
}

/// The certificates of `bytes` (each file pair's), named as kube names them: explicit names
/// first (the first flag naming one wins), then the names in the certificates.
fn build(files: &[CertKeyFiles], bytes: Vec<(Vec<u8>, Vec<u8>)>, provider: &CryptoProvider) -> anyhow::Result<Loaded> {
    let mut keys = Vec::new();
    for (f, (cert, key)) in files.iter().zip(&bytes) {
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(cert).collect::<Result<_, _>>().with_context(|| format!("certificate {}", f.cert.display()))?;
        anyhow::ensure!(!chain.is_empty(), "no certificate in {}", f.cert.display());
        let der = PrivateKeyDer::from_pem_slice(key).with_context(|| format!("key {}", f.key.display()))?;
        let certified = CertifiedKey::from_der(chain, der, provider).with_context(|| format!("{} and {}", f.cert.display(), f.key.display()))?;
        keys.push(Arc::new(certified));
    }
    let mut by_name = BTreeMap::new();
    for (f, key) in files.iter().zip(&keys).skip(1) {
        for name in &f.names {
            by_name.entry(name.clone()).or_insert_with(|| key.clone());
        }
    }
    for (f, key) in files.iter().zip(&keys).skip(1).filter(|(f, _)| f.names.is_empty()) {
        for name in certificate_names(&key.cert[0]).with_context(|| format!("certificate {}", f.cert.display()))? {
            by_name.entry(name).or_insert_with(|| key.clone());
        }
    }
    Ok(Loaded { bytes, default: keys[0].clone(), by_name })
}

/// A certificate's common name and DNS names, lower-cased (its IP addresses are no SNI name).
fn certificate_names(der: &CertificateDer<'_>) -> anyhow::Result<Vec<String>> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut names: Vec<String> = cert.subject().iter_common_name().filter_map(|cn| cn.as_str().ok()).map(str::to_ascii_lowercase).collect();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            if let x509_parser::extensions::GeneralName::DNSName(dns) = name {
                names.push(dns.to_ascii_lowercase());
            }
        }
    }
    Ok(names)
}

impl ResolvesServerCert for ServingCerts {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let loaded = self.current.load();
        let Some(name) = hello.server_name().map(str::to_ascii_lowercase) else { return Some(loaded.default.clone()) };
        let wildcard = name.split_once('.').map(|(_, rest)| format!("*.{rest}"));
        let named = loaded.by_name.get(&name).or_else(|| wildcard.and_then(|w| loaded.by_name.get(&w)));
        Some(named.unwrap_or(&loaded.default).clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sni_flags_parse_as_kubes() {
        assert_eq!(
            CertKeyFiles::parse_sni("a.crt,a.key:*.Example.com, foo.org").unwrap(),
            CertKeyFiles { cert: "a.crt".into(), key: "a.key".into(), names: vec!["*.Example.com".into(), "foo.org".into()] }
        );
        assert_eq!(CertKeyFiles::parse_sni("a.crt,a.key:").unwrap_err(), "empty names list is not allowed");
        assert_eq!(CertKeyFiles::parse_sni("a.crt,a.key").unwrap().names, Vec::<String>::new());
        assert!(CertKeyFiles::parse_sni("a.crt").is_err());
        assert!(CertKeyFiles::parse_sni("a.crt,").is_err());
    }
}
