use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::*;
use crate::codec::Format;
use crate::kv::{KvRequest, Model, TxnOp, TxnRequest};
use crate::resources::{Settings, catalog};

const PREFIX: &str = "/registry/configmaps/";

/// A watch cache of configmaps wired to a `kv::Model`.
struct Harness {
    model: Model,
    cache: WatchCache,
    now: Timestamp,
    watch: Option<WatchRequest>,
    frames: BTreeMap<WatcherId, Vec<Value>>,
    /// How many effects carried each watcher's frames (what a shell's buffer counts).
    chunks: BTreeMap<WatcherId, usize>,
    closed: BTreeSet<WatcherId>,
    reads: BTreeMap<ReadId, Result<ReadResult, ApiError>>,
    answer_progress: bool,
    /// How many times the cache asked the store for progress.
    progress_asks: usize,
}

fn configmaps() -> Arc<Resource> {
    catalog(&Settings::default()).get("", "v1", "configmaps").unwrap().clone()
}

/// `e`, unless it is a store request: that one `model` answers at once.
pub(super) fn unless_kv(cache: &mut WatchCache, model: &mut Model, now: Timestamp, e: CacheEffect) -> Option<CacheEffect> {
    let CacheEffect::Kv(req) = e else { return Some(e) };
    let (r, _) = model.apply(now, &req);
    cache.handle(now, CacheEvent::Kv(r));
    None
}

impl Harness {
    fn new() -> Harness {
        let mut h = Harness {
            model: Model::new(),
            cache: WatchCache::new(configmaps(), Bytes::from(PREFIX), 8),
            now: "2024-01-01T00:00:00Z".parse().unwrap(),
            watch: None,
            frames: BTreeMap::new(),
            chunks: BTreeMap::new(),
            closed: BTreeSet::new(),
            reads: BTreeMap::new(),
            answer_progress: true,
            progress_asks: 0,
        };
        h.pump();
        h
    }

    fn pump(&mut self) {
        while let Some(e) = self.cache.poll(self.now) {
            let Some(e) = unless_kv(&mut self.cache, &mut self.model, self.now, e) else { continue };
            match e {
                CacheEffect::StartWatch(w) => {
                    let backlog = self.model.backlog(&w).unwrap();
                    self.watch = Some(w);
                    if !backlog.is_empty() {
                        let header_revision = self.model.revision();
                        self.cache.handle(self.now, CacheEvent::Watch(WatchResponse::Events { header_revision, events: backlog }));
                    }
                }
                CacheEffect::RequestProgress => {
                    self.progress_asks += 1;
                    if self.answer_progress {
                        let revision = self.model.revision();
                        self.cache.handle(self.now, CacheEvent::Watch(WatchResponse::Progress { revision }));
                    }
                }
                CacheEffect::Deliver { ids, frame } => {
                    for id in ids {
                        *self.chunks.entry(id).or_default() += 1;
                        self.received(id, &frame);
                    }
                }
                CacheEffect::Backlog { id, frames } => {
                    *self.chunks.entry(id).or_default() += 1;
                    for frame in frames.collect::<Vec<_>>() {
                        self.received(id, &frame);
                    }
                }
                CacheEffect::Close { id } => {
                    self.closed.insert(id);
                }
                CacheEffect::ReadDone { id, result } => {
                    self.reads.insert(id, result);
                }
                CacheEffect::Convert(_) => unreachable!("no webhook converts configmaps"),
                CacheEffect::Kv(_) => unreachable!("answered above"),
            }
        }
    }

    fn received(&mut self, id: WatcherId, frame: &[u8]) {
        for line in std::str::from_utf8(frame).unwrap().lines() {
            self.frames.entry(id).or_default().push(serde_json::from_str(line).unwrap());
        }
    }

    fn put(&mut self, name: &str, labels: Value) -> Revision {
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default", "labels": labels}});
        self.txn(TxnOp::Put { key: format!("{PREFIX}default/{name}").into(), value: serde_json::to_vec(&obj).unwrap().into(), lease: 0 })
    }

