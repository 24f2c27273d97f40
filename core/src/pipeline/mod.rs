//! The request pipeline: one machine per HTTP request, from the request's head and body to the
//! response, in kube-apiserver's filter order (request info, authentication, authorization,
//! then the handler: non-resource endpoints, or resource handlers through the watch cache and
//! the registry).
//!
//! Call order: [`RequestMachine::new`] with the [`Server`], what it serves now ([`Served`]: the
//! catalog, read by the request from start to end whatever replaces it meanwhile) and the
//! [`Request`] (the body read whole, up to [`Server::max_body_bytes`]). Then loop on [`RequestMachine::poll`]:
//! - [`Effect::Kv`]: send to the store, feed the answer with [`Event::Kv`];
//! - [`Effect::Cache`]: read the resource's watch cache, feed the answer with [`Event::Cache`];
//! - [`Effect::Health`]: find out the server's [`Health`], feed it with [`Event::Health`] (only
//!   `/healthz`, `/livez` and `/readyz` ask, so other requests pay nothing for the store's check);
//! - [`Effect::Respond`] then [`Effect::Body`]s then [`Effect::End`]: write the response;
//!   `poll` again only when a body chunk is written, so a list is held one chunk at a time;
//! - [`Effect::Watch`]: register the watch with the resource's cache and stream its frames
//!   under the given head; the request machine is done;
//! - [`Effect::Proxy`]: send the request to an extension server, feed its answer's head (or
//!   the failure) with [`Event::Proxied`]; then [`Effect::Respond`] and [`Effect::Relay`]:
//!   answer under that head with the extension server's body, streamed (after a 101 to a
//!   request to switch protocols: the two connections joined); the machine is done;
//! - [`Effect::Call`]: make the webhook call (a CRD's conversion webhook), feed its answer
//!   with [`Event::Called`].
//!
//! `poll` returns `None` while it waits for an event; [`RequestMachine::poll_timeout`] is the
//! request's deadline, after which `poll` answers 504 if nothing was sent yet.

mod audit;
mod compress;
mod effects;
mod handlers;
mod info;
pub mod limits;
mod nonresource;
mod params;
mod pretty;
mod query;
mod respond;

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use jiff::{SignedDuration, Timestamp};

use crate::aggregator::{ApiServices, Discovered, Discovery};
use crate::auth::{Authenticator, Refused, UserInfo};
use crate::authz::Authorizer;
use crate::catalog::{Catalog, Resource};
use crate::rand::Rng;
use crate::status::ApiError;

pub use compress::GZIP_THRESHOLD_BYTES;
pub use effects::{Effect, Event, Health, Probe, ProbeOutcome, Request};
pub use info::{RequestInfo, resolve};
pub use limits::{DEFAULT_MAX_MUTATING_IN_FLIGHT, DEFAULT_MAX_READONLY_IN_FLIGHT, InFlight, is_long_running};
pub use nonresource::{Docs, HealthRequest, version};
pub use params::ContinueToken;
pub use query::Query;
pub use respond::{Head, ListBody, Page};

/// kube-apiserver's `--max-request-body-bytes` default.
pub const DEFAULT_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;
/// `--request-timeout` default.
pub const REQUEST_TIMEOUT: SignedDuration = SignedDuration::from_secs(60);

/// What the audit ID's draw is salted with, apart from the request's other draws.
const AUDIT_ID_SALT: u64 = 0x6175_6469_7469_6421;
/// The annotations authorization adds to a request's audit events (kube's).
const DECISION_ANNOTATION: &str = "authorization.k8s.io/decision";
const REASON_ANNOTATION: &str = "authorization.k8s.io/reason";
/// `--min-request-timeout`: watches last between this and twice this, unless asked otherwise.
pub const MIN_REQUEST_TIMEOUT_SECONDS: i64 = 1800;

