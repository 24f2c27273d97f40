//! Built-in controllers, so that kapi alone behaves like a cluster for everyday work. They are
//! the parts of kube-controller-manager a client notices first:
//! - `serviceaccount`: every namespace gets a `default` service account (pods need one);
//! - `root-ca-cert-publisher`: every namespace gets the `kube-root-ca.crt` configmap;
//! - `serviceaccount-token`: Secrets of type `kubernetes.io/service-account-token` get their
//!   account's legacy token (`tokens.rs`), when the server signs service account tokens;
//! - `resourcequota`: ResourceQuotas' `status` says what their namespace uses
//!   (`resource_quota.rs`);
//! - `validatingadmissionpolicy-status-controller`: ValidatingAdmissionPolicies' `status`
//!   gets the warnings of kube's type check (`policy_status.rs`);
//! - `namespace`: a deleted namespace is emptied, then its `kubernetes` finalizer is removed so
//!   it goes away. Pods bound to nodes that do not exist are deleted at once, as kube's pod
//!   garbage collector does (no kubelet will ever finish them).
//!
//!
//! Whatever `--controllers` says, the apiextensions server's controllers run (`crds.rs`): every
//! CustomResourceDefinition gets its `acceptedNames`, `NamesAccepted` and `Established`, which
//! is what makes its resources served, and a deleted one its resources deleted first; and so
//! does the aggregator's availability controller (`apiservices.rs`), and, once the shell asks
//! for it, the publisher of `extension-apiserver-authentication` (`authentication_trust.rs`).
//!
//! They are API clients: every read and write is an HTTP request through the request pipeline
//! with the server's loopback token, exactly as kube-controller-manager would make from outside.
//! Namespaces, the `default` service accounts and the root CA configmaps are followed with
//! [`Reflector`]s: a deleted account or configmap is made again, a changed bundle put back.
//!
//! Call order: [`Controllers::new`]; drain [`Controllers::poll`] and send each request; feed
//! each answer back as [`ControllerEvent::Head`], any number of [`ControllerEvent::Body`]
//! chunks and [`ControllerEvent::End`] (a probe of an extension server that got no answer:
//! [`ControllerEvent::Failed`]); call `poll` again after each event and at
//! [`Controllers::poll_timeout`].

mod aggregation;
mod apiservices;
mod authentication_trust;
mod crd_registration;
mod crds;
mod namespace;
mod namespace_steps;
mod policy_status;
mod reflector;
mod resource_quota;
mod tokens;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;
use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use self::aggregation::{Aggregation, CLUSTER_ROLES};
use self::apiservices::{API_SERVICES, ApiStep};
pub use self::authentication_trust::AuthenticationTrust;
use self::authentication_trust::Publishing;
use self::authentication_trust::TrustStep;
pub use self::crds::CLEANUP_FINALIZER;
use self::crds::{CRDS, CrdStep};
use self::namespace::Collection;
use self::namespace_steps::Step;
use self::policy_status::{POLICIES, PolicyStatus};
pub use self::reflector::{Change, Get, Reflector};
use self::resource_quota::{QUOTAS, QuotaStep, Quotas};
use self::tokens::{TOKEN_SECRETS, TokenStep, Tokens};
use crate::catalog::Catalog;
use crate::pipeline::Request;

/// How long after a pass a namespace that is still emptying is looked at again; each further
/// pass waits twice as long, up to [`MAX_RETRY`].
pub const RETRY: SignedDuration = SignedDuration::from_secs(2);
pub const MAX_RETRY: SignedDuration = SignedDuration::from_secs(32);

/// How long after a failed write the CRD versions' APIServices are looked at again.
const REGISTRATION_RETRY: SignedDuration = SignedDuration::from_secs(5);

/// The finalizer the namespace controller owns.
const FINALIZER: &str = "kubernetes";

/// Which controllers run (`--controllers`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enabled {
    pub service_accounts: bool,
    pub service_account_tokens: bool,
    pub root_ca: bool,
    pub namespaces: bool,
    pub cluster_role_aggregation: bool,
    pub resource_quota: bool,
    pub policy_status: bool,
}

impl Enabled {
    pub const ALL: Enabled = Enabled {
        service_accounts: true,
        service_account_tokens: true,
        root_ca: true,
        namespaces: true,
        cluster_role_aggregation: true,
        resource_quota: true,
        policy_status: true,
    };
    pub const NONE: Enabled = Enabled {
        service_accounts: false,
        service_account_tokens: false,
        root_ca: false,
        namespaces: false,
        cluster_role_aggregation: false,
        resource_quota: false,
        policy_status: false,
    };

