//! kube-aggregator's availability controller, which runs whatever `--controllers` says: every
//! APIService backed by a Service gets its `Available` condition from a check of that Service
//! (present, listening on the port, with endpoints for a ClusterIP Service) and of the
//! extension server's discovery answer (`GET /apis/<group>/<version>`, any 2xx), on every
//! change of it, of its Service or of the Service's Endpoints, and every 30 seconds, with
//! kube's reasons and messages. Requests for its group
//! version answer 503 while it is not `True`. What the discovery answer lists is what
//! aggregated discovery shows of the group version (kube's discovery manager asks the same
//! server once a minute); a failed check shows it stale.

use bytes::Bytes;
use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use super::{Asker, ControllerEffect, Controllers, RequestId};
use crate::aggregator::{self, ApiService, Discovery, ProxyRequest, ProxyTarget};
use crate::apiextensions::naming::set_condition;
use crate::controllers::reflector::Change;
use crate::meta;
use crate::validation::dns1123_subdomain;

pub(super) const API_SERVICES: &str = "/apis/apiregistration.k8s.io/v1/apiservices";
/// How often each APIService is checked again.
const RECHECK: SignedDuration = SignedDuration::from_secs(30);
/// How soon a check due while the last is under way is tried again.
const BUSY_RETRY: SignedDuration = SignedDuration::from_secs(1);

/// A request of the availability controller.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum ApiStep {
    Service,
    /// The Service's endpoints, for its port named so.
    Endpoints {
        service: Value,
        port_name: String,
    },
    /// The extension server's discovery answer at `url`.
    Discovery {
        url: String,
        target: Box<ProxyTarget>,
    },
    /// Then its OpenAPI v3 index, to learn where its document is.
    OpenApi {
        resources: Option<Vec<Value>>,
        target: Box<ProxyTarget>,
    },
    /// Then its OpenAPI v2 document, to merge into kapi's.
    OpenApiV2 {
        resources: Option<Vec<Value>>,
        openapi: Option<String>,
    },
    Write,
}

/// What a check found: `Available`'s status, reason and message.
type Verdict = (&'static str, &'static str, String);

impl Controllers {
    /// An APIService is checked when it comes and when its spec changes; a change of its
    /// status alone (the controller's own writes) waits for the periodic check, so that a
    /// server whose answers flap is not probed again and again at once.
    pub(super) fn api_service_changed(&mut self, now: Timestamp, change: Change) {
        let name = meta::name(&change.object).to_string();
        if change.deleted {
            self.api_services.remove(&name);
            self.api_checks.remove(&name);
            return;
        }
        let status_only = self.api_services.get(&name).is_some_and(|known| known.get("spec") == change.object.get("spec"));
        self.api_services.insert(name.clone(), change.object);
        if !status_only {
            self.check_api_service(now, &name);
        }
    }

    /// A Service or its Endpoints changed: the APIServices backed by it are checked again.
    pub(super) fn service_changed(&mut self, now: Timestamp, change: &Change) {
        let (namespace, name) = (meta::namespace(&change.object), meta::name(&change.object));
        let backed: Vec<String> = self
            .api_services
            .iter()
            .filter(|(_, a)| {
                meta::str_at(a, &["spec", "service", "namespace"]) == Some(namespace) && meta::str_at(a, &["spec", "service", "name"]) == Some(name)
            })
            .map(|(n, _)| n.clone())
            .collect();
        for api_service in backed {
            self.check_api_service(now, &api_service);
        }
    }

    fn api_service_busy(&self, name: &str) -> bool {
        self.in_flight.values().any(|a| matches!(a, Asker::ApiService { name: n, .. } if n == name))
    }

    /// Starts a check of `name`; one under way is looked at again a while later.
    fn check_api_service(&mut self, now: Timestamp, name: &str) {
        if self.api_service_busy(name) {
            self.api_checks.insert(name.to_string(), now + BUSY_RETRY);
            return;
        }
        let Some(api) = self.api_services.get(name).and_then(ApiService::read) else {
            self.api_checks.remove(name);
            return;
        };
        self.api_checks.insert(name.to_string(), now + RECHECK);
        let svc = &api.service;
        // A name no Service can have is found by no lookup (and never spliced into a path).
        if !dns1123_subdomain(&svc.namespace).is_empty() || !dns1123_subdomain(&svc.name).is_empty() {
            let verdict = ("False", "ServiceNotFound", format!("service/{} in {:?} is not present", svc.name, svc.namespace));
            return self.conclude(now, name, verdict);
        }
        let path = format!("/api/v1/namespaces/{}/services/{}", api.service.namespace, api.service.name);
        self.send(Asker::ApiService { name: name.to_string(), step: ApiStep::Service, status: 0, body: Vec::new() }, "GET", path, "", None);
    }

