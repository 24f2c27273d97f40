//! The watch cache of one resource (kube-apiserver's `Cacher` + `watchCache`): the current
//! objects and a window of recent events, fed by a KV watch, serving LIST/GET snapshots and
//! WATCH streams with kube's `resourceVersion` semantics.
//!
//! Call order: [`WatchCache::new`]; then, as with every machine, feed inputs with
//! [`WatchCache::handle`] and drain [`WatchCache::poll`] until it returns `None`; call `poll`
//! again at [`WatchCache::poll_timeout`]. The cache first asks for a LIST of its prefix, in
//! pages of [`LIST_PAGE`] at one revision ([`CacheEffect::Kv`], one page at a time; a page
//! is decoded by the `poll` after the one that asks for the next, so the store reads while the
//! cache decodes), and then a KV watch from the listed revision
//! ([`CacheEffect::StartWatch`]); it answers reads with [`CacheEffect::ReadDone`] and streams
//! watches as a [`CacheEffect::Backlog`] batch then [`CacheEffect::Deliver`] frames, live
//! frames encoded once per event and view and shared.
//! A slow consumer is reported with [`CacheEvent::Slow`] and is closed.

mod convert;
mod frames;
mod object;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use imbl::OrdMap;
use jiff::{SignedDuration, Timestamp};

use crate::apiextensions::Conversion;
use crate::catalog::Resource;
use crate::codec::{Output, View};
use crate::kv::{self, EventKind, KvRequest, KvResponse, KvResult, RangeRequest, Revision, WatchRequest, WatchResponse};
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::webhook::WebhookAnswer;

pub use frames::{Backlog, EventType, bookmark_frame, error_frame, event_frame, table_of};
pub use object::{CachedObject, Shared};

/// How long a read or watch waits for the cache to reach a revision (kube's `blockTimeout`).
pub const FRESHNESS_TIMEOUT: SignedDuration = SignedDuration::from_secs(3);
/// How often, at most, the cache asks the store for progress while reads or watches wait for a
/// revision it has not seen (kube's progress requester ticks as often).
pub const PROGRESS_INTERVAL: SignedDuration = SignedDuration::from_millis(100);
/// How often watchers that asked for bookmarks get one.
pub const BOOKMARK_INTERVAL: SignedDuration = SignedDuration::from_secs(60);
/// How long the cache waits before asking a failing store again (a LIST or its watch), so an
/// unreachable store is not hammered.
pub const RETRY_DELAY: SignedDuration = SignedDuration::from_secs(1);
/// Keys per page of the cache's LIST of its prefix.
pub const LIST_PAGE: i64 = 10_000;
/// Events kept for watches that resume from a past resourceVersion.
pub const DEFAULT_HISTORY: usize = 2048;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WatcherId(pub u64);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReadId(pub u64);

/// A resource's objects, keyed by storage key.
pub type Objects = OrdMap<Bytes, Shared>;

/// The objects of the resource at one revision, keyed by storage key.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub revision: Revision,
    pub objects: Objects,
}

impl Snapshot {
    /// The object of this namespace and name, found by looking at each (for a shell that does
    /// not know the collection's keys).
    pub fn named(&self, namespace: &str, name: &str) -> Option<&Shared> {
        self.objects.values().find(|o| o.namespace == namespace && o.name == name)
    }
}

/// Where a watch starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchStart {
    /// `resourceVersion` unset or `0`: synthetic ADDED events for the current state, then live.
    Current,
    /// `resourceVersion=N`: every event after N.
    After(Revision),
    /// `sendInitialEvents=true`: ADDED events for a state not older than `min`, a bookmark
    /// marking their end, then live.
    InitialEvents { min: Option<Revision> },
}

#[derive(Clone, Debug)]
pub struct WatchParams {
    /// Restrict to one namespace.
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub start: WatchStart,
    pub bookmarks: bool,
    pub output: Output,
    /// The watch ends here (`timeoutSeconds`).
    pub deadline: Timestamp,
}

