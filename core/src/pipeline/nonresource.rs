//! Non-resource endpoints: `/version`, `/healthz`, `/livez`, `/readyz`, discovery and OpenAPI.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::{Value, json};

use super::Health;
use super::query::Query;
use super::respond::{Head, status_body};
use crate::aggregator::{self, ApiServices, Discovered};
use crate::catalog::{Catalog, Resource};
use crate::codec::negotiate::parse_accept;
use crate::codec::{self, Format};
use crate::discovery;
use crate::openapi::{self, KUBE_VERSION};
use crate::serviceaccount::{JWKS_PATH, OPENID_CONFIGURATION_PATH, TokenConfig};
use crate::status::ApiError;

/// The discovery and OpenAPI documents of one state of what is served, each made when first
/// asked for (a request for one does not make the others). The OpenAPI v3 documents of the
/// state before are reused where their group version's entries are the same, so that with a
/// thousand CRDs, a change of one makes one document anew.
#[derive(Default)]
pub struct Docs {
    discovery: OnceLock<DiscoveryDocs>,
    openapi_v2: OnceLock<Value>,
    openapi_v2_json: OnceLock<Bytes>,
    openapi_v2_protobuf: OnceLock<Bytes>,
    v3: OnceLock<Arc<V3Docs>>,
    /// The v3 documents of the state before, if it made them.
    earlier_v3: Option<Arc<V3Docs>>,
}

/// What the documents are made of.
pub struct Sources<'a> {
    pub server_address: &'a str,
    pub catalog: &'a Catalog,
    pub apis: &'a ApiServices,
    pub discovered: &'a Discovered,
}

struct DiscoveryDocs {
    api: Value,
    apis: Value,
    aggregated: BTreeMap<(bool, &'static str), Bytes>,
}

/// The `/openapi/v3` documents and their index.
pub struct V3Docs {
    index: Bytes,
    /// By path: the entries a document was made of, its hash and its bytes.
    docs: BTreeMap<String, V3Doc>,
}

struct V3Doc {
    entries: Vec<Arc<Resource>>,
    hash: String,
    body: Bytes,
}

impl Docs {
    /// The documents of a new state, reusing those of `earlier` (the state before) that fit.
    pub fn after(earlier: &Docs) -> Docs {
        Docs { earlier_v3: earlier.v3.get().cloned().or_else(|| earlier.earlier_v3.clone()), ..Docs::default() }
    }

    fn discovery(&self, src: &Sources) -> &DiscoveryDocs {
        self.discovery.get_or_init(|| {
            let mut aggregated = BTreeMap::new();
            for v in ["v2", "v2beta1"] {
                aggregated.insert((true, v), kube_json(&discovery::aggregated(src.catalog, true, v)));
                aggregated.insert((false, v), kube_json(&aggregator::merged_aggregated(src.catalog, src.apis, src.discovered, v)));
            }
            DiscoveryDocs { api: discovery::api_versions(src.server_address), apis: aggregator::merged_group_list(src.catalog, src.apis), aggregated }
        })
    }

    fn openapi_v2(&self, src: &Sources) -> &Value {
        self.openapi_v2.get_or_init(|| {
            let mut doc = openapi::v2(src.catalog);
            src.discovered.merge_openapi_v2(&mut doc, src.apis);
            doc
        })
    }

    fn openapi_v2_json(&self, src: &Sources) -> &Bytes {
        self.openapi_v2_json.get_or_init(|| json_bytes(self.openapi_v2(src)))
    }

    fn openapi_v2_protobuf(&self, src: &Sources) -> &Bytes {
        self.openapi_v2_protobuf.get_or_init(|| Bytes::from(openapi::v2_protobuf(self.openapi_v2(src))))
    }

