use serde_json::json;

use super::*;
use crate::auth::UserInfo;

fn api() -> ApiService {
    let obj = json!({"metadata": {"name": "v1beta1.metrics.k8s.io"},
        "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
            "service": {"namespace": "kube-system", "name": "metrics-server"}},
        "status": {"conditions": [{"type": "Available", "status": "True"}]}});
    ApiService::read(&obj).unwrap()
}

#[test]
fn requests_below_a_group_version_are_routed_to_its_api_service() {
    let a = api();
    assert_eq!((a.service.port, a.available), (443, true));
    let apis = ApiServices { by_group_version: [(("metrics.k8s.io".to_string(), "v1beta1".to_string()), a)].into() };
    assert!(apis.route("/apis/metrics.k8s.io/v1beta1").is_some());
    assert!(apis.route("/apis/metrics.k8s.io/v1beta1/nodes").is_some());
    assert!(apis.route("/apis/metrics.k8s.io").is_none());
    assert!(apis.route("/apis/metrics.k8s.io/v1").is_none());
    assert!(apis.route("/api/v1/pods").is_none());
    assert!(ApiService::read(&json!({"spec": {"group": "apps", "version": "v1"}})).is_none(), "a local APIService is the catalog's");
}

#[test]
fn services_resolve_as_kube_resolves_cluster_ips() {
    let a = api();
    let svc = |spec: serde_json::Value| json!({"spec": spec});
    assert_eq!(resolve(&a, None).unwrap_err(), "service \"metrics-server\" not found");
    assert_eq!(resolve(&a, Some(&svc(json!({"clusterIP": "None"})))).unwrap_err(), "cannot route to service with ClusterIP \"None\"");
    assert_eq!(
        resolve(&a, Some(&svc(json!({"clusterIP": "10.0.0.7", "ports": [{"port": 80}]})))).unwrap_err(),
        "no service port 443 found for service \"metrics-server\""
    );
    let t = resolve(&a, Some(&svc(json!({"clusterIP": "fd00::7", "ports": [{"port": 443}]})))).unwrap();
    assert_eq!((t.url.as_str(), t.server_name.as_str()), ("https://[fd00::7]:443", "metrics-server.kube-system.svc"));
    let t = resolve(&a, Some(&svc(json!({"type": "ExternalName", "externalName": "metrics.example.net"})))).unwrap();
    assert_eq!(t.url, "https://metrics.example.net:443");
}

#[test]
fn the_identity_goes_in_headers_and_redirects_are_refused() {
    let user = UserInfo {
        name: "alice".into(),
        uid: String::new(),
        groups: vec!["dev".into()],
        extra: [("acme.com/team".to_string(), vec!["blue".to_string()])].into(),
    };
    let incoming = vec![
        ("Accept".to_string(), "application/json".to_string()),
        ("Connection".into(), "close, X-Trace".into()),
        ("X-Trace".into(), "1".into()),
        ("X-Remote-User".into(), "mallory".into()),
        ("Impersonate-User".into(), "root".into()),
        ("X-Forwarded-For".into(), "192.0.2.1".into()),
    ];
    let out = outbound_headers(&incoming, &user, "127.0.0.1:5555", "/apis/g/v", "10.0.0.7:443");
    let names: Vec<(&str, &str)> = out.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(
        names,
        [
            ("Accept", "application/json"),
            ("X-Remote-User", "alice"),
            ("X-Remote-Group", "dev"),
            ("X-Remote-Extra-acme.com%2Fteam", "blue"),
            ("X-Forwarded-For", "192.0.2.1, 127.0.0.1"),
            ("X-Forwarded-Uri", "/apis/g/v"),
            ("X-Forwarded-Host", "10.0.0.7:443"),
            ("X-Forwarded-Proto", "https")
        ]
    );
    let (head, body) = answer_head(ProxyHead { status: 302, headers: vec![("Location".into(), "https://elsewhere/".into())] }, false);
    assert_eq!((head.status, body.as_deref()), (502, Some(&b"the backend attempted to redirect this request, which is not permitted"[..])));
    let (head, body) = answer_head(
        ProxyHead {
            status: 200,
            headers: vec![
                ("Transfer-Encoding".into(), "chunked".into()),
                ("Access-Control-Allow-Origin".into(), "*".into()),
                ("Content-Type".into(), "application/json".into()),
            ],
        },
        false,
    );
    assert_eq!((head.headers, body), (vec![("Content-Type".to_string(), "application/json".to_string())], None));
}

#[test]
fn a_request_to_switch_protocols_keeps_its_connection_headers_and_takes_only_a_101_or_an_error() {
    let user = UserInfo { name: "alice".into(), ..UserInfo::default() };
    let incoming = vec![
        ("Connection".to_string(), "Upgrade".to_string()),
        ("Upgrade".into(), "SPDY/3.1".into()),
        ("X-Stream-Protocol-Version".into(), "v4.channel.k8s.io".into()),
        ("X-Remote-Group".into(), "system:masters".into()),
    ];
    assert!(is_upgrade(&incoming));
    assert!(!is_upgrade(&[("Connection".to_string(), "keep-alive".to_string())]));
    let out = outbound_headers(&incoming, &user, "127.0.0.1:5555", "/apis/g/v/x", "10.0.0.7:443");
    let names: Vec<&str> = out.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        ["Connection", "Upgrade", "X-Stream-Protocol-Version", "X-Remote-User", "X-Forwarded-For", "X-Forwarded-Uri", "X-Forwarded-Host", "X-Forwarded-Proto"]
    );

    let switching = vec![("Connection".to_string(), "Upgrade".to_string()), ("Upgrade".into(), "SPDY/3.1".into())];
    let (head, body) = answer_head(ProxyHead { status: 101, headers: switching.clone() }, true);
    assert_eq!((head.status, head.headers, body), (101, switching, None), "the 101 goes to the client as it is");
    let (head, body) = answer_head(ProxyHead { status: 200, headers: vec![] }, true);
    assert_eq!((head.status, body.as_deref()), (503, Some(&b"invalid upgrade response: status code 200\n"[..])));
    let (head, body) = answer_head(ProxyHead { status: 403, headers: vec![("Content-Type".into(), "application/json".into())] }, true);
    assert_eq!((head.status, body), (403, None), "an error is relayed");
}
