//! The authentication and authorization webhooks as kube-apiserver calls them, against a real
//! HTTPS webhook the test starts (Python's HTTP server behind TLS, asking kapi for a client
//! certificate), named by kubeconfig files that give the CA, kapi's client certificate and a
//! bearer token by paths relative to themselves: a token only the webhook knows is the user
//! its TokenReview names (`kubectl auth whoami`), and what RBAC does not allow that user the
//! webhook's SubjectAccessReview decides (`kubectl get`, `kubectl auth can-i`, curl's 403).

use std::path::Path;
use std::process::{Command, Output};

use kapi_tests::{Kapi, Running, free_port, openssl_pki, python_webhook, status_and_body};
use serde_json::Value;

/// The webhook: `/authenticate` knows `jane-token` as jane (in `dev`), `/authorize` lets jane do
/// anything but delete, which it denies. Each review is logged with what presented it (the
/// client certificate's subject and the bearer token).
const WEBHOOK: &str = r#"
import json
def answer(h, review):
    spec = review["spec"]
    subject = dict(x[0] for x in h.connection.getpeercert()["subject"])
    with open("calls.log", "a") as f:
        f.write(json.dumps({"path": h.path, "client": subject.get("commonName"), "auth": h.headers.get("Authorization"), "review": review}) + "\n")
    if h.path.startswith("/authenticate"):
        if spec["token"] == "jane-token":
            status = {"authenticated": True, "user": {"username": "jane", "groups": ["dev"]}}
        else:
            status = {"authenticated": False}
    elif spec.get("user") != "jane":
        status = {"allowed": False}
    elif spec.get("resourceAttributes", {}).get("verb") == "delete":
        status = {"allowed": False, "denied": True, "reason": "jane never deletes"}
    else:
        status = {"allowed": True}
    return {"apiVersion": review["apiVersion"], "kind": review["kind"], "status": status}
"#;

/// The webhook server (its certificates made in `dir`, kapi's client certificate among them),
/// running until dropped.
fn webhook(dir: &Path, port: u16) -> Running {
    openssl_pki(
        dir,
        &[("hook", "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE"), ("apiserver", "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE")],
    );
    python_webhook(dir, port, WEBHOOK, true)
}

/// A kubeconfig in `dir` naming the webhook at `path`, with files named relative to it.
fn kubeconfig(dir: &Path, name: &str, port: u16, path: &str) -> String {
    let config = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: hook\n  cluster:\n    server: https://127.0.0.1:{port}{path}\n    certificate-authority: ca.crt\nusers:\n- name: kapi\n  user:\n    client-certificate: apiserver.crt\n    client-key: apiserver.key\n    token: hook-secret\ncontexts:\n- name: webhook\n  context:\n    cluster: hook\n    user: kapi\ncurrent-context: webhook\n"
    );
    let file = dir.join(name);
    std::fs::write(&file, config).unwrap();
    file.display().to_string()
}

fn calls(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("calls.log")).unwrap_or_default().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_webhook_names_the_user_of_a_token_and_decides_what_rbac_does_not_allow() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let _hook = webhook(dir.path(), port);
    let authn = kubeconfig(dir.path(), "authn.kubeconfig", port, "/authenticate");
    let authz = kubeconfig(dir.path(), "authz.kubeconfig", port, "/authorize");
    let k = Kapi::start_with(&[
        "--authentication-token-webhook-config-file",
        &authn,
        "--authentication-token-webhook-version",
        "v1",
        "--authorization-mode",
        "Node,RBAC,Webhook",
        "--authorization-webhook-config-file",
        &authz,
    ]);
    let as_jane = |args: &[&str]| {
        let (server, ca) = (k.url(""), k.data_dir().join("pki/ca.crt"));
        let mut a = vec!["--kubeconfig=/dev/null", "--server", &server, "--certificate-authority", ca.to_str().unwrap(), "--token", "jane-token"];
        a.extend_from_slice(args);
        Command::new("kubectl").args(&a).output().expect("kubectl runs")
    };
    let who: Value = serde_json::from_slice(&as_jane(&["auth", "whoami", "-o", "json"]).stdout).unwrap();
    assert_eq!(who["status"]["userInfo"], serde_json::json!({"username": "jane", "groups": ["dev", "system:authenticated"]}));
    let out = as_jane(&["get", "configmaps", "-n", "kube-system"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&as_jane(&["auth", "can-i", "delete", "pods"]).stdout).trim(), "no - jane never deletes");
    assert_eq!(String::from_utf8_lossy(&as_jane(&["auth", "can-i", "create", "pods"]).stdout).trim(), "yes");

    // Each webhook was called with kapi's client certificate and the kubeconfig's token, with
    // the versions asked (TokenReview v1; SubjectAccessReview v1beta1 by default, whose groups
    // are `group`).
    let seen = calls(dir.path());
    let review = seen.iter().find(|c| c["path"] == "/authenticate?timeout=30s").expect("a token review");
    assert_eq!((review["client"].as_str(), review["auth"].as_str()), (Some("kapi-apiserver"), Some("Bearer hook-secret")));
    assert_eq!(review["review"]["apiVersion"], "authentication.k8s.io/v1");
    let access = seen.iter().find(|c| c["review"]["spec"]["resourceAttributes"]["resource"] == "configmaps").expect("an access review");
    assert_eq!(access["path"], "/authorize?timeout=30s");
    assert_eq!(access["review"]["apiVersion"], "authorization.k8s.io/v1beta1");
    assert_eq!(access["review"]["spec"]["group"], serde_json::json!(["dev", "system:authenticated"]));
    assert_eq!(
        access["review"]["spec"]["resourceAttributes"],
        serde_json::json!({"namespace": "kube-system", "verb": "list", "version": "v1", "resource": "configmaps"})
    );

    // curl: a denial is kube's 403 with the webhook's reason; an unknown token is 401.
    let curl = |token: &str, method: &str, path: &str| {
        let out = Command::new("curl")
            .args(["-sS", "--cacert", k.data_dir().join("pki/ca.crt").to_str().unwrap(), "-H", &format!("Authorization: Bearer {token}"), "-X", method])
            .args(["-w", "\n%{http_code}", &k.url(path)])
            .output()
            .expect("curl runs");
        status_and_body(&out)
    };
    let (code, body) = curl("jane-token", "DELETE", "/api/v1/namespaces/default/configmaps/kube-root-ca.crt");
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        status["message"],
        "configmaps \"kube-root-ca.crt\" is forbidden: User \"jane\" cannot delete resource \"configmaps\" in API group \"\" in the namespace \"default\": jane never deletes"
    );
    assert_eq!(curl("someone-else", "GET", "/api/v1/namespaces").0, 401);
}
