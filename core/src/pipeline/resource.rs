//! Resource requests: routing to the verb handlers and the stages a request goes through
//! (storage reads, watch cache reads, admission lookups, registry writes, streamed lists).

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use imbl::OrdMap;
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::params::{self, ListOptions, RvMatch};
use super::query::Query;
use super::respond::{Head, ListBody, Page, content_type, object_body, status_body};
use super::{Effect, Event, MIN_REQUEST_TIMEOUT_SECONDS, RequestInfo, RequestMachine};
use crate::admission::{self, Admission, Lookup, Operation};
use crate::auth::Attributes;
use crate::cache::{CachedObject, ReadRequest, ReadResult, Shared, WatchParams, WatchStart};
use crate::catalog::{Backing, Resource, ReviewContext};
use crate::codec::negotiate::{self, Target};
use crate::codec::{self, Format, Output};
use crate::kv::Revision;
use crate::meta;
use crate::registry::{self, BodyFindings, DeleteOptions, EvictionOp, FieldValidation, PatchType, WriteContext, WriteEffect, WriteKind, WriteOp, WriteOutcome};
use crate::status::{ApiError, success_status};
use crate::storage::{Outcome, StorageEffect, StorageEvent, StorageOp, StorageRequest};
use crate::table::IncludeObject;

/// A LIST being served: what to filter, from which key, how to answer.
#[derive(Clone)]
pub(super) struct ListPlan {
    res: Arc<Resource>,
    output: Output,
    namespace: Option<String>,
    opts: ListOptions,
    /// The collection's key prefix (`/registry/pods/default/`).
    prefix: Bytes,
}

/// A GET being served from the cache.
#[derive(Clone)]
pub(super) struct GetPlan {
    res: Arc<Resource>,
    output: Output,
    key: Bytes,
    subresource: String,
}

/// Where an admission lookup stands. Like kube-apiserver's admission plugins, which read
/// informer caches and fall back to a live read for an object not (yet) there, a lookup reads
/// the watch cache first and storage only when the object is missing from it.
pub(super) enum LookupRead {
    /// Asked the cache; its answer once it came.
    Cache(Option<Result<ReadResult, ApiError>>),
    Storage(Box<StorageOp<ApiError>>),
}

/// A write waiting for admission lookups.
pub(super) struct PendingWrite {
    res: Arc<Resource>,
    output: Output,
    ctx: WriteContext,
    kind: WriteKind,
}

pub(super) struct DeleteCollection {
    res: Arc<Resource>,
    output: Output,
    /// Which of the listed objects go.
    filter: ListOptions,
    ctx: WriteContext,
    options: DeleteOptions,
    names: VecDeque<String>,
    current: Option<WriteOp>,
    deleted: Vec<Value>,
    revision: Revision,
}

pub(super) enum Stage {
    Done,
    /// A health endpoint waits for the server's health.
    Health {
        request: super::HealthRequest,
        query: Query,
    },
    Get {
        op: StorageOp<ApiError>,
        res: Arc<Resource>,
        output: Output,
        subresource: String,
    },
    Probe {
        op: StorageOp<ApiError>,
        plan: ListPlan,
    },
    CacheList {
        plan: ListPlan,
    },
    CacheGet {
        plan: GetPlan,
    },
    StorageList {
        op: StorageOp<ApiError>,
        plan: ListPlan,
    },
    Lookups {
        pending: VecDeque<Lookup>,
        current: Option<(Lookup, LookupRead)>,
        admission: Admission,
        write: Option<PendingWrite>,
    },
    Write {
        op: Box<WriteOp>,
        res: Arc<Resource>,
        output: Output,
        action: bool,
    },
    Evict {
        op: Box<EvictionOp>,
        res: Arc<Resource>,
        output: Output,
    },
    Stream(ListBody),
    Listing {
        op: StorageOp<ApiError>,
        dc: Box<DeleteCollection>,
    },
    DeleteCollection(Box<DeleteCollection>),
}

