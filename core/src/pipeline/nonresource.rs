//! Non-resource endpoints: `/version`, `/healthz`, `/livez`, `/readyz`, discovery and OpenAPI.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::{Value, json};

use super::Health;
use super::query::Query;
use super::respond::{Head, status_body};
use crate::aggregator::{self, ApiServices, Discovered};
use crate::catalog::Catalog;
use crate::codec::negotiate::parse_accept;
use crate::codec::{self, Format};
use crate::discovery;
use crate::openapi::{self, KUBE_VERSION};
use crate::status::ApiError;

/// The documents computed once per catalog.
pub struct Docs {
    api: Value,
    apis: Value,
    aggregated: BTreeMap<(bool, &'static str), Bytes>,
    openapi_v2: Bytes,
    openapi_v2_protobuf: Bytes,
    v3_index: Bytes,
    v3: BTreeMap<String, (String, Bytes)>,
}

impl Docs {
    pub fn new(server_address: &str, catalog: &crate::catalog::Catalog, apis: &ApiServices, discovered: &Discovered) -> Docs {
        let mut aggregated = BTreeMap::new();
        for v in ["v2", "v2beta1"] {
            aggregated.insert((true, v), kube_json(&discovery::aggregated(catalog, true, v)));
            aggregated.insert((false, v), kube_json(&aggregator::merged_aggregated(catalog, apis, discovered, v)));
        }
        let v2 = openapi::v2(catalog);
        let v3_docs = openapi::v3_documents(catalog);
        let mut index = openapi::v3_index(&v3_docs);
        discovered.add_openapi_paths(&mut index, apis);
        let v3_index = json_bytes(&index);
        let v3 = v3_docs.iter().map(|(k, d)| (k.clone(), (openapi::hash(d), json_bytes(d)))).collect();
        Docs {
            api: discovery::api_versions(server_address),
            apis: aggregator::merged_group_list(catalog, apis),
            aggregated,
            openapi_v2: json_bytes(&v2),
            openapi_v2_protobuf: Bytes::from(openapi::v2_protobuf(&v2)),
            v3_index,
            v3,
        }
    }
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
fn checks(which: &str, health: &Health) -> Vec<(&'static str, Result<(), String>)> {
    let mut c = vec![("ping", Ok(())), ("log", Ok(())), ("etcd", health.storage.clone())];
    if which == "readyz" {
        c.push(("etcd-readiness", health.storage.clone()));
        c.push(("informer-sync", if health.caches_ready { Ok(()) } else { Err("caches are not synced".into()) }));
    }
    c.push(("poststarthook/start-apiserver-admission-initializer", Ok(())));
    c.push(("poststarthook/bootstrap-controller", if health.bootstrapped { Ok(()) } else { Err("not finished".into()) }));
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
}

impl HealthRequest {
    pub fn of(method: &str, path: &str) -> Option<HealthRequest> {
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
        Some(HealthRequest { which, single: (!rest.is_empty()).then(|| rest.join("/")) })
    }

    pub fn answer(&self, query: &Query, health: &Health) -> Answer {
        health_answer(self.which, self.single.as_deref(), query, health)
    }
}

fn health_answer(which: &str, single: Option<&str>, query: &Query, health: &Health) -> Answer {
    let all = checks(which, health);
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

/// Answers a non-resource request other than a [`HealthRequest`], or `None` for paths that are
/// not one.
pub fn answer(catalog: &Catalog, apis: &ApiServices, docs: &Docs, method: &str, path: &str, query: &Query, accept: Option<&str>) -> Option<Answer> {
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
            Some(v) => aggregated_answer(docs, true, v),
            None => discovery_answer(docs.api.clone(), "v1", "APIVersions", accept),
        },
        ["apis"] => match aggregated_version(accept) {
            Some(v) => aggregated_answer(docs, false, v),
            None => discovery_answer(docs.apis.clone(), "v1", "APIGroupList", accept),
        },
        ["api", "v1"] => discovery_answer(discovery::resource_list(catalog, "", "v1")?, "v1", "APIResourceList", accept),
        ["apis", group] => {
            let document = aggregator::group_document(catalog, apis, group).or_else(|| discovery::group_document(catalog, group))?;
            discovery_answer(document, "v1", "APIGroup", accept)
        }
        ["apis", group, version] => discovery_answer(discovery::resource_list(catalog, group, version)?, "v1", "APIResourceList", accept),
        ["openapi", "v2"] => {
            let chosen = parse_accept(accept.unwrap_or("application/json")).into_iter().find_map(|r| match r.mime.as_str() {
                "application/json" | "*/*" | "application/*" => Some(("application/json", &docs.openapi_v2)),
                // Either spelling is answered under the current one, as kube-openapi does.
                m => openapi::V2_PROTOBUF.contains(&m).then_some((openapi::V2_PROTOBUF[0], &docs.openapi_v2_protobuf)),
            });
            match chosen {
                Some((mime, body)) => (Head::new(200, mime), body.clone()),
                None => error(&ApiError::not_acceptable(&[&["application/json"][..], &openapi::V2_PROTOBUF[..]].concat())),
            }
        }
        ["openapi", "v3"] => (Head::new(200, "application/json"), docs.v3_index.clone()),
        ["openapi", "v3", rest @ ..] => {
            let key = rest.join("/");
            let (hash, doc) = docs.v3.get(&key)?;
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

fn aggregated_answer(docs: &Docs, legacy: bool, version: &'static str) -> Answer {
    let ct = format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList");
    (Head::new(200, &ct).with("Vary", "Accept"), docs.aggregated[&(legacy, version)].clone())
}