/// What every request machine reads and never changes while the server runs: authenticators,
/// limits, addresses. What it serves is a [`Served`], which does change.
pub struct Server {
    pub authenticator: Authenticator,
    /// The chain of authorizers; a request keeps the one it started with, and a reload of
    /// `--authorization-config` swaps in the next.
    pub authorizer: arc_swap::ArcSwap<Authorizer>,
    /// `--etcd-prefix`.
    pub prefix: String,
    /// The address clients reach this server at (`/api`'s `serverAddressByClientCIDRs`).
    pub server_address: String,
    pub max_body_bytes: usize,
    /// Consistent LISTs (no resourceVersion) and their continuations are served from the watch
    /// cache (kube's `ConsistentListFromCache`). That needs a store whose progress notifications
    /// come in order with events; without one (etcd before 3.4.31 / 3.5.13) they read storage,
    /// as kube-apiserver does.
    pub consistent_list_from_cache: bool,
    /// `--max-requests-inflight` and `--max-mutating-requests-inflight`, and the requests
    /// holding their seats.
    pub in_flight: InFlight,
    /// The bearer tokens confirmed in the last 10 seconds, and whom they stand for.
    pub token_cache: crate::auth::TokenCache,
    /// The admission plugins writes go through (`--enable-admission-plugins`, ...).
    pub admission: Arc<crate::admission::Chain>,
    /// `--audit-policy-file`, when the server writes an audit log.
    pub audit: Option<Arc<crate::audit::Policy>>,
}

impl Server {
    pub fn new(authenticator: Authenticator, authorizer: Authorizer, prefix: &str, server_address: &str) -> Server {
        Server {
            authenticator,
            authorizer: arc_swap::ArcSwap::from_pointee(authorizer),
            prefix: prefix.to_string(),
            server_address: server_address.to_string(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            consistent_list_from_cache: true,
            in_flight: InFlight::new(DEFAULT_MAX_READONLY_IN_FLIGHT, DEFAULT_MAX_MUTATING_IN_FLIGHT),
            token_cache: crate::auth::TokenCache::default(),
            admission: Arc::new(
                crate::admission::Chain::from_flags(&[], &[], &Default::default(), &crate::admission::no_files).expect("kube's default plugins"),
            ),
            audit: None,
        }
    }

    /// The storage key root of a resource (`/registry/pods`).
    pub fn storage_root(&self, res: &Resource) -> String {
        format!("{}/{}", self.prefix, res.info.storage_prefix)
    }
}

/// What a server serves at one time: a catalog, and the discovery and OpenAPI documents made
/// from it the first time they are asked for. A shell holds the current one where requests
/// take it from without a lock (kapi's: an `ArcSwap`) and puts a new one in its place when the
/// catalog changes; a request keeps the one it started with.
pub struct Served {
    /// Shared by the states that serve the same resources: while a request holds one of them,
    /// this catalog's count says so.
    pub catalog: Arc<Catalog>,
    /// The APIServices whose group versions extension servers serve.
    pub api_services: ApiServices,
    /// What those servers last said they serve.
    pub discovered: Discovered,
    /// The catalog entries each CRD made, for the next change of the CRDs.
    made: crate::apiextensions::Made,
    /// The CRDs have been taken in once (or the catalog serves none): until then a request
    /// under `/apis` for what the catalog does not serve may be for a custom resource, and is
    /// answered as kube's CRD handler answers before its informer has synced.
    crds_synced: bool,
    /// What the authorizers read (the RBAC objects, the node graph).
    pub authz: crate::authz::Snapshot,
    /// The admission webhooks of the webhook configurations.
    pub webhooks: Arc<crate::admission::webhooks::Hooks>,
    /// The validating admission policies and their bindings.
    pub policies: Arc<crate::admission::policies::Policies>,
    /// The mutating admission policies and their bindings.
    pub mutating_policies: Arc<crate::admission::policies::Policies>,
    /// The documents, made on first use; shared by states whose sources are the same.
    docs: Arc<Docs>,
}

impl Served {
    pub fn new(catalog: Catalog) -> Arc<Served> {
        Served::with(catalog, ApiServices::default(), Discovered::default())
    }

    fn with(catalog: Catalog, api_services: ApiServices, discovered: Discovered) -> Arc<Served> {
        let crds_synced = catalog.get("apiextensions.k8s.io", "v1", "customresourcedefinitions").is_none();
        let webhooks = Arc::new(crate::admission::webhooks::Hooks::unread(&catalog));
        let policies = Arc::new(crate::admission::policies::Policies::unread(&catalog));
        let mutating_policies = Arc::new(crate::admission::policies::Policies::unread_mutating(&catalog));
        let catalog = Arc::new(catalog);
        let authz = Default::default();
        let made = Default::default();
        Arc::new(Served { catalog, api_services, discovered, made, crds_synced, authz, webhooks, policies, mutating_policies, docs: Arc::default() })
    }

    /// Whether what admission is configured by has been taken in (see
    /// [`Served::with_admission`]): until then a write is refused, as kube refuses it before
    /// its admission informers have synced.
    pub fn admission_synced(&self) -> bool {
        self.webhooks.synced() && self.policies.synced() && self.mutating_policies.synced()
    }

