//! `--authorization-mode=RBAC` driven with kubectl: a user holds nothing but what Roles,
//! ClusterRoles and their bindings grant, gets kube's 403 for the rest, and loses a grant when
//! its binding goes; `kubectl auth can-i` answers from the same decisions. Under the default
//! `Node,RBAC`, a kubelet's certificate reads what its pods need and nothing else.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use base64::Engine;
use kapi_tests::{Kapi, eventually};
use serde_json::json;

/// A kubeconfig for the user of `token`.
fn kubeconfig(k: &Kapi, dir: &Path, token: &str) -> std::path::PathBuf {
    let ca = k.data_dir().join("pki/ca.crt");
    let config = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kapi\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: u\n  context:\n    cluster: kapi\n    user: u\ncurrent-context: u\n",
        k.url(""),
        ca.display()
    );
    let path = dir.join(format!("{token}.kubeconfig"));
    std::fs::write(&path, config).unwrap();
    path
}

/// A kapi under RBAC whose token file knows alice, and her kubeconfig (in `dir`).
fn kapi_knowing_alice(dir: &Path) -> (Kapi, std::path::PathBuf) {
    let tokens = dir.join("tokens.csv");
    std::fs::write(&tokens, "al1ce,alice,1001\n").unwrap();
    let k = Kapi::start_with(&["--token-auth-file", tokens.to_str().unwrap(), "--authorization-mode", "RBAC"]);
    let config = kubeconfig(&k, dir, "al1ce");
    (k, config)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn rbac_grants_what_roles_and_bindings_say_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let (k, config) = kapi_knowing_alice(dir.path());
    let alice = |args: &[&str]| Command::new("kubectl").args(args).env("KUBECONFIG", &config).output().expect("kubectl runs");

    // kube's bootstrap policy grants every authenticated user discovery, public information
    // and reviews of itself (system:discovery, system:public-info-viewer, system:basic-user),
    // and nothing else: not the metrics, whose path is named in kube's message.
    assert!(alice(&["get", "--raw", "/api"]).status.success(), "{}", stderr(&alice(&["get", "--raw", "/api"])));
    assert!(alice(&["get", "--raw", "/version"]).status.success());
    let out = alice(&["get", "--raw", "/metrics"]);
    assert!(stderr(&out).contains("forbidden: User \"alice\" cannot get path \"/metrics\""), "{}", stderr(&out));
    let out = alice(&["get", "pods"]);
    assert!(stderr(&out).contains("pods is forbidden: User \"alice\" cannot list resource \"pods\""), "{}", stderr(&out));

    // The admin (system:masters) grants reading pods in the default namespace.
    k.ok(&["create", "role", "pod-reader", "--verb=get,list", "--resource=pods"]);
    k.ok(&["create", "rolebinding", "alice-reads", "--role=pod-reader", "--user=alice"]);
    assert!(eventually(Duration::from_secs(10), || alice(&["get", "pods"]).status.success()), "{}", stderr(&alice(&["get", "pods"])));

    // In its namespace only, and for its verbs only.
    let out = alice(&["get", "pods", "-n", "kube-system"]);
    assert!(
        stderr(&out).contains("pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"kube-system\""),
        "{}",
        stderr(&out)
    );
    let out = alice(&["create", "configmap", "c"]);
    assert!(stderr(&out).contains("configmaps is forbidden: User \"alice\" cannot create resource \"configmaps\""), "{}", stderr(&out));
    let can = |args: &[&str]| String::from_utf8_lossy(&alice(&[&["auth", "can-i"][..], args].concat()).stdout).trim().to_string();
    assert_eq!(can(&["list", "pods"]), "yes");
    assert_eq!(can(&["delete", "pods"]), "no");
    assert_eq!(can(&["list", "pods", "-n", "kube-system"]), "no");
    let list = can(&["--list"]);
    assert!(list.lines().any(|l| l.starts_with("pods ") && l.ends_with("[get list]")), "{list}");
    assert!(list.lines().any(|l| l.contains("[/apis/*]") && l.ends_with("[get]")), "{list}");

    // Allowed to write roles and bindings, alice may grant only what she holds herself.
    k.ok(&["create", "role", "rbac-writer", "--verb=create", "--resource=roles.rbac.authorization.k8s.io,rolebindings.rbac.authorization.k8s.io"]);
    k.ok(&["create", "rolebinding", "alice-writes-rbac", "--role=rbac-writer", "--user=alice"]);
    assert!(eventually(Duration::from_secs(10), || alice(&["create", "role", "mine", "--verb=get", "--resource=pods"]).status.success()));
    let out = alice(&["create", "role", "more", "--verb=get,delete", "--resource=pods"]);
    assert!(
        stderr(&out).contains(
            "roles.rbac.authorization.k8s.io \"more\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}"
        ),
        "{}",
        stderr(&out)
    );
    let out = alice(&["create", "rolebinding", "alice-admin", "--clusterrole=admin", "--user=alice"]);
    assert!(stderr(&out).contains("rolebindings.rbac.authorization.k8s.io \"alice-admin\" is forbidden: user \"alice\""), "{}", stderr(&out));
    assert!(alice(&["create", "rolebinding", "alice-mine", "--role=mine", "--user=alice"]).status.success());

    // A SubjectAccessReview answers for the user it names, with the binding that allows.
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "alice", "resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "default"}}});
    let answer: serde_json::Value = serde_json::from_str(&k.kubectl_in(&["create", "-f", "-", "-o", "json"], &review.to_string())).unwrap();
    assert_eq!(answer["status"]["allowed"], true, "{answer}");
    assert_eq!(answer["status"]["reason"], "RBAC: allowed by RoleBinding \"alice-reads/default\" of Role \"pod-reader\" to User \"alice\"");
    // A namespace's review asks about that namespace only.
    let local = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview", "metadata": {"namespace": "kube-system"},
        "spec": {"user": "alice", "resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "default"}}});
    let out = k.kubectl_with_input(&["create", "-f", "-"], &local.to_string());
    assert!(stderr(&out).contains("spec.resourceAttributes.namespace: Invalid value: \"default\": must match metadata.namespace"), "{}", stderr(&out));

    // Without its binding, the grant is gone.
    k.ok(&["delete", "rolebinding", "alice-reads"]);
    assert!(eventually(Duration::from_secs(10), || !alice(&["get", "pods"]).status.success()));
    assert_eq!(can(&["list", "pods"]), "no");

    // `view` holds what the roles labelled for it grant (kapi aggregates it as kube's
    // controller does), so binding it grants reading, and not writing.
    k.ok(&["create", "rolebinding", "alice-views", "--clusterrole=view", "--user=alice"]);
    assert!(eventually(Duration::from_secs(10), || alice(&["get", "configmaps"]).status.success()));
    assert_eq!(can(&["create", "configmaps"]), "no");
    let ready = k.ok(&["get", "--raw", "/readyz?verbose"]);
    assert!(ready.contains("[+]poststarthook/rbac/bootstrap-roles ok"), "{ready}");

    // `kubectl auth reconcile` creates what is missing and adds rules and subjects to what
    // exists, as kube's reconciliation does.
    let rbac = "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: lister, namespace: default}\n\
        rules: [{apiGroups: [''], resources: [secrets], verbs: [list]}]\n---\n\
        apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: alice-lists, namespace: default}\n\
        roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: lister}\nsubjects: [{kind: User, name: alice, apiGroup: rbac.authorization.k8s.io}]\n";
    let out = k.kubectl_in(&["auth", "reconcile", "-f", "-"], rbac);
    assert!(out.contains("role.rbac.authorization.k8s.io/lister reconciled"), "{out}");
    assert!(eventually(Duration::from_secs(10), || alice(&["get", "secrets"]).status.success()));
    let more = rbac.replace("verbs: [list]", "verbs: [get]");
    k.kubectl_in(&["auth", "reconcile", "-f", "-"], &more);
    let rules = k.json(&["get", "role", "lister"])["rules"].clone();
    assert_eq!(
        rules,
        json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}, {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}])
    );
}

