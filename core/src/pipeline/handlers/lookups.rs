//! Objects a request must see before it goes on: what admission reads before a write (the
//! namespace, the pod's service account), and what a service account token names before it
//! authenticates the request (the account, the pod, secret or node it is bound to). Like
//! kube-apiserver's admission plugins and token validator, which read informer caches, a
//! lookup reads the watch cache first and storage only when the object is missing from it
//! (it may be newer than the cache); a lookup of a collection (a namespace's LimitRanges, the
//! StorageClasses) reads the cache alone. Lookups run one at a time, in order.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use jiff::Timestamp;
use serde_json::Value;

use super::{Authenticating, PendingEviction, PendingWrite, Stage};
use crate::admission::{Found, Lookup};
use crate::auth::{Confirmed, Pending};
use crate::cache::{ReadRequest, ReadResult};
use crate::catalog::Resource;
use crate::codec::Output;
use crate::meta;
use crate::pipeline::query::Query;
use crate::pipeline::{Effect, RequestInfo, RequestMachine};
use crate::registry::{self, WriteOp};
use crate::resources::reviews::{review_audiences, reviewed, token_review_status};
use crate::status::ApiError;
use crate::storage::{Outcome, StorageEffect, StorageEvent, StorageOp, StorageRequest};

/// Where a lookup stands.
pub(crate) enum LookupRead {
    /// Asked the cache; its answer once it came.
    Cache(Option<Result<ReadResult, ApiError>>),
    Storage(Box<StorageOp<ApiError>>),
}

/// What the request does once its lookups are answered.
pub(crate) enum AfterLookups {
    Write(Box<PendingWrite>),
    /// Admit the eviction with what was found, then evict.
    Evict(Box<PendingEviction>),
    /// Answer the token request, admitted with what was found.
    Token {
        op: Box<registry::TokenRequestOp>,
        res: Arc<Resource>,
        output: Output,
    },
    /// List the collection, then delete each object with what was found.
    DeleteCollection {
        op: Box<crate::storage::StorageOp<crate::status::ApiError>>,
        dc: Box<super::DeleteCollection>,
    },
    /// Confirm the service account token, then go on with the request.
    Authenticate {
        pending: Box<Pending>,
        info: Box<RequestInfo>,
        query: Query,
    },
    /// Answer the TokenReview of a service account token.
    TokenReview {
        pending: Box<Pending>,
        review: Value,
        res: Arc<Resource>,
        output: Output,
    },
}

pub(crate) struct Lookups {
    pending: VecDeque<Lookup>,
    current: Option<(Lookup, LookupRead)>,
    found: Vec<(Lookup, Option<Arc<Value>>)>,
    then: AfterLookups,
}

impl Lookups {
    pub(crate) fn new(lookups: Vec<Lookup>, then: AfterLookups) -> Lookups {
        Lookups { pending: lookups.into(), current: None, found: Vec::new(), then }
    }

    /// Feeds a storage answer to the lookup reading storage.
    pub(super) fn kv(&mut self, now: Timestamp, result: crate::kv::KvResult) {
        if let Some((_, LookupRead::Storage(op))) = self.current.as_mut() {
            op.handle(now, StorageEvent::Kv(result));
        }
    }

    /// Feeds the cache's answer to the lookup that asked it.
    pub(super) fn cache(&mut self, result: Result<ReadResult, ApiError>) {
        if let Some((_, LookupRead::Cache(answer @ None))) = self.current.as_mut() {
            *answer = Some(result);
        }
    }
}

impl RequestMachine {
    /// Where what `l` looks for is stored: the key of its object, or the prefix of its
    /// namespace's objects.
    fn lookup_key(&self, l: &Lookup, res: &Resource) -> Bytes {
        let root = self.server.storage_root(res);
        match l.place() {
            (namespace, Some(name)) => crate::storage::keys::object_key(&root, namespace, name),
            (Some(namespace), None) => Bytes::from(format!("{root}/{namespace}/")),
            (None, None) => Bytes::from(format!("{root}/")),
        }
    }

    /// The resource of what `l` looks for.
    fn lookup_resource(&self, l: &Lookup) -> Option<Arc<Resource>> {
        let (group, version, resource) = l.resource();
        self.served.catalog.get(group, version, resource).cloned()
    }

