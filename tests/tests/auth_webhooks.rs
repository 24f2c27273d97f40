//! The authentication and authorization webhooks as kube-apiserver calls them, against a real
//! HTTPS webhook the test starts (Python's HTTP server behind TLS, asking kapi for a client
//! certificate), named by kubeconfig files that give the CA, kapi's client certificate and a
//! bearer token by paths relative to themselves: a token only the webhook knows is the user
//! its TokenReview names (`kubectl auth whoami`), and what RBAC does not allow that user the
//! webhook's SubjectAccessReview decides (`kubectl get`, `kubectl auth can-i`, curl's 403).

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use kapi_tests::{Kapi, Running, eventually, free_port, openssl_pki, python_webhook, status_and_body};
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
    let as_jane = |args: &[&str]| k.kubectl_with_token("jane-token", args);
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

/// An `--authorization-config` file: RBAC, then the webhook for the requests of one namespace.
fn authorization_config(kubeconfig: &str, namespace: &str) -> String {
    format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\nauthorizers:\n- type: Node\n  name: node\n- type: RBAC\n  name: rbac\n- type: Webhook\n  name: jane-hook\n  webhook:\n    timeout: 3s\n    subjectAccessReviewVersion: v1\n    matchConditionSubjectAccessReviewVersion: v1\n    failurePolicy: NoOpinion\n    connectionInfo:\n      type: KubeConfigFile\n      kubeConfigFile: {kubeconfig}\n    matchConditions:\n    - expression: has(request.resourceAttributes) && request.resourceAttributes.namespace == '{namespace}'\n"
    )
}

#[test]
fn an_authorization_config_file_asks_a_webhook_what_its_conditions_pick_and_is_read_again_when_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let _hook = webhook(dir.path(), port);
    let authn = kubeconfig(dir.path(), "authn.kubeconfig", port, "/authenticate");
    let authz = kubeconfig(dir.path(), "authz.kubeconfig", port, "/authorize");
    let file = dir.path().join("authorization.yaml");
    std::fs::write(&file, authorization_config(&authz, "kube-system")).unwrap();
    let file = file.display().to_string();

    // Refused at start: with the mode flags, and a file kube would refuse, in its words.
    let refused = kapi_tests::refused_at_start(&["--authorization-config", &file, "--authorization-mode", "RBAC"]);
    assert!(
        refused.contains("--authorization-config can not be specified when --authorization-mode or --authorization-webhook-* flags are defined"),
        "{refused}"
    );
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, authorization_config(&authz, "x").replace("timeout: 3s", "timeout: 1m")).unwrap();
    let refused = kapi_tests::refused_at_start(&["--authorization-config", bad.to_str().unwrap()]);
    assert!(refused.contains("authorizers[2].timeout: Invalid value: \"1m0s\": must be > 0s and <= 30s"), "{refused}");

    let k = Kapi::start_with(&[
        "--authentication-token-webhook-config-file",
        &authn,
        "--authentication-token-webhook-version",
        "v1",
        "--authorization-config",
        &file,
    ]);
    let as_jane = |args: &[&str]| k.kubectl_with_token("jane-token", args);
    let out = as_jane(&["get", "configmaps", "-n", "kube-system"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = as_jane(&["get", "configmaps", "-n", "default"]);
    assert!(stderr(&out).contains("User \"jane\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""), "{}", stderr(&out));
    // The webhook was asked only about kube-system, within its timeout, as SubjectAccessReview v1.
    let asked: Vec<Value> = calls(dir.path()).into_iter().filter(|c| c["path"].as_str().unwrap().starts_with("/authorize")).collect();
    assert!(!asked.is_empty());
    assert!(asked.iter().all(|c| c["path"] == "/authorize?timeout=3s" && c["review"]["spec"]["resourceAttributes"]["namespace"] == "kube-system"), "{asked:?}");
    assert_eq!(asked[0]["review"]["apiVersion"], "authorization.k8s.io/v1");

    // The file changes: the next requests meet the chain it makes.
    std::fs::write(&file, authorization_config(&authz, "default")).unwrap();
    assert!(eventually(Duration::from_secs(10), || as_jane(&["get", "configmaps", "-n", "default"]).status.success()));
    assert!(!as_jane(&["get", "configmaps", "-n", "kube-system"]).status.success());
    // A change that does not load (RBAC taken out, which the server started with) keeps it.
    std::fs::write(&file, authorization_config(&authz, "kube-system").replace("- type: RBAC\n  name: rbac\n", "")).unwrap();
    std::thread::sleep(Duration::from_secs(3));
    assert!(as_jane(&["get", "configmaps", "-n", "default"]).status.success());
}
