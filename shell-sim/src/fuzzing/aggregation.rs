//! Aggregation under fuzzing: APIServices of generated names and priorities, backed by a
//! stand-in extension server whose answers (status, headers, body: its discovery answer
//! included) come from the input, and requests of generated paths and headers proxied to it.
//! Whatever the server says, kapi's answers are well formed and discovery stays valid JSON; a
//! front proxy's headers of any shape authenticate or not, without panicking.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use arbitrary::{Arbitrary, Unstructured};
use bytes::Bytes;
use jiff::SignedDuration;
use kapi_core::aggregator::{ProxyHead, ProxyRequest};
use kapi_core::auth::RequestHeader;
use kapi_core::controllers::Enabled;
use kapi_core::pipeline::Request;
use serde_json::json;

use super::{KeptWorld, serve_input};
use crate::{ADMIN_TOKEN, World, default_server, epoch};

const GROUPS: &[&str] = &["metrics.example.com", "apps", "example.com", "apiregistration.k8s.io", "a.b"];
const VERSIONS: &[&str] = &["v1", "v1beta1", "v2alpha3", "x"];
const HEADER_NAMES: &[&str] = &[
    "X-Remote-User",
    "x-remote-group",
    "X-Remote-Extra-Scopes",
    "X-Remote-Extra-%zz",
    "Connection",
    "Location",
    "Content-Length",
    "Impersonate-User",
    "X-Forwarded-For",
    "Content-Type",
];

/// One answer of the stand-in server.
#[derive(Debug, Clone)]
enum Answer {
    Ok {
        status: u16,
        headers: Vec<(u8, String)>,
        body: Vec<u8>,
    },
    /// A discovery answer: an `APIResourceList` with resources of these names and kinds.
    List {
        resources: Vec<(String, String, bool)>,
    },
    Unreachable(String),
}

fn header(name: u8) -> String {
    HEADER_NAMES[usize::from(name) % HEADER_NAMES.len()].to_string()
}

impl Answer {
    fn give(&self) -> Result<(ProxyHead, Bytes), String> {
        match self {
            Answer::Ok { status, headers, body } => {
                let headers = headers.iter().map(|(n, v)| (header(*n), v.clone())).collect();
                Ok((ProxyHead { status: *status, headers }, Bytes::from(body.clone())))
            }
            Answer::List { resources } => {
                let resources: Vec<_> =
                    resources.iter().map(|(name, kind, namespaced)| json!({"name": name, "kind": kind, "namespaced": namespaced, "verbs": ["get"]})).collect();
                Ok((ProxyHead { status: 200, headers: vec![] }, Bytes::from(json!({"kind": "APIResourceList", "resources": resources}).to_string())))
            }
            Answer::Unreachable(e) => Err(e.clone()),
        }
    }
}

impl<'a> Arbitrary<'a> for Answer {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Answer> {
        Ok(match u.int_in_range(0..=2u8)? {
            0 => Answer::Ok { status: u.arbitrary()?, headers: u.arbitrary()?, body: u.arbitrary()? },
            1 => Answer::List { resources: u.arbitrary()? },
            _ => Answer::Unreachable(u.arbitrary()?),
        })
    }
}

/// A group version and priorities of an APIService, and its Service's port.
type ServiceSpec = (u8, u8, i64, i64, u16);
/// A request's group version, the rest of its path, and its headers.
type RequestSpec = (u8, u8, String, Vec<(u8, String)>);

#[derive(Debug)]
struct Input {
    answers: Vec<Answer>,
    services: Vec<ServiceSpec>,
    requests: Vec<RequestSpec>,
    front_proxy: (String, Vec<(u8, String)>),
}

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Input> {
        Ok(Input { answers: u.arbitrary()?, services: u.arbitrary()?, requests: u.arbitrary()?, front_proxy: u.arbitrary()? })
    }
}

pub fn aggregation(data: &[u8]) {
    serve_input(&WORLD, INPUTS_PER_WORLD, data, world, serve);
}

thread_local! {
    static WORLD: KeptWorld = const { RefCell::new(None) };
}
/// Inputs served by one world before a fresh one (the APIServices of earlier inputs stay).
const INPUTS_PER_WORLD: u32 = 50;

fn world() -> World {
    let mut w = World::new(default_server(), epoch(), 5);
    w.start_controllers(Enabled::NONE);
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ext"}, "spec": {"type": "ExternalName", "externalName": "ext.example.net"}});
    w.call("POST", "/api/v1/namespaces/default/services", "", Some(&svc), "application/json");
    w
}

fn serve(w: &mut World, input: Input) {
    let answers = Arc::new(Mutex::new((input.answers.clone(), 0usize)));
    w.extension = Some(Box::new(move |_: &ProxyRequest| {
        let mut a = answers.lock().expect("one thread");
        let (list, next) = &mut *a;
        if list.is_empty() {
            return Err("connection refused".into());
        }
        *next += 1;
        list[*next % list.len()].give()
    }));
    for (g, v, group_priority, version_priority, port) in input.services.iter().take(4) {
        let (group, version) = (GROUPS[usize::from(*g) % GROUPS.len()], VERSIONS[usize::from(*v) % VERSIONS.len()]);
        let api = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": format!("{version}.{group}")},
            "spec": {"group": group, "version": version, "groupPriorityMinimum": group_priority, "versionPriority": version_priority,
                "insecureSkipTLSVerify": true, "service": {"namespace": "default", "name": "ext", "port": port}}});
        w.call("POST", "/apis/apiregistration.k8s.io/v1/apiservices", "", Some(&api), "application/json");
    }
    w.advance(SignedDuration::from_secs(31));
    for accept in ["application/json", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"] {
        let mut req = Request { method: "GET".into(), path: "/apis".into(), ..Default::default() };
        req.headers = vec![("Authorization".into(), format!("Bearer {ADMIN_TOKEN}")), ("Accept".into(), accept.into())];
        let resp = w.request(req);
        assert_eq!(resp.head.status, 200);
        serde_json::from_slice::<serde_json::Value>(&resp.body).expect("discovery is JSON");
    }
    for (g, v, rest, headers) in input.requests.iter().take(8) {
        let (group, version) = (GROUPS[usize::from(*g) % GROUPS.len()], VERSIONS[usize::from(*v) % VERSIONS.len()]);
        let mut req = Request { method: "GET".into(), path: format!("/apis/{group}/{version}/{rest}"), ..Default::default() };
        req.headers = headers.iter().map(|(n, v)| (header(*n), v.clone())).collect();
        req.headers.push(("Authorization".into(), format!("Bearer {ADMIN_TOKEN}")));
        let resp = w.request(req);
        assert!((100..600).contains(&resp.head.status), "status {}", resp.head.status);
    }
    let rh = RequestHeader {
        allowed_names: vec![],
        username_headers: vec!["X-Remote-User".into()],
        uid_headers: vec![],
        group_headers: vec!["X-Remote-Group".into()],
        extra_prefixes: vec!["X-Remote-Extra-".into()],
    };
    let headers: Vec<(String, String)> = input.front_proxy.1.iter().map(|(n, v)| (header(*n), v.clone())).collect();
    let _ = rh.authenticate(&input.front_proxy.0, &headers);
}
