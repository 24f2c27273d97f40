//! LIST and WATCH (kube's `handlers/get.go` ListResource and `handlers/watch.go`): from the
//! watch cache, or storage when asked for an exact past revision, streamed page by page.

use std::sync::Arc;

use bytes::Bytes;
use imbl::OrdMap;
use jiff::{SignedDuration, Timestamp};

use super::{ListPlan, Stage};
use crate::cache::{CachedObject, ReadRequest, Shared, WatchParams, WatchStart};
use crate::catalog::Resource;
use crate::codec;
use crate::codec::negotiate::Target;
use crate::kv::{RangeResponse, Revision};
use crate::pipeline::params::{self, RvMatch};
use crate::pipeline::query::Query;
use crate::pipeline::respond::{Head, ListBody, Page, content_type};
use crate::pipeline::{Effect, MIN_REQUEST_TIMEOUT_SECONDS, RequestInfo, RequestMachine};
use crate::status::ApiError;
use crate::storage::{StorageOp, StorageRequest};

impl RequestMachine {
    pub(super) fn list_or_watch(
        &mut self,
        now: Timestamp,
        res: Arc<Resource>,
        info: &RequestInfo,
        query: &Query,
        namespace: Option<String>,
    ) -> Result<(), ApiError> {
        let watch = info.verb == "watch";
        let opts = params::list_options(query, watch)?;
        for f in opts.fields.fields() {
            let known = f == "metadata.name" || (res.info.namespaced && f == "metadata.namespace") || res.strategy.selectable_fields().iter().any(|s| s == f);
            if !known {
                // Custom resources' field labels are converted as kube's CR converter does.
                let custom = crate::apiextensions::is_custom(&res.info);
                return Err(ApiError::bad_request(if res.strategy.selectable_fields().is_empty() && !custom {
                    format!("{} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"", crate::status::quote(f))
                } else {
                    format!("field label not supported: {f}")
                }));
            }
        }
        let target = if watch { Target::Watch } else { Target::List };
        let output = self.output(&res, target, query)?;
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
                // A timeout past what a timestamp holds is no timeout.
                deadline: now.checked_add(SignedDuration::from_secs(timeout)).unwrap_or(Timestamp::MAX),
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
    /// A page storage listed, every object as served: its part of the list.
    pub(super) fn serve_stored_page(&mut self, plan: ListPlan, range: &RangeResponse, objects: Vec<Shared>, now: Timestamp) {
        let revision = plan.opts.continue_token.as_ref().map(|t| t.rv).unwrap_or(match plan.opts.rv {
            RvMatch::Exact(n) => n,
            _ => range.header_revision,
        });
        let page = paginate(objects.iter(), &plan, revision, plan.opts.limit);
        self.stream(plan, page, now);
    }

    pub(super) fn storage_list(&mut self, plan: ListPlan) {
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

    pub(super) fn read_cache(&mut self, plan: ListPlan, request: ReadRequest) {
        self.out.push_back(Effect::Cache { resource: plan.res.clone(), request });
        self.stage = Stage::CacheList { plan };
    }

    /// Streams the page of a list read from `objects` at `revision`.
    pub(super) fn serve_list(&mut self, plan: ListPlan, revision: Revision, objects: &OrdMap<Bytes, Shared>, now: Timestamp) {
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

    pub(super) fn stream(&mut self, plan: ListPlan, page: Page, now: Timestamp) {
        match ListBody::new(plan.res.clone(), plan.output, page, now) {
            Ok(body) => {
                self.responded = true;
                self.out.push_back(Effect::Respond(Head::new(200, &content_type(plan.output, true))));
                self.stage = Stage::Stream(body);
            }
            Err(e) => self.fail_as(&e, plan.output.format),
        }
    }
}

/// One page of a list: the matching objects from `items`, up to `limit` (0: all), with the
/// continue token and remaining count kube gives.
pub(super) fn paginate<'a>(items: impl Iterator<Item = &'a Shared>, plan: &ListPlan, revision: Revision, limit: i64) -> Page {
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
