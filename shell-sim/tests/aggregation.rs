//! APIServices backed by a Service, through the core's request pipeline with a stand-in
//! extension server: the availability controller checks it, its group is in discovery, and
//! requests for its group version are proxied with the client's identity in headers.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use jiff::SignedDuration;
use kapi_core::aggregator::{ProxyHead, ProxyRequest};
use kapi_core::controllers::Enabled;
use kapi_core::pipeline::Request;
use kapi_sim::{ADMIN_TOKEN, World, default_server, epoch};
use serde_json::{Value, json};

const API_SERVICES: &str = "/apis/apiregistration.k8s.io/v1/apiservices";
const THINGS: &str = "/apis/metrics.example.com/v1beta1/namespaces/default/things";

type Seen = Arc<Mutex<Vec<ProxyRequest>>>;

/// A world whose extension server answers every request with 200 and records it, until
/// `down` says it is unreachable.
fn world(down: Arc<Mutex<bool>>) -> (World, Seen) {
    let mut w = World::new(default_server(), epoch(), 11);
    let seen: Seen = Arc::default();
    let record = seen.clone();
    w.extension = Some(Box::new(move |req: &ProxyRequest| {
        if *down.lock().unwrap() {
            return Err("dial tcp 10.0.0.9:443: connect: connection refused".into());
        }
        record.lock().unwrap().push(req.clone());
        let head = ProxyHead { status: 200, headers: vec![("Content-Type".into(), "application/json".into()), ("Connection".into(), "keep-alive".into())] };
        if req.path_and_query == "/openapi/v3" {
            let index = json!({"paths": {"apis/metrics.example.com/v1beta1": {"serverRelativeURL": "/openapi/v3/apis/metrics.example.com/v1beta1?hash=AB12"}}});
            return Ok((head, Bytes::from(index.to_string())));
        }
        if req.path_and_query == "/openapi/v2" {
            let thing = |kind: &str| json!({"$ref": format!("#/definitions/com.example.metrics.v1beta1.{kind}")});
            let spec = json!({"swagger": "2.0", "paths": {
                    "/apis/metrics.example.com/v1beta1/namespaces/{namespace}/things": {"get": {"responses": {"200": {"schema": thing("ThingList")}}},
                        "post": {"parameters": [{"$ref": "#/parameters/body-thing"}]}},
                    "/apis/metrics.example.com/v1beta1beta/things": {"get": {}},
                    "/version/": {"get": {"description": "the extension server's own"}}},
                "definitions": {
                    "com.example.metrics.v1beta1.ThingList": {"properties": {"items": {"type": "array", "items": thing("Thing")}}},
                    "com.example.metrics.v1beta1.Thing": {"properties": {"metadata": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}}},
                    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"description": "the extension server's own"},
                    "com.example.unused.Other": {}},
                "parameters": {"body-thing": {"in": "body", "name": "body", "required": true, "schema": thing("Thing")}, "unused": {"in": "query", "name": "x"}}});
            return Ok((head, Bytes::from(spec.to_string())));
        }
        if req.path_and_query == "/apis/metrics.example.com/v1beta1" {
            let list = json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "metrics.example.com/v1beta1", "resources": [
                {"name": "things", "singularName": "thing", "namespaced": true, "kind": "Thing", "verbs": ["get", "list"], "shortNames": ["th"]},
                {"name": "things/status", "singularName": "", "namespaced": true, "kind": "Thing", "verbs": ["get"]}]});
            return Ok((head, Bytes::from(list.to_string())));
        }
        Ok((head, Bytes::from_static(b"{\"kind\":\"ThingList\"}")))
    }));
    w.start_controllers(Enabled::NONE);
    (w, seen)
}

fn post(w: &mut World, path: &str, body: Value) -> u16 {
    w.call("POST", path, "", Some(&body), "application/json").head.status
}

fn api_service() -> Value {
    json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1beta1.metrics.example.com"},
        "spec": {"group": "metrics.example.com", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
            "insecureSkipTLSVerify": true, "service": {"namespace": "default", "name": "metrics", "port": 443}}})
}