    /// Parses `--controllers`: `*` (all), `none`, or a comma-separated list of names, as
    /// kube-controller-manager's flag of the same name (without its `-name` negation).
    pub fn parse(s: &str) -> Result<Enabled, String> {
        let mut e = Enabled::NONE;
        for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name {
                "*" => e = Enabled::ALL,
                "none" => e = Enabled::NONE,
                "serviceaccount" => e.service_accounts = true,
                "serviceaccount-token" => e.service_account_tokens = true,
                "root-ca-cert-publisher" => e.root_ca = true,
                "namespace" => e.namespaces = true,
                "clusterrole-aggregation" => e.cluster_role_aggregation = true,
                "resourcequota" => e.resource_quota = true,
                "validatingadmissionpolicy-status-controller" => e.policy_status = true,
                other => {
                    return Err(format!(
                        "unknown controller {other:?}: known are serviceaccount, serviceaccount-token, root-ca-cert-publisher, namespace, clusterrole-aggregation, resourcequota, validatingadmissionpolicy-status-controller"
                    ));
                }
            }
        }
        Ok(e)
    }

    /// Whether any of the controllers that follow namespaces runs.
    pub fn any(&self) -> bool {
        self.service_accounts || self.root_ca || self.namespaces
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RequestId(pub u64);

#[derive(Debug)]
pub enum ControllerEvent {
    /// The status code of the answer to a request.
    Head { id: RequestId, status: u16 },
    /// A piece of its body.
    Body { id: RequestId, chunk: Bytes },
    /// The body is complete (or the stream ended).
    End { id: RequestId },
    /// A [`ControllerEffect::Probe`] got no answer: the transport's error.
    Failed { id: RequestId, error: String },
}

#[derive(Debug)]
pub enum ControllerEffect {
    /// Send this request through the pipeline and feed back its answer.
    Request { id: RequestId, request: Request },
    /// Send this request to an extension server (with the front-proxy client certificate,
    /// within 5 seconds) and feed back its answer, or [`ControllerEvent::Failed`].
    Probe { id: RequestId, request: Box<crate::aggregator::ProxyRequest> },
    /// What the extension server of `group`/`version` serves: serve it in discovery and
    /// OpenAPI (`Served::with_discovered`).
    Discovered { group: String, version: String, discovery: crate::aggregator::Discovery },
}

/// What a reflector follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Watched {
    Namespaces,
    /// Every namespace's `default` service account.
    ServiceAccounts,
    /// Every namespace's `kube-root-ca.crt` configmap.
    RootCas,
    /// CustomResourceDefinitions.
    Crds,
    ApiServices,
    /// Services and Endpoints, which the APIServices backed by them are checked again on.
    ServicesOfApiServices,
    ClusterRoles,
    /// Secrets of type `kubernetes.io/service-account-token`, for the tokens controller.
    TokenSecrets,
    /// Every service account, for the tokens controller.
    TokenAccounts,
    ResourceQuotas,
    ValidatingAdmissionPolicies,
    /// A collection quotas count (its index among those followed).
    Counted(usize),
}

const ROOT_CA: &str = "kube-root-ca.crt";

/// Who a request is for.
enum Asker {
    Reflector(usize),
    Namespace {
        name: String,
        step: Step,
        status: u16,
        body: Vec<u8>,
    },
    Crd {
        name: String,
        step: CrdStep,
        status: u16,
        body: Vec<u8>,
    },
    ApiService {
        name: String,
        step: ApiStep,
        status: u16,
        body: Vec<u8>,
    },
    Trust {
        step: TrustStep,
        status: u16,
        body: Vec<u8>,
    },
    /// A request of the tokens controller's for a token Secret (namespace and name).
    Tokens {
        key: (String, String),
        step: TokenStep,
        status: u16,
        body: Vec<u8>,
    },
    /// A request of the resourcequota controller's, counting a namespace's quotas.
    Quota {
        ns: String,
        step: QuotaStep,
        status: u16,
        body: Vec<u8>,
    },
    /// A write of an aggregated ClusterRole's rules.
    Aggregation {
        name: String,
        status: u16,
    },
    /// A write of a CRD version's APIService; its answer is no news (the watch brings it),
    /// unless it failed.
    Registration {
        name: String,
        status: u16,
    },
    /// A write of a ValidatingAdmissionPolicy's status.
    PolicyStatus {
        name: String,
        status: u16,
    },
}

