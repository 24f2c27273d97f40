//! One task per resource runs its watch cache machine: it feeds the machine the store's watch
//! stream, the requests' reads and watch registrations, and carries out its effects. Watch
//! frames go to each watcher through a bounded hand-off (`kapi-handoff`, loom-checked); a full
//! one is reported to the machine, which decides to close the slow watcher.
//!
//! After every turn of its machine the task publishes the cache's state (an immutable
//! snapshot, swapped in whole), and a read that state can answer is answered from it by the
//! requester itself, without waiting for a turn of the task (as kube's admission plugins read
//! their informers' caches).

use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use arc_swap::{ArcSwap, ArcSwapOption};
use bytes::Bytes;
use kapi_core::apiextensions::Conversion;
use kapi_core::apiextensions::same_objects;
use kapi_core::cache::{Backlog, CacheEffect, CacheEvent, DEFAULT_HISTORY, ReadId, ReadRequest, ReadResult, Snapshot, WatchCache, WatchParams, WatcherId};
use kapi_core::catalog::Resource;
use kapi_core::kv::{KvResult, WatchResponse};
use kapi_core::status::ApiError;
use kapi_core::webhook::WebhookAnswer;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::clock::{instant_of, now};
use crate::store::Store;
use crate::webhook::WebhookClient;
use kapi_handoff as handoff;

/// Chunks a watcher may have in flight before it counts as slow.
const WATCHER_BUFFER: usize = 1024;
/// Bytes of live frames a watcher may have in flight before it counts as slow.
const WATCHER_MAX_BYTES: usize = 32 * 1024 * 1024;

/// What a watch connection receives: one live frame, or the frames it starts with (made as
/// they are written; they take one place in the watcher's buffer and no bytes of it).
pub enum Chunk {
    One(Bytes),
    Backlog(Backlog),
}

/// What a cache task and a watch connection both see of a watcher: the bytes of live frames
/// queued, how many frames the connection has taken, and whether it waits for more (nothing
/// in hand). A watcher that has frames to send and takes none for the stall limit is slow.
#[derive(Default)]
struct Pending {
    bytes: AtomicUsize,
    taken: AtomicU64,
    waiting: AtomicBool,
}

/// A watch's frames as its connection writes them.
pub struct WatchStream {
    rx: handoff::Receiver<Chunk>,
    pending: Arc<Pending>,
    backlog: Option<Backlog>,
}

impl futures_util::Stream for WatchStream {
    type Item = Bytes;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let this = &mut *self;
        loop {
            if let Some(frame) = this.backlog.as_mut().and_then(Iterator::next) {
                this.pending.taken.fetch_add(1, Ordering::Relaxed);
                return Poll::Ready(Some(frame));
            }
            this.backlog = None;
            match this.rx.poll_recv(cx) {
                Poll::Ready(Some(Chunk::One(frame))) => {
                    this.pending.bytes.fetch_sub(frame.len(), Ordering::Relaxed);
                    this.pending.taken.fetch_add(1, Ordering::Relaxed);
                    this.pending.waiting.store(false, Ordering::Relaxed);
                    return Poll::Ready(Some(frame));
                }
                Poll::Ready(Some(Chunk::Backlog(b))) => {
                    this.pending.waiting.store(false, Ordering::Relaxed);
                    this.backlog = Some(b);
                }
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => {
                    this.pending.waiting.store(true, Ordering::Relaxed);
                    return Poll::Pending;
                }
            }
        }
    }
}

enum Command {
    Read(ReadRequest, oneshot::Sender<Result<ReadResult, ApiError>>),
    Watch(WatchParams, Watcher),
    Gone(WatcherId),
    /// The conversion webhook answered the review of this uid.
    Called(String, Result<WebhookAnswer, String>),
    /// Its resource is no longer served (or is served anew): the task ends, and its watches.
    Stop,
}

/// A cache task's resource, command channel, whether its cache is ready, its published state,
/// and a signal of each new published state.
#[derive(Clone)]
struct Handle {
    res: Arc<Resource>,
    commands: mpsc::UnboundedSender<Command>,
    ready: Arc<AtomicBool>,
    published: Arc<ArcSwapOption<Snapshot>>,
    changed: Arc<Notify>,
}

type Key = (String, String, String);

/// The handles of every served resource's cache task: a map swapped whole when the catalog
/// changes, read by requests without a lock.
#[derive(Clone)]
pub struct Caches {
    by_resource: Arc<ArcSwap<HashMap<Key, Handle>>>,
    store: Store,
    stall_limit: std::time::Duration,
    /// Calls CRDs' conversion webhooks for the caches of their resources.
    webhooks: WebhookClient,
}