fn available(w: &mut World) -> (String, String, String) {
    let a = w.call("GET", &format!("{API_SERVICES}/v1beta1.metrics.example.com"), "", None, "").json();
    let c = a["status"]["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == "Available").cloned().unwrap_or_default();
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    (s("status"), s("reason"), s("message"))
}

/// The group's one version in aggregated discovery (`/apis`, `apidiscovery.k8s.io/v2`).
fn aggregated(w: &mut World) -> Value {
    let accept = [("Accept".to_string(), "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList".to_string())];
    let mut req = kapi_core::pipeline::Request { method: "GET".into(), path: "/apis".into(), ..Default::default() };
    req.headers = vec![("Authorization".into(), format!("Bearer {}", kapi_sim::ADMIN_TOKEN))];
    req.headers.extend(accept);
    let doc = w.request(req).json();
    let item = doc["items"].as_array().unwrap().iter().find(|i| i["metadata"]["name"] == "metrics.example.com").cloned().unwrap();
    assert_eq!(item["versions"].as_array().unwrap().len(), 1);
    item["versions"][0].clone()
}

#[test]
fn an_api_service_is_checked_and_its_group_version_proxied() {
    let down = Arc::new(Mutex::new(false));
    let (mut w, seen) = world(down.clone());
    assert_eq!(post(&mut w, API_SERVICES, api_service()), 201);
    // No Service yet: not available, and its requests answer kube's plain 503.
    assert_eq!(available(&mut w), ("False".into(), "ServiceNotFound".into(), "service/metrics in \"default\" is not present".into()));
    let r = w.call("GET", THINGS, "", None, "");
    assert_eq!((r.head.status, &r.body[..]), (503, &b"service unavailable\n"[..]));
    assert_eq!(r.head.content_type(), Some("text/plain; charset=utf-8"));
    // Its group is in discovery all the same, after the built-in and custom ones (priority 100).
    let groups = w.call("GET", "/apis", "", None, "").json();
    let names: Vec<&str> = groups["groups"].as_array().unwrap().iter().map(|g| g["name"].as_str().unwrap()).collect();
    assert_eq!(names.first(), Some(&"apiregistration.k8s.io"));
    assert_eq!(names.last(), Some(&"metrics.example.com"));
    let group = w.call("GET", "/apis/metrics.example.com", "", None, "").json();
    assert_eq!(group["preferredVersion"], json!({"groupVersion": "metrics.example.com/v1beta1", "version": "v1beta1"}));

    // An ExternalName Service that is not listening on a ClusterIP port is not checked for endpoints.
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "metrics"}, "spec": {"type": "ExternalName", "externalName": "metrics.example.net"}});
    // The Service's creation is news to the controller, which checks again at once.
    assert_eq!(post(&mut w, "/api/v1/namespaces/default/services", svc), 201);
    assert_eq!(available(&mut w), ("True".into(), "Passed".into(), "all checks passed".into()));
    let checks: Vec<String> = seen.lock().unwrap().iter().map(|r| r.path_and_query.clone()).collect();
    assert_eq!(checks[..3], ["/apis/metrics.example.com/v1beta1", "/openapi/v3", "/openapi/v2"], "the discovery answer, then the OpenAPI documents");
    let check = seen.lock().unwrap()[0].clone();
    // What the check's answer lists is in aggregated discovery, which kubectl reads.
    assert_eq!(
        aggregated(&mut w),
        json!({"version": "v1beta1", "freshness": "Current", "resources": [{"resource": "things", "responseKind": {"group": "", "version": "", "kind": "Thing"},
            "scope": "Namespaced", "singularResource": "thing", "verbs": ["get", "list"], "shortNames": ["th"],
            "subresources": [{"subresource": "status", "responseKind": {"group": "", "version": "", "kind": "Thing"}, "verbs": ["get"]}]}]})
    );
    assert_eq!(check.target.url, "https://metrics.example.net:443");
    assert_eq!(check.target.server_name, "metrics.default.svc");

    // Its OpenAPI v3 document is listed where the server says, and fetched from it.
    let index = w.call("GET", "/openapi/v3", "", None, "").json();
    assert_eq!(index["paths"]["apis/metrics.example.com/v1beta1"]["serverRelativeURL"], "/openapi/v3/apis/metrics.example.com/v1beta1?hash=AB12");
    assert!(index["paths"]["apis/apps/v1"].is_object(), "kapi's own documents are listed too");
    assert_eq!(w.call("GET", "/openapi/v3/apis/metrics.example.com/v1beta1", "hash=AB12", None, "").head.status, 200);
    assert_eq!(seen.lock().unwrap().last().unwrap().path_and_query, "/openapi/v3/apis/metrics.example.com/v1beta1?hash=AB12");
    // Its OpenAPI v2 paths of the group version, and the definitions they need, are in kapi's:
    // kapi's own of the same names kept.
    let v2 = w.call("GET", "/openapi/v2", "", None, "").json();
    assert!(v2["paths"]["/apis/metrics.example.com/v1beta1/namespaces/{namespace}/things"].is_object());
    assert!(v2["paths"].get("/apis/metrics.example.com/v1beta1beta/things").is_none(), "another group version's path is not the server's to serve");
    assert!(v2["paths"]["/version/"]["get"]["description"] != "the extension server's own");
    for kind in ["ThingList", "Thing"] {
        assert!(v2["definitions"][format!("com.example.metrics.v1beta1.{kind}")].is_object(), "{kind}");
    }
    assert!(v2["definitions"].get("com.example.unused.Other").is_none(), "a definition no path needs is left out");
    assert_eq!(v2["parameters"]["body-thing"]["in"], "body", "a shared parameter its paths refer to is in");
    assert!(v2["parameters"].get("unused").is_none());
    // Its protobuf form has them too (gnostic's `parameters` among them).
    let accept = vec![("Authorization".to_string(), format!("Bearer {ADMIN_TOKEN}")), ("Accept".into(), kapi_core::openapi::V2_PROTOBUF[0].into())];
    let protobuf = w.request(Request { method: "GET".into(), path: "/openapi/v2".into(), headers: accept, ..Default::default() });
    assert_eq!(protobuf.head.status, 200);
    for name in ["/apis/metrics.example.com/v1beta1/namespaces/{namespace}/things", "body-thing", "com.example.metrics.v1beta1.Thing"] {
        assert!(protobuf.body.windows(name.len()).any(|w| w == name.as_bytes()), "{name}");
    }
    assert_ne!(v2["definitions"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["description"], "the extension server's own");

    // Proxied: path and query as sent, the admin named in headers, the answer relayed without
    // its connection headers.
    let r = w.call("GET", THINGS, "labelSelector=a%3Db", None, "");
    assert_eq!((r.head.status, &r.body[..]), (200, &b"{\"kind\":\"ThingList\"}"[..]));
    assert!(!r.head.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("connection")));
    let sent = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(sent.path_and_query, format!("{THINGS}?labelSelector=a%3Db"));
    let header = |name: &str| sent.headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str()).collect::<Vec<_>>();
    assert_eq!(header("X-Remote-User"), ["admin"]);
    assert_eq!(header("X-Remote-Group"), ["system:masters", "system:authenticated"]);
    assert!(header("Authorization").is_empty(), "credentials are not sent on");
    // The path goes on as the client escaped it.
    assert_eq!(w.call("GET", &format!("{THINGS}/a%3Fb"), "", None, "").head.status, 200);
    assert_eq!(seen.lock().unwrap().last().unwrap().path_and_query, format!("{THINGS}/a%3Fb"));

    // The server goes away: requests answer kube's 503, and the next check says why.
    *down.lock().unwrap() = true;
    let r = w.call("GET", THINGS, "", None, "");
    assert_eq!((r.head.status, &r.body[..]), (503, &b"error trying to reach service: dial tcp 10.0.0.9:443: connect: connection refused\n"[..]));
    w.advance(SignedDuration::from_secs(31));
    let url = "https://metrics.example.net:443/apis/metrics.example.com/v1beta1";
    assert_eq!(
        available(&mut w),
        (
            "False".into(),
            "FailedDiscoveryCheck".into(),
            format!("failing or missing response from {url}: Get {url:?}: dial tcp 10.0.0.9:443: connect: connection refused")
        )
    );
    assert_eq!(w.call("GET", THINGS, "", None, "").head.status, 503);
    assert_eq!(aggregated(&mut w), json!({"version": "v1beta1", "freshness": "Stale"}));

    // Deleted: its group version is nobody's.
    assert_eq!(w.call("DELETE", &format!("{API_SERVICES}/v1beta1.metrics.example.com"), "", None, "").head.status, 200);
    assert_eq!(w.call("GET", THINGS, "", None, "").head.status, 404);
}