    fn v3(&self, src: &Sources) -> &V3Docs {
        self.v3.get_or_init(|| {
            let mut docs = BTreeMap::new();
            for g in src.catalog.groups() {
                for v in src.catalog.versions(g) {
                    let key = openapi::v3_key(g, v);
                    let entries: Vec<Arc<Resource>> = src.catalog.resources_of(g, v).into_iter().cloned().collect();
                    let earlier = self.earlier_v3.as_ref().and_then(|e| e.docs.get(&key)).filter(|d| same_entries(&d.entries, &entries));
                    let doc = match earlier {
                        Some(d) => V3Doc { entries, hash: d.hash.clone(), body: d.body.clone() },
                        None => {
                            let doc = openapi::v3_group_version(src.catalog, g, v);
                            V3Doc { entries, hash: openapi::hash(&doc), body: Bytes::from(doc) }
                        }
                    };
                    docs.insert(key, doc);
                }
            }
            let mut index = openapi::v3_index(docs.iter().map(|(k, d)| (k, &d.hash)));
            src.discovered.add_openapi_paths(&mut index, src.apis);
            Arc::new(V3Docs { index: json_bytes(&index), docs })
        })
    }
}

fn same_entries(a: &[Arc<Resource>], b: &[Arc<Resource>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| Arc::ptr_eq(x, y))
}

fn json_bytes(v: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(v).expect("JSON trees serialize"))
}

/// A kind as a response body: in kube's field order, ending with a newline.
fn kube_json(v: &Value) -> Bytes {
    let mut out = codec::json::to_vec(v);
    out.push(b'\n');
    Bytes::from(out)
}

/// A complete non-resource answer.
pub type Answer = (Head, Bytes);

fn text(status: u16, body: String) -> Answer {
    (Head::new(status, "text/plain; charset=utf-8").with("X-Content-Type-Options", "nosniff"), Bytes::from(body))
}

pub fn error(e: &ApiError) -> Answer {
    let (ct, body) = status_body(&e.to_status(), Format::Json);
    (super::respond::error_head(e, &ct), body)
}

/// `/version` as kube writes it (`WriteRawJSON`: indented, fields in `version.Info`'s order).
fn version_answer() -> Answer {
    let info = version();
    let mut out = b"{".to_vec();
    for (i, (k, v)) in VERSION_FIELDS.iter().filter_map(|k| Some((k, info.get(*k)?))).enumerate() {
        out.extend_from_slice(if i == 0 { b"\n  " } else { b",\n  " });
        codec::json::write_str(&mut out, k);
        out.extend_from_slice(b": ");
        codec::json::write(&mut out, v);
    }
    out.extend_from_slice(b"\n}");
    (Head::new(200, "application/json"), Bytes::from(out))
}

const VERSION_FIELDS: &[&str] = &[
    "major",
    "minor",
    "emulationMajor",
    "emulationMinor",
    "minCompatibilityMajor",
    "minCompatibilityMinor",
    "gitVersion",
    "gitCommit",
    "gitTreeState",
    "buildDate",
    "goVersion",
    "compiler",
    "platform",
];

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "emulationMajor": "1",
        "emulationMinor": "33",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "32",
        "gitVersion": format!("{KUBE_VERSION}+kapi.{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH.replace("x86_64", "amd64").replace("aarch64", "arm64")),
    })
}

/// The checks of `/healthz`, `/livez` and `/readyz`, in order, with their outcome.
/// `rbac`: RBAC authorizes, so its bootstrap policy is one of the things the start puts in
/// place.
fn checks(which: &str, health: &Health, rbac: bool) -> Vec<(&'static str, Result<(), String>)> {
    let mut c = vec![("ping", Ok(())), ("log", Ok(())), ("etcd", health.storage.clone())];
    if which == "readyz" {
        c.push(("etcd-readiness", health.storage.clone()));
        c.push(("informer-sync", if health.caches_ready { Ok(()) } else { Err("caches are not synced".into()) }));
    }
    c.push(("poststarthook/start-apiserver-admission-initializer", Ok(())));
    let started = || if health.bootstrapped { Ok(()) } else { Err("not finished".to_string()) };
    if rbac {
        c.push(("poststarthook/rbac/bootstrap-roles", started()));
    }
    c.push(("poststarthook/bootstrap-controller", started()));
    if which == "readyz" {
        c.push(("shutdown", if health.shutting_down { Err("process is shutting down".into()) } else { Ok(()) }));
    }
    c
}

/// A GET or HEAD of `/healthz`, `/livez` or `/readyz` (or one of their checks): the only
/// requests that need the server's [`Health`], so only they make the shell find it out.
#[derive(Clone, Debug)]
pub struct HealthRequest {
    which: &'static str,
    /// The one check asked for (`/readyz/etcd`).
    single: Option<String>,
    rbac: bool,
}