    /// The checks due now.
    pub(super) fn api_service_checks_due(&mut self, now: Timestamp) {
        let due: Vec<String> = self.api_checks.iter().filter(|(_, at)| **at <= now).map(|(n, _)| n.clone()).collect();
        for name in due {
            self.check_api_service(now, &name);
        }
    }

    pub(super) fn api_service_answered(&mut self, now: Timestamp, name: &str, step: ApiStep, status: u16, body: &[u8]) {
        let Some(api) = self.api_services.get(name).and_then(ApiService::read) else { return };
        let svc = &api.service;
        let asker = |step: ApiStep| Asker::ApiService { name: name.to_string(), step, status: 0, body: Vec::new() };
        let verdict: Verdict = match step {
            // What a write answers is the APIService now: the next verdict compares with it.
            ApiStep::Write => {
                if let Some(object) = serde_json::from_slice(body).ok().filter(|_| status == 200) {
                    self.api_services.insert(name.to_string(), object);
                }
                return;
            }
            ApiStep::Service => {
                let service: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
                match status {
                    404 => ("False", "ServiceNotFound", format!("service/{} in {:?} is not present", svc.name, svc.namespace)),
                    200 => {
                        if meta::str_at(&service, &["spec", "type"]).unwrap_or("ClusterIP") != "ClusterIP" {
                            return self.check_discovery(now, name, &api, &service);
                        }
                        let ports = meta::at(&service, &["spec", "ports"]).and_then(Value::as_array).cloned().unwrap_or_default();
                        match ports.iter().find(|p| p.get("port").and_then(Value::as_i64) == Some(svc.port)) {
                            None => ("False", "ServicePortError", format!("service/{} in {:?} is not listening on port {}", svc.name, svc.namespace, svc.port)),
                            Some(p) => {
                                let port_name = p.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
                                let path = format!("/api/v1/namespaces/{}/endpoints/{}", svc.namespace, svc.name);
                                return self.send(asker(ApiStep::Endpoints { service, port_name }), "GET", path, "", None);
                            }
                        }
                    }
                    _ => (
                        "Unknown",
                        "ServiceAccessError",
                        format!("service/{} in {:?} cannot be checked due to: {}", svc.name, svc.namespace, status_message(body)),
                    ),
                }
            }
            ApiStep::Endpoints { service, port_name } => {
                let endpoints: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
                match status {
                    404 => ("False", "EndpointsNotFound", format!("cannot find endpoints for service/{} in {:?}", svc.name, svc.namespace)),
                    200 if has_addresses(&endpoints, &port_name) => return self.check_discovery(now, name, &api, &service),
                    200 => (
                        "False",
                        "MissingEndpoints",
                        format!("endpoints for service/{} in {:?} have no addresses with port name {port_name:?}", svc.name, svc.namespace),
                    ),
                    _ => (
                        "Unknown",
                        "EndpointsAccessError",
                        format!("service/{} in {:?} cannot be checked due to: {}", svc.name, svc.namespace, status_message(body)),
                    ),
                }
            }
            ApiStep::OpenApi { resources, target } => {
                let index: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
                let key = format!("apis/{}/{}", api.group, api.version);
                let at = index.get("paths").and_then(|p| p.get(&key)).and_then(|d| d.get("serverRelativeURL")).and_then(Value::as_str);
                let openapi = at.filter(|_| status == 200).map(str::to_string);
                return self.probe(name, ApiStep::OpenApiV2 { resources, openapi }, *target, "/openapi/v2".into());
            }
            ApiStep::OpenApiV2 { resources, openapi } => {
                let openapi_v2 = (status == 200).then(|| aggregator::OpenApiV2::read(body, &api.group, &api.version)).flatten();
                return self.learned(&api, Discovery { resources, openapi, openapi_v2 });
            }
            ApiStep::Discovery { url, target } => match status {
                200..=299 => {
                    let list: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
                    let resources = list.get("resources").is_some().then(|| aggregator::resources_of(&list));
                    self.probe(name, ApiStep::OpenApi { resources, target: target.clone() }, *target, "/openapi/v3".into());
                    ("True", "Passed", "all checks passed".to_string())
                }
                _ => ("False", "FailedDiscoveryCheck", format!("failing or missing response from {url}: bad status from {url}: {status}")),
            },
        };
        self.conclude(now, name, verdict);
    }

