//! The watch cache of a custom resource a webhook converts: an object stored at another version
//! than the cache serves is converted by the CRD's webhook as it comes in (kube's cacher decodes
//! each object through the webhook too). A LIST page waits for the answer, and the store's
//! watch responses are held in order until it comes; a failed conversion is asked again after
//! [`RETRY_DELAY`], so no object is left out and no event skipped.

use std::collections::VecDeque;

use jiff::Timestamp;
use serde_json::Value;

use super::{CacheEffect, CachedObject, RETRY_DELAY, WatchCache};
use crate::apiextensions::{Conversion, Converted};
use crate::kv::{self, KeyValue, WatchResponse};
use crate::rand::Rng;
use crate::registry::Unconverted;
use crate::webhook::WebhookAnswer;

/// The cache's part in conversions by webhook.
pub(super) struct Conversions {
    converted: Converted,
    /// The conversion asked for and not answered yet; when it failed, when to ask again.
    asked: Option<(Conversion, Option<Timestamp>)>,
    /// Watch responses that came while a conversion was under way, in order.
    held: VecDeque<WatchResponse>,
    /// The reviews' uids.
    rng: Rng,
}

impl Conversions {
    pub(super) fn new(prefix: &[u8]) -> Conversions {
        Conversions { converted: Converted::default(), asked: None, held: VecDeque::new(), rng: Rng::of(prefix) }
    }

    /// Whether the cache waits for a webhook's answer.
    pub(super) fn waiting(&self) -> bool {
        self.asked.is_some()
    }

    /// When a failed conversion is asked again.
    pub(super) fn retry_at(&self) -> Option<Timestamp> {
        self.asked.as_ref().and_then(|(_, at)| *at)
    }

    /// Forgets everything under way (the cache lists again).
    pub(super) fn reset(&mut self) {
        self.converted.clear();
        self.asked = None;
        self.held.clear();
    }
}

/// A stored object as the cache serves it: decoded, left out (it does not decode), or waiting
/// for the webhook.
pub(super) enum Decoded {
    Object(CachedObject),
    Skipped,
    Needs(Unconverted),
}

impl WatchCache {
    /// The object stored in `kv`, with the webhook's answers so far.
    pub(super) fn decode(&self, kv: &KeyValue) -> Decoded {
        match CachedObject::from_kv_converted(&self.res, kv, &self.conversions.converted) {
            Ok(Ok(o)) => Decoded::Object(o),
            Ok(Err(u)) => Decoded::Needs(u),
            Err(_) => Decoded::Skipped,
        }
    }

    /// Asks the webhook to convert `objects` to the served version.
    pub(super) fn ask(&mut self, objects: Vec<Unconverted>) {
        let Some((webhook, _)) = self.res.strategy.conversion_webhook() else { return };
        let conversion = Conversion {
            webhook: webhook.clone(),
            desired: self.res.info.api_version(),
            objects: objects.into_iter().map(|u| (u.input, u.object)).collect(),
            uid: self.conversions.rng.uuid(),
        };
        self.effects.push_back(CacheEffect::Convert(conversion.clone()));
        self.conversions.asked = Some((conversion, None));
    }

    /// Holds a watch response while a conversion is under way; gives it back when there is
    /// none. More responses held than the cache keeps events (the webhook is down while
    /// objects keep changing) make the cache list again instead.
    pub(super) fn hold(&mut self, resp: WatchResponse) -> Result<(), WatchResponse> {
        if !self.conversions.waiting() {
            return Err(resp);
        }
        if self.conversions.held.len() >= self.capacity {
            self.relist();
            return Ok(());
        }
        self.conversions.held.push_back(resp);
        Ok(())
    }

    /// The events from the first one that needs the webhook on are held, and the webhook asked
    /// for every object among them that needs it.
    pub(super) fn hold_from(&mut self, header_revision: kv::Revision, events: Vec<kv::Event>) {
        let needs: Vec<Unconverted> = events
            .iter()
            .filter(|ev| ev.kind == kv::EventKind::Put)
            .filter_map(|ev| match self.decode(&ev.kv) {
                Decoded::Needs(u) => Some(u),
                _ => None,
            })
            .collect();
        self.conversions.held.push_front(WatchResponse::Events { header_revision, events });
        self.ask(needs);
    }