/// Which state a read wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadRequest {
    /// The current state, once the cache has seen `min` (`None`: as it is).
    Latest { min: Option<Revision> },
    /// The state exactly at `revision`.
    Exact { revision: Revision },
}

impl ReadRequest {
    /// The answer a ready cache whose current state is `snapshot` gives this read, if that
    /// state is the one it asks for: a shell answers such a read from the cache's
    /// [`published`](WatchCache::published) state, without a turn of the cache's machine.
    pub fn answer_from(&self, snapshot: &Snapshot) -> Option<ReadResult> {
        let fits = match *self {
            ReadRequest::Latest { min } => min.is_none_or(|rv| rv <= snapshot.revision),
            ReadRequest::Exact { revision } => revision == snapshot.revision,
        };
        fits.then(|| ReadResult::Snapshot(snapshot.clone()))
    }
}

#[derive(Clone, Debug)]
pub enum ReadResult {
    Snapshot(Snapshot),
    /// The revision is older than the cache's window: read storage instead.
    NotCached,
}

#[derive(Debug)]
pub enum CacheEvent {
    /// The answer to the LIST the cache asked for.
    Kv(KvResult),
    /// The store's watch stream.
    Watch(WatchResponse),
    /// The store's watch stream broke; the cache restarts it.
    WatchFailed,
    Register {
        id: WatcherId,
        params: WatchParams,
    },
    Unregister {
        id: WatcherId,
    },
    /// The watcher's consumer does not keep up: it is closed.
    Slow {
        id: WatcherId,
    },
    Read {
        id: ReadId,
        request: ReadRequest,
    },
    /// The conversion webhook's answer to the [`CacheEffect::Convert`] of this review uid, or
    /// why there is none.
    Called {
        uid: String,
        answer: Result<WebhookAnswer, String>,
    },
}

#[derive(Debug)]
pub enum CacheEffect {
    Kv(KvRequest),
    StartWatch(WatchRequest),
    /// Ask the store to report its revision on the watch stream (a progress notification).
    RequestProgress,
    /// One live frame for each of `ids`: the same bytes for all, encoded once. A shell that
    /// cannot take it for a watcher (the watcher's buffer is full) reports [`CacheEvent::Slow`].
    Deliver {
        ids: Vec<WatcherId>,
        frame: Bytes,
    },
    /// The frames a watch starts with (its initial state or the history it resumes from), to
    /// send before any live frame. They come as one batch that does not count against the
    /// watcher's buffer: as in kube-apiserver, only live events can make a watcher slow, so a
    /// watch of a collection larger than the buffer can start.
    Backlog {
        id: WatcherId,
        frames: Backlog,
    },
    /// The watch stream ends (after its last frame).
    Close {
        id: WatcherId,
    },
    ReadDone {
        id: ReadId,
        result: Result<ReadResult, ApiError>,
    },
    /// Ask the CRD's conversion webhook for this conversion (at the Service its client config
    /// names, if it does) and report the answer with [`CacheEvent::Called`].
    Convert(Conversion),
}

/// What makes two watchers' frames of one event differ: the output, the event type, whether
/// the object is the previous state, and whether table column headers are included.
type FrameKey = (Output, EventType, bool, bool);

#[derive(Debug)]
struct HistoryEntry {
    revision: Revision,
    kind: EventKind,
    object: Shared,
    prev: Option<Shared>,
    /// The state after this event.
    snapshot: OrdMap<Bytes, Shared>,
}

#[derive(Debug)]
struct Watcher {
    params: WatchParams,
    /// No namespace, label or field selector: every event's view is the unfiltered one, worked
    /// out once per event for all such watchers (informers of everything, such as a
    /// controller's or the scheduler's).
    selects_all: bool,
    /// Events up to here have been sent.
    sent: Revision,
    next_bookmark: Option<Timestamp>,
    /// Tables carry column definitions in their first event only.
    headers_sent: bool,
}