#[test]
fn a_cluster_ip_service_needs_the_port_and_endpoints() {
    let (mut w, _) = world(Arc::new(Mutex::new(false)));
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "metrics"}, "spec": {"ports": [{"name": "https", "port": 8443}]}});
    assert_eq!(post(&mut w, "/api/v1/namespaces/default/services", svc), 201);
    assert_eq!(post(&mut w, API_SERVICES, api_service()), 201);
    assert_eq!(available(&mut w), ("False".into(), "ServicePortError".into(), "service/metrics in \"default\" is not listening on port 443".into()));
    let mut a = w.call("GET", &format!("{API_SERVICES}/v1beta1.metrics.example.com"), "", None, "").json();
    a["spec"]["service"]["port"] = json!(8443);
    assert_eq!(w.call("PUT", &format!("{API_SERVICES}/v1beta1.metrics.example.com"), "", Some(&a), "application/json").head.status, 200);
    assert_eq!(available(&mut w), ("False".into(), "EndpointsNotFound".into(), "cannot find endpoints for service/metrics in \"default\"".into()));
    let ep = json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "metrics"},
        "subsets": [{"addresses": [{"ip": "10.1.0.5"}], "ports": [{"name": "http", "port": 8443}]}]});
    assert_eq!(post(&mut w, "/api/v1/namespaces/default/endpoints", ep), 201);
    assert_eq!(
        available(&mut w),
        ("False".into(), "MissingEndpoints".into(), "endpoints for service/metrics in \"default\" have no addresses with port name \"https\"".into())
    );
}