pub struct Controllers {
    enabled: Enabled,
    ca_pem: String,
    token: String,
    /// The catalog served, which policies are type checked with.
    catalog: Catalog,
    collections: Vec<Collection>,
    reflectors: Vec<(Watched, Reflector)>,
    namespaces: BTreeMap<String, Value>,
    /// CustomResourceDefinitions by name, as last seen.
    crds: BTreeMap<String, Value>,
    /// The status last written for each CRD's names.
    crd_written: BTreeMap<String, Value>,
    /// The requests left per CRD; one in flight per CRD.
    crd_work: BTreeMap<String, VecDeque<CrdStep>>,
    /// CRDs being deleted whose resources are looked for again, and when.
    crd_retry: BTreeMap<String, Timestamp>,
    /// APIServices by name, as last seen.
    api_services: BTreeMap<String, Value>,
    /// When each APIService backed by a Service is checked next.
    api_checks: BTreeMap<String, Timestamp>,
    /// The clusterrole-aggregation controller's state.
    aggregation: Aggregation,
    /// The resourcequota controller's state.
    quotas: Quotas,
    /// The validatingadmissionpolicy-status-controller's state.
    policy_status: PolicyStatus,
    /// The tokens controller's state, once it has a key to sign with.
    tokens: Option<Tokens>,
    /// What this server publishes in `extension-apiserver-authentication`, and when it looks next.
    trust: Option<Publishing>,
    /// When the CRD versions' APIServices are brought in line again after a write failed.
    registration_retry: Option<Timestamp>,
    /// The work left per namespace; one request in flight per namespace.
    work: BTreeMap<String, VecDeque<Step>>,
    /// Namespaces that changed while a request for them was in flight: plan again after it.
    stale: BTreeSet<String>,
    in_flight: BTreeMap<RequestId, Asker>,
    /// Namespaces to look at again, and when.
    retry: BTreeMap<String, Timestamp>,
    /// The wait after the next pass that leaves content behind.
    backoff: BTreeMap<String, SignedDuration>,
    effects: VecDeque<ControllerEffect>,
    next_id: u64,
}

impl Controllers {
    /// `token` authenticates the controllers (the server's loopback token); `ca_pem` is what
    /// `kube-root-ca.crt` publishes.
    pub fn new(enabled: Enabled, catalog: &Catalog, token: &str, ca_pem: &str, now: Timestamp) -> Controllers {
        let mut reflectors = vec![
            (Watched::Crds, Reflector::new(CRDS, "", now)),
            (Watched::ApiServices, Reflector::new(API_SERVICES, "", now)),
            (Watched::ServicesOfApiServices, Reflector::new("/api/v1/services", "", now)),
            (Watched::ServicesOfApiServices, Reflector::new("/api/v1/endpoints", "", now)),
        ];
        if enabled.any() {
            reflectors.push((Watched::Namespaces, Reflector::new("/api/v1/namespaces", "", now)));
        }
        if enabled.service_accounts {
            reflectors.push((Watched::ServiceAccounts, Reflector::new("/api/v1/serviceaccounts", "fieldSelector=metadata.name%3Ddefault", now)));
        }
        if enabled.cluster_role_aggregation {
            reflectors.push((Watched::ClusterRoles, Reflector::new(CLUSTER_ROLES, "", now)));
        }
        if enabled.resource_quota {
            reflectors.push((Watched::ResourceQuotas, Reflector::new(QUOTAS, "", now)));
        }
        if enabled.policy_status {
            reflectors.push((Watched::ValidatingAdmissionPolicies, Reflector::new(POLICIES, "", now)));
        }
        if enabled.root_ca {
            reflectors.push((Watched::RootCas, Reflector::new("/api/v1/configmaps", &format!("fieldSelector=metadata.name%3D{ROOT_CA}"), now)));
        }
        Controllers {
            enabled,
            ca_pem: ca_pem.to_string(),
            token: token.to_string(),
            catalog: catalog.clone(),
            collections: namespace::collections(catalog),
            reflectors,
            namespaces: BTreeMap::new(),
            crds: BTreeMap::new(),
            crd_written: BTreeMap::new(),
            crd_work: BTreeMap::new(),
            crd_retry: BTreeMap::new(),
            api_services: BTreeMap::new(),
            api_checks: BTreeMap::new(),
            aggregation: Aggregation::default(),
            quotas: Quotas::default(),
            policy_status: PolicyStatus::default(),
            tokens: None,
            trust: None,
            registration_retry: None,
            work: BTreeMap::new(),
            stale: BTreeSet::new(),
            in_flight: BTreeMap::new(),
            retry: BTreeMap::new(),
            backoff: BTreeMap::new(),
            effects: VecDeque::new(),
            next_id: 0,
        }
    }