impl Watcher {
    /// When this watcher next needs attention: its deadline or its next bookmark.
    fn next_timer(&self) -> Timestamp {
        self.next_bookmark.map_or(self.params.deadline, |b| b.min(self.params.deadline))
    }
}

#[derive(Debug)]
enum Waiting {
    Read(ReadId, ReadRequest),
    Watch(WatcherId, WatchParams),
}

/// The first key after `key`.
fn next_key(key: &[u8]) -> Bytes {
    let mut k = key.to_vec();
    k.push(0);
    Bytes::from(k)
}

/// What the cache asks the store again once [`RETRY_DELAY`] has passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    List,
    Watch,
}

#[derive(Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for the LIST.
    Listing,
    Ready,
}

/// A LIST of the prefix under way.
struct Listing {
    objects: OrdMap<Bytes, Shared>,
    /// The revision every page is read at: the first page's.
    revision: Option<Revision>,
    /// Pages received and not decoded yet (more than one only while a page waits for the
    /// conversion webhook), each with whether it is the last.
    pages: VecDeque<(Vec<kv::KeyValue>, bool)>,
}

/// The watch cache of one resource; see the module documentation.
pub struct WatchCache {
    res: Arc<Resource>,
    prefix: Bytes,
    phase: Phase,
    listing: Option<Listing>,
    objects: OrdMap<Bytes, Shared>,
    revision: Revision,
    /// The state before the oldest event in `history`, and its revision.
    base: (Revision, OrdMap<Bytes, Shared>),
    history: VecDeque<HistoryEntry>,
    capacity: usize,
    watchers: BTreeMap<WatcherId, Watcher>,
    /// Every watcher's next timer, so that `poll` looks only at watchers that are due. An entry
    /// whose watcher is gone or whose time no longer matches the watcher's is skipped.
    timers: BTreeSet<(Timestamp, WatcherId)>,
    /// Reads and watches waiting for the cache to be ready or fresh enough, with deadlines.
    waiting: Vec<(Timestamp, Waiting)>,
    progress_asked: bool,
    retry: Option<(Timestamp, Retry)>,
    /// When progress was last asked for.
    progress_last: Option<Timestamp>,
    /// Conversions by webhook under way (custom resources a webhook converts).
    conversions: convert::Conversions,
    effects: VecDeque<CacheEffect>,
}

impl WatchCache {
    /// A cache of `res`, whose objects live under `prefix` (e.g. `/registry/pods/`).
    pub fn new(res: Arc<Resource>, prefix: Bytes, capacity: usize) -> WatchCache {
        let conversions = convert::Conversions::new(&prefix);
        let mut c = WatchCache {
            res,
            prefix,
            phase: Phase::Listing,
            listing: None,
            objects: OrdMap::new(),
            revision: 0,
            base: (0, OrdMap::new()),
            history: VecDeque::new(),
            capacity: capacity.max(1),
            watchers: BTreeMap::new(),
            timers: BTreeSet::new(),
            waiting: Vec::new(),
            progress_asked: false,
            retry: None,
            progress_last: None,
            conversions,
            effects: VecDeque::new(),
        };
        c.relist();
        c
    }

    pub fn resource(&self) -> &Arc<Resource> {
        &self.res
    }

    pub fn revision(&self) -> Revision {
        self.revision
    }

    pub fn is_ready(&self) -> bool {
        self.phase == Phase::Ready
    }

    pub fn watcher_count(&self) -> usize {
        self.watchers.len()
    }

    /// The oldest revision a watch can resume from.
    pub fn oldest_resumable(&self) -> Revision {
        self.base.0
    }

    fn relist(&mut self) {
        self.conversions.reset();
        self.phase = Phase::Listing;
        self.retry = None;
        self.listing = Some(Listing { objects: OrdMap::new(), revision: None, pages: VecDeque::new() });
        self.ask_page(self.prefix.clone(), 0);
    }

