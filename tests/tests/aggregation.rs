//! A kapi in front of another: the second is an extension API server for a group the first
//! does not serve (its custom resources), reached through an APIService and an ExternalName
//! Service, authenticating the first's front-proxy certificate and the user it names in
//! `X-Remote-*` headers.

use std::time::Duration;

use base64::Engine;
use kapi_tests::{Kapi, eventually};
use serde_json::{Value, json};

const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

fn apply(k: &Kapi, object: &Value) {
    k.kubectl_in(&["apply", "-f", "-"], &object.to_string());
}

fn api_service(port: u16, tls: Value) -> Value {
    let mut spec = json!({"group": "example.com", "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15,
        "service": {"namespace": "default", "name": "ext", "port": port}});
    spec.as_object_mut().unwrap().extend(tls.as_object().unwrap().clone());
    json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1.example.com"}, "spec": spec})
}

fn available(front: &Kapi) -> String {
    let a = front.json(&["get", "apiservice", "v1.example.com"]);
    let c = a["status"]["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == "Available").cloned().unwrap_or_default();
    format!("{} {} {}", c["status"].as_str().unwrap_or_default(), c["reason"].as_str().unwrap_or_default(), c["message"].as_str().unwrap_or_default())
}

#[test]
fn an_extension_server_serves_its_group_through_the_front_server() {
    let front = Kapi::start();
    let ca = front.data_dir().join("pki/front-proxy-ca.crt");
    // What an extension server reads to trust the front server's proxy.
    let trust = || front.kubectl(&["get", "configmap", "-n", "kube-system", "extension-apiserver-authentication", "-o", "json"]);
    assert!(eventually(Duration::from_secs(10), || trust().status.success()));
    let data = serde_json::from_slice::<Value>(&trust().stdout).unwrap()["data"].clone();
    assert_eq!(data["requestheader-client-ca-file"], std::fs::read_to_string(&ca).unwrap());
    assert_eq!(data["requestheader-allowed-names"], "[\"front-proxy-client\"]");
    let ext = Kapi::start_with(&["--requestheader-client-ca-file", ca.to_str().unwrap()]);
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    apply(&ext, &crd);
    ext.ok(&["wait", "--for", "condition=established", "crd/widgets.example.com"]);
    apply(&ext, &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1", "namespace": "default"}, "spec": {"size": 3}}));

    apply(
        &front,
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ext", "namespace": "default"}, "spec": {"type": "ExternalName", "externalName": "localhost"}}),
    );
    apply(&front, &api_service(ext.port, json!({"insecureSkipTLSVerify": true})));
    assert!(eventually(Duration::from_secs(20), || available(&front).starts_with("True Passed")), "{}", available(&front));
    assert!(front.ok(&["get", "apiservices"]).contains("default/ext"));

    // Reads, writes and watches of the extension server's resources, through the front one.
    let (code, body) = front.http(&[], WIDGETS);
    assert_eq!(code, 200, "{body}");
    let list: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list["items"][0]["spec"]["size"], 3);
    let w2 = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w2"}, "spec": {"size": 5}}).to_string();
    let (code, body) = front.http(&["-X", "POST", "-H", "Content-Type: application/json", "-d", &w2], WIDGETS);
    assert_eq!(code, 201, "{body}");
    assert_eq!(ext.json(&["get", "widgets.example.com", "w2"])["spec"]["size"], 5);
    let out = front.curl(&["-m", "3", &front.url(&format!("{WIDGETS}?watch=1"))]);
    let events = String::from_utf8_lossy(&out.stdout);
    assert_eq!(events.matches("\"type\":\"ADDED\"").count(), 2, "{events}");
    // kubectl finds the resource in aggregated discovery, as the check last found it.
    assert!(eventually(Duration::from_secs(10), || front.kubectl(&["get", "widgets"]).status.success()));
    assert!(front.ok(&["get", "widgets", "w2", "-o", "name"]).contains("widget.example.com/w2"));
    // kubectl explain reads the extension server's OpenAPI v3 document through the front one.
    assert!(eventually(Duration::from_secs(10), || String::from_utf8_lossy(&front.kubectl(&["explain", "widgets"]).stdout).contains("KIND:       Widget")));
    // And, for older clients, its OpenAPI v2 paths and definitions merged into the front one's
    // (kubectl's v2 explain finds no Widget without them).
    let explained = front.kubectl(&["explain", "widgets", "--output=plaintext-openapiv2"]);
    assert!(String::from_utf8_lossy(&explained.stdout).contains("KIND:     Widget"), "{}", String::from_utf8_lossy(&explained.stderr));
    // Discovery lists the group; its version's resources are the extension server's answer.
    assert!(front.ok(&["get", "--raw", "/apis"]).contains("\"name\":\"example.com\""));
    assert!(front.ok(&["get", "--raw", "/apis/example.com/v1"]).contains("\"name\":\"widgets\""));

    // A CA bundle the extension server's certificate does not match for the Service's name
    // (it is made for localhost): kube's 503 with the TLS error.
    let ext_ca = std::fs::read(ext.data_dir().join("pki/ca.crt")).unwrap();
    let bundle = base64::engine::general_purpose::STANDARD.encode(ext_ca);
    apply(&front, &api_service(ext.port, json!({"caBundle": bundle, "insecureSkipTLSVerify": false})));
    assert!(eventually(Duration::from_secs(10), || {
        let (code, body) = front.http(&[], WIDGETS);
        code == 503 && body.starts_with("error trying to reach service: tls: ")
    }));

    // The extension server stops: requests answer 503, the APIService says why.
    drop(ext);
    apply(&front, &api_service(1, json!({"insecureSkipTLSVerify": true})));
    assert!(eventually(Duration::from_secs(20), || available(&front).starts_with("False ServicePortError")
        || available(&front).starts_with("False FailedDiscoveryCheck")));
    let (code, body) = front.http(&[], WIDGETS);
    assert_eq!((code, body.as_str()), (503, "service unavailable\n"));
}
