//! kapi-sim: the core's machines (request pipeline, registry, watch caches, storage protocol)
//! driven in one thread against `kv::Model`, with time passed in.
//!
//! [`World`] is the deterministic shell: it runs requests to completion, fans store events out
//! to the watch caches, and collects watch streams. The simulator binary and the core's
//! integration tests are built on it.

pub mod fuzzing;
pub mod sim;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bytes::Bytes;
use jiff::{SignedDuration, Timestamp};
use kapi_core::aggregator::{ProxyHead, ProxyRequest};
use kapi_core::apiextensions::same_objects;
use kapi_core::auth::{Authenticator, TokenFile};
use kapi_core::authz::Authorizer;
use kapi_core::bootstrap::{Bootstrap, BootstrapEffect};
use kapi_core::cache::{CacheEffect, CacheEvent, DEFAULT_HISTORY, ReadId, ReadResult, WatchCache, WatcherId};
use kapi_core::catalog::{Catalog, Resource};
use kapi_core::controllers::{ControllerEffect, ControllerEvent, Controllers, Enabled, RequestId};
use kapi_core::kv::{KvRequest, KvResult, Model, WatchRequest, WatchResponse};
use kapi_core::pipeline::{Effect, Event, Head, Health, ProbeOutcome, Request, RequestMachine, Served, Server};
use kapi_core::resources::{Settings, catalog};
use kapi_core::serviceaccount::TokenConfig;
use kapi_core::serviceaccount::keys::SigningKey;
use kapi_core::status::ApiError;
use kapi_core::webhook::{WebhookAnswer, WebhookCall};

/// The bearer token of the simulated cluster's administrator (`system:masters`).
pub const ADMIN_TOKEN: &str = "admin-token";
/// The server's loopback token in a simulated world, used by the built-in controllers.
const LOOPBACK_TOKEN: &str = "loopback-token";
/// The CA bundle the simulated root-ca publisher publishes.
pub const SIM_CA: &str = "-----BEGIN CERTIFICATE-----\nsimulated\n-----END CERTIFICATE-----\n";

/// A resource's watch cache and the store watch feeding it.
struct Slot {
    cache: WatchCache,
    watch: Option<WatchRequest>,
}

/// A watch stream as a client sees it.
#[derive(Debug, Default)]
pub struct Stream {
    pub frames: Vec<Bytes>,
    pub closed: bool,
}

/// A response, read whole.
#[derive(Debug)]
pub struct Response {
    pub head: Head,
    pub body: Bytes,
    /// Set for watches: the stream to read with [`World::frames`].
    pub watch: Option<WatcherId>,
}