    /// Asks for the page of the prefix from `key` on, at `revision` (0: the current one).
    fn ask_page(&mut self, key: Bytes, revision: Revision) {
        let range = RangeRequest { key, range_end: kv::prefix_end(&self.prefix), limit: LIST_PAGE, revision, ..Default::default() };
        self.effects.push_back(CacheEffect::Kv(KvRequest::Range(range)));
    }

    pub fn handle(&mut self, now: Timestamp, event: CacheEvent) {
        match event {
            CacheEvent::Kv(result) => self.listed(now, result),
            CacheEvent::Watch(resp) => self.watched(now, resp),
            CacheEvent::WatchFailed => {
                if self.phase == Phase::Ready {
                    self.retry = Some((now + RETRY_DELAY, Retry::Watch));
                }
            }
            CacheEvent::Register { id, params } => {
                let deadline = now + FRESHNESS_TIMEOUT;
                self.register(now, id, params, deadline)
            }
            CacheEvent::Unregister { id } => {
                self.watchers.remove(&id);
                self.waiting.retain(|(_, w)| !matches!(w, Waiting::Watch(w, _) if *w == id));
            }
            CacheEvent::Slow { id } => {
                if self.watchers.remove(&id).is_some() {
                    self.effects.push_back(CacheEffect::Close { id });
                }
            }
            CacheEvent::Read { id, request } => self.read(now, id, request, now + FRESHNESS_TIMEOUT),
            CacheEvent::Called { uid, answer } => self.converted(now, &uid, answer),
        }
    }

    pub fn poll(&mut self, now: Timestamp) -> Option<CacheEffect> {
        self.expire(now);
        self.retry_conversion(now);
        if self.effects.is_empty() {
            self.decode_page(now);
        }
        self.effects.pop_front()
    }