    fn delete(&mut self, name: &str) -> Revision {
        self.txn(TxnOp::Delete { key: format!("{PREFIX}default/{name}").into() })
    }

    fn txn(&mut self, op: TxnOp) -> Revision {
        let (_, events) = self.model.apply(self.now, &KvRequest::Txn(TxnRequest { success: vec![op], ..Default::default() }));
        if let Some(w) = &self.watch {
            let events: Vec<_> = events.into_iter().filter(|e| w.contains(&e.kv.key)).collect();
            if !events.is_empty() {
                let header_revision = self.model.revision();
                self.cache.handle(self.now, CacheEvent::Watch(WatchResponse::Events { header_revision, events }));
            }
        }
        self.pump();
        self.model.revision()
    }

    fn watch(&mut self, id: u64, start: WatchStart, labels: &str) -> WatcherId {
        let id = WatcherId(id);
        let params = WatchParams {
            namespace: None,
            labels: crate::selector::LabelSelector::parse(labels).unwrap(),
            fields: Default::default(),
            start,
            bookmarks: true,
            output: Output { format: Format::Json, view: View::Object },
            deadline: self.now + SignedDuration::from_secs(600),
        };
        self.cache.handle(self.now, CacheEvent::Register { id, params });
        self.pump();
        id
    }