    /// Takes the lookups one step on; whether anything happened.
    pub(super) fn step_lookups(&mut self, mut l: Box<Lookups>, now: Timestamp) -> bool {
        match l.current.take() {
            None => match l.pending.pop_front() {
                Some(lookup) => {
                    let read = match self.lookup_resource(&lookup) {
                        Some(resource) => {
                            self.out.push_back(Effect::Cache { resource, request: ReadRequest::Latest { min: None } });
                            LookupRead::Cache(None)
                        }
                        // A resource not served holds nothing.
                        None => {
                            l.found.push((lookup, None));
                            self.stage = Stage::Lookups(l);
                            return true;
                        }
                    };
                    l.current = Some((lookup, read));
                    self.stage = Stage::Lookups(l);
                    true
                }
                None => {
                    // What was found may name what must be read besides.
                    let more = match &l.then {
                        AfterLookups::Token { op, .. } => op.lookups_after(&l.found),
                        _ => Vec::new(),
                    };
                    match more.is_empty() {
                        true => self.lookups_done(now, *l),
                        false => {
                            l.pending.extend(more);
                            self.stage = Stage::Lookups(l);
                        }
                    }
                    true
                }
            },
            Some((lookup, LookupRead::Cache(None))) => {
                l.current = Some((lookup, LookupRead::Cache(None)));
                self.stage = Stage::Lookups(l);
                false
            }
            Some((lookup, LookupRead::Cache(Some(answer)))) => {
                let res = self.lookup_resource(&lookup).expect("a cached resource is served");
                let key = self.lookup_key(&lookup, &res);
                let one = lookup.place().1.is_some();
                // A collection is what the cache holds (as kube's plugins read informers); one
                // object the cache lacks may be newer than it, and is read from storage.
                let cached = match answer {
                    Ok(ReadResult::Snapshot(s)) if one => s.objects.get(&key).map(|o| if lookup.kept_parsed() { o.shared() } else { Arc::new(o.value()) }),
                    Ok(ReadResult::Snapshot(s)) => {
                        let objects = s.objects.range(key.clone()..).take_while(|(k, _)| k.starts_with(&key)).map(|(_, o)| o.value()).collect();
                        Some(Arc::new(Value::Array(objects)))
                    }
                    _ => None,
                };
                let read = match one {
                    true => StorageRequest::Get { key, revision: 0 },
                    false => StorageRequest::List { prefix: key, start: None, limit: 0, revision: 0 },
                };
                match cached {
                    Some(found) => l.found.push((lookup, Some(found))),
                    None => l.current = Some((lookup, LookupRead::Storage(Box::new(StorageOp::new(read))))),
                }
                self.stage = Stage::Lookups(l);
                true
            }
            Some((lookup, LookupRead::Storage(mut op))) => match op.poll(now) {
                Some(StorageEffect::Kv(r)) => {
                    self.out.push_back(Effect::Kv(r));
                    l.current = Some((lookup, LookupRead::Storage(op)));
                    self.stage = Stage::Lookups(l);
                    true
                }
                Some(StorageEffect::Done(r)) => {
                    let found = match r {
                        Ok(Outcome::Found(kv)) => kv.and_then(|kv| serde_json::from_slice::<Value>(&kv.value).ok()).map(Arc::new),
                        Ok(Outcome::Listed(range)) => {
                            Some(Arc::new(Value::Array(range.kvs.iter().filter_map(|kv| serde_json::from_slice(&kv.value).ok()).collect())))
                        }
                        Ok(_) => None,
                        Err(e) => {
                            let res = self.lookup_resource(&lookup).expect("a read resource is served");
                            let error = registry::storage_error(e, &res.info.group_resource(), "");
                            match l.then {
                                AfterLookups::Write(w) => self.fail_as(&error, w.output.format),
                                AfterLookups::Evict(e) => self.fail_as(&error, e.output.format),
                                AfterLookups::Token { output, .. } => self.fail_as(&error, output.format),
                                AfterLookups::DeleteCollection { dc, .. } => self.fail_as(&error, dc.output.format),
                                // A token whose objects cannot be read does not authenticate,
                                // with its validator's words for why.
                                AfterLookups::Authenticate { pending, info, query } => {
                                    let why = pending.unreadable(&lookup, &error.message);
                                    self.refuse_request(*info, query, why, now);
                                }
                                AfterLookups::TokenReview { pending, review, res, output } => {
                                    let why = pending.unreadable(&lookup, &error.message);
                                    self.refuse_review(review, res, output, why, now);
                                }
                            }
                            return true;
                        }
                    };
                    l.found.push((lookup, found));
                    self.stage = Stage::Lookups(l);
                    true
                }
                _ => {
                    l.current = Some((lookup, LookupRead::Storage(op)));
                    self.stage = Stage::Lookups(l);
                    false
                }
            },
        }
    }

