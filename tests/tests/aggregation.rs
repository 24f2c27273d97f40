//! A kapi in front of another: the second is an extension API server for a group the first
//! does not serve (its custom resources), reached through an APIService and an ExternalName
//! Service, authenticating the first's front-proxy certificate and the user it names in
//! `X-Remote-*` headers.

use std::time::Duration;

use base64::Engine;
use kapi_tests::{Kapi, Running, eventually};
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

/// An extension server (Python's, behind TLS) that takes only the front server's proxy
/// certificate, serves the discovery of `example.com/v1` (`shells` and their `exec`), and
/// answers a request to switch protocols at `.../exec` with a 101 (naming the user the front
/// server sent), then writes back in upper case what it reads; at `.../refuse` with a 403, at
/// `.../plain` with a 200.
const SWITCHING_SERVER: &str = r#"
import http.server, json, ssl, sys
port, cert, key, client_ca = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
class Ext(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if "upgrade" in self.headers.get("Connection", "").lower():
            return self.switch()
        if self.path == "/apis/example.com/v1":
            resources = [{"name": "shells", "singularName": "shell", "namespaced": True, "kind": "Shell", "verbs": ["get"]},
                {"name": "shells/exec", "singularName": "", "namespaced": True, "kind": "Shell", "verbs": ["get"]}]
            return self.reply(200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "example.com/v1", "resources": resources})
        self.reply(404, {"kind": "Status", "code": 404})
    def reply(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def switch(self):
        if self.path.endswith("/refuse"):
            return self.reply(403, {"kind": "Status", "code": 403, "message": "no shells for you"})
        if self.path.endswith("/plain"):
            return self.reply(200, {})
        head = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\nX-Echo-User: %s\r\n\r\n"
        self.wfile.write((head % (self.headers["Upgrade"], self.headers["X-Remote-User"])).encode())
        while True:
            data = self.rfile.read1(4096)
            if not data:
                break
            self.wfile.write(data.upper())
        self.close_connection = True
    def log_message(self, *args):
        pass
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ctx.verify_mode = ssl.CERT_REQUIRED
ctx.load_verify_locations(client_ca)
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Ext)
server.socket = ctx.wrap_socket(server.socket, server_side=True)
server.serve_forever()
"#;

/// A client that asks kapi at `port` to switch protocols at `path` (HTTP/1.1, the admin's
/// certificate), prints the answer's head and body, and after a 101 writes `hello` and prints
/// what comes back.
const SWITCHING_CLIENT: &str = r#"
import socket, ssl, sys
port, ca, cert, key, path = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
ctx = ssl.create_default_context(cafile=ca)
ctx.load_cert_chain(cert, key)
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="127.0.0.1")
s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: kapi-echo\r\n\r\n" % path).encode())
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(4096)
head, _, rest = buf.partition(b"\r\n\r\n")
lines = head.decode().split("\r\n")
fields = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:]}
print(lines[0])
for name in ("upgrade", "x-echo-user"):
    print("%s: %s" % (name, fields.get(name, "")))
if lines[0].startswith("HTTP/1.1 101"):
    s.sendall(b"hello")
    want = 5
else:
    want = int(fields.get("content-length", "0"))
while len(rest) < want:
    rest += s.recv(4096)
print(rest.decode())
"#;

#[test]
fn a_request_to_switch_protocols_is_joined_to_the_extension_servers_connection() {
    let front = Kapi::start();
    let dir = tempfile::tempdir().unwrap();
    kapi_tests::openssl_pki(dir.path(), &[("ext", "subjectAltName=DNS:ext.default.svc\nbasicConstraints=CA:FALSE")]);
    std::fs::write(dir.path().join("ext.py"), SWITCHING_SERVER).unwrap();
    std::fs::write(dir.path().join("client.py"), SWITCHING_CLIENT).unwrap();
    let port = kapi_tests::free_port();
    let proxy_ca = front.data_dir().join("pki/front-proxy-ca.crt");
    let _server = Running(
        std::process::Command::new("python3")
            .args(["ext.py", &port.to_string(), "ext.crt", "ext.key", proxy_ca.to_str().unwrap()])
            .current_dir(dir.path())
            .spawn()
            .expect("python3 runs"),
    );
    assert!(eventually(Duration::from_secs(10), || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()), "the extension server listens");
    apply(
        &front,
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ext", "namespace": "default"}, "spec": {"type": "ExternalName", "externalName": "localhost"}}),
    );
    let bundle = base64::engine::general_purpose::STANDARD.encode(std::fs::read(dir.path().join("ca.crt")).unwrap());
    apply(&front, &api_service(port, json!({"caBundle": bundle})));
    assert!(eventually(Duration::from_secs(20), || available(&front).starts_with("True Passed")), "{}", available(&front));

    let pki = front.data_dir().join("pki");
    let switch = |name: &str| {
        let path = format!("/apis/example.com/v1/namespaces/default/shells/s1/{name}");
        let (ca, cert, key) = (pki.join("ca.crt"), pki.join("admin.crt"), pki.join("admin.key"));
        let args = ["client.py", &front.port.to_string(), ca.to_str().unwrap(), cert.to_str().unwrap(), key.to_str().unwrap(), &path];
        let out = std::process::Command::new("python3").args(args).current_dir(dir.path()).output().expect("python3 runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    // The 101 comes through with the extension server's headers (it saw who the client is),
    // then the two connections are one: what the client writes comes back from the server.
    let joined = switch("exec");
    let lines: Vec<&str> = joined.lines().collect();
    assert_eq!(lines[..2], ["HTTP/1.1 101 Switching Protocols", "upgrade: kapi-echo"], "{joined}");
    assert!(lines[2].starts_with("x-echo-user: ") && lines[2].len() > "x-echo-user: ".len(), "{joined}");
    assert_eq!(lines[3], "HELLO", "{joined}");
    // An error is the extension server's; any other answer is kube's 503.
    let refused = switch("refuse");
    assert!(refused.starts_with("HTTP/1.1 403 Forbidden\n") && refused.contains("no shells for you"), "{refused}");
    let plain = switch("plain");
    assert!(plain.starts_with("HTTP/1.1 503 Service Unavailable\n") && plain.ends_with("invalid upgrade response: status code 200\n\n"), "{plain}");
}