    /// Whether the CRDs have been taken in (see [`Served::with_crds`]).
    pub fn crds_synced(&self) -> bool {
        self.crds_synced
    }

    /// What the server serves once the APIServices in `objects` (the published state of their
    /// watch cache) are taken in; `None` when that is what it serves already.
    pub fn with_api_services<'a>(&self, objects: impl IntoIterator<Item = &'a serde_json::Value>) -> Option<Arc<Served>> {
        let api_services = ApiServices::read(objects);
        if api_services == self.api_services {
            return None;
        }
        let mut discovered = self.discovered.clone();
        discovered.retain_served(&api_services);
        Some(Arc::new(Served { api_services, discovered, ..self.shallow_copy() }))
    }

    /// What the server serves once the extension server of `group`/`version` said what it
    /// serves (`discovery`); `None` when that is what it knew.
    pub fn with_discovered(&self, group: &str, version: &str, discovery: Discovery) -> Option<Arc<Served>> {
        let discovered = self.discovered.with(group, version, discovery)?;
        Some(Arc::new(Served { discovered, ..self.shallow_copy() }))
    }

    /// What the server serves once the CustomResourceDefinitions in `crds` (the published state
    /// of their watch cache) are taken in, on top of the `builtins`; `None` when that is what
    /// it serves already (and has taken them in before).
    pub fn with_crds(&self, builtins: &Catalog, crds: &crate::cache::Snapshot) -> Option<Arc<Served>> {
        let (catalog, made) = crate::apiextensions::catalog_of_snapshot(builtins, &self.catalog, &self.made, crds);
        (!self.crds_synced || !catalog.same_entries(&self.catalog)).then(|| {
            // A policy's parameters may be of a kind served now, or no more.
            let policies = Arc::new(self.policies.resolved(&catalog));
            let mutating_policies = Arc::new(self.mutating_policies.resolved(&catalog));
            Arc::new(Served { catalog: Arc::new(catalog), made, crds_synced: true, policies, mutating_policies, ..self.shallow_copy() })
        })
    }

    /// What the server serves once the objects an authorizer reads from `source` went from
    /// `old` to `new` (their watch cache's objects at two revisions); the documents stay as
    /// they were.
    pub fn with_authz(&self, source: crate::authz::Source, old: &crate::cache::Objects, new: &crate::cache::Objects) -> Arc<Served> {
        Arc::new(Served { authz: self.authz.with_changes(source, old, new), docs: self.docs.clone(), ..self.shallow_copy() })
    }

    /// What the server admits writes with once the objects admission reads from `source`
    /// (webhook configurations, policies or bindings) are `objects` (the published state of
    /// their watch cache); the documents stay as they were.
    pub fn with_admission<'a>(&self, source: crate::admission::Source, objects: impl IntoIterator<Item = &'a serde_json::Value>) -> Arc<Served> {
        use crate::admission::Source;
        let (mut webhooks, mut policies, mut mutating_policies) = (self.webhooks.clone(), self.policies.clone(), self.mutating_policies.clone());
        match source {
            Source::MutatingWebhooks => webhooks = Arc::new(webhooks.with(true, objects)),
            Source::ValidatingWebhooks => webhooks = Arc::new(webhooks.with(false, objects)),
            Source::Policies | Source::PolicyBindings => policies = Arc::new(policies.with(source, objects, &self.catalog)),
            Source::MutatingPolicies | Source::MutatingPolicyBindings => mutating_policies = Arc::new(mutating_policies.with(source, objects, &self.catalog)),
        }
        Arc::new(Served { webhooks, policies, mutating_policies, docs: self.docs.clone(), ..self.shallow_copy() })
    }

    /// The same parts, with documents to be made anew (from these where they fit).
    fn shallow_copy(&self) -> Served {
        Served {
            catalog: self.catalog.clone(),
            api_services: self.api_services.clone(),
            discovered: self.discovered.clone(),
            made: self.made.clone(),
            crds_synced: self.crds_synced,
            authz: self.authz.clone(),
            webhooks: self.webhooks.clone(),
            policies: self.policies.clone(),
            mutating_policies: self.mutating_policies.clone(),
            docs: Arc::new(Docs::after(&self.docs)),
        }
    }

    /// What the documents are made of.
    fn sources<'a>(&'a self, server_address: &'a str) -> nonresource::Sources<'a> {
        nonresource::Sources { server_address, catalog: &self.catalog, apis: &self.api_services, discovered: &self.discovered }
    }
}

