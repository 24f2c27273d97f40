//! The PKI kapi makes for itself on first start, as kubeadm makes a cluster's: a CA, a serving
//! certificate for this server and an admin client certificate (group `system:masters`), and
//! the kubeconfig that uses them; a front-proxy CA and the `front-proxy-client` certificate
//! this server presents to the extension API servers it proxies to.

use std::path::{Path, PathBuf};

use anyhow::Context;
use base64::Engine;
use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose};

/// PEM files of the generated PKI.
pub struct Pki {
    pub ca_cert: String,
    /// The serving certificate's files (read again when they change: see `serving.rs`).
    pub serving_cert_file: PathBuf,
    pub serving_key_file: PathBuf,
    pub admin_cert: String,
    pub admin_key: String,
    pub front_proxy_ca_cert: String,
    pub front_proxy_client_cert: String,
    pub front_proxy_client_key: String,
}

fn name(cn: &str, org: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    if let Some(o) = org {
        dn.push(DnType::OrganizationName, o);
    }
    dn
}

fn write_private(path: &Path, contents: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, contents).with_context(|| format!("writing {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// Lifetimes kubeadm gives what it generates: its CA 10 years, the certificates it signs 1.
const CA_YEARS: i16 = 10;
const LEAF_YEARS: i16 = 1;
/// A certificate this close to its end is made anew at start.
const RENEW_BEFORE_SECONDS: i64 = 30 * 24 * 3600;

/// Valid from the start of today (UTC) for `years`.
fn validity(params: &mut CertificateParams, years: i16) {
    let today = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC).date();
    let (y, m, d) = (i32::from(today.year()), today.month() as u8, today.day() as u8);
    params.not_before = rcgen::date_time_ymd(y, m, d);
    params.not_after = rcgen::date_time_ymd(y + i32::from(years), m, d.min(28));
}

/// Whether the PEM certificate ends within [`RENEW_BEFORE_SECONDS`] (or cannot be read).
fn expiring(pem: &str) -> bool {
    let now = jiff::Timestamp::now().as_second();
    let not_after = x509_parser::pem::parse_x509_pem(pem.as_bytes()).ok().and_then(|(_, p)| p.parse_x509().ok().map(|c| c.validity().not_after.timestamp()));
    not_after.is_none_or(|t| t - now < RENEW_BEFORE_SECONDS)
}

/// Loads the PKI under `dir`, creating what is missing. `sans` are the serving certificate's
/// names and addresses.
pub fn ensure(dir: &Path, sans: &[String]) -> anyhow::Result<Pki> {
    std::fs::create_dir_all(dir)?;
    let p = |f: &str| -> PathBuf { dir.join(f) };
    let ca = |file: &str, cn: &str| -> anyhow::Result<(String, String)> {
        if let (Some(c), Some(k)) = (read(&p(&format!("{file}.crt"))), read(&p(&format!("{file}.key")))) {
            return Ok((c, k));
        }
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = name(cn, None);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        validity(&mut params, CA_YEARS);
        let cert = params.self_signed(&key)?;
        std::fs::write(p(&format!("{file}.crt")), cert.pem())?;
        write_private(&p(&format!("{file}.key")), &key.serialize_pem())?;
        Ok((cert.pem(), key.serialize_pem()))
    };
    let (ca_cert, ca_key) = ca("ca", "kapi-ca")?;
    let (front_proxy_ca_cert, front_proxy_ca_key) = ca("front-proxy-ca", "front-proxy-ca")?;
    let issuer = Issuer::from_ca_cert_pem(&ca_cert, KeyPair::from_pem(&ca_key)?)?;
    let front_proxy_issuer = Issuer::from_ca_cert_pem(&front_proxy_ca_cert, KeyPair::from_pem(&front_proxy_ca_key)?)?;
    let leaf = |issuer: &Issuer<'_, KeyPair>,
                file: &str,
                cn: &str,
                org: Option<&str>,
                names: Vec<String>,
                usage: ExtendedKeyUsagePurpose|
     -> anyhow::Result<(String, String)> {
        if let (Some(c), Some(k)) = (read(&p(&format!("{file}.crt"))), read(&p(&format!("{file}.key"))))
            && !expiring(&c)
        {
            return Ok((c, k));
        }
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(names)?;
        params.distinguished_name = name(cn, org);
        params.extended_key_usages = vec![usage];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        validity(&mut params, LEAF_YEARS);
        let cert = params.signed_by(&key, issuer)?;
        std::fs::write(p(&format!("{file}.crt")), cert.pem())?;
        write_private(&p(&format!("{file}.key")), &key.serialize_pem())?;
        Ok((cert.pem(), key.serialize_pem()))
    };
    leaf(&issuer, "apiserver", "kube-apiserver", None, sans.to_vec(), ExtendedKeyUsagePurpose::ServerAuth)?;
    let (serving_cert_file, serving_key_file) = (p("apiserver.crt"), p("apiserver.key"));
    let (admin_cert, admin_key) = leaf(&issuer, "admin", "kubernetes-admin", Some("system:masters"), Vec::new(), ExtendedKeyUsagePurpose::ClientAuth)?;
    let (front_proxy_client_cert, front_proxy_client_key) =
        leaf(&front_proxy_issuer, "front-proxy-client", kapi_core::auth::FRONT_PROXY_CLIENT_NAME, None, Vec::new(), ExtendedKeyUsagePurpose::ClientAuth)?;
    Ok(Pki { ca_cert, serving_cert_file, serving_key_file, admin_cert, admin_key, front_proxy_ca_cert, front_proxy_client_cert, front_proxy_client_key })
}

/// The key service account tokens are signed with (`sa.key` under `dir`), made on first
/// start (P-256).
pub fn service_account_key(dir: &Path) -> anyhow::Result<String> {
    let path = dir.join("sa.key");
    if let Some(pem) = read(&path) {
        return Ok(pem);
    }
    let pem = KeyPair::generate()?.serialize_pem();
    write_private(&path, &pem)?;
    Ok(pem)
}

/// A kubeconfig that reaches `server` as the admin.
pub fn kubeconfig(server: &str, pki: &Pki) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    format!(
        "apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: {}
    server: {server}
  name: kapi
contexts:
- context:
    cluster: kapi
    user: kapi-admin
  name: kapi
current-context: kapi
users:
- name: kapi-admin
  user:
    client-certificate-data: {}
    client-key-data: {}
",
        b64(&pki.ca_cert),
        b64(&pki.admin_cert),
        b64(&pki.admin_key)
    )
}

pub fn write_kubeconfig(path: &Path, contents: &str) -> anyhow::Result<()> {
    write_private(path, contents)
}