impl Response {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

pub struct World {
    /// The virtual time; it moves only by [`World::advance`], which stirs every cache.
    now: Timestamp,
    pub model: Model,
    pub server: Arc<Server>,
    /// What the server serves: every request of the world reads it.
    pub served: Arc<Served>,
    /// The built-in resources, which CRDs add to.
    builtins: Catalog,
    /// The CRD cache's revision last taken in.
    crds_seen: i64,
    /// What the controllers were last told the server serves.
    controllers_served: Arc<Served>,
    slots: BTreeMap<SlotKey, Slot>,
    /// The caches that may have something to do: handed an event since a poll last found
    /// them idle, or there when time moved (a cache does nothing new on its own otherwise).
    /// Only these are polled, as the server's cache tasks are only woken by their events and
    /// timers.
    stirred: BTreeSet<SlotKey>,
    streams: BTreeMap<WatcherId, Stream>,
    /// The cache each watch stream comes from.
    watch_slots: BTreeMap<WatcherId, SlotKey>,
    reads: BTreeMap<ReadId, Result<ReadResult, ApiError>>,
    next_id: u64,
    seed: u64,
    controllers: Option<Controllers>,
    /// The controllers' watch streams, and the request each answers.
    controller_watches: BTreeMap<WatcherId, RequestId>,
    /// The APIService cache's revision last taken in.
    api_services_seen: i64,
    /// What admission is configured by (webhook configurations, policies, bindings) as last
    /// taken in.
    admission_seen: [Option<kapi_core::cache::Objects>; kapi_core::admission::SOURCES.len()],
    /// What the authorizers read, each collection's objects as last taken in.
    authz_seen: BTreeMap<SlotKey, kapi_core::cache::Objects>,
    /// The extension API servers: what each request proxied to one gets (its answer, or the
    /// transport's error). Without it, none can be reached.
    pub extension: Option<ExtensionServer>,
    /// Reads of keys under this prefix fail, as a store that cannot be reached fails them.
    pub unreadable: Option<String>,
    /// The webhooks (CRDs' conversion webhooks): what each call gets. Without it, none can
    /// be reached.
    pub webhook: Option<WebhookServer>,
    /// The audit log: each line the requests wrote, in order.
    pub audit_log: Vec<Bytes>,
    /// The recorders of the watches open, whose last lines come when they stop.
    watch_audits: BTreeMap<WatcherId, Box<kapi_core::audit::Recorder>>,
}

/// A stand-in for webhooks: the answer each call gets, or the transport's error.
pub type WebhookServer = Box<dyn FnMut(&WebhookCall) -> Result<WebhookAnswer, String>>;

/// A stand-in for the extension API servers: the answer (head and body) each proxied request
/// gets, or the transport's error.
pub type ExtensionServer = Box<dyn FnMut(&ProxyRequest) -> Result<(ProxyHead, Bytes), String>>;

/// A server and what it serves at its start.
#[derive(Clone)]
pub struct Setup {
    pub server: Arc<Server>,
    pub served: Arc<Served>,
}

/// A server with kapi's default settings, [`ADMIN_TOKEN`] for an administrator and the
/// loopback token for the controllers.
pub fn default_server() -> Setup {
    server_with(&Settings::default())
}

/// A server like [`default_server`] with other settings (e.g. `--runtime-config`).
pub fn server_with(settings: &Settings) -> Setup {
    let mut lines = format!("{ADMIN_TOKEN},admin,0,system:masters\n");
    for (uid, m) in sim::clients::rbac::MEMBERS.iter().enumerate() {
        lines.push_str(&format!("{},{},{},\"{}\"\n", m.token, m.name, uid + 1, m.groups.join(",")));
    }
    let tokens = TokenFile::parse(&lines).expect("valid token lines");
    let auth = Authenticator {
        tokens: Some(tokens),
        loopback: Some(LOOPBACK_TOKEN.into()),
        request_header: None,
        anonymous: kapi_core::auth::Anonymous::Off,
        service_accounts: Some(Arc::new(token_config())),
        bootstrap_tokens: true,
        jwt: Default::default(),
        webhook: None,
    };
    let server = Server::new(auth, Authorizer::always_allow(), "/registry", "127.0.0.1:6443");
    Setup { server: Arc::new(server), served: Served::new(catalog(settings)) }
}

/// A server like [`default_server`] for mutating admission policies: their API served
/// (`--runtime-config=admissionregistration.k8s.io/v1alpha1=true`) if `served`, their plugin
/// run (`--feature-gates=MutatingAdmissionPolicy=true`) if `gate`.
pub fn server_with_mutating_policies(served: bool, gate: bool) -> Setup {
    let flag = if served { "admissionregistration.k8s.io/v1alpha1=true" } else { "" };
    mutating_policies_as(default_server(), flag, kapi_core::features::FeatureGates { mutating_admission_policy: gate, ..Default::default() })
}

/// `setup`'s server serving and running mutating admission policies.
pub fn with_mutating_policies(setup: Setup) -> Setup {
    mutating_policies_as(
        setup,
        "admissionregistration.k8s.io/v1alpha1=true",
        kapi_core::features::FeatureGates { mutating_admission_policy: true, ..Default::default() },
    )
}

fn mutating_policies_as(mut setup: Setup, runtime_config: &str, gates: kapi_core::features::FeatureGates) -> Setup {
    use kapi_core::resources::{RuntimeConfig, registered_group_versions};
    let runtime_config = RuntimeConfig::parse(runtime_config, &registered_group_versions()).expect("a valid --runtime-config");
    let chain = kapi_core::admission::Chain::from_flags(&[], &[], &Default::default(), &kapi_core::admission::no_files).expect("kube's default plugins");
    Arc::get_mut(&mut setup.server).expect("not shared yet").admission = Arc::new(chain.gated(&gates));
    Setup { server: setup.server, served: Served::new(catalog(&Settings { runtime_config, ..Settings::default() })) }
}

/// The simulated server's service account tokens: kube's default issuer, signed with a fixed
/// P-256 key (a test key of the repository's).
pub fn token_config() -> TokenConfig {
    let key = SigningKey::from_pem(include_str!("../../testdata/serviceaccount/ec.key")).expect("the test key is a P-256 key");
    let issuer = "https://kubernetes.default.svc.cluster.local".to_string();
    TokenConfig {
        issuers: vec![issuer.clone()],
        audiences: vec![issuer],
        public_keys: vec![key.public()],
        signing_key: key,
        max_expiration: None,
        extend_expiration: true,
        jwks_uri: None,
    }
}

/// A server like [`default_server`] whose requests RBAC authorizes (`--authorization-mode
/// RBAC`), so that it starts with kube's bootstrap policy.
pub fn rbac_server() -> Setup {
    server_authorizing("RBAC")
}

/// A server like [`default_server`] with these `--authorization-mode`s.
pub fn server_authorizing(modes: &str) -> Setup {
    let Setup { server, served } = default_server();
    let authorizer = Authorizer::parse(modes).expect("valid modes");
    let authorizing = Server::new(server.authenticator.clone(), authorizer, "/registry", "127.0.0.1:6443");
    Setup { server: Arc::new(authorizing), served }
}

/// Where the simulated authentication webhook (`/authenticate`) and authorization webhook
/// (`/authorize`) are: [`World::webhook`] answers their calls.
pub fn webhook_endpoint(path: &str) -> kapi_core::webhook::kubeconfig::Endpoint {
    let target = kapi_core::aggregator::ProxyTarget {
        url: "https://127.0.0.1:9443".into(),
        server_name: "127.0.0.1".into(),
        ca_bundle: None,
        insecure_skip_tls_verify: false,
    };
    kapi_core::webhook::kubeconfig::Endpoint { target, path: format!("{path}?timeout=30s"), credentials: None }
}

/// A server like [`default_server`] whose bearer tokens the `/authenticate` webhook reviews
/// (TokenReview v1) and whose requests `modes` authorize (`Webhook` asking `/authorize`,
/// SubjectAccessReview v1), with kube's cache times.
pub fn server_with_webhooks(modes: &str) -> Setup {
    use kapi_core::auth::webhook::{CACHE_TTL, TokenWebhook};
    use kapi_core::authz::webhook::{AUTHORIZED_TTL, UNAUTHORIZED_TTL};
    use kapi_core::authz::{Modes, WebhookSettings};
    use kapi_core::webhook::ReviewVersion;
    let Setup { server, served } = default_server();
    let mut authenticator = server.authenticator.clone();
    authenticator.webhook = Some(Arc::new(TokenWebhook::new(webhook_endpoint("/authenticate"), ReviewVersion::V1, CACHE_TTL)));
    let webhook =
        modes.contains("Webhook").then(|| WebhookSettings::from_flags(webhook_endpoint("/authorize"), ReviewVersion::V1, AUTHORIZED_TTL, UNAUTHORIZED_TTL));
    let authorizer = Authorizer::from_modes(&Modes::parse(modes).expect("valid modes"), webhook).expect("a webhook for the Webhook mode");
    Setup { server: Arc::new(Server::new(authenticator, authorizer, "/registry", "127.0.0.1:6443")), served }
}

/// A server like [`server_with_webhooks`] whose chain an `--authorization-config` file sets
/// (`yaml`; each webhook's kubeconfig file names the path it is asked at).
pub fn server_with_authorization_config(yaml: &str) -> Setup {
    let Setup { server, served } = server_with_webhooks("AlwaysAllow");
    let config = kapi_core::authz::config::Config::load(yaml.as_bytes(), &|_| Ok(true), &Default::default()).expect("a valid configuration");
    let entries = config.entries(&|file| Ok(webhook_endpoint(file))).expect("webhooks of the simulated world");
    let authorizer = Authorizer::from_entries(entries, None).expect("a chain of the simulated world");
    Setup { server: Arc::new(Server::new(server.authenticator.clone(), authorizer, "/registry", "127.0.0.1:6443")), served }
}

/// The simulation's epoch.
pub fn epoch() -> Timestamp {
    "2024-01-01T00:00:00Z".parse().expect("a valid timestamp")
}

/// How a simulated shell finds a resource's watch cache: (group, version, resource).
pub(crate) type SlotKey = (String, String, String);

pub(crate) fn slot_key(res: &Resource) -> SlotKey {
    (res.info.group.to_string(), res.info.version.to_string(), res.info.resource.to_string())
}

/// A fresh watch cache for every stored resource of `catalog`, keeping `history` events each.
pub(crate) fn watch_caches(server: &Server, catalog: &Catalog, history: usize) -> Vec<(SlotKey, WatchCache)> {
    catalog
        .resources()
        .filter(|r| r.info.stored())
        .map(|r| {
            let prefix = Bytes::from(format!("{}/", server.storage_root(r)));
            (slot_key(r), WatchCache::new(r.clone(), prefix, history))
        })
        .collect()
}

impl World {
    /// A world with one watch cache per stored resource and kube-apiserver's bootstrap done.
    pub fn new(setup: Setup, now: Timestamp, seed: u64) -> World {
        let Setup { server, served } = setup;
        let mut w = World {
            now,
            model: Model::new(),
            server,
            builtins: Catalog::clone(&served.catalog),
            controllers_served: served.clone(),
            served,
            crds_seen: 0,
            slots: BTreeMap::new(),
            stirred: BTreeSet::new(),
            streams: BTreeMap::new(),
            watch_slots: BTreeMap::new(),
            reads: BTreeMap::new(),
            next_id: 1,
            seed,
            controllers: None,
            controller_watches: BTreeMap::new(),
            api_services_seen: 0,
            admission_seen: Default::default(),
            authz_seen: BTreeMap::new(),
            extension: None,
            unreadable: None,
            webhook: None,
            audit_log: Vec::new(),
            watch_audits: BTreeMap::new(),
        };
        for (key, cache) in watch_caches(&w.server, &w.served.catalog, DEFAULT_HISTORY) {
            w.stirred.insert(key.clone());
            w.slots.insert(key, Slot { cache, watch: None });
        }
        w.pump();
        w.bootstrap().expect("bootstrap succeeds on an empty store");
        w
    }