fn method_not_allowed() -> ApiError {
    ApiError::new(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
}

/// Whether the request's verb is one the resource (or its subresource) serves.
fn verb_allowed(res: &Resource, info: &RequestInfo) -> bool {
    if info.subresource.is_empty() {
        return match info.verb.as_str() {
            "list" | "watch" => res.info.has_verb(&info.verb),
            "deletecollection" | "create" => res.info.has_verb(&info.verb) && info.name.is_empty(),
            v => res.info.has_verb(v) && !info.name.is_empty(),
        };
    }
    res.info.subresource(&info.subresource).is_some_and(|s| s.verbs.contains(&info.verb.as_str()))
}

impl RequestMachine {
    pub(super) fn resource_request(&mut self, now: Timestamp, info: RequestInfo, query: Query) {
        let Some(res) = self.server.catalog.get(&info.api_group, &info.api_version, &info.resource).cloned() else {
            return self.fail(&ApiError::path_not_found());
        };
        let namespace = if res.info.namespaced { Some(info.namespace.clone()).filter(|n| !n.is_empty()) } else { None };
        if !res.info.namespaced && !info.namespace.is_empty() && res.info.resource != "namespaces" {
            return self.fail(&ApiError::path_not_found());
        }
        if res.info.namespaced && namespace.is_none() && !matches!(info.verb.as_str(), "list" | "watch") {
            return self.fail(&if info.name.is_empty() { method_not_allowed() } else { ApiError::path_not_found() });
        }
        if !info.subresource.is_empty() && res.info.subresource(&info.subresource).is_none() {
            return self.fail(&ApiError::path_not_found());
        }
        if !verb_allowed(&res, &info) {
            return self.fail(&method_not_allowed());
        }
        let attrs = Attributes {
            verb: info.verb.clone(),
            group: info.api_group.clone(),
            resource: info.resource.clone(),
            subresource: info.subresource.clone(),
            namespace: info.namespace.clone(),
            name: info.name.clone(),
            path: info.path.clone(),
            resource_request: true,
        };
        let decision = self.server.authorizer.authorize(&self.user, &attrs);
        if !decision.allowed {
            let why = format!(
                "User {} cannot {} resource {} in API group {}{}",
                crate::status::quote(&self.user.name),
                info.verb,
                crate::status::quote(&info.resource),
                crate::status::quote(&info.api_group),
                if info.namespace.is_empty() {
                    " at the cluster scope".to_string()
                } else {
                    format!(" in the namespace {}", crate::status::quote(&info.namespace))
                }
            );
            return self.fail(&ApiError::forbidden(&res.info.group_resource(), &info.name, &why));
        }
        // kube routes no HEAD to a resource's handlers: its router answers 405.
        if self.req.method == "HEAD" {
            return self.fail(&method_not_allowed());
        }
        self.warnings.extend(res.info.deprecation.map(str::to_string));
        let result = match info.verb.as_str() {
            "get" => self.get(res, &info, &query),
            "list" | "watch" => self.list_or_watch(now, res, &info, &query, namespace),
            "create" => self.create(now, res, &info, &query, namespace),
            "update" => self.update(now, res, &info, &query, namespace),
            "patch" => self.patch(now, res, &info, &query, namespace),
            "delete" => self.delete(now, res, &info, &query, namespace),
            "deletecollection" => self.delete_collection(now, res, &info, &query, namespace),
            _ => Err(method_not_allowed()),
        };
        if let Err(e) = result {
            self.fail(&e);
        }
    }

    fn accept(&self) -> Option<&str> {
        self.req.header("Accept")
    }

    fn output(&self, target: Target, query: &Query) -> Result<Output, ApiError> {
        let include = IncludeObject::parse(query.get("includeObject")).map_err(ApiError::bad_request)?;
        negotiate::negotiate_output(self.accept(), target, include.into())
    }

    fn object_key(&self, res: &Resource, namespace: Option<&str>, name: &str) -> Bytes {
        crate::storage::keys::object_key(&self.server.storage_root(res), namespace, name)
    }

    // ---------------------------------------------------------------------------------------
    // Reads

    fn get(&mut self, res: Arc<Resource>, info: &RequestInfo, query: &Query) -> Result<(), ApiError> {
        let output = self.output(Target::Object, query)?;
        let ns = if res.info.namespaced { Some(info.namespace.as_str()) } else { None };
        let key = self.object_key(&res, ns, &info.name);
        let rv = query.get("resourceVersion").unwrap_or("");
        if rv.is_empty() {
            let op = StorageOp::new(StorageRequest::Get { key, revision: 0 });
            self.stage = Stage::Get { op, res, output, subresource: info.subresource.clone() };
        } else {
            let min =
                if rv == "0" { None } else { Some(rv.parse::<Revision>().map_err(|_| ApiError::bad_request(format!("invalid resource version {rv:?}")))?) };
            self.out.push_back(Effect::Cache { resource: res.clone(), request: ReadRequest::Latest { min } });
            self.stage = Stage::CacheGet { plan: GetPlan { res, output, key, subresource: info.subresource.clone() } };
        }
        Ok(())
    }

    fn respond_object(&mut self, res: &Resource, obj: &Value, output: Output, code: u16, subresource: &str, now: Timestamp) {
        let scale = if subresource == "scale" { res.strategy.scale_of(obj) } else { None };
        match object_body(res, scale.as_ref().unwrap_or(obj), output, now) {
            Ok((ct, body)) => self.respond(Head::new(code, &ct), body),
            Err(e) => self.fail_as(&e, output.format),
        }
    }

    /// An error in the client's format.
    fn fail_as(&mut self, e: &ApiError, format: Format) {
        let (ct, body) = status_body(&e.to_status(), format);
        self.respond(super::respond::error_head(e, &ct), body);
    }

    fn list_or_watch(&mut self, now: Timestamp, res: Arc<Resource>, info: &RequestInfo, query: &Query, namespace: Option<String>) -> Result<(), ApiError> {
        let watch = info.verb == "watch";
        let opts = params::list_options(query, watch)?;
        for f in opts.fields.fields() {
            let known = f == "metadata.name" || (res.info.namespaced && f == "metadata.namespace") || res.strategy.selectable_fields().contains(&f);
            if !known {
                return Err(ApiError::bad_request(if res.strategy.selectable_fields().is_empty() {
                    format!("{} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"", crate::status::quote(f))
                } else {
                    format!("field label not supported: {f}")
                }));
            }
        }
        let target = if watch { Target::Watch } else { Target::List };
        let output = self.output(target, query)?;
        let prefix = crate::storage::keys::collection_prefix(&self.server.storage_root(&res), namespace.as_deref());
        if watch {
            let start = match (opts.send_initial_events, opts.rv) {
                (Some(true), RvMatch::Consistent) => WatchStart::InitialEvents { min: None },
                (Some(true), RvMatch::Any) => WatchStart::InitialEvents { min: None },
                (Some(true), RvMatch::NotOlderThan(n) | RvMatch::Exact(n)) => WatchStart::InitialEvents { min: Some(n) },
                (_, RvMatch::Consistent | RvMatch::Any) => WatchStart::Current,
                (_, RvMatch::NotOlderThan(n) | RvMatch::Exact(n)) => WatchStart::After(n),
            };
            let timeout = opts
                .timeout_seconds
                .filter(|t| *t > 0)
                .unwrap_or_else(|| MIN_REQUEST_TIMEOUT_SECONDS + (self.rng.next_u64() % MIN_REQUEST_TIMEOUT_SECONDS as u64) as i64);
            let params = WatchParams {
                namespace,
                labels: opts.labels,
                fields: opts.fields,
                start,
                bookmarks: opts.allow_bookmarks,
                output,
                deadline: now + SignedDuration::from_secs(timeout),
            };
            let head =
                Head::new(200, &if output.view == codec::View::Object { output.format.stream_content_type().to_string() } else { content_type(output, true) });
            self.responded = true;
            self.out.push_back(Effect::Watch { resource: res, params, head });
            self.stage = Stage::Done;
            return Ok(());
        }
        let plan = ListPlan { res: res.clone(), output, namespace, opts, prefix };
        let from_cache = self.server.consistent_list_from_cache;
        if let Some(token) = &plan.opts.continue_token {
            if !from_cache {
                self.storage_list(plan);
                return Ok(());
            }
            let request = ReadRequest::Exact { revision: token.rv };
            self.out.push_back(Effect::Cache { resource: res, request });
            self.stage = Stage::CacheList { plan };
            return Ok(());
        }
        match plan.opts.rv {
            RvMatch::Consistent if !from_cache => self.storage_list(plan),
            RvMatch::Consistent => {
                let op = StorageOp::new(StorageRequest::Revision { key: Bytes::from(format!("{}/", self.server.storage_root(&res))) });
                self.stage = Stage::Probe { op, plan };
            }
            RvMatch::Any => self.read_cache(plan, ReadRequest::Latest { min: None }),
            RvMatch::NotOlderThan(n) => self.read_cache(plan, ReadRequest::Latest { min: Some(n) }),
            RvMatch::Exact(n) => self.read_cache(plan, ReadRequest::Exact { revision: n }),
        }
        Ok(())
    }

    /// Reads the list from storage: at the continue token's or the exact revision asked for,
    /// or the current one.
    fn storage_list(&mut self, plan: ListPlan) {
        let revision = plan.opts.continue_token.as_ref().map(|t| t.rv).unwrap_or(match plan.opts.rv {
            RvMatch::Exact(n) => n,
            _ => 0,
        });
        let start = plan.opts.continue_token.as_ref().map(|t| {
            let mut k = plan.prefix.to_vec();
            k.extend_from_slice(t.start.as_bytes());
            Bytes::from(k)
        });
        let op = StorageOp::new(StorageRequest::List { prefix: plan.prefix.clone(), start, limit: 0, revision });
        self.stage = Stage::StorageList { op, plan };
    }

    fn read_cache(&mut self, plan: ListPlan, request: ReadRequest) {
        self.out.push_back(Effect::Cache { resource: plan.res.clone(), request });
        self.stage = Stage::CacheList { plan };
    }

    /// Streams the page of a list read from `objects` at `revision`.
    fn serve_list(&mut self, plan: ListPlan, revision: Revision, objects: &OrdMap<Bytes, Shared>, now: Timestamp) {
        let start = match &plan.opts.continue_token {
            Some(t) => {
                let mut k = plan.prefix.to_vec();
                k.extend_from_slice(t.start.as_bytes());
                Bytes::from(k)
            }
            None => plan.prefix.clone(),
        };
        // `resourceVersion=0` lists are served whole from the cache, as kube does.
        let limit = if plan.opts.rv == RvMatch::Any && plan.opts.continue_token.is_none() { 0 } else { plan.opts.limit };
        let page = paginate(objects.range(start..).take_while(|(k, _)| k.starts_with(&plan.prefix)).map(|(_, v)| v), &plan, revision, limit);
        self.stream(plan, page, now);
    }

    fn stream(&mut self, plan: ListPlan, page: Page, now: Timestamp) {
        match ListBody::new(plan.res.clone(), plan.output, page, now) {
            Ok(body) => {
                self.responded = true;
                self.out.push_back(Effect::Respond(Head::new(200, &content_type(plan.output, true))));
                self.stage = Stage::Stream(body);
            }
            Err(e) => self.fail_as(&e, plan.output.format),
        }
    }

    // ---------------------------------------------------------------------------------------
    // Writes

    /// The request's object, and (JSON bodies, unless `fieldValidation=Ignore`) the keys it
    /// repeats.
    fn decode_body(&self, res: &Resource, validation: FieldValidation) -> Result<(Value, BodyFindings), ApiError> {
        let format = negotiate::request_format(self.req.header("Content-Type"))?;
        let (mut obj, findings) = match format {
            Format::Json if validation != FieldValidation::Ignore => {
                let (obj, duplicates) =
                    codec::strict::decode(&self.req.body).map_err(|e| ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}")))?;
                (obj, BodyFindings::of_object(&self.req.body, duplicates))
            }
            _ => {
                let obj = codec::decode(&self.req.body, format).map_err(|e| {
                    ApiError::bad_request(match format {
                        Format::Json => format!("couldn't get version/kind; json parse error: {e}"),
                        _ => e,
                    })
                })?;
                (obj, BodyFindings::default())
            }
        };
        if !obj.is_object() {
            return Err(ApiError::bad_request(format!(
                "couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}",
                if obj.is_array() { "array" } else { "string" }
            )));
        }
        let want_av = res.info.api_version();
        let av = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("").to_string();
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
        if !av.is_empty() && av != want_av {
            return Err(ApiError::bad_request(format!("the API version in the data ({av}) does not match the expected API version ({want_av})")));
        }
        if !kind.is_empty() && kind != res.info.kind {
            return Err(ApiError::bad_request(format!("the kind in the data ({kind}) does not match the expected kind ({})", res.info.kind)));
        }
        meta::set_type_meta(&mut obj, &want_av, res.info.kind);
        Ok((obj, findings))
    }

    fn write_context(&self, now: Timestamp, info: &RequestInfo, namespace: Option<String>, opts: &params::WriteOptions) -> WriteContext {
        WriteContext {
            now,
            namespace,
            name: Some(info.name.clone()).filter(|n| !n.is_empty()),
            subresource: Some(info.subresource.clone()).filter(|s| !s.is_empty()),
            dry_run: opts.dry_run,
            field_manager: opts.field_manager.clone(),
            field_validation: opts.field_validation,
            body_findings: BodyFindings::default(),
            prefix: self.server.prefix.clone(),
            user: self.user.clone(),
        }
    }

    fn user_agent(&self) -> String {
        self.req.header("User-Agent").unwrap_or("").to_string()
    }

    fn create(&mut self, now: Timestamp, res: Arc<Resource>, info: &RequestInfo, query: &Query, namespace: Option<String>) -> Result<(), ApiError> {
        let output = self.output(Target::Object, query)?;
        let opts = params::write_options(query, "CreateOptions", &self.user_agent())?;
        let mut ctx = self.write_context(now, info, namespace.clone(), &opts);
        match res.info.backing {
            Backing::Review => {
                let (mut obj, _) = self.decode_body(&res, FieldValidation::Ignore)?;
                crate::schema::normalize::normalize(crate::schema::schema(), res.info.definition, &mut obj).map_err(ApiError::bad_request)?;
                let ctx = ReviewContext { user: &self.user, authenticator: &self.server.authenticator, authorizer: &self.server.authorizer };
                let answer = res.strategy.review(obj, &ctx)?;
                self.respond_object(&res, &answer, output, 201, "", now);
                return Ok(());
            }
            Backing::ActionOn { resource, subresource } => {
                let body = self.decode_action_body()?;
                let target = self.server.catalog.get(res.info.group, res.info.version, resource).cloned().ok_or_else(ApiError::path_not_found)?;
                ctx.name = Some(meta::name(&body).to_string());
                ctx.subresource = Some(subresource.to_string());
                self.start_action(target, ctx, body, output);
                return Ok(());
            }
            Backing::Stored => {}
        }
        if res.info.subresource(&info.subresource).is_some_and(|s| s.kind == "Eviction") {
            return self.evict(res, ctx, query, output);
        }
        if !info.subresource.is_empty() {
            let body = self.decode_action_body()?;
            self.start_action(res, ctx, body, output);
            return Ok(());
        }
        let (obj, findings) = self.decode_body(&res, opts.field_validation)?;
        ctx.body_findings = findings;
        let lookups = admission::lookups(&res.info, Operation::Create, None, namespace.as_deref(), Some(&obj));
        self.start_write(PendingWrite { res, output, ctx, kind: WriteKind::Create(obj) }, lookups);
        Ok(())
    }

    /// The body of a create on a subresource that changes its parent (`pods/binding`).
    fn decode_action_body(&self) -> Result<Value, ApiError> {
        codec::decode(&self.req.body, negotiate::request_format(self.req.header("Content-Type"))?).map_err(ApiError::bad_request)
    }

    fn start_action(&mut self, res: Arc<Resource>, ctx: WriteContext, body: Value, output: Output) {
        let op = WriteOp::new(res.clone(), ctx, WriteKind::Action(body), Admission::default(), crate::rand::Rng::new(self.rng.next_u64()));
        self.stage = Stage::Write { op: Box::new(op), res, output, action: true };
    }

    /// `pods/eviction`: the Eviction (policy/v1 or v1beta1) names the pod of the URL; its
    /// delete options apply to the pod's delete.
    fn evict(&mut self, pods: Arc<Resource>, mut ctx: WriteContext, query: &Query, output: Output) -> Result<(), ApiError> {
        let body = self.decode_action_body()?;
        let api_version = body.get("apiVersion").and_then(Value::as_str).unwrap_or("policy/v1");
        let kind = body.get("kind").and_then(Value::as_str).unwrap_or("Eviction");
        if kind != "Eviction" || !["policy/v1", "policy/v1beta1"].contains(&api_version) {
            return Err(ApiError::bad_request(format!("not a Eviction object: {api_version}, Kind={kind}")));
        }
        if ctx.name.as_deref() != Some(meta::name(&body)) {
            return Err(ApiError::bad_request("name in URL does not match name in Eviction object"));
        }
        let (options, dry_run) = params::delete_options(query, body.get("deleteOptions"))?;
        ctx.dry_run |= dry_run;
        let budgets = self.server.catalog.get("policy", "v1", "poddisruptionbudgets").cloned().ok_or_else(ApiError::path_not_found)?;
        let op = EvictionOp::new(pods.clone(), budgets, ctx, options, crate::rand::Rng::new(self.rng.next_u64()));
        self.stage = Stage::Evict { op: Box::new(op), res: pods, output };
        Ok(())
    }

    fn update(&mut self, now: Timestamp, res: Arc<Resource>, info: &RequestInfo, query: &Query, namespace: Option<String>) -> Result<(), ApiError> {
        let output = self.output(Target::Object, query)?;
        let opts = params::write_options(query, "UpdateOptions", &self.user_agent())?;
        let (obj, findings) = if info.subresource == "scale" {
            let format = negotiate::request_format(self.req.header("Content-Type"))?;
            (codec::decode(&self.req.body, format).map_err(ApiError::bad_request)?, BodyFindings::default())
        } else {
            self.decode_body(&res, opts.field_validation)?
        };
        let mut ctx = self.write_context(now, info, namespace, &opts);
        ctx.body_findings = findings;
        self.start_write(PendingWrite { res, output, ctx, kind: WriteKind::Update(obj) }, Vec::new());
        Ok(())
    }

    fn patch(&mut self, now: Timestamp, res: Arc<Resource>, info: &RequestInfo, query: &Query, namespace: Option<String>) -> Result<(), ApiError> {
        let output = self.output(Target::Object, query)?;
        let opts = params::write_options(query, "PatchOptions", &self.user_agent())?;
        let pt = negotiate::patch_type(self.req.header("Content-Type"), opts.force.unwrap_or(false))?;
        if opts.force.is_some() && !matches!(pt, PatchType::Apply { .. }) {
            return Err(ApiError::invalid(
                &crate::status::GroupKind { group: "meta.k8s.io".into(), kind: "PatchOptions".into() },
                "",
                &[crate::status::FieldError::forbidden("force", "may not be specified for non-apply patch")],
            ));
        }
        let undecodable = |e: serde_json::Error| ApiError::bad_request(format!("error decoding patch: {e}"));
        let (doc, findings) = match pt {
            PatchType::Apply { .. } => {
                (serde_norway::from_slice(&self.req.body).map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?, BodyFindings::default())
            }
            _ if opts.field_validation == FieldValidation::Ignore => (serde_json::from_slice(&self.req.body).map_err(undecodable)?, BodyFindings::default()),
            PatchType::Json => {
                let (doc, duplicates) = codec::strict::decode(&self.req.body).map_err(undecodable)?;
                let findings = BodyFindings::of_json_patch(&self.req.body, &doc, duplicates);
                (doc, findings)
            }
            _ => {
                let (doc, duplicates) = codec::strict::decode(&self.req.body).map_err(undecodable)?;
                (doc, BodyFindings::of_patch(duplicates))
            }
        };
        if matches!(pt, PatchType::Apply { .. }) && query.get("fieldManager").is_none_or(str::is_empty) {
            return Err(ApiError::bad_request("PATCH, application/apply-patch+yaml requests require a fieldManager to be set"));
        }
        let mut ctx = self.write_context(now, info, namespace, &opts);
        ctx.body_findings = findings;
        self.start_write(PendingWrite { res, output, ctx, kind: WriteKind::Patch(pt, doc) }, Vec::new());
        Ok(())
    }

    fn delete_body(&self) -> Result<Option<Value>, ApiError> {
        if self.req.body.is_empty() {
            return Ok(None);
        }
        let format = negotiate::request_format(self.req.header("Content-Type"))?;
        codec::decode(&self.req.body, format).map(Some).map_err(ApiError::bad_request)
    }

    fn delete(&mut self, now: Timestamp, res: Arc<Resource>, info: &RequestInfo, query: &Query, namespace: Option<String>) -> Result<(), ApiError> {
        let output = self.output(Target::Object, query)?;
        let (options, dry_run) = params::delete_options(query, self.delete_body()?.as_ref())?;
        let opts = params::WriteOptions { dry_run, field_manager: String::new(), field_validation: FieldValidation::Ignore, force: None };
        let ctx = self.write_context(now, info, namespace, &opts);
        self.start_write(PendingWrite { res, output, ctx, kind: WriteKind::Delete(options) }, Vec::new());
        Ok(())
    }

    fn delete_collection(&mut self, now: Timestamp, res: Arc<Resource>, info: &RequestInfo, query: &Query, namespace: Option<String>) -> Result<(), ApiError> {
        let output = self.output(Target::List, query)?;
        let (options, dry_run) = params::delete_options(query, self.delete_body()?.as_ref())?;
        let list = params::list_options(query, false)?;
        let opts = params::WriteOptions { dry_run, field_manager: String::new(), field_validation: FieldValidation::Ignore, force: None };
        let ctx = self.write_context(now, info, namespace.clone(), &opts);
        let prefix = crate::storage::keys::collection_prefix(&self.server.storage_root(&res), namespace.as_deref());
        let op = StorageOp::new(StorageRequest::List { prefix, start: None, limit: 0, revision: 0 });
        let dc = DeleteCollection { res, output, filter: list, ctx, options, names: VecDeque::new(), current: None, deleted: Vec::new(), revision: 0 };
        self.stage = Stage::Listing { op, dc: Box::new(dc) };
        Ok(())
    }

    fn start_write(&mut self, write: PendingWrite, lookups: Vec<Lookup>) {
        self.stage = Stage::Lookups { pending: lookups.into(), current: None, admission: Admission::default(), write: Some(write) };
    }

    fn lookup_key(&self, l: &Lookup) -> Bytes {
        match l {
            Lookup::Namespace(ns) => Bytes::from(format!("{}/namespaces/{ns}", self.server.prefix)),
            Lookup::ServiceAccount { namespace, name } => Bytes::from(format!("{}/serviceaccounts/{namespace}/{name}", self.server.prefix)),
        }
    }

    /// The resource whose watch cache holds what `l` looks for.
    fn lookup_resource(&self, l: &Lookup) -> Option<Arc<Resource>> {
        let resource = match l {
            Lookup::Namespace(_) => "namespaces",
            Lookup::ServiceAccount { .. } => "serviceaccounts",
        };
        self.server.catalog.get("", "v1", resource).cloned()
    }

    fn finish_write(&mut self, res: Arc<Resource>, output: Output, action: bool, result: Result<WriteOutcome, ApiError>, now: Timestamp) {
        let outcome = match result {
            Ok(o) => o,
            Err(e) => return self.fail_as(&e, output.format),
        };
        if action {
            let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201});
            let (ct, body) = status_body(&status, output.format);
            return self.respond(Head::new(201, &ct), body);
        }
        if outcome.deleted && res.info.delete_returns == crate::catalog::DeleteReturns::Status {
            let status = success_status(&res.info.group_resource(), meta::name(&outcome.object), meta::uid(&outcome.object));
            let (ct, body) = status_body(&status, output.format);
            return self.respond(Head::new(200, &ct), body);
        }
        self.warnings.extend(outcome.warnings.iter().cloned());
        if output == (Output { format: Format::Json, view: crate::codec::View::Object })
            && let Some((stored, rv, splice)) = &outcome.stored
        {
            return self.respond(Head::new(outcome.code, &content_type(output, false)), Bytes::from(splice.apply(stored, *rv)));
        }
        self.respond_object(&res, &outcome.object, output, outcome.code, "", now);
    }

    // ---------------------------------------------------------------------------------------
    // Driving the stages

    /// Advances the current stage; false when it waits for an event.
    pub(super) fn step(&mut self, now: Timestamp) -> bool {
        match std::mem::replace(&mut self.stage, Stage::Done) {
            Stage::Done => false,
            waiting @ Stage::Health { .. } => {
                self.stage = waiting;
                false
            }
            Stage::Stream(mut body) => {
                match body.next_chunk() {
                    Some(chunk) => {
                        self.out.push_back(Effect::Body(chunk));
                        self.stage = Stage::Stream(body);
                    }
                    None => self.out.push_back(Effect::End),
                }
                true
            }
            Stage::Get { mut op, res, output, subresource } => match op.poll(now) {
                Some(StorageEffect::Kv(r)) => {
                    self.out.push_back(Effect::Kv(r));
                    self.stage = Stage::Get { op, res, output, subresource };
                    true
                }
                Some(StorageEffect::Done(r)) => {
                    let name = self.resource_name_from_path();
                    match r {
                        Ok(Outcome::Found(Some(kv))) => match registry::decode_stored(&res, &kv) {
                            Ok(obj) => self.respond_object(&res, &obj, output, 200, &subresource, now),
                            Err(e) => self.fail_as(&e, output.format),
                        },
                        Ok(_) => self.fail_as(&ApiError::not_found(&res.info.group_resource(), &name), output.format),
                        Err(e) => self.fail_as(&registry::storage_error(e, &res.info.group_resource(), &name), output.format),
                    }
                    true
                }
                _ => {
                    self.stage = Stage::Get { op, res, output, subresource };
                    false
                }
            },
            Stage::Probe { mut op, plan } => match op.poll(now) {
                Some(StorageEffect::Kv(r)) => {
                    self.out.push_back(Effect::Kv(r));
                    self.stage = Stage::Probe { op, plan };
                    true
                }
                Some(StorageEffect::Done(Ok(Outcome::AtRevision(revision)))) => {
                    self.read_cache(plan, ReadRequest::Latest { min: Some(revision) });
                    true
                }
                Some(StorageEffect::Done(r)) => {
                    let e = match r {
                        Err(e) => registry::storage_error(e, &plan.res.info.group_resource(), ""),
                        Ok(o) => ApiError::internal(format!("unexpected storage outcome {o:?}")),
                    };
                    self.fail_as(&e, plan.output.format);
                    true
                }
                _ => {
                    self.stage = Stage::Probe { op, plan };
                    false
                }
            },
            Stage::StorageList { mut op, plan } => match op.poll(now) {
                Some(StorageEffect::Kv(r)) => {
                    self.out.push_back(Effect::Kv(r));
                    self.stage = Stage::StorageList { op, plan };
                    true
                }
                Some(StorageEffect::Done(r)) => {
                    match r {
                        Ok(Outcome::Listed(range)) => {
                            let revision = plan.opts.continue_token.as_ref().map(|t| t.rv).unwrap_or(match plan.opts.rv {
                                RvMatch::Exact(n) => n,
                                _ => range.header_revision,
                            });
                            let objects: Vec<Shared> = range.kvs.iter().filter_map(|kv| CachedObject::from_kv(&plan.res, kv).ok()).map(Arc::new).collect();
                            let page = paginate(objects.iter(), &plan, revision, plan.opts.limit);
                            self.stream(plan, page, now);
                        }
                        Err(crate::storage::StorageError::Compacted { .. }) => {
                            let e = if plan.opts.continue_token.is_some() {
                                ApiError::expired(
                                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                                )
                            } else {
                                ApiError::expired("The resourceVersion for the provided list is too old.")
                            };
                            self.fail_as(&e, plan.output.format);
                        }
                        Err(e) => self.fail_as(&registry::storage_error(e, &plan.res.info.group_resource(), ""), plan.output.format),
                        Ok(o) => self.fail_as(&ApiError::internal(format!("unexpected storage outcome {o:?}")), plan.output.format),
                    }
                    true
                }
                _ => {
                    self.stage = Stage::StorageList { op, plan };
                    false
                }
            },
            Stage::Lookups { mut pending, current, mut admission, write } => match current {
                None => match pending.pop_front() {
                    Some(l) => {
                        let read = match self.lookup_resource(&l) {
                            Some(resource) => {
                                self.out.push_back(Effect::Cache { resource, request: ReadRequest::Latest { min: None } });
                                LookupRead::Cache(None)
                            }
                            None => LookupRead::Storage(Box::new(StorageOp::new(StorageRequest::Get { key: self.lookup_key(&l), revision: 0 }))),
                        };
                        self.stage = Stage::Lookups { pending, current: Some((l, read)), admission, write };
                        true
                    }
                    None => {
                        let w = write.expect("a write waits for its lookups");
                        let op = WriteOp::new(w.res.clone(), w.ctx, w.kind, admission, crate::rand::Rng::new(self.rng.next_u64()));
                        self.stage = Stage::Write { op: Box::new(op), res: w.res, output: w.output, action: false };
                        true
                    }
                },
                Some((l, LookupRead::Cache(None))) => {
                    self.stage = Stage::Lookups { pending, current: Some((l, LookupRead::Cache(None))), admission, write };
                    false
                }
                Some((l, LookupRead::Cache(Some(answer)))) => {
                    let key = self.lookup_key(&l);
                    let cached = match answer {
                        Ok(ReadResult::Snapshot(s)) => s.objects.get(&key).map(|o| o.value()),
                        _ => None,
                    };
                    match cached {
                        Some(found) => {
                            admission.record(l, Some(found));
                            self.stage = Stage::Lookups { pending, current: None, admission, write };
                        }
                        None => {
                            let op = Box::new(StorageOp::new(StorageRequest::Get { key, revision: 0 }));
                            self.stage = Stage::Lookups { pending, current: Some((l, LookupRead::Storage(op))), admission, write };
                        }
                    }
                    true
                }
                Some((l, LookupRead::Storage(mut op))) => match op.poll(now) {
                    Some(StorageEffect::Kv(r)) => {
                        self.out.push_back(Effect::Kv(r));
                        self.stage = Stage::Lookups { pending, current: Some((l, LookupRead::Storage(op))), admission, write };
                        true
                    }
                    Some(StorageEffect::Done(r)) => {
                        let found = match r {
                            Ok(Outcome::Found(kv)) => kv.and_then(|kv| serde_json::from_slice::<Value>(&kv.value).ok()),
                            Ok(_) => None,
                            Err(e) => {
                                let w = write.expect("a write waits for its lookups");
                                self.fail_as(&registry::storage_error(e, &w.res.info.group_resource(), ""), w.output.format);
                                return true;
                            }
                        };
                        admission.record(l, found);
                        self.stage = Stage::Lookups { pending, current: None, admission, write };
                        true
                    }
                    _ => {
                        self.stage = Stage::Lookups { pending, current: Some((l, LookupRead::Storage(op))), admission, write };
                        false
                    }
                },
            },
            Stage::Write { mut op, res, output, action } => match op.poll(now) {
                Some(WriteEffect::Kv(r)) => {
                    self.out.push_back(Effect::Kv(r));
                    self.stage = Stage::Write { op, res, output, action };
                    true
                }
                Some(WriteEffect::Done(result)) => {
                    self.finish_write(res, output, action, result, now);
                    true
                }
                None => {
                    self.stage = Stage::Write { op, res, output, action };
                    false
                }
            },
            Stage::Evict { mut op, res, output } => match op.poll(now) {
                Some(WriteEffect::Kv(r)) => {
                    self.out.push_back(Effect::Kv(r));
                    self.stage = Stage::Evict { op, res, output };
                    true
                }
                Some(WriteEffect::Done(result)) => {
                    self.finish_write(res, output, true, result, now);
                    true
                }
                None => {
                    self.stage = Stage::Evict { op, res, output };
                    false
                }
            },
            Stage::Listing { mut op, mut dc } => match op.poll(now) {
                Some(StorageEffect::Kv(r)) => {
                    self.out.push_back(Effect::Kv(r));
                    self.stage = Stage::Listing { op, dc };
                    true
                }
                Some(StorageEffect::Done(Ok(Outcome::Listed(range)))) => {
                    dc.revision = range.header_revision;
                    for kv in &range.kvs {
                        let Ok(o) = CachedObject::from_kv(&dc.res, kv) else { continue };
                        let f = &dc.filter;
                        if o.matches(&f.labels, &f.fields) {
                            dc.names.push_back(o.name.clone());
                        }
                    }
                    self.stage = Stage::DeleteCollection(dc);
                    true
                }
                Some(StorageEffect::Done(r)) => {
                    let e = match r {
                        Err(e) => registry::storage_error(e, &dc.res.info.group_resource(), ""),
                        Ok(o) => ApiError::internal(format!("unexpected storage outcome {o:?}")),
                    };
                    self.fail_as(&e, dc.output.format);
                    true
                }
                _ => {
                    self.stage = Stage::Listing { op, dc };
                    false
                }
            },
            Stage::DeleteCollection(mut dc) => {
                let Some(op) = dc.current.as_mut() else {
                    match dc.names.pop_front() {
                        Some(name) => {
                            let ctx = WriteContext { name: Some(name), ..dc.ctx.clone() };
                            dc.current = Some(WriteOp::new(
                                dc.res.clone(),
                                ctx,
                                WriteKind::Delete(dc.options.clone()),
                                Admission::default(),
                                crate::rand::Rng::new(self.rng.next_u64()),
                            ));
                            self.stage = Stage::DeleteCollection(dc);
                        }
                        None => self.finish_delete_collection(*dc),
                    }
                    return true;
                };
                match op.poll(now) {
                    Some(WriteEffect::Kv(r)) => {
                        self.out.push_back(Effect::Kv(r));
                        self.stage = Stage::DeleteCollection(dc);
                        true
                    }
                    Some(WriteEffect::Done(result)) => {
                        dc.current = None;
                        match result {
                            Ok(o) => {
                                dc.deleted.push(o.object);
                                self.stage = Stage::DeleteCollection(dc);
                            }
                            // Gone already: someone else deleted it.
                            Err(e) if e.code == 404 => self.stage = Stage::DeleteCollection(dc),
                            Err(e) => self.fail_as(&e, dc.output.format),
                        }
                        true
                    }
                    None => {
                        self.stage = Stage::DeleteCollection(dc);
                        false
                    }
                }
            }
            stage @ (Stage::CacheList { .. } | Stage::CacheGet { .. }) => {
                self.stage = stage;
                false
            }
        }
    }

    fn finish_delete_collection(&mut self, dc: DeleteCollection) {
        let items: Vec<Value> = dc.deleted;
        let list = json!({
            "kind": dc.res.info.list_kind(),
            "apiVersion": dc.res.info.api_version(),
            "metadata": {"resourceVersion": dc.revision.to_string()},
            "items": items,
        });
        let output = Output { view: codec::View::Object, ..dc.output };
        match codec::encode(&list, output.format) {
            Ok(body) => self.respond(Head::new(200, &content_type(output, false)), body),
            Err(e) => self.fail_as(&ApiError::internal(e), output.format),
        }
    }

    /// The object name of the request path (for not-found messages of GETs).
    fn resource_name_from_path(&self) -> String {
        let query = Query::parse(&self.req.query);
        resolve_name(&self.req.method, &self.req.path, &query)
    }

    pub(super) fn on_event(&mut self, now: Timestamp, event: Event) {
        match (&mut self.stage, event) {
            (Stage::Health { request, query }, Event::Health(health)) => {
                let (head, body) = request.answer(query, &health);
                self.respond(head, body);
            }
            (Stage::Get { op, .. } | Stage::Probe { op, .. } | Stage::StorageList { op, .. } | Stage::Listing { op, .. }, Event::Kv(r)) => {
                op.handle(now, StorageEvent::Kv(r));
            }
            (Stage::Lookups { current: Some((_, LookupRead::Storage(op))), .. }, Event::Kv(r)) => op.handle(now, StorageEvent::Kv(r)),
            (Stage::Lookups { current: Some((_, LookupRead::Cache(answer @ None))), .. }, Event::Cache(result)) => *answer = Some(result),
            (Stage::Write { op, .. }, Event::Kv(r)) => op.handle(now, r),
            (Stage::Evict { op, .. }, Event::Kv(r)) => op.handle(now, r),
            (Stage::DeleteCollection(dc), Event::Kv(r)) => {
                if let Some(op) = dc.current.as_mut() {
                    op.handle(now, r);
                }
            }
            (Stage::CacheList { .. }, Event::Cache(result)) => {
                let Stage::CacheList { plan } = std::mem::replace(&mut self.stage, Stage::Done) else { unreachable!() };
                match result {
                    Ok(ReadResult::Snapshot(s)) => self.serve_list(plan, s.revision, &s.objects, now),
                    Ok(ReadResult::NotCached) => self.storage_list(plan),
                    Err(e) => self.fail_as(&e, plan.output.format),
                }
            }
            (Stage::CacheGet { .. }, Event::Cache(result)) => {
                let Stage::CacheGet { plan } = std::mem::replace(&mut self.stage, Stage::Done) else { unreachable!() };
                match result {
                    Ok(ReadResult::Snapshot(s)) => match s.objects.get(&plan.key) {
                        Some(o) => {
                            let obj = o.value();
                            self.respond_object(&plan.res, &obj, plan.output, 200, &plan.subresource, now);
                        }
                        None => {
                            let name = self.resource_name_from_path();
                            self.fail_as(&ApiError::not_found(&plan.res.info.group_resource(), &name), plan.output.format);
                        }
                    },
                    Ok(ReadResult::NotCached) => self.fail_as(&ApiError::expired("too old resource version"), plan.output.format),
                    Err(e) => self.fail_as(&e, plan.output.format),
                }
            }
            _ => {}
        }
    }
}

