//! Admission webhooks against a real HTTPS webhook server the test starts (Python's HTTP
//! server behind TLS, its certificate signed by the CA the configurations' `caBundle` holds),
//! driven with kubectl: a mutating webhook's JSON patch lands in what is stored, a validating
//! webhook's refusal and warnings reach kubectl in kube's words, validating webhooks are asked
//! at once, a webhook named by a Service is found through it, and one that does not answer
//! in time, or at all, fails the write as kube fails it.

use std::path::Path;
use std::time::Duration;

use base64::Engine;
use kapi_tests::{Kapi, Running, eventually, free_port, openssl_pki, python_webhook};
use serde_json::{Value, json};

/// The webhooks, by path: `/label` adds the label `mutated=yes`; `/deny` refuses what is
/// labelled `deny=yes` (403), warning either way; `/slow` waits until `/fast` has been asked
/// and refuses if it never is; `/sleepy` answers after 3 s. Each review is logged.
const WEBHOOK: &str = r#"
import base64, json, threading, time
fast_asked = threading.Event()
def answer(h, review):
    req = review["request"]
    path = h.path.split("?")[0]
    with open("reviews.log", "a") as f:
        f.write("%s %s %s %s\n" % (h.path, req["operation"], req.get("name", ""), h.headers["Content-Type"]))
    resp = {"uid": req["uid"], "allowed": True}
    labels = ((req.get("object") or {}).get("metadata") or {}).get("labels") or {}
    if path == "/label":
        ops = [{"op": "add", "path": "/metadata/labels", "value": {}}] if not labels else []
        ops.append({"op": "add", "path": "/metadata/labels/mutated", "value": "yes"})
        resp["patchType"] = "JSONPatch"
        resp["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
    elif path == "/deny":
        resp["warnings"] = ["deny.example.com looked at " + req.get("name", "")]
        if labels.get("deny") == "yes":
            resp["allowed"] = False
            resp["status"] = {"code": 403, "reason": "Forbidden", "message": "objects labelled deny=yes are refused"}
    elif path == "/slow":
        if not fast_asked.wait(20):
            resp["allowed"] = False
            resp["status"] = {"message": "the validating webhooks were asked one after the other"}
    elif path == "/fast":
        fast_asked.set()
    elif path == "/sleepy":
        time.sleep(3)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp}
"#;

fn webhook(dir: &Path, port: u16) -> Running {
    openssl_pki(dir, &[("hook", "subjectAltName=IP:127.0.0.1,DNS:hooks.default.svc\nbasicConstraints=CA:FALSE")]);
    python_webhook(dir, port, WEBHOOK, false)
}

/// One webhook of `name` at `path` for configmaps labelled `on=<selects>`.
fn hook(name: &str, client: Value, selects: &str, extra: Value) -> Value {
    let mut h = json!({
        "name": name, "clientConfig": client, "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "objectSelector": {"matchLabels": {"on": selects}},
        "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
    });
    for (k, v) in extra.as_object().unwrap() {
        h[k] = v.clone();
    }
    h
}

fn configuration(kind: &str, name: &str, hooks: Vec<Value>) -> String {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "webhooks": hooks}).to_string()
}