/// One request; see the module documentation for the call order.
pub struct RequestMachine {
    server: Arc<Server>,
    /// The chain of authorizers when the request came.
    authorizer: Arc<Authorizer>,
    served: Arc<Served>,
    req: Request,
    /// The path as the client wrote it (`req.path` is decoded), which a proxied request keeps.
    raw_path: String,
    /// A watch (or another request without a deadline once it is answered).
    long_running: bool,
    rng: Rng,
    deadline: Timestamp,
    responded: bool,
    out: VecDeque<Effect>,
    stage: handlers::Stage,
    user: UserInfo,
    /// Warnings every response head of this request carries (a deprecated resource's).
    warnings: Vec<String>,
    /// The request's place among those in flight, held until the machine is dropped.
    _seat: Option<limits::Seat>,
    /// Resource and discovery responses to a client that accepts gzip pass through this.
    compressor: Option<compress::Compressor>,
    /// Indents JSON answers when kube would (`?pretty`, curl and browsers).
    pretty: Option<pretty::Pretty>,
    /// What the compressor let out, to be polled before anything else.
    ready: VecDeque<Effect>,
    /// The authorization webhook's answers to this request's questions.
    asked: crate::authz::Asked,
    /// The request's audit ID: the client's, or one drawn for it.
    audit_id: String,
    /// When the request came.
    received_at: Timestamp,
    /// Its audit events, when the server's policy records it.
    audit: Option<Box<crate::audit::Recorder>>,
}

impl RequestMachine {
    /// `seed` feeds the request's randomness (UIDs, generated names).
    pub fn new(server: Arc<Server>, served: Arc<Served>, req: Request, now: Timestamp, seed: u64) -> RequestMachine {
        // Drawn apart from the request's other draws, which stay as they were.
        let audit_id = match req.header("Audit-ID").filter(|id| !id.is_empty()) {
            Some(id) => id.to_string(),
            None => Rng::new(seed ^ AUDIT_ID_SALT).uuid(),
        };
        let mut m = RequestMachine {
            authorizer: server.authorizer.load_full(),
            server,
            served,
            req,
            raw_path: String::new(),
            long_running: false,
            rng: Rng::new(seed),
            deadline: now + REQUEST_TIMEOUT,
            responded: false,
            out: VecDeque::new(),
            stage: handlers::Stage::Done,
            user: UserInfo::default(),
            warnings: Vec::new(),
            _seat: None,
            compressor: None,
            pretty: None,
            ready: VecDeque::new(),
            asked: crate::authz::Asked::default(),
            audit_id,
            received_at: now,
            audit: None,
        };
        m.start(now);
        m
    }

    pub fn user(&self) -> &UserInfo {
        &self.user
    }

    /// kube-apiserver's filters, in its order: request info, the deadline (`timeout`),
    /// authentication, the in-flight limit, authorization; then the handler.
    fn start(&mut self, now: Timestamp) {
        match query::decode_path(&self.req.path) {
            Some(path) => self.raw_path = std::mem::replace(&mut self.req.path, path),
            None => return self.respond(Head::new(400, "text/plain; charset=utf-8"), Bytes::from_static(b"400 Bad Request")),
        }
        let query = Query::parse(&self.req.query);
        let info = resolve(&self.req.method, &self.req.path, &query);
        let discovery = ["/api", "/apis"].iter().any(|p| self.req.path == *p || self.req.path.starts_with(&format!("{p}/")));
        if (info.is_resource_request || discovery) && compress::accepts_gzip(self.req.header("Accept-Encoding")) {
            self.compressor = Some(compress::Compressor::default());
        }
        if (info.is_resource_request || discovery) && pretty::wanted(query.get("pretty"), self.req.header("User-Agent")) {
            self.pretty = Some(pretty::Pretty::default());
        }
        self.long_running = is_long_running(&info);
        if !self.long_running {
            match limits::requested_timeout(query.get("timeout"), REQUEST_TIMEOUT) {
                Ok(Some(t)) => self.deadline = now + t,
                Ok(None) => {}
                Err(e) => return self.fail(&e),
            }
        }
        let cached = || crate::auth::request_bearer_token(&self.req.headers).and_then(|t| self.server.token_cache.get(t, now));
        self.user = match self.server.authenticator.authenticate(&self.req.headers, &self.req.peer, &self.req.path) {
            Ok(u) => u,
            Err(_) if let Some(cached) = cached() => {
                self.warnings.extend(cached.warning.map(str::to_string));
                cached.user
            }
            Err(e) => {
                // A service account or bootstrap token is known once what it names is looked up;
                // a token no one else recognizes, once the authentication webhook says.
                let Some(token) = crate::auth::request_bearer_token(&self.req.headers).map(str::to_string) else { return self.fail(&e) };
                return match self.server.authenticator.pending_token(&self.req.headers, now) {
                    Some(Ok(pending)) => {
                        let lookups = pending.lookups();
                        let then = handlers::AfterLookups::Authenticate { pending: Box::new(pending), info: Box::new(info), query };
                        self.stage = handlers::Stage::Lookups(Box::new(handlers::Lookups::new(lookups, then)));
                    }
                    Some(Err(why)) => self.ask_authenticator(&token, &[], vec![why], handlers::Authenticating::Request { info: Box::new(info), query }, now),
                    None => self.ask_authenticator(&token, &[], Vec::new(), handlers::Authenticating::Request { info: Box::new(info), query }, now),
                };
            }
        };
        self.authenticated(now, info, query);
    }