#[test]
fn no_api_service_takes_over_the_aggregators_own_group() {
    let (mut w, seen) = world(Arc::new(Mutex::new(false)));
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "metrics"}, "spec": {"type": "ExternalName", "externalName": "metrics.example.net"}});
    assert_eq!(post(&mut w, "/api/v1/namespaces/default/services", svc), 201);
    let mut hijack = api_service();
    hijack["metadata"]["name"] = json!("v1.apiregistration.k8s.io");
    hijack["spec"]["group"] = json!("apiregistration.k8s.io");
    hijack["spec"]["version"] = json!("v1");
    assert_eq!(post(&mut w, API_SERVICES, hijack), 201);
    w.advance(SignedDuration::from_secs(31));
    let r = w.call("GET", API_SERVICES, "", None, "");
    assert_eq!(r.head.status, 200);
    assert_eq!(r.json()["kind"], "APIServiceList");
    assert!(seen.lock().unwrap().iter().all(|req| !req.path_and_query.starts_with(API_SERVICES)));
    // Nor the core group, which is never listed among the named groups.
    let mut core = w.call("GET", &format!("{API_SERVICES}/v1."), "", None, "").json();
    core["spec"]["service"] = json!({"namespace": "default", "name": "metrics", "port": 443});
    core["spec"]["insecureSkipTLSVerify"] = json!(true);
    assert_eq!(w.call("PUT", &format!("{API_SERVICES}/v1."), "", Some(&core), "application/json").head.status, 200);
    let groups = w.call("GET", "/apis", "", None, "").json();
    assert!(groups["groups"].as_array().unwrap().iter().all(|g| g["name"] != ""), "{groups}");
    assert_eq!(w.call("GET", "/api/v1/namespaces", "", None, "").head.status, 200);
}