fn key(res: &Resource) -> Key {
    (res.info.group.to_string(), res.info.version.to_string(), res.info.resource.to_string())
}

impl Caches {
    /// Starts a cache task for each resource.
    /// A watcher whose connection takes none of the frames it has to send for `stall_limit`
    /// is closed as slow.
    pub fn start(resources: impl Iterator<Item = (Arc<Resource>, String)>, store: Store, stall_limit: std::time::Duration, webhooks: WebhookClient) -> Caches {
        let caches = Caches { by_resource: Arc::default(), store, stall_limit, webhooks };
        let by_resource = resources.map(|(res, prefix)| (key(&res), caches.spawn(res, prefix))).collect();
        caches.by_resource.store(Arc::new(by_resource));
        caches
    }

    fn spawn(&self, res: Arc<Resource>, prefix: String) -> Handle {
        let (tx, rx) = mpsc::unbounded_channel();
        let handle = Handle { res: res.clone(), commands: tx.clone(), ready: Arc::default(), published: Arc::default(), changed: Arc::default() };
        let task = Task {
            store: self.store.clone(),
            caches: self.clone(),
            me: tx,
            ready: handle.ready.clone(),
            published: handle.published.clone(),
            changed: handle.changed.clone(),
        };
        let cache = WatchCache::new(res, Bytes::from(prefix), DEFAULT_HISTORY);
        tokio::spawn(run(cache, task, rx, self.stall_limit));
        handle
    }

    /// Makes the caches those of `resources` (each with its storage prefix): a cache is kept
    /// for the very same resource, started for a new one. Returns the caches no longer used,
    /// to stop once requests no longer reach them.
    pub fn sync(&self, resources: impl Iterator<Item = (Arc<Resource>, String)>) -> Retired {
        let current = self.by_resource.load_full();
        let mut next = HashMap::new();
        for (res, prefix) in resources {
            let handle = match current.get(&key(&res)) {
                Some(h) if same_objects(&h.res, &res) => h.clone(),
                _ => self.spawn(res.clone(), prefix),
            };
            next.insert(key(&res), handle);
        }
        let unused = current.values().filter(|h| next.get(&key(&h.res)).is_none_or(|n| !Arc::ptr_eq(&n.res, &h.res))).cloned().collect();
        self.by_resource.store(Arc::new(next));
        Retired(unused)
    }

    /// Whether the built-in resources' caches are ready (custom resources' come and go).
    pub fn ready(&self) -> bool {
        self.by_resource.load().values().filter(|h| h.res.info.defined_by.is_none()).all(|h| h.ready.load(Ordering::Relaxed))
    }

    /// The published state of a resource's cache, and the signal of each new one.
    pub fn published(&self, group: &str, version: &str, resource: &str) -> Option<(Option<Arc<Snapshot>>, Arc<Notify>)> {
        let handles = self.by_resource.load();
        let h = handles.get(&(group.to_string(), version.to_string(), resource.to_string()))?;
        Some((h.published.load_full(), h.changed.clone()))
    }

    /// The cache of `res`; a resource no longer served (its CRD went while the request was
    /// under way) is answered as a request arriving now is: the path is not found.
    fn handle(&self, res: &Resource) -> Result<Handle, ApiError> {
        self.by_resource.load().get(&key(res)).cloned().ok_or_else(ApiError::path_not_found)
    }

    pub async fn read(&self, res: &Resource, request: ReadRequest) -> Result<ReadResult, ApiError> {
        let handle = self.handle(res)?;
        if let Some(answer) = handle.published.load().as_deref().and_then(|s| request.answer_from(s)) {
            return Ok(answer);
        }
        let (tx, rx) = oneshot::channel();
        handle.commands.send(Command::Read(request, tx)).map_err(|_| ApiError::internal("cache stopped"))?;
        rx.await.map_err(|_| ApiError::internal("cache stopped"))?
    }

    /// Makes a cache's conversion: the webhook's Service (if it names one) read from the
    /// Services' cache, then the call.
    async fn convert(&self, conversion: &Conversion) -> Result<WebhookAnswer, String> {
        let service = conversion.webhook.client.service().and_then(|svc| {
            let (snapshot, _) = self.published("", "v1", "services")?;
            snapshot?.named(&svc.namespace, &svc.name).map(|o| o.value())
        });
        let call = conversion.call(service.as_ref())?;
        self.webhooks.call(call).await
    }

    /// Registers a watch; its frames come from the returned stream until it ends.
    pub fn watch(&self, res: &Resource, params: WatchParams) -> Result<WatchStream, ApiError> {
        let (tx, rx) = handoff::channel(WATCHER_BUFFER);
        let pending = Arc::new(Pending::default());
        let watcher = Watcher { tx, pending: pending.clone(), stall: None };
        self.handle(res)?.commands.send(Command::Watch(params, watcher)).map_err(|_| ApiError::internal("cache stopped"))?;
        Ok(WatchStream { rx, pending, backlog: None })
    }
}

