//! TLS as kube-apiserver configures it, tried with curl: `--tls-min-version`,
//! `--tls-cipher-suites`, SNI certificates (`--tls-sni-cert-key`), and serving certificates
//! read again from disk when they change, without a restart.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use kapi_tests::{Kapi, eventually, openssl_pki};

/// curl to `/version` trusting `ca`, with `args`; the HTTP code, 0 when TLS failed.
fn curl(k: &Kapi, ca: &Path, args: &[&str], url: Option<&str>) -> u16 {
    let url = url.map(str::to_string).unwrap_or_else(|| k.url("/version"));
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", ca.to_str().unwrap()])
        .args(args)
        .arg(url)
        .output()
        .expect("curl runs");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0)
}

#[test]
fn the_lowest_version_and_the_cipher_suites_are_what_the_flags_allow() {
    let k = Kapi::start_with(&["--tls-min-version", "VersionTLS13"]);
    let ca = k.data_dir().join("pki/ca.crt");
    assert_eq!(curl(&k, &ca, &[], None), 200, "TLS 1.3");
    assert_eq!(curl(&k, &ca, &["--tls-max", "1.2"], None), 0, "no TLS 1.2");
    drop(k);

    // The generated serving key is P-256: ECDSA suites.
    let k = Kapi::start_with(&["--tls-cipher-suites", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,TLS_AES_128_GCM_SHA256"]);
    let ca = k.data_dir().join("pki/ca.crt");
    assert_eq!(curl(&k, &ca, &["--tls-max", "1.2", "--ciphers", "ECDHE-ECDSA-CHACHA20-POLY1305"], None), 200);
    assert_eq!(curl(&k, &ca, &["--tls-max", "1.2", "--ciphers", "ECDHE-ECDSA-AES128-GCM-SHA256"], None), 0, "a suite not named");
    assert_eq!(curl(&k, &ca, &[], None), 200, "TLS 1.3's suites are not chosen");
    drop(k);
    let k = Kapi::start_with(&["--tls-cipher-suites", "TLS_AES_128_GCM_SHA256"]);
    let ca = k.data_dir().join("pki/ca.crt");
    assert_eq!(curl(&k, &ca, &["--tls-max", "1.2"], None), 0, "only TLS 1.3's named: no TLS 1.2, as Go");
    assert_eq!(curl(&k, &ca, &[], None), 200);
    drop(k);

    assert!(
        kapi_tests::refused_at_start(&["--tls-cipher-suites", "TLS_RSA_WITH_AES_128_CBC_SHA"])
            .contains("cipher suite TLS_RSA_WITH_AES_128_CBC_SHA is not served by kapi")
    );
    assert!(kapi_tests::refused_at_start(&["--tls-min-version", "VersionTLS9"]).contains("unknown tls version \"VersionTLS9\""));
}

#[test]
fn a_client_asking_for_a_name_gets_its_certificate_and_changed_files_are_served_at_once() {
    let pki = tempfile::tempdir().unwrap();
    let (first, second) = (pki.path().join("first"), pki.path().join("second"));
    for dir in [&first, &second] {
        std::fs::create_dir(dir).unwrap();
        openssl_pki(dir, &[("named", "subjectAltName=DNS:api.example.test,DNS:*.apps.example.test\nbasicConstraints=CA:FALSE")]);
    }
    // The files kapi serves for the names, which the test replaces.
    let (cert, key) = (pki.path().join("sni.crt"), pki.path().join("sni.key"));
    std::fs::copy(first.join("named.crt"), &cert).unwrap();
    std::fs::copy(first.join("named.key"), &key).unwrap();
    let sni = format!("{},{}", cert.display(), key.display());
    let k = Kapi::start_with(&["--tls-sni-cert-key", &sni]);
    let port = k.url("").rsplit(':').next().unwrap().trim_end_matches('/').to_string();
    let by_name = |name: &str, ca: &Path| {
        let resolve = format!("{name}:{port}:127.0.0.1");
        curl(&k, ca, &["--resolve", &resolve], Some(&format!("https://{name}:{port}/version")))
    };
    assert_eq!(by_name("api.example.test", &first.join("ca.crt")), 200, "the SNI certificate, by its DNS name");
    assert_eq!(by_name("web.apps.example.test", &first.join("ca.crt")), 200, "and by its wildcard");
    assert_eq!(curl(&k, &k.data_dir().join("pki/ca.crt"), &[], None), 200, "no name: the default certificate");

    // New files are served without a restart.
    std::fs::copy(second.join("named.key"), &key).unwrap();
    std::fs::copy(second.join("named.crt"), &cert).unwrap();
    assert!(eventually(Duration::from_secs(10), || by_name("api.example.test", &second.join("ca.crt")) == 200));
    assert_eq!(by_name("api.example.test", &first.join("ca.crt")), 0, "the old certificate is no longer served");
    // A half-written change keeps what is served.
    std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\ntruncated").unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(by_name("api.example.test", &second.join("ca.crt")), 200);
}