    /// The extension server could not be reached for its discovery answer (or, after it, for
    /// its OpenAPI documents).
    pub(super) fn api_service_unreachable(&mut self, now: Timestamp, name: &str, step: ApiStep, error: &str) {
        match step {
            ApiStep::Discovery { url, .. } => {
                let message = format!("failing or missing response from {url}: Get {url:?}: {error}");
                self.conclude(now, name, ("False", "FailedDiscoveryCheck", message));
            }
            ApiStep::OpenApi { resources, .. } => {
                if let Some(api) = self.api_services.get(name).and_then(ApiService::read) {
                    self.learned(&api, Discovery { resources, ..Discovery::default() });
                }
            }
            ApiStep::OpenApiV2 { resources, openapi } => {
                if let Some(api) = self.api_services.get(name).and_then(ApiService::read) {
                    self.learned(&api, Discovery { resources, openapi, openapi_v2: None });
                }
            }
            ApiStep::Service | ApiStep::Endpoints { .. } | ApiStep::Write => {}
        }
    }

    /// What the extension server said goes into discovery and OpenAPI.
    fn learned(&mut self, api: &ApiService, discovery: Discovery) {
        self.effects.push_back(ControllerEffect::Discovered { group: api.group.clone(), version: api.version.clone(), discovery });
    }

    /// Sends a GET of `path` to the extension server at `target`, as kube's controller makes
    /// it: the certificate not checked, as `system:kube-aggregator` in `system:masters`.
    fn probe(&mut self, name: &str, step: ApiStep, target: ProxyTarget, path: String) {
        let headers = vec![
            (crate::auth::STANDARD_USERNAME.to_string(), "system:kube-aggregator".to_string()),
            (crate::auth::STANDARD_GROUP.to_string(), "system:masters".to_string()),
        ];
        let target = ProxyTarget { insecure_skip_tls_verify: true, ca_bundle: None, ..target };
        let request = ProxyRequest { target, method: "GET".into(), path_and_query: path, headers, body: Bytes::new(), upgrade: false };
        self.next_id += 1;
        let id = RequestId(self.next_id);
        self.in_flight.insert(id, Asker::ApiService { name: name.to_string(), step, status: 0, body: Vec::new() });
        self.effects.push_back(ControllerEffect::Probe { id, request: Box::new(request) });
    }

    /// Asks the extension server for its discovery answer.
    fn check_discovery(&mut self, now: Timestamp, name: &str, api: &ApiService, service: &Value) {
        let target = match aggregator::resolve(api, Some(service)) {
            Ok(t) => t,
            Err(e) => return self.conclude(now, name, ("False", "FailedDiscoveryCheck", e)),
        };
        // `v1.` is the core group's, at `/api/v1`.
        let path = if api.group.is_empty() { format!("/api/{}", api.version) } else { format!("/apis/{}/{}", api.group, api.version) };
        let url = format!("{}{path}", target.url);
        self.probe(name, ApiStep::Discovery { url, target: Box::new(target.clone()) }, target, path);
    }

    /// Writes the verdict into the APIService's `Available` condition, if it says something
    /// new (its transition time moves only when its status does).
    fn conclude(&mut self, now: Timestamp, name: &str, (status, reason, message): Verdict) {
        let Some(current) = self.api_services.get(name).cloned() else { return };
        if status != "True"
            && let Some(api) = ApiService::read(&current)
        {
            self.learned(&api, Discovery::default());
        }
        let mut next = current.clone();
        set_condition(&mut next, "Available", (status, reason, message), now);
        if next.get("status") == current.get("status") {
            return;
        }
        let asker = Asker::ApiService { name: name.to_string(), step: ApiStep::Write, status: 0, body: Vec::new() };
        self.send(asker, "PUT", format!("{API_SERVICES}/{name}/status"), "", Some(next));
    }
}

/// Whether an Endpoints object has a subset with an address and a port named `port_name`.
fn has_addresses(endpoints: &Value, port_name: &str) -> bool {
    let subsets = endpoints.get("subsets").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    subsets.iter().any(|s| {
        let addresses = s.get("addresses").and_then(Value::as_array).is_some_and(|a| !a.is_empty());
        let ports = s.get("ports").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        addresses && ports.iter().any(|p| p.get("name").and_then(Value::as_str).unwrap_or_default() == port_name)
    })
}

/// The message of a `Status` body, or the body itself.
fn status_message(body: &[u8]) -> String {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    match parsed.as_ref().and_then(|s| s.get("message")).and_then(Value::as_str) {
        Some(m) => m.to_string(),
        None => String::from_utf8_lossy(body).into_owned(),
    }
}