/// Caches no longer in use.
pub struct Retired(Vec<Handle>);

impl Retired {
    /// Ends their tasks and their watches.
    pub fn stop(self) {
        for h in self.0 {
            let _ = h.commands.send(Command::Stop);
        }
    }
}

/// A watcher as its cache task holds it: where its frames go, and since when (with how many
/// frames taken then) it has had frames to send that its connection does not take.
struct Watcher {
    tx: handoff::Sender<Chunk>,
    pending: Arc<Pending>,
    stall: Option<(u64, tokio::time::Instant)>,
}

impl Watcher {
    /// Whether the connection has taken nothing for `limit` while it had frames to send.
    fn stalled(&mut self, now: tokio::time::Instant, limit: std::time::Duration) -> bool {
        let taken = self.pending.taken.load(Ordering::Relaxed);
        if self.pending.waiting.load(Ordering::Relaxed) {
            self.stall = None;
            return false;
        }
        match self.stall {
            Some((t, since)) if t == taken => now.duration_since(since) >= limit,
            _ => {
                self.stall = Some((taken, now));
                false
            }
        }
    }
}

/// What a cache task holds besides its machine and its commands.
struct Task {
    store: Store,
    /// The caches (the Services' for conversion webhooks).
    caches: Caches,
    /// Its own command channel (watchers that go away say so on it).
    me: mpsc::UnboundedSender<Command>,
    ready: Arc<AtomicBool>,
    published: Arc<ArcSwapOption<Snapshot>>,
    changed: Arc<Notify>,
}

async fn run(mut cache: WatchCache, task: Task, mut commands: mpsc::UnboundedReceiver<Command>, stall_limit: std::time::Duration) {
    let Task { store, caches, me, ready, published, changed } = task;
    // The (readiness, revision) last published: the state is swapped only when it changed.
    let mut shown = (false, 0);
    let (kv_tx, mut kv_rx) = mpsc::unbounded_channel::<KvResult>();
    let mut watch: Option<(u64, mpsc::UnboundedReceiver<WatchResponse>)> = None;
    let mut reads: BTreeMap<ReadId, oneshot::Sender<Result<ReadResult, ApiError>>> = BTreeMap::new();
    let mut watchers: BTreeMap<WatcherId, Watcher> = BTreeMap::new();
    let mut stall_check = tokio::time::interval(stall_limit / 4);
    let mut next_id = 0u64;
    // Publishes the cache's state when it changed: before any frame of it goes out, so that
    // a client that saw an event reads (at resourceVersion 0) what the event made, as kube's
    // watch cache updates its store before it tells watchers.
    let publish = |cache: &WatchCache, shown: &mut (bool, i64)| {
        let state = cache.published();
        let now_shown = state.as_ref().map_or((false, 0), |s| (true, s.revision));
        if now_shown != *shown {
            *shown = now_shown;
            published.store(state.map(Arc::new));
            changed.notify_one();
        }
    };
    loop {
        while let Some(effect) = cache.poll(now()) {
            match effect {
                CacheEffect::Kv(req) => {
                    let (store, tx) = (store.clone(), kv_tx.clone());
                    tokio::spawn(async move {
                        let _ = tx.send(store.call(req).await);
                    });
                }
                CacheEffect::StartWatch(req) => {
                    if let Some((old, _)) = watch.take() {
                        store.cancel_watch(old).await;
                    }
                    watch = Some(store.watch(req).await);
                }
                CacheEffect::RequestProgress => {
                    if let Some((id, _)) = &watch {
                        store.request_progress(*id).await;
                    }
                }
                CacheEffect::Deliver { ids, frame } => {
                    publish(&cache, &mut shown);
                    for id in ids {
                        send(&mut cache, &mut watchers, id, Chunk::One(frame.clone()));
                    }
                }
                CacheEffect::Backlog { id, frames } => {
                    publish(&cache, &mut shown);
                    send(&mut cache, &mut watchers, id, Chunk::Backlog(frames));
                }
                CacheEffect::Close { id } => {
                    watchers.remove(&id);
                }
                CacheEffect::ReadDone { id, result } => {
                    if let Some(tx) = reads.remove(&id) {
                        let _ = tx.send(result);
                    }
                }
                CacheEffect::Convert(conversion) => {
                    let (caches, me) = (caches.clone(), me.clone());
                    tokio::spawn(async move {
                        let answer = caches.convert(&conversion).await;
                        let _ = me.send(Command::Called(conversion.uid, answer));
                    });
                }
            }
        }
        ready.store(cache.is_ready(), Ordering::Relaxed);
        publish(&cache, &mut shown);
        let timer = cache.poll_timeout().map(instant_of);
        tokio::select! {
            cmd = commands.recv() => match cmd {
                Some(Command::Read(request, reply)) => {
                    next_id += 1;
                    let id = ReadId(next_id);
                    reads.insert(id, reply);
                    cache.handle(now(), CacheEvent::Read { id, request });
                }
                Some(Command::Watch(params, frames)) => {
                    next_id += 1;
                    let id = WatcherId(next_id);
                    // When the client goes away, the watcher goes too.
                    let (gone, me) = (frames.tx.closed(), me.clone());
                    tokio::spawn(async move {
                        gone.await;
                        let _ = me.send(Command::Gone(id));
                    });
                    watchers.insert(id, frames);
                    cache.handle(now(), CacheEvent::Register { id, params });
                }
                Some(Command::Called(uid, answer)) => cache.handle(now(), CacheEvent::Called { uid, answer }),
                Some(Command::Gone(id)) => {
                    if watchers.remove(&id).is_some() {
                        cache.handle(now(), CacheEvent::Unregister { id });
                    }
                }
                Some(Command::Stop) | None => {
                    if let Some((old, _)) = watch.take() {
                        store.cancel_watch(old).await;
                    }
                    return;
                }
            },
            Some(result) = kv_rx.recv() => cache.handle(now(), CacheEvent::Kv(result)),
            resp = async { watch.as_mut().expect("guarded by the select condition").1.recv().await }, if watch.is_some() => match resp {
                Some(r) => cache.handle(now(), CacheEvent::Watch(r)),
                None => {
                    watch = None;
                    cache.handle(now(), CacheEvent::WatchFailed);
                }
            },
            _ = async { tokio::time::sleep_until(timer.expect("guarded by the select condition")).await }, if timer.is_some() => {}
            _ = stall_check.tick(), if !watchers.is_empty() => {
                let now = tokio::time::Instant::now();
                let stalled: Vec<WatcherId> = watchers.iter_mut().filter_map(|(id, w)| w.stalled(now, stall_limit).then_some(*id)).collect();
                for id in stalled {
                    cache.handle(crate::clock::now(), CacheEvent::Slow { id });
                }
            }
        }
    }
}

