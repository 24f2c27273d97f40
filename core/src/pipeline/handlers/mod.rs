//! Resource requests: routing to the verb handlers (one file each, as kube's
//! `endpoints/handlers`) and the stages a request goes through (storage reads, watch cache
//! reads, admission lookups, registry writes, streamed lists), driven by `step` and `on_event`.

mod admit;
mod componentstatus;
mod convert;
mod create;
mod delete;
mod get;
mod list;
mod lookups;
mod provision;
mod proxy;
mod update;
mod webhooks;
mod write;

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use jiff::Timestamp;
use serde_json::Value;

use super::params::{self, ListOptions};
use super::query::Query;
use super::respond::{ListBody, status_body};
use super::{Effect, Event, RequestInfo, RequestMachine};
use crate::admission::Found;
use crate::apiextensions::{self, Converted};
use crate::cache::{ReadRequest, ReadResult};
use crate::catalog::Resource;
use crate::codec::negotiate::{self, Target};
use crate::codec::{Format, Output};
use crate::kv::Revision;
use crate::registry::{self, DeleteOptions, EvictionOp, TokenRequestOp, WriteContext, WriteEffect, WriteKind, WriteOp};
use crate::status::ApiError;
use crate::storage::{Outcome, StorageEffect, StorageEvent, StorageOp};
use crate::table::IncludeObject;
pub(crate) use lookups::{AfterLookups, Lookups};
pub(super) use webhooks::{Authenticating, Resume};

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

/// A write waiting for admission lookups.
pub(super) struct PendingWrite {
    res: Arc<Resource>,
    output: Output,
    ctx: WriteContext,
    kind: WriteKind,
}

/// An eviction whose admission's lookups are under way.
pub(super) struct PendingEviction {
    pods: Arc<Resource>,
    budgets: Arc<Resource>,
    /// The request's write context (a dry run by its own `dryRun`).
    ctx: WriteContext,
    /// The Eviction, to admit.
    eviction: serde_json::Value,
    output: Output,
}

pub(super) struct DeleteCollection {
    res: Arc<Resource>,
    output: Output,
    /// Which of the listed objects go.
    filter: ListOptions,
    ctx: WriteContext,
    options: DeleteOptions,
    /// What admission's lookups found, for each delete.
    found: Found,
    names: VecDeque<String>,
    current: Option<WriteOp>,
    deleted: Vec<Value>,
    revision: Revision,
}