    /// The rest of [`Self::start`], once the request is authenticated (`self.user`):
    /// impersonation, the in-flight limit, then [`Self::authorize`].
    fn authenticated(&mut self, now: Timestamp, info: RequestInfo, query: Query) {
        self.start_audit(&info, now);
        let authenticator = &self.server.authenticator;
        self.req.headers.retain(|(k, _)| !authenticator.is_credential_header(k));
        let decider = crate::authz::Decider::new(&self.authorizer, &self.served.authz, &self.asked, now);
        let impersonated = crate::auth::impersonate(&self.req.headers, &self.user, |user, attrs| decider.authorize(user, attrs));
        if let Some(ask) = decider.wanted() {
            return self.ask_authorizer(ask, handlers::Resume::Authenticated, info, query);
        }
        match impersonated {
            Ok(Some(user)) => {
                if let Some(r) = &mut self.audit {
                    r.impersonated(&user);
                }
                self.user = user;
            }
            Ok(None) => {}
            Err(Refused::Forbidden(e)) => return self.fail(&e),
            Err(Refused::WithoutUser(why)) => return self.internal_error_text(&why),
        }
        self.req.headers.retain(|(k, _)| !crate::auth::is_impersonation_header(k));
        match self.server.in_flight.admit(&info, &self.user.groups) {
            Ok(seat) => self._seat = seat,
            Err(too_many) => {
                let (head, body) = too_many.response();
                return self.respond(head, body);
            }
        }
        self.authorize(now, info, query);
    }

    /// Authorization, then serving the request: 403 when the chain does not allow it, 500
    /// (kube's plain-text internal error) when it does not for an authorizer's error.
    fn authorize(&mut self, now: Timestamp, info: RequestInfo, query: Query) {
        let attrs = info.attributes();
        let decision = match self.authorizer.decide(&self.served.authz, &self.user, &attrs, &self.asked, now) {
            Ok(decision) => decision,
            Err(ask) => return self.ask_authorizer(ask, handlers::Resume::Authorized, info, query),
        };
        if !decision.allowed && !decision.error.is_empty() {
            self.annotate(REASON_ANNOTATION, "internal error");
            return self.internal_error_text(&decision.error);
        }
        self.annotate(DECISION_ANNOTATION, if decision.allowed { "allow" } else { "forbid" });
        self.annotate(REASON_ANNOTATION, &decision.reason);
        if !decision.allowed {
            return self.fail(&crate::authz::forbidden(&self.user, &attrs, &decision.reason));
        }
        if let Some(ask) = self.escalation_ask(&info, now) {
            return self.ask_authorizer(ask, handlers::Resume::Authorized, info, query);
        }
        if let Some(api) = self.served.api_services.route(&self.req.path).cloned() {
            if self.req.body_too_large {
                let limit = self.server.max_body_bytes;
                return self.fail(&ApiError::request_entity_too_large(&format!("limit is {limit}")));
            }
            return self.proxy(now, api);
        }
        if !info.is_resource_request {
            if let Some(request) = HealthRequest::of(&self.req.method, &self.req.path, self.authorizer.uses_rbac()) {
                self.out.push_back(Effect::Health);
                self.stage = handlers::Stage::Health { request, query };
                return;
            }
            if let Some(answer) =
                self.server.authenticator.service_accounts.as_deref().and_then(|c| nonresource::issuer_discovery(c, &self.req.method, &self.req.path))
            {
                let (head, body) = answer;
                return self.respond(head, body);
            }
            let accept = self.req.header("Accept").map(str::to_string);
            let sources = self.served.sources(&self.server.server_address);
            match nonresource::answer(&sources, &self.served.docs, &self.req.method, &self.req.path, &query, accept.as_deref()) {
                Some((head, body)) => self.respond(head, body),
                None if !self.served.crds_synced && is_group_path(&self.req.path) => self.fail(&ApiError::server_starting()),
                None => self.fail(&ApiError::path_not_found()),
            }
            return;
        }
        if self.req.body_too_large {
            let limit = self.server.max_body_bytes;
            return self.fail(&ApiError::request_entity_too_large(&format!("limit is {limit}")));
        }
        self.audit_request_object(&info.verb);
        self.resource_request(now, info, query);
    }