impl HealthRequest {
    /// `rbac`: RBAC authorizes (see [`checks`]).
    pub fn of(method: &str, path: &str, rbac: bool) -> Option<HealthRequest> {
        if method != "GET" && method != "HEAD" {
            return None;
        }
        let mut parts = path.trim_end_matches('/').trim_start_matches('/').split('/');
        let which = match parts.next()? {
            "healthz" => "healthz",
            "livez" => "livez",
            "readyz" => "readyz",
            _ => return None,
        };
        let rest: Vec<&str> = parts.collect();
        Some(HealthRequest { which, single: (!rest.is_empty()).then(|| rest.join("/")), rbac })
    }

    pub fn answer(&self, query: &Query, health: &Health) -> Answer {
        health_answer(self.which, self.single.as_deref(), self.rbac, query, health)
    }
}

fn health_answer(which: &str, single: Option<&str>, rbac: bool, query: &Query, health: &Health) -> Answer {
    let all = checks(which, health, rbac);
    if let Some(name) = single {
        return match all.iter().find(|(n, _)| *n == name) {
            Some((_, Ok(()))) => text(200, "ok".into()),
            Some((_, Err(e))) => text(500, format!("internal server error: {e}\n")),
            None => error(&ApiError::path_not_found()),
        };
    }
    let excluded: Vec<&str> = query.all("exclude").collect();
    let run: Vec<_> = all.iter().filter(|(n, _)| !excluded.contains(n)).collect();
    let failed = run.iter().any(|(_, r)| r.is_err());
    if !failed && !query.flag("verbose") {
        return text(200, "ok".into());
    }
    let mut out = String::new();
    for (name, r) in &run {
        match r {
            Ok(()) => out.push_str(&format!("[+]{name} ok\n")),
            Err(_) => out.push_str(&format!("[-]{name} failed: reason withheld\n")),
        }
    }
    for name in excluded {
        out.push_str(&format!("[+]{name} excluded: ok\n"));
    }
    if failed {
        out.push_str(&format!("{which} check failed\n"));
        text(500, out)
    } else {
        out.push_str(&format!("{which} check passed\n"));
        text(200, out)
    }
}

/// Which aggregated discovery version an `Accept` header asks for.
fn aggregated_version(accept: Option<&str>) -> Option<&'static str> {
    for r in parse_accept(accept?) {
        if r.param("as") == Some("APIGroupDiscoveryList") && r.param("g") == Some("apidiscovery.k8s.io") {
            match r.param("v") {
                Some("v2") => return Some("v2"),
                Some("v2beta1") => return Some("v2beta1"),
                _ => {}
            }
        }
        if r.param("as").is_none()
            && matches!(r.mime.as_str(), "application/json" | "*/*" | "application/*" | "application/vnd.kubernetes.protobuf" | "application/yaml")
        {
            return None;
        }
    }
    None
}

/// A discovery document in a format the client accepts (these kinds have protobuf forms too).
fn discovery_answer(mut doc: Value, api_version: &str, kind: &str, accept: Option<&str>) -> Answer {
    let format = crate::codec::negotiate::negotiate_output(accept, crate::codec::negotiate::Target::Object, crate::codec::IncludeTable::Metadata, true)
        .map(|o| o.format)
        .unwrap_or(Format::Json);
    doc["apiVersion"] = json!(api_version);
    doc["kind"] = json!(kind);
    if format == Format::Protobuf
        && let Ok(b) = codec::encode(&doc, Format::Protobuf)
    {
        return (Head::new(200, codec::PROTOBUF), b);
    }
    if format == Format::Yaml
        && let Ok(b) = codec::encode(&doc, Format::Yaml)
    {
        return (Head::new(200, codec::YAML), b);
    }
    (Head::new(200, "application/json"), kube_json(&doc))
}

