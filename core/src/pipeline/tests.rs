use super::*;
use crate::cache::ReadResult;
use crate::kv::KvRequest;
use crate::resources::{Settings, catalog};

fn server() -> Arc<Server> {
    let tokens = crate::auth::TokenFile::parse("t0ken,admin,1,system:masters\n").unwrap();
    let auth = Authenticator { tokens: Some(tokens), ..Default::default() };
    Arc::new(Server::new(auth, Authorizer::always_allow(), "/registry", "127.0.0.1:6443"))
}

fn machine(req: Request) -> RequestMachine {
    RequestMachine::new(server(), Served::new(catalog(&Settings::default())), req, now(), 1)
}

fn now() -> Timestamp {
    "2024-01-01T00:00:00Z".parse().unwrap()
}

/// Runs a request that needs nothing from storage; returns status, content type and body.
fn simple(method: &str, path: &str, query: &str, token: Option<&str>, accept: Option<&str>, health: Health) -> (u16, String, String) {
    let mut headers = Vec::new();
    if let Some(t) = token {
        headers.push(("Authorization".into(), format!("Bearer {t}")));
    }
    if let Some(a) = accept {
        headers.push(("Accept".into(), a.into()));
    }
    let req = Request { method: method.into(), path: path.into(), query: query.into(), headers, ..Default::default() };
    let mut m = machine(req);
    let (mut status, mut ct, mut body) = (0, String::new(), Vec::new());
    while let Some(e) = m.poll(now()) {
        match e {
            Effect::Health => m.handle(now(), Event::Health(health.clone())),
            Effect::Respond(h) => {
                status = h.status;
                ct = h.content_type().unwrap_or_default().to_string();
            }
            Effect::Body(b) => body.extend_from_slice(&b),
            Effect::End => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    (status, ct, String::from_utf8(body).unwrap())
}

#[test]
fn unauthenticated_requests_get_401() {
    let (s, _, body) = simple("GET", "/api/v1/pods", "", None, None, Health::default());
    assert_eq!(s, 401);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["reason"], "Unauthorized");
}

#[test]
fn version_and_health() {
    let (s, _, body) = simple("GET", "/version", "", Some("t0ken"), None, Health::default());
    assert_eq!(s, 200);
    assert!(body.starts_with("{\n  \"major\": \"1\",\n  \"minor\": \"33\",\n"), "indented in version.Info's order, as kube writes it: {body}");
    let (s, _, body) = simple("GET", "/readyz", "verbose", Some("t0ken"), None, Health::default());
    assert_eq!(s, 200);
    assert!(body.contains("[+]etcd ok") && body.ends_with("readyz check passed\n"), "{body}");
    let down = Health { storage: Err("dial tcp: refused".into()), ..Health::default() };
    let (s, _, body) = simple("GET", "/readyz", "", Some("t0ken"), None, down);
    assert_eq!(s, 500);
    assert!(body.contains("[-]etcd failed: reason withheld"));
}

#[test]
fn discovery_and_unknown_paths() {
    let (s, ct, body) = simple(
        "GET",
        "/apis",
        "",
        Some("t0ken"),
        Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"),
        Health::default(),
    );
    assert_eq!(s, 200);
    assert_eq!(ct, "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList");
    assert!(body.contains("\"deploy\""));
    // Before the CRDs are known, a group kapi does not serve may be one of theirs.
    let (s, _, body) = simple("GET", "/apis/nope/v1", "", Some("t0ken"), None, Health::default());
    assert_eq!((s, body.contains("\"message\":\"server is starting\"") && body.contains("\"retryAfterSeconds\":10")), (503, true), "{body}");
    let (s, _, body) = simple("GET", "/api/v1/widgets", "", Some("t0ken"), None, Health::default());
    assert_eq!(s, 404);
    assert!(body.contains("the server could not find the requested resource"));
}

#[test]
fn a_watch_hands_over_to_the_cache() {
    let req = Request {
        method: "GET".into(),
        path: "/api/v1/namespaces/default/configmaps".into(),
        query: "watch=1&timeoutSeconds=5".into(),
        headers: vec![("Authorization".into(), "Bearer t0ken".into())],
        ..Default::default()
    };
    let mut m = machine(req);
    match m.poll(now()) {
        Some(Effect::Watch { resource, params, head }) => {
            assert_eq!(resource.info.resource, "configmaps");
            assert_eq!(params.namespace.as_deref(), Some("default"));
            assert_eq!(params.deadline, now() + SignedDuration::from_secs(5));
            assert_eq!(head.status, 200);
        }
        other => panic!("{other:?}"),
    }
}

/// Only the health endpoints make the shell check the store's health: other requests go
/// straight to their work.
#[test]
fn only_health_endpoints_ask_for_health() {
    let first_effect = |path: &str| {
        let headers = vec![("Authorization".into(), "Bearer t0ken".into())];
        let req = Request { method: "GET".into(), path: path.into(), headers, ..Default::default() };
        machine(req).poll(now())
    };
    for path in ["/healthz", "/livez/etcd", "/readyz/"] {
        assert!(matches!(first_effect(path), Some(Effect::Health)), "{path}");
    }
    assert!(matches!(first_effect("/api/v1/namespaces/default/configmaps/c"), Some(Effect::Kv(_))));
    assert!(matches!(first_effect("/version"), Some(Effect::Respond(_))));
}

#[test]
fn once_the_crds_are_known_an_unknown_group_is_not_found() {
    let builtins = catalog(&Settings::default());
    let starting = Served::new(builtins.clone());
    let empty = crate::cache::Snapshot { revision: 5, objects: Default::default() };
    let synced = starting.with_crds(&builtins, &empty).expect("the first CRDs taken in, even none, change what is served");
    assert!(synced.with_crds(&builtins, &empty).is_none());
    let built_in = Request {
        method: "GET".into(),
        path: "/apis/apps/v1/nopes".into(),
        headers: vec![("Authorization".into(), "Bearer t0ken".into())],
        ..Default::default()
    };
    let mut m = RequestMachine::new(server(), starting.clone(), built_in, now(), 1);
    let head = std::iter::from_fn(|| m.poll(now())).find_map(|e| if let Effect::Respond(h) = e { Some(h) } else { None }).expect("an answer");
    assert_eq!(head.status, 404, "a built-in group version answers as kube's own handlers do");
    for (served, status) in [(starting, 503), (synced, 404)] {
        let req = Request {
            method: "GET".into(),
            path: "/apis/nope/v1/things".into(),
            headers: vec![("Authorization".into(), "Bearer t0ken".into())],
            ..Default::default()
        };
        let mut m = RequestMachine::new(server(), served, req, now(), 1);
        let head = std::iter::from_fn(|| m.poll(now())).find_map(|e| if let Effect::Respond(h) = e { Some(h) } else { None }).expect("an answer");
        assert_eq!(head.status, status);
        assert_eq!(head.headers.iter().any(|(k, v)| k == "Retry-After" && v == "10"), status == 503);
    }
}

#[test]
fn authorization_comes_before_anything_says_whether_a_resource_or_path_exists() {
    let tokens = crate::auth::TokenFile::parse("t0ken,admin,1,system:masters\nb0b,bob,2\n").unwrap();
    let auth = Authenticator { tokens: Some(tokens), ..Default::default() };
    let server = Arc::new(Server::new(auth, Authorizer::parse("RBAC").unwrap(), "/registry", "127.0.0.1:6443"));
    let served = Served::new(catalog(&Settings::default()));
    let run = |path: &str, token: &str| {
        let headers = vec![("Authorization".to_string(), format!("Bearer {token}"))];
        let mut m =
            RequestMachine::new(server.clone(), served.clone(), Request { method: "GET".into(), path: path.into(), headers, ..Default::default() }, now(), 1);
        let (mut status, mut body) = (0, Vec::new());
        while let Some(e) = m.poll(now()) {
            match e {
                Effect::Respond(h) => status = h.status,
                Effect::Body(b) => body.extend_from_slice(&b),
                _ => break,
            }
        }
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        (status, v["message"].as_str().unwrap_or_default().to_string())
    };
    assert_eq!(
        run("/apis/example.com/v1/namespaces/dev/widgets/w", "b0b"),
        (
            403,
            "widgets.example.com \"w\" is forbidden: User \"bob\" cannot get resource \"widgets\" in API group \"example.com\" in the namespace \"dev\"".into()
        )
    );
    assert_eq!(
        run("/api/v1/nodes", "b0b"),
        (403, "nodes is forbidden: User \"bob\" cannot list resource \"nodes\" in API group \"\" at the cluster scope".into())
    );
    assert_eq!(run("/no/such/path", "b0b"), (403, "forbidden: User \"bob\" cannot get path \"/no/such/path\"".into()));
    assert_eq!(run("/api/v1/namespaces/dev/widgets/w", "b0b").0, 403);
    assert_eq!(run("/api/v1/namespaces/dev/widgets/w", "t0ken").0, 404, "system:masters may, and learns it does not exist");
}

/// Runs `m` against `model`, every cache read answered as not cached (so read from storage);
/// `before_write` sees the model before the first transaction is applied. The answer's status
/// and body.
fn serve(m: &mut RequestMachine, model: &mut crate::kv::Model, before_write: &mut dyn FnMut(&mut crate::kv::Model)) -> (u16, serde_json::Value) {
    let (mut status, mut body, mut wrote) = (0, Vec::new(), false);
    while let Some(e) = m.poll(now()) {
        match e {
            Effect::Cache { .. } => m.handle(now(), Event::Cache(Ok(ReadResult::NotCached))),
            Effect::Kv(req) => {
                if !wrote && matches!(req, KvRequest::Txn(_)) {
                    wrote = true;
                    before_write(model);
                }
                let (result, _) = model.apply(now(), &req);
                m.handle(now(), Event::Kv(result));
            }
            Effect::Respond(h) => status = h.status,
            Effect::Body(b) => body.extend_from_slice(&b),
            Effect::End => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    (status, serde_json::from_slice(&body).unwrap_or_default())
}

#[test]
fn a_namespace_created_meanwhile_lets_an_auto_provisioned_create_go_on() {
    // NamespaceAutoProvision: the namespace is missing when the create looks for it, and
    // someone creates it before the server's own request does (which gets AlreadyExists).
    let tokens = crate::auth::TokenFile::parse("t0ken,admin,1,system:masters\n").unwrap();
    let auth = Authenticator { tokens: Some(tokens), loopback: Some("lo0p".into()), ..Default::default() };
    let mut server = Server::new(auth, Authorizer::always_allow(), "/registry", "127.0.0.1:6443");
    let no_configs = std::collections::BTreeMap::new();
    server.admission =
        Arc::new(crate::admission::Chain::from_flags(&["NamespaceAutoProvision".into()], &[], &no_configs, &crate::admission::no_files).unwrap());
    let mut served = Served::new(catalog(&Settings::default()));
    for (source, _) in crate::admission::SOURCES {
        served = served.with_admission(source, []);
    }
    let server = Arc::new(server);
    let post = |path: &str, body: serde_json::Value| Request {
        method: "POST".into(),
        path: path.into(),
        headers: vec![("Authorization".into(), "Bearer t0ken".into()), ("Content-Type".into(), "application/json".into())],
        body: Bytes::from(body.to_string()),
        ..Default::default()
    };
    let namespace = post("/api/v1/namespaces", serde_json::json!({"metadata": {"name": "team"}}));
    let configmap = post("/api/v1/namespaces/team/configmaps", serde_json::json!({"metadata": {"name": "c"}}));
    let mut model = crate::kv::Model::new();
    let mut theirs = None;
    let mut m = RequestMachine::new(server.clone(), served.clone(), configmap, now(), 1);
    let (status, body) = serve(&mut m, &mut model, &mut |model| {
        let mut other = RequestMachine::new(server.clone(), served.clone(), namespace.clone(), now(), 2);
        theirs = Some(serve(&mut other, model, &mut |_| {}));
    });
    let (their_status, their_namespace) = theirs.unwrap_or_else(|| panic!("the namespace was created meanwhile: {status} {body}"));
    assert_eq!((their_status, status), (201, 201), "{body}");
    assert_eq!(body["metadata"]["namespace"], "team");
    let get = Request { method: "GET".into(), path: "/api/v1/namespaces/team".into(), ..namespace };
    let (_, stored) = serve(&mut RequestMachine::new(server, served, get, now(), 3), &mut model, &mut |_| {});
    assert_eq!(stored["metadata"]["uid"], their_namespace["metadata"]["uid"]);
}
