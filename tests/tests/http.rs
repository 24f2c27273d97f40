//! Raw HTTP against the binary (curl): authentication, HTTP/2, and kube-apiserver's status codes.

use kapi_tests::{Kapi, status_and_body};
use serde_json::Value;

fn curl(k: &Kapi, args: &[&str], path: &str) -> (u16, String) {
    k.http(args, path)
}

#[test]
fn requests_without_a_credential_are_anonymous_a_bad_one_gets_401_and_tokens_work() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "s3cret,alice,1001,\"dev,ops\"\n").unwrap();
    let k = Kapi::start_with(&["--token-auth-file", tokens.to_str().unwrap()]);
    let ca = k.data_dir().join("pki/ca.crt");
    let anon = std::process::Command::new("curl")
        .args(["-sS", "--cacert", ca.to_str().unwrap(), "-w", "\n%{http_code}", &k.url("/api/v1/namespaces")])
        .output()
        .unwrap();
    let (code, body) = status_and_body(&anon);
    assert_eq!(code, 403, "anonymous, as kube's default --anonymous-auth and Node,RBAC have it");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["message"], "namespaces is forbidden: User \"system:anonymous\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope");
    let bad = std::process::Command::new("curl")
        .args(["-sS", "--cacert", ca.to_str().unwrap(), "-H", "Authorization: Bearer wr0ng", "-w", "\n%{http_code}", &k.url("/api/v1/namespaces")])
        .output()
        .unwrap();
    let (code, body) = status_and_body(&bad);
    assert_eq!(code, 401);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["reason"], "Unauthorized");
    let with_token = std::process::Command::new("curl")
        .args([
            "-sS",
            "--cacert",
            ca.to_str().unwrap(),
            "-H",
            "Authorization: Bearer s3cret",
            "-w",
            "\n%{http_code}",
            &k.url("/apis/authentication.k8s.io/v1/selfsubjectreviews"),
        ])
        .args(["-X", "POST", "-H", "Content-Type: application/json", "-d", r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#])
        .output()
        .unwrap();
    let (code, body) = status_and_body(&with_token);
    assert_eq!(code, 201, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"]["userInfo"]["username"], "alice");
    assert_eq!(v["status"]["userInfo"]["groups"], serde_json::json!(["dev", "ops", "system:authenticated"]));
}

#[test]
fn serves_http2_and_http1() {
    let k = Kapi::start();
    let h2 = k.curl(&["--http2", "-o", "/dev/null", "-w", "%{http_version}", &k.url("/version")]);
    assert_eq!(String::from_utf8_lossy(&h2.stdout), "2");
    let h1 = k.curl(&["--http1.1", "-o", "/dev/null", "-w", "%{http_version}", &k.url("/version")]);
    assert_eq!(String::from_utf8_lossy(&h1.stdout), "1.1");
}

/// Like kube-apiserver (Go's TLS server), kapi picks AES-128-GCM when the client offers it,
/// even after AES-256-GCM.
#[test]
fn tls_prefers_aes_128_gcm_as_kube_apiserver_does() {
    let k = Kapi::start();
    let out = k.curl(&["-v", "--tls13-ciphers", "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256", "-o", "/dev/null", &k.url("/version")]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("SSL connection using TLSv1.3 / TLS_AES_128_GCM_SHA256"), "{log}");
}

#[test]
fn status_codes_follow_kube() {
    let k = Kapi::start();
    let (code, body) = curl(&k, &[], "/api/v1/namespaces/default/widgets");
    assert_eq!(code, 404, "{body}");
    let (code, _) = curl(&k, &["-X", "POST", "-H", "Content-Type: text/csv", "-d", "a,b"], "/api/v1/namespaces/default/configmaps");
    assert_eq!(code, 415);
    let (code, _) = curl(&k, &["-H", "Accept: text/html"], "/api/v1/namespaces/default/configmaps");
    assert_eq!(code, 406);
    let (code, body) = curl(&k, &["-X", "POST", "-H", "Content-Type: application/json", "-d", "{not json"], "/api/v1/namespaces/default/configmaps");
    assert_eq!(code, 400, "{body}");
    let big = format!(r#"{{"metadata":{{"name":"big"}},"data":{{"x":"{}"}}}}"#, "a".repeat(4 * 1024 * 1024));
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), big).unwrap();
    let at = format!("@{}", file.path().display());
    let (code, _) = curl(&k, &["-X", "POST", "-H", "Content-Type: application/json", "--data-binary", &at], "/api/v1/namespaces/default/configmaps");
    assert_eq!(code, 413);
    let (code, body) = curl(
        &k,
        &["-X", "POST", "-H", "Content-Type: application/json", "-d", r#"{"metadata":{"name":"x"},"spec":{}}"#],
        "/apis/apps/v1/namespaces/default/deployments",
    );
    assert_eq!(code, 422, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["reason"], "Invalid");
    let (code, body) = curl(&k, &["-X", "PUT", "-H", "Content-Type: application/json", "-d", "{}"], "/api/v1/namespaces/default/configmaps");
    assert_eq!(code, 405, "{body}");
    let (code, body) = curl(&k, &[], "/api/v1/namespaces/default/configmaps?resourceVersion=1&resourceVersionMatch=Exact&limit=1");
    assert!(code == 200 || code == 410, "{code} {body}");
}

#[test]
fn discovery_and_openapi_documents() {
    let k = Kapi::start();
    let (code, body) = curl(&k, &["-H", "Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"], "/apis");
    assert_eq!(code, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["kind"], "APIGroupDiscoveryList");
    let (_, body) = curl(&k, &[], "/openapi/v3");
    let v: Value = serde_json::from_str(&body).unwrap();
    let url = v["paths"]["apis/apps/v1"]["serverRelativeURL"].as_str().unwrap().to_string();
    let (code, body) = curl(&k, &[], &url);
    assert_eq!(code, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(v["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"].is_object());
    let (code, body) = curl(&k, &[], "/openapi/v2");
    assert_eq!(code, 200);
    assert!(body.contains("\"swagger\":\"2.0\""));
    // Either spelling of the protobuf form is answered under the current one.
    let out = k.curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code} %{content_type}",
        "-H",
        "Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        &k.url("/openapi/v2"),
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "200 application/com.github.proto-openapi.spec.v2.v1.0+protobuf");
    let (code, _) = curl(&k, &["-H", "Accept: text/html"], "/openapi/v2");
    assert_eq!(code, 406);
}