    /// Has the server write `last_used` (a Secret's path and a merge patch), as its own
    /// request, with the loopback token.
    fn date_legacy_token(&mut self, last_used: Option<(String, Value)>) {
        let (Some((path, patch)), Some(token)) = (last_used, self.server.authenticator.loopback.as_deref()) else { return };
        let request = crate::pipeline::Request::loopback(Some(token), "PATCH", path, Some(("application/merge-patch+json", &patch)));
        self.out.push_back(Effect::Loopback(Box::new(request)));
    }

    /// The request's token does not stand for anyone, for `why`: the webhook may still know it.
    fn refuse_request(&mut self, info: RequestInfo, query: Query, why: String, now: Timestamp) {
        let token = crate::auth::request_bearer_token(&self.req.headers).unwrap_or_default().to_string();
        self.ask_authenticator(&token, &[], vec![why], Authenticating::Request { info: Box::new(info), query }, now);
    }

    /// The reviewed token does not stand for anyone, for `why`: the webhook may still know it.
    fn refuse_review(&mut self, review: Value, res: Arc<Resource>, output: Output, why: String, now: Timestamp) {
        let token = meta::str_at(&review, &["spec", "token"]).unwrap_or_default().to_string();
        let audiences = review_audiences(&review);
        self.ask_authenticator(&token, &audiences, vec![why], Authenticating::TokenReview { review, res, output }, now);
    }

    /// Every lookup is answered: the write with what admission needs, or the request as the
    /// user its token stands for (401 if the token no longer does).
    fn lookups_done(&mut self, now: Timestamp, l: Lookups) {
        if let AfterLookups::Authenticate { pending, .. } | AfterLookups::TokenReview { pending, .. } = &l.then {
            self.date_legacy_token(pending.last_used(&l.found, now));
        }
        match l.then {
            AfterLookups::Write(w) => {
                let w = *w;
                let action = matches!(w.kind, crate::registry::WriteKind::Action { .. });
                let op = WriteOp::new(w.res.clone(), w.ctx, w.kind, Found::of(&l.found), crate::rand::Rng::new(self.rng.next_u64()));
                self.stage = Stage::Write { op: Box::new(op), res: w.res, output: w.output, action };
            }
            AfterLookups::Evict(e) => {
                let e = *e;
                let rng = crate::rand::Rng::new(self.rng.next_u64());
                let op = registry::EvictionOp::new(e.pods.clone(), e.budgets, e.ctx, e.eviction, Found::of(&l.found), rng);
                self.stage = Stage::Evict { op: Box::new(op), res: e.pods, output: e.output };
            }
            AfterLookups::Token { mut op, res, output } => {
                op.found(Found::of(&l.found));
                self.stage = Stage::Token { op, res, output };
            }
            AfterLookups::DeleteCollection { op, mut dc } => {
                for (lookup, object) in l.found {
                    dc.found.record(lookup, object);
                }
                self.stage = Stage::Listing { op: *op, dc };
            }
            AfterLookups::Authenticate { pending, info, query } => match pending.confirm(&l.found, now) {
                Ok(confirmed) => {
                    if let Some(token) = crate::auth::request_bearer_token(&self.req.headers) {
                        self.server.token_cache.put(token, &confirmed, now);
                    }
                    self.warnings.extend(confirmed.warning.map(str::to_string));
                    self.user = confirmed.user;
                    self.stage = Stage::Done;
                    self.authenticated(now, *info, query);
                }
                Err(why) => self.refuse_request(*info, query, why, now),
            },
            AfterLookups::TokenReview { pending, review, res, output } => match pending.confirm(&l.found, now) {
                Ok(Confirmed { user, warning }) => {
                    self.warnings.extend(warning.map(str::to_string));
                    let answer = reviewed(review, token_review_status(Ok(&user), pending.audiences()));
                    self.respond_object(&res, &answer, output, 201, "", now);
                }
                Err(why) => self.refuse_review(review, res, output, why, now),
            },
        }
    }
}