    /// kube's plain-text internal error (`responsewriters.InternalError`), naming the request as
    /// Go's %q does, HTML-escaped.
    fn internal_error_text(&mut self, why: &str) {
        let uri = if self.req.query.is_empty() { self.raw_path.clone() } else { format!("{}?{}", self.raw_path, self.req.query) };
        let text = format!("Internal Server Error: {}: {why}", crate::status::quote(&uri)).replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
        self.respond(Head::new(500, "text/plain; charset=utf-8"), Bytes::from(format!("{text}\n")));
    }

    /// Queues a complete answer.
    fn respond(&mut self, head: Head, body: Bytes) {
        self.responded = true;
        self.out.push_back(Effect::Respond(head));
        if !body.is_empty() && self.req.method != "HEAD" {
            self.out.push_back(Effect::Body(body));
        }
        self.out.push_back(Effect::End);
        self.stage = handlers::Stage::Done;
    }

    /// Answers with an error `Status` (in JSON until a format is negotiated).
    fn fail(&mut self, e: &ApiError) {
        let (head, body) = nonresource::error(e);
        self.respond(head, body);
    }

    /// When the machine must be polled again without an event: its deadline, or sooner when
    /// it waits to try a webhook call again.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.deadline().map(|deadline| self.stage.wakes_at().map_or(deadline, |t| t.min(deadline)))
    }

    /// The request's deadline until it is answered: how long the answer to an effect it
    /// emitted may be waited for.
    pub fn deadline(&self) -> Option<Timestamp> {
        (!self.responded).then_some(self.deadline)
    }

    /// When a relayed answer ([`Effect::Relay`]) must have ended: the request's deadline, as
    /// kube's timeout covers a proxied answer whole; `None` for a long-running request (a watch).
    pub fn relay_deadline(&self) -> Option<Timestamp> {
        (!self.long_running).then_some(self.deadline)
    }

    pub fn poll(&mut self, now: Timestamp) -> Option<Effect> {
        loop {
            if let Some(e) = self.ready.pop_front() {
                return Some(e);
            }
            if let Some(mut e) = self.out.pop_front() {
                if let Effect::Audit(_) = e {
                    return Some(e);
                }
                // An event's line goes out before what made it (after a watch's head, or the
                // end, the shell polls no more).
                let line = self.audit_pass(&mut e, now);
                let logged = line.is_some();
                self.ready.extend(line.map(Effect::Audit));
                if let Effect::Respond(head) | Effect::Watch { head, .. } = &mut e {
                    for w in respond::warning_texts(&self.warnings) {
                        head.headers.push(("Warning".into(), format!("299 - {}", crate::status::quote(&w))));
                    }
                }
                if let Some(p) = &mut self.pretty {
                    e = p.pass(e);
                }
                match &mut self.compressor {
                    Some(c) => {
                        c.pass(e, &mut self.ready);
                        continue;
                    }
                    None if logged => {
                        self.ready.push_back(e);
                        continue;
                    }
                    None => return Some(e),
                }
            }
            if !self.responded && now >= self.deadline && !matches!(self.stage, handlers::Stage::Done) {
                if self.proxy_timed_out() {
                    continue;
                }
                self.fail(&ApiError::timeout("request did not complete within the allotted timeout", 0));
                continue;
            }
            if !self.step(now) {
                return None;
            }
        }
    }

    pub fn handle(&mut self, now: Timestamp, event: Event) {
        self.on_event(now, event);
    }
}

/// Whether `path` is a group's or a group version's discovery under `/apis`
/// (`/apis/<group>`, `/apis/<group>/<version>`).
fn is_group_path(path: &str) -> bool {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    parts[0] == "apis" && matches!(parts.len(), 2 | 3)
}

#[cfg(test)]
mod tests;