/// The service account issuer's discovery documents (`/.well-known/openid-configuration` and
/// `/openid/v1/jwks`, GET only), served as kube serves them where the issuer gives a place for
/// the keys; `None` for other requests.
pub fn issuer_discovery(config: &TokenConfig, method: &str, path: &str) -> Option<Answer> {
    if method != "GET" && method != "HEAD" {
        return None;
    }
    let (body, content_type) = match path.trim_end_matches('/') {
        OPENID_CONFIGURATION_PATH => (config.openid_configuration()?, "application/json"),
        JWKS_PATH if config.openid_configuration().is_some() => (config.jwks(), "application/jwk-set+json"),
        _ => return None,
    };
    let mut head = Head::new(200, content_type);
    head.headers.push(("Cache-Control".into(), "public, max-age=3600".into()));
    Some((head, Bytes::from(body)))
}

/// Answers a non-resource request other than a [`HealthRequest`], or `None` for paths that are
/// not one.
pub fn answer(src: &Sources, docs: &Docs, method: &str, path: &str, query: &Query, accept: Option<&str>) -> Option<Answer> {
    let (catalog, apis) = (src.catalog, src.apis);
    let path = path.trim_end_matches('/');
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    if method != "GET" && method != "HEAD" {
        return match parts.as_slice() {
            ["version"] | ["healthz", ..] | ["livez", ..] | ["readyz", ..] | ["api", ..] | ["apis", ..] | ["openapi", ..] => {
                Some(error(&ApiError::new(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")))
            }
            _ => None,
        };
    }
    Some(match parts.as_slice() {
        ["version"] => version_answer(),
        ["api"] => match aggregated_version(accept) {
            Some(v) => aggregated_answer(docs.discovery(src), true, v),
            None => discovery_answer(docs.discovery(src).api.clone(), "v1", "APIVersions", accept),
        },
        ["apis"] => match aggregated_version(accept) {
            Some(v) => aggregated_answer(docs.discovery(src), false, v),
            None => discovery_answer(docs.discovery(src).apis.clone(), "v1", "APIGroupList", accept),
        },
        ["api", "v1"] => discovery_answer(discovery::resource_list(catalog, "", "v1")?, "v1", "APIResourceList", accept),
        ["apis", group] => {
            let document = aggregator::group_document(catalog, apis, group).or_else(|| discovery::group_document(catalog, group))?;
            discovery_answer(document, "v1", "APIGroup", accept)
        }
        ["apis", group, version] => discovery_answer(discovery::resource_list(catalog, group, version)?, "v1", "APIResourceList", accept),
        ["openapi", "v2"] => {
            let chosen = parse_accept(accept.unwrap_or("application/json")).into_iter().find_map(|r| match r.mime.as_str() {
                "application/json" | "*/*" | "application/*" => Some(("application/json", false)),
                // Either spelling is answered under the current one, as kube-openapi does.
                m => openapi::V2_PROTOBUF.contains(&m).then_some((openapi::V2_PROTOBUF[0], true)),
            });
            match chosen {
                Some((mime, protobuf)) => (Head::new(200, mime), if protobuf { docs.openapi_v2_protobuf(src) } else { docs.openapi_v2_json(src) }.clone()),
                None => error(&ApiError::not_acceptable(&[&["application/json"][..], &openapi::V2_PROTOBUF[..]].concat())),
            }
        }
        ["openapi", "v3"] => (Head::new(200, "application/json"), docs.v3(src).index.clone()),
        ["openapi", "v3", rest @ ..] => {
            let key = rest.join("/");
            let V3Doc { hash, body: doc, .. } = docs.v3(src).docs.get(&key)?;
            match query.get("hash") {
                Some(h) if h != hash => (Head::new(301, "text/plain").with("Location", format!("/openapi/v3/{key}?hash={hash}")), Bytes::new()),
                Some(_) => (
                    Head::new(200, "application/json")
                        .with("Etag", format!("\"{hash}\""))
                        .with("Cache-Control", "public, immutable")
                        .with("Expires", "Thu, 01 Jan 2099 00:00:00 GMT"),
                    doc.clone(),
                ),
                None => (Head::new(200, "application/json").with("Etag", format!("\"{hash}\"")), doc.clone()),
            }
        }
        _ => return None,
    })
}

fn aggregated_answer(docs: &DiscoveryDocs, legacy: bool, version: &'static str) -> Answer {
    let ct = format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList");
    (Head::new(200, &ct).with("Vary", "Accept"), docs.aggregated[&(legacy, version)].clone())
}