    /// The webhook's answer to the review `uid`: what waited goes on (or, when it failed,
    /// asks again later). An answer to a review no longer waited for is dropped.
    pub(super) fn converted(&mut self, now: Timestamp, uid: &str, answer: Result<WebhookAnswer, String>) {
        let Some((conversion, retry @ None)) = &mut self.conversions.asked else { return };
        if conversion.uid != uid {
            return;
        }
        let Ok(objects) = conversion.answered(answer) else {
            *retry = Some(now + RETRY_DELAY);
            return;
        };
        let (conversion, _) = self.conversions.asked.take().expect("matched above");
        // Earlier answers served what was applied since: only this one's objects wait.
        self.conversions.converted.clear();
        self.conversions.converted.record(&conversion, Ok::<Vec<Value>, String>(objects));
        // A LIST page that waited is decoded by the next `poll`, with the answers.
        if self.listing.is_none() {
            for resp in std::mem::take(&mut self.conversions.held) {
                self.watched(now, resp);
            }
            self.forget_conversions();
        }
    }

    /// Asks again for a failed conversion whose time has come.
    pub(super) fn retry_conversion(&mut self, now: Timestamp) {
        if let Some((conversion, at @ Some(_))) = &mut self.conversions.asked
            && at.is_some_and(|t| t <= now)
        {
            *at = None;
            self.effects.push_back(CacheEffect::Convert(conversion.clone()));
        }
    }