#[test]
fn extension_servers_learn_whom_to_trust_from_a_configmap() {
    use kapi_core::auth::RequestHeader;
    use kapi_core::controllers::AuthenticationTrust;
    let cert = |cn: &str| {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, cn);
        params.self_signed(&key).unwrap().pem()
    };
    let (client_ca, proxy_ca) = (cert("client-ca"), cert("front-proxy-ca"));
    let rh = RequestHeader {
        allowed_names: vec!["front-proxy-client".into()],
        username_headers: vec!["X-Remote-User".into()],
        uid_headers: vec![],
        group_headers: vec!["X-Remote-Group".into()],
        extra_prefixes: vec!["X-Remote-Extra-".into()],
    };
    let mut w = World::new(default_server(), epoch(), 3);
    w.start_controllers(Enabled::NONE);
    w.publish_authentication_trust(AuthenticationTrust { client_ca: client_ca.clone(), request_header: Some((proxy_ca.clone(), rh)) });
    const CM: &str = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication";
    let data = w.call("GET", CM, "", None, "").json()["data"].clone();
    assert_eq!(data["client-ca-file"], client_ca.replace("\r\n", "\n"));
    assert_eq!(data["requestheader-client-ca-file"], proxy_ca.replace("\r\n", "\n"));
    assert_eq!(data["requestheader-allowed-names"], "[\"front-proxy-client\"]");
    assert_eq!(data["requestheader-username-headers"], "[\"X-Remote-User\"]");
    assert_eq!(data["requestheader-uid-headers"], "[]");
    assert_eq!(data["requestheader-extra-headers-prefix"], "[\"X-Remote-Extra-\"]");

    // Another server's names and CAs stay; this server's are added where missing.
    let mut cm = w.call("GET", CM, "", None, "").json();
    let other = cert("other-ca");
    cm["data"]["requestheader-allowed-names"] = json!("[\"aggregator\"]");
    cm["data"]["client-ca-file"] = json!(other.clone());
    assert_eq!(w.call("PUT", CM, "", Some(&cm), "application/json").head.status, 200);
    w.advance(SignedDuration::from_secs(61));
    let data = w.call("GET", CM, "", None, "").json()["data"].clone();
    assert_eq!(data["requestheader-allowed-names"], "[\"aggregator\",\"front-proxy-client\"]");
    assert_eq!(data["client-ca-file"], format!("{}{}", other.replace("\r\n", "\n"), client_ca.replace("\r\n", "\n")));

    // Deleted, it comes back.
    assert_eq!(w.call("DELETE", CM, "", None, "").head.status, 200);
    w.advance(SignedDuration::from_secs(61));
    assert_eq!(w.call("GET", CM, "", None, "").head.status, 200);
}

/// An extension server whose answers flap (up, down, up, ...) is checked when its APIService
/// comes and every 30 seconds, not again after each status the controller writes itself:
/// found by the fuzz target `aggregation`, where such a server kept the controller probing it
/// in a loop.
#[test]
fn a_flapping_extension_server_is_not_probed_in_a_loop() {
    let mut w = World::new(default_server(), epoch(), 11);
    let calls = Arc::new(Mutex::new(0u32));
    let counted = calls.clone();
    w.extension = Some(Box::new(move |req: &ProxyRequest| {
        let mut n = counted.lock().unwrap();
        // Each check's discovery request meets the other answer than the check before.
        if req.path_and_query == "/apis/metrics.example.com/v1beta1" {
            *n += 1;
            if n.is_multiple_of(2) {
                return Err("dial tcp 10.0.0.9:443: connect: connection refused".into());
            }
        }
        let head = ProxyHead { status: 200, headers: vec![("Content-Type".into(), "application/json".into())] };
        Ok((head, Bytes::from_static(b"{\"kind\":\"APIResourceList\",\"resources\":[]}")))
    }));
    w.start_controllers(Enabled::NONE);
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "metrics"}, "spec": {"type": "ExternalName", "externalName": "metrics.example.net"}});
    assert_eq!(post(&mut w, "/api/v1/namespaces/default/services", svc), 201);
    assert_eq!(post(&mut w, API_SERVICES, api_service()), 201);
    w.advance(SignedDuration::from_secs(120));
    let checks = *calls.lock().unwrap();
    assert!((2..=20).contains(&checks), "{checks} checks in two minutes");
}
