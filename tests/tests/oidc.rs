//! OpenID Connect tokens (`--oidc-*`) against a real HTTPS issuer the test starts (Python's
//! HTTP server behind TLS, serving its discovery document and JWKS), with tokens the test signs
//! with openssl (RS256), independently of kapi: a token of the issuer is its user (username and
//! groups claims, prefixed) for kubectl and curl, RBAC authorizes it by its groups, and an
//! expired, foreign-audience or forged one is 401.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use kapi_tests::{Kapi, Running, eventually, free_port, openssl_pki, python_webhook, status_and_body};
use serde_json::{Value, json};

/// The issuer: its discovery document and keys, read from the files the test writes.
const ISSUER: &str = r#"
import json
def answer(h, review):
    name = "discovery.json" if h.path == "/.well-known/openid-configuration" else "jwks.json"
    with open(name) as f:
        return json.load(f)
"#;

fn openssl(dir: &Path, args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let mut child = Command::new("openssl").args(args).current_dir(dir).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("openssl runs");
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "openssl {args:?}");
    out.stdout
}

/// The issuer's RSA key (`oidc.key`) and its JWK.
fn signing_key(dir: &Path) -> Value {
    openssl(dir, &["genrsa", "-out", "oidc.key", "2048"], b"");
    let modulus = String::from_utf8(openssl(dir, &["rsa", "-in", "oidc.key", "-noout", "-modulus"], b"")).unwrap();
    let hex = modulus.trim().trim_start_matches("Modulus=");
    let n: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
    json!({"kty": "RSA", "use": "sig", "alg": "RS256", "kid": "k1", "n": URL_SAFE_NO_PAD.encode(n), "e": "AQAB"})
}

/// `claims` signed RS256 with `oidc.key`.
fn sign(dir: &Path, claims: &Value) -> String {
    let header = URL_SAFE_NO_PAD.encode(json!({"alg": "RS256", "kid": "k1", "typ": "JWT"}).to_string());
    let input = format!("{header}.{}", URL_SAFE_NO_PAD.encode(claims.to_string()));
    let signature = openssl(dir, &["dgst", "-sha256", "-sign", "oidc.key"], input.as_bytes());
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature))
}

/// The issuer on a free port, its certificates, key and documents made in `dir`: its URL,
/// and the server (running until dropped).
fn start_issuer(dir: &Path) -> (String, Running) {
    let port = free_port();
    let issuer = format!("https://127.0.0.1:{port}");
    openssl_pki(dir, &[("hook", "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE")]);
    let jwk = signing_key(dir);
    std::fs::write(dir.join("discovery.json"), json!({"issuer": issuer, "jwks_uri": format!("{issuer}/keys")}).to_string()).unwrap();
    std::fs::write(dir.join("jwks.json"), json!({"keys": [jwk]}).to_string()).unwrap();
    let running = python_webhook(dir, port, ISSUER, false);
    (issuer, running)
}

#[test]
fn a_token_of_the_oidc_issuer_is_its_user() {
    let dir = tempfile::tempdir().unwrap();
    let (issuer, _issuer) = start_issuer(dir.path());
    let ca = dir.path().join("ca.crt");
    let k = Kapi::start_with(&[
        "--oidc-issuer-url",
        &issuer,
        "--oidc-client-id",
        "kapi",
        "--oidc-ca-file",
        ca.to_str().unwrap(),
        "--oidc-groups-claim",
        "groups",
        "--oidc-groups-prefix",
        "oidc:",
        "--authorization-mode",
        "RBAC",
    ]);
    let now = jiff::Timestamp::now().as_second();
    let claims = |extra: Value| {
        let mut c = json!({"iss": issuer, "aud": "kapi", "sub": "jane", "groups": ["dev"], "iat": now, "exp": now + 600});
        for (key, v) in extra.as_object().unwrap() {
            c[key] = v.clone();
        }
        c
    };
    let token = sign(dir.path(), &claims(json!({})));
    let as_user = |token: &str, args: &[&str]| k.kubectl_with_token(token, args);
    // The keys are fetched once kapi is up: the token works within a few seconds.
    assert!(eventually(Duration::from_secs(20), || as_user(&token, &["auth", "whoami"]).status.success()), "the token authenticates");
    let who: Value = serde_json::from_slice(&as_user(&token, &["auth", "whoami", "-o", "json"]).stdout).unwrap();
    assert_eq!(who["status"]["userInfo"]["username"], format!("{issuer}#jane"));
    assert_eq!(who["status"]["userInfo"]["groups"], json!(["oidc:dev", "system:authenticated"]));

    // RBAC by the token's group.
    let out = as_user(&token, &["get", "pods"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("User \"{issuer}#jane\" cannot list resource \"pods\"")), "{out:?}");
    k.ok(&["create", "clusterrolebinding", "oidc-dev-view", "--clusterrole=view", "--group=oidc:dev"]);
    assert!(eventually(Duration::from_secs(10), || as_user(&token, &["get", "pods"]).status.success()));

    // curl: expired, another audience, forged: 401.
    let curl = |token: &str| {
        let kapi_ca = k.data_dir().join("pki/ca.crt");
        let out = Command::new("curl")
            .args(["-sS", "--cacert", kapi_ca.to_str().unwrap(), "-H", &format!("Authorization: Bearer {token}"), "-w", "\n%{http_code}", &k.url("/api")])
            .output()
            .expect("curl runs");
        status_and_body(&out).0
    };
    assert_eq!(curl(&token), 200);
    assert_eq!(curl(&sign(dir.path(), &claims(json!({"exp": now - 10})))), 401);
    assert_eq!(curl(&sign(dir.path(), &claims(json!({"aud": "someone-else"})))), 401);
    let (input, _) = token.rsplit_once('.').unwrap();
    assert_eq!(curl(&format!("{input}.{}", URL_SAFE_NO_PAD.encode([7u8; 256]))), 401);
}