    /// Drops the answers once nothing waits for them (a LIST page decoded, held events applied).
    pub(super) fn forget_conversions(&mut self) {
        if !self.conversions.waiting() && self.conversions.held.is_empty() {
            self.conversions.converted.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use jiff::{SignedDuration, Timestamp};
    use serde_json::{Value, json};

    use super::super::{CacheEffect, CacheEvent, ReadId, ReadRequest, ReadResult, WatchCache};
    use crate::apiextensions::{Conversion, catalog_with};
    use crate::catalog::Catalog;
    use crate::kv::{self, KvRequest, Model, TxnOp, TxnRequest, WatchRequest, WatchResponse};
    use crate::webhook::WebhookAnswer;

    const PREFIX: &str = "/registry/example.com/tabs/";

    /// The v2 watch cache of a CRD whose webhook converts, over a `kv::Model`; conversions
    /// asked for wait in `asked` until the test answers them.
    struct Harness {
        model: Model,
        cache: WatchCache,
        now: Timestamp,
        watch: Option<WatchRequest>,
        asked: Vec<Conversion>,
        reads: Vec<Result<ReadResult, crate::status::ApiError>>,
    }

    fn crd() -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "tabs.example.com", "uid": "u"},
            "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "tabs", "kind": "Tab"},
                "conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://hook.example/c"}, "conversionReviewVersions": ["v1"]}},
                "versions": [{"name": "v1", "served": true, "storage": true}, {"name": "v2", "served": true, "storage": false}]},
            "status": {"acceptedNames": {"plural": "tabs", "kind": "Tab"}, "conditions": [{"type": "NamesAccepted", "status": "True"}, {"type": "Established", "status": "True"}]}})
    }

    impl Harness {
        fn new(objects: &[&str]) -> Harness {
            let crd = crd();
            let res = catalog_with(&Catalog::default(), &Catalog::default(), [&crd]).get("example.com", "v2", "tabs").expect("served").clone();
            let mut h = Harness {
                model: Model::new(),
                cache: WatchCache::new(res, Bytes::from(PREFIX), 8),
                now: "2024-01-01T00:00:00Z".parse().unwrap(),
                watch: None,
                asked: Vec::new(),
                reads: Vec::new(),
            };
            for name in objects {
                h.store(name, 1);
            }
            h.pump();
            h
        }

        fn pump(&mut self) {
            while let Some(e) = self.cache.poll(self.now) {
                let Some(e) = crate::cache::tests::unless_kv(&mut self.cache, &mut self.model, self.now, e) else { continue };
                match e {
                    CacheEffect::StartWatch(w) => self.watch = Some(w),
                    CacheEffect::Convert(c) => self.asked.push(c),
                    CacheEffect::ReadDone { result, .. } => self.reads.push(result),
                    _ => {}
                }
            }
        }

        /// Stores `name` at v1 with `spec.n`.
        fn store(&mut self, name: &str, n: i64) -> Vec<kv::Event> {
            let obj = json!({"apiVersion": "example.com/v1", "kind": "Tab", "metadata": {"name": name, "namespace": "default", "uid": name}, "spec": {"n": n}});
            let op = TxnOp::Put { key: format!("{PREFIX}default/{name}").into(), value: serde_json::to_vec(&obj).unwrap().into(), lease: 0 };
            self.model.apply(self.now, &KvRequest::Txn(TxnRequest { success: vec![op], ..Default::default() })).1
        }

        /// [`Self::store`], and the cache's watch sees it.
        fn put(&mut self, name: &str, n: i64) {
            let events = self.store(name, n);
            if self.watch.is_some() {
                let header_revision = self.model.revision();
                self.cache.handle(self.now, CacheEvent::Watch(WatchResponse::Events { header_revision, events }));
            }
            self.pump();
        }

        /// Answers the oldest conversion asked: converted (`n` doubled, to tell), or failed.
        fn answer(&mut self, ok: bool) {
            let c = self.asked.remove(0);
            self.answer_with(&c.uid.clone(), &c, ok);
        }

        fn answer_with(&mut self, uid: &str, c: &Conversion, ok: bool) {
            let objects: Vec<Value> = c
                .objects
                .iter()
                .map(|(_, o)| {
                    let mut o = o.clone();
                    o["apiVersion"] = json!(c.desired);
                    o["spec"]["n"] = json!(o["spec"]["n"].as_i64().unwrap() * 2);
                    o
                })
                .collect();
            let result = if ok { json!({"status": "Success"}) } else { json!({"status": "Failure", "message": "down"}) };
            let review = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": {"uid": c.uid, "result": result, "convertedObjects": objects}});
            let answer = Ok(WebhookAnswer { status: 200, body: Bytes::from(review.to_string()), ..Default::default() });
            self.cache.handle(self.now, CacheEvent::Called { uid: uid.to_string(), answer });
            self.pump();
        }

        /// The objects the cache serves: name and `spec.n`.
        fn served(&mut self) -> Vec<(String, i64)> {
            self.cache.handle(self.now, CacheEvent::Read { id: ReadId(1), request: ReadRequest::Latest { min: None } });
            self.pump();
            let Some(Ok(ReadResult::Snapshot(s))) = self.reads.pop() else { panic!("a snapshot") };
            s.objects.values().map(|o| (o.name.clone(), o.value()["spec"]["n"].as_i64().unwrap())).collect()
        }
    }

    #[test]
    fn the_first_list_waits_for_the_webhook_and_serves_its_answer() {
        let mut h = Harness::new(&["a", "b"]);
        assert!(!h.cache.is_ready());
        assert_eq!(h.asked.len(), 1);
        assert_eq!(h.asked[0].objects.len(), 2, "the page in one review");
        // A failed answer is asked again a second later; nothing is served meanwhile.
        h.answer(false);
        assert!(!h.cache.is_ready() && h.asked.is_empty());
        h.now += SignedDuration::from_secs(1);
        h.pump();
        assert_eq!(h.asked.len(), 1);
        h.answer(true);
        assert!(h.cache.is_ready());
        assert_eq!(h.served(), [("a".to_string(), 2), ("b".to_string(), 2)]);
    }

    #[test]
    fn events_wait_in_order_for_the_webhook_and_a_stale_answer_changes_nothing() {
        let mut h = Harness::new(&[]);
        assert!(h.cache.is_ready());
        h.put("a", 1);
        assert_eq!(h.asked.len(), 1);
        // More events while the first waits: held, in order.
        h.put("a", 2);
        h.put("b", 3);
        assert_eq!(h.asked.len(), 1, "one review at a time");
        assert_eq!(h.served(), []);
        // An answer to another review is dropped.
        let c = h.asked[0].clone();
        h.answer_with("not-the-one", &c, true);
        assert_eq!(h.served(), []);
        // Each held response then gets its review, in order, until everything is in.
        let mut reviews = 0;
        while !h.asked.is_empty() {
            h.answer(true);
            reviews += 1;
        }
        assert_eq!(reviews, 3);
        assert_eq!(h.served(), [("a".to_string(), 4), ("b".to_string(), 6)]);
    }

    #[test]
    fn more_held_responses_than_events_kept_make_the_cache_list_again() {
        let mut h = Harness::new(&[]);
        // The first waits; seven more are held with it (the cache keeps 8 events); the next
        // one makes the cache list again, with one review for all.
        for i in 0..9 {
            h.put(&format!("o{i}"), i);
        }
        assert!(!h.cache.is_ready());
        let relist = h.asked.pop().expect("the relist's review");
        assert_eq!(relist.objects.len(), 9);
        h.asked.clear();
        h.answer_with(&relist.uid.clone(), &relist, true);
        assert!(h.cache.is_ready());
        assert_eq!(h.served().len(), 9);
    }
}