    /// What kube-apiserver does when it starts, on this world's store (as a restart would).
    pub fn bootstrap(&mut self) -> Result<(), ApiError> {
        let mut b = Bootstrap::new(self.server.clone(), &self.served.catalog, "127.0.0.1", 6443, "10.0.0.1", self.seed);
        loop {
            match b.poll(self.now) {
                Some(BootstrapEffect::Kv(req)) => {
                    let r = self.apply(&req);
                    b.handle(self.now, r);
                }
                Some(BootstrapEffect::Done(r)) => return r,
                None => return Ok(()),
            }
        }
    }

    fn next(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Serves one KV request and delivers the events it caused.
    pub fn apply(&mut self, req: &KvRequest) -> KvResult {
        if let (KvRequest::Range(r), Some(prefix)) = (req, &self.unreadable)
            && r.key.starts_with(prefix.as_bytes())
        {
            return Err(kapi_core::kv::KvError::Unavailable("the simulated store cannot read there".into()));
        }
        let (result, events) = self.model.apply(self.now, req);
        if !events.is_empty() {
            let header_revision = self.model.revision();
            for (k, slot) in &mut self.slots {
                if let Some(w) = &slot.watch {
                    let mine: Vec<_> = events.iter().filter(|e| w.contains(&e.kv.key)).cloned().collect();
                    if !mine.is_empty() {
                        slot.cache.handle(self.now, CacheEvent::Watch(WatchResponse::Events { header_revision, events: mine }));
                        self.stirred.insert(k.clone());
                    }
                }
            }
        }
        self.pump();
        result
    }

    /// Drains every cache's effects.
    pub fn pump(&mut self) {
        loop {
            let mut work = self.take_in_crds() | self.take_in_api_services() | self.take_in_authz() | self.take_in_webhooks();
            let mut after: Option<SlotKey> = None;
            while let Some((k, e)) = self.next_cache_effect(after.as_ref()) {
                work = true;
                self.cache_effect(&k, e);
                while let Some(e) = self.slots.get_mut(&k).and_then(|s| s.cache.poll(self.now)) {
                    self.cache_effect(&k, e);
                }
                after = Some(k);
            }
            if !work {
                return;
            }
        }
    }

    /// The first effect of the stirred caches after `after` (all of them when `None`), in key
    /// order, with the key of the cache it came from; a cache found idle is no longer stirred.
    fn next_cache_effect(&mut self, after: Option<&SlotKey>) -> Option<(SlotKey, CacheEffect)> {
        use std::ops::Bound::{Excluded, Unbounded};
        let mut lower = after.map_or(Unbounded, |k| Excluded(k.clone()));
        loop {
            let k = self.stirred.range((lower, Unbounded)).next()?.clone();
            if let Some(e) = self.slots.get_mut(&k).and_then(|s| s.cache.poll(self.now)) {
                return Some((k, e));
            }
            self.stirred.remove(&k);
            lower = Excluded(k);
        }
    }

    /// Hands `event` to the cache of `k`, which then has something to do.
    fn cache_event(&mut self, k: &SlotKey, event: CacheEvent) {
        self.slots.get_mut(k).expect("every stored resource has a cache").cache.handle(self.now, event);
        self.stirred.insert(k.clone());
    }

    /// What the cache of `(group, version, resource)` holds now, if it moved past revision `seen`.
    fn news(&self, (group, version, resource): (&str, &str, &str), seen: i64) -> Option<kapi_core::cache::Snapshot> {
        let key: SlotKey = (group.into(), version.into(), resource.into());
        self.slots.get(&key).and_then(|s| s.cache.published()).filter(|p| p.revision != seen)
    }

    /// Takes in what the webhook configurations' caches hold now, as kapi's catalog task does.
    /// True when something changed.
    fn take_in_webhooks(&mut self) -> bool {
        let mut changed = false;
        for (i, (source, (group, version, resource))) in kapi_core::admission::SOURCES.into_iter().enumerate() {
            let key: SlotKey = (group.into(), version.into(), resource.into());
            let Some(now) = self.slots.get(&key).and_then(|s| s.cache.published()) else { continue };
            if !self.admission_seen[i].as_ref().is_some_and(|seen| seen.ptr_eq(&now.objects)) {
                let objects: Vec<serde_json::Value> = now.objects.values().map(|o| o.value()).collect();
                self.served = self.served.with_admission(source, &objects);
                self.admission_seen[i] = Some(now.objects);
                changed = true;
            }
        }
        changed
    }

    /// Takes in what the APIService cache holds now, as kapi's catalog task does. True when
    /// what is served changed.
    fn take_in_api_services(&mut self) -> bool {
        let Some(apis) = self.news(("apiregistration.k8s.io", "v1", "apiservices"), self.api_services_seen) else { return false };
        self.api_services_seen = apis.revision;
        let objects: Vec<serde_json::Value> = apis.objects.values().map(|o| o.value()).collect();
        let Some(next) = self.served.with_api_services(&objects) else { return false };
        self.served = next;
        true
    }

    /// Takes in what the caches of the collections the authorizers read hold now, as kapi's
    /// catalog task does. True when something changed.
    fn take_in_authz(&mut self) -> bool {
        let mut changed = false;
        for source in self.server.authorizer.load().sources() {
            let (group, version, resource) = source.resource();
            let key: SlotKey = (group.into(), version.into(), resource.into());
            let Some(now) = self.slots.get(&key).and_then(|s| s.cache.published()) else { continue };
            let seen = self.authz_seen.entry(key).or_default();
            if !seen.ptr_eq(&now.objects) {
                self.served = self.served.with_authz(source, seen, &now.objects);
                *seen = now.objects;
                changed = true;
            }
        }
        changed
    }

    /// Takes in what the CRD cache holds now, as kapi's catalog task does: a changed catalog is
    /// served from now on, with a watch cache for each new stored resource; the caches of
    /// resources gone (or changed) stop, closing their watches. True when the catalog changed.
    fn take_in_crds(&mut self) -> bool {
        let Some(crds) = self.news(("apiextensions.k8s.io", "v1", "customresourcedefinitions"), self.crds_seen) else { return false };
        self.crds_seen = crds.revision;
        let Some(next) = self.served.with_crds(&self.builtins, &crds) else { return false };
        let wanted: BTreeMap<SlotKey, Arc<Resource>> = next.catalog.resources().filter(|r| r.info.stored()).map(|r| (slot_key(r), r.clone())).collect();
        let stale: Vec<SlotKey> =
            self.slots.iter().filter(|(k, s)| wanted.get(*k).is_none_or(|r| !same_objects(r, s.cache.resource()))).map(|(k, _)| k.clone()).collect();
        for k in stale {
            self.slots.remove(&k);
            for (id, _) in self.watch_slots.iter().filter(|(_, slot)| **slot == k) {
                self.streams.entry(*id).or_default().closed = true;
            }
            self.watch_slots.retain(|_, slot| *slot != k);
        }
        for (k, res) in wanted {
            if !self.slots.contains_key(&k) {
                let prefix = Bytes::from(format!("{}/", self.server.storage_root(&res)));
                self.stirred.insert(k.clone());
                self.slots.insert(k, Slot { cache: WatchCache::new(res, prefix, DEFAULT_HISTORY), watch: None });
            }
        }
        self.served = next;
        true
    }

    fn cache_effect(&mut self, k: &SlotKey, e: CacheEffect) {
        let now = self.now;
        match e {
            CacheEffect::Kv(req) => {
                let (r, _) = self.model.apply(now, &req);
                self.cache_event(k, CacheEvent::Kv(r));
            }
            CacheEffect::StartWatch(w) => {
                self.stirred.insert(k.clone());
                let slot = self.slots.get_mut(k).expect("slot");
                match self.model.backlog(&w) {
                    Ok(events) => {
                        slot.watch = Some(w);
                        if !events.is_empty() {
                            let header_revision = self.model.revision();
                            slot.cache.handle(now, CacheEvent::Watch(WatchResponse::Events { header_revision, events }));
                        }
                    }
                    Err(compact_revision) => slot.cache.handle(now, CacheEvent::Watch(WatchResponse::Canceled { compact_revision })),
                }
            }
            CacheEffect::RequestProgress => {
                let revision = self.model.revision();
                self.cache_event(k, CacheEvent::Watch(WatchResponse::Progress { revision }));
            }
            CacheEffect::Deliver { ids, frame } => {
                for id in ids {
                    self.streams.entry(id).or_default().frames.push(frame.clone());
                }
            }
            CacheEffect::Backlog { id, frames } => self.streams.entry(id).or_default().frames.extend(frames),
            CacheEffect::Close { id } => self.streams.entry(id).or_default().closed = true,
            CacheEffect::ReadDone { id, result } => {
                self.reads.insert(id, result);
            }
            CacheEffect::Convert(conversion) => {
                let service = conversion.webhook.client.service().and_then(|svc| {
                    let services = self.slots.get(&("".to_string(), "v1".to_string(), "services".to_string()))?.cache.published()?;
                    services.named(&svc.namespace, &svc.name).map(|o| o.value())
                });
                let answer = conversion.call(service.as_ref()).and_then(|call| self.call_webhook(&call));
                self.cache_event(k, CacheEvent::Called { uid: conversion.uid, answer });
            }
        }
    }

    fn call_webhook(&mut self, call: &WebhookCall) -> Result<WebhookAnswer, String> {
        match &mut self.webhook {
            Some(serve) => serve(call),
            None => Err(format!("Post \"{}{}\": dial tcp: connect: connection refused", call.target.url, call.path)),
        }
    }

    /// Starts the built-in controllers; from now on they act after every request and tick.
    pub fn start_controllers(&mut self, enabled: Enabled) {
        let token = self.server.authenticator.loopback.clone().expect("the server has a loopback token");
        let mut controllers = Controllers::new(enabled, &self.served.catalog, &token, SIM_CA, self.now);
        controllers.sign_legacy_tokens(self.server.authenticator.service_accounts.as_deref(), self.now);
        self.controllers = Some(controllers);
        self.settle();
    }

    /// Has the controllers publish `trust` in `extension-apiserver-authentication`.
    pub fn publish_authentication_trust(&mut self, trust: kapi_core::controllers::AuthenticationTrust) {
        if let Some(c) = &mut self.controllers {
            c.publish_authentication_trust(trust, self.now);
        }
        self.settle();
    }

    /// The virtual time.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// Lets time pass, firing the caches' and the controllers' timers.
    pub fn advance(&mut self, d: SignedDuration) {
        self.now += d;
        self.stirred.extend(self.slots.keys().cloned());
        self.pump();
        self.settle();
    }

    /// Runs a request as the administrator, with `body` (if any) encoded as JSON and sent as
    /// `content_type`.
    pub fn call(&mut self, method: &str, path: &str, query: &str, body: Option<&serde_json::Value>, content_type: &str) -> Response {
        let mut headers = vec![("Authorization".to_string(), format!("Bearer {ADMIN_TOKEN}")), ("User-Agent".into(), "kapi-test/1.0".into())];
        if !content_type.is_empty() {
            headers.push(("Content-Type".into(), content_type.into()));
        }
        let body = body.map(|b| Bytes::from(serde_json::to_vec(b).expect("JSON trees serialize"))).unwrap_or_default();
        self.request(Request { method: method.into(), path: path.into(), query: query.into(), headers, body, ..Default::default() })
    }

    /// A request with `token` as its bearer token (and `body` as JSON).
    pub fn call_with_token(&mut self, token: &str, method: &str, path: &str, body: Option<serde_json::Value>) -> Response {
        let mut headers = vec![("Authorization".to_string(), format!("Bearer {token}"))];
        if body.is_some() {
            headers.push(("Content-Type".into(), "application/json".into()));
        }
        let body = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
        self.request(Request { method: method.into(), path: path.into(), headers, body, ..Default::default() })
    }

    /// Runs a request to its response, then lets the controllers react to it.
    pub fn request(&mut self, req: Request) -> Response {
        let resp = self.run(req);
        self.settle();
        resp
    }

    /// Runs the controllers until they have nothing left to do now: their requests are
    /// answered at once, their watch streams fed with what has arrived.
    fn settle(&mut self) {
        let Some(mut c) = self.controllers.take() else { return };
        loop {
            let mut progress = false;
            if !Arc::ptr_eq(&self.served, &self.controllers_served) {
                c.catalog_changed(&self.served.catalog);
                self.controllers_served = self.served.clone();
            }
            let watches: Vec<(WatcherId, RequestId)> = self.controller_watches.iter().map(|(w, r)| (*w, *r)).collect();
            for (watcher, id) in watches {
                let (frames, closed) = self.frames(watcher);
                progress |= !frames.is_empty() || closed;
                for chunk in frames {
                    c.handle(self.now, ControllerEvent::Body { id, chunk });
                }
                if closed {
                    self.controller_watches.remove(&watcher);
                    self.streams.remove(&watcher);
                    c.handle(self.now, ControllerEvent::End { id });
                }
            }
            while let Some(effect) = c.poll(self.now) {
                progress = true;
                let (id, request) = match effect {
                    ControllerEffect::Request { id, request } => (id, request),
                    ControllerEffect::Discovered { group, version, discovery } => {
                        if let Some(next) = self.served.with_discovered(&group, &version, discovery) {
                            self.served = next;
                        }
                        continue;
                    }
                    ControllerEffect::Probe { id, request } => {
                        match self.extension.as_mut().map(|serve| serve(&request)) {
                            Some(Ok((head, body))) => {
                                c.handle(self.now, ControllerEvent::Head { id, status: head.status });
                                c.handle(self.now, ControllerEvent::Body { id, chunk: body });
                                c.handle(self.now, ControllerEvent::End { id });
                            }
                            Some(Err(error)) => c.handle(self.now, ControllerEvent::Failed { id, error }),
                            None => c.handle(self.now, ControllerEvent::Failed { id, error: "dial tcp: connect: connection refused".into() }),
                        }
                        continue;
                    }
                };
                let resp = self.run(request);
                c.handle(self.now, ControllerEvent::Head { id, status: resp.head.status });
                match resp.watch {
                    Some(watcher) => {
                        self.controller_watches.insert(watcher, id);
                    }
                    None => {
                        c.handle(self.now, ControllerEvent::Body { id, chunk: resp.body });
                        c.handle(self.now, ControllerEvent::End { id });
                    }
                }
            }
            if !progress {
                break;
            }
        }
        self.controllers = Some(c);
    }

    fn run(&mut self, req: Request) -> Response {
        let seed = self.seed ^ self.next();
        let mut m = RequestMachine::new(self.server.clone(), self.served.clone(), req, self.now, seed);
        let mut head = None;
        let mut body = Vec::new();
        let mut relayed = Bytes::new();
        let mut loopback = Vec::new();
        loop {
            match m.poll(self.now) {
                Some(Effect::Kv(req)) => {
                    let r = self.apply(&req);
                    m.handle(self.now, Event::Kv(r));
                }
                Some(Effect::Cache { resource, request }) => {
                    let id = ReadId(self.next());
                    let k = slot_key(&resource);
                    // As the server does, a read the cache's published state answers is
                    // answered from it, without a turn of the cache.
                    if let Some(answer) = self.slots.get(&k).and_then(|s| s.cache.published()).and_then(|p| request.answer_from(&p)) {
                        m.handle(self.now, Event::Cache(Ok(answer)));
                        continue;
                    }
                    self.cache_event(&k, CacheEvent::Read { id, request });
                    self.pump();
                    let mut waited = SignedDuration::ZERO;
                    while !self.reads.contains_key(&id) && waited < SignedDuration::from_secs(10) {
                        self.advance(SignedDuration::from_secs(1));
                        waited += SignedDuration::from_secs(1);
                    }
                    let r = self.reads.remove(&id).expect("a cache read is answered or times out");
                    m.handle(self.now, Event::Cache(r));
                }
                Some(Effect::Watch { resource, params, head }) => {
                    let id = WatcherId(self.next());
                    self.streams.insert(id, Stream::default());
                    if let Some(recorder) = m.take_audit() {
                        self.watch_audits.insert(id, recorder);
                    }
                    let k = slot_key(&resource);
                    self.cache_event(&k, CacheEvent::Register { id, params });
                    self.watch_slots.insert(id, k);
                    self.pump();
                    return Response { head, body: Bytes::new(), watch: Some(id) };
                }
                Some(Effect::Health) => m.handle(self.now, Event::Health(Health::default())),
                // Nothing listens in the simulation: every probe is refused.
                Some(Effect::Probe(probes)) => m.handle(self.now, Event::Probed(probes.iter().map(|_| ProbeOutcome::Refused).collect())),
                Some(Effect::Proxy(request)) => {
                    let answer = match &mut self.extension {
                        Some(serve) => serve(&request),
                        None => Err("dial tcp: connect: connection refused".into()),
                    };
                    match answer {
                        Ok((upstream, b)) => {
                            relayed = b;
                            m.handle(self.now, Event::Proxied(Ok(upstream)));
                        }
                        Err(e) => m.handle(self.now, Event::Proxied(Err(e))),
                    }
                }
                Some(Effect::Call(call)) => {
                    let answer = self.call_webhook(&call);
                    m.handle(self.now, Event::Called(answer));
                }
                Some(Effect::Calls(calls)) => {
                    let answers = calls.iter().map(|c| self.call_webhook(c)).collect();
                    m.handle(self.now, Event::CalledAll(answers));
                }
                Some(Effect::Relay) => {
                    body.extend_from_slice(&relayed);
                    break;
                }
                Some(Effect::Respond(h)) => head = Some(h),
                Some(Effect::Body(b)) => body.extend_from_slice(&b),
                Some(Effect::Loopback(request)) => loopback.push(*request),
                Some(Effect::Audit(line)) => self.audit_log.push(line),
                Some(Effect::End) => break,
                // The machine waits for its time (to try a webhook call again): it comes.
                None => match m.poll_timeout() {
                    Some(t) if t > self.now => self.advance(t.duration_since(self.now)),
                    _ => break,
                },
            }
        }
        // The server's own requests, once this one is answered.
        for request in loopback {
            self.run(request);
        }
        Response { head: head.expect("every request is answered"), body: Bytes::from(body), watch: None }
    }

    /// The client of a watch goes away: its cache forgets it.
    pub fn stop_watch(&mut self, id: WatcherId) {
        self.streams.remove(&id);
        if let Some(mut recorder) = self.watch_audits.remove(&id) {
            self.audit_log.extend(recorder.complete(self.now));
        }
        if let Some(k) = self.watch_slots.remove(&id) {
            self.cache_event(&k, CacheEvent::Unregister { id });
            self.pump();
        }
    }

    /// The frames a watch received so far (taken), and whether it ended.
    pub fn frames(&mut self, id: WatcherId) -> (Vec<Bytes>, bool) {
        let s = self.streams.entry(id).or_default();
        (std::mem::take(&mut s.frames), s.closed)
    }
}