    /// The next time `poll` has something to do on its own.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        let timer = self.timers.first().map(|(t, _)| *t);
        let waits = self.waiting.iter().map(|(t, _)| *t);
        let progress = self.next_progress().filter(|_| self.needs_progress());
        let retry = self.retry.map(|(t, _)| t);
        timer.into_iter().chain(waits).chain(progress).chain(retry).chain(self.conversions.retry_at()).min()
    }

    /// A page of the LIST: asks for the next one (decoding waits for the next `poll`).
    fn listed(&mut self, now: Timestamp, result: KvResult) {
        // A shell that answers before polling again must not overwrite the page before.
        self.decode_page(now);
        let (Some(listing), Ok(KvResponse::Range(range))) = (self.listing.as_mut(), result) else {
            // The store failed (or the revision was compacted between pages): list again in a while.
            self.listing = None;
            self.retry = Some((now + RETRY_DELAY, Retry::List));
            return;
        };
        let revision = *listing.revision.get_or_insert(range.header_revision);
        let next = range.more.then(|| range.kvs.last().map(|kv| next_key(&kv.key))).flatten();
        listing.pages.push_back((range.kvs, next.is_none()));
        if let Some(key) = next {
            self.ask_page(key, revision);
        }
    }

    /// Decodes the page received, and once the last is in, makes the listed state current.
    fn decode_page(&mut self, now: Timestamp) {
        if self.conversions.waiting() {
            return;
        }
        let Some(listing) = self.listing.as_mut() else { return };
        let Some((kvs, last)) = listing.pages.pop_front() else { return };
        if self.res.strategy.conversion_webhook().is_some() {
            // The page is decoded whole again once the webhook answered for what needs it.
            let mut needs = Vec::new();
            let mut objects = Vec::new();
            for kv in &kvs {
                match self.decode(kv) {
                    convert::Decoded::Object(o) => objects.push(o),
                    convert::Decoded::Needs(u) => needs.push(u),
                    convert::Decoded::Skipped => {}
                }
            }
            let listing = self.listing.as_mut().expect("checked above");
            if !needs.is_empty() {
                listing.pages.push_front((kvs, last));
                return self.ask(needs);
            }
            for o in objects {
                listing.objects.insert(o.key.clone(), Arc::new(o));
            }
            self.forget_conversions();
        } else {
            // Each stored value is dropped once its object is built, so the allocator reuses
            // its memory for the next object instead of holding the whole page alongside.
            for kv in kvs {
                if let Ok(o) = CachedObject::from_kv(&self.res, &kv) {
                    listing.objects.insert(kv.key, Arc::new(o));
                }
            }
        }
        if !last {
            return;
        }
        let listing = self.listing.take().expect("checked above");
        self.objects = listing.objects;
        self.revision = listing.revision.expect("a page was received");
        self.base = (self.revision, self.objects.clone());
        self.history.clear();
        // Watchers of the old state cannot continue across a relist.
        for id in std::mem::take(&mut self.watchers).into_keys() {
            self.effects.push_back(CacheEffect::Close { id });
        }
        self.phase = Phase::Ready;
        self.start_watch();
        self.wake(now);
    }

    fn start_watch(&mut self) {
        // A progress request on the old stream will not be answered on the new one.
        self.progress_asked = false;
        self.effects.push_back(CacheEffect::StartWatch(WatchRequest::prefix(self.prefix.clone(), self.revision + 1)));
    }

    fn watched(&mut self, now: Timestamp, resp: WatchResponse) {
        if self.phase != Phase::Ready {
            return;
        }
        let Err(resp) = self.hold(resp) else { return };
        match resp {
            // Only events and progress notifications prove what the cache has seen; a
            // response's header revision may run ahead of its events.
            WatchResponse::Events { events, header_revision } => {
                let mut events = events.into_iter();
                while let Some(ev) = events.next() {
                    if ev.kv.mod_revision <= self.revision {
                        continue;
                    }
                    let decoded = match ev.kind {
                        EventKind::Put => self.decode(&ev.kv),
                        EventKind::Delete => convert::Decoded::Skipped,
                    };
                    match decoded {
                        convert::Decoded::Needs(_) => {
                            self.hold_from(header_revision, std::iter::once(ev).chain(events).collect());
                            break;
                        }
                        convert::Decoded::Object(o) => self.apply(now, ev, Some(o)),
                        convert::Decoded::Skipped => self.apply(now, ev, None),
                    }
                }
                self.wake(now);
            }
            WatchResponse::Progress { revision } => {
                self.progress_asked = false;
                self.advance(revision, now);
            }
            WatchResponse::Canceled { .. } => self.relist(),
        }
    }

    /// Nothing changed in the prefix up to `revision`.
    fn advance(&mut self, revision: Revision, now: Timestamp) {
        if revision > self.revision {
            self.revision = revision;
        }
        self.wake(now);
    }

    /// Records one event: a put with its object as served (`None`: it does not decode).
    fn apply(&mut self, now: Timestamp, ev: kv::Event, decoded: Option<CachedObject>) {
        let rev = ev.kv.mod_revision;
        let key = ev.kv.key.clone();
        let (kind, object, prev) = match ev.kind {
            EventKind::Put => {
                let Some(o) = decoded else {
                    self.revision = rev;
                    return;
                };
                let o = Arc::new(o);
                let prev = self.objects.insert(key, o.clone());
                (EventKind::Put, o, prev)
            }
            EventKind::Delete => {
                let Some(prev) = self.objects.remove(&key) else {
                    self.revision = rev;
                    return;
                };
                (EventKind::Delete, Arc::new(prev.at_revision(&self.res, rev)), Some(prev))
            }
        };
        self.revision = rev;
        self.history.push_back(HistoryEntry { revision: rev, kind, object, prev, snapshot: self.objects.clone() });
        while self.history.len() > self.capacity {
            let old = self.history.pop_front().expect("longer than capacity");
            self.base = (old.revision, old.snapshot);
        }
        self.dispatch_last(now);
    }

    /// Hands the newest event to every watcher that sees it: one frame per distinct view
    /// (format, event type, object, table headers), encoded once and shared, and one
    /// [`CacheEffect::Deliver`] per frame naming its watchers.
    fn dispatch_last(&mut self, now: Timestamp) {
        let entry = self.history.back().expect("an event was just recorded");
        // A handful of distinct views at most, so a list beats hashing per watcher.
        let mut built: Vec<(FrameKey, Option<Bytes>, Vec<WatcherId>)> = Vec::new();
        let res = &self.res;
        let unfiltered = view_by(entry, |_| true);
        for (id, w) in self.watchers.iter_mut() {
            if entry.revision <= w.sent {
                continue;
            }
            w.sent = entry.revision;
            let view = if w.selects_all { unfiltered } else { view_of(entry, &w.params) };
            let Some((ty, use_prev)) = view else { continue };
            let headers = matches!(w.params.output.view, View::Table(_)) && !w.headers_sent;
            let key = (w.params.output, ty, use_prev, headers);
            let slot = match built.iter().position(|(k, _, _)| *k == key) {
                Some(i) => i,
                None => {
                    let frame = event_frame(res, w.params.output, ty, &object_for(res, entry, use_prev), headers, now).ok();
                    built.push((key, frame, Vec::new()));
                    built.len() - 1
                }
            };
            let (_, frame, ids) = &mut built[slot];
            if frame.is_some() {
                w.headers_sent |= headers;
                ids.push(*id);
            }
        }
        for (_, frame, ids) in built {
            if let Some(frame) = frame.filter(|_| !ids.is_empty()) {
                self.effects.push_back(CacheEffect::Deliver { ids, frame });
            }
        }
    }

    /// Starts a watcher, or parks it until `deadline` while the cache is not ready or has not
    /// reached the revision it starts from.
    fn register(&mut self, now: Timestamp, id: WatcherId, params: WatchParams, deadline: Timestamp) {
        if self.phase != Phase::Ready {
            self.waiting.push((params.deadline, Waiting::Watch(id, params)));
            return;
        }
        let needed = match params.start {
            WatchStart::After(rv) => Some(rv),
            WatchStart::InitialEvents { min } => min,
            WatchStart::Current => None,
        };
        if needed.is_some_and(|rv| rv > self.revision) {
            self.ask_progress(now);
            self.waiting.push((deadline, Waiting::Watch(id, params)));
            return;
        }
        self.start_watcher(now, id, params);
    }

    fn start_watcher(&mut self, now: Timestamp, id: WatcherId, params: WatchParams) {
        let selects_all = params.namespace.is_none() && params.labels.is_empty() && params.fields.is_empty();
        let mut w = Watcher { next_bookmark: params.bookmarks.then(|| now + BOOKMARK_INTERVAL), selects_all, sent: self.revision, headers_sent: false, params };
        let (events, end): (Vec<(EventType, Shared)>, Option<Bytes>) = match w.params.start {
            WatchStart::After(rv) => {
                if rv < self.base.0 {
                    let err = ApiError::expired(format!("too old resource version: {rv} ({})", self.base.0));
                    self.effects.push_back(CacheEffect::Deliver { ids: vec![id], frame: error_frame(w.params.output, &err) });
                    self.effects.push_back(CacheEffect::Close { id });
                    return;
                }
                let replay = self
                    .history
                    .iter()
                    .filter(|e| e.revision > rv)
                    .filter_map(|e| view_of(e, &w.params).map(|(ty, use_prev)| (ty, object_for(&self.res, e, use_prev))))
                    .collect();
                (replay, None)
            }
            WatchStart::Current | WatchStart::InitialEvents { .. } => {
                let initial = self.objects.values().filter(|o| matches(o, &w.params)).map(|o| (EventType::Added, o.clone())).collect();
                let end = matches!(w.params.start, WatchStart::InitialEvents { .. }).then(|| bookmark_frame(&self.res, w.params.output, self.revision, true));
                (initial, end)
            }
        };
        let backlog = Backlog::new(self.res.clone(), w.params.output, events, end, now);
        w.headers_sent = backlog.sends_headers();
        if !backlog.is_empty() {
            self.effects.push_back(CacheEffect::Backlog { id, frames: backlog });
        }
        w.sent = self.revision;
        self.timers.insert((w.next_timer(), id));
        self.watchers.insert(id, w);
    }

    /// Asks the store for progress, unless an answer is awaited or the last ask was less than
    /// [`PROGRESS_INTERVAL`] ago (then `poll` asks when the interval is over).
    fn ask_progress(&mut self, now: Timestamp) {
        if self.progress_asked || self.next_progress().is_some_and(|t| now < t) {
            return;
        }
        self.progress_asked = true;
        self.progress_last = Some(now);
        self.effects.push_back(CacheEffect::RequestProgress);
    }

    fn next_progress(&self) -> Option<Timestamp> {
        self.progress_last.map(|t| t + PROGRESS_INTERVAL)
    }

    /// Reads and watches are waiting for a revision the cache has not reached.
    fn needs_progress(&self) -> bool {
        self.phase == Phase::Ready && !self.waiting.is_empty() && !self.progress_asked
    }

    /// Answers a read, or parks it until `deadline` while the cache is not ready or fresh.
    fn read(&mut self, now: Timestamp, id: ReadId, request: ReadRequest, deadline: Timestamp) {
        let wanted = match request {
            ReadRequest::Latest { min } => min,
            ReadRequest::Exact { revision } => Some(revision),
        };
        if self.phase != Phase::Ready || wanted.is_some_and(|rv| rv > self.revision) {
            if self.phase == Phase::Ready {
                self.ask_progress(now);
            }
            self.waiting.push((deadline, Waiting::Read(id, request)));
            return;
        }
        let current = self.snapshot();
        let result = match request.answer_from(&current) {
            Some(r) => r,
            // An older revision: from the window, if it still holds it.
            None => self.snapshot_at(wanted.unwrap_or(current.revision)),
        };
        self.effects.push_back(CacheEffect::ReadDone { id, result: Ok(result) });
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot { revision: self.revision, objects: self.objects.clone() }
    }

    /// The state reads may be answered from by [`ReadRequest::answer_from`] without the
    /// machine: the current one, once the cache is ready (`None` before, and while it lists
    /// again). A shell that publishes it again after every turn of the machine answers those
    /// reads as the machine would have a moment earlier.
    pub fn published(&self) -> Option<Snapshot> {
        (self.phase == Phase::Ready).then(|| self.snapshot())
    }

    /// The state at `revision`, older than the current one, if the window still holds it.
    fn snapshot_at(&self, revision: Revision) -> ReadResult {
        if revision < self.base.0 {
            return ReadResult::NotCached;
        }
        let objects = self.history.iter().rev().find(|e| e.revision <= revision).map(|e| e.snapshot.clone()).unwrap_or_else(|| self.base.1.clone());
        ReadResult::Snapshot(Snapshot { revision, objects })
    }

    /// Retries what waits for readiness or freshness.
    fn wake(&mut self, now: Timestamp) {
        if self.phase != Phase::Ready {
            return;
        }
        for (deadline, w) in std::mem::take(&mut self.waiting) {
            match w {
                Waiting::Read(id, request) => self.read(now, id, request, deadline),
                Waiting::Watch(id, params) => self.register(now, id, params, deadline),
            }
        }
    }

    /// Deadlines: watch timeouts, bookmarks, and reads or watches that waited too long.
    fn expire(&mut self, now: Timestamp) {
        if let Some((_, what)) = self.retry.filter(|(t, _)| *t <= now) {
            self.retry = None;
            match what {
                Retry::List => self.relist(),
                Retry::Watch => self.start_watch(),
            }
        }
        while let Some(&(at, id)) = self.timers.first().filter(|(t, _)| *t <= now) {
            self.timers.pop_first();
            let Some(w) = self.watchers.get_mut(&id).filter(|w| w.next_timer() == at) else { continue };
            if w.params.deadline <= now {
                self.watchers.remove(&id);
                self.effects.push_back(CacheEffect::Close { id });
                continue;
            }
            w.next_bookmark = Some(now + BOOKMARK_INTERVAL);
            let frame = bookmark_frame(&self.res, w.params.output, self.revision.max(w.sent), false);
            self.effects.push_back(CacheEffect::Deliver { ids: vec![id], frame });
            self.timers.insert((w.next_timer(), id));
        }
        if self.needs_progress() {
            self.ask_progress(now);
        }
        if !self.waiting.iter().any(|(t, _)| *t <= now) {
            return;
        }
        let (due, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.waiting).into_iter().partition(|(t, _)| *t <= now);
        self.waiting = keep;
        for (_, w) in due {
            match w {
                Waiting::Read(id, request) => {
                    let rv = match request {
                        ReadRequest::Latest { min } => min.unwrap_or(0),
                        ReadRequest::Exact { revision } => revision,
                    };
                    let err = too_large(rv, self.revision);
                    self.effects.push_back(CacheEffect::ReadDone { id, result: Err(err) });
                }
                Waiting::Watch(id, params) => {
                    let rv = match params.start {
                        WatchStart::After(rv) => rv,
                        WatchStart::InitialEvents { min } => min.unwrap_or(0),
                        WatchStart::Current => 0,
                    };
                    if params.deadline <= now {
                        self.effects.push_back(CacheEffect::Close { id });
                    } else {
                        let err = too_large(rv, self.revision);
                        self.effects.push_back(CacheEffect::Deliver { ids: vec![id], frame: error_frame(params.output, &err) });
                        self.effects.push_back(CacheEffect::Close { id });
                    }
                }
            }
        }
    }
}

