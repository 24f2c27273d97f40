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