/// Hands a chunk to a watcher's connection; a full buffer (in chunks or in bytes) makes the
/// watcher slow, a closed one gone.
fn send(cache: &mut WatchCache, watchers: &mut BTreeMap<WatcherId, Watcher>, id: WatcherId, chunk: Chunk) {
    let Some(w) = watchers.get(&id) else { return };
    let bytes = match &chunk {
        Chunk::One(frame) => frame.len(),
        Chunk::Backlog(_) => 0,
    };
    if w.pending.bytes.load(Ordering::Relaxed) + bytes > WATCHER_MAX_BYTES {
        return cache.handle(now(), CacheEvent::Slow { id });
    }
    w.pending.bytes.fetch_add(bytes, Ordering::Relaxed);
    match w.tx.try_send(chunk) {
        Ok(()) => {}
        Err(handoff::TrySendError::Full(_)) => {
            w.pending.bytes.fetch_sub(bytes, Ordering::Relaxed);
            cache.handle(now(), CacheEvent::Slow { id });
        }
        Err(handoff::TrySendError::Closed(_)) => {
            watchers.remove(&id);
            cache.handle(now(), CacheEvent::Unregister { id });
        }
    }
}

#[cfg(test)]
mod tests {
    use kapi_core::cache::ReadRequest;
    use kapi_core::resources::{Settings, catalog};

    use super::*;

    /// A request that started while a resource was served and reaches the caches after it no
    /// longer is (its CRD went) is answered as a request arriving then: the path is not found.
    #[tokio::test]
    async fn a_resource_no_longer_served_is_not_found() {
        let dir = std::env::temp_dir().join(format!("kapi-caches-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::Sqlite(crate::store::Sqlite::open(&dir.join("kapi.db")).unwrap());
        let configmaps = catalog(&Settings::default()).get("", "v1", "configmaps").cloned().unwrap();
        let caches = Caches::start(
            [(configmaps.clone(), "/registry/configmaps/".to_string())].into_iter(),
            store,
            std::time::Duration::from_secs(60),
            WebhookClient::default(),
        );
        assert!(caches.read(&configmaps, ReadRequest::Latest { min: None }).await.is_ok());
        let retired = caches.sync(std::iter::empty());
        let err = caches.read(&configmaps, ReadRequest::Latest { min: None }).await.expect_err("not served");
        assert_eq!((err.code, err.message.as_str()), (404, "the server could not find the requested resource"));
        retired.stop();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