/// kube's answer when a cache cannot reach a revision in time (`NewTooLargeResourceVersionError`).
pub fn too_large(requested: Revision, current: Revision) -> ApiError {
    let mut e = ApiError::timeout(&format!("Too large resource version: {requested}, current: {current}"), 1);
    if let Some(d) = e.details.as_mut() {
        d.causes.push(crate::status::StatusCause {
            reason: "ResourceVersionTooLarge".into(),
            message: "Too large resource version".into(),
            field: String::new(),
        });
    }
    e
}

fn matches(o: &CachedObject, p: &WatchParams) -> bool {
    if let Some(ns) = &p.namespace
        && &o.namespace != ns
    {
        return false;
    }
    o.matches(&p.labels, &p.fields)
}

/// What a watcher sees of an event (`convertToWatchEvent`): its type, and whether it sees the
/// previous object (leaving its selector reads as a deletion of what it knew).
fn view_of(e: &HistoryEntry, p: &WatchParams) -> Option<(EventType, bool)> {
    view_by(e, |o| matches(o, p))
}

/// [`view_of`] for a watcher that `passes` the objects it passes.
fn view_by(e: &HistoryEntry, passes: impl Fn(&CachedObject) -> bool) -> Option<(EventType, bool)> {
    let now_passes = e.kind == EventKind::Put && passes(&e.object);
    let before_passes = e.prev.as_ref().is_some_and(|o| passes(o));
    match (now_passes, before_passes) {
        (true, false) => Some((EventType::Added, false)),
        (true, true) => Some((EventType::Modified, false)),
        (false, true) => Some((EventType::Deleted, true)),
        (false, false) => None,
    }
}

/// The object a watcher gets for an event: the new state, or the previous one carrying the
/// event's revision.
fn object_for(res: &Resource, e: &HistoryEntry, use_prev: bool) -> Shared {
    match (&e.prev, use_prev, e.kind) {
        (_, _, EventKind::Delete) => e.object.clone(),
        (Some(prev), true, _) => Arc::new(prev.at_revision(res, e.revision)),
        _ => e.object.clone(),
    }
}

#[cfg(test)]
mod tests;
