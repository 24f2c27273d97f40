//! kube-aggregator: the server in front of kube-apiserver that serves whole group versions
//! from extension API servers. An APIService with a `service` hands its group version to the
//! server behind that Service: its requests are proxied there (`proxy.rs`), its group is in
//! discovery (`discovery.rs`), and kapi's availability controller keeps its `Available`
//! condition, without which its requests answer 503 (`controllers/apiservices.rs`).
//!
//! [`ApiServices`] is what the server knows of them at one time: read from the APIService
//! watch cache's state, held in the `Served` that requests read, swapped whole on a change.

mod discovery;
mod openapi;
mod proxy;

use std::collections::BTreeMap;

use base64::Engine;
use serde_json::Value;

use crate::meta;

pub use discovery::{Discovered, Discovery, group_document, merged_aggregated, merged_group_list, resources_of};
pub use openapi::OpenApiV2;
pub use proxy::{ProxyHead, ProxyRequest, ProxyTarget, answer_head, is_upgrade, outbound_headers, resolve, resolve_service, unavailable};

/// Where an APIService's Service is: `spec.service`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceRef {
    pub namespace: String,
    pub name: String,
    pub port: i64,
}

/// One APIService backed by a Service (a local one is the catalog's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiService {
    pub name: String,
    pub group: String,
    pub version: String,
    pub group_priority: i64,
    pub version_priority: i64,
    pub service: ServiceRef,
    /// `spec.caBundle` (PEM), if any.
    pub ca_bundle: Option<String>,
    pub insecure_skip_tls_verify: bool,
    /// Its `Available` condition is `True`.
    pub available: bool,
}

impl ApiService {
    /// The APIService `obj`, if it names a Service.
    pub fn read(obj: &Value) -> Option<ApiService> {
        let svc = meta::at(obj, &["spec", "service"]).filter(|s| s.is_object())?;
        let int = |path: &[&str]| meta::at(obj, path).and_then(Value::as_i64).unwrap_or(0);
        let available = meta::at(obj, &["status", "conditions"])
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|c| c.get("type").and_then(Value::as_str) == Some("Available") && c.get("status").and_then(Value::as_str) == Some("True"));
        let ca_bundle = meta::str_at(obj, &["spec", "caBundle"])
            .filter(|b| !b.is_empty())
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .map(|pem| String::from_utf8_lossy(&pem).into_owned());
        Some(ApiService {
            name: meta::name(obj).to_string(),
            group: meta::str_at(obj, &["spec", "group"]).unwrap_or_default().to_string(),
            version: meta::str_at(obj, &["spec", "version"]).unwrap_or_default().to_string(),
            group_priority: int(&["spec", "groupPriorityMinimum"]),
            version_priority: int(&["spec", "versionPriority"]),
            service: ServiceRef {
                namespace: svc.get("namespace").and_then(Value::as_str).unwrap_or_default().to_string(),
                name: svc.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
                port: svc.get("port").and_then(Value::as_i64).unwrap_or(443),
            },
            ca_bundle,
            insecure_skip_tls_verify: meta::at(obj, &["spec", "insecureSkipTLSVerify"]).and_then(Value::as_bool).unwrap_or(false),
            available,
        })
    }
}

/// The Service-backed APIServices, by group and version.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiServices {
    by_group_version: BTreeMap<(String, String), ApiService>,
}

impl ApiServices {
    /// Those among `objects` (APIServices) that name a Service, except for the aggregator's own
    /// group, which kube serves before any proxy (so no APIService can take it over).
    pub fn read<'a>(objects: impl IntoIterator<Item = &'a Value>) -> ApiServices {
        let by_group_version = objects
            .into_iter()
            .filter_map(ApiService::read)
            .filter(|a| a.group != "apiregistration.k8s.io")
            .map(|a| ((a.group.clone(), a.version.clone()), a))
            .collect();
        ApiServices { by_group_version }
    }

    pub fn is_empty(&self) -> bool {
        self.by_group_version.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &ApiService> {
        self.by_group_version.values()
    }

    /// The APIService a request path belongs to: `/apis/<group>/<version>` and below, and
    /// its OpenAPI v3 document `/openapi/v3/apis/<group>/<version>` (the core group's
    /// `/api/v1` is never an extension server's).
    pub fn route(&self, path: &str) -> Option<&ApiService> {
        if self.by_group_version.is_empty() {
            return None;
        }
        let rest = path.strip_prefix("/apis/").or_else(|| path.strip_prefix("/openapi/v3/apis/"))?;
        let mut parts = rest.splitn(3, '/');
        let (group, version) = (parts.next()?, parts.next()?);
        if group.is_empty() || version.is_empty() {
            return None;
        }
        self.by_group_version.get(&(group.to_string(), version.to_string()))
    }
}

#[cfg(test)]
mod tests;
