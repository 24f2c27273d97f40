//! The fuzz entry points: arbitrary bytes become HTTP requests run through the whole request
//! pipeline, whose answers must be well formed. `fuzz/` runs them under libFuzzer; the test
//! suite runs them on seeded random inputs. [`request`] shapes any request; [`patch`] and
//! [`apply`] (in `writes.rs`) shape patches of every type and server-side apply
//! configurations, with the few-byte encodings that let a fuzzer reach big documents;
//! [`custom_resources`] (in `schemas.rs`) generated CRD schemas and objects of them;
//! [`aggregation`] (in `aggregation.rs`) APIServices and what extension servers answer;
//! [`cel_rules`] (in `cel_rules.rs`) CEL validation rules on generated schemas;
//! [`conversion`] (in `conversion.rs`) CRD conversion webhooks that answer anything;
//! [`rbac`] (in `rbac.rs`) RBAC objects changing, decided by kapi's index and by kube's walk;
//! [`rbac_served`] (in `rbac_served.rs`) RBAC objects changing over HTTP, each answer of the
//! server checked against kube's walk of what it holds;
//! [`node_graph`] (in `node_graph.rs`) pods and volumes changing, the Node authorizer's graph
//! checked against kube's paths;
//! [`pod_security`] (in `pod_security.rs`) pods drawn from what the Pod Security Standards
//! read, admitted consistently across levels; [`pod_placement`] (in `pod_placement.rs`)
//! namespaces' node selectors and tolerations, well formed or not, and the pods created in them;
//! [`tokens`] (in `tokens.rs`) service account tokens as bearer credentials;
//! [`auth_webhooks`] (in `auth_webhooks.rs`) authentication and authorization webhooks that
//! answer anything; [`admission_webhooks`] (in `admission_webhooks.rs`) admission webhooks
//! that answer anything, malformed and huge patches included; [`admission_policies`] (in
//! `admission_policies.rs`) validating admission policies of generated CEL expressions;
//! [`mutating_policies`] (in `mutating_policies.rs`) mutating admission policies of generated
//! ApplyConfigurations and JSON patches.

use std::cell::RefCell;

use arbitrary::{Arbitrary, Unstructured};
use bytes::Bytes;
use kapi_core::pipeline::Request;

use crate::{ADMIN_TOKEN, World, default_server, epoch};

mod admission_policies;
mod admission_webhooks;
mod aggregation;
mod auth_webhooks;
mod cel_rules;
mod conversion;
mod mutating_policies;
mod node_graph;
mod pod_placement;
mod pod_security;
pub(crate) mod rbac;
mod rbac_served;
mod schemas;
mod tokens;
mod writes;

pub use admission_policies::admission_policies;
pub use admission_webhooks::admission_webhooks;
pub use aggregation::aggregation;
pub use auth_webhooks::auth_webhooks;
pub use cel_rules::cel_rules;
pub use conversion::conversion;
pub use mutating_policies::mutating_policies;
pub use node_graph::node_graph;
pub use pod_placement::pod_placement;
pub use pod_security::pod_security;
pub use rbac::rbac;
pub use rbac_served::rbac_served;
pub use schemas::{THROUGH_THE_PIPELINE, custom_resources};
pub use tokens::tokens;
pub use writes::{apply, patch};

const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];
const PREFIXES: &[&str] = &[
    "/api/v1/namespaces/default/configmaps",
    "/api/v1/namespaces/default/pods",
    "/api/v1/namespaces/default/services",
    "/api/v1/namespaces",
    "/api/v1/nodes",
    "/apis/apps/v1/namespaces/default/deployments",
    "/apis/batch/v1/namespaces/default/cronjobs",
    "/apis/events.k8s.io/v1/namespaces/default/events",
    "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
    "/api",
    "/apis",
    "/openapi/v3",
    "/readyz",
    "",
];
const CONTENT_TYPES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/merge-patch+json",
    "application/json-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "text/plain",
];
const ACCEPTS: &[&str] = &[
    "application/json",
    "application/vnd.kubernetes.protobuf",
    "application/json;as=Table;v=v1;g=meta.k8s.io",
    "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
    "application/yaml",
    "*/*",
];
const QUERY_KEYS: &[&str] = &[
    "watch",
    "labelSelector",
    "fieldSelector",
    "limit",
    "continue",
    "resourceVersion",
    "resourceVersionMatch",
    "dryRun",
    "fieldManager",
    "fieldValidation",
    "force",
    "gracePeriodSeconds",
    "propagationPolicy",
    "timeoutSeconds",
    "sendInitialEvents",
    "allowWatchBookmarks",
    "includeObject",
];

/// A request, as arbitrary data shapes it.
#[derive(Debug)]
pub struct FuzzRequest(pub Request);