#[test]
fn webhooks_patch_refuse_and_fail_writes_as_kubes_do() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let server = webhook(dir.path(), port);
    let k = Kapi::start();
    let ca = base64::engine::general_purpose::STANDARD.encode(std::fs::read(dir.path().join("ca.crt")).unwrap());
    let url = |path: &str| json!({"url": format!("https://127.0.0.1:{port}{path}"), "caBundle": ca});
    // The mutating webhook is found through a Service (an ExternalName for the test's loopback
    // server, checked as hooks.default.svc).
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hooks", "namespace": "default"},
        "spec": {"type": "ExternalName", "externalName": "127.0.0.1"}});
    k.kubectl_in(&["apply", "-f", "-"], &service.to_string());
    let by_service = json!({"service": {"name": "hooks", "namespace": "default", "path": "/label", "port": port}, "caBundle": ca});
    k.kubectl_in(
        &["apply", "-f", "-"],
        &configuration("MutatingWebhookConfiguration", "labeller", vec![hook("label.example.com", by_service, "yes", json!({}))]),
    );
    let validating = vec![
        hook("deny.example.com", url("/deny"), "yes", json!({})),
        hook("slow.example.com", url("/slow"), "parallel", json!({"timeoutSeconds": 30})),
        hook("fast.example.com", url("/fast"), "parallel", json!({})),
        hook("sleepy.example.com", url("/sleepy"), "sleepy", json!({"timeoutSeconds": 1})),
        hook("ignored.example.com", url("/sleepy"), "ignored", json!({"timeoutSeconds": 1, "failurePolicy": "Ignore"})),
    ];
    k.kubectl_in(&["apply", "-f", "-"], &configuration("ValidatingWebhookConfiguration", "checks", validating));

    // Once the configurations are taken in, a create is patched; what is stored has the label.
    let created = eventually(Duration::from_secs(10), || {
        let _ = k.kubectl_with_input(&["delete", "configmap", "first", "--ignore-not-found"], "");
        k.ok(&["create", "configmap", "first", "--from-literal=k=v"]);
        k.ok(&["label", "configmap", "first", "on=yes", "--overwrite"]);
        k.json(&["get", "configmap", "first"])["metadata"]["labels"]["mutated"] == "yes"
    });
    assert!(created, "the mutating webhook labels the configmap");
    let reviews = std::fs::read_to_string(dir.path().join("reviews.log")).unwrap();
    assert!(reviews.lines().any(|l| l == "/label?timeout=10s UPDATE first application/json"), "{reviews}");

    // A refusal in the webhook's words, its warning shown by kubectl.
    let denied =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "denied", "namespace": "default", "labels": {"on": "yes", "deny": "yes"}}});
    let out = k.kubectl_with_input(&["create", "-f", "-"], &denied.to_string());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("admission webhook \"deny.example.com\" denied the request: objects labelled deny=yes are refused"), "{err}");
    assert!(err.contains("Warning: deny.example.com looked at denied"), "{err}");
    assert!(k.fails(&["get", "configmap", "denied"]).contains("NotFound"));

    // The validating webhooks are asked at once: /slow answers only once /fast was asked.
    let parallel = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "parallel", "namespace": "default", "labels": {"on": "parallel"}}});
    k.kubectl_in(&["create", "-f", "-"], &parallel.to_string());

    // A webhook that does not answer within its timeout fails the write (failurePolicy Fail)
    // or is passed over (Ignore).
    let sleepy = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "sleepy", "namespace": "default", "labels": {"on": "sleepy"}}});
    let out = k.kubectl_with_input(&["create", "-f", "-"], &sleepy.to_string());
    let err = String::from_utf8_lossy(&out.stderr);
    let expected = format!(
        "Internal error occurred: failed calling webhook \"sleepy.example.com\": failed to call webhook: Post \"https://127.0.0.1:{port}/sleepy?timeout=1s\": context deadline exceeded"
    );
    assert!(!out.status.success() && err.contains(&expected), "{err}");
    let ignored = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ignored", "namespace": "default", "labels": {"on": "ignored"}}});
    k.kubectl_in(&["create", "-f", "-"], &ignored.to_string());

    // With the server gone, a Fail webhook refuses every write it is asked about.
    drop(server);
    let out = k.kubectl_with_input(&["label", "configmap", "first", "again=yes"], "");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("failed calling webhook \"label.example.com\"") && err.contains("connection refused"), "{err}");
    assert!(k.json(&["get", "configmap", "first"])["metadata"]["labels"].get("again").is_none());
    // Deleting the configurations is never sent to a webhook.
    k.ok(&["delete", "mutatingwebhookconfiguration", "labeller"]);
    k.ok(&["delete", "validatingwebhookconfiguration", "checks"]);
}
