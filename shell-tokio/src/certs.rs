//! The PKI kapi makes for itself on first start: a CA, a serving certificate for this server
//! and an admin client certificate (group `system:masters`), and the kubeconfig that uses them.

use std::path::{Path, PathBuf};

use anyhow::Context;
use base64::Engine;
use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose};

/// PEM files of the generated PKI.
pub struct Pki {
    pub ca_cert: String,
    pub serving_cert: String,
    pub serving_key: String,
    pub admin_cert: String,
    pub admin_key: String,
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

/// Loads the PKI under `dir`, creating what is missing. `sans` are the serving certificate's
/// names and addresses.
pub fn ensure(dir: &Path, sans: &[String]) -> anyhow::Result<Pki> {
    std::fs::create_dir_all(dir)?;
    let p = |f: &str| -> PathBuf { dir.join(f) };
    let (ca_cert, ca_key) = match (read(&p("ca.crt")), read(&p("ca.key"))) {
        (Some(c), Some(k)) => (c, k),
        _ => {
            let key = KeyPair::generate()?;
            let mut params = CertificateParams::new(Vec::<String>::new())?;
            params.distinguished_name = name("kapi-ca", None);
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
            params.not_after = rcgen::date_time_ymd(2124, 1, 1);
            let cert = params.self_signed(&key)?;
            std::fs::write(p("ca.crt"), cert.pem())?;
            write_private(&p("ca.key"), &key.serialize_pem())?;
            (cert.pem(), key.serialize_pem())
        }
    };
    let issuer = Issuer::from_ca_cert_pem(&ca_cert, KeyPair::from_pem(&ca_key)?)?;
    let leaf = |file: &str, cn: &str, org: Option<&str>, names: Vec<String>, usage: ExtendedKeyUsagePurpose| -> anyhow::Result<(String, String)> {
        if let (Some(c), Some(k)) = (read(&p(&format!("{file}.crt"))), read(&p(&format!("{file}.key")))) {
            return Ok((c, k));
        }
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(names)?;
        params.distinguished_name = name(cn, org);
        params.extended_key_usages = vec![usage];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.not_after = rcgen::date_time_ymd(2124, 1, 1);
        let cert = params.signed_by(&key, &issuer)?;
        std::fs::write(p(&format!("{file}.crt")), cert.pem())?;
        write_private(&p(&format!("{file}.key")), &key.serialize_pem())?;
        Ok((cert.pem(), key.serialize_pem()))
    };
    let (serving_cert, serving_key) = leaf("apiserver", "kube-apiserver", None, sans.to_vec(), ExtendedKeyUsagePurpose::ServerAuth)?;
    let (admin_cert, admin_key) = leaf("admin", "kubernetes-admin", Some("system:masters"), Vec::new(), ExtendedKeyUsagePurpose::ClientAuth)?;
    Ok(Pki { ca_cert, serving_cert, serving_key, admin_cert, admin_key })
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