pub(super) enum Stage {
    Done,
    /// The authorization webhook's answer awaited.
    Authorizing(Box<webhooks::Authorizing>),
    /// The authentication webhook's answer awaited.
    Authenticating(Box<webhooks::TokenAsking>),
    /// A conversion webhook's Service is read from the watch cache, to resolve it ...
    ConvertResolve(Box<convert::Converting>),
    /// Admission webhooks' Services are read from the watch cache, to resolve them ...
    AdmitResolve(Box<admit::Admitting>),
    /// ... then the webhooks' answers awaited.
    Admitting(Box<admit::Admitting>),
    /// ... then the webhook's answer awaited.
    Converting(Box<convert::Converting>),
    /// A request for an extension server waits for the Services, to resolve its APIService's.
    ProxyResolve {
        api: crate::aggregator::ApiService,
    },
    /// ... then for the extension server's answer.
    Proxying,
    /// A health endpoint waits for the server's health.
    Health {
        request: super::HealthRequest,
        query: Query,
    },
    /// componentstatuses: storage's health asked for, then the components probed.
    Components {
        res: Arc<Resource>,
        /// The one asked for (GET), or all (LIST).
        name: Option<String>,
        output: Output,
        storage: Option<Result<(), String>>,
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
    Lookups(Box<Lookups>),
    /// A write waits for the server's own request that creates what admission needs first.
    Provisioning(Box<provision::Provisioning>),
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
    /// A TokenRequest reads what its token names.
    Token {
        op: Box<TokenRequestOp>,
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

impl Stage {
    /// When the stage has something to do without an event (a webhook call to try again),
    /// besides the request's deadline.
    pub(super) fn wakes_at(&self) -> Option<Timestamp> {
        match self {
            Stage::Admitting(admitting) => admitting.wakes_at(),
            Stage::Authorizing(a) => a.trying.again_at(),
            Stage::Authenticating(t) => t.trying.again_at(),
            Stage::Provisioning(p) => p.wakes_at(),
            _ => None,
        }
    }

    /// The write this stage runs that may pause for webhooks (a write, an eviction's, a
    /// delete-collection's current one), which their answers go to.
    fn write_under_way(&mut self) -> Option<&mut WriteOp> {
        match self {
            Stage::Write { op, .. } => Some(op),
            Stage::Evict { op, .. } => op.write_under_way(),
            Stage::Token { op, .. } => op.write_under_way(),
            Stage::DeleteCollection(dc) => dc.current.as_mut(),
            _ => None,
        }
    }
}

/// Whether the request's verb is one the resource (or its subresource) serves.
fn verb_allowed(res: &Resource, info: &RequestInfo) -> bool {
    if info.subresource.is_empty() {
        return match info.verb.as_str() {
            "list" | "watch" => res.info.has_verb(&info.verb),
            "deletecollection" | "create" => res.info.has_verb(&info.verb) && info.name.is_empty(),
            // A terminating CRD's resources leave them out of discovery alone.
            "update" | "patch" if res.info.terminating => !info.name.is_empty(),
            v => res.info.has_verb(v) && !info.name.is_empty(),
        };
    }
    res.info.subresource(&info.subresource).is_some_and(|s| s.verbs.contains(&info.verb))
}

impl RequestMachine {
    pub(super) fn resource_request(&mut self, now: Timestamp, info: RequestInfo, query: Query) {
        let Some(res) = self.served.catalog.get(&info.api_group, &info.api_version, &info.resource).cloned() else {
            // A group version under `/apis` the built-in catalog does not serve may be a CRD's
            // not taken in yet (kube's own group versions answer 404 whatever the CRDs).
            let starting =
                !self.served.crds_synced() && !info.api_group.is_empty() && self.served.catalog.resources_of(&info.api_group, &info.api_version).is_empty();
            return self.fail(&if starting { ApiError::server_starting() } else { ApiError::path_not_found() });
        };
        let namespace = if res.info.namespaced { Some(info.namespace.clone()).filter(|n| !n.is_empty()) } else { None };
        if !res.info.namespaced && !info.namespace.is_empty() && res.info.resource != "namespaces" {
            return self.fail(&ApiError::path_not_found());
        }
        if res.info.namespaced && namespace.is_none() && !matches!(info.verb.as_str(), "list" | "watch") {
            return self.fail(&if info.name.is_empty() { ApiError::method_not_allowed() } else { ApiError::path_not_found() });
        }
        if !info.subresource.is_empty() && res.info.subresource(&info.subresource).is_none() {
            return self.fail(&ApiError::path_not_found());
        }
        if res.info.terminating && info.verb == "create" && info.subresource.is_empty() {
            return self.fail(&ApiError::create_while_terminating(&res.info.group_resource()));
        }
        if !verb_allowed(&res, &info) {
            return self.fail(&ApiError::method_not_allowed());
        }
        // kube routes no HEAD to a resource's handlers: its router answers 405.
        if self.req.method == "HEAD" {
            return self.fail(&ApiError::method_not_allowed());
        }
        self.warnings.extend(res.info.deprecation.clone());
        if res.info.backing == crate::catalog::Backing::Probed {
            if let Err(e) = self.component_statuses(res, &info, &query) {
                self.fail(&e);
            }
            return;
        }
        let result = match info.verb.as_str() {
            "get" => self.get(res, &info, &query),
            "list" | "watch" => self.list_or_watch(now, res, &info, &query, namespace),
            "create" => self.create(now, res, &info, &query, namespace),
            "update" => self.update(now, res, &info, &query, namespace),
            "patch" => self.patch(now, res, &info, &query, namespace),
            "delete" => self.delete(now, res, &info, &query, namespace),
            "deletecollection" => self.delete_collection(now, res, &info, &query, namespace),
            _ => Err(ApiError::method_not_allowed()),
        };
        if let Err(e) = result {
            self.fail(&e);
        }
    }

    fn accept(&self) -> Option<&str> {
        self.req.header("Accept")
    }

    fn output(&self, res: &Resource, target: Target, query: &Query) -> Result<Output, ApiError> {
        let include = IncludeObject::parse(query.get("includeObject")).map_err(ApiError::bad_request)?;
        negotiate::negotiate_output(self.accept(), target, include.into(), !apiextensions::is_custom(&res.info))
    }

    fn object_key(&self, res: &Resource, namespace: Option<&str>, name: &str) -> Bytes {
        crate::storage::keys::object_key(&self.server.storage_root(res), namespace, name)
    }

    // ---------------------------------------------------------------------------------------
    // Reads

    /// An error in the client's format.
    fn fail_as(&mut self, e: &ApiError, format: Format) {
        let (ct, body) = status_body(&e.to_status(), format);
        self.respond(super::respond::error_head(e, &ct), body);
    }

    // ---------------------------------------------------------------------------------------
    // Writes

    // ---------------------------------------------------------------------------------------
    // Driving the stages

    /// Advances the current stage; false when it waits for an event.
    pub(super) fn step(&mut self, now: Timestamp) -> bool {
        match std::mem::replace(&mut self.stage, Stage::Done) {
            Stage::Done => false,
            waiting @ (Stage::Health { .. } | Stage::Components { .. } | Stage::ProxyResolve { .. } | Stage::Proxying) => {
                self.stage = waiting;
                false
            }
            Stage::Authorizing(mut a) => {
                let sent = a.trying.step(&mut self.out, now);
                self.stage = Stage::Authorizing(a);
                sent
            }
            Stage::Authenticating(mut t) => {
                let sent = t.trying.step(&mut self.out, now);
                self.stage = Stage::Authenticating(t);
                sent
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
                        Ok(Outcome::Found(Some(kv))) => {
                            // JSON of a kind stored as served: the stored bytes with the
                            // resourceVersion spliced in, as the watch cache serves them.
                            let plain = output == Output { format: Format::Json, view: crate::codec::View::Object } && subresource != "scale";
                            let stored = if plain && res.strategy.stored_as_served() {
                                registry::serve_stored(&kv.value, kv.mod_revision, &["apiVersion"])
                                    .filter(|s| s.parts.get("apiVersion").and_then(Value::as_str) == Some(&res.info.api_version()))
                            } else {
                                None
                            };
                            if let Some(mut served) = stored {
                                served.json.push(b'\n');
                                let head = crate::pipeline::Head::new(200, &crate::pipeline::respond::content_type(output, false));
                                self.respond(head, Bytes::from(served.json));
                            } else {
                                self.respond_stored(&kv, res, output, &subresource, &Converted::default(), now);
                            }
                        }
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
                        Ok(Outcome::Listed(range)) => self.list_stored(range, plan, Converted::default(), now),
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
            Stage::Lookups(l) => self.step_lookups(l, now),
            Stage::Provisioning(p) => self.step_provisioning(p, now),
            Stage::Write { mut op, res, output, action } => match op.poll(now) {
                Some(WriteEffect::Kv(r)) => {
                    self.out.push_back(Effect::Kv(r));
                    self.stage = Stage::Write { op, res, output, action };
                    true
                }
                Some(WriteEffect::Convert(c)) => {
                    self.convert(c, convert::Resume::Writing(Box::new(Stage::Write { op, res, output, action })), now);
                    true
                }
                Some(WriteEffect::Admit(calls)) => {
                    self.ask_admission_webhooks(calls, Stage::Write { op, res, output, action });
                    true
                }
                Some(WriteEffect::Provision(p)) => {
                    self.start_provisioning(p, Stage::Write { op, res, output, action }, now);
                    true
                }
                Some(WriteEffect::Done(result)) => {
                    self.heard(op.take_said());
                    self.finish_write(res, output, action, result, now);
                    true
                }
                None => {
                    self.stage = Stage::Write { op, res, output, action };
                    false
                }
            },
            Stage::Token { mut op, res, output } => match op.poll(now) {
                Some(WriteEffect::Kv(r)) => {
                    self.out.push_back(Effect::Kv(r));
                    self.stage = Stage::Token { op, res, output };
                    true
                }
                Some(WriteEffect::Admit(calls)) => {
                    self.ask_admission_webhooks(calls, Stage::Token { op, res, output });
                    true
                }
                Some(WriteEffect::Done(result)) => {
                    self.heard(op.take_said());
                    self.finish_write(res, output, false, result, now);
                    true
                }
                // An admission converts nothing and creates nothing first.
                Some(WriteEffect::Convert(_) | WriteEffect::Provision(_)) | None => {
                    self.stage = Stage::Token { op, res, output };
                    false
                }
            },
            Stage::Evict { mut op, res, output } => match op.poll(now) {
                Some(WriteEffect::Kv(r)) => {
                    self.out.push_back(Effect::Kv(r));
                    self.stage = Stage::Evict { op, res, output };
                    true
                }
                Some(WriteEffect::Convert(c)) => {
                    self.convert(c, convert::Resume::Writing(Box::new(Stage::Evict { op, res, output })), now);
                    true
                }
                Some(WriteEffect::Admit(calls)) => {
                    self.ask_admission_webhooks(calls, Stage::Evict { op, res, output });
                    true
                }
                Some(WriteEffect::Provision(p)) => {
                    self.start_provisioning(p, Stage::Evict { op, res, output }, now);
                    true
                }
                Some(WriteEffect::Done(result)) => {
                    self.heard(op.take_said());
                    self.finish_write(res, output, true, result, now);
                    true
                }
                None => {
                    self.stage = Stage::Evict { op, res, output };
                    false
                }
            },
            Stage::Listing { op, dc } => self.step_listing(op, dc, now),
            Stage::DeleteCollection(dc) => self.step_delete_collection(dc, now),
            stage @ (Stage::CacheList { .. } | Stage::CacheGet { .. } | Stage::ConvertResolve(_) | Stage::Converting(_) | Stage::AdmitResolve(_)) => {
                self.stage = stage;
                false
            }
            Stage::Admitting(admitting) => self.step_admitting(admitting, now),
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
            (Stage::Components { storage: storage @ None, .. }, Event::Health(health)) => {
                *storage = Some(health.storage);
                self.out.push_back(Effect::Probe(crate::resources::componentstatuses::probes()));
            }
            (Stage::Components { .. }, Event::Probed(outcomes)) => self.components_probed(&outcomes, now),
            (Stage::ProxyResolve { .. }, Event::Cache(result)) => {
                let Stage::ProxyResolve { api } = std::mem::replace(&mut self.stage, Stage::Done) else { unreachable!() };
                self.proxy_resolved(api, result);
            }
            (Stage::Proxying, Event::Proxied(answer)) => self.proxied(answer),
            (Stage::ConvertResolve(_), Event::Cache(result)) => {
                let Stage::ConvertResolve(converting) = std::mem::replace(&mut self.stage, Stage::Done) else { unreachable!() };
                self.conversion_resolved(converting, result, now);
            }
            (Stage::AdmitResolve(_), Event::Cache(result)) => {
                let Stage::AdmitResolve(admitting) = std::mem::replace(&mut self.stage, Stage::Done) else { unreachable!() };
                self.admission_webhooks_resolved(admitting, result);
            }
            (Stage::Admitting(_), Event::CalledAll(answers)) => {
                let Stage::Admitting(admitting) = std::mem::replace(&mut self.stage, Stage::Done) else { unreachable!() };
                self.admission_webhooks_answered(*admitting, answers, now);
            }
            (Stage::Authorizing(_) | Stage::Authenticating(_), Event::Called(answer)) => self.auth_webhook_answered(answer, now),
            (Stage::Converting(_), Event::Called(answer)) => {
                let Stage::Converting(converting) = std::mem::replace(&mut self.stage, Stage::Done) else { unreachable!() };
                self.called(converting, answer, now);
            }
            (Stage::Get { op, .. } | Stage::Probe { op, .. } | Stage::StorageList { op, .. } | Stage::Listing { op, .. }, Event::Kv(r)) => {
                op.handle(now, StorageEvent::Kv(r));
            }
            (Stage::Provisioning(p), event) => p.handle(now, event),
            (Stage::Lookups(l), Event::Kv(r)) => l.kv(now, r),
            (Stage::Lookups(l), Event::Cache(result)) => l.cache(result),
            (Stage::Write { op, .. }, Event::Kv(r)) => op.handle(now, r),
            (Stage::Evict { op, .. }, Event::Kv(r)) => op.handle(now, r),
            (Stage::Token { op, .. }, Event::Kv(r)) => op.handle(now, r),
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