impl<'a> Arbitrary<'a> for FuzzRequest {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let method = u.choose(METHODS)?.to_string();
        let mut path = u.choose(PREFIXES)?.to_string();
        for _ in 0..u.int_in_range(0..=3)? {
            path.push('/');
            let seg: String = u.arbitrary()?;
            path.push_str(if u.arbitrary()? { &seg } else { "x" });
        }
        let mut query = Vec::new();
        for _ in 0..u.int_in_range(0..=4)? {
            let v: String = u.arbitrary()?;
            query.push(format!("{}={v}", u.choose(QUERY_KEYS)?));
        }
        let mut headers = vec![("Authorization".to_string(), format!("Bearer {ADMIN_TOKEN}"))];
        if u.arbitrary()? {
            headers.push(("Content-Type".into(), u.choose(CONTENT_TYPES)?.to_string()));
        }
        if u.arbitrary()? {
            headers.push(("Accept".into(), u.choose(ACCEPTS)?.to_string()));
        }
        let body: Vec<u8> = if u.arbitrary()? {
            let name: String = u.arbitrary()?;
            serde_json::to_vec(&serde_json::json!({"metadata": {"name": name}, "data": {"k": name}})).unwrap_or_default()
        } else {
            u.arbitrary()?
        };
        // Impersonation: the administrator may act as anyone.
        for _ in 0..u.int_in_range(0..=2)? {
            let name = match u.int_in_range(0..=3)? {
                0 => "Impersonate-User".to_string(),
                1 => "Impersonate-Group".to_string(),
                2 => "Impersonate-Uid".to_string(),
                _ => format!("Impersonate-Extra-{}", u.arbitrary::<String>()?),
            };
            headers.push((name, u.arbitrary()?));
        }
        Ok(FuzzRequest(Request { method, path, query: query.join("&"), headers, body: Bytes::from(body), ..Default::default() }))
    }
}

fn world() -> World {
    World::new(default_server(), epoch(), 1)
}

/// Requests one world serves before a fresh one replaces it, so state builds up between
/// requests (objects to conflict with, watch windows) without growing without bound.
const REQUESTS_PER_WORLD: u32 = 2000;

thread_local! {
    static WORLD: KeptWorld = const { RefCell::new(None) };
}

/// Runs one fuzzed request and checks its answer: a known status code, and an error body that
/// is a `Status` carrying that code. Panics on a violation (the fuzzer's finding).
pub fn request(data: &[u8]) {
    let Ok(FuzzRequest(req)) = FuzzRequest::arbitrary(&mut Unstructured::new(data)) else { return };
    with_world_in(&WORLD, REQUESTS_PER_WORLD, world, |world| {
        serve_and_check(world, req);
    });
}

/// A world kept between inputs on one thread, and how many inputs it has served.
type KeptWorld = RefCell<Option<(World, u32)>>;

/// Runs `f` on the world `kept` holds, made by `make` and replaced after `per_world` inputs.
fn with_world_in(kept: &'static std::thread::LocalKey<KeptWorld>, per_world: u32, make: fn() -> World, f: impl FnOnce(&mut World)) {
    kept.with(|w| {
        let mut w = w.borrow_mut();
        if w.as_ref().is_some_and(|(_, served)| *served >= per_world) {
            *w = None;
        }
        let (world, served) = w.get_or_insert_with(|| (make(), 0));
        *served += 1;
        f(world);
    });
}

/// Decodes an input from `data` and has `serve` run it in the world `kept` holds (a fresh one
/// from `make` after `per_world` inputs).
fn serve_input<I: for<'a> Arbitrary<'a>>(
    kept: &'static std::thread::LocalKey<KeptWorld>,
    per_world: u32,
    data: &[u8],
    make: fn() -> World,
    serve: fn(&mut World, I),
) {
    let Ok(input) = I::arbitrary(&mut Unstructured::new(data)) else { return };
    with_world_in(kept, per_world, make, |w| serve(w, input));
}

/// Serves `req` and checks the answer (and a watch's frames) is well formed.
fn serve_and_check(world: &mut World, req: Request) -> crate::Response {
    let resp = world.request(req.clone());
    let code = resp.head.status;
    assert!(
        matches!(code, 200 | 201 | 301 | 400 | 401 | 403 | 404 | 405 | 406 | 409 | 410 | 413 | 415 | 422 | 429 | 500 | 504),
        "unexpected status {code} for {req:?}"
    );
    if code >= 400 && resp.head.content_type() == Some("application/json") && req.method != "HEAD" {
        let status = resp.json();
        assert_eq!(status["kind"], "Status", "error body of {req:?}: {}", String::from_utf8_lossy(&resp.body));
        assert_eq!(status["code"], code, "{req:?}");
    }
    if let Some(id) = resp.watch {
        let (frames, _) = world.frames(id);
        if resp.head.content_type() == Some("application/json") {
            for f in frames {
                let event: serde_json::Value = serde_json::from_slice(&f).unwrap_or_else(|e| panic!("watch frame of {req:?} is not JSON ({e}): {f:?}"));
                assert!(event["type"].is_string() && event["object"].is_object(), "watch event of {req:?}: {event}");
            }
        }
        world.stop_watch(id);
    }
    resp
}