    /// `(type, name, resourceVersion)` of what a watcher received.
    fn seen(&self, id: WatcherId) -> Vec<(String, String, String)> {
        self.frames
            .get(&id)
            .into_iter()
            .flatten()
            .map(|f| {
                let o = &f["object"];
                (
                    f["type"].as_str().unwrap().to_string(),
                    o["metadata"]["name"].as_str().unwrap_or_default().to_string(),
                    o["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    }
}

fn ev(t: &str, name: &str, rv: Revision) -> (String, String, String) {
    (t.to_string(), name.to_string(), rv.to_string())
}

#[test]
fn watch_from_now_sees_initial_state_then_changes_in_order() {
    let mut h = Harness::new();
    let r1 = h.put("a", json!({}));
    let w = h.watch(1, WatchStart::Current, "");
    let r2 = h.put("b", json!({}));
    let r3 = h.put("a", json!({"x": "1"}));
    let r4 = h.delete("b");
    assert_eq!(h.seen(w), vec![ev("ADDED", "a", r1), ev("ADDED", "b", r2), ev("MODIFIED", "a", r3), ev("DELETED", "b", r4)]);
}

/// Found by the simulator: a watch of more objects than a slow reader's buffer holds was closed
/// as slow before it could start. The start comes as one batch; only live events count.
#[test]
fn a_watch_starts_with_one_batch_however_large_the_collection() {
    let mut h = Harness::new();
    for i in 0..50 {
        h.put(&format!("cm-{i}"), json!({}));
    }
    let w = h.watch(1, WatchStart::Current, "");
    assert_eq!((h.seen(w).len(), h.chunks[&w]), (50, 1));
    let resumed = h.watch(2, WatchStart::After(h.model.revision() - 5), "");
    assert_eq!((h.seen(resumed).len(), h.chunks[&resumed]), (5, 1));
    h.put("late", json!({}));
    assert_eq!((h.seen(w).len(), h.chunks[&w]), (51, 2));
}

#[test]
fn watch_resumes_from_a_revision_and_too_old_is_gone() {
    let mut h = Harness::new();
    let r1 = h.put("a", json!({}));
    let r2 = h.put("b", json!({}));
    let w = h.watch(1, WatchStart::After(r1), "");
    assert_eq!(h.seen(w), vec![ev("ADDED", "b", r2)]);
    // Push the window past r1 (capacity 8).
    for i in 0..10 {
        h.put(&format!("c{i}"), json!({}));
    }
    let old = h.watch(2, WatchStart::After(r1), "");
    let f = &h.frames[&old][0];
    assert_eq!(f["type"], "ERROR");
    assert_eq!(f["object"]["code"], 410);
    assert_eq!(f["object"]["reason"], "Expired");
    assert!(h.closed.contains(&old));
}

#[test]
fn leaving_a_selector_is_a_deletion() {
    let mut h = Harness::new();
    h.put("a", json!({"app": "web"}));
    let w = h.watch(1, WatchStart::Current, "app=web");
    let r2 = h.put("a", json!({"app": "db"}));
    let r3 = h.put("a", json!({"app": "web"}));
    let seen = h.seen(w);
    assert_eq!(seen[1..], [ev("DELETED", "a", r2), ev("ADDED", "a", r3)]);
    let deleted = &h.frames[&w][1]["object"];
    assert_eq!(deleted["metadata"]["labels"]["app"], "web", "the deletion shows what the watcher knew");
}

#[test]
fn consistent_reads_wait_for_the_store_revision() {
    let mut h = Harness::new();
    h.put("a", json!({}));
    // The store moves on (a write elsewhere), unseen by this prefix's watch.
    let _ = h.model.apply(
        h.now,
        &KvRequest::Txn(TxnRequest { success: vec![TxnOp::Put { key: "/registry/other/x".into(), value: "{}".into(), lease: 0 }], ..Default::default() }),
    );
    let target = h.model.revision();
    h.answer_progress = false;
    h.cache.handle(h.now, CacheEvent::Read { id: ReadId(1), request: ReadRequest::Latest { min: Some(target) } });
    h.pump();
    assert!(h.reads.is_empty(), "not fresh yet");
    h.cache.handle(h.now, CacheEvent::Watch(WatchResponse::Progress { revision: target }));
    h.pump();
    let Ok(ReadResult::Snapshot(s)) = &h.reads[&ReadId(1)] else { panic!() };
    assert_eq!(s.revision, target);
    assert_eq!(s.objects.len(), 1);
}

#[test]
fn reads_of_an_unreached_revision_time_out_with_504() {
    let mut h = Harness::new();
    h.answer_progress = false;
    h.cache.handle(h.now, CacheEvent::Read { id: ReadId(7), request: ReadRequest::Latest { min: Some(1000) } });
    h.pump();
    h.now += SignedDuration::from_secs(4);
    h.pump();
    let e = h.reads[&ReadId(7)].as_ref().unwrap_err();
    assert_eq!((e.code, e.reason), (504, "Timeout"));
    assert!(e.message.starts_with("Timeout: Too large resource version: 1000"), "{}", e.message);
}

#[test]
fn exact_reads_use_the_window() {
    let mut h = Harness::new();
    let r1 = h.put("a", json!({}));
    h.put("b", json!({}));
    h.cache.handle(h.now, CacheEvent::Read { id: ReadId(1), request: ReadRequest::Exact { revision: r1 } });
    h.pump();
    let Ok(ReadResult::Snapshot(s)) = &h.reads[&ReadId(1)] else { panic!() };
    assert_eq!(s.objects.len(), 1);
    for i in 0..10 {
        h.put(&format!("c{i}"), json!({}));
    }
    h.cache.handle(h.now, CacheEvent::Read { id: ReadId(2), request: ReadRequest::Exact { revision: r1 } });
    h.pump();
    assert!(matches!(h.reads[&ReadId(2)], Ok(ReadResult::NotCached)));
}

#[test]
fn bookmarks_and_timeouts() {
    let mut h = Harness::new();
    h.put("a", json!({}));
    let w = h.watch(1, WatchStart::InitialEvents { min: None }, "");
    let seen = h.seen(w);
    assert_eq!(seen[0].0, "ADDED");
    assert_eq!(seen[1].0, "BOOKMARK");
    assert_eq!(h.frames[&w][1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
    h.now += BOOKMARK_INTERVAL;
    h.pump();
    assert_eq!(h.seen(w).len(), 3);
    h.now += SignedDuration::from_secs(600);
    h.pump();
    assert!(h.closed.contains(&w));
    assert_eq!(h.cache.poll_timeout(), None, "a closed watcher leaves no timer behind");
}

#[test]
fn a_watcher_that_leaves_gets_no_more_bookmarks() {
    let mut h = Harness::new();
    let gone = h.watch(1, WatchStart::InitialEvents { min: None }, "");
    let stays = h.watch(2, WatchStart::InitialEvents { min: None }, "");
    h.cache.handle(h.now, CacheEvent::Unregister { id: gone });
    h.now += BOOKMARK_INTERVAL;
    h.pump();
    assert_eq!(h.seen(gone).len(), 1, "only the initial-events bookmark");
    assert_eq!(h.seen(stays).len(), 2, "and a periodic one");
    assert_eq!(h.cache.poll_timeout(), Some(h.now + BOOKMARK_INTERVAL));
}

#[test]
fn a_future_revision_waits_without_flooding_the_store() {
    let mut h = Harness::new();
    h.put("a", json!({}));
    // The store answers progress at once, and never reaches revision 1000.
    let w = h.watch(1, WatchStart::After(1000), "");
    assert_eq!(h.progress_asks, 1);
    h.now += SignedDuration::from_millis(50);
    h.pump();
    assert_eq!(h.progress_asks, 1, "at most one ask per interval");
    assert_eq!(h.cache.poll_timeout(), Some(h.now + SignedDuration::from_millis(50)));
    h.now += SignedDuration::from_millis(50);
    h.pump();
    assert_eq!(h.progress_asks, 2);
    h.now += FRESHNESS_TIMEOUT;
    h.pump();
    assert!(h.closed.contains(&w));
    assert_eq!(h.frames[&w].last().unwrap()["object"]["reason"], "Timeout", "{:?}", h.frames[&w]);
}

#[test]
fn a_failing_store_is_asked_again_after_a_delay_and_a_lost_progress_request_is_asked_again() {
    let mut cache = WatchCache::new(configmaps(), Bytes::from(PREFIX), 8);
    let now: Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
    assert!(matches!(cache.poll(now), Some(CacheEffect::Kv(_))));
    cache.handle(now, CacheEvent::Kv(Err(kv::KvError::Unavailable("etcd is down".into()))));
    assert!(cache.poll(now).is_none(), "no LIST at once: the store is not hammered");
    assert_eq!(cache.poll_timeout(), Some(now + RETRY_DELAY));
    assert!(matches!(cache.poll(now + RETRY_DELAY), Some(CacheEffect::Kv(_))));

    let mut h = Harness::new();
    h.put("a", json!({}));
    // The store moves on outside the cache's prefix: only progress tells the cache.
    let other =
        KvRequest::Txn(TxnRequest { success: vec![TxnOp::Put { key: "/registry/other/x".into(), value: "{}".into(), lease: 0 }], ..Default::default() });
    let _ = h.model.apply(h.now, &other);
    h.answer_progress = false;
    h.cache.handle(h.now, CacheEvent::Read { id: ReadId(1), request: ReadRequest::Latest { min: Some(h.model.revision()) } });
    h.pump();
    assert_eq!(h.progress_asks, 1);
    // The stream breaks with the request on it, unanswered; the watch restarts after the delay.
    h.cache.handle(h.now, CacheEvent::WatchFailed);
    h.now += SignedDuration::from_millis(500);
    h.pump();
    assert_eq!(h.progress_asks, 1, "no restart before the delay");
    h.answer_progress = true;
    h.now += SignedDuration::from_millis(500);
    h.pump();
    assert_eq!(h.progress_asks, 2, "progress is asked again on the new stream");
    assert!(h.reads[&ReadId(1)].is_ok(), "and the read is answered before its timeout");
}

/// A collection larger than a page is listed page by page at the first page's revision; a
/// write that lands between pages is not in the listed state but arrives on the watch.
#[test]
fn a_large_collection_is_listed_in_pages_at_one_revision() {
    let now: Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
    let mut model = Model::new();
    let put = |model: &mut Model, name: &str| {
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}});
        let op = TxnOp::Put { key: format!("{PREFIX}default/{name}").into(), value: serde_json::to_vec(&obj).unwrap().into(), lease: 0 };
        model.apply(now, &KvRequest::Txn(TxnRequest { success: vec![op], ..Default::default() })).0.unwrap();
    };
    let total = LIST_PAGE as usize + 5;
    for i in 0..total {
        put(&mut model, &format!("c{i:06}"));
    }
    let listed_at = model.revision();
    let mut cache = WatchCache::new(configmaps(), Bytes::from(PREFIX), 8);
    let (mut pages, mut watch) = (Vec::new(), None);
    while cache.watcher_count() == 0 && watch.is_none() {
        match cache.poll(now) {
            Some(CacheEffect::Kv(KvRequest::Range(r))) => {
                pages.push((r.limit, r.revision));
                let (result, _) = model.apply(now, &KvRequest::Range(r));
                if pages.len() == 1 {
                    put(&mut model, "between-pages");
                }
                cache.handle(now, CacheEvent::Kv(result));
            }
            Some(CacheEffect::StartWatch(w)) => watch = Some(w),
            Some(other) => panic!("unexpected {other:?}"),
            None => panic!("the cache stalled while listing"),
        }
    }
    assert_eq!(pages, [(LIST_PAGE, 0), (LIST_PAGE, listed_at)], "the second page is read at the first's revision");
    assert!(cache.is_ready());
    assert_eq!(cache.revision(), listed_at);
    cache.handle(now, CacheEvent::Read { id: ReadId(1), request: ReadRequest::Latest { min: None } });
    let Some(CacheEffect::ReadDone { result: Ok(ReadResult::Snapshot(s)), .. }) = cache.poll(now) else { panic!("a snapshot") };
    assert_eq!(s.objects.len(), total);
    let watch = watch.unwrap();
    assert_eq!(watch.start_revision, listed_at + 1);
    let backlog = model.backlog(&watch).unwrap();
    assert_eq!(backlog.len(), 1, "the write between pages comes on the watch");
}

/// A read the published state answers gets the answer the machine would give; the others
/// (a revision not reached yet, an older one, a cache not ready) are left to the machine.
#[test]
fn reads_answered_from_the_published_state_are_the_machines_answers() {
    let mut h = Harness::new();
    let r1 = h.put("a", json!({}));
    let r2 = h.put("b", json!({}));
    let published = h.cache.published().expect("a ready cache publishes its state");
    let requests = [
        ReadRequest::Latest { min: None },
        ReadRequest::Latest { min: Some(r1) },
        ReadRequest::Latest { min: Some(r2) },
        ReadRequest::Latest { min: Some(r2 + 1) },
        ReadRequest::Exact { revision: r2 },
        ReadRequest::Exact { revision: r1 },
    ];
    let keys = |r: &ReadResult| match r {
        ReadResult::Snapshot(s) => (s.revision, s.objects.keys().cloned().collect::<Vec<_>>()),
        ReadResult::NotCached => (0, Vec::new()),
    };
    let mut answered = Vec::new();
    for (i, request) in requests.iter().enumerate() {
        let Some(answer) = request.answer_from(&published) else { continue };
        answered.push(i);
        let id = ReadId(100 + i as u64);
        h.cache.handle(h.now, CacheEvent::Read { id, request: *request });
        h.pump();
        assert_eq!(keys(&answer), keys(h.reads[&id].as_ref().unwrap()), "{request:?}");
    }
    assert_eq!(answered, vec![0, 1, 2, 4]);
    assert!(WatchCache::new(configmaps(), Bytes::from(PREFIX), 8).published().is_none(), "nothing before the first LIST");
}