#[test]
fn impersonation_acts_as_whom_the_requester_may_impersonate() {
    let dir = tempfile::tempdir().unwrap();
    let (k, config) = kapi_knowing_alice(dir.path());
    let alice = |args: &[&str]| Command::new("kubectl").args(args).env("KUBECONFIG", &config).output().expect("kubectl runs");

    // The admin (system:masters) may act as anyone, and then holds only what they hold.
    let out = k.kubectl(&["--as=bob", "get", "pods"]);
    assert!(
        stderr(&out).contains("pods is forbidden: User \"bob\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""),
        "{}",
        stderr(&out)
    );
    let who = k.json(&["--as=bob", "--as-group=devs", "--as-uid=42", "auth", "whoami"]);
    assert_eq!(who["status"]["userInfo"], json!({"username": "bob", "uid": "42", "groups": ["devs", "system:authenticated"]}));
    // A service account's user name gets its groups.
    let who = k.json(&["--as=system:serviceaccount:default:robot", "auth", "whoami"]);
    assert_eq!(who["status"]["userInfo"]["groups"], json!(["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]));

    // Anyone else needs `impersonate` on each user, group and uid it names.
    let out = alice(&["--as=bob", "get", "pods"]);
    assert!(
        stderr(&out).contains("users \"bob\" is forbidden: User \"alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"),
        "{}",
        stderr(&out)
    );
    k.ok(&["create", "clusterrole", "impersonate-bob", "--verb=impersonate", "--resource=users", "--resource-name=bob"]);
    k.ok(&["create", "clusterrolebinding", "alice-as-bob", "--clusterrole=impersonate-bob", "--user=alice"]);
    assert!(eventually(Duration::from_secs(10), || alice(&["--as=bob", "auth", "whoami"]).status.success()));
    let out = alice(&["--as=bob", "--as-group=system:masters", "get", "pods"]);
    assert!(stderr(&out).contains("groups \"system:masters\" is forbidden: User \"alice\" cannot impersonate resource \"groups\""), "{}", stderr(&out));

    // Groups without a user: kube's plain-text internal error.
    let (code, body) = k.http(&["-H", "Impersonate-Group: devs"], "/api/v1/namespaces");
    assert_eq!((code, body.as_str()), (500, "Internal Server Error: \"/api/v1/namespaces\": requested [{Group  devs    }] without impersonating a user\n"));
}

/// curl with the server's CA only: no client certificate; `args` add headers.
fn anonymous_curl(k: &Kapi, args: &[&str], path: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sS", "--cacert", k.data_dir().join("pki/ca.crt").to_str().unwrap(), "-w", "\n%{http_code}"])
        .args(args)
        .arg(k.url(path))
        .output()
        .expect("curl runs");
    kapi_tests::status_and_body(&out)
}

#[test]
fn anonymous_requests_get_what_kubes_policy_gives_the_unauthenticated() {
    let k = Kapi::start_with(&["--authorization-mode", "RBAC"]);
    assert_eq!(anonymous_curl(&k, &[], "/version").0, 200, "system:public-info-viewer");
    assert_eq!(anonymous_curl(&k, &[], "/readyz").0, 200);
    let (code, body) = anonymous_curl(&k, &[], "/api/v1/namespaces");
    assert_eq!(code, 403);
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        status["message"],
        "namespaces is forbidden: User \"system:anonymous\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
    );
    // A credential that is not recognized is never anonymous.
    assert_eq!(anonymous_curl(&k, &["-H", "Authorization: Bearer nope"], "/version").0, 401);
    drop(k);

    let k = Kapi::start_with(&["--authorization-mode", "RBAC", "--anonymous-auth=false"]);
    assert_eq!(anonymous_curl(&k, &[], "/version").0, 401);
    drop(k);
    // kube turns anonymous requests off where AlwaysAllow authorizes.
    let k = Kapi::start_with(&["--authorization-mode", "RBAC,AlwaysAllow"]);
    assert_eq!(anonymous_curl(&k, &[], "/version").0, 401);
}

#[test]
fn service_account_tokens_authenticate_and_rbac_authorizes_them() {
    let k = Kapi::start_with(&["--authorization-mode", "RBAC"]);
    k.ok(&["create", "serviceaccount", "robot"]);
    let bound = k.ok(&["create", "token", "robot", "--duration=1h"]).trim().to_string();
    let with_token = |token: &str, args: &[&str]| k.kubectl_with_token(token, args);
    let as_robot = |args: &[&str]| with_token(&bound, args);
    let who: serde_json::Value = serde_json::from_slice(&as_robot(&["auth", "whoami", "-o", "json"]).stdout).unwrap();
    assert_eq!(who["status"]["userInfo"]["username"], "system:serviceaccount:default:robot");
    let out = as_robot(&["get", "pods"]);
    assert!(stderr(&out).contains("User \"system:serviceaccount:default:robot\" cannot list resource \"pods\""), "{}", stderr(&out));
    k.ok(&["create", "rolebinding", "robot-views", "--clusterrole=view", "--serviceaccount=default:robot"]);
    assert!(eventually(Duration::from_secs(10), || as_robot(&["get", "pods"]).status.success()));
    // The discovery of its issuer is the service accounts' to read.
    let config: serde_json::Value = serde_json::from_slice(&as_robot(&["get", "--raw", "/.well-known/openid-configuration"]).stdout).unwrap();
    assert_eq!(config["issuer"], "https://kubernetes.default.svc.cluster.local");

    // A legacy token: a Secret that names the account gets it from the tokens controller.
    let secret = r#"{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
        "metadata": {"name": "robot-token", "annotations": {"kubernetes.io/service-account.name": "robot"}}}"#;
    k.kubectl_in(&["apply", "-f", "-"], secret);
    let mut legacy = String::new();
    assert!(eventually(Duration::from_secs(10), || {
        legacy = k.ok(&["get", "secret", "robot-token", "-o", "jsonpath={.data.token}"]);
        !legacy.is_empty()
    }));
    let legacy = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(legacy.trim()).unwrap()).unwrap();
    assert!(with_token(&legacy, &["get", "pods"]).status.success(), "a legacy token is the account's too");
    let label = "jsonpath={.metadata.labels.kubernetes\\.io/legacy-token-last-used}";
    assert!(
        eventually(Duration::from_secs(10), || k.ok(&["get", "secret", "robot-token", "-o", label]).trim().len() == "2026-01-01".len()),
        "the Secret is dated as used"
    );

    // A deleted account's tokens stop working (once the 10 s kube keeps a token's answer pass),
    // and its token Secret goes with it.
    k.ok(&["delete", "serviceaccount", "robot"]);
    assert!(eventually(Duration::from_secs(20), || stderr(&as_robot(&["get", "pods"])).contains("Unauthorized")));
    assert!(eventually(Duration::from_secs(10), || !k.kubectl(&["get", "secret", "robot-token"]).status.success()));
    assert!(eventually(Duration::from_secs(20), || stderr(&with_token(&legacy, &["get", "pods"])).contains("Unauthorized")));
}

#[test]
fn a_bootstrap_token_authenticates_with_curl_while_its_secret_vouches_for_it() {
    let k = Kapi::start_with(&["--enable-bootstrap-token-auth"]);
    k.ok(&[
        "create",
        "secret",
        "generic",
        "bootstrap-token-07401b",
        "-n",
        "kube-system",
        "--type=bootstrap.kubernetes.io/token",
        "--from-literal=token-id=07401b",
        "--from-literal=token-secret=f395accd246ae52d",
        "--from-literal=usage-bootstrap-authentication=true",
        "--from-literal=auth-extra-groups=system:bootstrappers:kubeadm:default-node-token",
    ]);
    let bearer = ["-H", "Authorization: Bearer 07401b.f395accd246ae52d"];
    let review = ["-X", "POST", "-H", "Content-Type: application/json", "-d", r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#];
    let args: Vec<&str> = bearer.iter().chain(review.iter()).copied().collect();
    let (code, body) = anonymous_curl(&k, &args, "/apis/authentication.k8s.io/v1/selfsubjectreviews");
    assert_eq!(code, 201, "{body}");
    let who: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(who["status"]["userInfo"]["username"], "system:bootstrap:07401b");
    assert_eq!(
        who["status"]["userInfo"]["groups"],
        serde_json::json!(["system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token", "system:authenticated"])
    );
    // Under the default Node,RBAC, the bootstrap policy gives bootstrappers nothing more.
    let (code, _) = anonymous_curl(&k, &bearer, "/api/v1/namespaces");
    assert_eq!(code, 403);
    k.ok(&["delete", "secret", "bootstrap-token-07401b", "-n", "kube-system"]);
    assert!(eventually(Duration::from_secs(20), || anonymous_curl(&k, &args, "/apis/authentication.k8s.io/v1/selfsubjectreviews").0 == 401));
}

#[test]
fn a_kubelet_reads_what_its_pods_need_under_the_default_node_and_rbac() {
    let k = Kapi::start();
    let dir = tempfile::tempdir().unwrap();
    // The kubelet of n1: a client certificate from the cluster's CA, as kubeadm gives one.
    let pki = k.data_dir().join("pki");
    let openssl = |args: &[&str]| assert!(Command::new("openssl").args(args).current_dir(dir.path()).status().unwrap().success());
    openssl(&[
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-subj",
        "/O=system:nodes/CN=system:node:n1",
        "-keyout",
        "n1.key",
        "-out",
        "n1.csr",
    ]);
    let (ca, ca_key) = (pki.join("ca.crt"), pki.join("ca.key"));
    std::fs::write(dir.path().join("n1.ext"), "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n").unwrap();
    let (ca_path, ca_key_path) = (ca.to_str().unwrap(), ca_key.to_str().unwrap());
    openssl(&["x509", "-req", "-in", "n1.csr", "-CA", ca_path, "-CAkey", ca_key_path, "-CAcreateserial", "-days", "1", "-extfile", "n1.ext", "-out", "n1.crt"]);
    let kubelet = |args: &[&str]| {
        let (crt, key) = (dir.path().join("n1.crt"), dir.path().join("n1.key"));
        let server = k.url("");
        let mut a = vec!["--kubeconfig=/dev/null", "--server", &server, "--certificate-authority", ca.to_str().unwrap()];
        let (crt, key) = (format!("--client-certificate={}", crt.display()), format!("--client-key={}", key.display()));
        a.extend([crt.as_str(), key.as_str()]);
        a.extend_from_slice(args);
        Command::new("kubectl").args(&a).output().expect("kubectl runs")
    };
    k.ok(&["create", "secret", "generic", "app", "--from-literal=k=v"]);
    k.ok(&["create", "secret", "generic", "other", "--from-literal=k=v"]);
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}], "volumes": [{"name": "s", "secret": {"secretName": "app"}}]}});
    k.kubectl_in(&["create", "-f", "-"], &pod.to_string());

    let who = kubelet(&["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"]);
    assert_eq!(String::from_utf8_lossy(&who.stdout), "system:node:n1", "{}", stderr(&who));
    assert!(eventually(Duration::from_secs(10), || kubelet(&["get", "secret", "app"]).status.success()), "its pod's secret");
    let out = kubelet(&["get", "secret", "other"]);
    assert!(
        stderr(&out).contains("secrets \"other\" is forbidden: User \"system:node:n1\" cannot get resource \"secrets\" in API group \"\" in the namespace \"default\": no relationship found between node 'n1' and this object"),
        "{}",
        stderr(&out)
    );
    assert!(kubelet(&["get", "pods", "-A", "--field-selector", "spec.nodeName=n1"]).status.success());
    let out = kubelet(&["get", "pods", "-A"]);
    assert!(stderr(&out).contains("can only list/watch pods with spec.nodeName field selector"), "{}", stderr(&out));
    // Its pod gone, so is its access.
    k.ok(&["delete", "pod", "web", "--grace-period=0", "--force"]);
    assert!(eventually(Duration::from_secs(10), || !kubelet(&["get", "secret", "app"]).status.success()));
}