/// An `--authentication-config` file: one JWT authenticator of `issuer` (its CA given inline)
/// whose username is `prefix` and the subject, and anonymous requests only for `/livez`.
fn authentication_config(issuer: &str, ca: &str, prefix: &str) -> String {
    let ca: String = ca.lines().map(|l| format!("      {l}\n")).collect();
    format!(
        r#"apiVersion: apiserver.config.k8s.io/v1beta1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: {issuer}
    audiences: [kapi, other]
    audienceMatchPolicy: MatchAny
    certificateAuthority: |
{ca}  claimValidationRules:
  - expression: "claims.?tenant.orValue('') == 'acme'"
    message: tenant must be acme
  claimMappings:
    username:
      expression: "'{prefix}' + claims.sub"
    groups:
      expression: claims.roles
    uid:
      claim: sub
    extra:
    - key: acme.io/team
      valueExpression: claims.team
  userValidationRules:
  - expression: "!user.username.endsWith(':root')"
    message: no root
anonymous:
  enabled: true
  conditions:
  - path: /livez
"#
    )
}

#[test]
fn an_authentication_config_maps_claims_with_cel_says_who_is_anonymous_and_is_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let (issuer, _issuer) = start_issuer(dir.path());
    let ca = std::fs::read_to_string(dir.path().join("ca.crt")).unwrap();
    let file = dir.path().join("authentication.yaml");
    std::fs::write(&file, authentication_config(&issuer, &ca, "acme:")).unwrap();
    let file = file.display().to_string();

    // Refused at start: with --oidc-* flags, or --anonymous-auth where the file says who is anonymous.
    let serve = kapi_tests::refused_at_start;
    assert!(
        serve(&["--authentication-config", &file, "--oidc-client-id", "kapi"]).contains("authentication-config file and oidc-* flags are mutually exclusive")
    );
    assert!(
        serve(&["--authentication-config", &file, "--anonymous-auth=true"])
            .contains("anonymous: Forbidden: --anonymous-auth flag cannot be set when anonymous field is configured in authentication configuration file")
    );

    let k = Kapi::start_with(&["--authentication-config", &file, "--authorization-mode", "RBAC"]);
    let now = jiff::Timestamp::now().as_second();
    let claims = |extra: Value| {
        let mut c =
            json!({"iss": issuer, "aud": ["other"], "sub": "jane", "roles": ["viewer"], "tenant": "acme", "team": "blue", "jti": "t1", "exp": now + 600});
        for (key, v) in extra.as_object().unwrap() {
            c[key] = v.clone();
        }
        c
    };
    let token = sign(dir.path(), &claims(json!({})));
    let whoami = |token: &str| serde_json::from_slice::<Value>(&k.kubectl_with_token(token, &["auth", "whoami", "-o", "json"]).stdout).unwrap_or(Value::Null);
    assert!(eventually(Duration::from_secs(20), || whoami(&token) != Value::Null), "the token authenticates");
    assert_eq!(
        whoami(&token)["status"]["userInfo"],
        json!({"username": "acme:jane", "uid": "jane", "groups": ["viewer", "system:authenticated"],
            "extra": {"acme.io/team": ["blue"], "authentication.kubernetes.io/credential-id": ["JTI=t1"]}})
    );

    // A TokenReview says why a token is refused, in kube's words.
    let review = |token: &str| {
        let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}});
        let out = k.kubectl_with_input(&["create", "--raw", "/apis/authentication.k8s.io/v1/tokenreviews", "-f", "-"], &body.to_string());
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["status"].clone()
    };
    assert_eq!(
        review(&sign(dir.path(), &claims(json!({"tenant": "umbrella"}))))["error"],
        "oidc: error evaluating claim validation expression: validation expression 'claims.?tenant.orValue('') == 'acme'' failed: tenant must be acme"
    );
    assert_eq!(
        review(&sign(dir.path(), &claims(json!({"sub": "root"}))))["error"],
        "oidc: error evaluating user info validation rule: validation expression '!user.username.endsWith(':root')' failed: no root"
    );
    assert_eq!(
        review(&sign(dir.path(), &claims(json!({"aud": "x"}))))["error"],
        "oidc: verify token: oidc: expected audience in [\"kapi\" \"other\"] got [\"x\"]"
    );

    // Anonymous for /livez only.
    let anonymous = |path: &str| {
        let kapi_ca = k.data_dir().join("pki/ca.crt");
        let out = Command::new("curl").args(["-sS", "--cacert", kapi_ca.to_str().unwrap(), "-w", "\n%{http_code}", &k.url(path)]).output().expect("curl runs");
        status_and_body(&out).0
    };
    assert_eq!(anonymous("/livez"), 200);
    assert_eq!(anonymous("/readyz"), 401);

    // The file changes: new tokens' users are the new mapping's (a confirmed token's answer is
    // kept 10 s, as in kube).
    std::fs::write(dir.path().join("authentication.yaml"), authentication_config(&issuer, &ca, "acme2:")).unwrap();
    let fresh = sign(dir.path(), &claims(json!({"jti": "t2"})));
    assert!(eventually(Duration::from_secs(20), || whoami(&fresh)["status"]["userInfo"]["username"] == "acme2:jane"));
}