    /// Runs the `serviceaccount-token` controller, if enabled and the server signs service
    /// account tokens, with the server's key (kube-controller-manager's
    /// `--service-account-private-key-file`).
    pub fn sign_legacy_tokens(&mut self, config: Option<&crate::serviceaccount::TokenConfig>, now: Timestamp) {
        let Some(config) = config.filter(|_| self.enabled.service_account_tokens) else { return };
        self.tokens = Some(Tokens::new(config.signing_key.clone()));
        self.reflectors.push((Watched::TokenSecrets, Reflector::new("/api/v1/secrets", TOKEN_SECRETS, now)));
        self.reflectors.push((Watched::TokenAccounts, Reflector::new("/api/v1/serviceaccounts", "", now)));
    }

    /// The server serves another catalog: namespaces are emptied of its collections (custom
    /// resources come and go with their CRDs).
    pub fn catalog_changed(&mut self, catalog: &Catalog) {
        self.catalog = catalog.clone();
        self.collections = namespace::collections(catalog);
        self.quotas.refollow = true;
    }

    fn send(&mut self, asker: Asker, method: &str, path: String, query: &str, body: Option<Value>) {
        self.next_id += 1;
        let id = RequestId(self.next_id);
        let mut headers = vec![
            ("Authorization".to_string(), format!("Bearer {}", self.token)),
            // The apiextensions controllers are kube-apiserver's own (their managedFields say so).
            ("User-Agent".to_string(), if matches!(asker, Asker::Crd { .. }) { "kube-apiserver/kapi" } else { "kube-controller-manager/kapi" }.to_string()),
            ("Accept".to_string(), "application/json".to_string()),
        ];
        if body.is_some() {
            // A PATCH is a server-side apply.
            let content_type = if method == "PATCH" { "application/apply-patch+yaml" } else { "application/json" };
            headers.push(("Content-Type".into(), content_type.into()));
        }
        let body = body.map(|b| Bytes::from(serde_json::to_vec(&b).expect("JSON trees serialize"))).unwrap_or_default();
        let request = Request { method: method.into(), path, query: query.into(), headers, body, ..Default::default() };
        self.in_flight.insert(id, asker);
        self.effects.push_back(ControllerEffect::Request { id, request });
    }

