//! A CRD with two versions converted by a real HTTPS conversion webhook the test starts (Python's
//! HTTP server behind TLS, its certificate signed by a CA the CRD's `caBundle` holds), driven
//! with kubectl: objects written at either version are read at both, through the webhook, and
//! a webhook that cannot be reached fails reads of the other version with kube's message.

use std::path::Path;
use std::time::Duration;

use base64::Engine;
use kapi_tests::{Kapi, Running, eventually, free_port, openssl_pki, python_webhook};
use serde_json::{Value, json};

/// The webhook: v1 calls the schedule `cron`, v2 `schedule`; every review is logged.
const WEBHOOK: &str = r#"
import json
def answer(h, review):
    req = review["request"]
    desired = req["desiredAPIVersion"]
    out = []
    for o in req["objects"]:
        o["apiVersion"] = desired
        spec = o.setdefault("spec", {})
        src, dst = ("cron", "schedule") if desired.endswith("/v2") else ("schedule", "cron")
        if src in spec:
            spec[dst] = spec.pop(src)
        out.append(o)
    with open("calls.log", "a") as f:
        f.write("%s %s %d %s\n" % (h.path, desired, len(out), h.headers["Content-Type"]))
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "response": {"uid": req["uid"], "result": {"status": "Success"}, "convertedObjects": out}}
"#;

/// The webhook server, its certificate for 127.0.0.1 signed by a CA (`ca.crt`) in `dir`,
/// running until dropped.
fn webhook(dir: &Path, port: u16) -> Running {
    openssl_pki(dir, &[("hook", "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE")]);
    python_webhook(dir, port, WEBHOOK, false)
}

fn crd(port: u16, ca: &str) -> Value {
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}});
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {"group": "stable.example.com", "scope": "Namespaced", "names": {"plural": "crontabs", "kind": "CronTab"},
            "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                "clientConfig": {"url": format!("https://127.0.0.1:{port}/convert"), "caBundle": base64::engine::general_purpose::STANDARD.encode(ca)}}},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema},
                {"name": "v2", "served": true, "storage": false, "schema": schema}]}})
}

#[test]
fn a_webhook_converts_custom_resources_between_versions() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let hook = webhook(dir.path(), port);
    let k = Kapi::start();
    let ca = std::fs::read_to_string(dir.path().join("ca.crt")).unwrap();
    k.kubectl_in(&["apply", "-f", "-"], &crd(port, &ca).to_string());
    k.ok(&["wait", "--for", "condition=established", "crd/crontabs.stable.example.com"]);

    // Written at v2, stored at v1: each version reads its own field.
    let tab = json!({"apiVersion": "stable.example.com/v2", "kind": "CronTab", "metadata": {"name": "nightly", "namespace": "default"}, "spec": {"schedule": "0 3 * * *"}});
    k.kubectl_in(&["apply", "-f", "-"], &tab.to_string());
    let v1 = k.json(&["get", "crontabs.v1.stable.example.com", "nightly"]);
    assert_eq!((v1["apiVersion"].as_str(), v1["spec"]["cron"].as_str()), (Some("stable.example.com/v1"), Some("0 3 * * *")));
    let v2 = k.json(&["get", "crontabs.v2.stable.example.com", "nightly"]);
    assert_eq!((v2["apiVersion"].as_str(), v2["spec"]["schedule"].as_str()), (Some("stable.example.com/v2"), Some("0 3 * * *")));
    // Lists at v2 (from its watch cache) and a patch at v2.
    assert!(eventually(Duration::from_secs(10), || { k.json(&["get", "crontabs.v2.stable.example.com"])["items"][0]["spec"]["schedule"] == "0 3 * * *" }));
    k.ok(&["patch", "crontabs.v2.stable.example.com", "nightly", "--type=merge", "-p", r#"{"spec":{"schedule":"0 4 * * *"}}"#]);
    assert_eq!(k.json(&["get", "crontabs.v1.stable.example.com", "nightly"])["spec"]["cron"], "0 4 * * *");

    let calls = std::fs::read_to_string(dir.path().join("calls.log")).unwrap();
    assert!(calls.lines().any(|l| l == "/convert?timeout=30s stable.example.com/v1 1 application/json"), "{calls}");
    assert!(calls.lines().any(|l| l == "/convert?timeout=30s stable.example.com/v2 1 application/json"), "{calls}");

    // A dry run goes through the webhook as a write does (to the stored version and back),
    // and stores nothing.
    let weekly = json!({"apiVersion": "stable.example.com/v2", "kind": "CronTab", "metadata": {"name": "weekly", "namespace": "default"}, "spec": {"schedule": "0 5 * * 0"}});
    let before = calls.lines().count();
    let answer: Value = serde_json::from_str(&k.kubectl_in(&["create", "--dry-run=server", "-o", "json", "-f", "-"], &weekly.to_string())).unwrap();
    assert_eq!((answer["apiVersion"].as_str(), answer["spec"]["schedule"].as_str()), (Some("stable.example.com/v2"), Some("0 5 * * 0")));
    let calls = std::fs::read_to_string(dir.path().join("calls.log")).unwrap();
    let dry: Vec<&str> = calls.lines().skip(before).map(|l| l.split(' ').nth(1).unwrap_or_default()).collect();
    assert_eq!(dry, ["stable.example.com/v1", "stable.example.com/v2"], "{calls}");
    assert!(k.fails(&["get", "crontabs.v1.stable.example.com", "weekly"]).contains("NotFound"));

    // Without the webhook, the stored version still reads; the other fails as kube fails it.
    drop(hook);
    assert_eq!(k.json(&["get", "crontabs.v1.stable.example.com", "nightly"])["spec"]["cron"], "0 4 * * *");
    let err = k.fails(&["get", "crontabs.v2.stable.example.com", "nightly"]);
    let expected = format!(
        "conversion webhook for stable.example.com/v1, Kind=CronTab failed: Post \"https://127.0.0.1:{port}/convert?timeout=30s\": dial tcp 127.0.0.1:{port}: connect: connection refused"
    );
    assert!(err.contains(&expected), "{err}");
    let out = k.kubectl_with_input(&["create", "--dry-run=server", "-f", "-"], &weekly.to_string());
    let err = String::from_utf8_lossy(&out.stderr);
    // kube names the kind of the object converted: here the one sent, at v2.
    assert!(!out.status.success() && err.contains(&expected.replace("/v1, Kind", "/v2, Kind")), "{err}");
}