fn resolve_name(method: &str, path: &str, query: &Query) -> String {
    super::resolve(method, path, query).name
}

/// One page of a list: the matching objects from `items`, up to `limit` (0: all), with the
/// continue token and remaining count kube gives.
fn paginate<'a>(items: impl Iterator<Item = &'a Shared>, plan: &ListPlan, revision: Revision, limit: i64) -> Page {
    let filtered = !plan.opts.labels.is_empty() || !plan.opts.fields.is_empty();
    let matches = |o: &CachedObject| plan.namespace.as_ref().is_none_or(|ns| &o.namespace == ns) && o.matches(&plan.opts.labels, &plan.opts.fields);
    let mut page = Page { revision, ..Default::default() };
    let mut last_key: Option<Bytes> = None;
    let mut more = 0i64;
    for o in items {
        if !matches(o) {
            continue;
        }
        if limit > 0 && page.items.len() as i64 >= limit {
            more += 1;
            if filtered {
                break;
            }
            continue;
        }
        last_key = Some(o.key.clone());
        page.items.push(o.clone());
    }
    if more > 0 {
        let key = last_key.expect("a full page has a last item");
        let mut start = key[plan.prefix.len()..].to_vec();
        start.push(0);
        page.continue_token = Some(super::params::ContinueToken { rv: revision, start: String::from_utf8_lossy(&start).into_owned() }.encode());
        if !filtered {
            page.remaining = Some(more);
        }
    }
    page
}