    pub fn handle(&mut self, now: Timestamp, event: ControllerEvent) {
        // CRDs or APIServices changed, or were listed for the first time.
        let mut registrations_changed = false;
        match event {
            ControllerEvent::Head { id, status: code } => match self.in_flight.get_mut(&id) {
                Some(Asker::Reflector(i)) => self.reflectors[*i].1.head(code),
                Some(
                    Asker::Namespace { status, .. }
                    | Asker::Crd { status, .. }
                    | Asker::ApiService { status, .. }
                    | Asker::Trust { status, .. }
                    | Asker::Tokens { status, .. }
                    | Asker::Quota { status, .. }
                    | Asker::Aggregation { status, .. }
                    | Asker::Registration { status, .. }
                    | Asker::PolicyStatus { status, .. },
                ) => *status = code,
                None => {}
            },
            ControllerEvent::Body { id, chunk } => match self.in_flight.get_mut(&id) {
                Some(Asker::Reflector(i)) => self.reflectors[*i].1.body(&chunk),
                Some(
                    Asker::Namespace { body, .. }
                    | Asker::Crd { body, .. }
                    | Asker::ApiService { body, .. }
                    | Asker::Trust { body, .. }
                    | Asker::Tokens { body, .. }
                    | Asker::Quota { body, .. },
                ) => body.extend_from_slice(&chunk),
                Some(Asker::Registration { .. } | Asker::Aggregation { .. } | Asker::PolicyStatus { .. }) | None => {}
            },
            ControllerEvent::End { id } => match self.in_flight.remove(&id) {
                Some(Asker::Reflector(i)) => {
                    let (watched, reflector) = &mut self.reflectors[i];
                    let was_listed = reflector.listed();
                    reflector.end(now);
                    registrations_changed |= !was_listed && reflector.listed() && matches!(watched, Watched::Crds | Watched::ApiServices);
                }
                Some(Asker::Namespace { name, step, status, body }) => {
                    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    self.answered(now, &name, step, status, body);
                    if !self.busy(&name) {
                        if self.stale.remove(&name) {
                            self.replan(&name);
                        } else {
                            self.next_step(&name);
                        }
                    }
                }
                Some(Asker::Crd { name, step, status, body }) => {
                    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    self.crd_answered(now, &name, step, status, body);
                }
                Some(Asker::ApiService { name, step, status, body }) => self.api_service_answered(now, &name, step, status, &body),
                Some(Asker::Trust { step, status, body }) => self.trust_answered(now, step, status, &body),
                Some(Asker::Tokens { key, step, status, body }) => self.token_answered(now, key, step, status, &body),
                Some(Asker::Quota { ns, step, status, body }) => self.quota_answered(now, &ns, step, status, &body),
                Some(Asker::Registration { status, .. }) if !(200..300).contains(&status) => {
                    self.registration_retry = Some(now + REGISTRATION_RETRY);
                }
                Some(Asker::Registration { .. }) => {}
                Some(Asker::Aggregation { name, status }) => self.aggregation_answered(now, &name, status),
                Some(Asker::PolicyStatus { name, status }) => self.policy_status_answered(now, &name, status),
                None => {}
            },
            ControllerEvent::Failed { id, error } => {
                if let Some(Asker::ApiService { name, step, .. }) = self.in_flight.remove(&id) {
                    self.api_service_unreachable(now, &name, step, &error);
                }
            }
        }
        for i in 0..self.reflectors.len() {
            while let Some(change) = self.reflectors[i].1.poll_change() {
                registrations_changed |= matches!(self.reflectors[i].0, Watched::Crds | Watched::ApiServices);
                match self.reflectors[i].0 {
                    Watched::Namespaces => self.changed(change),
                    Watched::ServiceAccounts => self.dependent_changed(change, None),
                    Watched::RootCas => {
                        let fix = self.corrected_root_ca(&change);
                        self.dependent_changed(change, fix);
                    }
                    Watched::Crds => self.crd_changed(now, change),
                    Watched::ApiServices => self.api_service_changed(now, change),
                    Watched::ServicesOfApiServices => self.service_changed(now, &change),
                    Watched::ClusterRoles => self.cluster_role_changed(change),
                    Watched::TokenSecrets => self.token_secret_changed(change),
                    Watched::TokenAccounts => self.token_account_changed(change),
                    Watched::ResourceQuotas => self.quota_changed(now, change),
                    Watched::ValidatingAdmissionPolicies => self.policy_changed(change),
                    Watched::Counted(index) => self.counted_changed(index, change),
                }
            }
        }
        // Only on news: a write that failed waits for the next change rather than repeating.
        if registrations_changed {
            self.register_crd_versions();
        }
    }

    pub fn poll(&mut self, now: Timestamp) -> Option<ControllerEffect> {
        for i in 0..self.reflectors.len() {
            if let Some(get) = self.reflectors[i].1.next_request(now) {
                self.send(Asker::Reflector(i), "GET", get.path, &get.query, None);
            }
        }
        self.crd_retries_due(now);
        self.api_service_checks_due(now);
        self.trust_due(now);
        if self.registration_retry.is_some_and(|at| at <= now) {
            self.registration_retry = None;
            self.register_crd_versions();
        }
        if self.aggregation.retry.is_some_and(|at| at <= now) {
            self.aggregation.retry = None;
            self.aggregate_all();
        }
        if self.policy_status.retry.is_some_and(|at| at <= now) {
            self.policy_status.retry = None;
            self.write_all_policy_statuses();
        }
        self.token_retries_due(now);
        self.quotas_due(now);
        // A namespace busy with its last requests keeps its retry until they are answered.
        let due: Vec<String> = self.retry.iter().filter(|(ns, at)| **at <= now && !self.busy(ns)).map(|(ns, _)| ns.clone()).collect();
        for ns in due {
            self.retry.remove(&ns);
            self.replan(&ns);
        }
        self.effects.pop_front()
    }

    pub fn poll_timeout(&self) -> Option<Timestamp> {
        // What waits for a request in flight is woken by its answer, not by the clock.
        self.retry
            .iter()
            .filter(|(ns, _)| !self.busy(ns))
            .map(|(_, at)| *at)
            .chain(self.crd_retry.values().copied())
            .chain(self.api_checks.values().copied())
            .chain(self.trust_wake())
            .chain(self.registration_retry)
            .chain(self.aggregation.retry)
            .chain(self.policy_status.retry)
            .chain(self.quotas.retry)
            .chain(self.quotas.resync)
            .chain(self.tokens.as_ref().and_then(Tokens::wake_at))
            .chain(self.reflectors.iter().filter_map(|(_, r)| r.wake_at()))
            .min()
    }
}
